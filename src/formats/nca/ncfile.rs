//! An open netCDF file as the aggregation readers see it, whichever
//! reader opened it: classic ([`netcdf3::File`], blocked archives
//! included) or netCDF-4 ([`hdf5`]).
//!
//! NCA variables, CF-1.13 aggregation variables and CFA-0.4 variables
//! need the same few things of the file that holds them, and a fragment
//! needs one thing of the file it is in: the dimensions (name and
//! length), every variable's name, dimensions, dtype, fill value and
//! attributes (as JSON values, which both readers already produce for the
//! sidecars), a variable as an [`ArraySource`], and the small definition
//! variables read whole, strings included (netCDF-4 `string` variables are
//! variable-length, in the HDF5 global heap: [`hdf5::Strings`]).
//!
//! Why one struct with the two readers behind an enum and not a trait:
//! there are exactly two readers, both already summarise their variables
//! the same way ([`crate::engine::array::ArrayMeta`] for HDF5, a classic
//! [`netcdf3::Variable`] for netCDF-3), so the summary ([`Var`]) is built
//! once at open and everything above it is plain data; only "the array of
//! a variable" and "the strings of a variable" differ, two small matches.
//!
//! Names: a classic variable is found as netCDF-C finds it
//! ([`netcdf3::File::variable`]); a netCDF-4 variable by its path in the
//! file without the leading `/` (`q`, `grp/q`), as the mount shows it.
//!
//! Resources: a netCDF-4 file is held as the datasets its metadata
//! describes (each with its chunk index, read once at open) and the one
//! open file they share, as a classic file is held as its header and its
//! open file: one descriptor per fragment file, opened once per load.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::{Map, Value};

use crate::dtype::DataType;
use crate::engine::array::ArraySource;
use crate::engine::cache::ChunkCache;
use crate::error::{Error, Result};
use crate::formats::hdf5;
use crate::formats::netcdf::{self, Opened};
use crate::formats::netcdf3::{self, Dimension};
use crate::storage::Files;

/// One variable of a file, as the aggregation readers see it.
#[derive(Debug, Clone)]
pub struct Var {
    /// The name [`NcFile::variable`] finds it by.
    pub name: String,
    /// Why the mount cannot show it, if it cannot.
    pub not_shown: Option<String>,
    /// Dimension names, outermost first (empty for a scalar).
    pub dimensions: Vec<String>,
    pub shape: Vec<u64>,
    /// `None` for a netCDF-4 `string` variable.
    dtype: Option<DataType>,
    pub attributes: Map<String, Value>,
    /// One element, native byte order.
    pub fill_value: Vec<u8>,
}

impl Var {
    /// The element type of the flat file (`|S<n>` references for a
    /// netCDF-4 `string` variable, which no flat file shows).
    pub fn dtype(&self) -> DataType {
        self.dtype.clone().unwrap_or(DataType::FixedBytes(1))
    }

    /// Whether this is a netCDF-4 `string` variable.
    pub fn is_strings(&self) -> bool {
        self.dtype.is_none()
    }
}

/// A variable read whole ([`NcFile::read_whole`]).
pub struct Whole {
    pub shape: Vec<u64>,
    pub dtype: DataType,
    /// One element, native byte order.
    pub fill: Vec<u8>,
    /// The elements, native byte order (empty for strings).
    pub bytes: Vec<u8>,
    /// A netCDF-4 `string` variable's strings, row-major.
    pub strings: Option<Vec<String>>,
}

enum Reader {
    Classic(Arc<netcdf3::File>),
    Hdf5 {
        arrays: HashMap<String, Arc<dyn ArraySource>>,
        strings: HashMap<String, hdf5::Strings>,
        /// What the reader skipped, as text: why a name is not there.
        skipped: Vec<String>,
    },
}

/// An open netCDF file (see the module doc).
pub struct NcFile {
    path: String,
    reader: Reader,
    dimensions: Vec<Dimension>,
    variables: Vec<Var>,
    by_name: HashMap<String, usize>,
    global_attributes: Map<String, Value>,
    /// Every group's attributes by path (`""` the root: the global ones).
    groups: Vec<(String, Map<String, Value>)>,
    /// The HDF5 reader's skipped objects, handed out once.
    skipped: Mutex<Vec<Error>>,
}

impl std::fmt::Debug for NcFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NcFile").field("path", &self.path).finish()
    }
}

impl NcFile {
    /// Open the netCDF file `path` through `files` with the reader its
    /// magic number calls for (blocked archives decode through `cache`).
    pub fn open(path: &Path, files: &dyn Files, cache: &Arc<ChunkCache>) -> Result<NcFile> {
        match netcdf::open_any(path, files, cache)? {
            Opened::Netcdf3(f) => Ok(NcFile::classic(Arc::new(*f))),
            Opened::Hdf5(c) => Ok(NcFile::hdf5(path.display().to_string(), c)),
            // Not a classic file either: the classic reader says what is
            // wrong with it.
            Opened::Other => Ok(NcFile::classic(Arc::new(netcdf::open(
                path,
                files,
                Some(cache),
            )?))),
        }
    }

