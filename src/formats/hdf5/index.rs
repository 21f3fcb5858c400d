//! The file's indexes: v1 B-trees (of groups and of chunks), symbol table
//! nodes, local and global heaps, and the chunk indexes of layout version
//! 4 (single chunk, implicit, fixed array, extensible array, v2 B-tree).
//!
//! # Chunk indexes: lazy and compact
//!
//! Each chunk index becomes a [`Chunks`]: for every stored chunk, its
//! linear index over the chunk grid → file address, stored size and
//! filter mask. Two choices keep a directory of large netCDF-4 files
//! cheap to mount:
//!
//! - **Lazy**: a dataset's index is walked on its first chunk read
//!   ([`LazyChunks`]), not when the file is loaded. Loading a file reads
//!   its object headers only, however many chunks its variables have; a
//!   variable never read never costs its index. The walk runs once (a
//!   lock serialises first readers); a walk that fails is not kept, so the
//!   next read tries again, and its error fails that read only (EIO).
//! - **Compact**: the entries are a sorted boxed slice of 24-byte
//!   [`Entry`]s (linear index u64, address u64, size u32, mask u32),
//!   found by binary search: 24 B per stored chunk, where a
//!   `HashMap<Vec<u64>, _>` cost about 100 B plus a heap allocation per
//!   chunk. HDF5 caps a chunk at 4 GiB, so u32 sizes are enough (a larger
//!   one is corruption). Implicit indexes store nothing: the address of
//!   chunk `k` is arithmetic.
//!
//! Measured (scripts/bench_hdf5.py, docs/perf/hdf5.md) on a netCDF-4
//! variable of 10^6 chunks: loading the file went from 17-27 s (debug build) and
//! ~180 B per chunk (the whole index walked into a hash map) to a few
//! milliseconds and nothing; the first read walks it (0.6 s) into 24 B
//! per chunk.
//!
//! Walks are bounded: a node is visited once, the depth is limited, a
//! chunk outside the grid is ignored (a dataset shrunk after writing
//! keeps such chunks) and a count beyond the grid's is corruption.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, OnceLock, PoisonError};

use super::error::{H5Result, Hdf5Error};
use super::io::{H5File, check_checksum};
use super::meta::{ChunkIndex, LinkTarget};

/// B-trees deeper than this are corrupt (a v1 B-tree of K=32 this deep
/// would index more chunks than any grid has).
const MAX_DEPTH: usize = 64;

/// Where one stored chunk is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkLoc {
    pub addr: u64,
    pub size: u64,
    /// Bit `i` set: filter `i` of the pipeline was not applied.
    pub mask: u32,
}

/// One stored chunk in a [`Chunks::Table`]: 24 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// Row-major index of the chunk in the current chunk grid.
    linear: u64,
    addr: u64,
    size: u32,
    mask: u32,
}

impl Entry {
    /// Row-major index of the chunk in the current chunk grid.
    pub fn linear(&self) -> u64 {
        self.linear
    }
}

// The 24 bytes per chunk the module doc promises.
const _: () = assert!(std::mem::size_of::<Entry>() == 24);

/// The chunks of a dataset.
#[derive(Debug, Clone)]
pub enum Chunks {
    /// The stored chunks sorted by linear index over a grid of `grid`
    /// chunks per dimension; absent chunks were never written (read as
    /// the fill value).
    Table {
        grid: Vec<u64>,
        entries: Box<[Entry]>,
    },
    /// Every chunk stored back to back from `addr`, `nbytes` each, in
    /// row-major order over a grid of `down` chunks per dimension.
    Implicit {
        addr: u64,
        nbytes: u64,
        down: Vec<u64>,
    },
}

impl Chunks {
    pub fn get(&self, coords: &[u64]) -> Option<ChunkLoc> {
        match self {
            Chunks::Table { grid, entries } => {
                let linear = linear_index(coords, grid)?;
                let at = entries.binary_search_by_key(&linear, |e| e.linear).ok()?;
                let e = entries[at];
                Some(ChunkLoc {
                    addr: e.addr,
                    size: e.size as u64,
                    mask: e.mask,
                })
            }
            Chunks::Implicit { addr, nbytes, down } => {
                let linear = linear_index(coords, down)?;
                Some(ChunkLoc {
                    addr: linear.checked_mul(*nbytes)?.checked_add(*addr)?,
                    size: *nbytes,
                    mask: 0,
                })
            }
        }
    }

    /// Whether some stored chunk skipped a filter named in `applies` (bit
    /// `i`: filter `i` of the pipeline).
    pub fn any_masked(&self, applies: u32) -> bool {
        match self {
            Chunks::Table { entries, .. } => entries.iter().any(|e| e.mask & applies != 0),
            Chunks::Implicit { .. } => false,
        }
    }

