//! HDF5 filter plugins: decoding a filter slabfs has no codec for with
//! the plugin library HDF5 itself would load.
//!
//! HDF5 finds a filter it does not know in the directories of
//! `HDF5_PLUGIN_PATH` (`:`-separated; when unset, its built-in default
//! [`DEFAULT_PLUGIN_DIR`]): it loads every `lib*.so*` there, asks each
//! for its type (`H5PLget_plugin_type`, 0 = filter) and class
//! (`H5PLget_plugin_info`, an `H5Z_class2_t`), and calls the class's
//! filter function. This module does the same, for decoding only:
//!
//! ```text
//!  H5Z_class2_t { version: int = 1, id: int, encoder_present: unsigned,
//!                 decoder_present: unsigned, name: const char *,
//!                 can_apply, set_local, filter }      (H5Zpublic.h)
//!  size_t filter(unsigned flags, size_t cd_nelmts, const unsigned cd_values[],
//!                size_t nbytes, size_t *buf_size, void **buf)
//! ```
//!
//! A chunk is decoded by calling `filter` with `H5Z_FLAG_REVERSE`, the
//! filter's parameters as the file stores them (`set_local` ran when the
//! file was written, so no HDF5 call is needed), and a copy of the chunk
//! in a `malloc`ed buffer: the function may `free` it and return a new
//! `malloc`ed one, whose first `n` bytes are the result (`n` = 0 means it
//! failed). Whatever buffer it leaves is freed here with `free`.
//!
//! # Design
//!
//! - **Off by default.** A plugin is native code running inside the daemon
//!   (docs/SECURITY.md): nothing is loaded unless the operator passed
//!   `--hdf5-plugins`. The CLI calls [`configure`] once; formats ask
//!   [`codec`] for a filter the registry lacks. Either way a dataset with
//!   such a filter is still listed: its codec is then [`Unavailable`],
//!   whose every decode fails with an error naming the filter id and the
//!   directories (searched, or that would be), so reads touching it get
//!   EIO and the daemon carries on.
//! - **One scan, bounded.** The directories are scanned once, lazily, at
//!   the first filter asked for; the map id → library is kept, and a
//!   missing id is a lookup in that map, never a rescan per chunk. Loaded
//!   libraries stay loaded for the process's lifetime (unloading native
//!   code that may have registered destructors is not worth its risk):
//!   at most one per `lib*.so*` file of the directories, whatever the
//!   number of datasets. The first library in path order that provides an
//!   id serves it, as in HDF5. A directory or library that every user
//!   may write is passed over with a warning: it would let anyone put
//!   code into the daemon.
//! - **Serialised calls.** HDF5 never runs one filter function on two
//!   threads at once (its thread-safe build holds a global lock), so a
//!   plugin need not be reentrant; each library's filter is called under
//!   its own mutex. Built-in codecs still decode in parallel.
//! - **Bounded output, checked.** A result larger than the chain's limit
//!   for the chunk is an error (the plugin allocated it, we do not copy
//!   it); the chain checks the exact size as for every codec.

use std::collections::HashMap;
use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::mem::ManuallyDrop;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use parking_lot::{Mutex, RwLock};

use super::{BytesToBytesCodec, CodecError, DecodedSize};

/// Where HDF5 looks when `HDF5_PLUGIN_PATH` is unset (`H5PL_DEFAULT_PATH`
/// on Unix).
pub const DEFAULT_PLUGIN_DIR: &str = "/usr/local/hdf5/lib/plugin";

/// The environment variable HDF5 reads its plugin directories from.
pub const PLUGIN_PATH_VAR: &str = "HDF5_PLUGIN_PATH";

/// `H5Z_FLAG_REVERSE`: the filter function is asked to decode.
const H5Z_FLAG_REVERSE: c_uint = 0x0100;
/// `H5Z_CLASS_T_VERS`: the `version` of an `H5Z_class2_t`. Anything else
/// is the older `H5Z_class1_t` (which starts with the id), not supported.
const H5Z_CLASS_T_VERS: c_int = 1;
/// `H5PL_TYPE_FILTER`.
const H5PL_TYPE_FILTER: c_int = 0;

/// `H5Z_func_t`.
type FilterFn = unsafe extern "C" fn(
    flags: c_uint,
    cd_nelmts: usize,
    cd_values: *const c_uint,
    nbytes: usize,
    buf_size: *mut usize,
    buf: *mut *mut c_void,
) -> usize;

