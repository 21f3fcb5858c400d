//! netCDF-4 and HDF5 files, read by slabfs's own HDF5 reader.
//!
//! Every HDF5 file (netCDF-4, netCDF-4 classic model, h5py, the HDF5 C
//! library 1.8 to 2.0) is a dataset: its numeric datasets are flat files,
//! its groups directories (`F.nc/grp/var`). This module reads the file's
//! metadata once per load and turns each dataset's storage into the
//! project's tiling (a chunk grid plus, per chunk, its file offset, size
//! and filter mask: [`array`](mod@array)); from there the Zarr machinery reads it.
//!
//! ```text
//! find_signature (0, 512, 1024...) ─ meta::superblock (v0-v3)
//!   └ walk groups: meta::object_header (v1/v2, continuations)
//!       ├ symbol table (v1 B-tree + local heap)   index::symbol_table_group
//!       ├ link messages (compact links)
//!       └ link info → dense links                 dense (fractal heap + v2 B-tree)
//!   └ each dataset: dataspace, datatype, fill value, layout, filters,
//!     attributes (compact; variable-length strings and DIMENSION_LIST
//!     through the global heap)
//!       └ index::LazyChunks (v1 B-tree, single chunk, implicit, fixed array,
//!         extensible array, v2 B-tree)
//!           └ array::array ─ ChunkedArray over a RangedStore (coordinates → range)
//! ```
//!
//! # Why our own reader
//!
//! Five pure-Rust readers were measured on the fixture corpus (docs/HDF5.md
//! has the table): none reads all of it, and the ones that read the most
//! do not hand out a dataset's chunk index (address, size, filter mask
//! per chunk) without reading the chunks, while the ones that do fail the
//! v2 B-tree or HDF5 2.0's layout message, or serialise reads behind a
//! per-file lock. Each would also bring its own chunk cache and filters
//! beside the engine's. What slabfs needs is the metadata walk alone (the
//! chunk decode, cache and projection already exist), read through
//! [`crate::storage::ReadAt`], which confinement and fault
//! injection need. Revisit when a crate exposes its chunk index and a
//! reader trait and reads the corpus.
//!
//! # What it reads
//!
//! Superblocks 0 to 3 (signature at 0 or after a user block); object
//! headers 1 and 2 with continuation blocks (every version 2 checksum
//! verified); groups by symbol table, by link messages and in dense
//! storage; attributes compact and dense (huge ones, stored outside the
//! fractal heap, too), of integer, float and string types (fixed- and
//! variable-length); shared (committed) datatypes; datasets of integers and IEEE
//! floats of either byte order and fixed-length strings (as `|S<n>`);
//! layouts compact, contiguous and chunked, in every version of the
//! layout message (1 and 2 of HDF5 1.4 too), with every chunk index HDF5
//! writes (v1 B-tree, single chunk, implicit, fixed array, extensible
//! array, v2 B-tree, paged extensible-array data blocks too), edge chunks
//! stored unfiltered, and external storage (the bytes in other files,
//! opened through [`Linked`]: [`external`]); every filter
//! the codec registry has an HDF5 id for (deflate, shuffle, fletcher32,
//! szip, scaleoffset, lzf, HDF5-framed lz4, bitshuffle, zstd, bzip2,
//! blosc), with a chunk's filter mask honoured ([`array`](mod@array));
//! virtual datasets, read from their sources in this or other files
//! ([`vds`]).
//!
//! Enums are read as their base integers (members in the sidecar,
//! [`ENUM_ATTRIBUTE`]), bitfields as unsigned integers, integers with
//! padding bits or unusual sizes widened and floats of any other layout
//! (nbit-reduced, VAX, x87 long doubles) converted to the NumPy type
//! h5py reads them as ([`convert`]); messages in the
//! shared object header message heap and files with a metadata cache
//! image are read through the superblock extension ([`extension`]).
//! Every hard link is a name (a group linked twice is walked under each;
//! a link back to an ancestor is a loop, not followed).
//!
//! Skipped, each with one line naming the file, the object and why, never
//! failing the file: types a flat file cannot carry (variable-length,
//! compound, reference, opaque, array, time; integers wider than 8 bytes
//! and floats no NumPy type holds), null dataspaces (nothing to serve),
//! objects with a message HDF5 too refuses ("fail if unknown always"), and
//! a dataset whose dense attributes cannot be read (shown without them it
//! could be misread). Soft and external links are not followed. A chunk
//! whose bytes lie past the end of the file fails its reads (EIO with a
//! message). A filter without a built-in codec (zfp, sz3...) is
//! decoded by its HDF5 filter plugin when the operator allows plugins
//! ([`crate::codec::hdf5_plugin`]); otherwise, or when no plugin provides
//! it, the dataset is still listed and reads of its chunks fail (EIO, the
//! message naming the filter id and the plugin directories). So do the
//! reads of external storage whose file is missing, outside the roots or
//! short (the message naming the file).
//!
//! Fill values follow HDF5 for never-written elements and netcdf-c for
//! the records past a shorter variable's end (`fills`).

//! # netCDF-4 conventions
//!
//! Dimension names come from `DIMENSION_LIST` (object references to the
//! dimension-scale datasets, whose names are the dimensions'), from the
//! scale itself for a coordinate variable, and from `_Netcdf4Coordinates`
//! (dimension ids, matched against `_Netcdf4Dimid`); datasets without any
//! get `phony_dim_N` as netcdf-c names them (shared by equal lengths in a
//! group, subgroups first). A variable along an unlimited dimension has the
//! dimension's netCDF length (the longest variable's), the records it
//! never had reading as its fill value ([`array::Extended`]); a variable
//! stored as `_nc4_non_coord_NAME` is shown as `NAME`. netCDF's
//! bookkeeping attributes
//! ([`HIDDEN_ATTRIBUTES`]) are not shown, and a dataset that is "a netCDF
//! dimension but not a netCDF variable" is not shown at all.

pub mod array;
pub mod convert;
pub mod dense;
pub mod error;
pub mod extension;
pub mod external;
pub mod index;
pub mod io;
pub mod message;
pub mod meta;
pub mod vds;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Number, Value};

pub use error::Hdf5Error;
pub use io::find_signature;

use crate::dtype::{DataType, Endian};
use crate::engine::array::{ArrayMeta, ArraySource};
use crate::engine::cache::ChunkCache;
use crate::error::{Error, Result};
use crate::storage::{Files, ReadAt, ReadCache};
use array::{FileRef, Storage};
use error::H5Result;
pub use external::Linked;
use external::{External, MSG_EXTERNAL};
use index::{Geometry, GlobalHeap};
use io::H5File;
use meta::{Attribute, H5Type, Layout, LinkTarget, Message};

/// Attributes netCDF-4 keeps for itself (and HDF5's dimension-scale
/// bookkeeping): never shown.
pub const HIDDEN_ATTRIBUTES: &[&str] = &[
    "_NCProperties",
    "_Netcdf4Dimid",
    "_Netcdf4Coordinates",
    "_nc3_strict",
    "DIMENSION_LIST",
    "REFERENCE_LIST",
    "CLASS",
    "NAME",
];

/// The prefix netCDF-4 stores a variable under when it has the name of a
/// dimension it is not the coordinate variable of.
const NON_COORD_PREFIX: &str = "_nc4_non_coord_";

/// The `NAME` netCDF gives a dimension that has no coordinate variable.
const NOT_A_VARIABLE: &str = "This is a netCDF dimension but not a netCDF variable";

/// Groups nested deeper than this are not read (hard links can loop).
const MAX_GROUP_DEPTH: usize = 64;