    /// How many chunks are stored (all of the grid for an implicit index).
    pub fn stored(&self) -> u64 {
        match self {
            Chunks::Table { entries, .. } => entries.len() as u64,
            Chunks::Implicit { down, .. } => down.iter().product(),
        }
    }

    /// Bytes this index holds in memory beyond its own struct.
    pub fn heap_bytes(&self) -> u64 {
        match self {
            Chunks::Table { grid, entries } => {
                (std::mem::size_of_val(&**entries) + std::mem::size_of_val(&grid[..])) as u64
            }
            Chunks::Implicit { down, .. } => std::mem::size_of_val(&down[..]) as u64,
        }
    }
}

/// A [`Chunks`] being collected by an index walk.
struct Table {
    grid: Vec<u64>,
    max_chunks: u64,
    entries: Vec<Entry>,
    /// The file's undefined address: a chunk there was never written.
    undefined: u64,
}

impl Table {
    /// Record the chunk at grid coordinates `coords`; one outside the
    /// current grid (left by a shrink), or at the undefined address (an
    /// index slot of a chunk never written), is ignored.
    fn insert(&mut self, coords: &[u64], loc: ChunkLoc, what: &str) -> H5Result<()> {
        if loc.addr == self.undefined {
            return Ok(());
        }
        let Some(linear) = linear_index(coords, &self.grid) else {
            return Ok(());
        };
        if self.entries.len() as u64 >= self.max_chunks {
            return Err(Hdf5Error::corrupt(
                what,
                format!("more chunks than the grid's {}", self.max_chunks),
            ));
        }
        let size = u32::try_from(loc.size).map_err(|_| {
            Hdf5Error::corrupt(
                what,
                format!(
                    "a chunk of {} bytes (HDF5 chunks are under 4 GiB)",
                    loc.size
                ),
            )
        })?;
        self.entries.push(Entry {
            linear,
            addr: loc.addr,
            size,
            mask: loc.mask,
        });
        Ok(())
    }

    /// The table, sorted; of two entries for one chunk (a corrupt index)
    /// the first is kept.
    fn finish(mut self) -> Chunks {
        self.entries.sort_by_key(|e| e.linear);
        self.entries.dedup_by_key(|e| e.linear);
        Chunks::Table {
            grid: self.grid,
            entries: self.entries.into_boxed_slice(),
        }
    }
}

/// Row-major linear index of `coords` in a grid of `down` chunks.
fn linear_index(coords: &[u64], down: &[u64]) -> Option<u64> {
    if coords.len() != down.len() {
        return None;
    }
    let mut i = 0u64;
    for (&c, &n) in coords.iter().zip(down) {
        if c >= n {
            return None;
        }
        i = i.checked_mul(n)?.checked_add(c)?;
    }
    Some(i)
}

/// What a chunk index walk needs to know about its dataset.
#[derive(Debug, Clone)]
pub struct Geometry {
    /// Current extent per dimension.
    pub shape: Vec<u64>,
    /// Extent the index is laid out for (maximum dimensions when fixed,
    /// else the current ones).
    pub layout_shape: Vec<u64>,
    pub chunk: Vec<u64>,
    /// Bytes of one chunk before filters.
    pub chunk_nbytes: u64,
    /// The unlimited dimension, when there is exactly one (how an
    /// extensible array orders its chunks).
    pub unlimited: Option<usize>,
}

impl Geometry {
    /// Chunks per dimension covering `shape`.
    fn grid(&self, shape: &[u64]) -> Vec<u64> {
        shape
            .iter()
            .zip(&self.chunk)
            .map(|(&s, &c)| s.div_ceil(c))
            .collect()
    }
}

/// A dataset's chunk index, walked on first use (see the module doc).
#[derive(Debug)]
pub struct LazyChunks {
    index: ChunkIndex,
    geometry: Geometry,
    what: String,
    loaded: OnceLock<Chunks>,
    /// Held by the one reader walking the index, so it is walked once.
    loading: Mutex<()>,
}

impl LazyChunks {
    pub fn new(index: ChunkIndex, geometry: Geometry, what: &str) -> LazyChunks {
        LazyChunks {
            index,
            geometry,
            what: what.to_string(),
            loaded: OnceLock::new(),
            loading: Mutex::new(()),
        }
    }

