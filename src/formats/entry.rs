//! What a format is to the rest of slabfs: one [`FormatEntry`] per
//! format folder, listed once in [`super::registry`] (the pattern of
//! `codec::entry` and `codec::registry`: a format folder never imports the
//! table that lists it), and the dataset it opens into ([`Dataset`]).
//!
//! Discovery asks the entries three questions, always through
//! [`Formats`], the list a mount was opened with:
//!
//! - **By name** ([`FormatEntry::claims`]): inside a directory, a file is
//!   looked at only if some format claims its name (`*.nc`, `*.zarr`
//!   never: a store is a directory; `*.json` by kerchunk, whose content
//!   then decides). Opening every file of a directory on every listing
//!   and refresh would cost a read per file; names keep that to the files
//!   that claim to be datasets.
//! - **By content** ([`FormatEntry::sniff`]): a file's first bytes (a magic
//!   number). A file claimed by name is opened by the first entry whose
//!   sniff matches, whichever format claimed it (a `*.nc` may be classic,
//!   a blocked archive or HDF5; a GRIB file is sometimes named `*.nc`),
//!   and a SOURCE given by name is sniffed whatever its name.
//! - **By listing** ([`FormatEntry::probe`]): a directory (or a bucket
//!   prefix) is a dataset when a directory format's probe recognises what
//!   it holds ([`Probe`]: a Zarr store's metadata key, an Icechunk
//!   repository's layout); else it is a plain directory, walked. The
//!   probe answers from a listing on object storage and from `stat` on
//!   disk, so the same rule classifies both.
//!
//! The one classifier over those answers ([`Formats::classify_file`],
//! [`Formats::classify_dir`]) serves every walk: the eager one of `slabfs
//! ls` and of a one-dataset mount, the lazy tree of a mounted directory,
//! a bucket walked by delimiter listings, and the partitions of an
//! aggregation whose format is not written down.
//!
//! # Adding a format
//!
//! A folder under `src/formats/` whose `mod.rs` exports `pub const ENTRY:
//! FormatEntry` (its name, the names it claims, its sniff or probe, how a
//! change to it is told, and its open), and one line in
//! [`super::registry::FORMATS`]. Nothing else names it: the walks, the
//! lazy tree, buckets and aggregation fragments then find it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::engine::array::ArraySource;
use crate::engine::cache::ChunkCache;
use crate::error::{Error, Result};
use crate::storage::local;
use crate::storage::local::confine::Roots;
use crate::storage::scope::Scope;
use crate::storage::{Files, ReadAt, Store, UrlFiles};

/// How a dataset of a format is laid out where it is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// One file (or object).
    File,
    /// A directory (or prefix) of files: a store, a repository. Its
    /// files are the format's own, never walked for other datasets.
    Directory,
}

/// How a change to a dataset is told without opening it (a refresh).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stamp {
    /// The file's own identity, size and times (a listing's version for
    /// an object).
    File,
    /// Every file of the directory ([`Store::change_stamp`]).
    Store,
    /// The head of the repository (its branch's ref), not every object:
    /// a repository's objects never change, a commit adds new ones.
    Head,
    /// It reads other files (references, aggregations): not told; the
    /// refresh opens it again and compares.
    Reopen,
}

/// A directory (or bucket prefix) as a directory format's probe sees it.
/// On disk each answer is a `stat` or a small read; on object storage
/// the answers come from the one listing of the prefix already made.
pub trait Probe {
    /// Whether a file (an object) named `name` is directly inside.
    fn has_file(&self, name: &str) -> bool;

    /// Whether a directory (a prefix) named `name` is directly inside.
    fn has_dir(&self, name: &str) -> bool;

    /// Whether the file at the nested path `key` exists, when that can be
    /// told without another request (`None`: it cannot, as below a
    /// prefix not listed).
    fn holds(&self, key: &str) -> Option<bool>;

    /// The file `name` directly inside, at most `limit` bytes; `None`
    /// when missing, larger or unreadable.
    fn read(&self, name: &str, limit: u64) -> Option<Vec<u8>>;