/// More names than any file of use has: a group linked under many names,
/// each holding groups linked many times, multiplies the names each
/// level (every hard link is a name of its own).
const MAX_OBJECTS: usize = 1_000_000;

/// The datasets of one HDF5 file, by path in the mount (`var`,
/// `grp/var`), and what was skipped, each error naming the file and the
/// object.
#[derive(Default)]
pub struct Contents {
    pub arrays: Vec<(String, Arc<dyn ArraySource>)>,
    pub skipped: Vec<Error>,
    /// netCDF's dimensions, named as the variables' `dimension_names` name
    /// them (a dimension scale's name; `grp/name` below the root group),
    /// with netCDF's length (the longest extent along an unlimited one)
    /// and whether it is unlimited.
    pub dimensions: Vec<(String, u64, bool)>,
    /// The attributes of the root group (`""`, netCDF's global attributes)
    /// and of every other group (`grp`, `grp/sub`), bookkeeping hidden.
    pub groups: Vec<(String, Map<String, Value>)>,
    /// Datasets of variable-length strings (netCDF `string` variables):
    /// no flat file can carry them, but an aggregation reads its small
    /// definition variables whole ([`Strings::read`]). The mount shows
    /// none of them; [`Strings::not_shown`] says why.
    pub strings: Vec<(String, Strings)>,
}

/// A dataset of variable-length strings: its elements are references into
/// the global heap, read as fixed-size elements through the ordinary
/// storage ([`array::array`]) and resolved on demand.
pub struct Strings {
    file: Arc<FileRef>,
    /// The references, `element size` bytes each.
    refs: Arc<dyn ArraySource>,
    /// The dataset's path in the file (`/grp/var`).
    what: String,
}

impl Strings {
    /// The shape of the dataset.
    pub fn shape(&self) -> &[u64] {
        &self.refs.meta().shape
    }

    /// Dimension names and attributes, as for any dataset.
    pub fn meta(&self) -> &ArrayMeta {
        self.refs.meta()
    }

    /// Every string of the dataset, row-major; refused with
    /// [`Error::TooLarge`] past `max_elements`. A string whose reference
    /// is empty (never written) is `""`.
    pub fn read(&self, max_elements: u64) -> Result<Vec<String>> {
        let meta = self.refs.meta();
        let n = meta.num_elements();
        if n > max_elements {
            return Err(Error::TooLarge {
                path: format!("{} (dataset {})", self.file.path, self.what),
                size: n,
                limit: max_elements,
            });
        }
        let mut bytes = vec![0u8; meta.nbytes() as usize];
        self.refs.read_region(
            &crate::engine::index::Region::whole(&meta.shape),
            &mut bytes,
        )?;
        let f = &self.file.f;
        let mut heap = GlobalHeap::default();
        let fmt = |e: Hdf5Error| Error::Format {
            path: self.file.path.clone(),
            source: Box::new(e),
        };
        let mut out = Vec::with_capacity(n as usize);
        for el in bytes.chunks_exact(meta.item_size().max(1)) {
            out.push(vlen_string(f, el, &mut heap, &self.what).map_err(fmt)?);
        }
        Ok(out)
    }

    /// Why the mount does not show this dataset, as the line every other
    /// skipped dataset gets.
    pub fn not_shown(&self) -> Error {
        Error::Format {
            path: format!("{} (dataset {})", self.file.path, self.what),
            source: Box::new(Hdf5Error::NotFlat {
                what: self.what.clone(),
                class: H5Type::VlenString.class_name(),
                size: self.refs.meta().item_size(),
            }),
        }
    }
}

/// One variable-length string element: (length, collection, index).
fn vlen_string(f: &H5File, el: &[u8], heap: &mut GlobalHeap, what: &str) -> H5Result<String> {
    let mut c = f.cursor(el, what);
    let n = c.u32()?;
    let col = c.addr()?;
    let idx = c.u32()?;
    if n == 0 || f.undefined(col) {
        return Ok(String::new());
    }
    Ok(text(heap.object(f, col, idx, what)?, 0))
}

/// One object found while walking the groups.
struct Node {
    /// `/grp/var`.
    path: String,
    /// The group's path (`/grp`), for phony dimensions.
    group: String,
    addr: u64,
    messages: Vec<Message>,
}

/// Open the HDF5 file `path` through `files`. An error when the file is
/// not HDF5 or its superblock or root group cannot be read; every other
/// problem skips only the object it is about. Other files (virtual
/// datasets' sources, external storage) are not reached: see
/// [`from_reader_with`].
pub fn open(path: &Path, files: &dyn Files, cache: Arc<ChunkCache>) -> Result<Contents> {
    let name = path.display().to_string();
    let file = files.open(path).map_err(|source| Error::Io {
        path: name.clone(),
        source,
    })?;
    from_reader(name, file, cache)
}

/// [`open`] of the file `name`, already open as `file`. Its virtual
/// datasets read sources in the file itself only, and its external
/// storage cannot be read (its reads fail saying so); [`from_reader_with`]
/// lets both reach other files.
pub fn from_reader(
    name: String,
    file: Arc<dyn ReadAt>,
    cache: Arc<ChunkCache>,
) -> Result<Contents> {
    from_reader_with(name, file, cache, None)
}

/// [`from_reader`], whose virtual datasets' sources and external storage
/// are read from other files through `sources` (confined to its scope).
pub fn from_reader_with(
    name: String,
    file: Arc<dyn ReadAt>,
    cache: Arc<ChunkCache>,
    sources: Option<vds::Sources>,
) -> Result<Contents> {
    let ctx = vds::Context::top(sources, file.clone(), name.clone(), cache);
    from_context(name, file, ctx)
}

/// [`from_reader`] within the virtual-dataset context `ctx` (a source
/// file of a virtual dataset is read this way, one level deeper).
pub(crate) fn from_context(
    name: String,
    file: Arc<dyn ReadAt>,
    ctx: vds::Context,
) -> Result<Contents> {
    let cache = ctx.cache.clone();
    let io = |source| Error::Io {
        path: name.clone(),
        source,
    };
    let len = file.size().map_err(io)?;
    let fmt = |e: Hdf5Error| Error::Format {
        path: name.clone(),
        source: Box::new(e),
    };
    // The metadata is parsed through a block cache (many small reads,
    // most near each other); data and chunk indexes read the file itself.
    let parse: Arc<dyn ReadAt> = Arc::new(ReadCache::new(file.clone()).map_err(io)?);
    let base = find_signature(parse.as_ref())
        .map_err(io)?
        .ok_or_else(|| fmt(Hdf5Error::NoSignature))?;
    let (mut f, sb) = meta::superblock(parse, base, len).map_err(fmt)?;
    let file = match sb.extension {
        Some(ext) => with_extension(&name, &mut f, ext, file).map_err(fmt)?,
        None => file,
    };
    let mut contents = Contents::default();
    let mut nodes = Vec::new();
    let mut walk = Walk {
        f: &f,
        file: &name,
        nodes: &mut nodes,
        skipped: &mut contents.skipped,
        ancestors: Vec::new(),
        objects: 0,
        attributes: Vec::new(),
    };
    let root = meta::object_header(&f, sb.root, "root group").map_err(fmt)?;
    walk.group(sb.root, "", root, 0).map_err(fmt)?;
    let groups = std::mem::take(&mut walk.attributes);
    let linked = ctx
        .sources
        .as_ref()
        .map(|s| Linked::new(s.files.clone(), s.scope.clone()));
    let externals = open_externals(&f, &nodes, Path::new(&name), linked);
    let raw = H5File { file, ..f.clone() };
    let file = Arc::new(FileRef {
        path: name,
        f: raw,
        externals,
    });
    build(&file, &f, nodes, groups, cache, &ctx, &mut contents);
    Ok(contents)
}