    /// The index, walked from `f` if this is its first use. An error is
    /// not kept: the next call walks again.
    pub fn load(&self, f: &H5File) -> H5Result<&Chunks> {
        if let Some(c) = self.loaded.get() {
            return Ok(c);
        }
        // A poisoned lock only means another walk panicked; nothing it
        // guards can be half-written (the table is set whole or not).
        let _walking = self.loading.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(c) = self.loaded.get() {
            return Ok(c);
        }
        // Its nodes are read through a block cache for the walk only.
        let c = chunks(&f.for_parsing(), &self.index, &self.geometry, &self.what)?;
        log::debug!(
            "{}: chunk index loaded, {} chunks, {} bytes",
            self.what,
            c.stored(),
            c.heap_bytes()
        );
        Ok(self.loaded.get_or_init(|| c))
    }

    /// Where the chunk at grid coordinates `coords` is, `None` if it was
    /// never written.
    pub fn get(&self, f: &H5File, coords: &[u64]) -> H5Result<Option<ChunkLoc>> {
        Ok(self.load(f)?.get(coords))
    }

    /// The index if some read has loaded it.
    pub fn loaded(&self) -> Option<&Chunks> {
        self.loaded.get()
    }
}

/// Walk the chunk index `index` into [`Chunks`].
pub fn chunks(f: &H5File, index: &ChunkIndex, g: &Geometry, what: &str) -> H5Result<Chunks> {
    let grid = g.grid(&g.shape);
    let max_chunks = grid
        .iter()
        .try_fold(1u64, |a, &n| a.checked_mul(n))
        .ok_or_else(|| Hdf5Error::corrupt(what, "chunk grid overflows"))?;
    let mut table = Table {
        grid,
        max_chunks,
        entries: Vec::new(),
        undefined: f.undefined_address(),
    };
    let undefined = |a: u64| f.undefined(a);
    match *index {
        ChunkIndex::BTreeV1 { addr } => {
            if !undefined(addr) {
                let mut w = ChunkWalk {
                    f,
                    g,
                    table: &mut table,
                    seen: HashSet::new(),
                    what,
                };
                w.node(addr, 0)?;
            }
        }
        ChunkIndex::Single { addr, filtered } => {
            let (size, mask) = filtered.unwrap_or((g.chunk_nbytes, 0));
            table.insert(&vec![0; g.shape.len()], ChunkLoc { addr, size, mask }, what)?;
        }
        ChunkIndex::Implicit { addr } => {
            if !undefined(addr) {
                return Ok(Chunks::Implicit {
                    addr,
                    nbytes: g.chunk_nbytes,
                    down: g.grid(&g.layout_shape),
                });
            }
        }
        ChunkIndex::FixedArray { addr } => {
            if !undefined(addr) {
                fixed_array(f, addr, g, &mut table, what)?;
            }
        }
        ChunkIndex::ExtensibleArray { addr } => {
            if !undefined(addr) {
                extensible_array(f, addr, g, &mut table, what)?;
            }
        }
        ChunkIndex::BTreeV2 { addr } => {
            if !undefined(addr) {
                btree_v2(f, addr, g, &mut table, what)?;
            }
        }
    }
    Ok(table.finish())
}

struct ChunkWalk<'a> {
    f: &'a H5File,
    g: &'a Geometry,
    table: &'a mut Table,
    seen: HashSet<u64>,
    what: &'a str,
}

impl ChunkWalk<'_> {
    fn node(&mut self, addr: u64, depth: usize) -> H5Result<()> {
        let what = format!("{}: chunk B-tree node at {addr:#x}", self.what);
        if depth > MAX_DEPTH || !self.seen.insert(addr) {
            return Err(Hdf5Error::corrupt(&what, "B-tree nodes form a cycle"));
        }
        let f = self.f;
        let rank = self.g.shape.len();
        let o = f.sizeof_addr as u64;
        let key_len = 8 + 8 * (rank as u64 + 1);
        let head = 8 + 2 * o;
        let pre = f.read(addr, head, &what)?;
        let mut c = f.cursor(&pre, &what);
        c.signature(b"TREE")?;
        let (kind, level, entries) = (c.u8()?, c.u8()?, c.u16()? as u64);
        if kind != 1 {
            return Err(Hdf5Error::corrupt(
                &what,
                format!("node type {kind} in a chunk index"),
            ));
        }
        let body = f.read(
            addr.saturating_add(head),
            entries * (key_len + o) + key_len,
            &what,
        )?;
        if level > 0 {
            // The children are visited one by one: over an object store,
            // fetch the blocks holding them together first (one round
            // trip, not one per child).
            let mut c = f.cursor(&body, &what);
            let mut children = Vec::with_capacity(entries as usize);
            for _ in 0..entries {
                c.skip(key_len as usize)?;
                children.push(c.addr()?);
            }
            f.will_read(&children);
        }
        let mut c = f.cursor(&body, &what);
        let mut coords = vec![0; rank];
        for _ in 0..entries {
            let size = c.u32()? as u64;
            let mask = c.u32()?;
            let offsets = (0..=rank).map(|_| c.u64()).collect::<H5Result<Vec<_>>>()?;
            let child = c.addr()?;
            if level > 0 {
                self.node(child, depth + 1)?;
                continue;
            }
            for d in 0..rank {
                if offsets[d] % self.g.chunk[d] != 0 {
                    return Err(Hdf5Error::corrupt(
                        &what,
                        format!(
                            "chunk offset {:?} is not on the chunk grid {:?}",
                            &offsets[..rank],
                            self.g.chunk
                        ),
                    ));
                }
                coords[d] = offsets[d] / self.g.chunk[d];
            }
            let loc = ChunkLoc {
                addr: child,
                size,
                mask,
            };
            self.table.insert(&coords, loc, &what)?;
        }
        Ok(())
    }
}