    /// Whether [`Probe::has_dir`] sees directories (a listing, a `stat`);
    /// plain HTTP has no directories, only keys it can ask for.
    fn lists(&self) -> bool {
        true
    }
}

/// A directory on disk as a probe sees it: `stat`s of its entries
/// (symlinks followed), small files read through the options' files.
pub struct DirProbe<'a> {
    dir: &'a Path,
    files: &'a dyn Files,
}

impl<'a> DirProbe<'a> {
    pub fn new(dir: &'a Path, opts: &'a Options) -> DirProbe<'a> {
        DirProbe {
            dir,
            files: opts.files.as_ref(),
        }
    }

    pub fn with_files(dir: &'a Path, files: &'a dyn Files) -> DirProbe<'a> {
        DirProbe { dir, files }
    }
}

impl Probe for DirProbe<'_> {
    fn has_file(&self, name: &str) -> bool {
        self.dir.join(name).is_file()
    }

    fn has_dir(&self, name: &str) -> bool {
        self.dir.join(name).is_dir()
    }

    fn holds(&self, key: &str) -> Option<bool> {
        Some(self.dir.join(key).is_file())
    }

    fn read(&self, name: &str, limit: u64) -> Option<Vec<u8>> {
        self.files.store(self.dir).get(name, limit).ok().flatten()
    }
}

/// Where a dataset is and what its open has at hand.
pub struct At<'a> {
    /// A local path, or a URL as a path (the options' files map it back).
    pub path: &'a Path,
    /// The mount path of the dataset (`""`: SOURCE itself, at the root).
    pub prefix: &'a str,
    /// The name an array at the dataset's root takes when the dataset is
    /// SOURCE (`prefix` empty): SOURCE's own name.
    pub name: &'a str,
    /// The file, already opened by the sniff that chose this format.
    pub file: Option<Arc<dyn ReadAt>>,
    /// A directory format's store, when the walk has it (a bucket
    /// prefix); else [`At::store`] opens it through the options' files.
    pub store: Option<Arc<dyn Store>>,
    /// A version asked for (`--ref`): only a format with versions opens
    /// with one.
    pub reference: Option<&'a str>,
    /// How everything it references is opened.
    pub opts: &'a Options,
}

impl<'a> At<'a> {
    /// The dataset at `path` shown at the mount path `prefix` (`name`:
    /// its root array's name when it is SOURCE), opened with `opts`;
    /// nothing open yet, no version asked for.
    pub fn new(path: &'a Path, prefix: &'a str, name: &'a str, opts: &'a Options) -> At<'a> {
        At {
            path,
            prefix,
            name,
            file: None,
            store: None,
            reference: None,
            opts,
        }
    }

    /// The same place without the open file and store (to be changed in
    /// a struct update: `At { name, ..at.borrowed() }`).
    pub fn borrowed(&self) -> At<'a> {
        At {
            reference: self.reference,
            ..At::new(self.path, self.prefix, self.name, self.opts)
        }
    }

    /// The path as shown in messages.
    pub fn shown(&self) -> String {
        self.path.display().to_string()
    }

    /// The directory's store.
    pub fn store(&self) -> Arc<dyn Store> {
        match &self.store {
            Some(s) => s.clone(),
            None => self.opts.files.store(self.path),
        }
    }

    /// The file, opened now if the sniff did not.
    pub fn file(&self) -> Result<Arc<dyn ReadAt>> {
        match &self.file {
            Some(f) => Ok(f.clone()),
            None => self.opts.files.open(self.path).map_err(|source| Error::Io {
                path: self.shown(),
                source,
            }),
        }
    }

    /// The mount path of `rel` inside the dataset (`""`: the dataset's
    /// own root).
    pub fn mount_path(&self, rel: &str) -> String {
        join(self.prefix, rel)
    }
}

