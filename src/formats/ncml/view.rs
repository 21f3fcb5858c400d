//! A dataset as NcML sees it: shared dimensions, global attributes and
//! variables, each variable an array and the names and attributes it is
//! shown with.
//!
//! A member file opened by its format becomes a [`View`]
//! ([`View::of_dataset`]); aggregations and the NcML's changes make new
//! views from old ones; the outermost view becomes the mount's dataset
//! ([`View::into_dataset`]), each variable shown through [`Shown`] when
//! its names or attributes are no longer its array's.

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::dtype::DataType;
use crate::engine::array::{ArrayMeta, ArraySource, ChangeStamp, Wrapper};
use crate::engine::cache::SharedBytes;
use crate::engine::index::Region;
use crate::error::Result;
use crate::formats::entry::{Dataset, Directory, Entry, join};

#[derive(Debug, Clone, PartialEq)]
pub struct Dim {
    pub name: String,
    pub len: u64,
    pub unlimited: bool,
}

/// One variable: its array and how it is shown.
#[derive(Clone)]
pub struct Var {
    pub name: String,
    /// One name per dimension of the array.
    pub dims: Vec<String>,
    pub attrs: Map<String, Value>,
    pub array: Arc<dyn ArraySource>,
}

impl std::fmt::Debug for Var {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Var")
            .field("name", &self.name)
            .field("dims", &self.dims)
            .field("shape", &self.array.meta().shape)
            .finish()
    }
}

impl Var {
    pub fn shape(&self) -> &[u64] {
        &self.array.meta().shape
    }

    pub fn dtype(&self) -> &DataType {
        &self.array.meta().dtype
    }
}

#[derive(Debug, Clone, Default)]
pub struct View {
    pub dims: Vec<Dim>,
    pub attrs: Map<String, Value>,
    pub vars: Vec<Var>,
    /// The directories its scans list (and its members' scans).
    pub watch: Vec<std::path::PathBuf>,
    /// Build it again after this long: a scan left out a file newer than
    /// its `olderThan`.
    pub recheck_in: Option<std::time::Duration>,
}

impl View {
    pub fn var(&self, name: &str) -> Option<&Var> {
        self.vars.iter().find(|v| v.name == name)
    }

    pub fn var_mut(&mut self, name: &str) -> Option<&mut Var> {
        self.vars.iter_mut().find(|v| v.name == name)
    }

    pub fn dim(&self, name: &str) -> Option<&Dim> {
        self.dims.iter().find(|d| d.name == name)
    }

    /// Add `d` unless a dimension of its name is there.
    pub fn add_dim(&mut self, d: Dim) {
        if self.dim(&d.name).is_none() {
            self.dims.push(d);
        }
    }

    /// A member dataset as opened by its format: its root directory's
    /// attributes and dimensions (a netCDF file's; other formats' from
    /// their arrays' named dimensions), every array a variable named by
    /// its path (`grp/v` inside a group).
    pub fn of_dataset(ds: Dataset) -> View {
        let mut view = View {
            watch: ds.watch.clone(),
            recheck_in: ds.recheck_in,
            ..View::default()
        };
        if let Some(root) = ds.directories.get("") {
            view.attrs = root.attributes.clone();
            for (name, len, unlimited) in &root.dimensions {
                view.add_dim(Dim {
                    name: name.clone(),
                    len: *len,
                    unlimited: *unlimited,
                });
            }
        }
        for e in ds.entries {
            let meta = e.array.meta();
            let dims: Vec<String> = meta
                .dimension_names
                .iter()
                .enumerate()
                .map(|(i, n)| n.clone().unwrap_or_else(|| format!("{}_dim{i}", e.path)))
                .collect();
            for (n, &len) in dims.iter().zip(&meta.shape) {
                view.add_dim(Dim {
                    name: n.clone(),
                    len,
                    unlimited: false,
                });
            }
            view.vars.push(Var {
                name: e.path.clone(),
                dims,
                attrs: meta.attributes.clone(),
                array: e.array,
            });
        }
        view
    }

    /// The mount's dataset: every variable at `prefix/name`, the global
    /// attributes and dimensions at `prefix`, read from `file`.
    pub fn into_dataset(self, prefix: &str, file: &std::path::Path) -> Dataset {
        let mut ds = Dataset {
            watch: self.watch,
            recheck_in: self.recheck_in,
            ..Dataset::default()
        };
        ds.add_directory(
            prefix.to_string(),
            Directory {
                attributes: self.attrs,
                dimensions: self
                    .dims
                    .iter()
                    .map(|d| (d.name.clone(), d.len, d.unlimited))
                    .collect(),
                source: file.display().to_string(),
            },
        );
        for v in self.vars {
            let path = join(prefix, &v.name);
            ds.entries.push(Entry {
                path,
                array: Shown::of(v),
            });
        }
        ds.sorted()
    }
}

/// An array shown under the names and attributes the NcML gives it: the
/// same index space and data, another [`ArrayMeta`].
pub struct Shown {
    meta: ArrayMeta,
    inner: Arc<dyn ArraySource>,
}

impl Shown {
    /// `v`'s array, wrapped only if its names or attributes changed.
    pub fn of(v: Var) -> Arc<dyn ArraySource> {
        let m = v.array.meta();
        let dims: Vec<Option<String>> = v.dims.iter().cloned().map(Some).collect();
        if m.dimension_names == dims && m.attributes == v.attrs {
            return v.array;
        }
        let mut meta = m.clone();
        meta.dimension_names = dims;
        meta.attributes = v.attrs;
        Arc::new(Shown {
            meta,
            inner: v.array,
        })
    }
}

/// The index space is the inner array's (only names and attributes
/// differ), so every method taking a region passes it on as it is.
impl Wrapper for Shown {
    fn inner(&self) -> &dyn ArraySource {
        self.inner.as_ref()
    }

    fn meta(&self) -> &ArrayMeta {
        &self.meta
    }

    fn change_stamp(&self) -> ChangeStamp {
        self.inner.change_stamp()
    }

    fn read_region(&self, region: &Region, out: &mut [u8]) -> Result<()> {
        self.inner.read_region(region, out)
    }

    fn read_shared(&self, region: &Region) -> Option<Result<SharedBytes>> {
        self.inner.read_shared(region)
    }

    fn cached(&self, region: &Region) -> bool {
        self.inner.cached(region)
    }

    fn prefetch(&self, regions: &[Region]) {
        self.inner.prefetch(regions)
    }
}