/// A fixed array index (spec VII.B "Fixed Array"): a header ("FAHD")
/// pointing at one data block ("FADB") of one entry per chunk in
/// row-major order over the grid of the layout's shape, paged when it
/// holds more than 2^page_bits entries.
fn fixed_array(f: &H5File, addr: u64, g: &Geometry, table: &mut Table, what: &str) -> H5Result<()> {
    let what = format!("{what}: fixed array header at {addr:#x}");
    let o = f.sizeof_addr as u64;
    let l = f.sizeof_len as u64;
    let hdr = f.read(addr, 8 + l + o + 4, &what)?;
    check_checksum(&hdr, &what)?;
    let mut c = f.cursor(&hdr, &what);
    c.signature(b"FAHD")?;
    c.skip(1)?; // version
    let client = c.u8()?;
    let entry_size = c.u8()? as u64;
    let page_bits = c.u8()?;
    let n = c.length()?;
    let block = c.addr()?;
    let down = g.grid(&g.layout_shape);
    let total: u64 = down
        .iter()
        .try_fold(1u64, |a, &x| a.checked_mul(x))
        .ok_or_else(|| Hdf5Error::corrupt(&what, "chunk grid overflows"))?;
    if n != total {
        return Err(Hdf5Error::corrupt(
            &what,
            format!("{n} entries for a grid of {total} chunks"),
        ));
    }
    let filtered = client == 1;
    let want = if filtered { o + 4 + 1 } else { o };
    if entry_size < want || entry_size > o + 8 + 4 {
        return Err(Hdf5Error::corrupt(
            &what,
            format!("entries of {entry_size} bytes"),
        ));
    }
    if f.undefined(block) {
        return Ok(());
    }
    let bwhat = format!("{what}: data block at {block:#x}");
    let page = if page_bits >= 32 {
        u64::MAX
    } else {
        1u64 << page_bits
    };
    let paged = n > page;
    let npages = if paged { n.div_ceil(page) } else { 0 };
    let prefix = 4 + 1 + 1 + o + npages.div_ceil(8);
    // Unpaged: the prefix, every entry, one checksum. Paged: the prefix
    // and its checksum, then each page's entries and checksum.
    let size = n
        .checked_mul(entry_size)
        .and_then(|e| e.checked_add(prefix + 4))
        .and_then(|s| s.checked_add(if paged { 4 + npages * 4 } else { 0 }))
        .ok_or_else(|| Hdf5Error::corrupt(&bwhat, format!("{n} entries overflow")))?;
    let buf = f.read(block, size, &bwhat)?;
    let mut c = f.cursor(&buf, &bwhat);
    c.signature(b"FADB")?;
    let mut entries: Vec<(u64, &[u8])> = Vec::new();
    if paged {
        check_checksum(&buf[..(prefix + 4) as usize], &bwhat)?;
        let bitmap = &buf[(6 + o) as usize..prefix as usize];
        let mut at = (prefix + 4) as usize;
        for p in 0..npages {
            let k = page.min(n - p * page);
            let len = (k * entry_size) as usize;
            let page_bytes = &buf[at..at + len + 4];
            at += len + 4;
            // Bit p (most significant first) set: the page was written.
            if bitmap[(p / 8) as usize] & (0x80 >> (p % 8)) == 0 {
                continue;
            }
            check_checksum(page_bytes, &bwhat)?;
            entries.push((p * page, &page_bytes[..len]));
        }
    } else {
        check_checksum(&buf, &bwhat)?;
        entries.push((0, &buf[prefix as usize..buf.len() - 4]));
    }
    for (first, bytes) in entries {
        let mut c = f.cursor(bytes, &bwhat);
        let mut i = first;
        while c.remaining() as u64 >= entry_size {
            let a = c.addr()?;
            let (size, mask) = if filtered {
                (c.uint((entry_size - o - 4) as usize)?, c.u32()?)
            } else {
                (g.chunk_nbytes, 0)
            };
            let coords = unlinear(i, &down);
            i += 1;
            let loc = ChunkLoc {
                addr: a,
                size,
                mask,
            };
            table.insert(&coords, loc, &bwhat)?;
        }
    }
    Ok(())
}