/// Opens the dataset at `at`: `Ok(None)` when it is no dataset after all
/// (a JSON file that holds no references).
pub type Open = fn(&At<'_>) -> Result<Option<Dataset>>;

/// A format, as discovery sees it (see the module doc).
pub struct FormatEntry {
    /// Its name in messages and docs (`zarr`, `netcdf`).
    pub name: &'static str,
    /// What a file or directory that fails to be one was expected to be,
    /// for messages: `"a netCDF or HDF5 file"`.
    pub noun: &'static str,
    /// One line for `slabfs --help` and the man page: what it reads and
    /// how it is found ("Zarr v2 and v3 stores (directories)").
    pub summary: &'static str,
    pub layout: Layout,
    /// Whether a file named `name` (no directory) is looked at as one
    /// inside a walked directory (files only; a directory format claims
    /// no name).
    pub claims: fn(&str) -> bool,
    /// Whether the open file's first bytes say it is one (`None`: a
    /// format told by its name, whose content its open checks).
    pub sniff: Option<fn(&dyn ReadAt) -> std::io::Result<bool>>,
    /// Directory formats: whether the directory is one.
    pub probe: Option<fn(&dyn Probe) -> bool>,
    /// Directory formats: whether a directory the probe recognised has
    /// one array at its root, shown as one file named after the
    /// directory rather than as a directory of arrays. Asked only where
    /// it matters (a listing of a walked directory), since it may cost a
    /// read of the root's metadata.
    pub single: fn(&dyn Probe) -> bool,
    /// It has versions ([`At::reference`], `--ref`).
    pub versioned: bool,
    /// A file claimed by name may still hold no dataset (its open may
    /// answer `Ok(None)`): only opening it tells (kerchunk's `*.json`).
    pub by_content: bool,
    /// A SOURCE file whose name no format claims and whose bytes no
    /// sniff knows is tried with this format's open last (kerchunk:
    /// references are JSON of any name).
    pub last_resort: bool,
    pub stamp: Stamp,
    pub open: Open,
}

impl std::fmt::Debug for FormatEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// Entries are told apart by name (unique in a table; a test checks).
impl PartialEq for FormatEntry {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}
impl Eq for FormatEntry {}

/// A name no file format claims (directory formats).
pub fn claims_nothing(_: &str) -> bool {
    false
}

/// A directory whose root is never one array (and every file format).
pub fn never_single(_: &dyn Probe) -> bool {
    false
}

/// Whether `name` ends in `.EXT` for one of `extensions` (any case), with
/// a non-empty stem.
pub fn has_extension(name: &str, extensions: &[&str]) -> bool {
    name.rsplit_once('.').is_some_and(|(stem, ext)| {
        !stem.is_empty() && extensions.iter().any(|e| ext.eq_ignore_ascii_case(e))
    })
}

/// What discovery makes of one directory entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// A plain directory: walked for datasets.
    Directory,
    /// A dataset of `format`, opened as a whole. `single`: a directory
    /// whose root is one array (shown as one file).
    Dataset {
        format: &'static FormatEntry,
        single: bool,
    },
}

impl Found {
    /// Whether the entry is a dataset of its own (opened as a whole).
    pub fn is_dataset(self) -> bool {
        self != Found::Directory
    }

    /// Whether it shows as one file (a store whose root is an array).
    pub fn is_single(self) -> bool {
        matches!(self, Found::Dataset { single: true, .. })
    }

    /// Whether it is a dataset stored as a directory of its own files
    /// (watched whole once open).
    pub fn is_directory_dataset(self) -> bool {
        matches!(self, Found::Dataset { format, .. } if format.layout == Layout::Directory)
    }

    /// Whether only opening it tells whether it is a dataset at all.
    pub fn by_content(self) -> bool {
        matches!(self, Found::Dataset { format, .. } if format.by_content)
    }

    /// How a change to it is told ([`Stamp::Reopen`] for a directory).
    pub fn stamp(self) -> Stamp {
        match self {
            Found::Dataset { format, .. } => format.stamp,
            Found::Directory => Stamp::Reopen,
        }
    }
}

