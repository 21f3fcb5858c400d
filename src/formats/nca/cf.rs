//! CF-1.13 aggregation variables (CF conventions section 2.8 and
//! appendix L), as cf-python >= 3.17 / cfdm >= 1.12 write them.
//!
//! An aggregation variable is a scalar variable with two attributes:
//!
//! - `aggregated_dimensions`: the blank-separated dimensions of the
//!   aggregated data (`""` for a scalar);
//! - `aggregated_data`: `"feature: variable"` pairs naming the
//!   *aggregation definition variables* of the same file, either `map`,
//!   `uris` and `identifiers`, or `map` and `unique_values`:
//!   - `map` (integer, 2-D: one row per aggregated dimension, one column
//!     per fragment along it; rows padded with missing values, which
//!     cfdm's netCDF-3 output writes as NC_FILL_INT with no `_FillValue`;
//!     a scalar 1 for scalar data): the fragment sizes; a fragment's
//!     extent along a dimension is its size, offset by the sum of the
//!     sizes before it;
//!   - `uris` (text, one dimension per aggregated dimension, sized by the
//!     number of fragments along it): each fragment's file, a `file://`
//!     URI or a path relative to the aggregation file;
//!   - `identifiers` (text, per fragment or one for all): the fragment's
//!     variable (`/q` is `q` in the root group);
//!   - `unique_values` (per fragment): the fragment is this value
//!     everywhere; a missing value means the fragment is missing.
//!
//! Each fragment becomes a partition of the same machinery as NCA
//! ([`super::partition`]): the fragment's own units are converted to the
//! aggregation variable's, its packing and missing values applied, a
//! fragment omitting size-1 dimensions is accepted, and one whose shape or
//! named dimension order does not fit its place is refused (cf-python's
//! reader fails on the first and reads the second silently wrong). The
//! assembled array is then the aggregation variable's data, served like
//! any netCDF variable's: in its own dtype, with its `_FillValue` for
//! every missing element and its own `scale_factor` / `add_offset` left to
//! readers (they are in the sidecar).

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::Value;

use super::aggregate::Aggregation;
use super::descriptor::{ArraySpec, DataSpec, Format, MasterSpec, PartitionSpec};
use super::error::NcaError;
use super::fragment::{Context, uri_path};
use super::ncfile::{NcFile, Var, Whole};
use crate::codec::numeric::{self, Element, Prim};
use crate::dtype::Endian;
use crate::engine::array::ArraySource;
use crate::error::{Error, Result};

/// Definition variables larger than this are refused (real ones hold a
/// few numbers or strings per fragment).
const MAX_DEFINITION_BYTES: u64 = 64 << 20;

/// NC_FILL_INT: how cfdm pads `map` rows in netCDF-3 files.
const NC_FILL_INT: i64 = -2_147_483_647;

/// Whether `v` is a CF-1.13 aggregation variable.
pub fn is_aggregation_variable(v: &Var) -> bool {
    v.attributes.contains_key("aggregated_dimensions")
        && v.attributes.contains_key("aggregated_data")
}

/// The aggregation definition variables of `file` (`map`, `uris`...):
/// implementation details of its aggregation variables, not shown.
pub fn definition_variables(file: &NcFile) -> BTreeSet<String> {
    file.variables()
        .iter()
        .filter(|v| v.not_shown.is_none() && is_aggregation_variable(v))
        .filter_map(|v| v.attributes.get("aggregated_data")?.as_str().map(features))
        .flat_map(|f| f.ok().unwrap_or_default())
        .map(|(_, var)| var)
        .collect()
}

/// Parse `"feature: variable feature: variable"`.
fn features(s: &str) -> Result<Vec<(String, String)>, NcaError> {
    let words: Vec<&str> = s.split_whitespace().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let (feature, var) = match words[i].split_once(':') {
            Some((f, v)) if !v.is_empty() => (f, v),
            Some((f, _)) if i + 1 < words.len() => {
                i += 1;
                (f, words[i])
            }
            _ => {
                return Err(NcaError::invalid(
                    "aggregated_data",
                    format!("{s:?} is not \"feature: variable\" pairs"),
                ));
            }
        };
        out.push((feature.to_string(), var.to_string()));
        i += 1;
    }
    Ok(out)
}

