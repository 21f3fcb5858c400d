//! Finding and opening the sub-array a partition refers to.
//!
//! A partition's `data` names a file (relative to the descriptor, absent =
//! the NCA file itself), a format and, for netCDF and nested descriptors,
//! a variable. [`Context::target`] turns that into a [`Target`]: the path
//! resolved and confined ([`crate::storage::local::confine`]), the format settled (for a
//! JSON descriptor without `format`, sniffed from the file: a `.json`
//! name is a nested descriptor, a directory a Zarr store, `CDF` or HDF5
//! magic a netCDF file). [`Context::open`] then opens it as an
//! [`ArraySource`]:
//!
//! - netCDF: a [`super::ncfile::NcFile`] (classic or netCDF-4, by its
//!   magic number), opened once and shared by every partition of one
//!   load that names the same file; a variable carrying `nca_array` (or
//!   CF-1.13 `aggregated_data`, or CFA-0.4 `cfa_array`) is a nested
//!   aggregation;
//! - raw: [`super::raw::RawArray`];
//! - zarr: the store's array (through the shared chunk cache);
//! - nca: a variable of another `*.nca.json` descriptor.
//!
//! A nested aggregation (a netCDF variable that is one, or a variable of
//! another descriptor) is built by the function the context carries
//! ([`Nest`], `super::nest`): the builders are above this file.
//!
//! Nested aggregations carry the chain of (descriptor, variable) pairs
//! being built: meeting a pair already on the chain is a cycle, a chain
//! longer than [`MAX_DEPTH`] is refused; both are errors, never a stack
//! overflow.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use super::descriptor::{Format, PartitionSpec};
use super::error::NcaError;
use super::ncfile::NcFile;
use crate::engine::array::ArraySource;
use crate::engine::cache::ChunkCache;
use crate::error::{Error, Result};
use crate::formats::Options;
use crate::formats::entry::{At, DirProbe, Formats, Found};
use crate::formats::netcdf;
use crate::storage::location::url_of;
use crate::storage::scope::{Refusal, Scope};
use crate::storage::{Files, ReadAt};

/// Aggregations nested deeper than this are refused.
pub const MAX_DEPTH: usize = 16;

/// Builds a nested aggregation: the variable `var` of `path`, opened under
/// a context nested in the given one (`Context::nested`, which checks
/// the chain). `file` is the open netCDF file `path` names, whose variable
/// may be an aggregation (NCA, CF-1.13, CFA-0.4; `Ok(None)`: a plain
/// variable), or `None` for a JSON descriptor (always an aggregation).
///
/// The builders sit above this file: they make [`super::Aggregation`]s,
/// whose partitions are opened here. So the folder's top hands this
/// function in (`super::nest`) and every nested context inherits it;
/// this file names none of them, and the folder's files import one
/// another in a line (`tests/it/layers.rs`), the recursion of nested
/// aggregations running through this value instead.
pub type Nest =
    fn(&Context, &Path, &str, Option<&Arc<NcFile>>) -> Result<Option<Arc<dyn ArraySource>>>;

/// What one aggregation's partitions are opened against: the descriptor
/// they were read from and the shared resources of the load.
pub struct Context {
    /// Where its references may lead ([`Scope`]).
    pub scope: Arc<Scope>,
    pub cache: Arc<ChunkCache>,
    /// How fragment files and stores are opened.
    pub files: Arc<dyn Files>,
    /// The formats a fragment without `format` is told by.
    pub formats: Formats,
    /// The NCA file (descriptor) itself, canonical (or its URL).
    pub file: PathBuf,
    /// Its netCDF form, when it is a netCDF file.
    pub netcdf: Option<Arc<NcFile>>,
    /// The (descriptor, variable) pairs being built, outermost first,
    /// this aggregation included.
    pub chain: Vec<(PathBuf, String)>,
    /// What this load has opened and built, shared with the contexts of
    /// nested aggregations.
    opened: Shared,
    /// How a nested aggregation is built ([`Nest`]).
    nest: Nest,
}

/// A context's handle on its load's [`LoadShared`]: the outermost context
/// owns it, nested ones only refer to it. The memo keeps the nested
/// aggregations it built, and each holds its context: were that a strong
/// reference, the cycle would keep the whole load, open files included,
/// alive forever (one more each time a refresh re-opens the source).
enum Shared {
    Owner(Arc<LoadShared>),
    Nested(Weak<LoadShared>),
}

