//! One partition: its sub-array, conformed to the master on the fly.
//!
//! A partition covers the box `location` of the master. Its *data array*
//! is `sub_array[part]`, whose dimensions (named by `dimensions`, default
//! the master's) may come in another order, include size-1 dimensions the
//! master lacks, lack size-1 dimensions the master has, and run in the
//! opposite direction. Its values may need unit, packing, missing-value
//! and dtype conversion ([`super::convert`]).
//!
//! # Resolving
//!
//! Everything that needs the fragment (its shape, dtype, dimension names,
//! attributes) is checked once, when it is first opened: at load when the
//! file exists, else on the first read that touches it (a missing file is
//! then an error for that read only, and is retried next time). The
//! result is a resolved partition (`Resolved`):
//!
//! - `seqs[q]`: for each sub-array dimension, which sub-array index each
//!   position of the data array uses (`part`, or everything);
//! - `s2m[q]` / `m2s[d]`: which master dimension each sub-array dimension
//!   is (`None` for an extra size-1 dimension), and back (`None` for a
//!   master dimension the sub-array lacks, necessarily of extent 1);
//! - `reversed[d]`: whether the master runs the other way along `d`.
//!
//! Without `dimensions`, the sub-array's dimensions are matched to the
//! master's in order, skipping size-1 ones on either side (the layout is
//! the same whichever size-1 dimensions are skipped). When the fragment
//! names its own dimensions (netCDF, Zarr) with master dimension names
//! and they disagree with that order, loading fails instead of serving a
//! transposed array (cf-python's reader reads such fragments silently
//! wrong).
//!
//! # Reading
//!
//! A read asks for a box `start + count` of the partition (master order,
//! relative to `location`). Each sub-array dimension gets the run of
//! sub-array indices it needs ([`Seq::slice`], backwards where reversed);
//! their bounding box is read with the sub-array's own
//! [`ArraySource::read_region`] (so Zarr chunks go through the shared
//! cache), then *gathered* into master order, converted, and copied into
//! the destination. When the gather is the identity (same order and
//! direction, contiguous indices) and no conversion is needed, the
//! sub-array reads straight into the destination when the box is
//! contiguous there: the common case costs what reading the fragment
//! costs. A strided `part` or index list whose bounding box would be much
//! larger than the data needed is split and read in pieces, so a read
//! never fetches more than a few times what it returns.

use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use super::convert::{Conversion, json_values};
use super::descriptor::{Format, PartitionSpec};
use super::error::NcaError;
use super::fragment::{Context, Opened, Target};
use super::part::Seq;
use super::units::{self, Affine};
use crate::codec::numeric::{Element, Prim, Value};
use crate::dtype::{DataType, Endian};
use crate::engine::array::ArraySource;
use crate::engine::index::disjoint::DisjointView;
use crate::engine::index::{Region, c_strides};
use crate::engine::pieces::read_into;
use crate::error::{Error, Result};
use crate::storage::paths;

/// What partitions need to know about their master.
#[derive(Debug)]
pub struct MasterFacts {
    /// `descriptor: variable`, for messages.
    pub name: String,
    pub dims: Vec<String>,
    pub directions: Vec<bool>,
    pub dtype: DataType,
    pub fill: Vec<u8>,
    pub units: Option<String>,
    pub calendar: Option<String>,
}

/// A partition whose fragment has been opened and checked.
struct Resolved {
    source: Arc<dyn ArraySource>,
    seqs: Vec<Seq>,
    s2m: Vec<Option<usize>>,
    m2s: Vec<Option<usize>>,
    reversed: Vec<bool>,
    conv: Conversion,
    identity_conv: bool,
}

pub struct Partition {
    pub spec: PartitionSpec,
    target: Target,
    ctx: Arc<Context>,
    master: Arc<MasterFacts>,
    resolved: OnceLock<Resolved>,
    /// Held while opening, so concurrent first reads open once.
    opening: Mutex<()>,
}

