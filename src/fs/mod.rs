//! The filesystem: a dataset's arrays as a read-only tree of flat files.
//!
//! This module is the pure core. [`SlabFs`] answers `lookup`, `getattr`,
//! `readdir`, `open`, `read`, `getxattr`, `listxattr` and `statfs` in plain
//! Rust, returning [`FsResult`]; [`fuse`] is the thin `fuser::Filesystem`
//! adapter that converts types, replies and logs; [`mount`] runs the daemon
//! (mount point checks, signals, unmount). The core's tests call it
//! directly, without mounting; `tests/mount.rs` mounts for real.
//!
//! # Layout
//!
//! The tree mirrors [`crate::dataset::open`]: each entry's path components
//! become directories and the array is a file at its path, exactly the
//! paths `slabfs ls` prints. Next to each array `NAME` is its sidecar
//! `NAME.json` ([`sidecar`]) unless another node already has that name.
//! An entry whose path is also a directory (an array `a` beside an array
//! `a/b`) or is not a clean relative path is left out with a warning.
//!
//! # Inodes
//!
//! All paths (directories, arrays, sidecars) are sorted bytewise at mount
//! time and numbered in that order, the root being 1 (`FUSE_ROOT_ID`). The
//! same source therefore gets the same inode numbers on every mount, which
//! tools that remember `(st_dev, st_ino)` (rsync, tar, backup indexers)
//! rely on. Nodes are never forgotten: the tree is small (one node per array
//! and directory) and immutable while mounted.
//!
//! # Semantics
//!
//! Read-only: everything that would change the tree is [`FsError::ReadOnly`]
//! (EROFS), and the mount is also `ro` so the kernel refuses most of it
//! before asking. Files are 0444 and directories 0555, owned by the
//! configured uid/gid; `st_size` is exact (elements x item size), `st_blocks`
//! is the size in 512-byte units. Reads are clamped at EOF by
//! [`crate::read::read_at`]; a failed read is [`FsError::Read`], carrying the
//! path, offset, size and the library error (which names the chunk file).

pub mod error;
pub mod fuse;
pub mod mount;
pub mod sidecar;
pub mod views;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::OsStr;
use std::sync::Arc;
use std::time::SystemTime;

use crate::array::ArraySource;
use crate::dataset::Entry;
use crate::dtype::Endian;
use crate::read::read_at;

pub use error::{FsError, FsResult};

/// The root directory's inode number (the kernel's `FUSE_ROOT_ID`).
pub const ROOT_INO: u64 = 1;

/// `st_blksize` of every file: the "preferred I/O size" that stdio, Fortran
/// runtimes and `cp` size their buffers by. 128 KiB is the kernel's default
/// FUSE readahead, so a buffered reader asks for what one request carries
/// instead of 4 KiB at a time.
pub const BLKSIZE: u32 = 128 * 1024;

/// Longest name `statfs` reports (the usual NAME_MAX).
const NAME_MAX: u32 = 255;

/// How the core presents the dataset.
#[derive(Debug, Clone)]
pub struct FsConfig {
    /// Byte order of every array file (and of the typestrs in sidecars and
    /// xattrs).
    pub byte_order: Endian,
    /// Owner of every node.
    pub uid: u32,
    pub gid: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Directory,
    File,
}

/// What `stat` shows for a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attr {
    pub ino: u64,
    pub kind: Kind,
    pub size: u64,
    /// 512-byte blocks.
    pub blocks: u64,
    pub perm: u16,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    /// Modification (and access, change) time: the mount time.
    pub mtime: SystemTime,
    pub blksize: u32,
}

/// What `statfs` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Statfs {
    /// Total size of all files, in `bsize` units; nothing is free.
    pub blocks: u64,
    pub files: u64,
    pub bsize: u32,
    pub namelen: u32,
}

/// Where `readdir` puts entries: the FUSE reply buffer in the adapter, a
/// `Vec` in tests. `add` returns true when the buffer is full (the entry
/// was not added).
pub trait DirSink {
    fn add(&mut self, ino: u64, next_offset: u64, kind: Kind, name: &str) -> bool;
}