/// An extensible array index (spec VII.C, `H5EA*.c`): a header ("EAHD")
/// and an index block ("EAIB") holding the first elements inline, then the
/// addresses of data blocks ("EADB") and of secondary blocks ("EASB")
/// that hold more data block addresses; blocks double in size as the
/// array grows. Element `i` is the chunk whose coordinates, with the
/// unlimited dimension moved first, have row-major index `i` over the
/// maximum grid.
///
/// A data block of more than 2^page_bits elements (1024 for HDF5's chunk
/// indexes: from about 131,000 chunks on) is paged: its prefix and
/// checksum, then pages of 2^page_bits elements each with its own
/// checksum, allocated together but written only when a chunk of the
/// page is. Which pages were written is a bitmap in the secondary block
/// (bit `data block * pages + page`, most significant bit first:
/// `H5EA__lookup_elmt`, `H5VM_bit_get`); an unwritten page holds no
/// chunks.
fn extensible_array(
    f: &H5File,
    addr: u64,
    g: &Geometry,
    table: &mut Table,
    what: &str,
) -> H5Result<()> {
    let what = format!("{what}: extensible array header at {addr:#x}");
    let o = f.sizeof_addr as u64;
    let l = f.sizeof_len as u64;
    let hdr = f.read(addr, 12 + 6 * l + o + 4, &what)?;
    check_checksum(&hdr, &what)?;
    let mut c = f.cursor(&hdr, &what);
    c.signature(b"EAHD")?;
    c.skip(1)?;
    let client = c.u8()?;
    let elmt = c.u8()? as u64;
    let max_bits = c.u8()? as u64;
    let idx_elmts = c.u8()? as u64;
    let dblk_min = c.u8()? as u64;
    let sblk_min_ptrs = c.u8()? as u64;
    let page_bits = c.u8()? as u64;
    c.skip(4 * l as usize)?; // statistics
    let max_idx_set = c.length()?;
    c.length()?; // number of elements
    let iblock = c.addr()?;
    let filtered = client == 1;
    let pow2 = |x: u64| x.is_power_of_two();
    if elmt < if filtered { o + 5 } else { o }
        || elmt > o + 12
        || !(1..=64).contains(&max_bits)
        || !pow2(dblk_min)
        || !pow2(sblk_min_ptrs)
        || page_bits >= 32
    {
        return Err(Hdf5Error::corrupt(
            &what,
            format!(
                "element size {elmt}, {max_bits} index bits, data blocks of at least \
                 {dblk_min}, {sblk_min_ptrs} pointers per super block, pages of 2^{page_bits}"
            ),
        ));
    }
    if f.undefined(iblock) {
        return Ok(());
    }
    let log2 = |x: u64| 63 - x.max(1).leading_zeros() as u64;
    let off_size = max_bits.div_ceil(8);
    // The super blocks' geometry (H5EA__hdr_init).
    let nsblks = 1 + max_bits.saturating_sub(log2(dblk_min));
    let mut sblk = Vec::new(); // (data blocks, elements per data block, first index)
    let mut start = 0u64;
    for u in 0..nsblks {
        let ndblks = 1u64 << (u / 2);
        let per = (1u64 << u.div_ceil(2)).saturating_mul(dblk_min);
        sblk.push((ndblks, per, start));
        start = start.saturating_add(ndblks.saturating_mul(per));
    }
    let ib_sblks = (2 * log2(sblk_min_ptrs)).min(nsblks);
    let ndblk_addrs = 2 * (sblk_min_ptrs - 1);
    let nsblk_addrs = nsblks - ib_sblks;
    let iwhat = format!("{what}: index block at {iblock:#x}");
    let size = 6 + o + idx_elmts * elmt + (ndblk_addrs + nsblk_addrs) * o + 4;
    let buf = f.read(iblock, size, &iwhat)?;
    check_checksum(&buf, &iwhat)?;
    let mut c = f.cursor(&buf, &iwhat);
    c.signature(b"EAIB")?;
    c.skip(2 + o as usize)?;
    // The unlimited dimension first, then the others in order, each over
    // its maximum extent.
    let rank = g.shape.len();
    let unlim = g.unlimited.unwrap_or(0);
    let order: Vec<usize> = std::iter::once(unlim)
        .chain((0..rank).filter(|&d| d != unlim))
        .collect();
    let down: Vec<u64> = order
        .iter()
        .enumerate()
        .map(|(k, &d)| {
            if k == 0 {
                u64::MAX
            } else {
                g.layout_shape[d].div_ceil(g.chunk[d])
            }
        })
        .collect();
    let mut coords = vec![0; rank];
    // Element `i`, `n` of them packed in `bytes`.
    let mut put = |first: u64, bytes: &[u8], what: &str| -> H5Result<()> {
        let mut c = f.cursor(bytes, what);
        for i in first..first + bytes.len() as u64 / elmt {
            let a = c.addr()?;
            let (size, mask) = if filtered {
                (c.uint((elmt - o - 4) as usize)?, c.u32()?)
            } else {
                (g.chunk_nbytes, 0)
            };
            if i >= max_idx_set {
                continue;
            }
            let swizzled = unlinear(i, &down);
            for (k, &d) in order.iter().enumerate() {
                coords[d] = swizzled[k];
            }
            table.insert(
                &coords,
                ChunkLoc {
                    addr: a,
                    size,
                    mask,
                },
                what,
            )?;
        }
        Ok(())
    };
    put(0, c.bytes((idx_elmts * elmt) as usize)?, &iwhat)?;
    let dblk_addrs = (0..ndblk_addrs)
        .map(|_| c.addr())
        .collect::<H5Result<Vec<_>>>()?;
    let sblk_addrs = (0..nsblk_addrs)
        .map(|_| c.addr())
        .collect::<H5Result<Vec<_>>>()?;
    let page = 1u64 << page_bits;
    // The data block at `a` of `n` elements from element `first`; `pages`
    // the page-init bits of its pages when it is paged.
    let mut data_block = |a: u64, first: u64, n: u64, pages: Option<&dyn Fn(u64) -> bool>| {
        if f.undefined(a) || first >= max_idx_set {
            return Ok(());
        }
        let dwhat = format!("{what}: data block at {a:#x}");
        let prefix = 6 + o + off_size;
        let Some(written) = pages.filter(|_| n > page) else {
            if n > page {
                return Err(Hdf5Error::corrupt(
                    &dwhat,
                    format!("{n} elements in an index block's data block (pages of {page})"),
                ));
            }
            let buf = f.read(a, prefix + n * elmt + 4, &dwhat)?;
            check_checksum(&buf, &dwhat)?;
            let mut c = f.cursor(&buf, &dwhat);
            c.signature(b"EADB")?;
            c.skip((prefix - 4) as usize)?;
            return put(first, c.bytes((n * elmt) as usize)?, &dwhat);
        };
        let buf = f.read(a, prefix + 4, &dwhat)?;
        check_checksum(&buf, &dwhat)?;
        f.cursor(&buf, &dwhat).signature(b"EADB")?;
        let page_bytes = page * elmt + 4;
        for p in 0..n / page {
            if !written(p) {
                continue;
            }
            let at = a.saturating_add(prefix + 4 + p * page_bytes);
            let pwhat = format!("{dwhat}: page {p} at {at:#x}");
            let buf = f.read(at, page_bytes, &pwhat)?;
            check_checksum(&buf, &pwhat)?;
            put(first + p * page, &buf[..(page * elmt) as usize], &pwhat)?;
        }
        Ok(())
    };
    for (u, &(ndblks, per, first)) in sblk.iter().enumerate().take(ib_sblks as usize) {
        let base: u64 = sblk[..u].iter().map(|s| s.0).sum();
        for k in 0..ndblks {
            let a = dblk_addrs
                .get((base + k) as usize)
                .copied()
                .ok_or_else(|| Hdf5Error::corrupt(&iwhat, "too few data block addresses"))?;
            data_block(a, idx_elmts + first + k * per, per, None)?;
        }
    }
    for (s, &a) in sblk_addrs.iter().enumerate() {
        let u = ib_sblks as usize + s;
        let (ndblks, per, first) = sblk[u];
        if f.undefined(a) || idx_elmts + first >= max_idx_set {
            continue;
        }
        let swhat = format!("{what}: secondary block at {a:#x}");
        // Paged data blocks: one bitmap of `npages` bits per data block,
        // each rounded up to whole bytes (H5EA__sblock_alloc).
        let npages = if per > page { per / page } else { 0 };
        let bitmap_len = ndblks * npages.div_ceil(8);
        let buf = f.read(a, 6 + o + off_size + bitmap_len + ndblks * o + 4, &swhat)?;
        check_checksum(&buf, &swhat)?;
        let mut c = f.cursor(&buf, &swhat);
        c.signature(b"EASB")?;
        c.skip((2 + o + off_size) as usize)?;
        let bitmap = c.bytes(bitmap_len as usize)?;
        for k in 0..ndblks {
            let d = c.addr()?;
            let written = |p: u64| {
                let bit = k * npages + p;
                bitmap
                    .get((bit / 8) as usize)
                    .is_some_and(|b| b & (0x80 >> (bit % 8)) != 0)
            };
            data_block(d, idx_elmts + first + k * per, per, Some(&written))?;
        }
    }
    Ok(())
}