/// What one load opens, shared by all its contexts (nested ones too): each
/// file opened once and each nested aggregation or Zarr fragment built
/// once, however many partitions name it. Without this, a descriptor
/// whose partitions all nest the same descriptor builds it once per
/// partition at every level (4 partitions, 8 levels: 65536 builds and as
/// many open files), and 30000 partitions of one raw file hold 30000
/// descriptors.
#[derive(Default)]
struct LoadShared {
    netcdf: Mutex<HashMap<PathBuf, Arc<NcFile>>>,
    raw: Mutex<HashMap<PathBuf, Arc<dyn ReadAt>>>,
    built: Mutex<HashMap<(PathBuf, String), Opened>>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("file", &self.file)
            .field("chain", &self.chain)
            .finish()
    }
}

/// A partition's sub-array, located.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub format: Format,
    /// Resolved and confined.
    pub path: PathBuf,
    /// Whether `path` is the NCA file itself.
    pub is_self: bool,
    pub ncvar: Option<String>,
}

/// What [`Context::open`] found.
#[derive(Clone)]
pub enum Opened {
    /// A plain netCDF variable: CF packing and missing values apply.
    NetCdf(Arc<dyn ArraySource>),
    /// A nested aggregation: its fill value means missing.
    Nested(Arc<dyn ArraySource>),
    /// Raw or Zarr: values as stored.
    Plain(Arc<dyn ArraySource>),
}

impl Opened {
    pub fn source(&self) -> &Arc<dyn ArraySource> {
        match self {
            Opened::NetCdf(s) | Opened::Nested(s) | Opened::Plain(s) => s,
        }
    }
}