/// The formats a mount knows, in the order they are tried: the built-in
/// table ([`super::registry::builtin`]) and any a test adds.
#[derive(Clone)]
pub struct Formats(Arc<[&'static FormatEntry]>);

impl std::fmt::Debug for Formats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.iter()).finish()
    }
}

impl Formats {
    pub fn new(entries: &[&'static FormatEntry]) -> Formats {
        Formats(entries.into())
    }

    /// These formats and `entry` after them.
    pub fn with(&self, entry: &'static FormatEntry) -> Formats {
        let mut v = self.0.to_vec();
        v.push(entry);
        Formats(v.into())
    }

    pub fn iter(&self) -> impl Iterator<Item = &'static FormatEntry> + '_ {
        self.0.iter().copied()
    }

    /// The entry named `name`.
    pub fn named(&self, name: &str) -> Option<&'static FormatEntry> {
        self.iter().find(|f| f.name == name)
    }

    /// What the file named `name` is to a walk, by its name alone: the
    /// first format claiming it (its content may pick another at open:
    /// [`Formats::open_file`]); `None`: not looked at.
    pub fn classify_file(&self, name: &str) -> Option<Found> {
        self.iter()
            .find(|f| f.layout == Layout::File && (f.claims)(name))
            .map(|format| Found::Dataset {
                format,
                single: false,
            })
    }

    /// What the directory `probe` shows is: the first directory format
    /// recognising it, else `None` (a plain directory). `single` is asked
    /// only when `need_single` (a walk's listing).
    pub fn classify_dir(&self, probe: &dyn Probe, need_single: bool) -> Option<Found> {
        let format = self.iter().find(|f| f.probe.is_some_and(|p| p(probe)))?;
        Some(Found::Dataset {
            format,
            single: need_single && (format.single)(probe),
        })
    }

    /// The format whose sniff recognises `file`'s first bytes, tried in
    /// table order.
    pub fn sniff(&self, file: &dyn ReadAt) -> std::io::Result<Option<&'static FormatEntry>> {
        for f in self.iter() {
            if let Some(sniff) = f.sniff
                && sniff(file)?
            {
                return Ok(Some(f));
            }
        }
        Ok(None)
    }

    /// Open the file at `at.path`, claimed by `claimed` (by its name) or
    /// by nobody (a SOURCE given as it is): a format told by name alone
    /// opens it; else the first format whose sniff knows its bytes; else,
    /// for a SOURCE, the last-resort formats (`Ok(None)` when none holds a
    /// dataset); else an error saying what it was expected to be.
    pub fn open_file(
        &self,
        at: &At<'_>,
        claimed: Option<&'static FormatEntry>,
    ) -> Result<Option<Dataset>> {
        if let Some(f) = claimed.filter(|f| f.sniff.is_none()) {
            return (f.open)(at);
        }
        let file = Sniffed::new(at.file()?);
        let io = |source| Error::Io {
            path: at.shown(),
            source,
        };
        if let Some(f) = self.sniff(&file).map_err(io)? {
            // The format's open reads its magic number again (the netCDF
            // family's scan for HDF5 behind a user block is several
            // reads): answered from what the sniff read, not asked of a
            // remote object twice.
            let at = At {
                file: Some(Arc::new(file.replay())),
                ..at.borrowed()
            };
            return (f.open)(&at);
        }
        if let Some(f) = claimed {
            return Err(Error::metadata(
                at.shown(),
                format!(
                    "not {}: its first bytes are the signature of no format slabfs reads \
                     (damaged, truncated, or another kind of file)",
                    f.noun
                ),
            ));
        }
        for f in self.iter().filter(|f| f.last_resort) {
            if let Some(ds) = (f.open)(at)? {
                return Ok(Some(ds));
            }
        }
        Ok(None)
    }
}

/// A file being sniffed: each small read remembered, so that the open
/// that follows is answered from them where it reads the same bytes.
#[derive(Debug)]
struct Sniffed {
    inner: Arc<dyn ReadAt>,
    seen: parking_lot::Mutex<Vec<(u64, Vec<u8>)>>,
}

