//! The `fuser::Filesystem` adapter: converts kernel requests into calls on
//! the core ([`SlabFs`]) and its results into replies. No filesystem logic
//! lives here beyond two FUSE-specific choices:
//!
//! - `open` replies `FOPEN_KEEP_CACHE`, never `FOPEN_DIRECT_IO`, for data
//!   files: the kernel page cache is the first level cache and survives
//!   `close`/`open` (tools open a file per read), and shared `mmap`
//!   (`numpy.memmap`, GDAL) works. When a source changes, the refresh
//!   invalidates the affected pages explicitly ([`KernelNotifier`]), so
//!   keeping the cache is right while the data is unchanged. `opendir`
//!   likewise lets the kernel cache directory listings
//!   (`FOPEN_CACHE_DIR`). The core asks for `direct_io` only for the
//!   files it generates when opened (`.slabfs/stats`, `.slabfs/errors`,
//!   a failed dataset's sidecar), whose size is unknown until then.
//! - `init` asks the kernel for the largest readahead it allows and a
//!   `max_background` sized for parallel decodes, and logs what it got.
//! - `ioctl` is answered `ENOTTY` ("not a terminal / no such ioctl"), as a
//!   regular file system answers the ioctls it does not know: every
//!   Python `open()` asks `TCGETS` (its `isatty` check), so fuser's
//!   default (`ENOSYS` and a warning per call) would fill an operator's
//!   log. The first one is logged at debug level, none after it.
//!
//! Every failed request goes through [`fail`], which logs the error at its
//! level with its source chain and returns the errno to reply. Every
//! request is counted by operation with the time from its arrival to its
//! answer (`Counted`: two clock reads and a few relaxed atomic adds),
//! for `.slabfs/stats` and the metrics endpoint.

use std::ffi::OsStr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, InitFlags,
    IoctlFlags, KernelConfig, LockOwner, OpenFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyIoctl, ReplyOpen, ReplyStatfs, ReplyWrite,
    ReplyXattr, Request, TimeOrNow, WriteFlags,
};

use super::error::{FsError, FsResult, chain};
use super::reconcile::Invalidate;
use super::stats::Op;
use super::{Attr, DirSink, Kind, SlabFs, XattrReply};

/// How long the kernel may cache names and attributes. A refresh that
/// changes a node invalidates the kernel's copy at once, so this only
/// bounds staleness if a notification is lost (a kernel without
/// notifications); a few seconds keeps `stat`-heavy tools off the daemon.
const TTL: Duration = Duration::from_secs(5);

/// Concurrent background (readahead) requests the kernel may queue. Its
/// default of 12 throttles a sequential reader of a mount whose requests
/// each decode whole chunks; 16 keeps every worker thread busy on a
/// typical machine while bounding memory (each request is at most
/// `max_pages`, 1 MiB).
const MAX_BACKGROUND: u16 = 16;

/// The refresh's [`Invalidate`] as FUSE notifications to the kernel
/// (`FUSE_NOTIFY_INVAL_INODE` with the whole range, `FUSE_NOTIFY_INVAL_ENTRY`).
/// Only ever called from the refresh thread, never from inside a request
/// handler (the kernel may wait on the request being handled: deadlock).
pub struct KernelNotifier(pub fuser::Notifier);

impl Invalidate for KernelNotifier {
    fn inode(&self, ino: u64) -> std::io::Result<()> {
        // Offset 0, length 0: attributes and every cached page.
        self.0.inval_inode(INodeNo(ino), 0, 0)
    }

    fn entry(&self, parent: u64, name: &str) -> std::io::Result<()> {
        self.0.inval_entry(INodeNo(parent), OsStr::new(name))
    }
}

pub struct FuseFs {
    core: Arc<SlabFs>,
}

impl FuseFs {
    pub fn new(core: Arc<SlabFs>) -> FuseFs {
        FuseFs { core }
    }

    /// Count a request `op` arriving now; it is recorded when the guard
    /// goes (after the answer).
    fn counted(&self, op: Op) -> Counted<'_> {
        Counted {
            core: &self.core,
            op,
            arrived: Instant::now(),
        }
    }
}

/// A request being answered: records its operation and time in the
/// mount's stats when dropped, whichever way the handler ends.
struct Counted<'a> {
    core: &'a SlabFs,
    op: Op,
    arrived: Instant,
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.core.stats().record_op(self.op, self.arrived.elapsed());
    }
}

