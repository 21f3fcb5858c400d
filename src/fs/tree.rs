//! One dataset's nodes: built from its arrays and directories, compared
//! with the previous version on a refresh. Plain data and functions: no
//! request, lock or kernel here, so they are tested without a mount.
//!
//! A [`Tree`] holds the nodes of one dataset of an archive (rooted at the
//! dataset's mount path), or of the whole mount when it shows one dataset.
//! How the nodes are laid out (views, sidecars, conflicts) is described in
//! the module docs of [`super`].

pub(super) use super::paths::{child_path, name_of, parent_of};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::SystemTime;

use super::georef::Coordinates;
use super::{sidecar, views};
use crate::dtype::Endian;
use crate::engine::array::{ArraySource, ChangeStamp};
use crate::formats::dataset::{Directory, Entry};

/// Longest name `statfs` reports (the usual NAME_MAX).
pub(super) const NAME_MAX: u32 = 255;

/// How the core presents the dataset.
#[derive(Debug, Clone)]
pub struct FsConfig {
    /// Byte order of every array file (and of the typestrs in sidecars,
    /// headers and xattrs).
    pub byte_order: Endian,
    /// Owner of every node.
    pub uid: u32,
    pub gid: u32,
    /// Which files each array shows.
    pub views: views::Views,
    /// Take every array's [`ChangeStamp`] when it enters the tree, as live
    /// refresh needs (a stamp must predate anything cached from the array).
    /// Costs a walk of the source's files at mount, so it is off when the
    /// mount does not refresh.
    pub track_changes: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Directory,
    File,
}