/// Build the aggregation variable `var` of `file`.
pub(crate) fn aggregation(
    file: &Arc<NcFile>,
    var: &str,
    ctx: Arc<Context>,
) -> Result<Arc<dyn ArraySource>> {
    let name = format!("{}: {var}", file.path());
    let spec = master(file, var, &name)?;
    Ok(Arc::new(Aggregation::new(spec, &name, ctx)?))
}

fn read_whole(file: &NcFile, var: &str, what: &str, name: &str) -> Result<Whole> {
    if file.variable(var).is_none() {
        return Err(NcaError::invalid(
            "aggregated_data",
            format!("{what} variable {var:?} does not exist"),
        )
        .at(name));
    }
    file.read_whole(var, MAX_DEFINITION_BYTES)
}

/// Text variable → its strings (for `char`, the last dimension is the
/// string length; trailing NULs and blanks dropped). A netCDF-4 `string`
/// variable's strings as they are.
fn strings(w: &Whole) -> Vec<String> {
    if let Some(s) = &w.strings {
        return s.clone();
    }
    let len = w.shape.last().copied().unwrap_or(1).max(1) as usize;
    w.bytes
        .chunks(len)
        .map(|c| {
            let end = c
                .iter()
                .rposition(|&b| b != 0 && b != b' ')
                .map_or(0, |i| i + 1);
            String::from_utf8_lossy(&c[..end]).into_owned()
        })
        .collect()
}