/// `H5Z_class2_t` (H5Zpublic.h), field for field. `can_apply` and
/// `set_local` are encode-time callbacks, never called here.
#[repr(C)]
struct H5ZClass2 {
    version: c_int,
    id: c_int,
    encoder_present: c_uint,
    decoder_present: c_uint,
    name: *const c_char,
    can_apply: Option<unsafe extern "C" fn()>,
    set_local: Option<unsafe extern "C" fn()>,
    filter: Option<FilterFn>,
}

/// Why a plugin filter cannot decode.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PluginError {
    #[error(
        "HDF5 filter {id}{} has no built-in codec and filter plugins are off \
         (--hdf5-plugins would look in {searched})",
        known(*id)
    )]
    Disabled { id: u32, searched: String },
    #[error("HDF5 filter {id}{}: no plugin library provides it in {searched}", known(*id))]
    NotFound { id: u32, searched: String },
    #[error("HDF5 filter {id}: plugin {} cannot decode (decoder_present is 0)", path.display())]
    NoDecoder { id: u32, path: PathBuf },
    #[error("HDF5 filter {id}: plugin {} failed to decode the chunk", path.display())]
    Failed { id: u32, path: PathBuf },
    #[error(
        "HDF5 filter {id}: plugin {} returned {returned} bytes in a buffer of {buf_size}",
        path.display()
    )]
    BadResult {
        id: u32,
        path: PathBuf,
        returned: usize,
        buf_size: usize,
    },
    #[error("HDF5 filter {id}: no memory for a {size}-byte chunk")]
    NoMemory { id: u32, size: usize },
}

fn known(id: u32) -> String {
    hdf5_filter_name(id)
        .map(|n| format!(" ({n})"))
        .unwrap_or_default()
}

/// The plugin settings of the process.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Config {
    /// Whether plugin libraries may be loaded at all.
    pub enabled: bool,
    /// The directories searched, in order.
    pub dirs: Vec<PathBuf>,
}

impl Config {
    /// Plugins `enabled` or not, searching what HDF5 would: the
    /// directories of `HDF5_PLUGIN_PATH`, or [`DEFAULT_PLUGIN_DIR`] when
    /// it is unset.
    pub fn from_env(enabled: bool) -> Config {
        Config {
            enabled,
            dirs: dirs_from(std::env::var_os(PLUGIN_PATH_VAR).as_deref()),
        }
    }

    /// Plugins `enabled` or not, searching the `:`-separated directories
    /// of `path` (read as HDF5 reads `HDF5_PLUGIN_PATH`).
    pub fn with_path(enabled: bool, path: &std::ffi::OsStr) -> Config {
        Config {
            enabled,
            dirs: dirs_from(Some(path)),
        }
    }

    /// The directories as messages show them.
    pub fn describe_dirs(&self) -> String {
        describe(&self.dirs)
    }
}

/// The directories a `HDF5_PLUGIN_PATH` value names (`None`: unset). An
/// empty value names none, as in HDF5.
fn dirs_from(value: Option<&std::ffi::OsStr>) -> Vec<PathBuf> {
    match value {
        None => vec![PathBuf::from(DEFAULT_PLUGIN_DIR)],
        Some(v) => std::env::split_paths(v)
            .filter(|p| !p.as_os_str().is_empty())
            .collect(),
    }
}

/// The directories, for messages.
fn describe(dirs: &[PathBuf]) -> String {
    if dirs.is_empty() {
        return "no directory (the plugin path is empty)".to_string();
    }
    let list: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    list.join(":")
}

static PLUGINS: RwLock<Option<Arc<Plugins>>> = RwLock::new(None);

/// Set the process's plugin settings (the CLI does, once, before opening
/// anything). Until then plugins are off.
pub fn configure(config: Config) {
    *PLUGINS.write() = Some(Arc::new(Plugins::new(config)));
}

/// The codec undoing HDF5 filter `id` with parameters `params` through a
/// plugin library, or, when plugins are off or none provides `id`, an
/// [`Unavailable`] codec whose decodes fail saying why.
pub fn codec(id: u32, params: &[u32]) -> Box<dyn BytesToBytesCodec> {
    let plugins = PLUGINS
        .read()
        .clone()
        .unwrap_or_else(|| Arc::new(Plugins::new(Config::from_env(false))));
    plugins.codec(id, params)
}

/// A set of plugin directories and what they provide.
#[derive(Debug)]
pub struct Plugins {
    config: Config,
    scan: OnceLock<HashMap<u32, Arc<Plugin>>>,
}

impl Plugins {
    pub fn new(config: Config) -> Plugins {
        Plugins {
            config,
            scan: OnceLock::new(),
        }
    }