/// The answer to `getxattr`/`listxattr` for a caller buffer of `size`
/// bytes: the size it needs (when it asked with 0) or the bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum XattrReply {
    Size(u32),
    Data(Vec<u8>),
}

enum Content {
    /// Children sorted by name.
    Dir(Vec<(String, u64)>),
    Array(Arc<dyn ArraySource>),
    /// A sidecar document, generated at mount time.
    Bytes(Vec<u8>),
}

struct Node {
    /// Path from the mount root, no leading slash; "" for the root.
    path: String,
    parent: u64,
    content: Content,
    xattrs: Vec<(&'static str, Vec<u8>)>,
}

impl Node {
    fn kind(&self) -> Kind {
        match self.content {
            Content::Dir(_) => Kind::Directory,
            Content::Array(_) | Content::Bytes(_) => Kind::File,
        }
    }

    fn size(&self) -> u64 {
        match &self.content {
            Content::Dir(_) => 0,
            Content::Array(a) => a.meta().nbytes(),
            Content::Bytes(b) => b.len() as u64,
        }
    }
}

/// The mounted tree. Immutable after [`SlabFs::new`], so every method takes
/// `&self` and requests run on any number of threads without locks (the
/// chunk cache inside the sources does its own locking).
pub struct SlabFs {
    /// `nodes[ino - 1]`.
    nodes: Vec<Node>,
    config: FsConfig,
    mtime: SystemTime,
    total_bytes: u64,
}

/// What a path is while the tree is being built.
enum Planned {
    Dir,
    Array(Arc<dyn ArraySource>),
    Sidecar(Arc<dyn ArraySource>),
}

/// A path `dataset::open` may produce and the tree can hold: relative,
/// `/`-separated, no empty, `.` or `..` components, no NUL.
fn clean_path(path: &str) -> bool {
    !path.is_empty()
        && !path.contains('\0')
        && path
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..")
}

fn parent_of(path: &str) -> &str {
    path.rsplit_once('/').map(|(p, _)| p).unwrap_or("")
}

fn name_of(path: &str) -> &str {
    path.rsplit_once('/').map(|(_, n)| n).unwrap_or(path)
}

impl SlabFs {
    /// Build the tree of `entries` (as `dataset::open` lists them).
    pub fn new(entries: &[Entry], config: FsConfig) -> SlabFs {
        let mut arrays: BTreeMap<String, Arc<dyn ArraySource>> = BTreeMap::new();
        for e in entries {
            if !clean_path(&e.path) {
                log::warn!(
                    "not shown: array path {:?} is not a clean relative path",
                    e.path
                );
            } else if arrays.insert(e.path.clone(), e.array.clone()).is_some() {
                log::warn!("not shown: a second array at {:?}", e.path);
            }
        }
        let mut dirs: BTreeSet<String> = BTreeSet::new();
        for path in arrays.keys() {
            let mut p = parent_of(path);
            while !p.is_empty() && dirs.insert(p.to_string()) {
                p = parent_of(p);
            }
        }
        arrays.retain(|path, _| {
            let keep = !dirs.contains(path);
            if !keep {
                log::warn!("not shown: array {path:?} has the path of a directory");
            }
            keep
        });

        let mut plan: BTreeMap<String, Planned> = BTreeMap::new();
        plan.insert(String::new(), Planned::Dir);
        for d in dirs {
            plan.insert(d, Planned::Dir);
        }
        for (path, array) in &arrays {
            plan.insert(path.clone(), Planned::Array(array.clone()));
        }
        for (path, array) in &arrays {
            let side = format!("{path}.json");
            match plan.entry(side) {
                std::collections::btree_map::Entry::Occupied(taken) => {
                    log::info!("no sidecar for {path}: {} is taken", taken.key());
                }
                std::collections::btree_map::Entry::Vacant(v) => {
                    v.insert(Planned::Sidecar(array.clone()));
                }
            }
        }

        // BTreeMap iteration is the sorted path order: the inode numbers.
        let inos: HashMap<&str, u64> = plan
            .keys()
            .enumerate()
            .map(|(i, p)| (p.as_str(), i as u64 + ROOT_INO))
            .collect();
        let order = config.byte_order;
        let mut nodes: Vec<Node> = plan
            .iter()
            .map(|(path, planned)| {
                let parent = if path.is_empty() {
                    ROOT_INO
                } else {
                    inos[parent_of(path)]
                };
                let (content, xattrs) = match planned {
                    Planned::Dir => (Content::Dir(Vec::new()), Vec::new()),
                    Planned::Array(a) => {
                        (Content::Array(a.clone()), sidecar::xattrs(a.meta(), order))
                    }
                    Planned::Sidecar(a) => (
                        Content::Bytes(sidecar::sidecar_json(a.meta(), order)),
                        Vec::new(),
                    ),
                };
                Node {
                    path: path.clone(),
                    parent,
                    content,
                    xattrs,
                }
            })
            .collect();
        // Children in path order are in name order (they share the prefix).
        for i in 1..nodes.len() {
            let name = name_of(&nodes[i].path).to_string();
            let parent = nodes[i].parent;
            if let Content::Dir(children) = &mut nodes[(parent - ROOT_INO) as usize].content {
                children.push((name, i as u64 + ROOT_INO));
            }
        }
        let total_bytes = nodes.iter().map(Node::size).sum();
        SlabFs {
            nodes,
            config,
            mtime: SystemTime::now(),
            total_bytes,
        }
    }

