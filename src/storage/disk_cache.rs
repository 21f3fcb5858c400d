//! A persistent cache of remote bytes on local disk (`--disk-cache DIR`,
//! `--disk-cache-size SIZE`): the raw bytes of remote reads (not decoded:
//! smaller, and verifiable), in blocks of [`BLOCK`] bytes, one file each,
//! kept across restarts and shared by every slabfs process of a node that
//! names the same DIR.
//!
//! # What a block is, and why it is never served wrong
//!
//! A block is named by its object's identity: the store (endpoint and
//! URL, without secrets), the object's key, the object's *version* (its
//! ETag: for a Zarr store's object in one form whether a listing or a GET
//! said it, for an object read by ranges as its HEAD said it), and the
//! block's index; the file's name is a SHA-256 of the first three and
//! the index.
//! An object replaced upstream has another ETag, so its old blocks are
//! never asked for again (they age out). Each file carries a header
//! (magic, block index, length, the identity in full, a CRC32C of the
//! data, a CRC32C of the header) that is checked on every read: a file
//! flipped on disk, cut short, or (with vanishing odds) of another object
//! whose name hashes the same, is removed and read again from the store.
//!
//! # Shared, crash-safe, bounded
//!
//! - **Atomic publication**: a block is written to `DIR/tmp/` and renamed
//!   into place, so a reader (this process or another) sees a whole file
//!   or none; two processes writing the same block write the same bytes,
//!   and the last rename wins. A block already there (by another
//!   process, or kept again by a read that found only part of its value)
//!   is not written again, nor counted in the bytes held twice.
//! - **Crash safety**: a process killed while writing leaves at most a
//!   file in `DIR/tmp/`, never under `DIR/v1/`; files in `tmp/` of
//!   processes no longer alive are removed at the next start. A block
//!   published but not yet on disk when the machine lost power fails its
//!   CRC and is read again.
//! - **Size bound, least recently used first**: each process counts what
//!   it writes; when the directory holds more than SIZE it walks it and
//!   removes the files used longest ago (a hit touches the file's time,
//!   at most once a minute) down to 90 % of SIZE. Another process's
//!   reader of a removed file keeps its open file, or misses: eviction
//!   never fails a read.
//! - **Failure stops writes, never reads**: a full disk or a directory
//!   that fails a write turns writes off for a minute (one log line);
//!   reads go to the store as without a cache.
//! - **Starts at once**: the directory is walked (its size counted, stale
//!   `tmp/` files removed) on a thread of its own, started at the first
//!   read; the same thread then writes the blocks reads hand it, so a
//!   read does not wait for the disk (a block waiting to be written is
//!   served from memory). At most [`PENDING_MAX`] bytes wait: beyond,
//!   while the writer is behind, a read writes its blocks itself, so
//!   memory stays bounded and every block read is kept.
//! - **Read once**: the blocks read from disk last, [`RECENT_BYTES`] of
//!   them, are kept in memory, checked: reads of neighbouring parts of one
//!   object (an HDF5 file's chunks, which straddle blocks) do not read and
//!   check a block twice. A whole value larger than that (an Icechunk
//!   manifest, kept as one file: [`DiskCache::put_value`]) is not kept.
//! - **Read ahead**: a block read from disk asks the kernel to start
//!   reading the next [`READ_AHEAD_BLOCKS`] blocks of its object
//!   (`posix_fadvise(WILLNEED)`), as it does by itself within one file: a
//!   run of reads through an object finds its blocks in memory instead of
//!   waiting on the disk for each one.
//!
//! # Notes
//!
//! Besides blocks, a store may leave a *note* under an identity (an empty
//! block, [`DiskCache::note`]): a Zarr store notes each chunk directory
//! it kept blocks of, so that a later mount knows whether listing that
//! directory (to learn the versions its blocks are keyed by) can find
//! anything, and a first read lists nothing ([`DiskCache::noted`]).

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use sha2::{Digest, Sha256};

/// Bytes per block (the last block of an object is shorter): 1 MiB, the
/// size of a typical chunk and of mountpoint-s3's blocks; one file each.
pub const BLOCK: u64 = 1 << 20;

const MAGIC: &[u8; 8] = b"SLABFSB\x01";

/// Bytes of the blocks read from disk last kept in memory (see the module
/// docs): 16 blocks. A file holds a block or a whole value of any size,
/// so the bound is in bytes, not files.
pub const RECENT_BYTES: u64 = 16 * BLOCK;

/// Blocks of an object a read from disk asks the kernel to read ahead
/// (see the module docs): 8 MiB.
pub const READ_AHEAD_BLOCKS: u64 = 8;

/// The block index of a note ([`DiskCache::note`]).
const NOTE: u64 = u64::MAX;

/// How long writes stay off after one failed.
const WRITES_OFF: Duration = Duration::from_secs(60);

/// A hit refreshes its file's time (the LRU clock shared by every
/// process) only when it is older than this: one `utimensat` a minute
/// per block at most.
const TOUCH_EVERY: Duration = Duration::from_secs(60);

/// Where the cache is and how large it may grow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskCacheConfig {
    pub dir: PathBuf,
    pub size: u64,
}

/// The identity of one version of one object (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectId {
    bytes: Vec<u8>,
    hash: String,
}