    /// The plugin providing filter `id`, scanning the directories on the
    /// first call.
    pub fn find(&self, id: u32) -> Result<Arc<Plugin>, PluginError> {
        let searched = || describe(&self.config.dirs);
        if !self.config.enabled {
            return Err(PluginError::Disabled {
                id,
                searched: searched(),
            });
        }
        let found = self.scan.get_or_init(|| scan(&self.config.dirs));
        found
            .get(&id)
            .cloned()
            .ok_or_else(|| PluginError::NotFound {
                id,
                searched: searched(),
            })
    }

    /// See [`codec`].
    pub fn codec(&self, id: u32, params: &[u32]) -> Box<dyn BytesToBytesCodec> {
        match self.find(id) {
            Ok(plugin) => Box::new(PluginFilter {
                plugin,
                params: params.to_vec(),
            }),
            Err(e) => {
                log::debug!("{e}");
                Box::new(Unavailable { why: e.to_string() })
            }
        }
    }
}

/// Load every `lib*.so*` of `dirs` (in order, each directory's names
/// sorted) and map the filter ids they provide to the first library
/// providing each.
fn scan(dirs: &[PathBuf]) -> HashMap<u32, Arc<Plugin>> {
    let mut found: HashMap<u32, Arc<Plugin>> = HashMap::new();
    for dir in dirs {
        if let Some(why) = writable_by_all(dir) {
            log::warn!(
                "HDF5 plugin directory {} not searched: {why}",
                dir.display()
            );
            continue;
        }
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) => {
                log::debug!("HDF5 plugin directory {}: {e}", dir.display());
                continue;
            }
        };
        let mut names: Vec<PathBuf> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| {
                // HDF5's own test (H5PL__find_plugin_in_path).
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("lib") && n.contains(".so"))
            })
            .collect();
        names.sort();
        for path in names {
            if let Some(why) = writable_by_all(&path) {
                log::warn!("HDF5 plugin {} not loaded: {why}", path.display());
                continue;
            }
            match Plugin::load(&path) {
                Ok(Some(p)) => match found.entry(p.id) {
                    std::collections::hash_map::Entry::Occupied(_) => log::debug!(
                        "HDF5 filter {}: {} ignored, an earlier library provides it",
                        p.id,
                        path.display()
                    ),
                    std::collections::hash_map::Entry::Vacant(v) => {
                        log::info!(
                            "HDF5 filter {} ({}) from plugin {}",
                            p.id,
                            p.name,
                            path.display()
                        );
                        v.insert(Arc::new(p));
                    }
                },
                Ok(None) => log::debug!("{}: not an HDF5 filter plugin", path.display()),
                Err(e) => log::warn!("HDF5 plugin {}: not loaded: {e}", path.display()),
            }
        }
    }
    found
}

/// Why `path` (a plugin directory or library, links followed) must not
/// be trusted: every user may write it, and so put code into the daemon
/// (as OpenSSH's `StrictModes` refuses such key files). `None` when it
/// is not so, or cannot be read (the scan then reports that itself).
fn writable_by_all(path: &Path) -> Option<&'static str> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).ok()?.permissions().mode();
    (mode & 0o002 != 0).then_some("writable by every user")
}

/// One loaded filter plugin library.
pub struct Plugin {
    id: u32,
    /// The class's `name`, for logs.
    name: String,
    /// The codec name in chains and sidecars (`hdf5-plugin:ID`); made once
    /// per library, which lives as long as the process.
    label: &'static str,
    path: PathBuf,
    decoder: bool,
    filter: FilterFn,
    /// Held while `filter` runs (see the module doc).
    serial: Mutex<()>,
    /// Never unloaded: `filter` points into it.
    _lib: ManuallyDrop<libloading::Library>,
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// Why a library could not be used as a plugin (logged by the scan).
#[derive(Debug, thiserror::Error)]
enum LoadError {
    #[error(transparent)]
    Dl(#[from] libloading::Error),
    #[error("H5PLget_plugin_info returned NULL")]
    NoInfo,
    #[error(
        "H5Z_class_t version {0} (only version {H5Z_CLASS_T_VERS}, H5Z_class2_t, is supported)"
    )]
    Version(c_int),
    #[error("filter id {0} is not valid")]
    BadId(c_int),
    #[error("the filter function is NULL")]
    NoFilter,
}