/// Run `f`, turning a panic into EIO with an error log naming the request.
///
/// Nothing in the core should panic on any input (that is a bug, and the
/// tests try hard to find one), but if one does, the caller must get an
/// error rather than a request that is never answered (its process would
/// hang in the kernel) and the daemon must keep serving: the worker thread
/// survives (a panic escaping a handler would end it, and with the last
/// one the mount), the cache's in-flight guard wakes any waiters, and
/// `parking_lot` locks are not poisoned. Every handler that calls the core
/// goes through here (through [`call`] when the core returns a result).
fn contain_panic<T>(
    op: &str,
    what: &dyn Fn() -> String,
    f: impl FnOnce() -> T,
) -> Result<T, Errno> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|panic| {
        log::error!(
            "{op} {}: internal error, answered EIO (please report this bug): {}",
            what(),
            crate::error::panic_message(panic.as_ref())
        );
        Errno::EIO
    })
}

/// A core call under [`contain_panic`], its error logged and turned into
/// the errno to reply.
fn call<T>(
    op: &str,
    what: &dyn Fn() -> String,
    f: impl FnOnce() -> FsResult<T>,
) -> Result<T, Errno> {
    contain_panic(op, what, f)?.map_err(|e| fail(op, &e))
}

/// Log a failed request (what, where, why) and give its errno.
fn fail(op: &str, err: &FsError) -> Errno {
    log::log!(err.level(), "{op} failed: {}", chain(err));
    Errno::from_i32(err.errno())
}

fn file_attr(a: &Attr) -> FileAttr {
    FileAttr {
        ino: INodeNo(a.ino),
        size: a.size,
        blocks: a.blocks,
        atime: a.mtime,
        mtime: a.mtime,
        ctime: a.mtime,
        crtime: a.mtime,
        kind: file_type(a.kind),
        perm: a.perm,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: 0,
        blksize: a.blksize,
        flags: 0,
    }
}

fn file_type(k: Kind) -> FileType {
    match k {
        Kind::Directory => FileType::Directory,
        Kind::File => FileType::RegularFile,
    }
}

struct DirReply<'a>(&'a mut ReplyDirectory);

impl DirSink for DirReply<'_> {
    fn add(&mut self, ino: u64, next_offset: u64, kind: Kind, name: &str) -> bool {
        self.0.add(INodeNo(ino), next_offset, file_type(kind), name)
    }
}

fn read_only(op: &'static str) -> Errno {
    fail(op, &FsError::ReadOnly { op })
}