/// A version 2 B-tree chunk index (`H5Dbtree2.c`): records of type 10
/// (address, chunk coordinates) or 11 (address, stored size, filter mask,
/// chunk coordinates), the coordinates in chunks, 8 bytes each.
fn btree_v2(f: &H5File, addr: u64, g: &Geometry, table: &mut Table, what: &str) -> H5Result<()> {
    let mut records = Vec::new();
    super::dense::btree_records(f, addr, what, &mut records)?;
    let rank = g.shape.len();
    let o = f.sizeof_addr as usize;
    for (kind, rec) in records {
        let mut c = f.cursor(&rec, what);
        let a = c.addr()?;
        let (size, mask) = match kind {
            10 => (g.chunk_nbytes, 0),
            11 => {
                let n = rec
                    .len()
                    .checked_sub(o + 4 + 8 * rank)
                    .filter(|&n| (1..=8).contains(&n));
                let n = n.ok_or_else(|| {
                    Hdf5Error::corrupt(what, format!("chunk records of {} bytes", rec.len()))
                })?;
                (c.uint(n)?, c.u32()?)
            }
            k => {
                return Err(Hdf5Error::corrupt(
                    what,
                    format!("v2 B-tree of record type {k} as a chunk index"),
                ));
            }
        };
        let coords = (0..rank).map(|_| c.u64()).collect::<H5Result<Vec<_>>>()?;
        let loc = ChunkLoc {
            addr: a,
            size,
            mask,
        };
        table.insert(&coords, loc, what)?;
    }
    Ok(())
}