    fn node(&self, ino: u64) -> FsResult<&Node> {
        ino.checked_sub(ROOT_INO)
            .and_then(|i| self.nodes.get(i as usize))
            .ok_or(FsError::NoInode(ino))
    }

    /// The path of `ino` for logs (`?` for an unknown inode).
    pub fn path(&self, ino: u64) -> &str {
        self.node(ino).map(|n| n.path.as_str()).unwrap_or("?")
    }

    /// Number of nodes, the root included.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.len() <= 1
    }

    /// Every path with its inode number, in inode order (root first).
    pub fn paths(&self) -> impl Iterator<Item = (u64, &str)> {
        self.nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (i as u64 + ROOT_INO, n.path.as_str()))
    }

    pub fn getattr(&self, ino: u64) -> FsResult<Attr> {
        let node = self.node(ino)?;
        let size = node.size();
        let (perm, nlink) = match &node.content {
            Content::Dir(children) => {
                let subdirs = children
                    .iter()
                    .filter(|(_, c)| {
                        matches!(self.nodes[(c - ROOT_INO) as usize].content, Content::Dir(_))
                    })
                    .count();
                // "." and the entry in the parent, plus each subdir's "..".
                (0o555, 2 + subdirs as u32)
            }
            _ => (0o444, 1),
        };
        Ok(Attr {
            ino,
            kind: node.kind(),
            size,
            blocks: size.div_ceil(512),
            perm,
            nlink,
            uid: self.config.uid,
            gid: self.config.gid,
            mtime: self.mtime,
            blksize: BLKSIZE,
        })
    }

    pub fn lookup(&self, parent: u64, name: &OsStr) -> FsResult<Attr> {
        let dir = self.node(parent)?;
        let Content::Dir(children) = &dir.content else {
            return Err(FsError::NotDir(dir.path.clone()));
        };
        let not_found = || {
            let name = name.to_string_lossy();
            FsError::NotFound(if dir.path.is_empty() {
                name.into_owned()
            } else {
                format!("{}/{name}", dir.path)
            })
        };
        // Every name in the tree is UTF-8: anything else is absent.
        let name = name.to_str().ok_or_else(not_found)?;
        let i = children
            .binary_search_by(|(n, _)| n.as_str().cmp(name))
            .map_err(|_| not_found())?;
        self.getattr(children[i].1)
    }

    /// List directory `ino` from position `offset`: 0 is ".", 1 "..", then
    /// the children by name. Each entry carries the offset of the next, as
    /// the kernel expects.
    pub fn readdir(&self, ino: u64, offset: u64, sink: &mut dyn DirSink) -> FsResult<()> {
        let dir = self.node(ino)?;
        let Content::Dir(children) = &dir.content else {
            return Err(FsError::NotDir(dir.path.clone()));
        };
        let dots = [(".", ino), ("..", dir.parent)];
        let entries = dots
            .iter()
            .map(|&(n, i)| (n, i))
            .chain(children.iter().map(|(n, i)| (n.as_str(), *i)));
        for (pos, (name, child)) in entries.enumerate().skip(offset as usize) {
            let kind = self.node(child)?.kind();
            if sink.add(child, pos as u64 + 1, kind, name) {
                break;
            }
        }
        Ok(())
    }

    /// Check an `opendir` of `ino`.
    pub fn opendir(&self, ino: u64) -> FsResult<()> {
        let node = self.node(ino)?;
        match node.content {
            Content::Dir(_) => Ok(()),
            _ => Err(FsError::NotDir(node.path.clone())),
        }
    }

    /// Check an `open(2)` of file `ino` with `flags`: anything but a
    /// read-only open is EROFS.
    pub fn open(&self, ino: u64, flags: i32) -> FsResult<()> {
        let node = self.node(ino)?;
        if node.kind() == Kind::Directory {
            return Err(FsError::IsDir(node.path.clone()));
        }
        if flags & libc::O_ACCMODE != libc::O_RDONLY || flags & libc::O_TRUNC != 0 {
            return Err(FsError::ReadOnly {
                op: "open for writing",
            });
        }
        Ok(())
    }

    /// Up to `size` bytes of file `ino` from `offset`: fewer only at EOF,
    /// none at or past it.
    pub fn read(&self, ino: u64, offset: u64, size: u32) -> FsResult<Vec<u8>> {
        let node = self.node(ino)?;
        match &node.content {
            Content::Dir(_) => Err(FsError::IsDir(node.path.clone())),
            Content::Bytes(b) => {
                let start = offset.min(b.len() as u64) as usize;
                let end = offset.saturating_add(size as u64).min(b.len() as u64) as usize;
                Ok(b[start..end].to_vec())
            }
            Content::Array(a) => {
                let len = (size as u64).min(a.meta().nbytes().saturating_sub(offset)) as usize;
                let mut buf = vec![0u8; len];
                let n = read_at(a.as_ref(), offset, &mut buf, self.config.byte_order).map_err(
                    |source| FsError::Read {
                        path: node.path.clone(),
                        offset,
                        size,
                        source: Box::new(source),
                    },
                )?;
                buf.truncate(n);
                Ok(buf)
            }
        }
    }

    pub fn getxattr(&self, ino: u64, name: &OsStr, size: u32) -> FsResult<XattrReply> {
        let node = self.node(ino)?;
        let value = node
            .xattrs
            .iter()
            .find(|(n, _)| OsStr::new(n) == name)
            .map(|(_, v)| v)
            .ok_or_else(|| FsError::NoXattr {
                path: node.path.clone(),
                name: name.to_string_lossy().into_owned(),
            })?;
        fit(&node.path, value.clone(), size)
    }

    /// The NUL-terminated names of the xattrs of `ino`.
    pub fn listxattr(&self, ino: u64, size: u32) -> FsResult<XattrReply> {
        let node = self.node(ino)?;
        let mut list = Vec::new();
        for (n, _) in &node.xattrs {
            list.extend_from_slice(n.as_bytes());
            list.push(0);
        }
        fit(&node.path, list, size)
    }

    pub fn statfs(&self) -> Statfs {
        const BSIZE: u32 = 4096;
        Statfs {
            blocks: self.total_bytes.div_ceil(BSIZE as u64),
            files: self.nodes.len() as u64,
            bsize: BSIZE,
            namelen: NAME_MAX,
        }
    }
}

