//! A `<netcdf>` element evaluated into a [`View`]: the dataset it refers
//! to (its `location`, or its aggregation of members), then its changes.
//!
//! The order is netCDF-Java's (`NcMLReader`): the referenced dataset is
//! read (all of it, unless `<explicit/>`); then the global attributes,
//! the dimensions and the variables the element declares are applied in
//! document order; `<remove>`s last. A declaration with `orgName` renames
//! what the referenced dataset calls `orgName`; one without changes the
//! item of its name, or adds it when there is none (a new variable needs
//! a `type`, a `shape` of declared dimensions and, to be read, `<values>`).
//!
//! Aggregations:
//!
//! - **joinExisting** along `dimName`: every variable of the first member
//!   whose first dimension is `dimName` is joined ([`Joined`]), member
//!   after member; the others are the first member's. A member's length
//!   is its `ncoords`, the count of its `coordValue`s, or read from its
//!   header (members opened in parallel at load). `coordValue`s on every
//!   member give the coordinate variable's values instead of the members'
//!   own; with `timeUnitsChange` the members' own values are put on the
//!   first member's units.
//! - **joinNew** along the new dimension `dimName`: each `variableAgg`
//!   gains it as its first dimension, member `k` its row `k`; the new
//!   coordinate variable holds the members' `coordValue`s (double when
//!   all are numbers, else strings), or the type the NcML declares for it.
//! - **union**: every member's dimensions, attributes and variables; of
//!   two of one name, the first member's.
//! - **tiled** along the dimensions of `dimName`: a mosaic of members
//!   placed by their `section`s ([`super::tiled`]).
//!
//! The first member is the template (dtype, shape, attributes of every
//! variable), as netCDF-Java's typical dataset is by default; every
//! other member is checked against it when it is opened.

use std::path::Path;
use std::sync::Arc;

use rayon::prelude::*;
use serde_json::{Map, Value};

use super::error::{NcmlError, Pos};
use super::join::{Joined, Part};
use super::members::{Ctx, Member};
use super::model::{self, AggType, Aggregation, Netcdf, RemoveKind, VarType};
use super::tiled::{self, Mosaic, Section, parse_section};
use super::values::{self, InMemory};
use super::view::{Dim, Var, View};
use crate::dtype::DataType;
use crate::engine::array::ArrayMeta;
use crate::error::Result;
use crate::formats::nca::constant::Constant;
use crate::formats::nca::descriptor::master_fill;

/// The view of `n` under `ctx` (see the module doc).
pub fn build(n: &Netcdf, ctx: &Arc<Ctx>) -> Result<View> {
    let here = ctx.file.display().to_string();
    let base = match (&n.location, &n.aggregation) {
        (Some(_), Some(_)) => {
            return Err(NcmlError::invalid(
                n.pos,
                "<netcdf> has both a location and an <aggregation>",
            )
            .at(here));
        }
        (Some(loc), None) => open_location(loc, n.pos, ctx)?,
        (None, Some(agg)) => aggregate(agg, n, ctx)?,
        (None, None) => View::default(),
    };
    modify(base, n, ctx).map_err(|e| e.at(here))
}

/// The dataset at `location`: another NcML file is built under a nested
/// context (so a loop of NcML files is caught), anything else opened by
/// its format.
fn open_location(location: &str, pos: Pos, ctx: &Arc<Ctx>) -> Result<View> {
    let here = ctx.file.display().to_string();
    let path = ctx.resolve(location, pos).map_err(|e| e.at(here.clone()))?;
    if super::is_ncml(&path) {
        let nested = Arc::new(ctx.nested(&path).map_err(|e| e.at(here))?);
        let doc = super::read(&path, &nested.opts)?;
        return build(&doc, &nested);
    }
    ctx.open_path(&path)
}