impl Context {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        scope: Arc<Scope>,
        cache: Arc<ChunkCache>,
        files: Arc<dyn Files>,
        formats: Formats,
        file: PathBuf,
        netcdf: Option<Arc<NcFile>>,
        chain: Vec<(PathBuf, String)>,
        nest: Nest,
    ) -> Context {
        Context {
            scope,
            cache,
            files,
            formats,
            file,
            netcdf,
            chain,
            opened: Shared::Owner(Arc::default()),
            nest,
        }
    }

    /// The load's memo; a fresh, unshared one if the outermost aggregation
    /// is gone (nothing can read through this context then anyway).
    fn shared(&self) -> Arc<LoadShared> {
        match &self.opened {
            Shared::Owner(s) => s.clone(),
            Shared::Nested(w) => w.upgrade().unwrap_or_default(),
        }
    }

    /// Locate the sub-array of `spec` (see the module doc). Errors are
    /// load errors: confinement, a format that cannot be settled.
    pub fn target(&self, spec: &PartitionSpec) -> Result<Target, NcaError> {
        let own_format = if self.netcdf.is_some() {
            Format::NetCdf
        } else {
            Format::Nca
        };
        if spec.format == Some(Format::Constant) {
            return Ok(Target {
                format: Format::Constant,
                path: self.file.clone(),
                is_self: true,
                ncvar: None,
            });
        }
        let (path, is_self) = match &spec.data.file {
            None => (self.file.clone(), true),
            Some(f) => {
                // URIs as CF-1.13 and CFA-0.4 fragments take them: file://
                // is a path (percent-decoded), a URL is read where the
                // scope allows, other schemes are refused, not taken for
                // relative file names.
                let f = &if crate::storage::location::is_url(f) {
                    f.clone()
                } else {
                    uri_path(f)
                        .map_err(|d| NcaError::invalid(format!("{}.data.file", spec.label), d))?
                };
                let outside = |r: Refusal| match r {
                    Refusal::Scheme => NcaError::invalid(
                        format!("{}.data.file", spec.label),
                        format!("{f:?}: not a file name or a URL slabfs reads"),
                    ),
                    Refusal::NoUrls => NcaError::OutsideRoot {
                        partition: spec.label.clone(),
                        path: format!("{f} (a URL: --allow-outside URL admits one)"),
                        roots: self.scope.describe(),
                    },
                    Refusal::Outside(to) => NcaError::OutsideRoot {
                        partition: spec.label.clone(),
                        path: format!("{f} (resolves to {to})"),
                        roots: self.scope.describe(),
                    },
                };
                let p = self.scope.join(&self.file, f).map_err(outside)?;
                let real = self.scope.check(&p).map_err(outside)?;
                let is_self = real == self.file;
                (real, is_self)
            }
        };
        let format = match spec.format {
            Some(f) => f,
            None if is_self => own_format,
            // In a netCDF file (an NCA or CF-1.13 aggregation file) a
            // fragment is netCDF unless it is recognisably something else
            // slabfs reads (a Zarr store, an NcML file): told without
            // opening it when its name says netCDF, as most do.
            None if own_format == Format::NetCdf => {
                let netcdf_name = path.extension().and_then(|e| e.to_str()).is_some_and(|e| {
                    ["nc", "nc3", "nc4", "cdf", "h5", "hdf5"]
                        .contains(&e.to_ascii_lowercase().as_str())
                });
                match netcdf_name {
                    true => Format::NetCdf,
                    false => sniff(&path, self.files.as_ref(), &self.formats)
                        .filter(|f| !matches!(f, Format::Nca | Format::Raw | Format::Constant))
                        .unwrap_or(Format::NetCdf),
                }
            }
            None => sniff(&path, self.files.as_ref(), &self.formats).ok_or_else(|| {
                NcaError::invalid(
                    format!("{}.format", spec.label),
                    format!(
                        "absent, and {} is not recognisably netCDF, Zarr, a descriptor or \
                         a file of another format slabfs reads: say which",
                        path.display()
                    ),
                )
            })?,
        };
        if is_self && format != own_format {
            return Err(NcaError::invalid(
                format!("{}.data.file", spec.label),
                "a partition in the descriptor file itself must be of the descriptor's format",
            ));
        }
        if format == Format::NetCdf
            && (spec.data.scale_factor.is_some() || spec.data.add_offset.is_some())
        {
            return Err(NcaError::invalid(
                format!("{}.data", spec.label),
                "scale_factor/add_offset are for non-netCDF partitions: a netCDF \
                 variable's own attributes say how it is packed",
            ));
        }
        if matches!(format, Format::NetCdf | Format::Nca | Format::Other(_))
            && spec.data.ncvar.is_none()
        {
            return Err(NcaError::Missing(format!("{}.data.ncvar", spec.label)));
        }
        if format == Format::Raw && (spec.data.shape.is_none() || spec.data.dtype.is_none()) {
            return Err(NcaError::Missing(format!(
                "{}.data.shape and .dtype (raw partitions need both)",
                spec.label
            )));
        }
        Ok(Target {
            format,
            path,
            is_self,
            ncvar: spec.data.ncvar.clone(),
        })
    }

    /// Open `target` for the partition `spec`. Errors name the file;
    /// nested descriptors are checked for cycles and depth. Nested
    /// aggregations and Zarr fragments are built once per load.
    pub fn open(&self, spec: &PartitionSpec, target: &Target) -> Result<Opened> {
        let memo = matches!(
            target.format,
            Format::Nca | Format::Zarr | Format::NetCdf | Format::Other(_)
        );
        let key = (
            target.path.clone(),
            target.ncvar.clone().unwrap_or_default(),
        );
        let shared = self.shared();
        if memo && let Some(o) = shared.built.lock().get(&key) {
            return Ok(o.clone());
        }
        let opened = self.open_uncached(spec, target)?;
        if memo {
            shared.built.lock().insert(key, opened.clone());
        }
        Ok(opened)
    }

    fn open_uncached(&self, spec: &PartitionSpec, target: &Target) -> Result<Opened> {
        // The file may have been replaced by a symlink since load.
        if !target.is_self && self.scope.check(&target.path).is_err() {
            return Err(Error::metadata(
                target.path.display().to_string(),
                format!(
                    "now resolves outside the allowed roots ({})",
                    self.scope.describe()
                ),
            ));
        }
        match target.format {
            Format::NetCdf => {
                let file = match (&self.netcdf, target.is_self) {
                    (Some(nc), true) => nc.clone(),
                    _ => self.netcdf_file(&target.path)?,
                };
                let var = target.ncvar.as_deref().unwrap_or_default();
                file.variable(var).ok_or_else(|| {
                    Error::NotFound(format!("{}: variable {var}", target.path.display()))
                })?;
                if let Some(agg) = (self.nest)(self, &target.path, var, Some(&file))? {
                    return Ok(Opened::Nested(agg));
                }
                Ok(Opened::NetCdf(file.array(var)?))
            }
            Format::Raw => {
                let (dtype, order) = spec.data.dtype.clone().expect("checked by target()");
                let shape = spec.data.shape.clone().expect("checked by target()");
                let raw = super::raw::RawArray::open(
                    self.raw_file(&target.path)?,
                    &target.path,
                    spec.data.file_offset.unwrap_or(0),
                    shape,
                    dtype,
                    order,
                )?;
                Ok(Opened::Plain(Arc::new(raw)))
            }
            Format::Zarr => {
                if url_of(&target.path).is_none() && !target.path.is_dir() {
                    return Err(Error::Io {
                        path: target.path.display().to_string(),
                        source: std::io::Error::new(
                            std::io::ErrorKind::NotFound,
                            "no Zarr store (directory) here",
                        ),
                    });
                }
                let store = self.files.store(&target.path);
                let h = crate::formats::zarr::open_store(store, self.cache.clone())?;
                let want = target.ncvar.as_deref().unwrap_or("").trim_matches('/');
                let node = h
                    .nodes
                    .into_iter()
                    .find(|n| n.path == want && n.array.is_some())
                    .ok_or_else(|| {
                        Error::NotFound(format!("{}: Zarr array {:?}", target.path.display(), want))
                    })?;
                let array: Arc<dyn ArraySource> = node.array.expect("filtered");
                Ok(Opened::Plain(array))
            }
            Format::Constant => {
                let (dtype, _) = spec.data.dtype.clone().expect("set with the value");
                let value = spec.data.value.clone().expect("set by the builder");
                let c = super::constant::Constant::new(&self.file, spec.extents(), dtype, value)?;
                Ok(Opened::Plain(Arc::new(c)))
            }
            Format::Nca => {
                let var = target.ncvar.as_deref().unwrap_or_default();
                let agg = (self.nest)(self, &target.path, var, None)?.ok_or_else(|| {
                    Error::NotFound(format!("{}: variable {var}", target.path.display()))
                })?;
                Ok(Opened::Nested(agg))
            }
            Format::Other(format) => {
                // The fragment opened as its format opens any file; what
                // it references in turn may lead only to its own
                // directory (and through the load's confined files).
                let roots = target.path.parent().map(Path::to_path_buf);
                let mut opts = Options::new(
                    roots.into_iter().collect(),
                    self.cache.clone(),
                    self.formats.clone(),
                );
                opts.files = self.files.clone();
                let at = At::new(&target.path, "", "", &opts);
                let ds = self.formats.open_file(&at, Some(format))?.ok_or_else(|| {
                    Error::metadata(target.path.display().to_string(), "holds no dataset")
                })?;
                let want = target
                    .ncvar
                    .as_deref()
                    .unwrap_or_default()
                    .trim_matches('/');
                let array = ds.get(want).ok_or_else(|| {
                    Error::NotFound(format!("{}: variable {want}", target.path.display()))
                })?;
                Ok(Opened::Plain(array.array.clone()))
            }
        }
    }

    /// The context of a nested aggregation `var` of `file`: an error for
    /// a cycle or a chain deeper than [`MAX_DEPTH`].
    pub(super) fn nested(
        &self,
        file: &Path,
        var: &str,
        netcdf: Option<Arc<NcFile>>,
    ) -> Result<Context> {
        let here = self
            .chain
            .last()
            .map(|(f, v)| format!("{}: {v}", f.display()))
            .unwrap_or_default();
        let pair = (file.to_path_buf(), var.to_string());
        if self.chain.contains(&pair) {
            let chain: Vec<String> = self
                .chain
                .iter()
                .chain(std::iter::once(&pair))
                .map(|(f, v)| format!("{} variable {v}", f.display()))
                .collect();
            return Err(NcaError::Cycle(chain.join(" -> ")).at(here));
        }
        if self.chain.len() >= MAX_DEPTH {
            return Err(NcaError::TooDeep(MAX_DEPTH).at(here));
        }
        let mut chain = self.chain.clone();
        chain.push(pair);
        let mut ctx = Context::new(
            self.scope.clone(),
            self.cache.clone(),
            self.files.clone(),
            self.formats.clone(),
            file.to_path_buf(),
            netcdf,
            chain,
            self.nest,
        );
        ctx.opened = Shared::Nested(match &self.opened {
            Shared::Owner(s) => Arc::downgrade(s),
            Shared::Nested(w) => w.clone(),
        });
        Ok(ctx)
    }

    /// The raw file at `path`, opened once per load.
    fn raw_file(&self, path: &Path) -> Result<Arc<dyn ReadAt>> {
        let shared = self.shared();
        if let Some(f) = shared.raw.lock().get(path) {
            return Ok(f.clone());
        }
        let f = self.files.open(path).map_err(|e| Error::Io {
            path: path.display().to_string(),
            source: e,
        })?;
        shared.raw.lock().insert(path.to_path_buf(), f.clone());
        Ok(f)
    }

    /// The netCDF file at `path`, opened once per load.
    fn netcdf_file(&self, path: &Path) -> Result<Arc<NcFile>> {
        let shared = self.shared();
        if let Some(f) = shared.netcdf.lock().get(path) {
            return Ok(f.clone());
        }
        let f = Arc::new(NcFile::open(path, self.files.as_ref(), &self.cache)?);
        shared.netcdf.lock().insert(path.to_path_buf(), f.clone());
        Ok(f)
    }
}