impl Plugin {
    /// Load `path` and read its filter class; `None` when it is a plugin
    /// of another type (virtual file driver, VOL connector).
    fn load(path: &Path) -> Result<Option<Plugin>, LoadError> {
        // SAFETY: loading a library runs its initialisers. That is the
        // point of this module, which only runs when the operator enabled
        // plugins (docs/SECURITY.md); the files are HDF5 plugins by the
        // operator's choice of directory.
        let lib = unsafe { libloading::Library::new(path) }?;
        let lib = ManuallyDrop::new(lib);
        // SAFETY: H5PLextern.h declares `H5PL_type_t
        // H5PLget_plugin_type(void)`, an int-sized enum.
        let kind = unsafe {
            let f = lib.get::<unsafe extern "C" fn() -> c_int>(b"H5PLget_plugin_type\0")?;
            f()
        };
        if kind != H5PL_TYPE_FILTER {
            return Ok(None);
        }
        // SAFETY: H5PLextern.h declares `const void *H5PLget_plugin_info(void)`,
        // for a filter a pointer to its `H5Z_class2_t`.
        let info = unsafe {
            let f =
                lib.get::<unsafe extern "C" fn() -> *const H5ZClass2>(b"H5PLget_plugin_info\0")?;
            f()
        };
        if info.is_null() {
            return Err(LoadError::NoInfo);
        }
        // SAFETY: non-null, and the library (which holds the class,
        // usually a static) stays loaded. The version is read first: only
        // a version-1 class has the layout of `H5ZClass2`, and its first
        // field is an int in both class layouts.
        let version = unsafe { *info.cast::<c_int>() };
        if version != H5Z_CLASS_T_VERS {
            return Err(LoadError::Version(version));
        }
        // SAFETY: as above; version 1 is `H5Z_class2_t`.
        let class = unsafe { &*info };
        let id = u32::try_from(class.id).map_err(|_| LoadError::BadId(class.id))?;
        let filter = class.filter.ok_or(LoadError::NoFilter)?;
        let name = if class.name.is_null() {
            String::new()
        } else {
            // SAFETY: `name` is documented as a NUL-terminated comment
            // string owned by the library.
            unsafe { CStr::from_ptr(class.name) }
                .to_string_lossy()
                .into_owned()
        };
        Ok(Some(Plugin {
            id,
            name,
            label: Box::leak(format!("hdf5-plugin:{id}").into_boxed_str()),
            path: path.to_path_buf(),
            decoder: class.decoder_present != 0,
            filter,
            serial: Mutex::new(()),
            _lib: lib,
        }))
    }

    /// The filter id the library provides.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The library's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Decode `encoded` with parameters `params`: its result, at most
    /// `limit` bytes.
    fn decode(
        &self,
        encoded: &[u8],
        params: &[c_uint],
        limit: usize,
    ) -> Result<Vec<u8>, CodecError> {
        if !self.decoder {
            return Err(PluginError::NoDecoder {
                id: self.id,
                path: self.path.clone(),
            }
            .into());
        }
        let nbytes = encoded.len();
        if nbytes == 0 {
            // No filter output is empty, and a plugin would read its
            // header past the end of an empty buffer.
            return Err(PluginError::Failed {
                id: self.id,
                path: self.path.clone(),
            }
            .into());
        }
        let mut buf_size = nbytes;
        // SAFETY: a plain allocation, checked for NULL below.
        let mut buf: *mut c_void = unsafe { libc::malloc(buf_size) };
        if buf.is_null() {
            return Err(PluginError::NoMemory {
                id: self.id,
                size: nbytes,
            }
            .into());
        }
        // SAFETY: `buf` holds `buf_size >= nbytes` bytes and is fresh, so
        // it does not overlap `encoded`.
        unsafe { std::ptr::copy_nonoverlapping(encoded.as_ptr(), buf.cast::<u8>(), nbytes) };
        let returned = {
            let _serial = self.serial.lock();
            // SAFETY: `filter` is the class's `H5Z_func_t`, called as HDF5
            // does when reading: a malloc'ed buffer holding `nbytes` bytes
            // and its size, the stored parameters (`cd_nelmts` of them),
            // H5Z_FLAG_REVERSE. It may free `buf` and store a new malloc'ed
            // one and its size; the library is never unloaded; calls are
            // serialised by `serial`.
            unsafe {
                (self.filter)(
                    H5Z_FLAG_REVERSE,
                    params.len(),
                    params.as_ptr(),
                    nbytes,
                    &mut buf_size,
                    &mut buf,
                )
            }
        };
        // Whatever the outcome, `buf` is now ours to free.
        let owned = Malloced(buf);
        if returned == 0 {
            return Err(PluginError::Failed {
                id: self.id,
                path: self.path.clone(),
            }
            .into());
        }
        if returned > buf_size || owned.0.is_null() {
            return Err(PluginError::BadResult {
                id: self.id,
                path: self.path.clone(),
                returned,
                buf_size,
            }
            .into());
        }
        if returned > limit {
            return Err(CodecError::TooLarge {
                codec: self.label,
                limit,
            });
        }
        // SAFETY: the plugin says the first `returned` bytes of its
        // `buf_size`-byte buffer are the result, and `returned <= buf_size`.
        let out = unsafe { std::slice::from_raw_parts(owned.0.cast::<u8>(), returned) };
        Ok(out.to_vec())
    }
}