fn aggregate(agg: &Aggregation, parent: &Netcdf, ctx: &Arc<Ctx>) -> Result<View> {
    let here = ctx.file.display().to_string();
    let c = &agg.changes;
    let changes = (!(c.attributes.is_empty()
        && c.dimensions.is_empty()
        && c.variables.is_empty()
        && c.removes.is_empty()))
    .then(|| Arc::new(c.clone()));
    // Scanned files first, every scan's pooled and sorted by path; then
    // the listed members in document order (netCDF-Java's order).
    // With a dateFormatMark, sorted by the dates in the names.
    let mut scanned = Vec::new();
    let mut watch = Vec::new();
    let mut recheck_in: Option<std::time::Duration> = None;
    for s in &agg.scans {
        if let Ok(dir) = ctx.resolve(&s.location, s.pos) {
            watch.push(dir);
        }
        let (found, again) = ctx.scan(s).map_err(|e| e.at(here.clone()))?;
        recheck_in = match (recheck_in, again) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        for (p, date) in found {
            scanned.push((date, p, s.pos));
        }
    }
    scanned.sort();
    scanned.dedup_by(|a, b| a.1 == b.1);
    let mut members: Vec<Arc<Member>> = scanned
        .into_iter()
        .map(|(date, p, pos)| {
            Arc::new(Member::scanned(&p, date, pos, changes.clone(), ctx.clone()))
        })
        .collect();
    members.extend(
        agg.members
            .iter()
            .map(|m| Arc::new(Member::new(m.clone(), changes.clone(), ctx.clone()))),
    );
    // A scanned file that cannot be opened (still being written, or
    // corrupt) is left out with a line, as netCDF-Java drops unreadable
    // files; the next refresh tries it again. (A joinExisting dated by
    // names needs no member open to know its length: its files are
    // opened by the reads, as listed members with ncoords are.)
    let dated_existing =
        agg.kind == AggType::JoinExisting && agg.scans.iter().any(|s| s.date_format_mark.is_some());
    if !dated_existing {
        let open: Vec<bool> = members
            .par_iter()
            .map(|m| !m.is_scanned() || m.view().is_ok())
            .collect();
        let mut k = 0;
        members.retain(|m| {
            let keep = open[k];
            k += 1;
            if !keep {
                log::warn!(
                    "{here}: scanned file {} left out until it can be opened",
                    m.label()
                );
            }
            keep
        });
    }
    if members.is_empty() {
        return Err(NcmlError::invalid(agg.pos, "an aggregation with no members").at(here));
    }
    let view = match agg.kind {
        AggType::Union => union(&members),
        AggType::JoinExisting => join_existing(agg, &members, ctx),
        AggType::JoinNew => join_new(agg, parent, &members, ctx),
        AggType::Tiled => tiled(agg, &members, ctx),
    };
    view.map(|mut v| {
        v.watch = watch;
        v.recheck_in = recheck_in;
        for m in &members {
            if let Some(mv) = m.opened() {
                v.watch.extend(mv.watch.iter().cloned());
                v.recheck_in = match (v.recheck_in, mv.recheck_in) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
        }
        v.watch.sort();
        v.watch.dedup();
        v
    })
}

fn union(members: &[Arc<Member>]) -> Result<View> {
    let views: Vec<Arc<View>> = members
        .par_iter()
        .map(|m| m.view())
        .collect::<Result<_>>()?;
    let mut out = View::default();
    for (m, v) in members.iter().zip(&views) {
        for d in &v.dims {
            match out.dim(&d.name) {
                // netCDF-Java keeps the first and does not check.
                Some(have) if have.len != d.len => log::warn!(
                    "member {}: dimension {} is {} long; an earlier member's, which the union \
                     keeps, is {}",
                    m.label(),
                    d.name,
                    d.len,
                    have.len
                ),
                Some(_) => {}
                None => out.dims.push(d.clone()),
            }
        }
        for (k, val) in &v.attrs {
            out.attrs.entry(k.clone()).or_insert_with(|| val.clone());
        }
        for var in &v.vars {
            if out.var(&var.name).is_none() {
                out.vars.push(var.clone());
            }
        }
    }
    Ok(out)
}

/// Each member's coordinate values as the NcML gives them (`coordValue`),
/// when every member has them; an error when only some do.
fn coord_values(
    members: &[Arc<Member>],
    agg: &Aggregation,
) -> std::result::Result<Option<Vec<Vec<String>>>, NcmlError> {
    let given: Vec<Option<Vec<String>>> = members
        .iter()
        .map(|m| {
            m.element().coord_value.as_ref().map(|c| {
                c.split(|ch: char| ch == ',' || ch.is_whitespace())
                    .filter(|t| !t.is_empty())
                    .map(str::to_string)
                    .collect()
            })
        })
        .collect();
    match given.iter().filter(|g| g.is_some()).count() {
        0 => Ok(None),
        n if n == given.len() => Ok(Some(given.into_iter().map(Option::unwrap).collect())),
        _ => Err(NcmlError::invalid(
            agg.pos,
            "coordValue is given for some members and not others",
        )),
    }
}

fn join_existing(agg: &Aggregation, members: &[Arc<Member>], ctx: &Arc<Ctx>) -> Result<View> {
    let here = ctx.file.display().to_string();
    let dim = agg.dim_name.clone().expect("checked by the parser");
    let coords = coord_values(members, agg).map_err(|e| e.at(here.clone()))?;
    // A scan with a dateFormatMark makes it netCDF-Java's
    // "joinExistingOne": one step per member, dated by its name.
    let dated = members.iter().any(|m| m.date().is_some());
    let template = members[0].view()?;
    // Each member's length along the dimension.
    let lens: Vec<u64> = members
        .par_iter()
        .enumerate()
        .map(|(k, m)| {
            if let Some(n) = m.element().ncoords {
                return Ok(n);
            }
            if dated {
                return Ok(1);
            }
            if let Some(c) = &coords {
                return Ok(c[k].len() as u64);
            }
            let v = m.view()?;
            v.dim(&dim).map(|d| d.len).ok_or_else(|| {
                NcmlError::member(m.label(), format!("has no dimension {dim} to join along"))
                    .at(here.clone())
            })
        })
        .collect::<Result<_>>()?;
    let total: u64 = lens.iter().sum();
    let mut out = (*template).clone();
    match out.dims.iter_mut().find(|d| d.name == dim) {
        Some(d) => d.len = total,
        None => {
            return Err(NcmlError::member(
                members[0].label(),
                format!("has no dimension {dim} to join along"),
            )
            .at(here));
        }
    }
    for var in &mut out.vars {
        if var.dims.first() != Some(&dim) {
            continue;
        }
        let parts = members
            .iter()
            .zip(&lens)
            .map(|(m, &len)| Part {
                member: m.clone(),
                len,
            })
            .collect();
        let mut meta = var.array.meta().clone();
        meta = reshaped(meta, &here, &var.name, |s| s[0] = total)?;
        let joined = Joined::new(meta, var.name.clone(), parts, false)?;
        joined.check_opened()?;
        var.array = Arc::new(joined);
    }
    if dated {
        // The coordinate becomes the dates, as ISO strings (netCDF-Java's
        // joinExistingOne replaces it so).
        let dates: Vec<String> = members
            .iter()
            .zip(&lens)
            .map(|(m, &n)| {
                m.date()
                    .map(|d| vec![d.to_string(); n as usize])
                    .ok_or_else(|| {
                        NcmlError::member(
                            m.label(),
                            "has no date: list it with coordValue, or scan it",
                        )
                        .at(here.clone())
                    })
            })
            .collect::<Result<Vec<_>>>()?
            .into_iter()
            .flatten()
            .collect();
        let flat: Vec<&str> = dates.iter().map(String::as_str).collect();
        let mut var = coordinate(&here, &dim, &VarType::String, &flat, None)
            .map_err(|e| e.at(here.clone()))?;
        var.attrs
            .insert("_CoordinateAxisType".into(), "Time".into());
        var.attrs
            .insert("long_name".into(), "time coordinate".into());
        var.attrs.insert("standard_name".into(), "time".into());
        set_var(&mut out, var);
        return Ok(out);
    }
    if coords.is_none() && out.var(&dim).is_none() {
        // netCDF-Java adds a coordinate counting 0, 1, 2... ("Adding a
        // fake coord var").
        log::info!("{here}: no coordinate variable {dim} in the members: {dim} counts 0, 1, 2...");
        let data: Vec<u8> = (0..total).flat_map(|i| (i as i32).to_ne_bytes()).collect();
        let var = in_memory(
            &here,
            &dim,
            vec![dim.clone()],
            vec![total],
            DataType::Int32,
            data,
            Map::new(),
        )?;
        out.vars.push(var);
    }
    if agg.time_units_change && coords.is_none() {
        let var = time_units_changed(&here, &dim, members, &lens, out.var(&dim))?;
        set_var(&mut out, var);
        return Ok(out);
    }
    if let Some(c) = coords {
        let flat: Vec<&str> = c.iter().flatten().map(String::as_str).collect();
        let kind = match out.var(&dim) {
            Some(v) => kind_of(v.dtype()),
            None => guess_kind(&flat),
        };
        let var =
            coordinate(&here, &dim, &kind, &flat, out.var(&dim)).map_err(|e| e.at(here.clone()))?;
        set_var(&mut out, var);
    }
    Ok(out)
}

/// A tiled aggregation ([`super::tiled`]): every member opened (side by
/// side) and placed by its `section`; every variable of the first member
/// along a tiled dimension becomes a [`Mosaic`].
fn tiled(agg: &Aggregation, members: &[Arc<Member>], ctx: &Arc<Ctx>) -> Result<View> {
    let here = ctx.file.display().to_string();
    let names: Vec<String> = agg
        .dim_name
        .as_deref()
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect();
    let sections: Vec<Section> = members
        .iter()
        .map(|m| {
            let e = m.element();
            match &e.section {
                Some(s) => parse_section(s, names.len(), e.pos),
                None => Err(NcmlError::member(
                    m.label(),
                    "has no section: a tiled aggregation places every member by its section",
                )),
            }
        })
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| e.at(here.clone()))?;
    let lens: Vec<u64> = (0..names.len())
        .map(|d| sections.iter().map(|s| s[d].0 + s[d].1).max().unwrap_or(0))
        .collect();
    for (d, name) in names.iter().enumerate() {
        if sections.iter().all(|s| s[d].0 > 0) {
            return Err(NcmlError::invalid(
                agg.pos,
                format!("no member's section starts {name} at 0"),
            )
            .at(here));
        }
    }
    let template = members[0].view()?;
    members[1..].par_iter().for_each(|m| {
        let _ = m.view();
    });
    let mut out = (*template).clone();
    for (name, &len) in names.iter().zip(&lens) {
        match out.dims.iter_mut().find(|d| d.name == *name) {
            Some(d) => d.len = len,
            None => {
                return Err(NcmlError::member(
                    members[0].label(),
                    format!("has no dimension {name} to tile along"),
                )
                .at(here));
            }
        }
    }
    let grid = tiled::grid(&sections, &lens);
    if grid.1.iter().any(Option::is_none) {
        log::info!(
            "{here}: the tiles do not cover the mosaic: the cells between them read as fill values"
        );
    }
    for var in &mut out.vars {
        let axes: Vec<Option<usize>> = var
            .dims
            .iter()
            .map(|d| names.iter().position(|n| n == d))
            .collect();
        if axes.iter().all(Option::is_none) {
            continue;
        }
        let meta = reshaped(var.array.meta().clone(), &here, &var.name, |s| {
            for (i, a) in axes.iter().enumerate() {
                if let Some(t) = a {
                    s[i] = lens[*t];
                }
            }
        })?;
        let mosaic = Mosaic::new(
            meta,
            var.name.clone(),
            axes,
            members.to_vec(),
            sections.clone(),
            grid.clone(),
        )?;
        mosaic.check_opened()?;
        var.array = Arc::new(mosaic);
    }
    Ok(out)
}