impl ObjectId {
    /// `store`: the endpoint and store URL; `key`: the object's URL or
    /// key; `version`: its ETag (see the module docs). None of them may
    /// hold a secret: they are written into every block's header.
    pub fn new(store: &str, key: &str, version: &str) -> ObjectId {
        let mut bytes = Vec::with_capacity(store.len() + key.len() + version.len() + 2);
        for (i, part) in [store, key, version].iter().enumerate() {
            if i > 0 {
                bytes.push(0);
            }
            bytes.extend_from_slice(part.as_bytes());
        }
        let hash = Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        ObjectId { bytes, hash }
    }
}

/// What the cache did, for `.slabfs/stats` and the metrics. Each block a
/// read needs through the cache is counted once: a hit or a miss (a whole
/// value kept as one file, [`DiskCache::put_value`], counts as one block).
/// Reads that do not go through the cache (metadata) count as neither.
#[derive(Debug, Default)]
pub struct Counters {
    /// Blocks a read took from the cache: from disk, from the blocks read
    /// last, or from those waiting to be written.
    pub hits: AtomicU64,
    /// Blocks a read fetched from the store: not in the cache, or their
    /// version not known to look them up by.
    pub misses: AtomicU64,
    /// Block files this process removed to stay under the size.
    pub evictions: AtomicU64,
    /// Blocks found damaged (checksum, length, identity) and removed.
    pub corrupt: AtomicU64,
    /// Bytes of the hits.
    pub bytes_read: AtomicU64,
    /// Bytes of the blocks written (notes aside; a block found there
    /// already is not written again).
    pub bytes_written: AtomicU64,
    pub write_errors: AtomicU64,
}

/// [`Counters`] at one moment, with the bytes the directory holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Snapshot {
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
    pub corrupt: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub write_errors: u64,
    /// Bytes under the directory as this process counts them (exact after
    /// its walk; others' writes since are seen at the next eviction).
    pub bytes_held: u64,
    pub size_limit: u64,
    /// Bytes handed to the writer and not written yet.
    pub bytes_pending: u64,
}

/// See the module docs.
#[derive(Debug)]
pub struct DiskCache {
    blocks: PathBuf,
    tmp: PathBuf,
    budget: u64,
    used: AtomicU64,
    counters: Counters,
    /// When writes were turned off (seconds since the epoch; 0: on).
    writes_off_since: AtomicU64,
    /// Names the temporary files of this process apart.
    written: AtomicU64,
    evicting: parking_lot::Mutex<()>,
    scanned: AtomicBool,
    /// Blocks handed to the writer thread and not written yet.
    pending: parking_lot::Mutex<Pending>,
    /// The last blocks read from disk, checked ([`RECENT_BYTES`]).
    recent: parking_lot::Mutex<Recent>,
    /// The object whose blocks were asked for last ([`READ_AHEAD_BLOCKS`])
    /// and the last block asked for.
    ahead: parking_lot::Mutex<(String, u64)>,
    /// Signalled when nothing is pending ([`DiskCache::flush`]).
    drained: parking_lot::Condvar,
    to_writer: parking_lot::Mutex<Option<std::sync::mpsc::Sender<PathBuf>>>,
    /// The writer thread's end, until it starts ([`DiskCache::start`]).
    from_readers: parking_lot::Mutex<Option<std::sync::mpsc::Receiver<PathBuf>>>,
    started: std::sync::Once,
    me: std::sync::Weak<DiskCache>,
    /// Tests hold the writer thread back with it.
    #[cfg(test)]
    writer_paused: AtomicBool,
    /// Tests write a block with it after the first walk, before its
    /// count is taken.
    #[cfg(test)]
    during_scan: parking_lot::Mutex<Option<Waiting>>,
}

#[derive(Debug, Default)]
struct Pending {
    files: std::collections::HashMap<PathBuf, Arc<Waiting>>,
    bytes: u64,
}

/// The blocks read from disk last, at most [`RECENT_BYTES`] of them.
#[derive(Debug)]
struct Recent {
    files: lru::LruCache<PathBuf, Bytes>,
    bytes: u64,
}

impl Default for Recent {
    fn default() -> Recent {
        Recent {
            files: lru::LruCache::unbounded(),
            bytes: 0,
        }
    }
}

impl Recent {
    fn get(&mut self, path: &Path) -> Option<&Bytes> {
        self.files.get(path)
    }

    /// Keep `data`, read from `path`, pushing out the files read longest
    /// ago down to the bound; not kept if larger than the bound itself.
    fn put(&mut self, path: &Path, data: Bytes) {
        let n = data.len() as u64;
        if n > RECENT_BYTES {
            return;
        }
        if let Some(old) = self.files.put(path.to_path_buf(), data) {
            self.bytes -= old.len() as u64;
        }
        self.bytes += n;
        while self.bytes > RECENT_BYTES {
            let Some((_, old)) = self.files.pop_lru() else {
                break;
            };
            self.bytes -= old.len() as u64;
        }
    }
}

/// A block waiting for the writer thread.
#[derive(Debug)]
struct Waiting {
    id: ObjectId,
    block: u64,
    data: Bytes,
}

/// The most bytes waiting for the writer thread: beyond, the reads write
/// their blocks themselves (a disk slower than the network must not grow
/// memory, and a busy writer must not lose blocks).
pub const PENDING_MAX: u64 = 64 << 20;