impl std::fmt::Debug for Partition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Partition")
            .field("label", &self.spec.label)
            .field("target", &self.target)
            .finish()
    }
}

/// Reads whose bounding box holds more than this many times the elements
/// they need (plus [`SPARSE_SLACK`]) are split.
const SPARSE_RATIO: u64 = 4;
const SPARSE_SLACK: u64 = 1 << 16;

impl Partition {
    /// Check `spec` against its master and open its fragment if the file
    /// exists (every failure is then a load error); a missing file is
    /// left for reads to report.
    pub fn new(
        spec: PartitionSpec,
        ctx: Arc<Context>,
        master: Arc<MasterFacts>,
    ) -> Result<Partition, NcaError> {
        let target = ctx.target(&spec)?;
        // Units stated by the descriptor are checked now, even for a
        // fragment that is missing.
        if let Some(u) = &spec.units {
            unit_map(&spec, u, &master)?;
        }
        let p = Partition {
            spec,
            target,
            ctx,
            master,
            resolved: OnceLock::new(),
            opening: Mutex::new(()),
        };
        if p.target.is_self || p.target.path.exists() {
            let opened = p.open().map_err(|e| {
                // A cycle or a too deep nesting keeps its own type.
                let keeps_type = matches!(
                    e.source_as::<NcaError>(),
                    Some(NcaError::Cycle(_) | NcaError::TooDeep(_))
                );
                if !keeps_type {
                    return p.fragment_error(e);
                }
                e.into_source::<NcaError>()
                    .unwrap_or_else(|e| p.fragment_error(e))
            })?;
            let r = p.resolve(opened)?;
            let _ = p.resolved.set(r);
        } else {
            log::warn!(
                "{}: {}: fragment {} does not exist; reads of its part of the array will fail",
                p.master.name,
                p.spec.label,
                p.target.path.display()
            );
        }
        Ok(p)
    }

    /// What the live refresh compares: the fragment's own stamp once it
    /// is open, else whether its file exists. `None`: cannot tell.
    pub fn change_stamp(&self) -> Option<u64> {
        match self.resolved.get() {
            Some(r) => r.source.change_stamp().data,
            None => Some(u64::from(paths::exists_at(
                self.ctx.files.as_ref(),
                &self.target.path,
            ))),
        }
    }

    fn open(&self) -> Result<Opened> {
        self.ctx.open(&self.spec, &self.target)
    }

    fn fragment_error(&self, e: Error) -> NcaError {
        NcaError::Fragment {
            partition: self.spec.label.clone(),
            file: self.target.path.display().to_string(),
            source: Box::new(e),
        }
    }

    fn mismatch(&self, detail: impl Into<String>) -> NcaError {
        NcaError::Mismatch {
            partition: self.spec.label.clone(),
            file: self.target.path.display().to_string(),
            detail: detail.into(),
        }
    }

    /// The resolved partition, opening the fragment on first use.
    fn resolved(&self) -> Result<&Resolved> {
        if let Some(r) = self.resolved.get() {
            return Ok(r);
        }
        let _guard = self.opening.lock();
        if let Some(r) = self.resolved.get() {
            return Ok(r);
        }
        let err = |e: NcaError| e.at(&self.master.name);
        let opened = self.open().map_err(|e| err(self.fragment_error(e)))?;
        let r = self.resolve(opened).map_err(err)?;
        log::info!(
            "{}: {}: opened {}",
            self.master.name,
            self.spec.label,
            self.target.path.display()
        );
        Ok(self.resolved.get_or_init(|| r))
    }