/// joinExisting's coordinate with `timeUnitsChange`: every member's own
/// values of `dim` read and put on the first member's `units` (and
/// `calendar`), as netCDF-Java converts them (each value a date in its
/// member's units, then a number in the first's), by the conversions NCA
/// partitions use; in the first member's coordinate's type and
/// attributes. Every member is opened for it (at load, side by side).
fn time_units_changed(
    here: &str,
    dim: &str,
    members: &[Arc<Member>],
    lens: &[u64],
    like: Option<&Var>,
) -> Result<Var> {
    use crate::codec::numeric::{self, Element, Prim};
    use crate::dtype::Endian;
    use crate::formats::nca::units;
    let Some(like) = like else {
        return Err(NcmlError::member(
            members[0].label(),
            format!("has no coordinate variable {dim}, which timeUnitsChange converts"),
        )
        .at(here.to_string()));
    };
    let text = |v: &Var, k: &str| v.attrs.get(k).and_then(|x| x.as_str()).map(str::to_string);
    let (to, to_cal) = (text(like, "units"), text(like, "calendar"));
    let dtype = like.dtype().clone();
    let prim = |d: &DataType| {
        Prim::of(d).map(|prim| Element {
            prim,
            endian: Endian::NATIVE,
        })
    };
    let f64e = prim(&DataType::Float64).expect("a number");
    let Some(out_e) = prim(&dtype) else {
        return Err(NcmlError::member(
            members[0].label(),
            format!("{dim} is {dtype}, not numbers: timeUnitsChange converts numbers"),
        )
        .at(here.to_string()));
    };
    let values: Vec<Vec<f64>> = members
        .par_iter()
        .zip(lens)
        .map(|(m, &len)| {
            let fail = |why: String| NcmlError::member(m.label(), why).at(here.to_string());
            let v = m.view()?;
            let c = v
                .var(dim)
                .ok_or_else(|| fail(format!("has no coordinate variable {dim}")))?;
            let meta = c.array.meta();
            if meta.shape != [len] {
                return Err(fail(format!(
                    "{dim} has shape {:?}, not [{len}]",
                    meta.shape
                )));
            }
            let e = prim(&meta.dtype)
                .ok_or_else(|| fail(format!("{dim} is {}, not numbers", meta.dtype)))?;
            let mut raw = vec![0u8; meta.nbytes() as usize];
            c.array
                .read_region(&crate::engine::index::Region::whole(&meta.shape), &mut raw)?;
            let mut wide = vec![0u8; len as usize * 8];
            numeric::convert(e, &raw, f64e, &mut wide);
            let mut vals: Vec<f64> = wide
                .chunks_exact(8)
                .map(|b| f64::from_ne_bytes(b.try_into().expect("8 bytes")))
                .collect();
            let (from, from_cal) = (text(c, "units"), text(c, "calendar"));
            match (&from, &to) {
                (Some(f), Some(t)) => {
                    let a = units::conversion(f, from_cal.as_deref(), t, to_cal.as_deref())
                        .map_err(|e| {
                            fail(format!(
                                "{dim} in {f:?} cannot be put on the first member's {t:?}: {e}"
                            ))
                        })?;
                    vals.iter_mut().for_each(|x| *x = a.apply(*x));
                }
                (None, None) => {}
                _ => {
                    return Err(fail(format!(
                        "{dim} has units in one member and not in another"
                    )));
                }
            }
            Ok(vals)
        })
        .collect::<Result<_>>()?;
    let flat: Vec<f64> = values.into_iter().flatten().collect();
    let wide: Vec<u8> = flat.iter().flat_map(|x| x.to_ne_bytes()).collect();
    let mut data = vec![0u8; flat.len() * dtype.size()];
    numeric::convert(f64e, &wide, out_e, &mut data);
    in_memory(
        here,
        dim,
        vec![dim.to_string()],
        vec![flat.len() as u64],
        dtype,
        data,
        like.attrs.clone(),
    )
}