impl DiskCache {
    /// The cache in `cfg.dir` (created if need be), its walk started on a
    /// thread of its own.
    pub fn open(cfg: &DiskCacheConfig) -> io::Result<Arc<DiskCache>> {
        let blocks = cfg.dir.join("v1");
        let tmp = cfg.dir.join("tmp");
        fs::create_dir_all(&blocks)?;
        fs::create_dir_all(&tmp)?;
        let (tx, rx) = std::sync::mpsc::channel::<PathBuf>();
        Ok(Arc::new_cyclic(|me| DiskCache {
            blocks,
            tmp,
            budget: cfg.size,
            used: AtomicU64::new(0),
            counters: Counters::default(),
            writes_off_since: AtomicU64::new(0),
            written: AtomicU64::new(0),
            evicting: parking_lot::Mutex::new(()),
            scanned: AtomicBool::new(false),
            pending: Default::default(),
            recent: Default::default(),
            ahead: Default::default(),
            drained: Default::default(),
            to_writer: parking_lot::Mutex::new(Some(tx)),
            from_readers: parking_lot::Mutex::new(Some(rx)),
            started: std::sync::Once::new(),
            me: me.clone(),
            #[cfg(test)]
            writer_paused: AtomicBool::new(false),
            #[cfg(test)]
            during_scan: Default::default(),
        }))
    }

    /// Start the thread that walks the directory, then writes what reads
    /// hand it; at the first use, so that it is created after the daemon
    /// has blocked its signals (a thread created before would take a
    /// SIGTERM meant for the mount's clean exit, and die of it). It holds
    /// the cache weakly, and ends with it.
    fn start(&self) {
        self.started.call_once(|| {
            let (weak, rx) = (self.me.clone(), self.from_readers.lock().take());
            let Some(rx) = rx else { return };
            let spawned = std::thread::Builder::new()
                .name("slabfs-disk-cache".into())
                .spawn(move || {
                    if let Some(c) = weak.upgrade() {
                        c.scan();
                    }
                    while let Ok(path) = rx.recv() {
                        #[cfg(test)]
                        while weak
                            .upgrade()
                            .is_some_and(|c| c.writer_paused.load(Relaxed))
                        {
                            std::thread::sleep(Duration::from_millis(1));
                        }
                        let Some(c) = weak.upgrade() else { break };
                        c.write(&path);
                    }
                });
            if let Err(e) = spawned {
                log::warn!("disk cache: no writer thread ({e}); nothing is kept");
                self.to_writer.lock().take();
            }
        });
    }

    /// The counters now.
    pub fn snapshot(&self) -> Snapshot {
        let c = &self.counters;
        Snapshot {
            hits: c.hits.load(Relaxed),
            misses: c.misses.load(Relaxed),
            evictions: c.evictions.load(Relaxed),
            corrupt: c.corrupt.load(Relaxed),
            bytes_read: c.bytes_read.load(Relaxed),
            bytes_written: c.bytes_written.load(Relaxed),
            write_errors: c.write_errors.load(Relaxed),
            bytes_held: self.used.load(Relaxed),
            size_limit: self.budget,
            bytes_pending: self.pending.lock().bytes,
        }
    }

    /// Whether the first walk is done (tests wait for it).
    pub fn scanned(&self) -> bool {
        self.scanned.load(Relaxed)
    }

    fn path(&self, id: &ObjectId, block: u64) -> PathBuf {
        self.blocks
            .join(&id.hash[..2])
            .join(format!("{}-{block}", &id.hash[2..]))
    }

    /// Block `block` of the object `id`, which must hold `len` bytes,
    /// counted as a hit; `None` when it is not here or not whole (counted
    /// when the read fetches it: [`DiskCache::missed`]).
    pub fn get(&self, id: &ObjectId, block: u64, len: usize) -> Option<Bytes> {
        let found = self.lookup(id, block, len);
        if let Some(data) = &found {
            self.hit(1, data.len() as u64);
        }
        found
    }

    /// [`DiskCache::get`] without counting it: for a read that serves the
    /// block only if it finds others too ([`DiskCache::hit`] then).
    pub fn lookup(&self, id: &ObjectId, block: u64, len: usize) -> Option<Bytes> {
        self.find(&self.path(id, block), id, block, Some(len))
    }

    /// Count `blocks` blocks of `bytes` bytes served from the cache.
    pub fn hit(&self, blocks: u64, bytes: u64) {
        self.counters.hits.fetch_add(blocks, Relaxed);
        self.counters.bytes_read.fetch_add(bytes, Relaxed);
    }

    /// Count `blocks` blocks a read fetched from the store (not here, or
    /// their version not known to look them up by).
    pub fn missed(&self, blocks: u64) {
        self.counters.misses.fetch_add(blocks, Relaxed);
    }

    /// A whole value kept by [`DiskCache::put_value`] (of any length: one
    /// file, not split in blocks), not counted; `None` when it is not here.
    pub fn lookup_value(&self, id: &ObjectId) -> Option<Bytes> {
        self.find(&self.path(id, 0), id, 0, None)
    }

    /// Keep `data`, the whole value of the object `id`, as one file (a
    /// value that never changes: [`crate::storage::Store::get_immutable`]).
    pub fn put_value(&self, id: &ObjectId, data: Bytes) {
        self.put(id, 0, data);
    }