/// Apply the superblock extension at `ext` of `f` ([`extension`]): its
/// shared message heaps go into `f`; a metadata cache image makes `file`
/// (returned) and `f`'s parse view read through it. An extension that
/// cannot be read is a warning when it holds neither (a file without
/// them reads the same); a cache image or shared message table that
/// cannot be read fails the file (without it the walk would read zeros
/// or miss every shared message, each a line of its own).
fn with_extension(
    name: &str,
    f: &mut H5File,
    ext: u64,
    file: Arc<dyn ReadAt>,
) -> H5Result<Arc<dyn ReadAt>> {
    let e = match extension::extension(f, ext) {
        Ok(e) => e,
        Err(e) => {
            log::warn!("{name}: superblock extension not read: {e}");
            return Ok(file);
        }
    };
    let file: Arc<dyn ReadAt> = match e.cache_image {
        Some((addr, len)) => {
            let image = extension::CacheImage::read(f, addr, len, file)?;
            let image: Arc<dyn ReadAt> = Arc::new(image);
            let parse = ReadCache::new(image.clone()).map_err(|e| Hdf5Error::Io {
                what: "metadata cache image".to_string(),
                source: Arc::new(e),
            })?;
            f.file = Arc::new(parse);
            image
        }
        None => file,
    };
    if let Some((addr, n)) = e.shared_table {
        f.shared = Arc::new(extension::shared_table(f, addr, n)?);
    }
    Ok(file)
}

/// The external storage of every dataset among `nodes` that has an
/// External Data Files message, its files opened through `linked`.
fn open_externals(
    f: &H5File,
    nodes: &[Node],
    from: &Path,
    linked: Option<Linked>,
) -> HashMap<u64, std::result::Result<Arc<External>, Hdf5Error>> {
    let mut out = HashMap::new();
    for node in nodes {
        // A dataset under several names (hard links) is one node address:
        // its files are opened once (review 9 finding 8).
        if out.contains_key(&node.addr) {
            continue;
        }
        let Some(m) = node.messages.iter().find(|m| m.kind == MSG_EXTERNAL) else {
            continue;
        };
        let what = node.path.as_str();
        let ext = m
            .resolved(f, what)
            .and_then(|data| external::slots(f, &data, what))
            .map(|slots| Arc::new(External::open(slots, from, linked.clone())));
        out.insert(node.addr, ext);
    }
    out
}

struct Walk<'a> {
    f: &'a H5File,
    file: &'a str,
    nodes: &'a mut Vec<Node>,
    skipped: &'a mut Vec<Error>,
    /// The groups from the root down to the one being walked: a hard link
    /// to one of them is a loop, not followed again. A group linked twice
    /// elsewhere is walked under each of its names.
    ancestors: Vec<u64>,
    /// Objects reached so far, every name counted: bounded by
    /// [`MAX_OBJECTS`] (groups linked many times over could multiply the
    /// names beyond any use).
    objects: usize,
    /// Each group's path (`""` for the root) and attributes.
    attributes: Vec<(String, Vec<Attribute>)>,
}