/// Grid coordinates of row-major index `i` in a grid of `down` chunks.
fn unlinear(mut i: u64, down: &[u64]) -> Vec<u64> {
    let mut coords = vec![0; down.len()];
    for d in (0..down.len()).rev() {
        coords[d] = i % down[d].max(1);
        i /= down[d].max(1);
    }
    coords
}

/// The members of an old-style group: its v1 B-tree of symbol table nodes
/// and the local heap holding their names. Returns (name, target) in
/// B-tree order: an object header address, or a soft link (symbol table
/// entry of cache type 2, whose object header address is undefined).
pub fn symbol_table_group(
    f: &H5File,
    btree: u64,
    heap: u64,
    what: &str,
) -> H5Result<Vec<(String, LinkTarget)>> {
    let names = local_heap(f, heap, what)?;
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    group_node(f, btree, &names, &mut out, &mut seen, 0, what)?;
    Ok(out)
}

fn group_node(
    f: &H5File,
    addr: u64,
    names: &[u8],
    out: &mut Vec<(String, LinkTarget)>,
    seen: &mut HashSet<u64>,
    depth: usize,
    what: &str,
) -> H5Result<()> {
    let nwhat = format!("{what}: group B-tree node at {addr:#x}");
    if depth > MAX_DEPTH || !seen.insert(addr) {
        return Err(Hdf5Error::corrupt(&nwhat, "B-tree nodes form a cycle"));
    }
    let o = f.sizeof_addr as u64;
    let l = f.sizeof_len as u64;
    let head = 8 + 2 * o;
    let pre = f.read(addr, head, &nwhat)?;
    let mut c = f.cursor(&pre, &nwhat);
    c.signature(b"TREE")?;
    let (kind, level, entries) = (c.u8()?, c.u8()?, c.u16()? as u64);
    if kind != 0 {
        return Err(Hdf5Error::corrupt(
            &nwhat,
            format!("node type {kind} in a group"),
        ));
    }
    let body = f.read(addr.saturating_add(head), entries * (l + o) + l, &nwhat)?;
    let mut c = f.cursor(&body, &nwhat);
    for _ in 0..entries {
        c.length()?; // key: heap offset of the largest name below
        let child = c.addr()?;
        if level > 0 {
            group_node(f, child, names, out, seen, depth + 1, what)?;
        } else {
            symbol_node(f, child, names, out, what)?;
        }
    }
    Ok(())
}