fn master(file: &NcFile, var: &str, name: &str) -> Result<MasterSpec> {
    let err = |e: NcaError| e.at(name);
    let v = file
        .variable(var)
        .ok_or_else(|| Error::NotFound(name.to_string()))?;
    let text = |k: &str| -> Result<String> {
        match v.attributes.get(k) {
            Some(Value::String(s)) => Ok(s.clone()),
            _ => Err(err(NcaError::invalid(k, "not text"))),
        }
    };
    let dims: Vec<String> = text("aggregated_dimensions")?
        .split_whitespace()
        .map(String::from)
        .collect();
    let mut shape = Vec::with_capacity(dims.len());
    for d in &dims {
        let len = file
            .dimensions()
            .iter()
            .find(|x| &x.name == d)
            .ok_or_else(|| {
                err(NcaError::invalid(
                    "aggregated_dimensions",
                    format!("{d:?} is not a dimension of the file"),
                ))
            })?
            .len;
        shape.push(len);
    }
    let rank = dims.len();
    let feats = features(&text("aggregated_data")?).map_err(err)?;
    let feature = |f: &str| feats.iter().find(|(k, _)| k == f).map(|(_, v)| v.as_str());
    let map_var =
        feature("map").ok_or_else(|| err(NcaError::Missing("aggregated_data map".into())))?;

    // Fragment sizes along each dimension.
    let map = read_whole(file, map_var, "map", name)?;
    let prim = Prim::of(&map.dtype)
        .filter(|p| {
            matches!(
                p.kind(),
                crate::dtype::NumericKind::Int | crate::dtype::NumericKind::UInt
            )
        })
        .ok_or_else(|| {
            err(NcaError::invalid(
                map_var,
                format!("map of type {} is not integer", map.dtype),
            ))
        })?;
    let e = Element {
        prim,
        endian: Endian::NATIVE,
    };
    let item = e.size();
    let values: Vec<(i64, bool)> = map
        .bytes
        .chunks(item)
        .map(|c| {
            let x = e.read(c).as_f64() as i64;
            (x, c == map.fill.as_slice() || x == NC_FILL_INT)
        })
        .collect();
    let columns = match (rank, map.shape.len()) {
        (0, _) => values.len().max(1),
        (1, 1) => values.len(),
        (r, 2) if map.shape[0] as usize == r => map.shape[1] as usize,
        _ => {
            return Err(err(NcaError::invalid(
                map_var,
                format!(
                    "map of shape {:?} for {rank} aggregated dimensions",
                    map.shape
                ),
            )));
        }
    };
    let mut sizes: Vec<Vec<u64>> = Vec::with_capacity(rank);
    for d in 0..rank {
        let row = &values[d * columns..(d + 1) * columns];
        let n = row.iter().take_while(|(_, missing)| !missing).count();
        if row[n..].iter().any(|(_, missing)| !missing) {
            return Err(err(NcaError::invalid(
                map_var,
                format!("row {d} has sizes after its padding"),
            )));
        }
        let row: Vec<u64> = row[..n]
            .iter()
            .map(|&(x, _)| u64::try_from(x).ok().filter(|&x| x > 0))
            .collect::<Option<_>>()
            .ok_or_else(|| {
                err(NcaError::invalid(
                    map_var,
                    format!("row {d} holds a size below 1"),
                ))
            })?;
        let total: u64 = row.iter().sum();
        if total != shape[d] {
            return Err(err(NcaError::invalid(
                map_var,
                format!(
                    "fragment sizes along {} add up to {total}; the dimension is {}",
                    dims[d], shape[d]
                ),
            )));
        }
        sizes.push(row);
    }
    let counts: Vec<u64> = sizes.iter().map(|s| s.len() as u64).collect();
    // Checked: the dimensions' product (the master's size) is not
    // checked yet, and a map of 8 x 256 sizes makes 2^64 fragments.
    let max = super::descriptor::MAX_PARTITIONS as u64;
    let nfrag = counts
        .iter()
        .try_fold(1u64, |n, &c| n.checked_mul(c))
        .filter(|&n| n <= max)
        .ok_or_else(|| {
            err(NcaError::invalid(
                map_var,
                format!("{counts:?} fragments, more than {max}"),
            ))
        })?;
    // Where each fragment comes from.
    enum Source {
        Files { uris: Vec<String>, ids: Vec<String> },
        Values(Vec<Option<Vec<u8>>>),
    }
    let expect_shape = |w: &Whole, what: &str, var: &str, text: bool| -> Result<()> {
        // `char` strings have a last dimension more than `string` ones.
        let frag_dims = if text && w.strings.is_none() {
            &w.shape[..w.shape.len().saturating_sub(1)]
        } else {
            &w.shape[..]
        };
        if frag_dims != counts.as_slice()
            && !(counts.is_empty() && frag_dims.iter().product::<u64>() == 1)
        {
            return Err(err(NcaError::invalid(
                var,
                format!("{what} of shape {:?} for {counts:?} fragments", w.shape),
            )));
        }
        Ok(())
    };
    let source = if let Some(uv) = feature("unique_values") {
        let w = read_whole(file, uv, "unique_values", name)?;
        expect_shape(&w, "unique_values", uv, false)?;
        let dtype = v.dtype();
        let (from, to) = (Prim::of(&w.dtype), Prim::of(&dtype));
        let values = w
            .bytes
            .chunks(w.dtype.size())
            .map(|c| {
                if c == w.fill.as_slice() || c == v.fill_value.as_slice() {
                    return Ok(None);
                }
                match (from, to) {
                    _ if w.dtype == dtype => Ok(Some(c.to_vec())),
                    (Some(f), Some(t)) => {
                        let mut out = vec![0u8; dtype.size()];
                        let ne = |p| Element {
                            prim: p,
                            endian: Endian::NATIVE,
                        };
                        numeric::convert(ne(f), c, ne(t), &mut out);
                        Ok(Some(out))
                    }
                    _ => Err(err(NcaError::invalid(
                        uv,
                        format!("unique values of type {} for a {dtype} variable", w.dtype),
                    ))),
                }
            })
            .collect::<Result<Vec<_>>>()?;
        if values.len() != nfrag as usize {
            return Err(err(NcaError::invalid(
                uv,
                format!("{} unique values for {nfrag} fragments", values.len()),
            )));
        }
        Source::Values(values)
    } else {
        let uv =
            feature("uris").ok_or_else(|| err(NcaError::Missing("aggregated_data uris".into())))?;
        let iv = feature("identifiers")
            .ok_or_else(|| err(NcaError::Missing("aggregated_data identifiers".into())))?;
        let uw = read_whole(file, uv, "uris", name)?;
        expect_shape(&uw, "uris", uv, true)?;
        let iw = read_whole(file, iv, "identifiers", name)?;
        let mut ids = strings(&iw);
        if ids.len() == 1 {
            ids = vec![ids[0].clone(); nfrag as usize];
        } else {
            expect_shape(&iw, "identifiers", iv, true)?;
        }
        let uris = strings(&uw);
        if uris.len() != nfrag as usize || ids.len() != nfrag as usize {
            return Err(err(NcaError::invalid(
                "aggregated_data",
                format!(
                    "{} uris and {} identifiers for {nfrag} fragments",
                    uris.len(),
                    ids.len()
                ),
            )));
        }
        Source::Files { uris, ids }
    };

    let mut partitions = Vec::with_capacity(nfrag as usize);
    for k in 0..nfrag {
        // Fragment index, row-major over `counts`.
        let mut idx = vec![0u64; rank];
        let mut rem = k;
        for d in (0..rank).rev() {
            idx[d] = rem % counts[d];
            rem /= counts[d];
        }
        let location: Vec<(u64, u64)> = (0..rank)
            .map(|d| {
                let start: u64 = sizes[d][..idx[d] as usize].iter().sum();
                (start, start + sizes[d][idx[d] as usize])
            })
            .collect();
        let label = format!("fragment {idx:?}");
        let mut data = DataSpec::default();
        let format = match &source {
            Source::Values(values) => match &values[k as usize] {
                None => continue, // missing: a hole, read as the fill value
                Some(value) => {
                    data.dtype = Some((v.dtype(), Endian::NATIVE));
                    data.value = Some(value.clone());
                    Some(Format::Constant)
                }
            },
            Source::Files { uris, ids } => {
                data.file = Some(
                    uri_path(&uris[k as usize])
                        .map_err(|d| err(NcaError::invalid(format!("{label} uri"), d)))?,
                );
                // `/q` is `q` of the root group; `/grp/q` is `grp/q`,
                // which only a netCDF-4 fragment has.
                let id = ids[k as usize].trim_start_matches('/');
                if id.is_empty() {
                    return Err(err(NcaError::invalid(
                        format!("{label} identifier"),
                        format!("{:?} names no variable", ids[k as usize]),
                    )));
                }
                data.ncvar = Some(id.to_string());
                // Told by the file (netCDF unless it is recognisably
                // another format slabfs reads: a Zarr store, an NcML file).
                None
            }
        };
        partitions.push(PartitionSpec {
            label,
            index: idx,
            location,
            dimensions: None,
            directions: Default::default(),
            units: None,
            calendar: None,
            part: None,
            format,
            data,
        });
    }
    let mut attributes = v.attributes.clone();
    attributes.remove("aggregated_dimensions");
    attributes.remove("aggregated_data");
    let attr = |k: &str| attributes.get(k).and_then(|x| x.as_str()).map(String::from);
    Ok(MasterSpec {
        name: var.to_string(),
        units: attr("units"),
        calendar: attr("calendar"),
        dtype: v.dtype(),
        fill: v.fill_value.clone(),
        array: ArraySpec {
            directions: vec![true; rank],
            pdims: (0..rank).collect(),
            pshape: counts,
            partitions,
        },
        dims,
        shape,
        attributes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feature_pairs() {
        assert_eq!(
            features("identifiers: fragment_identifiers map: fragment_map uris: fragment_uris")
                .unwrap(),
            [
                ("identifiers".into(), "fragment_identifiers".into()),
                ("map".into(), "fragment_map".into()),
                ("uris".into(), "fragment_uris".into())
            ]
        );
        assert_eq!(features("map:m unique_values: u").unwrap().len(), 2);
        assert!(features("map").is_err());
    }
}