    /// Check the opened fragment against the partition (see the module
    /// doc) and work out its geometry and conversion.
    fn resolve(&self, opened: Opened) -> Result<Resolved, NcaError> {
        let spec = &self.spec;
        let master = &self.master;
        let source = opened.source().clone();
        let meta = source.meta();
        let sub_shape = meta.shape.clone();
        let sub_rank = sub_shape.len();
        if let Some(s) = &spec.data.shape
            && *s != sub_shape
        {
            return Err(self.mismatch(format!(
                "the descriptor gives shape {s:?}, the fragment has shape {sub_shape:?}"
            )));
        }
        if let Some((dt, _)) = &spec.data.dtype
            && self.target.format != Format::Raw
            && *dt != meta.dtype
        {
            return Err(self.mismatch(format!(
                "the descriptor gives dtype {dt}, the fragment holds {}",
                meta.dtype
            )));
        }
        // The data array: part of the sub-array.
        let seqs: Vec<Seq> = match &spec.part {
            Some(p) => {
                if p.len() != sub_rank {
                    return Err(self.mismatch(format!(
                        "part has {} selections for a sub-array of rank {sub_rank} (shape {sub_shape:?})",
                        p.len()
                    )));
                }
                p.iter()
                    .zip(&sub_shape)
                    .enumerate()
                    .map(|(q, (sel, &n))| {
                        sel.resolve(n).map_err(|e| {
                            self.mismatch(format!("part[{q}] {sel} on an extent of {n}: {e}"))
                        })
                    })
                    .collect::<Result<_, _>>()?
            }
            None => sub_shape.iter().map(|&n| Seq::whole(n)).collect(),
        };
        let data_ext: Vec<u64> = seqs.iter().map(Seq::len).collect();
        let extents = spec.extents();
        let rank = master.dims.len();
        // Which master dimension each sub-array dimension is.
        let s2m: Vec<Option<usize>> = match &spec.dimensions {
            Some(names) => {
                if names.len() != sub_rank {
                    return Err(self.mismatch(format!(
                        "dimensions {names:?} name {} dimensions; the sub-array has {sub_rank} \
                         (shape {sub_shape:?})",
                        names.len()
                    )));
                }
                names
                    .iter()
                    .map(|n| master.dims.iter().position(|d| d == n))
                    .collect()
            }
            None => align(&extents, &data_ext).ok_or_else(|| {
                self.mismatch(format!(
                    "its data (shape {data_ext:?}) does not fit the partition's extent \
                     {extents:?} along the master dimensions {:?}",
                    master.dims
                ))
            })?,
        };
        let mut m2s = vec![None; rank];
        for (q, d) in s2m.iter().enumerate() {
            if let Some(d) = *d {
                m2s[d] = Some(q);
            }
        }
        let sub_name = |q: usize| -> String {
            spec.dimensions
                .as_ref()
                .map(|n| n[q].clone())
                .or_else(|| meta.dimension_names.get(q).cloned().flatten())
                .unwrap_or_else(|| format!("#{q}"))
        };
        for q in 0..sub_rank {
            match s2m[q] {
                Some(d) if data_ext[q] != extents[d] => {
                    return Err(self.mismatch(format!(
                        "the partition spans {} along {} but its data has {} (sub-array shape \
                         {sub_shape:?})",
                        extents[d], master.dims[d], data_ext[q]
                    )));
                }
                None if data_ext[q] != 1 => {
                    return Err(self.mismatch(format!(
                        "sub-array dimension {} is not a master dimension, so it must have size \
                         1, not {}",
                        sub_name(q),
                        data_ext[q]
                    )));
                }
                _ => {}
            }
        }
        for d in 0..rank {
            if m2s[d].is_none() && extents[d] != 1 {
                return Err(self.mismatch(format!(
                    "the sub-array has no dimension {}, so the partition must span 1 index \
                     along it, not {}",
                    master.dims[d], extents[d]
                )));
            }
        }
        if spec.dimensions.is_none() {
            let names: Option<Vec<&String>> =
                meta.dimension_names.iter().map(|n| n.as_ref()).collect();
            if let Some(names) = names
                && names.iter().all(|n| master.dims.contains(n))
                && s2m
                    .iter()
                    .zip(&names)
                    .any(|(d, n)| d.is_some_and(|d| master.dims[d] != **n))
            {
                return Err(self.mismatch(format!(
                    "the fragment's dimensions are {names:?} but the partition gives no \
                     `dimensions`, which means the master's order {:?}; say `dimensions`",
                    master.dims
                )));
            }
        }
        let reversed: Vec<bool> = (0..rank)
            .map(|d| {
                let mine = spec
                    .directions
                    .get(&master.dims[d])
                    .copied()
                    .unwrap_or(master.directions[d]);
                mine != master.directions[d]
            })
            .collect();
        let conv = self.conversion(&opened)?;
        let identity_conv = conv.is_identity();
        Ok(Resolved {
            source,
            seqs,
            s2m,
            m2s,
            reversed,
            conv,
            identity_conv,
        })
    }