/// A symbol table node ("SNOD"): entries of (name offset, object header
/// address, cache type, reserved, 16-byte scratch pad). Cache type 2 is a
/// soft link (spec III.C "Symbol Table Entry": the scratch pad holds the
/// heap offset of its value, the address is undefined).
fn symbol_node(
    f: &H5File,
    addr: u64,
    names: &[u8],
    out: &mut Vec<(String, LinkTarget)>,
    what: &str,
) -> H5Result<()> {
    let nwhat = format!("{what}: symbol table node at {addr:#x}");
    let o = f.sizeof_addr as u64;
    let l = f.sizeof_len as u64;
    let pre = f.read(addr, 8, &nwhat)?;
    let mut c = f.cursor(&pre, &nwhat);
    c.signature(b"SNOD")?;
    c.skip(2)?;
    let n = c.u16()? as u64;
    let entry = l + o + 24;
    let body = f.read(addr.saturating_add(8), n * entry, &nwhat)?;
    let mut c = f.cursor(&body, &nwhat);
    for _ in 0..n {
        let name_off = c.length()?;
        let obj = c.addr()?;
        let cache_type = c.u32()?;
        c.skip(20)?; // reserved, scratch pad
        let target = if cache_type == 2 {
            LinkTarget::Other("soft link")
        } else {
            LinkTarget::Hard(obj)
        };
        out.push((heap_string(names, name_off, &nwhat)?, target));
    }
    Ok(())
}

/// The data segment of a local heap ("HEAP").
pub(super) fn local_heap(f: &H5File, addr: u64, what: &str) -> H5Result<Vec<u8>> {
    let hwhat = format!("{what}: local heap at {addr:#x}");
    let o = f.sizeof_addr as u64;
    let l = f.sizeof_len as u64;
    let pre = f.read(addr, 8 + 2 * l + o, &hwhat)?;
    let mut c = f.cursor(&pre, &hwhat);
    c.signature(b"HEAP")?;
    c.skip(4)?;
    let size = c.length()?;
    c.length()?; // free list head
    let data = c.addr()?;
    f.read(data, size, &hwhat)
}

/// The null-terminated string at `offset` of a heap's data.
pub(super) fn heap_string(data: &[u8], offset: u64, what: &str) -> H5Result<String> {
    let rest = usize::try_from(offset)
        .ok()
        .and_then(|o| data.get(o..))
        .ok_or_else(|| {
            Hdf5Error::corrupt(what, format!("name offset {offset} past the local heap"))
        })?;
    let end = rest
        .iter()
        .position(|&b| b == 0)
        .ok_or_else(|| Hdf5Error::corrupt(what, "unterminated name in the local heap"))?;
    Ok(String::from_utf8_lossy(&rest[..end]).into_owned())
}

/// Global heap collections ("GCOL") read so far, by address: where
/// variable-length attribute values (strings, `DIMENSION_LIST`) live.
#[derive(Default)]
pub struct GlobalHeap {
    collections: HashMap<u64, HashMap<u16, Vec<u8>>>,
}

impl GlobalHeap {
    /// Object `index` of the collection at `addr`.
    pub fn object(&mut self, f: &H5File, addr: u64, index: u32, what: &str) -> H5Result<&[u8]> {
        let col = match self.collections.entry(addr) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => e.insert(collection(f, addr, what)?),
        };
        u16::try_from(index)
            .ok()
            .and_then(|i| col.get(&i))
            .map(Vec::as_slice)
            .ok_or_else(|| {
                Hdf5Error::corrupt(
                    what,
                    format!("no object {index} in the global heap collection at {addr:#x}"),
                )
            })
    }
}

fn collection(f: &H5File, addr: u64, what: &str) -> H5Result<HashMap<u16, Vec<u8>>> {
    let cwhat = format!("{what}: global heap collection at {addr:#x}");
    let l = f.sizeof_len as u64;
    let pre = f.read(addr, 8 + l, &cwhat)?;
    let mut c = f.cursor(&pre, &cwhat);
    c.signature(b"GCOL")?;
    c.skip(4)?;
    let size = c.length()?;
    let buf = f.read(addr, size, &cwhat)?;
    let mut c = f.cursor(&buf, &cwhat);
    c.skip((8 + l) as usize)?;
    let mut out = HashMap::new();
    while c.remaining() as u64 >= 8 + l {
        let index = c.u16()?;
        if index == 0 {
            break; // free space: the rest of the collection
        }
        c.skip(6)?;
        let n = c.length()?;
        let data = c.bytes(usize::try_from(n).unwrap_or(usize::MAX))?;
        out.insert(index, data.to_vec());
        c.skip(((8 - n % 8) % 8).min(c.remaining() as u64) as usize)?;
    }
    Ok(out)
}
