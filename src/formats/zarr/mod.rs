//! Zarr v2 and v3 stores.
//!
//! Opening a store discovers its hierarchy once: from consolidated metadata
//! when the store has it (`.zmetadata` for v2, `consolidated_metadata` in
//! the root `zarr.json` for v3), otherwise by walking directories for
//! `.zarray`/`.zgroup` or `zarr.json` files. Every array becomes a
//! [`ChunkedArray`]; an array whose metadata is broken is skipped and reported
//! in [`Hierarchy::skipped`] so the rest of the store still mounts.

pub mod entry;
pub mod fill;
pub mod json;
pub mod nczarr;
pub mod shard;
pub mod v2;
pub mod v3;

use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::engine::cache::ChunkCache;
use crate::error::{Error, Result};
use crate::formats::chunked::{ArraySpec, ChunkedArray};
use crate::storage::Store;
use crate::storage::local::FsStore;
pub use entry::{ENTRY, Groups};
use json::{MAX_METADATA_BYTES, obj};

/// One group or array of a store.
#[derive(Debug)]
pub struct Node {
    /// Path inside the store, "" for the root, "a/b" below it.
    pub path: String,
    pub attributes: Map<String, Value>,
    /// `None` for groups.
    pub array: Option<Arc<ChunkedArray>>,
}

/// The groups and arrays of a store, sorted by path.
#[derive(Debug, Default)]
pub struct Hierarchy {
    pub nodes: Vec<Node>,
    /// Arrays (or groups) that could not be opened, with why.
    pub skipped: Vec<Error>,
}

/// Directories deeper than this are not searched for nodes: a guard
/// against symlink loops, far beyond any real hierarchy.
const MAX_DEPTH: usize = 64;

/// The keys whose presence at its root makes a directory or a prefix a
/// Zarr store, in the order [`open_store`] reads them.
pub const STORE_KEYS: [&str; 4] = ["zarr.json", ".zmetadata", ".zgroup", ".zarray"];

/// Every metadata key of a store: with them a directory gains or loses
/// its being a store, or a node its attributes.
pub const METADATA_KEYS: [&str; 5] = ["zarr.json", ".zmetadata", ".zgroup", ".zarray", ".zattrs"];

/// Open the store rooted at the directory `dir`.
pub fn open(dir: &Path, cache: Arc<ChunkCache>) -> Result<Hierarchy> {
    open_store(Arc::new(FsStore::new(dir)), cache)
}

/// Open the store `store`.
pub fn open_store(store: Arc<dyn Store>, cache: Arc<ChunkCache>) -> Result<Hierarchy> {
    let opener = Opener { store, cache };
    let mut h = Hierarchy::default();
    if let Some(root) = opener.read_json("zarr.json")? {
        opener.v3_node("", root, &mut h, 0)?;
    } else if let Some(consolidated) = opener.read_json(".zmetadata")? {
        opener.v2_consolidated(&consolidated, &mut h)?;
    } else if opener.read_json(".zarray")?.is_some() || opener.read_json(".zgroup")?.is_some() {
        opener.v2_walk("", &mut h, 0)?;
    } else {
        return Err(Error::metadata(
            opener.store.describe(""),
            "not a Zarr store (no zarr.json, .zgroup, .zarray or .zmetadata)",
        ));
    }
    h.nodes.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(h)
}

struct Opener {
    store: Arc<dyn Store>,
    cache: Arc<ChunkCache>,
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

impl Opener {
    fn read_json(&self, key: &str) -> Result<Option<Value>> {
        match self.store.get(key, MAX_METADATA_BYTES)? {
            None => Ok(None),
            Some(bytes) => json::parse(&self.store.describe(key), &bytes).map(Some),
        }
    }

    fn attrs(&self, key: &str) -> Result<Map<String, Value>> {
        match self.read_json(key)? {
            None => Ok(Map::new()),
            Some(v) => Ok(obj(&self.store.describe(key), &v)?.clone()),
        }
    }

    /// Record the array at `path`, or the reason it cannot be opened.
    fn add_array(&self, h: &mut Hierarchy, path: &str, spec: Result<ArraySpec>) {
        let opened = spec.and_then(|spec| {
            let attributes = spec.meta.attributes.clone();
            ChunkedArray::new(spec, self.store.clone(), path, self.cache.clone())
                .map(|a| (a, attributes))
        });
        match opened {
            Ok((a, attributes)) => h.nodes.push(Node {
                path: path.to_string(),
                attributes,
                array: Some(Arc::new(a)),
            }),
            Err(e) => {
                log::debug!("skipping array {path:?}: {e}");
                h.skipped.push(e);
            }
        }
    }

    fn v2_array(
        &self,
        path: &str,
        zarray: &Value,
        mut attrs: Map<String, Value>,
    ) -> Result<ArraySpec> {
        let mut zarray = zarray.clone();
        nczarr::adapt(&mut zarray, &mut attrs);
        v2::parse_array(&self.store.describe(&join(path, ".zarray")), &zarray, attrs)
    }

    /// A v2 group's attributes, without netcdf-c's bookkeeping.
    fn v2_group_attrs(mut attrs: Map<String, Value>) -> Map<String, Value> {
        nczarr::hide_bookkeeping(&mut attrs);
        attrs
    }