/// Guess the format of an existing file for a JSON descriptor's partition
/// without `format`, with the format registry's rules (`formats`): a
/// directory a directory format recognises (Zarr), a file by its first
/// bytes (netCDF, or any other format the registry sniffs), a `.json`
/// name a nested descriptor. `None`: cannot tell (or the file does not
/// exist).
fn sniff(path: &Path, files: &dyn Files, formats: &Formats) -> Option<Format> {
    let by_name = || {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "nc" | "nc3" | "nc4" | "cdf" => Some(Format::NetCdf),
            "zarr" => Some(Format::Zarr),
            "json" => Some(Format::Nca),
            _ => None,
        }
    };
    if url_of(path).is_some() {
        // A Zarr store (a prefix) or a descriptor by its name (a listing
        // per partition would say no more); else the object's magic
        // number, or its name when it is missing.
        return match by_name() {
            named @ Some(Format::Zarr | Format::Nca) => named,
            named => match files.open(path) {
                Ok(f) => sniff_bytes(f.as_ref(), formats),
                Err(_) => named,
            },
        };
    }
    if !path.exists() {
        // A missing fragment is a read error, not a load error: guess from
        // the name so the rest of the array still loads.
        return by_name();
    }
    if path.is_dir() {
        return match formats.classify_dir(&DirProbe::with_files(path, files), false)? {
            Found::Dataset { format, .. } if format.name == "zarr" => Some(Format::Zarr),
            _ => None,
        };
    }
    if path.extension().is_some_and(|e| e == "json") {
        return Some(Format::Nca);
    }
    sniff_bytes(files.open(path).ok()?.as_ref(), formats).or_else(|| by_claim(path, formats))
}