    /// The value conversion of this partition (see [`super::convert`]).
    fn conversion(&self, opened: &Opened) -> Result<Conversion, NcaError> {
        let meta = opened.source().meta();
        let attrs = &meta.attributes;
        let attr_f64 = |k: &str| -> Option<f64> {
            match attrs.get(k)? {
                serde_json::Value::Array(a) if a.len() == 1 => a[0].as_f64(),
                v => v.as_f64(),
            }
        };
        let as_value = |bytes: &[u8]| {
            Prim::of(&meta.dtype).map(|p| {
                Element {
                    prim: p,
                    endian: Endian::NATIVE,
                }
                .read(bytes)
            })
        };
        let mut valid = (None, None);
        let (missing, pack) = match opened {
            Opened::NetCdf(_) => {
                // As netCDF4-python masks a file in fill mode (the only
                // mode a classic file can be read in): `_FillValue`, else
                // the type's default fill; and `missing_value`. (Text is
                // never masked.)
                let mut missing: Vec<Value> = Vec::new();
                if !matches!(meta.dtype, DataType::FixedBytes(_)) {
                    missing.extend(as_value(&meta.fill_value));
                }
                if let Some(v) = attrs.get("missing_value") {
                    missing.extend(json_values(v));
                }
                valid = match attrs.get("valid_range") {
                    Some(serde_json::Value::Array(r)) if r.len() == 2 => {
                        (r[0].as_f64(), r[1].as_f64())
                    }
                    _ => (attr_f64("valid_min"), attr_f64("valid_max")),
                };
                let sf = attr_f64("scale_factor");
                let ao = attr_f64("add_offset");
                let pack =
                    (sf.is_some() || ao.is_some()).then(|| (sf.unwrap_or(1.0), ao.unwrap_or(0.0)));
                (missing, pack)
            }
            Opened::Nested(_) => (as_value(&meta.fill_value).into_iter().collect(), None),
            Opened::Plain(_) => {
                let d = &self.spec.data;
                let pack = (d.scale_factor.is_some() || d.add_offset.is_some())
                    .then(|| (d.scale_factor.unwrap_or(1.0), d.add_offset.unwrap_or(0.0)));
                (Vec::new(), pack)
            }
        };
        // Units: the descriptor's, else the fragment's own (when the
        // master has units to convert to), else the master's (no
        // conversion).
        let file_units = attrs
            .get("units")
            .and_then(|v| v.as_str())
            .filter(|_| self.master.units.is_some());
        let affine = match self.spec.units.as_deref().or(file_units) {
            Some(u) => unit_map_with(
                &self.spec,
                u,
                self.spec
                    .calendar
                    .as_deref()
                    .or_else(|| attrs.get("calendar").and_then(|v| v.as_str())),
                &self.master,
            )?,
            None => Affine::IDENTITY,
        };
        Conversion::new(
            meta.dtype.clone(),
            self.master.dtype.clone(),
            missing,
            pack,
            affine,
            self.master.fill.clone(),
        )
        .map(|c| c.with_valid_range(valid.0, valid.1))
        .map_err(|e| self.mismatch(e))
    }