    /// [`DiskCache::get`] without counting it; of any length when `len`
    /// is `None`.
    fn find(&self, path: &Path, id: &ObjectId, block: u64, len: Option<usize>) -> Option<Bytes> {
        self.start();
        // Not written yet: served from memory.
        let waiting = self.pending.lock().files.get(path).cloned();
        if let Some(w) = waiting
            && w.id == *id
            && w.block == block
            && len.is_none_or(|n| w.data.len() == n)
        {
            return Some(w.data.clone());
        }
        if let Some(data) = self.recent.lock().get(path)
            && len.is_none_or(|n| data.len() == n)
        {
            return Some(data.clone());
        }
        let file = match fs::read(path) {
            Ok(f) => f,
            Err(e) => {
                if e.kind() != io::ErrorKind::NotFound {
                    log::debug!("disk cache: {}: {e}", path.display());
                }
                return None;
            }
        };
        match decode(&file, id, block, len) {
            Ok(range) => {
                // A whole value is one file: nothing follows it.
                if len.is_some() {
                    self.read_ahead(id, block);
                }
                touch(path);
                // A view of the file read, not a copy.
                let data = Bytes::from(file).slice(range);
                self.recent.lock().put(path, data.clone());
                Some(data)
            }
            Err(why) => {
                self.counters.corrupt.fetch_add(1, Relaxed);
                log::warn!(
                    "disk cache: {} is damaged ({why}); removed, read again from the store",
                    path.display()
                );
                if fs::remove_file(path).is_ok() {
                    let n = file.len() as u64;
                    let _ = self
                        .used
                        .fetch_update(Relaxed, Relaxed, |u| Some(u.saturating_sub(n)));
                }
                None
            }
        }
    }