pub(super) type Xattrs = Arc<[(&'static str, Vec<u8>)]>;

/// An array in the tree, with everything derived from its metadata
/// (computed once, when the array is opened) and its change stamp.
#[derive(Clone)]
pub(super) struct Tracked {
    pub array: Arc<dyn ArraySource>,
    pub stamp: ChangeStamp,
    pub xattrs: Xattrs,
    pub sidecar: Option<Arc<[u8]>>,
    pub npy: Option<Arc<[u8]>>,
    pub hdr: Option<Arc<[u8]>>,
    /// The paths where the `.hdr`'s coordinates were looked for
    /// ([`Coordinates::grid`]): a refresh that changes, adds or removes
    /// an array at one of them builds this one again.
    pub georef_from: Arc<[String]>,
}

impl Tracked {
    /// The array at `path` with everything derived from its metadata; its
    /// `.hdr` places it on the globe when `coords` holds regular
    /// latitude / longitude coordinates of its last two dimensions.
    pub fn new(
        path: &str,
        array: Arc<dyn ArraySource>,
        stamp: ChangeStamp,
        config: &FsConfig,
        coords: &Coordinates,
    ) -> Tracked {
        let (meta, order, views) = (array.meta(), config.byte_order, config.views);
        let mut georef_from = Vec::new();
        // The ENVI header describes the raw file beside it: without that
        // file it would describe nothing.
        let hdr = if views.hdr && views.raw {
            // Coordinates are read only for an array that gets a header.
            let text = views::envi_header(meta, order, None).and_then(|plain| {
                let (grid, looked) = coords.grid(path, meta);
                georef_from = looked;
                match grid {
                    Some(grid) => views::envi_header(meta, order, Some(&grid)),
                    None => Ok(plain),
                }
            });
            match text {
                Ok(text) => Some(Arc::from(text.into_bytes())),
                Err(why) => {
                    log::debug!("no {path}.hdr: {why}");
                    None
                }
            }
        } else {
            None
        };
        Tracked {
            georef_from: georef_from.into(),
            xattrs: sidecar::xattrs(meta, order).into(),
            sidecar: views
                .json
                .then(|| sidecar::sidecar_json(meta, order).into()),
            npy: views.npy.then(|| views::npy_header(meta, order).into()),
            hdr,
            stamp,
            array,
        }
    }
}

/// A directory's attributes with what is derived from them (computed
/// once, when the dataset is opened).
pub(super) struct DirDoc {
    pub dir: Directory,
    pub xattrs: Xattrs,
    pub sidecar: Option<Arc<[u8]>>,
}

impl DirDoc {
    pub fn new(path: &str, dir: Directory, config: &FsConfig) -> Arc<DirDoc> {
        Arc::new(DirDoc {
            xattrs: sidecar::directory_xattrs(path, &dir).into(),
            sidecar: config
                .views
                .json
                .then(|| sidecar::directory_json(&dir).into()),
            dir,
        })
    }
}

pub(super) enum Content {
    /// Children (name, kind) sorted by name.
    Dir(Vec<(String, Kind)>),
    /// The flat bytes of `array` after `header`: empty for the raw file,
    /// the NumPy header for `NAME.npy`.
    Array {
        array: Arc<dyn ArraySource>,
        header: Arc<[u8]>,
    },
    /// A document generated when the array was opened (sidecar, ENVI
    /// header).
    Bytes(Arc<[u8]>),
}

impl Content {
    /// Whether the kernel's cached pages and attributes of a node with
    /// content `self` are still right for `other`.
    pub fn same_as(&self, other: &Content) -> bool {
        match (self, other) {
            (Content::Dir(a), Content::Dir(b)) => a == b,
            (
                Content::Array {
                    array: a,
                    header: ha,
                },
                Content::Array {
                    array: b,
                    header: hb,
                },
            ) => Arc::ptr_eq(a, b) && ha == hb,
            (Content::Bytes(a), Content::Bytes(b)) => a == b,
            _ => false,
        }
    }
}

pub(super) struct Node {
    pub content: Content,
    pub xattrs: Xattrs,
    pub mtime: SystemTime,
}

impl Node {
    pub fn kind(&self) -> Kind {
        match self.content {
            Content::Dir(_) => Kind::Directory,
            Content::Array { .. } | Content::Bytes(_) => Kind::File,
        }
    }

    pub fn size(&self) -> u64 {
        match &self.content {
            Content::Dir(_) => 0,
            Content::Array { array, header } => {
                (header.len() as u64).saturating_add(array.meta().nbytes())
            }
            Content::Bytes(b) => b.len() as u64,
        }
    }
}

/// One version of one dataset's nodes (of the whole mount's, for a mount
/// of one dataset). Immutable: a refresh builds a new one.
pub(super) struct Tree {
    /// The dataset's mount path ("": the mount's root).
    pub root: String,
    /// Every node by mount path: the root (a directory, or the array of a
    /// single-array Zarr store), what is under it and the views of an
    /// array at the root (beside it, outside the root).
    pub nodes: HashMap<String, Node>,
    /// Every array of the dataset by path, including the ones not shown
    /// (a path conflict), so a refresh compares like with like.
    pub arrays: BTreeMap<String, Tracked>,
    /// Every directory's attributes by path, including the ones not shown.
    pub directories: BTreeMap<String, Arc<DirDoc>>,
    pub total_bytes: u64,
    /// Directories the dataset lists to know what it holds (an NcML
    /// scan's): watched like the directories in use
    /// ([`crate::formats::entry::Dataset::watch`]).
    pub watch: Vec<std::path::PathBuf>,
    /// Open it again after this long ([`crate::formats::entry::Dataset::recheck_in`]).
    pub recheck_in: Option<std::time::Duration>,
}

/// What a path is while the tree is being built.
enum Planned<'a> {
    Dir,
    Raw(&'a Tracked),
    Npy(&'a Tracked),
    Doc(Arc<[u8]>),
}

impl Planned<'_> {
    fn kind(&self) -> Kind {
        match self {
            Planned::Dir => Kind::Directory,
            _ => Kind::File,
        }
    }
}

/// A path `Opener::open` may produce and the tree can hold: relative,
/// `/`-separated, no empty, `.` or `..` components, no NUL, no component
/// longer than [`NAME_MAX`] bytes (names come from dataset metadata;
/// `statfs` promises 255, programs size buffers by it, and other file
/// systems refuse longer names, so `cp -r` of the mount would fail).
pub(super) fn clean_path(path: &str) -> bool {
    !path.is_empty()
        && !path.contains('\0')
        && path
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != ".." && c.len() <= NAME_MAX as usize)
}

/// The arrays of `entries` the tree can hold, by path: clean paths only,
/// the first of two arrays at one path. `loud` logs what is left out at
/// warn (at mount) rather than debug (every refresh repeats it).
pub(super) fn usable_entries(
    entries: &[Entry],
    loud: bool,
) -> BTreeMap<String, Arc<dyn ArraySource>> {
    let level = if loud {
        log::Level::Warn
    } else {
        log::Level::Debug
    };
    let mut arrays: BTreeMap<String, Arc<dyn ArraySource>> = BTreeMap::new();
    for e in entries {
        if !clean_path(&e.path) {
            log::log!(
                level,
                "not shown: array path {:?} is not a clean relative path",
                e.path
            );
        } else if arrays.contains_key(&e.path) {
            log::log!(level, "not shown: a second array at {:?}", e.path);
        } else {
            arrays.insert(e.path.clone(), e.array.clone());
        }
    }
    arrays
}

/// Whether `path` is `root` or under it.
pub(super) fn under(path: &str, root: &str) -> bool {
    root.is_empty()
        || path == root
        || (path.len() > root.len()
            && path.starts_with(root)
            && path.as_bytes()[root.len()] == b'/')
}

impl Tree {
    /// The tree of the dataset at mount path `root` holding `arrays` and
    /// `directories` (mount paths, at or under `root`; anything else is
    /// left out). With `prev` (a refresh), unchanged nodes keep their
    /// mtime; new or changed ones get `now`.
    pub fn build(
        root: &str,
        arrays: BTreeMap<String, Tracked>,
        directories: BTreeMap<String, Arc<DirDoc>>,
        config: &FsConfig,
        prev: Option<&Tree>,
        now: SystemTime,
    ) -> Tree {
        let level = if prev.is_none() {
            log::Level::Warn
        } else {
            log::Level::Debug
        };
        let arrays: BTreeMap<String, Tracked> = arrays
            .into_iter()
            .filter(|(path, _)| {
                let keep = under(path, root);
                if !keep {
                    log::debug!("not shown: array {path:?} is outside its dataset /{root}");
                }
                keep
            })
            .collect();
        // The directories the arrays are in, up to the dataset's root.
        let mut dirs: BTreeSet<&str> = BTreeSet::new();
        for path in arrays.keys() {
            if path == root {
                continue;
            }
            let mut p = parent_of(path);
            while p != root && dirs.insert(p) {
                p = parent_of(p);
            }
        }
        let root_is_array = arrays.contains_key(root) && !dirs.contains(root);
        let shown: Vec<(&String, &Tracked)> = arrays
            .iter()
            .filter(|(path, _)| {
                let keep = !dirs.contains(path.as_str()) && path.as_str() != root
                    || path.as_str() == root && root_is_array;
                if !keep {
                    log::log!(
                        level,
                        "not shown: array {path:?} has the path of a directory"
                    );
                }
                keep
            })
            .collect();
        // Directories with attributes: arrays keep their paths first.
        let mut with_attrs: HashMap<&str, &DirDoc> = HashMap::new();
        for (path, d) in &directories {
            if !under(path, root) || (!path.is_empty() && !clean_path(path)) {
                log::log!(
                    level,
                    "not shown: the attributes of {path:?}: not a clean path in /{root}"
                );
                continue;
            }
            let mut p = path.as_str();
            let blocked = loop {
                if arrays.contains_key(p) && !dirs.contains(p) && (p != root || root_is_array) {
                    break true;
                }
                if p == root {
                    break false;
                }
                p = parent_of(p);
            };
            if blocked {
                log::log!(
                    level,
                    "not shown: the attributes of {path:?}: the array {p:?} has that path"
                );
                continue;
            }
            with_attrs.insert(path, d);
            let mut p = path.as_str();
            while p != root && dirs.insert(p) {
                p = parent_of(p);
            }
        }

        let mut plan: BTreeMap<String, Planned> = BTreeMap::new();
        if !root_is_array {
            plan.insert(root.to_string(), Planned::Dir);
        }
        for d in &dirs {
            plan.insert(d.to_string(), Planned::Dir);
        }
        if config.views.raw {
            for (path, t) in &shown {
                plan.insert(path.to_string(), Planned::Raw(t));
            }
        }
        for (path, t) in &shown {
            let views = [
                ("json", t.sidecar.clone().map(Planned::Doc)),
                ("npy", t.npy.as_ref().map(|_| Planned::Npy(t))),
                ("hdr", t.hdr.clone().map(Planned::Doc)),
            ];
            for (ext, planned) in views {
                let Some(planned) = planned else { continue };
                if name_of(path).len() + 1 + ext.len() > NAME_MAX as usize {
                    log::log!(level, "no {ext} view of {path}: the name would be too long");
                    continue;
                }
                match plan.entry(format!("{path}.{ext}")) {
                    std::collections::btree_map::Entry::Occupied(taken) => {
                        let level = if prev.is_none() {
                            log::Level::Info
                        } else {
                            log::Level::Debug
                        };
                        log::log!(level, "no {ext} view of {path}: {} is taken", taken.key());
                    }
                    std::collections::btree_map::Entry::Vacant(v) => {
                        v.insert(planned);
                    }
                }
            }
        }
        let mut sidecars: Vec<(&&str, &&DirDoc)> = with_attrs.iter().collect();
        sidecars.sort_by_key(|(p, _)| **p);
        for (path, d) in sidecars {
            let Some(doc) = &d.sidecar else { continue };
            match plan.entry(child_path(path, sidecar::DIRECTORY_SIDECAR)) {
                std::collections::btree_map::Entry::Occupied(taken) => {
                    let level = if prev.is_none() {
                        log::Level::Info
                    } else {
                        log::Level::Debug
                    };
                    log::log!(
                        level,
                        "no sidecar of directory /{path}: {} is taken",
                        taken.key()
                    );
                }
                std::collections::btree_map::Entry::Vacant(v) => {
                    v.insert(Planned::Doc(doc.clone()));
                }
            }
        }

        let no_xattrs: Xattrs = Arc::from(Vec::new());
        let mut nodes: HashMap<String, Node> = HashMap::with_capacity(plan.len());
        let mut children: HashMap<&str, Vec<(String, Kind)>> = HashMap::new();
        for (path, planned) in &plan {
            if path != root && under(path, root) {
                children
                    .entry(parent_of(path))
                    .or_default()
                    .push((name_of(path).to_string(), planned.kind()));
            }
            let (content, xattrs) = match planned {
                Planned::Dir => (
                    Content::Dir(Vec::new()),
                    with_attrs
                        .get(path.as_str())
                        .map_or_else(|| no_xattrs.clone(), |d| d.xattrs.clone()),
                ),
                Planned::Raw(t) => (
                    Content::Array {
                        array: t.array.clone(),
                        header: Arc::from(Vec::new()),
                    },
                    t.xattrs.clone(),
                ),
                Planned::Npy(t) => (
                    Content::Array {
                        array: t.array.clone(),
                        header: t.npy.clone().expect("planned only with a header"),
                    },
                    t.xattrs.clone(),
                ),
                Planned::Doc(bytes) => (Content::Bytes(bytes.clone()), no_xattrs.clone()),
            };
            nodes.insert(
                path.clone(),
                Node {
                    content,
                    xattrs,
                    mtime: now,
                },
            );
        }
        for (dir, mut list) in children {
            list.sort();
            if let Some(node) = nodes.get_mut(dir) {
                node.content = Content::Dir(list);
            }
        }
        if let Some(prev) = prev {
            for (path, node) in nodes.iter_mut() {
                if let Some(old) = prev.nodes.get(path)
                    && old.content.same_as(&node.content)
                {
                    node.mtime = old.mtime;
                }
            }
        }
        // Saturating: two arrays near 2^64 bytes each are legal input.
        let total_bytes = nodes
            .values()
            .map(Node::size)
            .fold(0u64, u64::saturating_add);
        Tree {
            root: root.to_string(),
            nodes,
            arrays,
            directories,
            total_bytes,
            watch: Vec::new(),
            recheck_in: None,
        }
    }

    /// The node at `path`.
    pub fn node(&self, path: &str) -> Option<&Node> {
        self.nodes.get(path)
    }

    /// The children (name, kind) of the directory at `path`, by name;
    /// `None` when no directory is there.
    pub fn children(&self, path: &str) -> Option<&[(String, Kind)]> {
        match &self.nodes.get(path)?.content {
            Content::Dir(children) => Some(children),
            _ => None,
        }
    }

    /// Every node's path and kind, sorted by path.
    pub fn paths(&self) -> Vec<(&str, Kind)> {
        let mut out: Vec<(&str, Kind)> = self
            .nodes
            .iter()
            .map(|(p, n)| (p.as_str(), n.kind()))
            .collect();
        out.sort();
        out
    }
}

/// What the kernel must be told when one dataset's tree replaces another.
pub(super) struct Diff<'a> {
    /// Paths (with their kind in the old tree) that went away or changed
    /// kind: their directory entries must go.
    pub gone: Vec<(&'a str, Kind)>,
    /// Nodes that stay but whose bytes, size or listing changed: their
    /// attributes and pages must go.
    pub changed: Vec<(&'a str, Kind)>,
}

/// [`Diff`] of `new` replacing `old`, each list sorted.
pub(super) fn diff<'a>(old: &'a Tree, new: &'a Tree) -> Diff<'a> {
    let mut gone: Vec<(&str, Kind)> = old
        .nodes
        .iter()
        .filter(|(path, n)| new.nodes.get(*path).is_none_or(|m| m.kind() != n.kind()))
        .map(|(p, n)| (p.as_str(), n.kind()))
        .collect();
    gone.sort();
    let mut changed: Vec<(&str, Kind)> = new
        .nodes
        .iter()
        .filter(|(path, n)| {
            old.nodes
                .get(*path)
                .is_some_and(|o| o.kind() == n.kind() && !o.content.same_as(&n.content))
        })
        .map(|(p, n)| (p.as_str(), n.kind()))
        .collect();
    changed.sort();
    Diff { gone, changed }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::time::Duration;

    use proptest::prelude::*;

    use super::*;
    use crate::dtype::{DataType, Endian};
    use crate::engine::array::ArrayMeta;
    use crate::engine::index::Region;

    struct Zeros(ArrayMeta);

    impl ArraySource for Zeros {
        fn meta(&self) -> &ArrayMeta {
            &self.0
        }
        fn read_region(&self, _: &Region, out: &mut [u8]) -> crate::error::Result<()> {
            out.fill(0);
            Ok(())
        }
    }

    fn config() -> FsConfig {
        FsConfig {
            byte_order: Endian::Little,
            uid: 0,
            gid: 0,
            views: views::Views::default(),
            track_changes: false,
        }
    }

    fn tracked(path: &str, n: u64) -> Tracked {
        let meta = ArrayMeta::new(path, vec![n], DataType::UInt8, vec![0]).unwrap();
        Tracked::new(
            path,
            Arc::new(Zeros(meta)),
            ChangeStamp::default(),
            &config(),
            &Coordinates::none(),
        )
    }

    /// Array paths under `root` from a small alphabet, so that paths meet
    /// (an array at a directory's path, a name taken by a view).
    fn arrays(root: &'static str) -> impl Strategy<Value = BTreeMap<String, u64>> {
        let comp = prop::sample::select(vec!["a", "b", "a.json", "c.npy"]);
        let path = prop::collection::vec(comp, 1..4).prop_map(move |c| {
            let rel = c.join("/");
            if root.is_empty() {
                rel
            } else {
                format!("{root}/{rel}")
            }
        });
        prop::collection::btree_map(path, 1..4u64, 0..8)
    }

    /// Every node but the root is listed once in its parent, with its
    /// kind, and every listed child is a node.
    fn check_links(t: &Tree) {
        for (path, node) in &t.nodes {
            if path != &t.root && under(path, &t.root) {
                let children = t
                    .children(parent_of(path))
                    .unwrap_or_else(|| panic!("{path}: no parent directory"));
                let n = children
                    .iter()
                    .filter(|(c, k)| c == name_of(path) && *k == node.kind())
                    .count();
                assert_eq!(n, 1, "{path} in its parent");
            }
            if let Content::Dir(children) = &node.content {
                for (c, k) in children {
                    let child = child_path(path, c);
                    assert_eq!(t.nodes.get(&child).map(Node::kind), Some(*k), "{child}");
                }
            }
        }
    }

    proptest! {
        #[test]
        fn trees_link_up_and_diffs_are_exact(
            root in prop::sample::select(vec!["", "runs/x.nc"]),
            old in arrays("runs/x.nc"),
            new in arrays("runs/x.nc"),
            keep in prop::collection::vec(any::<bool>(), 8),
        ) {
            let t0 = SystemTime::UNIX_EPOCH;
            let t1 = t0 + Duration::from_secs(1);
            let first: BTreeMap<String, Tracked> =
                old.iter().map(|(p, &n)| (p.clone(), tracked(p, n))).collect();
            let a = Tree::build(root, first.clone(), BTreeMap::new(), &config(), None, t0);
            check_links(&a);
            // Arrays in both keep their source (unchanged) or not.
            let second: BTreeMap<String, Tracked> = new
                .iter()
                .enumerate()
                .map(|(i, (p, &n))| match first.get(p) {
                    Some(t) if keep[i % keep.len()] => (p.clone(), t.clone()),
                    _ => (p.clone(), tracked(p, n)),
                })
                .collect();
            let b = Tree::build(root, second, BTreeMap::new(), &config(), Some(&a), t1);
            check_links(&b);
            let same = diff(&a, &a);
            prop_assert!(same.gone.is_empty() && same.changed.is_empty());
            let d = diff(&a, &b);
            let gone: BTreeSet<(&str, Kind)> = d.gone.iter().copied().collect();
            let changed: BTreeSet<(&str, Kind)> = d.changed.iter().copied().collect();
            for (path, n) in &a.nodes {
                let key = (path.as_str(), n.kind());
                match b.nodes.get(path) {
                    Some(m) if m.kind() == n.kind() => {
                        prop_assert!(!gone.contains(&key), "{path} kept but gone");
                        let differs = !n.content.same_as(&m.content);
                        prop_assert_eq!(changed.contains(&key), differs, "{}", path);
                        // An unchanged node keeps its time; a changed one is new.
                        prop_assert_eq!(m.mtime, if differs { t1 } else { n.mtime });
                    }
                    _ => prop_assert!(gone.contains(&key), "{path} went but not gone"),
                }
            }
            for (path, kind) in &d.changed {
                prop_assert!(a.nodes.contains_key(*path) && b.nodes.contains_key(*path));
                prop_assert_eq!(b.nodes[*path].kind(), *kind);
            }
        }
    }
}