/// getxattr/listxattr size protocol: 0 asks for the size; a buffer too
/// small is ERANGE.
fn fit(path: &str, value: Vec<u8>, size: u32) -> FsResult<XattrReply> {
    if size == 0 {
        Ok(XattrReply::Size(value.len() as u32))
    } else if value.len() > size as usize {
        Err(FsError::XattrRange {
            path: path.to_string(),
            len: value.len(),
            size,
        })
    } else {
        Ok(XattrReply::Data(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array::ArrayMeta;
    use crate::dtype::DataType;
    use crate::error::{Error, Result};
    use crate::index::Region;

    /// A 1-D uint16 array whose element i is i (native order); reads of
    /// elements at or past `bad_from` fail like a corrupt chunk.
    struct Ramp {
        meta: ArrayMeta,
        bad_from: u64,
    }

    impl ArraySource for Ramp {
        fn meta(&self) -> &ArrayMeta {
            &self.meta
        }
        fn read_region(&self, r: &Region, out: &mut [u8]) -> Result<()> {
            let (start, count) = (r.start[0], r.count[0]);
            if start + count > self.bad_from {
                return Err(Error::metadata("ramp/c/9", "corrupt chunk"));
            }
            for (k, o) in out.chunks_exact_mut(2).enumerate() {
                o.copy_from_slice(&((start + k as u64) as u16).to_ne_bytes());
            }
            Ok(())
        }
    }

    fn ramp(n: u64, bad_from: u64) -> Arc<dyn ArraySource> {
        let meta = ArrayMeta::new("ramp", vec![n], DataType::UInt16, vec![0, 0]).unwrap();
        Arc::new(Ramp { meta, bad_from })
    }

    fn entry(path: &str, array: Arc<dyn ArraySource>) -> Entry {
        Entry {
            path: path.into(),
            array,
        }
    }

    fn fs(entries: &[Entry]) -> SlabFs {
        SlabFs::new(
            entries,
            FsConfig {
                byte_order: Endian::Little,
                uid: 1234,
                gid: 5678,
            },
        )
    }

    impl DirSink for Vec<(u64, u64, Kind, String)> {
        fn add(&mut self, ino: u64, next: u64, kind: Kind, name: &str) -> bool {
            self.push((ino, next, kind, name.to_string()));
            false
        }
    }

    /// Takes at most `cap` entries, like a small kernel buffer.
    struct Small(Vec<String>, usize);
    impl DirSink for Small {
        fn add(&mut self, _: u64, _: u64, _: Kind, name: &str) -> bool {
            if self.0.len() == self.1 {
                return true;
            }
            self.0.push(name.to_string());
            false
        }
    }

    fn lookup_path(fs: &SlabFs, path: &str) -> FsResult<Attr> {
        let mut attr = fs.getattr(ROOT_INO)?;
        for c in path.split('/') {
            attr = fs.lookup(attr.ino, OsStr::new(c))?;
        }
        Ok(attr)
    }

    #[test]
    fn layout_inodes_and_attrs() {
        let fs = fs(&[
            entry("runs/b.zarr/temp", ramp(10, u64::MAX)),
            entry("runs/a.zarr", ramp(3, u64::MAX)),
            entry("top", ramp(1, u64::MAX)),
        ]);
        let paths: Vec<(u64, &str)> = fs.paths().collect();
        assert_eq!(
            paths,
            vec![
                (1, ""),
                (2, "runs"),
                (3, "runs/a.zarr"),
                (4, "runs/a.zarr.json"),
                (5, "runs/b.zarr"),
                (6, "runs/b.zarr/temp"),
                (7, "runs/b.zarr/temp.json"),
                (8, "top"),
                (9, "top.json"),
            ]
        );
        let root = fs.getattr(ROOT_INO).unwrap();
        assert_eq!(
            (root.kind, root.perm, root.nlink, root.uid, root.gid),
            (Kind::Directory, 0o555, 3, 1234, 5678)
        );
        let temp = lookup_path(&fs, "runs/b.zarr/temp").unwrap();
        assert_eq!(
            (
                temp.ino,
                temp.kind,
                temp.size,
                temp.blocks,
                temp.perm,
                temp.nlink
            ),
            (6, Kind::File, 20, 1, 0o444, 1)
        );
        assert_eq!(fs.getattr(2).unwrap().nlink, 3); // runs: a.zarr is a file
        assert!(matches!(
            lookup_path(&fs, "runs/nope"),
            Err(FsError::NotFound(p)) if p == "runs/nope"
        ));
        assert!(matches!(
            fs.lookup(8, OsStr::new("x")),
            Err(FsError::NotDir(_))
        ));
        assert!(matches!(fs.getattr(99), Err(FsError::NoInode(99))));

        // Same entries in another order: same inode numbers.
        let again = self::fs(&[
            entry("top", ramp(1, u64::MAX)),
            entry("runs/a.zarr", ramp(3, u64::MAX)),
            entry("runs/b.zarr/temp", ramp(10, u64::MAX)),
        ]);
        assert!(fs.paths().eq(again.paths()));

        let st = fs.statfs();
        let side: u64 = [4, 7, 9].iter().map(|&i| fs.getattr(i).unwrap().size).sum();
        assert_eq!(st.blocks, (20 + 6 + 2 + side).div_ceil(4096));
        assert_eq!(st.files, 9);
    }

    #[test]
    fn readdir_offsets_resume() {
        let fs = fs(&[
            entry("d/x", ramp(1, u64::MAX)),
            entry("d/y", ramp(1, u64::MAX)),
        ]);
        let d = lookup_path(&fs, "d").unwrap().ino;
        let mut all: Vec<(u64, u64, Kind, String)> = Vec::new();
        fs.readdir(d, 0, &mut all).unwrap();
        let names: Vec<&str> = all.iter().map(|e| e.3.as_str()).collect();
        assert_eq!(names, [".", "..", "x", "x.json", "y", "y.json"]);
        assert_eq!(all[1].0, ROOT_INO);
        assert_eq!(
            all.iter().map(|e| e.1).collect::<Vec<_>>(),
            [1, 2, 3, 4, 5, 6]
        );
        // Resume from each entry's offset, two at a time.
        let mut got = Vec::new();
        let mut offset = 0;
        loop {
            let mut small = Small(Vec::new(), 2);
            fs.readdir(d, offset, &mut small).unwrap();
            if small.0.is_empty() {
                break;
            }
            offset += small.0.len() as u64;
            got.extend(small.0);
        }
        assert_eq!(got, names);
        assert!(matches!(
            fs.readdir(lookup_path(&fs, "d/x").unwrap().ino, 0, &mut all),
            Err(FsError::NotDir(_))
        ));
    }

    #[test]
    fn conflicts_and_bad_paths_are_left_out() {
        let fs = fs(&[
            entry("a", ramp(1, u64::MAX)),
            entry("a/b", ramp(1, u64::MAX)),
            entry("c", ramp(1, u64::MAX)),
            entry("c.json", ramp(2, u64::MAX)),
            entry("../up", ramp(1, u64::MAX)),
            entry("x//y", ramp(1, u64::MAX)),
        ]);
        let paths: Vec<&str> = fs.paths().map(|(_, p)| p).collect();
        assert_eq!(
            paths,
            ["", "a", "a/b", "a/b.json", "c", "c.json", "c.json.json"]
        );
        // c.json is the array, not c's sidecar.
        assert_eq!(lookup_path(&fs, "c.json").unwrap().size, 4);
    }

    #[test]
    fn reads_clamp_and_report_errors() {
        let fs = fs(&[entry("r", ramp(100, 50))]);
        let r = lookup_path(&fs, "r").unwrap().ino;
        let head = fs.read(r, 0, 8).unwrap();
        assert_eq!(head, [0, 0, 1, 0, 2, 0, 3, 0]);
        assert_eq!(fs.read(r, 3, 2).unwrap(), [0, 2]); // mid-element
        assert!(fs.read(r, 0, 0).unwrap().is_empty());
        assert!(fs.read(r, 200, 10).unwrap().is_empty());
        assert!(fs.read(r, u64::MAX, 10).unwrap().is_empty());
        // Element 50 onwards is "corrupt": EIO with the whole story.
        assert_eq!(fs.read(r, 90, 10).unwrap().len(), 10);
        let err = fs.read(r, 96, 1 << 17).unwrap_err();
        assert_eq!(err.errno(), libc::EIO);
        let msg = err.to_string();
        assert!(
            msg.contains("r offset 96 size 131072: ") && msg.contains("ramp/c/9"),
            "{msg}"
        );
        // The sidecar reads as its document, clamped too.
        let side = lookup_path(&fs, "r.json").unwrap();
        let doc = fs.read(side.ino, 0, 1 << 20).unwrap();
        assert_eq!(doc.len() as u64, side.size);
        let v: serde_json::Value = serde_json::from_slice(&doc).unwrap();
        assert_eq!(v["dtype"], "<u2");
        assert_eq!(fs.read(side.ino, side.size - 1, 10).unwrap(), b"\n");
        assert!(matches!(fs.read(ROOT_INO, 0, 1), Err(FsError::IsDir(_))));
    }

    #[test]
    fn big_endian_reads_swap() {
        let fs = SlabFs::new(
            &[entry("r", ramp(4, u64::MAX))],
            FsConfig {
                byte_order: Endian::Big,
                uid: 0,
                gid: 0,
            },
        );
        assert_eq!(fs.read(2, 0, 8).unwrap(), [0, 0, 0, 1, 0, 2, 0, 3]);
        assert_eq!(
            fs.getxattr(2, OsStr::new(sidecar::XATTR_DTYPE), 64)
                .unwrap(),
            XattrReply::Data(b">u2".to_vec())
        );
    }

    #[test]
    fn open_is_read_only() {
        let fs = fs(&[entry("r", ramp(4, u64::MAX))]);
        assert!(fs.open(2, libc::O_RDONLY).is_ok());
        for flags in [libc::O_WRONLY, libc::O_RDWR, libc::O_RDONLY | libc::O_TRUNC] {
            assert_eq!(fs.open(2, flags).unwrap_err().errno(), libc::EROFS);
        }
        assert!(matches!(
            fs.open(ROOT_INO, libc::O_RDONLY),
            Err(FsError::IsDir(_))
        ));
        assert!(fs.opendir(ROOT_INO).is_ok());
        assert!(matches!(fs.opendir(2), Err(FsError::NotDir(_))));
    }

    #[test]
    fn xattrs() {
        let fs = fs(&[entry("r", ramp(4, u64::MAX))]);
        let shape = OsStr::new(sidecar::XATTR_SHAPE);
        assert_eq!(fs.getxattr(2, shape, 0).unwrap(), XattrReply::Size(3));
        assert_eq!(
            fs.getxattr(2, shape, 3).unwrap(),
            XattrReply::Data(b"[4]".to_vec())
        );
        assert_eq!(fs.getxattr(2, shape, 2).unwrap_err().errno(), libc::ERANGE);
        assert_eq!(
            fs.getxattr(2, OsStr::new("user.other"), 10)
                .unwrap_err()
                .errno(),
            libc::ENODATA
        );
        assert_eq!(
            fs.getxattr(ROOT_INO, shape, 10).unwrap_err().errno(),
            libc::ENODATA
        );
        let XattrReply::Data(list) = fs.listxattr(2, 1000).unwrap() else {
            panic!()
        };
        assert_eq!(
            list,
            b"user.slabfs.shape\0user.slabfs.dtype\0user.slabfs.dims\0"
        );
        assert_eq!(fs.listxattr(ROOT_INO, 0).unwrap(), XattrReply::Size(0));
    }
}