/// Reads larger than this are not remembered (a sniff reads a magic
/// number, a few bytes at a few offsets).
const SNIFF_READ: usize = 4096;

impl Sniffed {
    fn new(inner: Arc<dyn ReadAt>) -> Sniffed {
        Sniffed {
            inner,
            seen: parking_lot::Mutex::new(Vec::new()),
        }
    }

    fn replay(self) -> Replay {
        Replay {
            inner: self.inner,
            seen: self.seen.into_inner(),
        }
    }
}

impl ReadAt for Sniffed {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.inner.read_exact_at(buf, offset)?;
        if buf.len() <= SNIFF_READ {
            self.seen.lock().push((offset, buf.to_vec()));
        }
        Ok(())
    }

    fn size(&self) -> std::io::Result<u64> {
        self.inner.size()
    }
}

/// The sniffed file handed to its format's open: a read inside one the
/// sniff made is answered from it; everything else goes to the file,
/// every method of [`ReadAt`] passed on.
#[derive(Debug)]
struct Replay {
    inner: Arc<dyn ReadAt>,
    seen: Vec<(u64, Vec<u8>)>,
}

impl ReadAt for Replay {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        let end = offset.saturating_add(buf.len() as u64);
        let hit = self
            .seen
            .iter()
            .find(|(at, b)| *at <= offset && end <= at + b.len() as u64);
        match hit {
            Some((at, b)) => {
                let from = (offset - at) as usize;
                buf.copy_from_slice(&b[from..from + buf.len()]);
                Ok(())
            }
            None => self.inner.read_exact_at(buf, offset),
        }
    }

    fn size(&self) -> std::io::Result<u64> {
        self.inner.size()
    }

    fn stamp(&self) -> Option<u64> {
        self.inner.stamp()
    }

    fn version(&self) -> Option<crate::storage::ObjectVersion> {
        self.inner.version()
    }

    fn read_many(&self, reads: &mut [(u64, &mut [u8])]) -> std::io::Result<()> {
        self.inner.read_many(reads)
    }

    fn latency(&self) -> Option<std::time::Duration> {
        self.inner.latency()
    }

    fn coalesce_gap(&self) -> u64 {
        self.inner.coalesce_gap()
    }

    fn will_read(&self, offsets: &[u64]) {
        self.inner.will_read(offsets)
    }
}

/// One array of a dataset and its path in the mount.
#[derive(Clone)]
pub struct Entry {
    pub path: String,
    pub array: Arc<dyn ArraySource>,
}

/// The attributes of one directory of the mount (a file, a group, a
/// descriptor) and where they were read.
#[derive(Debug, Clone, PartialEq)]
pub struct Directory {
    pub attributes: Map<String, Value>,
    /// A netCDF file's or group's own dimensions (name, length: netCDF's,
    /// the records for an unlimited one; unlimited): a classic file's in
    /// definition order, a netCDF-4 (HDF5) file's by name (its dimension
    /// scales'); empty for every other format.
    pub dimensions: Vec<(String, u64, bool)>,
    /// The file (or Zarr group) the attributes come from: a path that
    /// exists while they do (a kerchunk group's is its references file),
    /// for a refresh to tell a failed re-open from a removal.
    pub source: String,
}

/// The arrays found under a source, sorted by path, the attributes of its
/// directories and what was skipped.
#[derive(Default)]
pub struct Dataset {
    pub entries: Vec<Entry>,
    /// Directories with attributes or dimensions, by mount path (`""`:
    /// the root).
    pub directories: std::collections::BTreeMap<String, Directory>,
    /// Datasets or arrays that could not be opened.
    pub skipped: Vec<Error>,
    /// Directories it lists to know what it holds (an NcML scan's
    /// locations): a live mount watches them, and re-opens the dataset
    /// when a file there comes, changes or goes.
    pub watch: Vec<PathBuf>,
    /// Open it again after this long even if nothing is seen to change:
    /// what it holds then may differ by time alone (an NcML scan left out
    /// a file newer than its `olderThan`).
    pub recheck_in: Option<std::time::Duration>,
}