    /// Walk directories from `path` for `.zarray` and `.zgroup`.
    fn v2_walk(&self, path: &str, h: &mut Hierarchy, depth: usize) -> Result<()> {
        if let Some(zarray) = self.read_json(&join(path, ".zarray"))? {
            let spec = self
                .attrs(&join(path, ".zattrs"))
                .and_then(|attrs| self.v2_array(path, &zarray, attrs));
            self.add_array(h, path, spec);
            return Ok(());
        }
        if self.read_json(&join(path, ".zgroup"))?.is_none() {
            return Ok(());
        }
        h.nodes.push(Node {
            path: path.to_string(),
            attributes: Self::v2_group_attrs(self.attrs(&join(path, ".zattrs"))?),
            array: None,
        });
        if depth >= MAX_DEPTH {
            return Ok(());
        }
        for (name, is_dir) in self.store.list_dir(path)? {
            if is_dir && !name.starts_with('.') {
                let child = join(path, &name);
                if let Err(e) = self.v2_walk(&child, h, depth + 1) {
                    log::debug!("skipping {child:?}: {e}");
                    h.skipped.push(e);
                }
            }
        }
        Ok(())
    }

    /// Nodes from a v2 `.zmetadata` document.
    fn v2_consolidated(&self, doc: &Value, h: &mut Hierarchy) -> Result<()> {
        let source = self.store.describe(".zmetadata");
        let metadata = obj(&source, doc)?
            .get("metadata")
            .and_then(Value::as_object)
            .ok_or_else(|| Error::metadata(&source, "no \"metadata\" object"))?;
        let attrs_of = |path: &str| -> Map<String, Value> {
            metadata
                .get(&join(path, ".zattrs"))
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default()
        };
        for (key, value) in metadata {
            if let Some(path) = node_path(key, ".zarray") {
                let spec = self.v2_array(path, value, attrs_of(path));
                self.add_array(h, path, spec);
            } else if let Some(path) = node_path(key, ".zgroup") {
                h.nodes.push(Node {
                    path: path.to_string(),
                    attributes: Self::v2_group_attrs(attrs_of(path)),
                    array: None,
                });
            }
        }
        Ok(())
    }

    /// The v3 node at `path` with its parsed `zarr.json`, and (for groups)
    /// its children from consolidated metadata or the directory.
    fn v3_node(&self, path: &str, doc: Value, h: &mut Hierarchy, depth: usize) -> Result<()> {
        let source = self.store.describe(&join(path, "zarr.json"));
        let o = obj(&source, &doc)?;
        match o.get("zarr_format").and_then(Value::as_u64) {
            Some(3) => {}
            other => {
                return Err(Error::metadata(
                    &source,
                    format!("zarr_format is {other:?}, expected 3"),
                ));
            }
        }
        match o.get("node_type").and_then(Value::as_str) {
            Some("array") => {
                let spec = v3::parse_array(&source, &doc);
                self.add_array(h, path, spec);
                Ok(())
            }
            Some("group") => {
                let attributes = match o.get("attributes") {
                    Some(a) => obj(&source, a)?.clone(),
                    None => Map::new(),
                };
                h.nodes.push(Node {
                    path: path.to_string(),
                    attributes,
                    array: None,
                });
                let consolidated = o
                    .get("consolidated_metadata")
                    .and_then(|c| c.get("metadata"))
                    .and_then(Value::as_object);
                if let Some(children) = consolidated {
                    // Consolidated metadata lists every descendant by its
                    // path relative to this group; nested groups' own
                    // consolidated copies are ignored (we already have all).
                    for (rel, child) in children {
                        if rel
                            .split('/')
                            .any(|c| c.is_empty() || c == "." || c == "..")
                        {
                            h.skipped
                                .push(Error::metadata(&source, format!("bad node name {rel:?}")));
                            continue;
                        }
                        let child_path = join(path, rel);
                        let mut child = child.clone();
                        if let Some(c) = child.as_object_mut() {
                            c.remove("consolidated_metadata");
                        }
                        if let Err(e) = self.v3_leaf(&child_path, child, h) {
                            h.skipped.push(e);
                        }
                    }
                    return Ok(());
                }
                if depth >= MAX_DEPTH {
                    return Ok(());
                }
                for (name, is_dir) in self.store.list_dir(path)? {
                    if !is_dir || name.starts_with('.') {
                        continue;
                    }
                    let child = join(path, &name);
                    let result =
                        self.read_json(&join(&child, "zarr.json"))
                            .and_then(|doc| match doc {
                                Some(doc) => self.v3_node(&child, doc, h, depth + 1),
                                None => Ok(()),
                            });
                    if let Err(e) = result {
                        log::debug!("skipping {child:?}: {e}");
                        h.skipped.push(e);
                    }
                }
                Ok(())
            }
            other => Err(Error::metadata(
                &source,
                format!("node_type {other:?} is not \"array\" or \"group\""),
            )),
        }
    }

    /// A node from consolidated metadata: no directory walk below it.
    fn v3_leaf(&self, path: &str, doc: Value, h: &mut Hierarchy) -> Result<()> {
        let source = self.store.describe(&join(path, "zarr.json"));
        match doc.get("node_type").and_then(Value::as_str) {
            Some("array") => {
                let spec = v3::parse_array(&source, &doc);
                self.add_array(h, path, spec);
            }
            Some("group") => h.nodes.push(Node {
                path: path.to_string(),
                attributes: doc
                    .get("attributes")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default(),
                array: None,
            }),
            other => {
                return Err(Error::metadata(
                    &source,
                    format!("node_type {other:?} is not \"array\" or \"group\""),
                ));
            }
        }
        Ok(())
    }
}

/// `"a/b/.zarray"` → `Some("a/b")`, `".zarray"` → `Some("")`, checking the
/// path has no empty, `.` or `..` component (metadata is input).
fn node_path<'a>(key: &'a str, file: &str) -> Option<&'a str> {
    let path = if key == file {
        ""
    } else {
        key.strip_suffix(file)?.strip_suffix('/')?
    };
    let ok = path.is_empty()
        || path
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..");
    ok.then_some(path)
}