fn join_new(
    agg: &Aggregation,
    parent: &Netcdf,
    members: &[Arc<Member>],
    ctx: &Arc<Ctx>,
) -> Result<View> {
    let here = ctx.file.display().to_string();
    let dim = agg.dim_name.clone().expect("checked by the parser");
    let n = members.len() as u64;
    let template = members[0].view()?;
    // Every member opened now, side by side, to be checked against the
    // first: one that cannot be opened (missing, out of reach) is left
    // for the reads of its row to fail, naming it (Member::view logs it).
    members[1..].par_iter().for_each(|m| {
        let _ = m.view();
    });
    if template.dim(&dim).is_some() {
        return Err(NcmlError::member(
            members[0].label(),
            format!("already has a dimension {dim}: joinNew makes a new one (joinExisting joins along one)"),
        )
        .at(here));
    }
    let mut out = (*template).clone();
    out.dims.insert(
        0,
        Dim {
            name: dim.clone(),
            len: n,
            unlimited: false,
        },
    );
    // The variables given the new dimension: the variableAgg ones (a
    // name no member has is left out with a line, as netCDF-Java does),
    // else every variable that is not a coordinate variable; and a scalar
    // variable named as the dimension (it becomes the coordinate).
    let mut names: Vec<String> = if agg.variable_agg.is_empty() {
        out.vars
            .iter()
            .filter(|v| !(v.dims.len() == 1 && v.dims[0] == v.name))
            .map(|v| v.name.clone())
            .collect()
    } else {
        agg.variable_agg.clone()
    };
    let scalar_coordinate = out.var(&dim).is_some_and(|v| v.dims.is_empty());
    if scalar_coordinate && !names.contains(&dim) {
        names.push(dim.clone());
    } else if let Some(v) = out.var(&dim).filter(|_| !scalar_coordinate) {
        return Err(NcmlError::member(
            members[0].label(),
            format!(
                "has a variable {dim} of dimensions {:?}: a joinNew's coordinate must be new or scalar",
                v.dims
            ),
        )
        .at(here));
    }
    for name in &names {
        let Some(var) = out.var_mut(name) else {
            log::warn!(
                "{here}: <variableAgg name=\"{name}\">: member {} has no such variable; left out",
                members[0].label()
            );
            continue;
        };
        let parts = members
            .iter()
            .map(|m| Part {
                member: m.clone(),
                len: 1,
            })
            .collect();
        let meta = var.array.meta().clone();
        let mut meta = reshaped(meta, &here, name, |s| s.insert(0, n))?;
        meta.dimension_names.insert(0, Some(dim.clone()));
        var.dims.insert(0, dim.clone());
        let joined = Joined::new(meta, name.clone(), parts, true)?;
        joined.check_opened()?;
        var.array = Arc::new(joined);
    }
    if scalar_coordinate {
        return Ok(out);
    }
    // The new coordinate: each member's coordValue, else its file name
    // (netCDF-Java's default; a scanned member's is always its name), as
    // the type the NcML declares for it, else double when the first
    // member's value is a number and strings otherwise.
    let declared = parent
        .variables
        .iter()
        .find(|v| v.name == dim && v.org_name.is_none());
    let has_values = declared.is_some_and(|v| v.values.is_some());
    if !has_values {
        let given: Vec<Option<String>> = members
            .iter()
            .map(|m| {
                m.date().map(str::to_string).or_else(|| {
                    m.element()
                        .coord_value
                        .clone()
                        .filter(|_| !m.is_scanned())
                        .map(|c| c.trim().to_string())
                })
            })
            .collect();
        let numeric = given[0].as_ref().is_some_and(|v| v.parse::<f64>().is_ok());
        let flat_owned: Vec<String> = given
            .into_iter()
            .zip(members)
            .map(|(g, m)| g.unwrap_or_else(|| m.file_name()))
            .collect();
        let flat: Vec<&str> = flat_owned.iter().map(String::as_str).collect();
        let kind = match declared.and_then(|v| v.dtype.clone()) {
            Some(k) => k,
            None if numeric => VarType::Number(DataType::Float64),
            None => VarType::String,
        };
        let var = coordinate(&here, &dim, &kind, &flat, None).map_err(|e| e.at(here.clone()))?;
        set_var(&mut out, var);
    }
    Ok(out)
}