    /// Fill `view` (a box of the master's read) with the partition's box
    /// starting at `start` (master order, relative to `location`) of the
    /// view's extent.
    pub fn read(&self, start: &[u64], view: DisjointView<'_>) -> Result<()> {
        let r = self.resolved()?;
        self.read_resolved(r, start, view).map_err(|e| match e {
            // A nested aggregation's error already names its fragment.
            e @ Error::Format { .. } if e.source_as::<NcaError>().is_some() => e,
            other => self.fragment_error(other).at(&self.master.name),
        })
    }

    fn read_resolved(&self, r: &Resolved, start: &[u64], mut view: DisjointView<'_>) -> Result<()> {
        let count = view.count();
        let extents = self.spec.extents();
        let seqs: Vec<Seq> = (0..r.seqs.len())
            .map(|q| match r.s2m[q] {
                Some(d) => {
                    let from = if r.reversed[d] {
                        extents[d] - start[d] - count[d]
                    } else {
                        start[d]
                    };
                    r.seqs[q].slice(from, count[d], r.reversed[d])
                }
                None => r.seqs[q].slice(0, 1, false),
            })
            .collect();
        let bounds: Vec<(u64, u64)> = seqs.iter().map(Seq::bounds).collect();
        let bbox = Region {
            start: bounds.iter().map(|b| b.0).collect(),
            count: bounds.iter().map(|b| b.1 - b.0 + 1).collect(),
        };
        let needed: u64 = count.iter().product();
        let fetched = bbox.num_elements();
        if fetched
            > needed
                .saturating_mul(SPARSE_RATIO)
                .saturating_add(SPARSE_SLACK)
        {
            // Split along the sparsest master dimension.
            let worst = (0..count.len())
                .filter(|&d| count[d] > 1 && r.m2s[d].is_some())
                .max_by_key(|&d| bbox.count[r.m2s[d].expect("filtered")] / count[d]);
            if let Some(d) = worst {
                let h = count[d] / 2;
                let mut s2 = start.to_vec();
                s2[d] += h;
                let (first, second) = view.split_at(d, h);
                self.read_resolved(r, start, first)?;
                return self.read_resolved(r, &s2, second);
            }
        }
        let src_item = r.source.meta().item_size();
        let dst_item = self.master.dtype.size();
        // Identity gather: every dimension the read spans more than once
        // maps, in order, to a contiguous ascending run of the sub-array.
        let mut last_q = None;
        let identity = fetched == needed
            && (0..count.len())
                .filter(|&d| count[d] > 1)
                .all(|d| match r.m2s[d] {
                    Some(q) if seqs[q].is_ascending_run() && last_q.is_none_or(|l| l < q) => {
                        last_q = Some(q);
                        true
                    }
                    _ => false,
                });
        if identity && r.identity_conv {
            return read_into(r.source.as_ref(), &bbox, &mut view);
        }
        let mut raw = vec![0u8; fetched as usize * src_item];
        r.source.read_region(&bbox, &mut raw)?;
        let data = if identity {
            raw
        } else {
            let mut out = vec![0u8; needed as usize * src_item];
            gather(&raw, &bbox, &seqs, &r.m2s, count, src_item, &mut out);
            out
        };
        if r.identity_conv {
            view.copy_from_dense(&data);
            return Ok(());
        }
        if let Some(slot) = view.contiguous() {
            r.conv.apply(&data, slot);
            return Ok(());
        }
        let mut converted = vec![0u8; needed as usize * dst_item];
        r.conv.apply(&data, &mut converted);
        view.copy_from_dense(&converted);
        Ok(())
    }
}

/// The units map of a partition with units `u` (and its calendar).
fn unit_map(spec: &PartitionSpec, u: &str, master: &MasterFacts) -> Result<Affine, NcaError> {
    unit_map_with(spec, u, spec.calendar.as_deref(), master)
}