    /// Ask the kernel to read the blocks of `id` after `block` that the
    /// last call did not ask for, up to [`READ_AHEAD_BLOCKS`] ahead; stops
    /// at the first one not here. Returns how many it asked for.
    fn read_ahead(&self, id: &ObjectId, block: u64) -> u64 {
        if block == NOTE {
            return 0;
        }
        let to = block.saturating_add(READ_AHEAD_BLOCKS);
        let from = {
            let mut ahead = self.ahead.lock();
            let from = if ahead.0 == id.hash && (block..to).contains(&ahead.1) {
                ahead.1 + 1
            } else {
                block + 1
            };
            if from > to {
                return 0;
            }
            if ahead.0 != id.hash {
                ahead.0.clone_from(&id.hash);
            }
            ahead.1 = to;
            from
        };
        let mut asked = 0;
        for b in from..=to {
            let Ok(file) = fs::File::open(self.path(id, b)) else {
                break;
            };
            use std::os::fd::AsRawFd;
            // SAFETY: a hint about an open descriptor's pages; no memory
            // is touched.
            unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_WILLNEED) };
            asked += 1;
        }
        asked
    }

    /// Leave a note under `id` (an empty block, not counted as data):
    /// see the module docs.
    pub fn note(&self, id: &ObjectId) {
        self.put(id, NOTE, Bytes::new());
    }

    /// Whether a note was left under `id` (by this process or another, now
    /// or before a restart).
    pub fn noted(&self, id: &ObjectId) -> bool {
        self.find(&self.path(id, NOTE), id, NOTE, Some(0)).is_some()
    }

    /// Keep `data`, block `block` of the object `id`: handed to the
    /// writer thread (the read that fetched it does not wait for the
    /// disk), and served from memory until written. While [`PENDING_MAX`]
    /// bytes wait already (the writer is behind: a busy machine, a slow
    /// disk), the block is written here, on the caller's thread: memory
    /// stays bounded and what is read is kept. Never fails: a write that
    /// fails turns writes off for a while ([`WRITES_OFF`]).
    pub fn put(&self, id: &ObjectId, block: u64, data: Bytes) {
        self.start();
        let off = self.writes_off_since.load(Relaxed);
        if off != 0 && now_secs().saturating_sub(off) < WRITES_OFF.as_secs() {
            return;
        }
        let path = self.path(id, block);
        let n = data.len() as u64;
        let waiting = Arc::new(Waiting {
            id: id.clone(),
            block,
            data,
        });
        {
            let mut pending = self.pending.lock();
            if pending.files.contains_key(&path) {
                return;
            }
            if pending.bytes + n > PENDING_MAX {
                drop(pending);
                self.publish(&path, &waiting);
                return;
            }
            pending.bytes += n;
            pending.files.insert(path.clone(), waiting);
        }
        if self
            .to_writer
            .lock()
            .as_ref()
            .is_none_or(|tx| tx.send(path.clone()).is_err())
        {
            self.unpend(&path);
        }
    }

    /// Forget the pending file at `path`.
    fn unpend(&self, path: &Path) {
        let mut pending = self.pending.lock();
        if let Some(w) = pending.files.remove(path) {
            pending.bytes -= w.data.len() as u64;
        }
        if pending.files.is_empty() {
            self.drained.notify_all();
        }
    }

    /// Wait until every block handed to [`DiskCache::put`] is written (or
    /// given up).
    pub fn flush(&self) {
        let mut pending = self.pending.lock();
        while !pending.files.is_empty() {
            self.drained.wait(&mut pending);
        }
    }

    /// [`DiskCache::flush`], waiting at most `timeout`: whether every
    /// block is written.
    pub fn flush_for(&self, timeout: Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        let mut pending = self.pending.lock();
        while !pending.files.is_empty() {
            if self.drained.wait_until(&mut pending, deadline).timed_out() {
                return pending.files.is_empty();
            }
        }
        true
    }

    /// The writer thread: publish each pending file (write to `tmp/`,
    /// rename into place), account for it, evict when over the limit.
    fn write(&self, path: &Path) {
        let waiting = self.pending.lock().files.get(path).cloned();
        if let Some(w) = waiting {
            self.publish(path, &w);
        }
        // Pending until accounted for (and evicted if need be): what
        // [`DiskCache::flush`] waits for.
        self.unpend(path);
    }

    fn publish(&self, path: &Path, w: &Waiting) {
        // There already (kept by another process, or by a read that found
        // other blocks of its value missing): the same identity, the same
        // bytes; neither written nor counted again (it was counted twice
        // in the bytes held). A damaged one is found at its next read.
        if fs::symlink_metadata(path).is_ok() {
            touch(path);
            return;
        }
        let n = self.written.fetch_add(1, Relaxed);
        let tmp = self.tmp.join(format!("{}-{n}", std::process::id()));
        // The header here, off the read's path; the data as the read
        // fetched it, not copied.
        let header = header(&w.id, w.block, &w.data);
        let written = (|| -> io::Result<()> {
            let mut f = fs::File::create(&tmp)?;
            f.write_all(&header)?;
            f.write_all(&w.data)?;
            drop(f);
            // The directory made only when it is missing (once).
            match fs::rename(&tmp, path) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    if let Some(dir) = path.parent() {
                        fs::create_dir_all(dir)?;
                    }
                    fs::rename(&tmp, path)
                }
                done => done,
            }
        })();
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            self.counters.write_errors.fetch_add(1, Relaxed);
            // Logged once per turn off: writes are not tried meanwhile.
            self.writes_off_since.store(now_secs().max(1), Relaxed);
            log::warn!(
                "disk cache: cannot write {} ({e}); writes off for {} s, reads go on",
                path.display(),
                WRITES_OFF.as_secs()
            );
            return;
        }
        self.writes_off_since.store(0, Relaxed);
        if w.block != NOTE {
            self.counters
                .bytes_written
                .fetch_add(w.data.len() as u64, Relaxed);
        }
        let len = (header.len() + w.data.len()) as u64;
        let used = self.used.fetch_add(len, Relaxed) + len;
        if used > self.budget && self.scanned() {
            self.evict();
        }
    }

    /// The first walk: count what the directory holds, remove what dead
    /// processes left in `tmp/`, then evict if over the limit.
    fn scan(&self) {
        let mut stale = 0;
        if let Ok(dir) = fs::read_dir(&self.tmp) {
            for e in dir.flatten() {
                let name = e.file_name();
                let pid = name
                    .to_str()
                    .and_then(|n| n.split('-').next())
                    .and_then(|p| p.parse::<i32>().ok());
                // SAFETY: kill(pid, 0) sends no signal; it only asks
                // whether the process exists.
                let alive = pid.is_some_and(|p| p > 0 && unsafe { libc::kill(p, 0) } == 0);
                if !alive && fs::remove_file(e.path()).is_ok() {
                    stale += 1;
                }
            }
        }
        // Blocks written during the walk were counted by their writes, and
        // the walk may or may not have seen them: counted on top of what
        // it found (over rather than under the truth, so the bound holds;
        // the next eviction's walk counts exactly).
        let before = self.used.load(Relaxed);
        let (files, found) = self.walk();
        #[cfg(test)]
        if let Some(w) = self.during_scan.lock().take() {
            self.publish(&self.path(&w.id, w.block), &w);
        }
        let total = found
            + self
                .used
                .fetch_update(Relaxed, Relaxed, |u| Some(u.saturating_sub(before) + found))
                .unwrap_or(before)
                .saturating_sub(before);
        self.scanned.store(true, Relaxed);
        log::info!(
            "disk cache {}: {} blocks, {total} bytes (limit {}); {stale} partial files of \
             earlier processes removed",
            self.blocks.display(),
            files.len(),
            self.budget
        );
        if total > self.budget {
            self.evict();
        }
    }

    /// Every block file: (time last used, bytes, path), and their total.
    fn walk(&self) -> (Vec<(i64, u64, PathBuf)>, u64) {
        let mut files = Vec::new();
        let mut total = 0;
        for sub in fs::read_dir(&self.blocks).into_iter().flatten().flatten() {
            for f in fs::read_dir(sub.path()).into_iter().flatten().flatten() {
                if let Ok(m) = f.metadata()
                    && m.is_file()
                {
                    total += m.len();
                    files.push((m.mtime(), m.len(), f.path()));
                }
            }
        }
        (files, total)
    }

    /// Remove the blocks used longest ago until the directory holds 90 %
    /// of the limit. One thread at a time; the others go on.
    fn evict(&self) {
        let Some(_one) = self.evicting.try_lock() else {
            return;
        };
        let (mut files, mut total) = self.walk();
        let target = self.budget / 10 * 9;
        if total > self.budget {
            files.sort_unstable();
            let mut removed = 0;
            for (_, len, path) in files {
                if total <= target {
                    break;
                }
                // Gone already (another process evicted it): counted out
                // of the bytes held, not as this process's eviction.
                if fs::remove_file(&path).is_ok() {
                    removed += 1;
                }
                total = total.saturating_sub(len);
            }
            self.counters.evictions.fetch_add(removed, Relaxed);
            log::debug!("disk cache: {removed} blocks evicted, {total} bytes held");
        }
        self.used.store(total, Relaxed);
    }
}