/// `meta` with its shape changed by `f`, its source the NcML variable's.
fn reshaped(
    meta: ArrayMeta,
    here: &str,
    name: &str,
    f: impl FnOnce(&mut Vec<u64>),
) -> Result<ArrayMeta> {
    let mut shape = meta.shape.clone();
    f(&mut shape);
    let mut out = ArrayMeta::new(
        format!("{here}: {name}"),
        shape,
        meta.dtype,
        meta.fill_value,
    )?;
    out.dimension_names = meta.dimension_names;
    out.attributes = meta.attributes;
    out.chunk_shape = meta.chunk_shape;
    Ok(out)
}

fn kind_of(d: &DataType) -> VarType {
    match d {
        DataType::FixedBytes(_) => VarType::String,
        d => VarType::Number(d.clone()),
    }
}

/// Double when every value is a number, else strings (netCDF-Java's rule
/// for a coordinate made from `coordValue`s).
fn guess_kind(values: &[&str]) -> VarType {
    if values.iter().all(|v| v.trim().parse::<f64>().is_ok()) {
        VarType::Number(DataType::Float64)
    } else {
        VarType::String
    }
}

/// The 1-D coordinate variable `dim` holding `values` as `kind`, with the
/// attributes of `like` (the members' own coordinate) if there is one.
fn coordinate(
    here: &str,
    dim: &str,
    kind: &VarType,
    values: &[&str],
    like: Option<&Var>,
) -> std::result::Result<Var, NcmlError> {
    let pos = Pos::default();
    let (dtype, data) =
        match kind {
            VarType::String | VarType::Char => values::strings(values),
            VarType::Number(d) => {
                let mut data = Vec::with_capacity(values.len() * d.size());
                for v in values {
                    data.extend(values::number(d, v).map_err(|e| {
                        NcmlError::invalid(pos, format!("coordValue of {dim}: {e}"))
                    })?);
                }
                (d.clone(), data)
            }
        };
    let attrs = like.map(|v| v.attrs.clone()).unwrap_or_default();
    in_memory(
        here,
        dim,
        vec![dim.to_string()],
        vec![values.len() as u64],
        dtype,
        data,
        attrs,
    )
    .map_err(|e| NcmlError::invalid(pos, e.to_string()))
}