/// A format that knows its files by name alone (no magic number: NcML's
/// XML) and claims this one's.
fn by_claim(path: &Path, formats: &Formats) -> Option<Format> {
    let name = path.file_name()?.to_str()?;
    match formats.classify_file(name)? {
        Found::Dataset { format, .. } if format.sniff.is_none() => Some(Format::Other(format)),
        _ => None,
    }
}

/// The fragment format a file's first bytes say: netCDF (classic or
/// netCDF-4, read with its conventions: this folder's own), else another
/// format the registry sniffs. A blocked archive is no fragment.
fn sniff_bytes(file: &dyn ReadAt, formats: &Formats) -> Option<Format> {
    match netcdf::kind_of(file).ok()? {
        netcdf::Kind::Classic(_) | netcdf::Kind::Hdf5 => Some(Format::NetCdf),
        netcdf::Kind::Packed => None,
        netcdf::Kind::Other => formats.sniff(file).ok()?.map(Format::Other),
    }
}

/// A fragment URI as a path: `file://` URIs, absolute or relative paths;
/// a URL of a store slabfs reads (`s3://`, `https://`...) as it is (the
/// aggregation's scope decides whether it may be read). Other schemes
/// are refused.
pub(crate) fn uri_path(uri: &str) -> Result<String, String> {
    if uri.is_empty() {
        return Err("empty".into());
    }
    if crate::storage::location::is_url(uri) {
        return Ok(uri.to_string());
    }
    if let Some(rest) = uri.strip_prefix("file://") {
        // file:///abs/path, or file://localhost/abs/path
        let rest = rest.strip_prefix("localhost").unwrap_or(rest);
        return if rest.starts_with('/') {
            Ok(percent_decode(rest))
        } else {
            Err(format!("{uri:?}: a file URI on another host"))
        };
    }
    if let Some(rest) = uri.strip_prefix("file:") {
        return Ok(percent_decode(rest));
    }
    if let Some((scheme, _)) = uri.split_once("://") {
        return Err(format!(
            "{uri:?}: {scheme} URIs are not supported (paths, file:// and the URLs of \
             docs/REMOTE.md only)"
        ));
    }
    Ok(uri.to_string())
}