/// What reads handed the writer and it has not written yet is written as
/// the cache goes (a command that ends keeps what it read; the writer
/// thread holds the cache only while it writes one block).
impl Drop for DiskCache {
    fn drop(&mut self) {
        let waiting: Vec<(PathBuf, Arc<Waiting>)> = self.pending.lock().files.drain().collect();
        for (path, w) in waiting {
            self.publish(&path, &w);
        }
    }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Set the file's time to now if it is older than [`TOUCH_EVERY`].
fn touch(path: &Path) {
    let old = fs::metadata(path)
        .ok()
        .and_then(|m| m.modified().ok())
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age >= TOUCH_EVERY);
    if old && let Ok(f) = fs::File::options().write(true).open(path) {
        let _ = f.set_modified(SystemTime::now());
    }
}

/// A block file's header; the data follows it (see the module docs).
fn header(id: &ObjectId, block: u64, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + id.bytes.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&block.to_le_bytes());
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(data).to_le_bytes());
    out.extend_from_slice(&(id.bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(&id.bytes);
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Where the data of `file` is, if it is whole and is block `block` of
/// `id`, `len` bytes long (any length its header says if `None`); else
/// why not.
fn decode(
    file: &[u8],
    id: &ObjectId,
    block: u64,
    len: Option<usize>,
) -> std::result::Result<std::ops::Range<usize>, &'static str> {
    let u32_at = |at: usize| -> Option<u32> {
        Some(u32::from_le_bytes(file.get(at..at + 4)?.try_into().ok()?))
    };
    if file.get(..8) != Some(MAGIC.as_slice()) {
        return Err("not a block file");
    }
    let got_block = file
        .get(8..16)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        .ok_or("cut short")?;
    let data_len = u32_at(16).ok_or("cut short")? as usize;
    let data_crc = u32_at(20).ok_or("cut short")?;
    let id_len = u32_at(24).ok_or("cut short")? as usize;
    let header_end = 28usize.checked_add(id_len).ok_or("bad header")?;
    let header_crc = u32_at(header_end).ok_or("cut short")?;
    if crc32c::crc32c(&file[..header_end]) != header_crc {
        return Err("header checksum");
    }
    if &file[28..header_end] != id.bytes.as_slice() || got_block != block {
        return Err("another object's block");
    }
    let data = header_end + 4;
    let len = len.unwrap_or(data_len);
    if data_len != len || file.len() != data + len {
        return Err("wrong length");
    }
    if crc32c::crc32c(&file[data..]) != data_crc {
        return Err("data checksum");
    }
    Ok(data..file.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(dir: &Path, size: u64) -> Arc<DiskCache> {
        let c = DiskCache::open(&DiskCacheConfig {
            dir: dir.to_path_buf(),
            size,
        })
        .unwrap();
        c.start();
        while !c.scanned() {
            std::thread::sleep(Duration::from_millis(5));
        }
        c
    }

    #[test]
    fn a_block_reads_back_only_as_itself() {
        let dir = tempfile::tempdir().unwrap();
        let c = cache(dir.path(), 1 << 30);
        let id = ObjectId::new("s3://b", "s3://b/k", "\"e1\"");
        assert_eq!(c.get(&id, 0, 3), None);
        c.put(&id, 0, Bytes::from_static(b"abc"));
        // At once (from memory or disk), and after it is written.
        assert_eq!(c.get(&id, 0, 3).as_deref(), Some(&b"abc"[..]));
        c.flush();
        assert_eq!(c.get(&id, 0, 3).as_deref(), Some(&b"abc"[..]));
        // Another version, block, length: not this block.
        assert_eq!(
            c.get(&ObjectId::new("s3://b", "s3://b/k", "\"e2\""), 0, 3),
            None
        );
        assert_eq!(c.get(&id, 1, 3), None);
        assert_eq!(c.get(&id, 0, 4), None, "a wrong length is damage");
        let s = c.snapshot();
        assert_eq!((s.hits, s.corrupt), (2, 1));
    }

    /// Regression: the first walk's count replaced the bytes held, and
    /// blocks written while it walked (after it had passed their
    /// directory) were not counted until the next eviction.
    #[test]
    fn blocks_written_during_the_first_walk_are_counted() {
        let dir = tempfile::tempdir().unwrap();
        let id = ObjectId::new("s3://b", "s3://b/k", "e");
        {
            let c = cache(dir.path(), 1 << 30);
            c.put(&id, 0, Bytes::from(vec![7u8; 1000]));
            c.flush();
        }
        let c = DiskCache::open(&DiskCacheConfig {
            dir: dir.path().to_path_buf(),
            size: 1 << 30,
        })
        .unwrap();
        *c.during_scan.lock() = Some(Waiting {
            id,
            block: 1,
            data: Bytes::from(vec![8u8; 1000]),
        });
        c.start();
        while !c.scanned() {
            std::thread::sleep(Duration::from_millis(5));
        }
        let on_disk = c.walk().1;
        assert!(on_disk > 2000, "{on_disk}");
        assert_eq!(c.snapshot().bytes_held, on_disk);
    }

    #[test]
    fn a_block_read_is_read_from_disk_once() {
        let dir = tempfile::tempdir().unwrap();
        let c = cache(dir.path(), 1 << 30);
        let id = ObjectId::new("s3://b", "s3://b/k", "e");
        c.put(&id, 0, Bytes::from_static(b"abc"));
        c.flush();
        assert_eq!(c.get(&id, 0, 3).as_deref(), Some(&b"abc"[..]));
        // The file gone (evicted by another process): the block read a
        // moment ago is still served, from memory.
        fs::remove_file(c.path(&id, 0)).unwrap();
        assert_eq!(c.get(&id, 0, 3).as_deref(), Some(&b"abc"[..]));
        // Not as another length.
        assert_eq!(c.get(&id, 0, 2), None);
    }

    #[test]
    fn a_run_of_reads_from_disk_asks_for_the_next_blocks_once() {
        let dir = tempfile::tempdir().unwrap();
        let c = cache(dir.path(), 1 << 30);
        let id = ObjectId::new("s3://b", "s3://b/k", "e");
        let other = ObjectId::new("s3://b", "s3://b/other", "e");
        for b in 0..12 {
            c.put(&id, b, Bytes::from_static(b"abc"));
        }
        c.put(&other, 0, Bytes::from_static(b"abc"));
        c.put(&other, 1, Bytes::from_static(b"abc"));
        c.flush();
        let asked = |b: u64| c.read_ahead(&id, b);
        // The first read asks for the next 8; each next one for one more,
        // until the object's blocks here end.
        assert_eq!(asked(0), READ_AHEAD_BLOCKS);
        assert_eq!(asked(1), 1);
        assert_eq!(asked(2), 1);
        assert_eq!(asked(3), 1);
        assert_eq!(asked(4), 0, "block 11 is the last here");
        // A read elsewhere in the object starts a run of its own.
        assert_eq!(asked(2), READ_AHEAD_BLOCKS);
        // Another object's read, then this one's again: asked anew.
        assert_eq!(c.read_ahead(&other, 0), 1);
        assert_eq!(asked(3), READ_AHEAD_BLOCKS);
        // A read from disk asks: block 0 of `id` read (not from memory).
        *c.recent.lock() = Recent::default();
        assert_eq!(c.get(&id, 0, 3).as_deref(), Some(&b"abc"[..]));
        assert_eq!(asked(1), 1, "blocks 1-8 were asked for by the read of 0");
    }

    #[test]
    fn a_whole_value_is_one_file_of_any_length() {
        let dir = tempfile::tempdir().unwrap();
        let c = cache(dir.path(), 1 << 30);
        let id = ObjectId::new("s3://b", "s3://b/chunks/X", "immutable");
        let value: Vec<u8> = (0..3_000_000u32).map(|i| i as u8).collect();
        assert_eq!(c.lookup_value(&id), None);
        c.put_value(&id, Bytes::from(value.clone()));
        c.flush();
        assert_eq!(c.lookup_value(&id).as_deref(), Some(&value[..]));
        let other = ObjectId::new("s3://b", "s3://b/chunks/X", "immutable 0+10");
        assert_eq!(c.lookup_value(&other), None);
        // Cut short on disk: damage, not a shorter value.
        let path = c.path(&id, 0);
        let bytes = fs::read(&path).unwrap();
        fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
        *c.recent.lock() = Recent::default();
        assert_eq!(c.lookup_value(&id), None);
        assert_eq!(c.snapshot().corrupt, 1);
    }

    /// Regression (review of the disk cache): the blocks read last were
    /// kept by count (16), and a whole value of any size is one (an
    /// Icechunk manifest of up to 1 GiB): 16 of them held far more than
    /// the 16 MiB the docs promise.
    #[test]
    fn what_is_kept_of_the_blocks_read_last_is_bounded_in_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let c = cache(dir.path(), 1 << 30);
        let held = |c: &DiskCache| -> u64 {
            c.recent
                .lock()
                .files
                .iter()
                .map(|(_, d)| d.len() as u64)
                .sum()
        };
        let id = |i: u32| ObjectId::new("s3://b", &format!("s3://b/manifests/M{i}"), "immutable");
        let big = RECENT_BYTES as usize / 2 + 1;
        for i in 0..3 {
            c.put_value(&id(i), Bytes::from(vec![i as u8; big]));
        }
        let huge = Bytes::from(vec![9u8; RECENT_BYTES as usize + 1]);
        c.put_value(&id(3), huge.clone());
        c.flush();
        for i in 0..3 {
            assert_eq!(c.lookup_value(&id(i)).unwrap().len(), big);
            assert!(held(&c) <= RECENT_BYTES, "{} bytes held", held(&c));
        }
        assert_eq!(c.lookup_value(&id(3)), Some(huge));
        assert!(held(&c) <= RECENT_BYTES, "{} bytes held", held(&c));
        // The last one read is kept (served again with its file gone).
        fs::remove_file(c.path(&id(2), 0)).unwrap();
        assert_eq!(c.lookup_value(&id(2)).unwrap().len(), big);
    }

    #[test]
    fn blocks_beyond_the_pending_bound_are_written_by_the_reader() {
        let dir = tempfile::tempdir().unwrap();
        let c = cache(dir.path(), 1 << 30);
        c.writer_paused.store(true, Relaxed);
        let id = ObjectId::new("s3://b", "s3://b/k", "e");
        let blocks = (PENDING_MAX / BLOCK) as usize + 8;
        for b in 0..blocks {
            c.put(&id, b as u64, Bytes::from(vec![b as u8; BLOCK as usize]));
        }
        // The writer held back: memory stays bounded, the blocks beyond
        // the bound are on disk already.
        assert!(c.snapshot().bytes_pending <= PENDING_MAX);
        let on_disk = (0..blocks)
            .filter(|b| c.path(&id, *b as u64).exists())
            .count();
        assert_eq!(on_disk, 8);
        c.writer_paused.store(false, Relaxed);
        c.flush();
        // Every block kept, read back by another process.
        let other = cache(dir.path(), 1 << 30);
        for b in 0..blocks {
            let got = other.get(&id, b as u64, BLOCK as usize).expect("kept");
            assert!(got.iter().all(|&x| x == b as u8));
        }
    }

    #[test]
    fn pending_blocks_are_written_when_the_cache_goes() {
        let dir = tempfile::tempdir().unwrap();
        let c = cache(dir.path(), 1 << 30);
        c.writer_paused.store(true, Relaxed);
        let id = ObjectId::new("s3://b", "s3://b/k", "e");
        for b in 0..4 {
            c.put(&id, b, Bytes::from(vec![b as u8; 1000]));
        }
        assert!(
            !c.flush_for(Duration::from_millis(50)),
            "the writer is held"
        );
        let paths: Vec<PathBuf> = (0..4).map(|b| c.path(&id, b)).collect();
        drop(c);
        // (Dropped here, or by the writer thread if it held the cache at
        // that moment: written either way.)
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !paths.iter().all(|p| p.exists()) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        let other = cache(dir.path(), 1 << 30);
        for b in 0..4 {
            assert_eq!(
                other.get(&id, b, 1000).as_deref(),
                Some(&[b as u8; 1000][..])
            );
        }
    }

    #[test]
    fn a_note_is_seen_by_the_next_process() {
        let dir = tempfile::tempdir().unwrap();
        let id = ObjectId::new("s3://b", "s3://b/a/c/", "listed");
        let c = cache(dir.path(), 1 << 30);
        assert!(!c.noted(&id));
        c.note(&id);
        c.flush();
        drop(c);
        let c = cache(dir.path(), 1 << 30);
        assert!(c.noted(&id));
        assert!(!c.noted(&ObjectId::new("s3://b", "s3://b/x/c/", "listed")));
        let s = c.snapshot();
        assert_eq!(
            (s.hits, s.misses, s.bytes_read),
            (0, 0, 0),
            "notes are not data"
        );
    }

    #[test]
    fn a_flipped_byte_is_detected_and_the_block_removed() {
        let dir = tempfile::tempdir().unwrap();
        let c = cache(dir.path(), 1 << 30);
        let id = ObjectId::new("s3://b", "s3://b/k", "e");
        c.put(&id, 2, Bytes::from(vec![7u8; 1000]));
        c.flush();
        let path = c.path(&id, 2);
        let mut bytes = fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        fs::write(&path, bytes).unwrap();
        assert_eq!(c.get(&id, 2, 1000), None);
        assert!(!path.exists());
        assert_eq!(c.snapshot().corrupt, 1);
    }

    #[test]
    fn the_size_bound_holds_oldest_out_first() {
        let dir = tempfile::tempdir().unwrap();
        let c = cache(dir.path(), 10_000);
        let id = |i: u32| ObjectId::new("s", &format!("k{i}"), "e");
        for i in 0..30 {
            c.put(&id(i), 0, Bytes::from(vec![1u8; 1000]));
            c.flush();
            // Older first: distinct times for the LRU order.
            let t = SystemTime::now() - Duration::from_secs(1000 - u64::from(i));
            let f = fs::File::options()
                .write(true)
                .open(c.path(&id(i), 0))
                .unwrap();
            f.set_modified(t).unwrap();
        }
        let (_, held) = c.walk();
        assert!(held <= 10_000, "{held}");
        assert!(c.get(&id(29), 0, 1000).is_some(), "the newest stays");
        assert!(c.get(&id(0), 0, 1000).is_none(), "the oldest went");
        assert!(c.snapshot().evictions > 0);
    }

    #[test]
    fn partial_files_of_dead_processes_are_removed_at_start() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("tmp")).unwrap();
        // A pid that cannot be alive (above the kernel's pid_max).
        fs::write(dir.path().join("tmp/2147483640-0"), b"partial").unwrap();
        let mine = dir.path().join(format!("tmp/{}-99", std::process::id()));
        fs::write(&mine, b"in flight").unwrap();
        let _c = cache(dir.path(), 1 << 20);
        assert!(!dir.path().join("tmp/2147483640-0").exists());
        assert!(mine.exists(), "a live process's file is left alone");
    }

    #[test]
    fn a_directory_that_fails_stops_writes_not_reads() {
        let dir = tempfile::tempdir().unwrap();
        let c = cache(dir.path(), 1 << 20);
        let id = ObjectId::new("s", "k", "e");
        c.put(&id, 0, Bytes::from_static(b"kept"));
        c.flush();
        // The temporary directory gone: writes fail, reads go on.
        fs::remove_dir_all(&c.tmp).unwrap();
        c.put(&id, 1, Bytes::from_static(b"lost"));
        c.flush();
        assert_eq!(c.snapshot().write_errors, 1);
        assert_eq!(c.get(&id, 0, 4).as_deref(), Some(&b"kept"[..]));
        assert_eq!(c.get(&id, 1, 4), None);
        // Off for a while: not even tried.
        fs::create_dir_all(&c.tmp).unwrap();
        c.put(&id, 1, Bytes::from_static(b"lost"));
        c.flush();
        assert_eq!(c.get(&id, 1, 4), None);
        assert_eq!(c.snapshot().write_errors, 1);
    }
}