fn unit_map_with(
    spec: &PartitionSpec,
    u: &str,
    calendar: Option<&str>,
    master: &MasterFacts,
) -> Result<Affine, NcaError> {
    let to = master.units.as_deref().unwrap_or("");
    let err = |detail: String| NcaError::Units {
        partition: spec.label.clone(),
        from: u.to_string(),
        to: to.to_string(),
        detail,
    };
    if master.units.is_none() {
        return if u.trim().is_empty() {
            Ok(Affine::IDENTITY)
        } else {
            Err(err("the master has no units".into()))
        };
    }
    let cal = calendar.or(master.calendar.as_deref());
    units::conversion(u, cal, to, master.calendar.as_deref()).map_err(|e| err(e.0))
}

/// Match sub-array dimensions (data extents `data`) to master dimensions
/// (extents `master`) in order, skipping size-1 dimensions on either
/// side. `None` when they cannot be matched.
fn align(master: &[u64], data: &[u64]) -> Option<Vec<Option<usize>>> {
    let (mut d, mut q) = (0, 0);
    let mut out = vec![None; data.len()];
    while q < data.len() {
        if d < master.len() && master[d] == data[q] {
            out[q] = Some(d);
            d += 1;
            q += 1;
        } else if d < master.len() && master[d] == 1 {
            d += 1;
        } else if data[q] == 1 {
            q += 1;
        } else {
            return None;
        }
    }
    master[d..].iter().all(|&e| e == 1).then_some(out)
}