impl Walk<'_> {
    fn skip(&mut self, object: &str, e: Hdf5Error) {
        log::debug!("{}: skipping {object}: {e}", self.file);
        self.skipped.push(Error::Format {
            path: format!("{} ({object})", self.file),
            source: Box::new(e),
        });
    }

    /// Walk the group `path` ("" for the root) whose header holds
    /// `messages`. Only an unreadable member list is an error (the
    /// caller decides whether that skips the group or fails the file).
    fn group(
        &mut self,
        addr: u64,
        path: &str,
        messages: Vec<Message>,
        depth: usize,
    ) -> H5Result<()> {
        let what = format!("group {}", if path.is_empty() { "/" } else { path });
        if self.ancestors.contains(&addr) {
            // A hard link back up the tree: the group is shown once, at
            // its first name on this path.
            log::debug!(
                "{}: {what} links back to a group above it, not followed again",
                self.file
            );
            return Ok(());
        }
        if depth > MAX_GROUP_DEPTH {
            self.skip(
                &what,
                Hdf5Error::unsupported(
                    &what,
                    format!("groups nested more than {MAX_GROUP_DEPTH} deep"),
                ),
            );
            return Ok(());
        }
        self.ancestors.push(addr);
        let r = self.group_members(path, messages, depth, &what);
        self.ancestors.pop();
        r
    }

    /// [`Walk::group`] once the group is known to be walked: its
    /// attributes, then every member.
    fn group_members(
        &mut self,
        path: &str,
        messages: Vec<Message>,
        depth: usize,
        what: &str,
    ) -> H5Result<()> {
        let what = what.to_string();
        let (attrs, dense_error) = object_attributes(self.f, &messages, &what, self.file);
        if let Some(e) = dense_error {
            log::warn!("{}: {what}: attributes not shown: {e}", self.file);
        }
        self.attributes.push((path.to_string(), attrs));
        let mut members: BTreeMap<String, u64> = BTreeMap::new();
        for m in &messages {
            match m.kind {
                meta::MSG_SYMBOL_TABLE => {
                    let (btree, heap) = meta::symbol_table(self.f, &m.data, &what)?;
                    for (name, target) in index::symbol_table_group(self.f, btree, heap, &what)? {
                        match target {
                            LinkTarget::Hard(a) => {
                                members.insert(name, a);
                            }
                            LinkTarget::Other(kind) => log::debug!(
                                "{}: {what}: {name:?} is a {kind}, not followed",
                                self.file
                            ),
                        }
                    }
                }
                meta::MSG_LINK => match meta::link(self.f, &m.data, &what) {
                    Ok((name, LinkTarget::Hard(a))) => {
                        members.insert(name, a);
                    }
                    Ok((name, LinkTarget::Other(kind))) => {
                        log::debug!("{}: {what}: {name:?} is a {kind}, not followed", self.file);
                    }
                    Err(e) => self.skip(&what, e),
                },
                meta::MSG_LINK_INFO => {
                    if let Some((heap, names)) = meta::link_info_dense(self.f, &m.data, &what)? {
                        for raw in dense::objects(self.f, heap, names, &what)? {
                            match meta::link(self.f, &raw, &what) {
                                Ok((name, LinkTarget::Hard(a))) => {
                                    members.insert(name, a);
                                }
                                Ok((name, LinkTarget::Other(kind))) => log::debug!(
                                    "{}: {what}: {name:?} is a {kind}, not followed",
                                    self.file
                                ),
                                Err(e) => self.skip(&what, e),
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        for (name, child) in members {
            if name.is_empty() || name == "." || name == ".." {
                continue;
            }
            let cpath = format!("{path}/{name}");
            self.objects += 1;
            if self.objects > MAX_OBJECTS {
                if self.objects > MAX_OBJECTS + 1 {
                    return Ok(()); // said once
                }
                self.skip(
                    &cpath,
                    Hdf5Error::unsupported(
                        &cpath,
                        format!("more than {MAX_OBJECTS} names in the file (groups linked many times over?)"),
                    ),
                );
                return Ok(());
            }
            let messages = match meta::object_header(self.f, child, &cpath) {
                Ok(m) => m,
                Err(e) => {
                    self.skip(&cpath, e);
                    continue;
                }
            };
            let has = |k| messages.iter().any(|m| m.kind == k);
            if has(meta::MSG_LAYOUT) {
                self.nodes.push(Node {
                    path: cpath,
                    group: path.to_string(),
                    addr: child,
                    messages,
                });
            } else if has(meta::MSG_SYMBOL_TABLE) || has(meta::MSG_LINK_INFO) || has(meta::MSG_LINK)
            {
                if let Err(e) = self.group(child, &cpath, messages, depth + 1) {
                    self.skip(&format!("group {cpath}"), e);
                }
            } else {
                // A committed datatype (netCDF user-defined types) or an
                // empty old-style object: nothing to show.
                log::debug!("{}: {cpath} is neither a dataset nor a group", self.file);
            }
        }
        Ok(())
    }
}

/// What a dataset's header says, decoded.
struct Parsed {
    node: Node,
    attrs: Vec<Attribute>,
    /// Why the attributes in dense storage could not be read.
    dense_error: Option<Hdf5Error>,
}

impl Parsed {
    fn attr(&self, name: &str) -> Option<&Attribute> {
        self.attrs.iter().find(|a| a.name == name)
    }
}

/// The attributes in an object header's `messages` (compact, and dense
/// storage), and why the dense ones could not be read if they could not.
/// An attribute that cannot be decoded is left out with a warning.
fn object_attributes(
    f: &H5File,
    messages: &[Message],
    what: &str,
    file: &str,
) -> (Vec<Attribute>, Option<Hdf5Error>) {
    let mut attrs = Vec::new();
    let mut dense_error = None;
    for m in messages {
        match m.kind {
            meta::MSG_ATTRIBUTE => match m
                .resolved(f, what)
                .and_then(|d| meta::attribute(f, &d, what))
            {
                Ok(a) => attrs.push(a),
                Err(e) => log::warn!("{file}: {e}: attribute not shown"),
            },
            meta::MSG_ATTRIBUTE_INFO => {
                let dense = meta::attribute_info_dense(f, &m.data, what).and_then(|d| {
                    d.map(|(heap, names)| dense::objects(f, heap, names, what))
                        .transpose()
                });
                match dense {
                    Ok(raws) => {
                        for raw in raws.unwrap_or_default() {
                            match meta::attribute(f, &raw, what) {
                                Ok(a) => attrs.push(a),
                                Err(e) => log::warn!("{file}: {e}: attribute not shown"),
                            }
                        }
                    }
                    Err(e) => dense_error = Some(e),
                }
            }
            _ => {}
        }
    }
    (attrs, dense_error)
}

/// The datasets (reading through `file`) and group attributes of the
/// walked `nodes` and `groups`; their remaining metadata (attributes in
/// heaps, dimension scales) read through `f`, the parse's cached view of
/// the same file.
fn build(
    file: &Arc<FileRef>,
    f: &H5File,
    nodes: Vec<Node>,
    groups: Vec<(String, Vec<Attribute>)>,
    cache: Arc<ChunkCache>,
    ctx: &vds::Context,
    out: &mut Contents,
) {
    let mut heap = GlobalHeap::default();
    // netCDF-4 (netcdf-c writes `_NCProperties` at the root since 4.4,
    // and its dimension bookkeeping on every dimension before that).
    let mut netcdf = groups
        .iter()
        .any(|(path, attrs)| path.is_empty() && attrs.iter().any(|a| a.name == "_NCProperties"));
    for (path, attrs) in groups {
        let what = if path.is_empty() { "/" } else { path.as_str() };
        let shown = attributes_json(f, &attrs, &mut heap, what);
        out.groups
            .push((path.trim_start_matches('/').to_string(), shown));
    }
    let skip = |out: &mut Contents, object: &str, e: Hdf5Error| {
        log::debug!("{}: skipping {object}: {e}", file.path);
        out.skipped.push(Error::Format {
            path: format!("{} (dataset {object})", file.path),
            source: Box::new(e),
        });
    };
    // First every dataset's attributes: the dimension scales name the
    // dimensions of the others.
    let mut parsed = Vec::new();
    for node in nodes {
        let (attrs, dense_error) = object_attributes(f, &node.messages, &node.path, &file.path);
        parsed.push(Parsed {
            node,
            attrs,
            dense_error,
        });
    }
    netcdf |= parsed
        .iter()
        .any(|p| p.attr("_Netcdf4Dimid").is_some() || p.attr("_Netcdf4Coordinates").is_some());
    let mut scale_by_addr: HashMap<u64, String> = HashMap::new();
    let mut scale_by_id: HashMap<i64, u64> = HashMap::new();
    let mut unlimited_scales: HashSet<u64> = HashSet::new();
    for p in &parsed {
        let is_scale = p
            .attr("CLASS")
            .and_then(string_value)
            .is_some_and(|s| s == "DIMENSION_SCALE");
        if is_scale {
            scale_by_addr.insert(p.node.addr, base_name(&p.node.path).to_string());
            if let Some(id) = p
                .attr("_Netcdf4Dimid")
                .and_then(int_values)
                .and_then(|v| v.first().copied())
            {
                scale_by_id.insert(id, p.node.addr);
            }
            if extents(f, p).is_some_and(|e| e.first().is_some_and(|&(_, unlimited)| unlimited)) {
                unlimited_scales.insert(p.node.addr);
            }
        }
    }
    // Each dimension's scale (its identity), then netCDF's length of every
    // unlimited dimension: the longest extent along it of any dataset
    // (hidden scales included).
    let scales: Vec<Vec<Option<u64>>> = parsed
        .iter()
        .map(|p| dimension_scales(f, p, &mut heap, &scale_by_addr, &scale_by_id))
        .collect();
    let mut unlimited_len: HashMap<u64, u64> = HashMap::new();
    for (p, sc) in parsed.iter().zip(&scales) {
        for (&(len, _), s) in extents(f, p).unwrap_or_default().iter().zip(sc) {
            if let Some(s) = s.filter(|s| unlimited_scales.contains(s)) {
                let l = unlimited_len.entry(s).or_default();
                *l = (*l).max(len);
            }
        }
    }
    // netCDF's dimensions: every scale, hidden or not.
    for p in &parsed {
        if !scale_by_addr.contains_key(&p.node.addr) {
            continue;
        }
        if let Some(&(len, unlimited)) = extents(f, p).unwrap_or_default().first() {
            let len = unlimited_len.get(&p.node.addr).map_or(len, |&l| l.max(len));
            let name = p.node.path.trim_start_matches('/');
            let name = match name.rsplit_once('/') {
                Some((group, base)) => {
                    format!(
                        "{group}/{}",
                        base.strip_prefix(NON_COORD_PREFIX).unwrap_or(base)
                    )
                }
                None => name.to_string(),
            };
            out.dimensions.push((name, len, unlimited));
        }
    }
    // Which datasets are netCDF variables: not the hidden dimension
    // scales of dimensions without coordinates.
    let (parsed, scales): (Vec<Parsed>, Vec<Vec<Option<u64>>>) = parsed
        .into_iter()
        .zip(scales)
        .filter(|(p, _)| {
            !p.attr("NAME")
                .and_then(string_value)
                .is_some_and(|s| s.starts_with(NOT_A_VARIABLE))
        })
        .unzip();
    let mut dims: Vec<Vec<Option<String>>> = scales
        .iter()
        .map(|sc| {
            sc.iter()
                .map(|s| s.and_then(|s| scale_by_addr.get(&s).cloned()))
                .collect()
        })
        .collect();
    phony_dimensions(f, &parsed, &mut dims, scale_by_addr.len());
    for ((p, dims), sc) in parsed.into_iter().zip(dims).zip(scales) {
        let path = p.node.path.clone();
        if let Some(e) = &p.dense_error {
            // Shown without some of its attributes, a variable could be
            // misread (a missing scale_factor): not shown at all.
            skip(out, &path, e.clone());
            continue;
        }
        // netCDF's length along unlimited dimensions.
        let netcdf_shape: Option<Vec<u64>> = extents(f, &p).map(|e| {
            e.iter()
                .zip(&sc)
                .map(|(&(len, _), s)| {
                    s.and_then(|s| unlimited_len.get(&s).copied())
                        .map_or(len, |l| l.max(len))
                })
                .collect()
        });
        // A variable named like a dimension it is not the coordinate of
        // is stored under a prefix netCDF removes.
        let shown = match path.rsplit_once('/') {
            Some((group, name)) => {
                let name = name.strip_prefix(NON_COORD_PREFIX).unwrap_or(name);
                format!("{group}/{name}")
            }
            None => path.clone(),
        };
        let shown = shown.trim_start_matches('/').to_string();
        if !ctx.wants(&path, &shown) {
            continue;
        }
        let vlen_string = p
            .node
            .messages
            .iter()
            .find(|m| m.kind == meta::MSG_DATATYPE)
            .and_then(|m| m.resolved(f, &path).ok())
            .and_then(|d| meta::datatype(f, &d, &path).ok())
            .is_some_and(|(t, _)| t == H5Type::VlenString);
        match dataset(
            file,
            f,
            &p,
            &mut heap,
            dims,
            cache.clone(),
            ctx,
            vlen_string,
            netcdf,
        ) {
            Ok((refs, _)) if vlen_string => out.strings.push((
                shown,
                Strings {
                    file: file.clone(),
                    refs,
                    what: path,
                },
            )),
            Ok((a, extension)) => {
                // A virtual dataset's extent follows its sources: it is
                // not netCDF's to extend.
                let netcdf_shape = netcdf_shape.filter(|_| !is_virtual(f, &p));
                let a = match netcdf_shape {
                    Some(shape) if shape != a.meta().shape => match extended(a, shape, extension) {
                        Ok(a) => a,
                        Err(e) => {
                            out.skipped.push(e);
                            continue;
                        }
                    },
                    _ => a,
                };
                out.arrays.push((shown, a));
            }
            Err(DatasetError::Hdf5(e)) => skip(out, &path, e),
            Err(DatasetError::Other(e)) => out.skipped.push(e),
        }
    }
}

/// Whether dataset `p` is virtual (its layout message is of class 3).
fn is_virtual(f: &H5File, p: &Parsed) -> bool {
    p.node
        .messages
        .iter()
        .find(|m| m.kind == meta::MSG_LAYOUT)
        .and_then(|m| meta::layout(f, &m.data, &p.node.path).ok())
        .is_some_and(|l| matches!(l, Layout::Virtual { .. }))
}

/// The value never-written elements of the netCDF-4 variable `p`
/// (elements of `dtype`, `size` bytes, stored in `endian` order) read as
/// where HDF5 leaves them undefined ([`fills`]): its `_FillValue`
/// attribute when that has the dataset's type, else netCDF's default for
/// the type. In `endian` order, as a fill value message's would be.
fn netcdf_fill(p: &Parsed, dtype: &DataType, endian: Endian, size: usize) -> Vec<u8> {
    if let Some(a) = p.attr("_FillValue")
        && a.data.len() == size
        && let Some((t, e)) = flat_type(&a.dtype)
        && t == *dtype
    {
        let mut v = a.data.clone();
        if e != endian && !matches!(dtype, DataType::FixedBytes(_)) {
            v.reverse();
        }
        return v;
    }
    let mut v = dtype.netcdf_default_fill();
    if endian != Endian::NATIVE && !matches!(dtype, DataType::FixedBytes(_)) {
        v.reverse();
    }
    v
}

/// `a` shown with the longer `shape` (netCDF's unlimited dimension
/// length), the elements past its end reading as `fill` (native order).
fn extended(
    a: Arc<dyn ArraySource>,
    shape: Vec<u64>,
    fill: Vec<u8>,
) -> Result<Arc<dyn ArraySource>> {
    let m = a.meta();
    let mut meta = ArrayMeta::new(
        m.source.clone(),
        shape,
        m.dtype.clone(),
        m.fill_value.clone(),
    )?;
    meta.dimension_names = m.dimension_names.clone();
    meta.attributes = m.attributes.clone();
    meta.chunk_shape = m.chunk_shape.clone();
    Ok(Arc::new(array::Extended::new(meta, a, fill)))
}

enum DatasetError {
    Hdf5(Hdf5Error),
    Other(Error),
}

impl From<Hdf5Error> for DatasetError {
    fn from(e: Hdf5Error) -> Self {
        DatasetError::Hdf5(e)
    }
}

impl From<Error> for DatasetError {
    fn from(e: Error) -> Self {
        DatasetError::Other(e)
    }
}

fn base_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The array of dataset `p`, reading from `file`; its metadata read
/// through `f` (see [`build`]). `netcdf`: the file is netCDF-4 (its fill
/// values follow netCDF's rules when HDF5's does not define one).
#[allow(clippy::too_many_arguments)]
fn dataset(
    file: &Arc<FileRef>,
    f: &H5File,
    p: &Parsed,
    heap: &mut GlobalHeap,
    dims: Vec<Option<String>>,
    cache: Arc<ChunkCache>,
    ctx: &vds::Context,
    vlen_string: bool,
    netcdf: bool,
) -> std::result::Result<(Arc<dyn ArraySource>, Vec<u8>), DatasetError> {
    let what = p.node.path.as_str();
    let find = |kind: u16| p.node.messages.iter().find(|m| m.kind == kind);
    // A message's bytes, those of the committed datatype it refers to
    // when it is shared.
    let need = |kind: u16, name: &str| {
        let m = find(kind).ok_or_else(|| Hdf5Error::corrupt(what, format!("no {name} message")))?;
        m.resolved(f, what)
    };
    let space = meta::dataspace(f, &need(meta::MSG_DATASPACE, "dataspace")?, what)?;
    if space.null {
        return Err(Hdf5Error::NullDataspace { what: what.into() }.into());
    }
    let (h5type, size) = meta::datatype(f, &need(meta::MSG_DATATYPE, "datatype")?, what)?;
    let converted = match h5type {
        H5Type::PaddedInt(t) => Some(convert::Convert::Int(t)),
        H5Type::OtherFloat(t) => Some(convert::Convert::Float(t)),
        _ => None,
    };
    let (dtype, endian) = match flat_type(&h5type) {
        Some(t) => t,
        // Served converted (padded integers widened, floats as h5py
        // reads them), in native order ([`convert`]).
        None if let Some(t) = converted => (t.dtype(), Endian::NATIVE),
        // The heap references themselves, for [`Strings`].
        None if vlen_string && h5type == H5Type::VlenString => {
            (DataType::FixedBytes(size), Endian::Little)
        }
        None if h5type.class_name() == meta::MOSTLY_UNUSED_INTEGER => {
            return Err(Hdf5Error::unsupported(what, meta::MOSTLY_UNUSED_INTEGER).into());
        }
        None => {
            return Err(Hdf5Error::NotFlat {
                what: what.to_string(),
                class: h5type.class_name(),
                size,
            }
            .into());
        }
    };
    // HDF5's fill value property: the new message, else the old one, else
    // the library's defaults (`H5D__open_oid`).
    let fill_msg = match (find(meta::MSG_FILL), find(meta::MSG_FILL_OLD)) {
        (Some(m), _) => meta::fill(f, meta::MSG_FILL, &m.resolved(f, what)?, what)?,
        (None, Some(m)) => meta::fill(f, meta::MSG_FILL_OLD, &m.resolved(f, what)?, what)?,
        (None, None) => meta::Fill::default(),
    };
    if let Some(v) = fill_msg.user()
        && v.len() != size
    {
        return Err(Hdf5Error::corrupt(
            what,
            format!("fill value of {} bytes for {size}-byte elements", v.len()),
        )
        .into());
    }
    let (fill, extension) = match converted {
        // Converted from the stored type as the elements are ([`convert`]):
        // the served type, native order. netCDF never writes such types, so
        // HDF5's rule alone applies.
        Some(t) => {
            let widen = |v: &[u8]| {
                let mut w = vec![0u8; t.served_size()];
                t.convert(v, &mut w);
                w
            };
            let fill = fill_msg
                .hdf5_reads(size)
                .map_or_else(|| vec![0u8; t.served_size()], |v| widen(&v));
            let extension = fill_msg.user().map_or_else(|| fill.clone(), widen);
            (fill, extension)
        }
        None => {
            let (fill, extension) = fills(p, &fill_msg, &dtype, endian, size, netcdf);
            let native = |mut v: Vec<u8>| {
                if endian != Endian::NATIVE && !matches!(dtype, DataType::FixedBytes(_)) {
                    v.reverse();
                }
                v
            };
            (native(fill), native(extension))
        }
    };
    let shape = space.dims.clone();
    let source = format!("{} (dataset {what})", file.path);
    let mut meta = ArrayMeta::new(source.clone(), shape.clone(), dtype, fill)?;
    meta.dimension_names = dims;
    meta.attributes = attributes(f, p, heap);
    if let Some(members) = enum_json(&h5type) {
        if meta.attributes.contains_key(ENUM_ATTRIBUTE) {
            log::debug!(
                "{what}: has an attribute {ENUM_ATTRIBUTE}: the enum members are not shown"
            );
        } else {
            meta.attributes.insert(ENUM_ATTRIBUTE.to_string(), members);
        }
    }
    match converted {
        Some(convert::Convert::Int(t)) => {
            meta.attributes
                .entry(STORED_TYPE_ATTRIBUTE)
                .or_insert_with(|| padded_json(&t));
        }
        Some(convert::Convert::Float(t)) if !t.served_as_stored() => {
            meta.attributes
                .entry(FLOAT_TYPE_ATTRIBUTE)
                .or_insert_with(|| float_type_json(&t));
        }
        _ => {}
    }
    // Bytes of elements as stored.
    let nbytes = meta.num_elements().saturating_mul(size as u64);
    let layout = meta::layout(f, &need(meta::MSG_LAYOUT, "data layout")?, what)?;
    let storage = match layout {
        Layout::Virtual { heap: addr, index } => {
            let maps = if f.undefined(addr) {
                Vec::new()
            } else {
                let block = heap.object(f, addr, index, what)?.to_vec();
                let mwhat = format!("{what}: virtual dataset mappings");
                vds::mappings(f, &block, &mwhat)?
            };
            return Ok((vds::array(ctx, what, meta, maps)?, extension));
        }
        Layout::Compact(data) => {
            if data.len() as u64 != nbytes {
                return Err(Hdf5Error::corrupt(
                    what,
                    format!(
                        "compact data of {} bytes for {nbytes} bytes of elements",
                        data.len()
                    ),
                )
                .into());
            }
            Storage::Compact(data)
        }
        Layout::Contiguous { addr, size } => {
            if let Some(ext) = file.externals.get(&p.node.addr) {
                // The layout's address is undefined: the bytes are in the
                // external files ([`external`]).
                Storage::Contiguous {
                    addr: None,
                    external: Some(ext.clone()?),
                }
            } else if f.undefined(addr) {
                Storage::Contiguous {
                    addr: None,
                    external: None,
                }
            } else if let Some(size) = size.filter(|&s| s < nbytes) {
                return Err(Hdf5Error::corrupt(
                    what,
                    format!("contiguous storage of {size} bytes for {nbytes} bytes of elements"),
                )
                .into());
            } else {
                Storage::Contiguous {
                    addr: Some(addr),
                    external: None,
                }
            }
        }
        Layout::Chunked {
            chunk,
            element_size,
            index,
            partial_unfiltered,
        } => {
            if element_size != size as u64 || chunk.len() != shape.len() {
                return Err(Hdf5Error::corrupt(
                    what,
                    format!(
                        "chunks of {chunk:?} x {element_size} bytes for a dataset of rank {} \
                         and {size}-byte elements",
                        shape.len()
                    ),
                )
                .into());
            }
            let filters = match find(meta::MSG_FILTERS) {
                Some(m) => meta::filters(f, &m.resolved(f, what)?, what)?,
                None => Vec::new(),
            };
            let chunk_nbytes = chunk
                .iter()
                .try_fold(size as u64, |a, &c| a.checked_mul(c))
                .ok_or_else(|| Hdf5Error::corrupt(what, "chunk size overflows"))?;
            // Fixed arrays and implicit indexes are laid out over the
            // maximum dimensions when they are fixed.
            let layout_shape: Vec<u64> = match &space.max {
                Some(max) => max
                    .iter()
                    .zip(&shape)
                    .map(|(&m, &s)| {
                        if f.undefined(m) || m == u64::MAX {
                            s
                        } else {
                            m.max(s)
                        }
                    })
                    .collect(),
                None => shape.clone(),
            };
            let unlimited: Vec<usize> = match &space.max {
                Some(max) => (0..max.len())
                    .filter(|&d| f.undefined(max[d]) || max[d] == u64::MAX)
                    .collect(),
                None => Vec::new(),
            };
            let g = Geometry {
                shape: shape.clone(),
                layout_shape,
                chunk: chunk.clone(),
                chunk_nbytes,
                unlimited: (unlimited.len() == 1).then(|| unlimited[0]),
            };
            // Walked on the first read, not now (index.rs).
            let chunks = Box::new(index::LazyChunks::new(index, g, what));
            Storage::Chunks {
                chunks,
                chunk,
                filters,
                partial_unfiltered,
            }
        }
    };
    let elements = match converted {
        Some(t) => array::Elements::Converted(t),
        None => array::Elements::Bytes(endian),
    };
    let a = array::array_of(file, what, meta, elements, storage, cache)?;
    Ok((a, extension))
}

/// The two fill values of a dataset, in its stored byte order: what its
/// never-written elements read as, and what the records past its end
/// along an unlimited dimension read as (netCDF-4 shows a variable as
/// long as its dimension: [`array::Extended`]).
///
/// Never-written elements read as HDF5 reads them ([`meta::Fill::hdf5_reads`]):
/// the user-defined value, else zeros, for netCDF-4 files as for any
/// other (netcdf-c asks HDF5 for them: a variable h5netcdf wrote without
/// `_FillValue`, whose message is left at HDF5's default, reads 0 in
/// netCDF4-python too). Where HDF5 leaves them undefined (netcdf-c's fill
/// mode off, as `nccopy` writes; netCDF4-python then returns whatever its
/// buffer held) a value must still be served: in a netCDF-4 file the
/// `_FillValue` attribute or netCDF's default for the type, else zeros.
///
/// Records past the end: netcdf-c's `NC4_get_vars` fills them with
/// `nc4_get_fill_value`, which is the variable's fill value as
/// `get_fill_info` (libhdf5/hdf5open.c) read it, the HDF5 message's
/// value when user-defined, else netCDF's default for the type: never
/// the `_FillValue` attribute alone (fill mode off). Only netCDF-4 files
/// are extended; elsewhere it is the first value.
fn fills(
    p: &Parsed,
    fill: &meta::Fill,
    dtype: &DataType,
    endian: Endian,
    size: usize,
    netcdf: bool,
) -> (Vec<u8>, Vec<u8>) {
    let elements = match fill.hdf5_reads(size) {
        Some(v) => v,
        None if netcdf => netcdf_fill(p, dtype, endian, size),
        None => vec![0u8; size],
    };
    let extension = match fill.user() {
        Some(v) => v.to_vec(),
        None if netcdf => {
            let mut v = dtype.netcdf_default_fill();
            if endian != Endian::NATIVE && !matches!(dtype, DataType::FixedBytes(_)) {
                v.reverse();
            }
            v
        }
        None => elements.clone(),
    };
    (elements, extension)
}

/// The element type a flat file shows for an HDF5 type, and its stored
/// byte order; `None` for types a flat file cannot carry.
fn flat_type(t: &H5Type) -> Option<(DataType, Endian)> {
    let order = |big: bool| if big { Endian::Big } else { Endian::Little };
    Some(match *t {
        // An enum is its integers, as netCDF4-python and h5py read it.
        H5Type::Enum { ref base, .. } => return flat_type(base),
        H5Type::Int { size, signed, big } => (DataType::integer(size, signed)?, order(big)),
        H5Type::Float { size, big } => (
            match size {
                2 => DataType::Float16,
                4 => DataType::Float32,
                8 => DataType::Float64,
                _ => return None,
            },
            order(big),
        ),
        H5Type::FixedString { size, .. } if size > 0 => {
            (DataType::FixedBytes(size), Endian::Little)
        }
        _ => return None,
    })
}

/// The dataspace of a dataset: (extent, unlimited) per dimension.
fn extents(f: &H5File, p: &Parsed) -> Option<Vec<(u64, bool)>> {
    let m = p
        .node
        .messages
        .iter()
        .find(|m| m.kind == meta::MSG_DATASPACE)?;
    let space = meta::dataspace(f, &m.resolved(f, &p.node.path).ok()?, &p.node.path).ok()?;
    let max = space.max.unwrap_or_else(|| space.dims.clone());
    Some(
        space
            .dims
            .iter()
            .zip(max)
            .map(|(&d, m)| (d, f.undefined(m) || m == u64::MAX))
            .collect(),
    )
}

/// The dimension scale (its object address) of each dimension that
/// netCDF-4 records: the scale itself for a coordinate variable's first
/// dimension, `_Netcdf4Coordinates` ids, `DIMENSION_LIST` references.
/// `None` where there is none; the scale's name is the dimension's.
fn dimension_scales(
    f: &H5File,
    p: &Parsed,
    heap: &mut GlobalHeap,
    scale_by_addr: &HashMap<u64, String>,
    scale_by_id: &HashMap<i64, u64>,
) -> Vec<Option<u64>> {
    let what = &p.node.path;
    let rank = extents(f, p).map_or(0, |e| e.len());
    let mut scales: Vec<Option<u64>> = vec![None; rank];
    if let Some(ids) = p.attr("_Netcdf4Coordinates").and_then(int_values) {
        for (d, id) in ids.iter().enumerate().take(rank) {
            scales[d] = scale_by_id.get(id).copied();
        }
    }
    if let Some(a) = p.attr("DIMENSION_LIST") {
        match dimension_list(f, a, heap, what) {
            Ok(addrs) => {
                for (d, addr) in addrs.into_iter().enumerate().take(rank) {
                    if scales[d].is_none() {
                        scales[d] = addr.filter(|a| scale_by_addr.contains_key(a));
                    }
                }
            }
            Err(e) => log::warn!("{what}: DIMENSION_LIST: {e}"),
        }
    }
    if rank >= 1 && scales[0].is_none() && scale_by_addr.contains_key(&p.node.addr) {
        scales[0] = Some(p.node.addr);
    }
    scales
}

/// Name the dimensions left unnamed as netcdf-c does for datasets without
/// dimension scales (`libhdf5/hdf5open.c`): each group's subgroups first,
/// then its own datasets in order; a dimension reuses a phony dimension of
/// its group with the same length and unlimitedness that this dataset
/// does not already use, else gets a new `phony_dim_N`, `N` counting every
/// dimension of the file (the real ones, `first`, come first).
fn phony_dimensions(f: &H5File, parsed: &[Parsed], dims: &mut [Vec<Option<String>>], first: usize) {
    // Datasets by group, and each group's subgroups, in walk order.
    let mut by_group: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, p) in parsed.iter().enumerate() {
        by_group.entry(p.node.group.as_str()).or_default().push(i);
    }
    let mut groups: Vec<&str> = by_group.keys().copied().collect();
    // Post-order: a group after everything below it (`/a/b` before `/a`,
    // `/a/...` before `/b`). Ancestors of groups without datasets do not
    // matter: they have no datasets to number.
    groups.sort_by(|a, b| {
        let (sa, sb) = (
            a.split('/').collect::<Vec<_>>(),
            b.split('/').collect::<Vec<_>>(),
        );
        for (x, y) in sa.iter().zip(&sb) {
            if x != y {
                return x.cmp(y);
            }
        }
        sb.len().cmp(&sa.len())
    });
    let mut next = first;
    // (group, length, unlimited) → the phony dimensions created so far.
    let mut made: HashMap<(&str, u64, bool), Vec<String>> = HashMap::new();
    for g in groups {
        for &i in &by_group[g] {
            let Some(ext) = extents(f, &parsed[i]) else {
                continue;
            };
            let mut used: Vec<String> = Vec::new();
            for (d, &(len, unlimited)) in ext.iter().enumerate() {
                if dims[i][d].is_some() {
                    continue;
                }
                let list = made.entry((g, len, unlimited)).or_default();
                let name = match list.iter().find(|n| !used.contains(n)) {
                    Some(n) => n.clone(),
                    None => {
                        let n = format!("phony_dim_{next}");
                        next += 1;
                        list.push(n.clone());
                        n
                    }
                };
                used.push(name.clone());
                dims[i][d] = Some(name);
            }
        }
    }
}

/// The first object each element of a `DIMENSION_LIST` refers to.
fn dimension_list(
    f: &H5File,
    a: &Attribute,
    heap: &mut GlobalHeap,
    what: &str,
) -> H5Result<Vec<Option<u64>>> {
    if !matches!(&a.dtype, H5Type::VlenSequence(b) if **b == H5Type::ObjectRef) {
        return Err(Hdf5Error::unsupported(
            what,
            "DIMENSION_LIST that is not a list of object references",
        ));
    }
    let o = f.sizeof_addr as usize;
    let mut out = Vec::new();
    for el in a.data.chunks_exact(a.size.max(1)) {
        let mut c = f.cursor(el, what);
        let n = c.u32()?;
        let col = c.addr()?;
        let idx = c.u32()?;
        if n == 0 || f.undefined(col) {
            out.push(None);
            continue;
        }
        let obj = heap.object(f, col, idx, what)?;
        let mut c = f.cursor(obj, what);
        out.push(Some(c.uint(o)?));
    }
    Ok(out)
}

/// The attributes a sidecar shows: netCDF's bookkeeping removed, values
/// as JSON (one element a scalar, strings as strings); an attribute of a
/// type JSON cannot carry is left out.
fn attributes(f: &H5File, p: &Parsed, heap: &mut GlobalHeap) -> Map<String, Value> {
    attributes_json(f, &p.attrs, heap, &p.node.path)
}

/// [`attributes`] of any object (`what` names it in log lines).
fn attributes_json(
    f: &H5File,
    attrs: &[Attribute],
    heap: &mut GlobalHeap,
    what: &str,
) -> Map<String, Value> {
    let mut out = Map::new();
    for a in attrs {
        if HIDDEN_ATTRIBUTES.contains(&a.name.as_str()) {
            continue;
        }
        match attr_json(f, a, heap, what) {
            Ok(Some(v)) => {
                out.insert(a.name.clone(), v);
            }
            Ok(None) => log::debug!(
                "{}: attribute {:?} of type {} not shown",
                what,
                a.name,
                a.dtype.class_name()
            ),
            Err(e) => log::warn!("{what}: attribute {:?}: {e}", a.name),
        }
    }
    out
}

fn attr_json(
    f: &H5File,
    a: &Attribute,
    heap: &mut GlobalHeap,
    what: &str,
) -> H5Result<Option<Value>> {
    let size = a.size.max(1);
    let mut values = Vec::new();
    // An enum attribute shows its integer values, as h5py reads them.
    let dtype = match &a.dtype {
        H5Type::Enum { base, .. } => base.as_ref(),
        t => t,
    };
    for el in a.data.chunks_exact(size) {
        let v = match dtype {
            &H5Type::Int { size, signed, big } => int_json(el, size, signed, big),
            H5Type::PaddedInt(t) => {
                let v = t.value(el);
                if t.signed {
                    Value::from(v as i64)
                } else {
                    Value::from(v)
                }
            }
            H5Type::OtherFloat(t) => float_json(t.to_f64(el)),
            H5Type::Float { size, big } => {
                let mut b = el.to_vec();
                if *big {
                    b.reverse();
                }
                let x = match size {
                    2 => half::f16::from_le_bytes([b[0], b[1]]).to_f64(),
                    4 => f32::from_le_bytes(b[..4].try_into().expect("4 bytes")) as f64,
                    _ => f64::from_le_bytes(b[..8].try_into().expect("8 bytes")),
                };
                float_json(x)
            }
            H5Type::FixedString { pad, .. } => Value::from(text(el, *pad)),
            H5Type::VlenString => Value::from(vlen_string(f, el, heap, what)?),
            _ => return Ok(None),
        };
        values.push(v);
    }
    Ok(Some(if values.len() == 1 {
        values.pop().expect("one value")
    } else {
        Value::Array(values)
    }))
}

/// One integer element of `size` bytes as JSON.
fn int_json(el: &[u8], size: usize, signed: bool, big: bool) -> Value {
    let mut b = [0u8; 8];
    b[..size].copy_from_slice(&el[..size]);
    if big {
        b[..size].reverse();
    }
    let raw = u64::from_le_bytes(b);
    if signed {
        let shift = 64 - 8 * size as u32;
        Value::from(((raw << shift) as i64) >> shift)
    } else {
        Value::from(raw)
    }
}

/// The sidecar attribute an enum dataset's members go under (name ->
/// value), as netCDF4-python's `datatype.enum_dict`. The `_slabfs_`
/// prefix is slabfs's: a real attribute of that name, were there one,
/// is shown instead (with a debug line).
pub const ENUM_ATTRIBUTE: &str = "_slabfs_enum_dict";

/// The sidecar attribute of a dataset of integers with padding bits or
/// an unusual size, served widened ([`convert`]): its stored type, as
/// `{"size", "precision", "offset", "signed", "byte_order"}` (HDF5's
/// `H5Tget_size`, `H5Tget_precision`, `H5Tget_offset`). Same `_slabfs_`
/// rule as [`ENUM_ATTRIBUTE`].
pub const STORED_TYPE_ATTRIBUTE: &str = "_slabfs_hdf5_integer";

/// The sidecar attribute of a dataset of floats of a non-IEEE layout,
/// served converted ([`convert`]): its stored type, as `{"size",
/// "byte_order", "precision", "offset", "sign", "exponent": [position,
/// size, bias], "mantissa": [position, size], "normalization"}` (HDF5's
/// `H5Tget_fields`, `H5Tget_ebias`, `H5Tget_norm`). Absent where the
/// stored layout is the served one (a long double in 16 little-endian
/// bytes). Same `_slabfs_` rule as [`ENUM_ATTRIBUTE`].
pub const FLOAT_TYPE_ATTRIBUTE: &str = "_slabfs_hdf5_float";

fn float_type_json(t: &convert::FloatType) -> Value {
    let b = &t.bits;
    serde_json::json!({
        "size": t.size,
        "byte_order": match t.order {
            convert::FloatOrder::Little => "little",
            convert::FloatOrder::Big => "big",
            convert::FloatOrder::Vax => "vax",
        },
        "precision": b.precision,
        "offset": b.offset,
        "sign": b.sign,
        "exponent": [b.epos, b.esize, b.ebias],
        "mantissa": [b.mpos, b.msize],
        "normalization": match b.norm {
            convert::Norm::Implied => "implied",
            convert::Norm::None => "none",
        },
    })
}

fn padded_json(t: &convert::PaddedInt) -> Value {
    serde_json::json!({
        "size": t.size,
        "precision": t.precision,
        "offset": t.offset,
        "signed": t.signed,
        "byte_order": if t.big { "big" } else { "little" },
    })
}

/// The members of an enum type as a JSON object (name -> integer value).
fn enum_json(t: &H5Type) -> Option<Value> {
    let H5Type::Enum { base, members } = t else {
        return None;
    };
    let &H5Type::Int { size, signed, big } = base.as_ref() else {
        return None;
    };
    Some(Value::Object(
        members
            .iter()
            .map(|(name, v)| (name.clone(), int_json(v, size, signed, big)))
            .collect(),
    ))
}

/// A string value: trailing NULs (and spaces when space-padded) dropped,
/// invalid UTF-8 replaced.
fn text(b: &[u8], pad: u8) -> String {
    let end = b.iter().position(|&x| x == 0).unwrap_or(b.len());
    let s = String::from_utf8_lossy(&b[..end]);
    if pad == 2 {
        s.trim_end_matches(' ').to_string()
    } else {
        s.into_owned()
    }
}

/// Non-finite floats as the strings Zarr uses, like the other formats'
/// sidecars.
fn float_json(x: f64) -> Value {
    match Number::from_f64(x) {
        Some(n) => Value::Number(n),
        None if x.is_nan() => Value::from("NaN"),
        None if x > 0.0 => Value::from("Infinity"),
        None => Value::from("-Infinity"),
    }
}

fn string_value(a: &Attribute) -> Option<String> {
    match a.dtype {
        H5Type::FixedString { pad, .. } => Some(text(&a.data, pad)),
        _ => None,
    }
}

fn int_values(a: &Attribute) -> Option<Vec<i64>> {
    let H5Type::Int { size, signed, big } = a.dtype else {
        return None;
    };
    Some(
        a.data
            .chunks_exact(size.max(1))
            .map(|el| {
                let mut b = [0u8; 8];
                b[..size].copy_from_slice(el);
                if big {
                    b[..size].reverse();
                }
                let raw = u64::from_le_bytes(b);
                if signed {
                    let shift = 64 - 8 * size as u32;
                    ((raw << shift) as i64) >> shift
                } else {
                    raw as i64
                }
            })
            .collect(),
    )
}