fn in_memory(
    here: &str,
    name: &str,
    dims: Vec<String>,
    shape: Vec<u64>,
    dtype: DataType,
    data: Vec<u8>,
    attrs: Map<String, Value>,
) -> Result<Var> {
    let fill = fill_of(&attrs, &dtype);
    let mut meta = ArrayMeta::new(
        format!("{here}: {name} (values in the NcML file)"),
        shape,
        dtype,
        fill,
    )?;
    meta.dimension_names = dims.iter().cloned().map(Some).collect();
    meta.attributes = attrs.clone();
    Ok(Var {
        name: name.to_string(),
        dims,
        attrs,
        array: Arc::new(InMemory::new(meta, data)?),
    })
}

/// `_FillValue` if the attributes give one of `dtype`, else netCDF's
/// default fill.
fn fill_of(attrs: &Map<String, Value>, dtype: &DataType) -> Vec<u8> {
    master_fill(attrs, dtype).unwrap_or_else(|_| dtype.netcdf_default_fill())
}

/// The `_FillValue` the attributes give, as one element of `dtype`
/// (NCA's rule for a master's: [`master_fill`]).
fn given_fill(attrs: &Map<String, Value>, dtype: &DataType) -> Option<Vec<u8>> {
    attrs
        .contains_key("_FillValue")
        .then(|| master_fill(attrs, dtype).ok())
        .flatten()
}

/// Put `var` in the view: in place of the variable of its name, or last.
fn set_var(view: &mut View, var: Var) {
    match view.vars.iter_mut().find(|v| v.name == var.name) {
        Some(v) => *v = var,
        None => view.vars.push(var),
    }
}

/// Apply the changes `n` states to `view` (an aggregation's own changes
/// to one of its members).
pub fn change(view: View, n: &Netcdf, ctx: &Arc<Ctx>) -> Result<View> {
    modify(view, n, ctx).map_err(|e| e.at(ctx.file.display().to_string()))
}

/// Apply `n`'s changes to `base` (see the module doc).
fn modify(base: View, n: &Netcdf, ctx: &Arc<Ctx>) -> std::result::Result<View, NcmlError> {
    let here = ctx.file.display().to_string();
    let mut out = if n.explicit {
        View {
            watch: base.watch.clone(),
            recheck_in: base.recheck_in,
            ..View::default()
        }
    } else {
        base.clone()
    };
    for a in &n.attributes {
        apply_attribute(&mut out.attrs, &base.attrs, a)?;
    }
    for d in &n.dimensions {
        apply_dimension(&mut out, &base, d)?;
    }
    for v in &n.variables {
        apply_variable(&mut out, &base, v, &here)?;
    }
    for r in &n.removes {
        match r.kind {
            RemoveKind::Attribute => {
                if out.attrs.remove(&r.name).is_none() {
                    log::info!(
                        "{here}: {}: <remove> of attribute {}, which is not there",
                        r.pos,
                        r.name
                    );
                }
            }
            RemoveKind::Variable => {
                let before = out.vars.len();
                out.vars.retain(|v| v.name != r.name);
                if out.vars.len() == before {
                    log::info!(
                        "{here}: {}: <remove> of variable {}, which is not there",
                        r.pos,
                        r.name
                    );
                }
            }
            RemoveKind::Dimension => {
                // The dimension only, as netCDF-Java removes it: the
                // variables along it are served as they are.
                if let Some(v) = out.vars.iter().find(|v| v.dims.contains(&r.name)) {
                    log::info!(
                        "{here}: {}: dimension {} removed; variable {} keeps it",
                        r.pos,
                        r.name,
                        v.name
                    );
                }
                out.dims.retain(|d| d.name != r.name);
            }
        }
    }
    Ok(out)
}