/// A buffer from `malloc` (or a plugin's), freed on drop.
struct Malloced(*mut c_void);

impl Drop for Malloced {
    fn drop(&mut self) {
        // SAFETY: the pointer came from malloc (ours or the plugin's, which
        // must use malloc as HDF5's H5MM does) or is NULL; freed once.
        unsafe { libc::free(self.0) }
    }
}

/// A filter decoded by a plugin library, with one dataset's parameters.
#[derive(Debug)]
pub struct PluginFilter {
    plugin: Arc<Plugin>,
    params: Vec<c_uint>,
}

impl BytesToBytesCodec for PluginFilter {
    fn name(&self) -> &'static str {
        self.plugin.label
    }

    fn encoded_size(&self, _decoded_size: usize) -> Option<usize> {
        None
    }

    fn decode(&self, encoded: Vec<u8>, size: DecodedSize) -> Result<Vec<u8>, CodecError> {
        self.plugin.decode(&encoded, &self.params, size.limit())
    }
}

/// A filter that cannot be decoded here: every decode fails with `why`
/// (which names the filter id and the plugin directories), so the
/// dataset is listed and reads touching its chunks get EIO.
#[derive(Debug)]
pub struct Unavailable {
    why: String,
}

impl BytesToBytesCodec for Unavailable {
    fn name(&self) -> &'static str {
        "unavailable-hdf5-filter"
    }

    fn encoded_size(&self, _decoded_size: usize) -> Option<usize> {
        None
    }

    fn decode(&self, _encoded: Vec<u8>, _size: DecodedSize) -> Result<Vec<u8>, CodecError> {
        Err(CodecError::Unavailable(self.why.clone()))
    }
}

/// Names of HDF5 filters that have no codec here, for error messages: the
/// best-known registered ones (The HDF Group's `RegisteredFilterPlugins.md`;
/// every filter of the library's own, `H5Zpublic.h`, has a codec).
pub fn hdf5_filter_name(id: u32) -> Option<&'static str> {
    Some(match id {
        305 => "lzo",
        32003 => "snappy",
        32013 => "zfp",
        32014 => "fpzip",
        32017 => "sz",
        32022 => "bitgroom",
        32023 => "granular bitround",
        32024 => "sz3",
        32026 => "blosc2",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn plugin_path_is_split_like_hdf5() {
        assert_eq!(dirs_from(None), vec![PathBuf::from(DEFAULT_PLUGIN_DIR)]);
        assert_eq!(dirs_from(Some(OsStr::new(""))), Vec::<PathBuf>::new());
        assert_eq!(
            dirs_from(Some(OsStr::new("/a::/b/c:"))),
            vec![PathBuf::from("/a"), PathBuf::from("/b/c")]
        );
    }

    #[test]
    fn disabled_plugins_load_nothing_and_say_where_they_would_look() {
        let p = Plugins::new(Config {
            enabled: false,
            dirs: vec!["/nonexistent/plugins".into()],
        });
        let e = p.find(32013).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("32013 (zfp)"), "{msg}");
        assert!(msg.contains("--hdf5-plugins"), "{msg}");
        assert!(msg.contains("/nonexistent/plugins"), "{msg}");
        assert!(p.scan.get().is_none(), "nothing scanned when off");
        let c = p.codec(32013, &[]);
        let e = c.decode(vec![1, 2, 3], DecodedSize::Exact(8)).unwrap_err();
        assert!(e.to_string().contains("32013"), "{e}");
    }

    #[test]
    fn a_missing_filter_names_the_directories_and_is_not_rescanned() {
        let dir = std::env::temp_dir().join(format!("slabfs-plugins-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // Not a library: the scan logs it and goes on.
        std::fs::write(dir.join("libbogus.so"), b"not an ELF file").unwrap();
        let p = Plugins::new(Config {
            enabled: true,
            dirs: vec![dir.clone(), "/nonexistent/plugins".into()],
        });
        let msg = p.find(32024).unwrap_err().to_string();
        assert!(msg.contains("32024 (sz3)"), "{msg}");
        assert!(
            msg.contains(&format!("{}:/nonexistent/plugins", dir.display())),
            "{msg}"
        );
        // The scan ran once and found nothing; later lookups reuse it.
        assert!(p.scan.get().is_some_and(HashMap::is_empty));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