/// `%20` and friends, as in URIs.
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Ok(x) =
                u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("zz"), 16)
        {
            out.push(x);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::Store;
    use crate::storage::local::OsFiles;

    /// The real files, remembering a weak handle on each one opened.
    #[derive(Debug, Default)]
    struct Watched(Mutex<Vec<(PathBuf, Weak<dyn ReadAt>)>>);

    impl Files for Watched {
        fn open(&self, path: &Path) -> std::io::Result<Arc<dyn ReadAt>> {
            let f = OsFiles::unconfined().open(path)?;
            self.0.lock().push((path.to_path_buf(), Arc::downgrade(&f)));
            Ok(f)
        }
        fn store(&self, root: &Path) -> Arc<dyn Store> {
            OsFiles::unconfined().store(root)
        }
    }

    /// Regression (found by tests/it/soak.rs: every refresh pass leaked the
    /// open files of a nested aggregation): a load's shared memo holds the
    /// nested aggregations it built, which hold their contexts, which must
    /// not hold the memo in turn, or nothing of the load is ever freed.
    #[test]
    fn a_dropped_nested_aggregation_frees_its_files() {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nca/data/nested.nca.json");
        let watched = Arc::new(Watched::default());
        let mut opts = crate::formats::Options::new(
            vec![],
            Arc::new(ChunkCache::new(1 << 20)),
            crate::formats::entry::Formats::new(&[]),
        );
        opts.files = watched.clone();
        let vars = super::super::open_json(&path, &opts).unwrap();
        assert!(vars.skipped.is_empty(), "{:?}", vars.skipped);
        let (name, tas) = &vars.arrays[0];
        assert_eq!(name, "tas");
        // Read it all, so every partition is resolved and its files open.
        let mut buf = vec![0u8; tas.meta().nbytes() as usize];
        crate::engine::read::read_at(tas.as_ref(), 0, &mut buf, crate::dtype::Endian::NATIVE)
            .unwrap();
        assert!(!watched.0.lock().is_empty(), "no file opened through Files");
        drop(vars);
        let open: Vec<_> = watched
            .0
            .lock()
            .iter()
            .filter(|(_, w)| w.strong_count() > 0)
            .map(|(p, _)| p.clone())
            .collect();
        assert!(open.is_empty(), "still open after the drop: {open:?}");
    }

    #[test]
    fn uris() {
        assert_eq!(uri_path("frag_0.nc").unwrap(), "frag_0.nc");
        assert_eq!(uri_path("file:///data/a%20b.nc").unwrap(), "/data/a b.nc");
        assert_eq!(
            uri_path("file://localhost/data/a.nc").unwrap(),
            "/data/a.nc"
        );
        assert_eq!(
            uri_path("https://example.org/a.nc").unwrap(),
            "https://example.org/a.nc"
        );
        assert!(
            uri_path("ftp://example.org/a.nc")
                .unwrap_err()
                .contains("ftp")
        );
        assert!(uri_path("file://host/a.nc").is_err());
    }
}