impl Dataset {
    pub fn get(&self, path: &str) -> Option<&Entry> {
        let path = path.trim_matches('/');
        self.entries.iter().find(|e| e.path == path)
    }

    /// Record the attributes and dimensions of the directory at mount
    /// path `path` (neither: nothing recorded); the first of two at one
    /// path stays.
    pub fn add_directory(&mut self, path: String, dir: Directory) {
        if !dir.attributes.is_empty() || !dir.dimensions.is_empty() {
            self.directories.entry(path).or_insert(dir);
        }
    }

    /// Whether nothing was found, not even a failure.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.skipped.is_empty() && self.directories.is_empty()
    }

    /// Its entries sorted by path, as every open hands them out.
    pub fn sorted(mut self) -> Dataset {
        self.entries.sort_by(|a, b| a.path.cmp(&b.path));
        self
    }

    /// Add everything of `other`.
    pub fn extend(&mut self, other: Dataset) {
        self.entries.extend(other.entries);
        for (p, d) in other.directories {
            self.directories.entry(p).or_insert(d);
        }
        self.skipped.extend(other.skipped);
        self.watch.extend(other.watch);
        self.recheck_in = match (self.recheck_in, other.recheck_in) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
}

/// `prefix/rel`, either side possibly empty.
pub fn join(prefix: &str, rel: &str) -> String {
    match (prefix.is_empty(), rel.is_empty()) {
        (true, _) => rel.to_string(),
        (_, true) => prefix.to_string(),
        _ => format!("{prefix}/{rel}"),
    }
}

/// How the formats open what a source references: the files seam, the
/// shared chunk cache and where references may lead. One set for every
/// format a mount opens (aggregations pass it on to their fragments).
#[derive(Clone)]
pub struct Options {
    /// Every referenced local file must resolve under one of these.
    /// Empty: the directory holding the file being opened.
    pub roots: Vec<PathBuf>,
    /// The URLs references may read (a remote source's own location and
    /// `--allow-outside URL`s); `None`: no URL at all.
    /// They are reached through the [`crate::storage::Network`]
    /// the dataset was opened with ([`super::dataset::Opener`]); formats never
    /// name the network code.
    pub remote: Option<Arc<dyn UrlFiles>>,
    /// The chunk cache Zarr arrays and blocked archives read through.
    pub cache: Arc<ChunkCache>,
    /// How data files and stores are opened ([`crate::storage::contract`]);
    /// it opens the URLs of `remote` too.
    pub files: Arc<dyn Files>,
    /// The formats a reference's target may be of (an aggregation's
    /// fragment whose format is not written down is told by them).
    pub formats: Formats,
    /// The datasets an aggregation keeps open at once (an NcML file's
    /// members: headers, files): the mount's `--max-open-datasets`.
    pub max_open: usize,
}

/// [`Options::max_open`] unless told: the default of
/// `--max-open-datasets`.
pub const DEFAULT_MAX_OPEN: usize = 1000;

impl Options {
    /// Local files only, under `roots`, knowing `formats` (the built-in
    /// ones: [`super::registry::builtin`]).
    pub fn new(roots: Vec<PathBuf>, cache: Arc<ChunkCache>, formats: Formats) -> Options {
        Options {
            roots,
            remote: None,
            cache,
            files: local::os(),
            formats,
            max_open: DEFAULT_MAX_OPEN,
        }
    }

    /// Where the references made by the file at `file` may lead
    /// ([`Scope`]): a remote file's only to the URL roots, a local
    /// file's to the local roots too.
    pub fn scope_for(&self, file: &Path) -> Arc<Scope> {
        let local = if crate::storage::location::url_of(file).is_some() {
            Roots::default()
        } else if self.roots.is_empty() {
            Roots::new(file.parent().map(Path::to_path_buf))
        } else {
            Roots::new(self.roots.iter().cloned())
        };
        Arc::new(Scope::new(Arc::new(local), self.remote.clone()))
    }
}
