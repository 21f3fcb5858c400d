//! Datasets as the mount shows them: a tree of named arrays.
//!
//! `open(SOURCE)` decides what SOURCE is and lists its arrays by the path
//! each will have in the mount (and in `slabfs ls`):
//!
//! - a Zarr store holding a hierarchy: its arrays at their paths inside the
//!   store (`temp`, `group/sub/temp`);
//! - a Zarr store that is a single array: one file named after SOURCE's
//!   last path component;
//! - a plain directory: every dataset found inside it, recursively, at its
//!   relative path (`runs/a.zarr/temp`). A dataset that fails to open is
//!   skipped with a warning, never the whole directory.

use std::path::Path;
use std::sync::Arc;

use crate::array::ArraySource;
use crate::cache::ChunkCache;
use crate::error::{Error, Result};
use crate::zarr;

/// One array of a dataset and its path in the mount.
#[derive(Clone)]
pub struct Entry {
    pub path: String,
    pub array: Arc<dyn ArraySource>,
}

/// The arrays found under a source, sorted by path, and what was skipped.
#[derive(Default)]
pub struct Dataset {
    pub entries: Vec<Entry>,
    /// Datasets or arrays that could not be opened.
    pub skipped: Vec<Error>,
}

impl Dataset {
    pub fn get(&self, path: &str) -> Option<&Entry> {
        let path = path.trim_matches('/');
        self.entries.iter().find(|e| e.path == path)
    }
}

/// Directories deeper than this are not searched (symlink loops).
const MAX_DEPTH: usize = 32;

/// Open `source` (a Zarr store or a directory of datasets).
pub fn open(source: &Path, cache: Arc<ChunkCache>) -> Result<Dataset> {
    let meta = std::fs::metadata(source).map_err(|e| Error::Io {
        path: source.display().to_string(),
        source: e,
    })?;
    let mut ds = Dataset::default();
    if meta.is_dir() && zarr::is_store(source) {
        let name = source
            .canonicalize()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "array".to_string());
        add_store(&mut ds, source, "", &name, cache)?;
    } else if meta.is_dir() {
        walk(&mut ds, source, "", cache, 0)?;
    } else {
        return Err(Error::metadata(
            source.display().to_string(),
            "not a dataset (expected a Zarr store or a directory of datasets)",
        ));
    }
    ds.entries.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(ds)
}

/// Add the arrays of the store at `dir`, under the mount path `prefix`. A
/// store whose root is an array appears as one file named `root_name`.
fn add_store(
    ds: &mut Dataset,
    dir: &Path,
    prefix: &str,
    root_name: &str,
    cache: Arc<ChunkCache>,
) -> Result<()> {
    let h = zarr::open(dir, cache)?;
    for node in h.nodes {
        if let Some(array) = node.array {
            let rel = if node.path.is_empty() {
                root_name
            } else {
                &node.path
            };
            let path = if prefix.is_empty() {
                rel.to_string()
            } else if node.path.is_empty() {
                // A single-array store inside a directory: the store's own
                // directory name is the file name.
                prefix.to_string()
            } else {
                format!("{prefix}/{rel}")
            };
            ds.entries.push(Entry { path, array });
        }
    }
    ds.skipped.extend(h.skipped);
    Ok(())
}

fn walk(
    ds: &mut Dataset,
    dir: &Path,
    prefix: &str,
    cache: Arc<ChunkCache>,
    depth: usize,
) -> Result<()> {
    let io_err = |e| Error::Io {
        path: dir.display().to_string(),
        source: e,
    };
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .map_err(io_err)?
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort();
    for name in names {
        let path = dir.join(&name);
        let rel = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}/{name}")
        };
        if !path.is_dir() {
            continue;
        }
        if zarr::is_store(&path) {
            if let Err(e) = add_store(ds, &path, &rel, &name, cache.clone()) {
                log::debug!("skipping dataset {}: {e}", path.display());
                ds.skipped.push(e);
            }
        } else if depth < MAX_DEPTH {
            walk(ds, &path, &rel, cache.clone(), depth + 1)?;
        }
    }
    Ok(())
}