fn apply_attribute(
    attrs: &mut Map<String, Value>,
    reference: &Map<String, Value>,
    a: &model::Attribute,
) -> std::result::Result<(), NcmlError> {
    let old = match &a.org_name {
        Some(org) => {
            let v = attrs.remove(org).or_else(|| reference.get(org).cloned());
            if v.is_none() {
                return Err(NcmlError::invalid(
                    a.pos,
                    format!("attribute {} renames {org}, which is not there", a.name),
                ));
            }
            v
        }
        None => attrs
            .get(&a.name)
            .cloned()
            .or_else(|| reference.get(&a.name).cloned()),
    };
    // Only `value=` changes an existing attribute; a new one takes the
    // element's text when it has no `value=` (netCDF-Java's readAtt).
    let value = match (&a.value, old) {
        (Some(_), _) | (None, None) => values::attribute_json(a, a.pos)?,
        (None, Some(v)) => v,
    };
    attrs.insert(a.name.clone(), value);
    Ok(())
}

fn apply_dimension(
    out: &mut View,
    base: &View,
    d: &model::Dimension,
) -> std::result::Result<(), NcmlError> {
    let from = d.org_name.as_deref().unwrap_or(&d.name);
    let existing = out.dim(from).or_else(|| base.dim(from)).cloned();
    match existing {
        Some(old) => {
            if let Some(len) = d.length
                && len != old.len
            {
                return Err(NcmlError::invalid(
                    d.pos,
                    format!(
                        "dimension {} is {} long in the dataset; NcML cannot make it {len}",
                        from, old.len
                    ),
                ));
            }
            out.dims.retain(|x| x.name != from && x.name != d.name);
            out.dims.push(Dim {
                name: d.name.clone(),
                len: old.len,
                unlimited: old.unlimited || d.unlimited,
            });
            if from != d.name {
                for v in &mut out.vars {
                    for n in &mut v.dims {
                        if n == from {
                            *n = d.name.clone();
                        }
                    }
                }
            }
        }
        None => {
            if d.org_name.is_some() {
                return Err(NcmlError::invalid(
                    d.pos,
                    format!("dimension {} renames {from}, which is not there", d.name),
                ));
            }
            let len = d.length.ok_or_else(|| {
                NcmlError::invalid(d.pos, format!("new dimension {} needs a length", d.name))
            })?;
            out.dims.push(Dim {
                name: d.name.clone(),
                len,
                unlimited: d.unlimited,
            });
        }
    }
    Ok(())
}