/// Copy the elements of `src` (the C-order box `bbox` of the sub-array)
/// that the read needs into `out`, C order over `count` (master order):
/// element `i` of `out` is the sub-array element whose index along each
/// sub-array dimension `q` is `seqs[q]` at the position of the master
/// dimension that `q` maps to (`m2s`), or 0 for the dimensions the master
/// lacks (extent 1).
fn gather(
    src: &[u8],
    bbox: &Region,
    seqs: &[Seq],
    m2s: &[Option<usize>],
    count: &[u64],
    item: usize,
    out: &mut [u8],
) {
    let rank = count.len();
    if rank == 0 {
        out[..item].copy_from_slice(&src[..item]);
        return;
    }
    let strides = c_strides(&bbox.count);
    // Byte offset into `src` of each index along each master dimension.
    let offsets: Vec<Vec<usize>> = (0..rank)
        .map(|d| match m2s[d] {
            Some(q) => (0..count[d])
                .map(|j| ((seqs[q].get(j) - bbox.start[q]) * strides[q]) as usize * item)
                .collect(),
            None => vec![0; count[d] as usize],
        })
        .collect();
    let last = &offsets[rank - 1];
    let inner = last.len();
    let contiguous = last.windows(2).all(|w| w[1] == w[0] + item);
    let row = inner * item;
    let mut idx = vec![0usize; rank - 1];
    let mut pos = 0;
    loop {
        let base: usize = idx.iter().enumerate().map(|(d, &i)| offsets[d][i]).sum();
        if contiguous {
            let s = base + last[0];
            out[pos..pos + row].copy_from_slice(&src[s..s + row]);
        } else {
            for (k, &o) in last.iter().enumerate() {
                let s = base + o;
                out[pos + k * item..pos + (k + 1) * item].copy_from_slice(&src[s..s + item]);
            }
        }
        pos += row;
        // Advance the odometer over the outer dimensions.
        let mut d = rank - 1;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < count[d] as usize {
                break;
            }
            idx[d] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn alignment() {
        assert_eq!(align(&[2, 3], &[2, 3]), Some(vec![Some(0), Some(1)]));
        assert_eq!(align(&[1, 3, 4], &[3, 4]), Some(vec![Some(1), Some(2)]));
        assert_eq!(
            align(&[3, 4], &[3, 1, 4]),
            Some(vec![Some(0), None, Some(1)])
        );
        assert_eq!(align(&[3, 4, 1], &[3, 4]), Some(vec![Some(0), Some(1)]));
        assert_eq!(align(&[3, 4], &[4, 3]), None);
        assert_eq!(align(&[3, 4], &[3]), None);
    }

    /// Reference: element by element.
    fn gather_ref(
        sub: &[u64],
        src: &[u8],
        seqs: &[Seq],
        m2s: &[Option<usize>],
        count: &[u64],
    ) -> Vec<u8> {
        let n: u64 = count.iter().product();
        let strides = c_strides(sub);
        let mut out = Vec::new();
        for k in 0..n {
            let mut rem = k;
            let mut idx = vec![0u64; count.len()];
            for d in (0..count.len()).rev() {
                idx[d] = rem % count[d];
                rem /= count[d];
            }
            let mut lin = 0;
            for (q, s) in seqs.iter().enumerate() {
                let j = m2s.iter().position(|&x| x == Some(q)).map_or(0, |d| idx[d]);
                lin += s.get(j) * strides[q];
            }
            out.push(src[lin as usize]);
        }
        out
    }

    fn seq(n: u64, len: u64) -> impl Strategy<Value = Seq> {
        prop_oneof![
            (0..n, 1i64..3, any::<bool>()).prop_filter_map("fits", move |(first, step, neg)| {
                let step = if neg { -step } else { step };
                let last = first as i64 + step * (len as i64 - 1);
                (0..n as i64)
                    .contains(&last)
                    .then_some(Seq::Prog { first, step, len })
            }),
            prop::collection::vec(0..n, len as usize).prop_map(Seq::List),
        ]
    }

    proptest! {
        /// Gathering from the bounding box equals the element-by-element
        /// reference on the whole sub-array, for any dimension order,
        /// extra/missing size-1 dimensions, steps and lists.
        #[test]
        fn gather_matches_reference(
            case in (1usize..4).prop_flat_map(|rank| {
                (prop::collection::vec(1u64..5, rank), Just(rank), any::<u64>())
            }).prop_flat_map(|(sub, rank, perm_seed)| {
                let lens: Vec<_> = sub.iter().map(|&n| 1..=n).collect();
                (Just(sub), lens, Just(rank), Just(perm_seed))
            }).prop_flat_map(|(sub, lens, rank, perm_seed)| {
                let seqs: Vec<_> = sub.iter().zip(&lens).map(|(&n, &l)| seq(n, l)).collect();
                (Just(sub), seqs, Just(rank), Just(perm_seed))
            })
        ) {
            let (sub, seqs, rank, perm_seed) = case;
            // Master order: a permutation of the sub dims, dropping one
            // size-1 sub dim and adding a size-1 master dim sometimes.
            let mut order: Vec<usize> = (0..rank).collect();
            let mut s = perm_seed;
            for i in (1..rank).rev() {
                order.swap(i, (s % (i as u64 + 1)) as usize);
                s /= 7;
            }
            let mut m2s: Vec<Option<usize>> = order
                .iter()
                .filter(|&&q| !(seqs[q].len() == 1 && s % 3 == 0))
                .map(|&q| Some(q))
                .collect();
            if s % 5 == 0 {
                m2s.insert((s as usize / 5) % (m2s.len() + 1), None);
            }
            let count: Vec<u64> = m2s.iter().map(|m| m.map_or(1, |q| seqs[q].len())).collect();
            let n: u64 = sub.iter().product();
            let src: Vec<u8> = (0..n).map(|i| (i * 7 + 1) as u8).collect();
            let want = gather_ref(&sub, &src, &seqs, &m2s, &count);
            // The bounding box, cut out of the full sub-array.
            let bounds: Vec<(u64, u64)> = seqs.iter().map(Seq::bounds).collect();
            let bbox = Region {
                start: bounds.iter().map(|b| b.0).collect(),
                count: bounds.iter().map(|b| b.1 - b.0 + 1).collect(),
            };
            let mut boxed = vec![0u8; bbox.num_elements() as usize];
            crate::engine::index::copy::copy_region(
                &src, &sub, &bbox.start, &mut boxed, &bbox.count,
                &vec![0; rank], &bbox.count, 1,
            );
            let mut got = vec![0u8; want.len()];
            gather(&boxed, &bbox, &seqs, &m2s, &count, 1, &mut got);
            prop_assert_eq!(got, want);
        }
    }
}