    /// A classic file (or blocked archive) already open.
    pub fn classic(file: Arc<netcdf3::File>) -> NcFile {
        let variables: Vec<Var> = file
            .variables()
            .iter()
            .map(|v| Var {
                name: v.name.clone(),
                not_shown: v.not_shown.clone(),
                dimensions: v.dimensions.clone(),
                shape: v.shape.clone(),
                dtype: Some(v.dtype()),
                attributes: v.attributes.clone(),
                fill_value: v.fill_value.clone(),
            })
            .collect();
        // What a name finds is what netCDF-C finds (the last of that name).
        let by_name = variables
            .iter()
            .enumerate()
            .filter_map(|(i, v)| {
                let found = file.variable(&v.name)?;
                (found.index == i).then(|| (v.name.clone(), i))
            })
            .collect();
        NcFile {
            path: file.path().to_string(),
            dimensions: file.dimensions().to_vec(),
            global_attributes: file.global_attributes().clone(),
            groups: vec![(String::new(), file.global_attributes().clone())],
            variables,
            by_name,
            skipped: Mutex::new(file.skipped()),
            reader: Reader::Classic(file),
        }
    }

    /// A netCDF-4 (HDF5) file read by [`hdf5::open`].
    pub fn hdf5(path: String, c: hdf5::Contents) -> NcFile {
        let mut variables = Vec::new();
        let mut arrays = HashMap::new();
        let mut strings = HashMap::new();
        let var = |name: &str, meta: &crate::engine::array::ArrayMeta, dtype| Var {
            name: name.to_string(),
            not_shown: None,
            dimensions: meta
                .dimension_names
                .iter()
                .map(|d| d.clone().unwrap_or_default())
                .collect(),
            shape: meta.shape.clone(),
            dtype,
            attributes: meta.attributes.clone(),
            fill_value: meta.fill_value.clone(),
        };
        for (name, a) in c.arrays {
            variables.push(var(&name, a.meta(), Some(a.meta().dtype.clone())));
            arrays.insert(name, a);
        }
        for (name, s) in c.strings {
            variables.push(var(&name, s.meta(), None));
            strings.insert(name, s);
        }
        let by_name = variables
            .iter()
            .enumerate()
            .map(|(i, v)| (v.name.clone(), i))
            .collect();
        let global_attributes = c
            .groups
            .iter()
            .find(|(g, _)| g.is_empty())
            .map(|(_, a)| a.clone())
            .unwrap_or_default();
        NcFile {
            path,
            dimensions: c
                .dimensions
                .into_iter()
                .map(|(name, len, is_unlimited)| Dimension {
                    name,
                    len,
                    is_unlimited,
                })
                .collect(),
            variables,
            by_name,
            global_attributes,
            groups: c.groups,
            reader: Reader::Hdf5 {
                arrays,
                strings,
                skipped: c.skipped.iter().map(|e| e.to_string()).collect(),
            },
            skipped: Mutex::new(c.skipped),
        }
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    /// Whether a netCDF-4 (HDF5) file.
    pub fn is_hdf5(&self) -> bool {
        matches!(self.reader, Reader::Hdf5 { .. })
    }

    pub fn dimensions(&self) -> &[Dimension] {
        &self.dimensions
    }

    pub fn global_attributes(&self) -> &Map<String, Value> {
        &self.global_attributes
    }

    /// The attributes of every group by path in the file (`""`: the
    /// global attributes; a classic file has no other group), bookkeeping
    /// hidden.
    pub fn groups(&self) -> &[(String, Map<String, Value>)] {
        &self.groups
    }

    /// Every variable, those the mount does not show included.
    pub fn variables(&self) -> &[Var] {
        &self.variables
    }

    /// The variable `name` finds (see the module doc); a leading `/` (the
    /// root group) is ignored for netCDF-4.
    pub fn variable(&self, name: &str) -> Option<&Var> {
        let name = if self.is_hdf5() {
            name.trim_start_matches('/')
        } else {
            name
        };
        self.by_name.get(name).map(|&i| &self.variables[i])
    }

    /// What the reader skipped (unshowable names, types, filters...),
    /// each naming the file; the first call takes them.
    pub fn take_skipped(&self) -> Vec<Error> {
        std::mem::take(&mut *self.skipped.lock())
    }

    /// The variable `name` as an array source.
    pub fn array(&self, name: &str) -> Result<Arc<dyn ArraySource>> {
        let not_found = || Error::NotFound(format!("{}: {name}", self.path));
        match &self.reader {
            Reader::Classic(f) => f.array(name),
            Reader::Hdf5 {
                arrays,
                strings,
                skipped,
            } => {
                let name = name.trim_start_matches('/');
                // A dataset the reader skipped (a corrupt header, a
                // filter without a codec...) is there but unreadable: an
                // I/O error saying why, not "no such variable".
                let dataset = format!("(dataset /{name})");
                match (arrays.get(name), strings.get(name)) {
                    (Some(a), _) => Ok(a.clone()),
                    (None, Some(s)) => Err(s.not_shown()),
                    (None, None) => match skipped.iter().find(|e| e.contains(&dataset)) {
                        Some(why) => Err(Error::metadata(&self.path, why)),
                        None => Err(not_found()),
                    },
                }
            }
        }
    }

    /// The whole of the variable `name`, refused past `max_bytes` (of
    /// elements; for strings, 16 bytes an element).
    pub fn read_whole(&self, name: &str, max_bytes: u64) -> Result<Whole> {
        if let Reader::Hdf5 { strings, .. } = &self.reader
            && let Some(s) = strings.get(name.trim_start_matches('/'))
        {
            // A heap reference is 16 bytes; the strings are small.
            let strs = s.read(max_bytes / 16)?;
            return Ok(Whole {
                shape: s.shape().to_vec(),
                dtype: DataType::FixedBytes(1),
                fill: Vec::new(),
                bytes: Vec::new(),
                strings: Some(strs),
            });
        }
        let a = self.array(name)?;
        let meta = a.meta();
        if meta.nbytes() > max_bytes {
            return Err(Error::TooLarge {
                path: format!("{} (variable {name})", self.path),
                size: meta.nbytes(),
                limit: max_bytes,
            });
        }
        let mut bytes = vec![0u8; meta.nbytes() as usize];
        a.read_region(
            &crate::engine::index::Region::whole(&meta.shape),
            &mut bytes,
        )?;
        Ok(Whole {
            shape: meta.shape.clone(),
            dtype: meta.dtype.clone(),
            fill: meta.fill_value.clone(),
            bytes,
            strings: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::local::OsFiles;

    fn h5_latest() -> NcFile {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hdf5/data/h5_latest.h5");
        let cache = Arc::new(ChunkCache::new(1 << 20));
        NcFile::open(&path, &OsFiles::unconfined(), &cache).unwrap()
    }

    /// Variable-length strings (h5py's `string_dtype`, netCDF-4 `string`)
    /// read whole from the global heap; never a flat file.
    #[test]
    fn string_datasets_read_whole() {
        let f = h5_latest();
        assert!(f.variable("vlen_str").unwrap().is_strings());
        let w = f.read_whole("/vlen_str", 1 << 20).unwrap();
        assert_eq!(w.shape, [2]);
        assert_eq!(w.strings.unwrap(), ["a", "bc"]);
        let e = f.array("vlen_str").err().unwrap();
        assert!(e.to_string().contains("variable-length string"), "{e}");
        // Refused past the limit (16 bytes a reference).
        assert!(matches!(
            f.read_whole("vlen_str", 16),
            Err(Error::TooLarge { .. })
        ));
    }

    fn nca_fixture(rel: &str) -> NcFile {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/nca/data")
            .join(rel);
        let cache = Arc::new(ChunkCache::new(1 << 20));
        NcFile::open(&path, &OsFiles::unconfined(), &cache).unwrap()
    }

    /// A netCDF-4 file's dimensions (hidden dimension scales included) and
    /// global attributes (bookkeeping hidden), as netCDF4-python lists
    /// them for the fixtures.
    #[test]
    fn netcdf4_dimensions_and_global_attributes() {
        let f = nca_fixture("cf/nc4/agg.nc");
        assert!(f.is_hdf5());
        let dims: Vec<(&str, u64, bool)> = f
            .dimensions()
            .iter()
            .map(|d| (d.name.as_str(), d.len, d.is_unlimited))
            .collect();
        for want in [
            ("time", 3, false),
            ("lat", 5, false),
            ("bounds2", 2, false),
            ("a_map_j3", 3, false),
            ("a_lat", 2, false),
        ] {
            assert!(dims.contains(&want), "{want:?} not in {dims:?}");
        }
        assert_eq!(
            f.global_attributes(),
            serde_json::json!({"Conventions": "CF-1.13"})
                .as_object()
                .unwrap()
        );
        // An unlimited dimension, and a variable in a group by its path.
        let f = nca_fixture("frag/nc4_2.nc");
        assert!(
            f.dimensions()
                .iter()
                .any(|d| d.name == "time" && d.len == 2 && d.is_unlimited)
        );
        let v = f.variable("/model/tas").unwrap();
        assert_eq!(v.dimensions, ["time", "lat", "lon"]);
        assert_eq!(v.shape, [2, 4, 5]);
    }

    /// Regression: a fragment naming a dataset the HDF5 reader skipped
    /// (here for its compound type) got "not found" (ENOENT at the
    /// mount); it is there but unreadable, an I/O error saying why.
    #[test]
    fn a_skipped_dataset_is_an_io_error_saying_why() {
        let f = h5_latest();
        let e = f.array("compound").err().unwrap();
        // Not NotFound: EIO at the mount (fs::error pins the errnos).
        assert!(matches!(e, Error::Metadata { .. }), "{e}");
        assert!(e.to_string().contains("its type is compound"), "{e}");
        assert!(e.to_string().contains("h5_latest.h5"), "{e}");
        let e = f.array("no_such_dataset").err().unwrap();
        assert!(matches!(e, Error::NotFound(_)), "{e}");
    }
}