fn apply_variable(
    out: &mut View,
    base: &View,
    v: &model::Variable,
    here: &str,
) -> std::result::Result<(), NcmlError> {
    let from = v.org_name.as_deref().unwrap_or(&v.name);
    let existing = out.var(from).cloned().or_else(|| base.var(from).cloned());
    // A new variable without values: one value everywhere, made once its
    // attributes are known (below).
    let mut fresh: Option<(Vec<u64>, DataType)> = None;
    let mut var = match existing {
        Some(mut var) => {
            if let Some(t) = &v.dtype
                && v.values.is_none()
                && !same_type(t, var.dtype())
            {
                return Err(NcmlError::invalid(
                    v.pos,
                    format!(
                        "variable {from} is {} in the dataset; NcML changes a type only with <values>",
                        var.dtype()
                    ),
                ));
            }
            // A shape that names other dimensions of the same lengths
            // (renamed ones, as netCDF-Java's own files redeclare them)
            // re-points the variable; other lengths only with <values>.
            if let Some(shape) = &v.shape
                && *shape != var.dims
                && v.values.is_none()
            {
                let lens: Option<Vec<u64>> =
                    shape.iter().map(|d| out.dim(d).map(|x| x.len)).collect();
                if lens.as_deref() != Some(var.shape()) {
                    return Err(NcmlError::invalid(
                        v.pos,
                        format!(
                            "variable {from} has dimensions {:?} of lengths {:?} in the dataset; \
                             {shape:?} are not those lengths (NcML reshapes a variable only with <values>)",
                            var.dims,
                            var.shape()
                        ),
                    ));
                }
                var.dims = shape.clone();
            }
            out.vars.retain(|x| x.name != from);
            var.name = v.name.clone();
            var
        }
        None => {
            if v.org_name.is_some() {
                return Err(NcmlError::invalid(
                    v.pos,
                    format!("variable {} renames {from}, which is not there", v.name),
                ));
            }
            let Some(kind) = &v.dtype else {
                return Err(NcmlError::invalid(
                    v.pos,
                    format!("new variable {} needs a type", v.name),
                ));
            };
            // No shape: a scalar. No values: one value everywhere, its
            // _FillValue or zero (netCDF-Java's missing-data array), made
            // once its attributes are known, below.
            let dims = v.shape.clone().unwrap_or_default();
            let shape = lengths(out, &dims, v)?;
            let dtype = match kind {
                VarType::Number(d) => d.clone(),
                VarType::Char => DataType::FixedBytes(1),
                VarType::String => DataType::FixedBytes(1),
            };
            let placeholder = Constant::new(
                Path::new(here),
                shape.clone(),
                dtype.clone(),
                vec![0; dtype.size()],
            )
            .map_err(|e| NcmlError::invalid(v.pos, e.to_string()))?;
            fresh = Some((shape, dtype));
            Var {
                name: v.name.clone(),
                dims,
                attrs: Map::new(),
                array: Arc::new(placeholder),
            }
        }
    };
    for a in &v.attributes {
        let reference = var.attrs.clone();
        apply_attribute(&mut var.attrs, &reference, a)?;
    }
    for r in &v.removes {
        var.attrs.remove(&r.name);
    }
    if let Some(vals) = &v.values {
        let dims: Vec<String> = v.shape.clone().unwrap_or_else(|| var.dims.clone());
        let shape = lengths(out, &dims, v)?;
        let kind = match &v.dtype {
            Some(t) => t.clone(),
            None => kind_of(var.dtype()),
        };
        let count = crate::engine::index::checked_num_elements(&shape).unwrap_or(u64::MAX);
        let (dtype, data) = values::of_values(vals, &kind, Some(count))?;
        var = in_memory(here, &v.name, dims, shape, dtype, data, var.attrs.clone())
            .map_err(|e| NcmlError::invalid(vals.pos, e.to_string()))?;
    } else if let Some((shape, dtype)) = fresh {
        let fill = given_fill(&var.attrs, &dtype).unwrap_or_else(|| vec![0; dtype.size()]);
        log::info!(
            "{here}: {}: new variable {} has no <values>: it reads as {fill:?} everywhere",
            v.pos,
            v.name
        );
        let c = Constant::new(Path::new(here), shape, dtype, fill)
            .map_err(|e| NcmlError::invalid(v.pos, e.to_string()))?;
        var.array = Arc::new(c);
    }
    out.vars.push(var);
    Ok(())
}

/// The lengths of the dimensions `dims` of the view.
fn lengths(
    out: &View,
    dims: &[String],
    v: &model::Variable,
) -> std::result::Result<Vec<u64>, NcmlError> {
    dims.iter()
        .map(|d| {
            out.dim(d).map(|x| x.len).ok_or_else(|| {
                NcmlError::invalid(v.pos, format!("variable {}: unknown dimension {d}", v.name))
            })
        })
        .collect()
}

fn same_type(t: &VarType, d: &DataType) -> bool {
    match t {
        VarType::Number(x) => x == d,
        VarType::Char => *d == DataType::FixedBytes(1),
        VarType::String => matches!(d, DataType::FixedBytes(_)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::cache::ChunkCache;
    use crate::formats::Options;
    use crate::formats::entry::Formats;

    /// An aggregation of more members than are kept open reads whole,
    /// and never holds more than `Options::max_open` of them open.
    #[test]
    fn open_members_are_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().canonicalize().unwrap();
        let member = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/ncml/data/time/2000_02.nc");
        const MAX_OPEN: usize = 7;
        let n = MAX_OPEN * 3 + 2;
        std::fs::create_dir(d.join("m")).unwrap();
        for k in 0..n {
            std::fs::copy(&member, d.join(format!("m/{k:04}.nc"))).unwrap();
        }
        let text = r#"<netcdf><aggregation dimName="time" type="joinExisting">
            <scan location="m" suffix=".nc"/></aggregation></netcdf>"#;
        let doc = model::parse(text).unwrap();
        let mut opts = Options::new(
            vec![d.clone()],
            Arc::new(ChunkCache::new(1 << 20)),
            Formats::new(&[&crate::formats::nca::NETCDF]),
        );
        opts.max_open = MAX_OPEN;
        let file = d.join("a.ncml");
        let ctx = Arc::new(Ctx {
            scope: opts.scope_for(&file),
            opts,
            file: file.clone(),
            chain: vec![file],
            build,
            change,
            open: parking_lot::Mutex::default(),
        });
        let view = build(&doc, &ctx).unwrap();
        let t = view.var("T").unwrap();
        assert_eq!(t.shape(), [2 * n as u64, 3, 4]);
        assert!(ctx.open.lock().len() <= MAX_OPEN);
        let mut out = vec![0u8; t.array.meta().nbytes() as usize];
        let region = crate::engine::index::Region::whole(t.shape());
        t.array.read_region(&region, &mut out).unwrap();
        let one = &out[..2 * 48];
        assert!(out.chunks(2 * 48).all(|c| c == one), "every member's rows");
        assert!(ctx.open.lock().len() <= MAX_OPEN);
    }
}