impl Filesystem for FuseFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // The kernel offers its current readahead and refuses anything
        // larger: asking for u32::MAX tells us the ceiling, then take it.
        let readahead = match config.set_max_readahead(u32::MAX) {
            Ok(_) => u32::MAX,
            Err(max) => {
                let _ = config.set_max_readahead(max);
                max
            }
        };
        if let Err(min) = config.set_max_background(MAX_BACKGROUND) {
            log::warn!("kernel refused max_background {MAX_BACKGROUND} (nearest {min})");
        }
        // Lookups and readdirs in one directory need not be serialized:
        // each works on an immutable snapshot of the tree.
        if let Err(e) = config.add_capabilities(InitFlags::FUSE_PARALLEL_DIROPS) {
            log::debug!("kernel lacks {e:?}");
        }
        // fuser requests FUSE_MAX_PAGES whenever the kernel supports it, with
        // max_pages covering its 16 MiB max_write; the kernel clamps that to
        // fs.fuse.max_pages_limit (256 pages = 1 MiB unless raised).
        let max_pages = config.capabilities().contains(InitFlags::FUSE_MAX_PAGES);
        let limit = std::fs::read_to_string("/proc/sys/fs/fuse/max_pages_limit")
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok());
        log::info!(
            "kernel FUSE ABI {}: max_readahead {} KiB, max_background {MAX_BACKGROUND}, \
             max_pages {}",
            config.kernel_abi(),
            readahead / 1024,
            match (max_pages, limit) {
                (false, _) => "not supported (requests of at most 32 pages)".to_string(),
                (true, Some(l)) => format!("requested, kernel limit {l} pages"),
                (true, None) => "requested (kernel limit 256 pages)".to_string(),
            }
        );
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let _counted = self.counted(Op::Lookup);
        let what = || format!("{}/{}", self.core.path(parent.0), name.to_string_lossy());
        match call("lookup", &what, || self.core.lookup(parent.0, name)) {
            Ok(a) => reply.entry(&TTL, &file_attr(&a), Generation(0)),
            Err(errno) => reply.error(errno),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let _counted = self.counted(Op::Getattr);
        let what = || self.core.path(ino.0);
        match call("getattr", &what, || self.core.getattr(ino.0)) {
            Ok(a) => reply.attr(&TTL, &file_attr(&a)),
            Err(errno) => reply.error(errno),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let _counted = self.counted(Op::Open);
        let what = || self.core.path(ino.0);
        match call("open", &what, || self.core.open(ino.0, flags.0)) {
            Ok(o) if o.direct_io => reply.opened(FileHandle(o.fh), FopenFlags::FOPEN_DIRECT_IO),
            Ok(o) => reply.opened(FileHandle(o.fh), FopenFlags::FOPEN_KEEP_CACHE),
            Err(errno) => reply.error(errno),
        }
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let _counted = self.counted(Op::Release);
        let what = || self.core.path(ino.0);
        // The kernel ignores release errors; a panic is only logged.
        let _ = contain_panic("release", &what, || self.core.release(ino.0, fh.0));
        reply.ok()
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let _counted = self.counted(Op::Opendir);
        // A dataset's listing may be cached (a refresh that changes it
        // invalidates the directory's inode); an archive's directory is
        // listed again each time (files come and go without a word).
        let what = || self.core.path(ino.0);
        match call("opendir", &what, || self.core.opendir(ino.0)) {
            Ok(o) if o.cache => reply.opened(
                FileHandle(o.fh),
                FopenFlags::FOPEN_CACHE_DIR | FopenFlags::FOPEN_KEEP_CACHE,
            ),
            Ok(o) => reply.opened(FileHandle(o.fh), FopenFlags::empty()),
            Err(errno) => reply.error(errno),
        }
    }

    fn releasedir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        let _counted = self.counted(Op::Releasedir);
        let what = || self.core.path(ino.0);
        let _ = contain_panic("releasedir", &what, || self.core.releasedir(fh.0));
        reply.ok()
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        let _counted = self.counted(Op::Forget);
        let _ = contain_panic("forget", &String::new, || self.core.forget(ino.0, nlookup));
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        // Served here or, when it may wait on the network, on a thread
        // of its own: this thread goes back to the kernel's next request.
        // Counted from now to the answer, wherever it is sent from.
        let arrived = Instant::now();
        let core = self.core.clone();
        self.core.serve_read(ino.0, offset, size, move || {
            let started = Instant::now();
            let what = || format!("{} offset {offset} size {size}", core.path(ino.0));
            let read = call("read", &what, || core.read_data(ino.0, fh.0, offset, size));
            match read {
                Ok(data) => {
                    log::debug!(
                        "read {} offset {offset} size {size}: {} bytes in {:?}",
                        core.path(ino.0),
                        data.len(),
                        started.elapsed()
                    );
                    reply.data(&data)
                }
                Err(errno) => reply.error(errno),
            }
            core.stats().record_op(Op::Read, arrived.elapsed());
        });
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let _counted = self.counted(Op::Readdir);
        let what = || format!("{} offset {offset}", self.core.path(ino.0));
        let listed = call("readdir", &what, || {
            self.core
                .readdir(ino.0, fh.0, offset, &mut DirReply(&mut reply))
        });
        match listed {
            Ok(()) => reply.ok(),
            Err(errno) => reply.error(errno),
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let _counted = self.counted(Op::Statfs);
        match contain_panic("statfs", &String::new, || self.core.statfs()) {
            Ok(s) => reply.statfs(s.blocks, 0, 0, s.files, 0, s.bsize, s.namelen, s.bsize),
            Err(errno) => reply.error(errno),
        }
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let _counted = self.counted(Op::Getxattr);
        let what = || format!("{} {}", self.core.path(ino.0), name.to_string_lossy());
        match call("getxattr", &what, || self.core.getxattr(ino.0, name, size)) {
            Ok(XattrReply::Size(n)) => reply.size(n),
            Ok(XattrReply::Data(d)) => reply.data(&d),
            Err(errno) => reply.error(errno),
        }
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let _counted = self.counted(Op::Listxattr);
        let what = || self.core.path(ino.0);
        match call("listxattr", &what, || self.core.listxattr(ino.0, size)) {
            Ok(XattrReply::Size(n)) => reply.size(n),
            Ok(XattrReply::Data(d)) => reply.data(&d),
            Err(errno) => reply.error(errno),
        }
    }

    fn access(&self, _req: &Request, ino: INodeNo, mask: fuser::AccessFlags, reply: ReplyEmpty) {
        let _counted = self.counted(Op::Access);
        // Only reached without default_permissions; the mount sets it, so
        // this is a fallback: existence, and no writing.
        let what = || self.core.path(ino.0);
        match call("access", &what, || self.core.getattr(ino.0)) {
            Ok(_) if mask.contains(fuser::AccessFlags::W_OK) => reply.error(read_only("access")),
            Ok(_) => reply.ok(),
            Err(errno) => reply.error(errno),
        }
    }

    // Everything that would modify the tree. The mount is `ro`, so the
    // kernel answers most of these itself; these are the belt to its braces.

    fn setattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        _size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let _counted = self.counted(Op::Other);
        reply.error(read_only("setattr"))
    }

    fn mknod(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _mode: u32,
        _umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        let _counted = self.counted(Op::Other);
        reply.error(read_only("mknod"))
    }

    fn mkdir(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        let _counted = self.counted(Op::Other);
        reply.error(read_only("mkdir"))
    }

    fn unlink(&self, _req: &Request, _parent: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        let _counted = self.counted(Op::Other);
        reply.error(read_only("unlink"))
    }

    fn rmdir(&self, _req: &Request, _parent: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        let _counted = self.counted(Op::Other);
        reply.error(read_only("rmdir"))
    }

    fn symlink(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _link_name: &OsStr,
        _target: &Path,
        reply: ReplyEntry,
    ) {
        let _counted = self.counted(Op::Other);
        reply.error(read_only("symlink"))
    }

    fn rename(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _newparent: INodeNo,
        _newname: &OsStr,
        _flags: fuser::RenameFlags,
        reply: ReplyEmpty,
    ) {
        let _counted = self.counted(Op::Other);
        reply.error(read_only("rename"))
    }

    fn link(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _newparent: INodeNo,
        _newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let _counted = self.counted(Op::Other);
        reply.error(read_only("link"))
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _offset: u64,
        _data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let _counted = self.counted(Op::Other);
        reply.error(read_only("write"))
    }

    fn create(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let _counted = self.counted(Op::Other);
        reply.error(read_only("create"))
    }

    fn setxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _value: &[u8],
        _flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        let _counted = self.counted(Op::Other);
        reply.error(read_only("setxattr"))
    }

    fn removexattr(&self, _req: &Request, _ino: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        let _counted = self.counted(Op::Other);
        reply.error(read_only("removexattr"))
    }

    fn fallocate(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _offset: u64,
        _length: u64,
        _mode: i32,
        reply: ReplyEmpty,
    ) {
        let _counted = self.counted(Op::Other);
        reply.error(read_only("fallocate"))
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        let _counted = self.counted(Op::Other);
        // Called on every close(); nothing is ever buffered.
        reply.ok()
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let _counted = self.counted(Op::Other);
        // Nothing to sync: succeed, as on any read-only file.
        reply.ok()
    }

    fn ioctl(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _flags: IoctlFlags,
        cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
        reply: ReplyIoctl,
    ) {
        let _counted = self.counted(Op::Other);
        // No ioctl is supported: ENOTTY, quietly (module docs).
        static FIRST: std::sync::Once = std::sync::Once::new();
        FIRST.call_once(|| {
            log::debug!(
                "ioctl {cmd:#x} on inode {ino:?} answered ENOTTY (no ioctl is supported; \
                 further ones are not logged)"
            )
        });
        reply.error(Errno::ENOTTY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_eio_and_the_thread_lives_on() {
        let what = || "x offset 0 size 1".to_string();
        assert_eq!(contain_panic("read", &what, || 7), Ok(7));
        let r: Result<(), Errno> = contain_panic("read", &what, || panic!("boom"));
        assert_eq!(r, Err(Errno::EIO));
        let r: Result<(), Errno> =
            contain_panic("read", &what, || panic!("{}", String::from("formatted")));
        assert_eq!(r, Err(Errno::EIO));
        // Still usable afterwards.
        assert_eq!(contain_panic("read", &what, || 8), Ok(8));
    }

    #[test]
    fn call_replies_the_errors_errno_or_eio_for_a_panic() {
        let what = || "a/b".to_string();
        assert_eq!(call("lookup", &what, || Ok(3)), Ok(3));
        let missing = || -> FsResult<()> { Err(FsError::NotFound("a/b".into())) };
        assert_eq!(call("lookup", &what, missing), Err(Errno::ENOENT));
        let bug = || -> FsResult<()> { panic!("bug") };
        assert_eq!(call("getattr", &what, bug), Err(Errno::EIO));
    }
}
