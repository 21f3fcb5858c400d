//! A series of files joined along one dimension, checked and written out
//! as a descriptor (`slabfs aggregate`): an NcML joinExisting
//! ([`ncml`]) or an NCA JSON descriptor ([`nca`]).
//!
//! [`plan`] opens every member through the [`Opener`] (side by side,
//! each dataset dropped once summarised, so memory follows the number of
//! variables, not of bytes), and checks that they fit, naming every
//! problem it finds (file, variable, what differs), not only the first:
//!
//! - **the same variables**, dtypes and dimension names as the first
//!   member, and the same shape but along the join dimension. A variable
//!   is joined when the join dimension is its first (outer) dimension, as
//!   netCDF-Java's joinExisting joins; one holding it further in is
//!   refused (a descriptor cannot say how to join it).
//! - **the same coordinates**: every other 1-D coordinate variable
//!   (`lat(lat)`) holds the same bytes in every member. Other variables
//!   not along the join dimension are the first member's, as both
//!   descriptors serve them; their values are not compared.
//! - **the join coordinate** (the variable named as the dimension), when
//!   there is one: numbers, put on the first member's `units` (and
//!   `calendar`) by the conversions an NCA partition may apply
//!   ([`units::conversion`]: each daily file's own `days since` becomes
//!   the first's), then the members are ordered by their first value.
//!   Within a member it must be strictly monotonic, across members too
//!   and in the same direction; members that overlap are refused, and so
//!   is a step between two members larger than 1.5 times the series'
//!   usual step (the median of all its steps): a missing file, unless
//!   [`Options::allow_gaps`]. An integer coordinate whose converted
//!   values are not integers is refused (the descriptor would have to
//!   change its type). Without a coordinate variable the members keep
//!   the order they were given in.

pub mod nca;
pub mod ncml;

use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde_json::{Map, Value};

use crate::codec::numeric::{self, Element};
use crate::dtype::{DataType, Endian};
use crate::engine::index::Region;
use crate::formats::dataset::Opener;
use crate::formats::entry::Found;
use crate::formats::nca::units::{self, Affine};

/// At most this many problems are listed (then how many more).
const MAX_LISTED: usize = 20;

/// A coordinate variable read whole to be checked holds at most this
/// many bytes (a join coordinate of 8 million doubles): a larger one is a
/// data variable misnamed, refused rather than read.
const MAX_COORD_BYTES: u64 = 64 << 20;

/// How the members are joined.
#[derive(Debug, Clone)]
pub struct Options {
    /// The dimension to join along.
    pub dim: String,
    /// Join across a step larger than the series' spacing says (a gap).
    pub allow_gaps: bool,
}

/// Why the files cannot be written as one series.
#[derive(Debug, thiserror::Error)]
pub enum SeriesError {
    /// Fewer than one member.
    #[error("no files to aggregate")]
    Empty,
    /// The members do not fit together: every problem, one per line.
    #[error("the files do not fit together along {dim}:\n{}", listed(.problems))]
    Unfit { dim: String, problems: Vec<String> },
}

fn listed(problems: &[String]) -> String {
    let mut s: Vec<String> = problems
        .iter()
        .take(MAX_LISTED)
        .map(|p| format!("  {p}"))
        .collect();
    if problems.len() > MAX_LISTED {
        s.push(format!("  ... and {} more", problems.len() - MAX_LISTED));
    }
    s.join("\n")
}

/// One variable of the series, as the first member has it.
#[derive(Debug, Clone, PartialEq)]
pub struct Variable {
    pub name: String,
    pub dtype: DataType,
    pub dims: Vec<String>,
    /// The first member's shape.
    pub shape: Vec<u64>,
    /// Whether it is joined (the join dimension is its first).
    pub joined: bool,
    pub attributes: Map<String, Value>,
}

/// One member file, in series order.
#[derive(Debug, Clone)]
pub struct Member {
    pub path: PathBuf,
    /// Its length along the join dimension.
    pub len: u64,
    /// Its join coordinate on the series' units, when there is one.
    pub coords: Option<Vec<f64>>,
    /// Whether its coordinate was stated in other units than the first
    /// member's (and so converted).
    pub converted: bool,
}

/// The join coordinate of the series.
#[derive(Debug, Clone)]
pub struct Coordinate {
    pub dtype: DataType,
    pub units: Option<String>,
    pub calendar: Option<String>,
}

/// Files checked to be one series along `dim`.
#[derive(Debug, Clone)]
pub struct Series {
    pub dim: String,
    pub members: Vec<Member>,
    pub variables: Vec<Variable>,
    /// The join coordinate variable (named `dim`), if the members have one.
    pub coordinate: Option<Coordinate>,
    /// The first member's global attributes.
    pub attributes: Map<String, Value>,
}

impl Series {
    /// The members' total length along the join dimension.
    pub fn len(&self) -> u64 {
        self.members.iter().map(|m| m.len).sum()
    }

    /// Whether the joined dimension is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether any member's coordinate had to be converted to the series'
    /// units.
    pub fn converted(&self) -> bool {
        self.members.iter().any(|m| m.converted)
    }
}

/// What one member holds, as far as the checks need it.
struct Summary {
    path: PathBuf,
    vars: Vec<Variable>,
    /// The bytes of its 1-D coordinate variables other than the join
    /// one (name, native-order bytes).
    coords: Vec<(String, Vec<u8>)>,
    /// Its join coordinate: values as stored, units, calendar.
    join: Option<(Vec<f64>, Option<String>, Option<String>)>,
    len: Option<u64>,
    attributes: Map<String, Value>,
}

/// Open `files` and check that they are one series along `opts.dim`
/// (see the module doc).
pub fn plan(opener: &Opener, files: &[PathBuf], opts: &Options) -> Result<Series, SeriesError> {
    if files.is_empty() {
        return Err(SeriesError::Empty);
    }
    let summaries: Vec<Result<Summary, String>> = files
        .par_iter()
        .map(|f| summarise(opener, f, &opts.dim))
        .collect();
    let mut problems = Vec::new();
    let mut ok = Vec::new();
    for s in summaries {
        match s {
            Ok(s) => ok.push(s),
            Err(p) => problems.push(p),
        }
    }
    if !problems.is_empty() {
        return Err(unfit(&opts.dim, problems));
    }
    let dim = &opts.dim;
    order_by_time(&mut ok, dim, &mut problems);
    if !problems.is_empty() {
        return Err(unfit(dim, problems));
    }
    let first = &ok[0];
    if first.len.is_none() {
        return Err(unfit(
            dim,
            vec![format!("{}: has no dimension {dim}", first.path.display())],
        ));
    }
    for v in &first.vars {
        if !v.joined && v.dims.iter().any(|d| d == dim) {
            problems.push(format!(
                "{}: {}: {dim} is not its first dimension ({}): only variables whose first \
                 dimension it is can be joined",
                first.path.display(),
                v.name,
                v.dims.join(", ")
            ));
        }
    }
    for s in &ok[1..] {
        compare(first, s, dim, &mut problems);
    }
    // The join coordinate, on the first member's units.
    let coordinate = first
        .vars
        .iter()
        .find(|v| v.name == *dim && v.dims.len() == 1);
    let mut members: Vec<Member> = Vec::with_capacity(ok.len());
    for s in &ok {
        let len = s.len.unwrap_or(0);
        let (coords, converted) = match (&first.join, &s.join) {
            (Some((_, fu, fc)), Some((vals, u, c))) => {
                match to_series_units(
                    vals,
                    u.as_deref(),
                    c.as_deref(),
                    fu.as_deref(),
                    fc.as_deref(),
                ) {
                    Ok((v, conv)) => (Some(v), conv),
                    Err(e) => {
                        problems.push(format!("{}: {dim}: {e}", s.path.display()));
                        (None, false)
                    }
                }
            }
            _ => (None, false),
        };
        members.push(Member {
            path: s.path.clone(),
            len,
            coords,
            converted,
        });
    }
    if let Some(c) = coordinate
        && matches!(
            c.dtype.kind(),
            crate::dtype::NumericKind::Int | crate::dtype::NumericKind::UInt
        )
    {
        for m in &members {
            if let Some(v) = m
                .coords
                .as_ref()
                .and_then(|v| v.iter().find(|x| x.fract() != 0.0))
            {
                problems.push(format!(
                    "{}: {dim} is {v} in the first member's units, not an integer, and {dim} \
                     is {} (convert the files, or join files whose {dim} has one unit)",
                    m.path.display(),
                    c.dtype
                ));
            }
        }
    }
    if !problems.is_empty() {
        return Err(unfit(dim, problems));
    }
    if members.iter().all(|m| m.len == 0) {
        return Err(unfit(
            dim,
            vec![format!(
                "every file is 0 long along {dim}: there is nothing to join"
            )],
        ));
    }
    if first.join.is_some() {
        members.sort_by(|a, b| {
            let k = |m: &Member| m.coords.as_ref().and_then(|c| c.first().copied());
            k(a).partial_cmp(&k(b)).unwrap_or(std::cmp::Ordering::Equal)
        });
        check_monotonic(&members, dim, opts.allow_gaps, &mut problems);
        if !problems.is_empty() {
            return Err(unfit(dim, problems));
        }
    }
    let coordinate = coordinate.map(|c| Coordinate {
        dtype: c.dtype.clone(),
        units: first.join.as_ref().and_then(|j| j.1.clone()),
        calendar: first.join.as_ref().and_then(|j| j.2.clone()),
    });
    Ok(Series {
        dim: dim.clone(),
        members,
        variables: first.vars.clone(),
        coordinate,
        attributes: first.attributes.clone(),
    })
}

fn unfit(dim: &str, problems: Vec<String>) -> SeriesError {
    SeriesError::Unfit {
        dim: dim.to_string(),
        problems,
    }
}

/// Put the members in the order of their first join coordinate value (on
/// the first given member's units), so the earliest is the template and
/// its units the series' (given in any order, the series is the same).
/// Members without a coordinate keep their order.
fn order_by_time(ok: &mut Vec<Summary>, dim: &str, problems: &mut Vec<String>) {
    let Some((_, u, c)) = ok[0].join.clone() else {
        return;
    };
    let mut keys = Vec::with_capacity(ok.len());
    for s in ok.iter() {
        let Some((vals, su, sc)) = &s.join else {
            return;
        };
        let Some(&v) = vals.first() else {
            keys.push(f64::NEG_INFINITY);
            continue;
        };
        match to_series_units(
            &[v],
            su.as_deref(),
            sc.as_deref(),
            u.as_deref(),
            c.as_deref(),
        ) {
            Ok((v, _)) => keys.push(v[0]),
            Err(e) => problems.push(format!("{}: {dim}: {e}", s.path.display())),
        }
    }
    if !problems.is_empty() {
        return;
    }
    let mut paired: Vec<(f64, Summary)> = keys.into_iter().zip(ok.drain(..)).collect();
    paired.sort_by(|a, b| a.0.total_cmp(&b.0));
    ok.extend(paired.into_iter().map(|(_, s)| s));
}

/// `vals` (in `from` units) on the series' units `to`, and whether they
/// had to be converted.
fn to_series_units(
    vals: &[f64],
    from: Option<&str>,
    from_cal: Option<&str>,
    to: Option<&str>,
    to_cal: Option<&str>,
) -> Result<(Vec<f64>, bool), String> {
    let (Some(from), Some(to)) = (from, to) else {
        return match (from, to) {
            (None, None) => Ok((vals.to_vec(), false)),
            (Some(u), None) => Err(format!("has units {u:?} where the first member has none")),
            (None, Some(u)) => Err(format!("has no units where the first member has {u:?}")),
            _ => unreachable!(),
        };
    };
    let a: Affine = units::conversion(from, from_cal, to, to_cal)
        .map_err(|e| format!("{from:?} cannot be put on the first member's {to:?}: {e}"))?;
    if a.is_identity() {
        return Ok((vals.to_vec(), false));
    }
    Ok((vals.iter().map(|&x| a.apply(x)).collect(), true))
}

/// Check the members' coordinates (sorted by first value) form one
/// strictly monotonic series without overlaps or gaps.
fn check_monotonic(members: &[Member], dim: &str, allow_gaps: bool, problems: &mut Vec<String>) {
    let mut steps: Vec<f64> = Vec::new();
    let all: Vec<f64> = members
        .iter()
        .flat_map(|m| m.coords.iter().flatten().copied())
        .collect();
    for w in all.windows(2) {
        steps.push(w[1] - w[0]);
    }
    // Sorted by first value, so the series increases; a member whose own
    // values decrease is named below.
    for m in members.iter() {
        let c = m.coords.as_deref().unwrap_or_default();
        if let Some(i) = c.windows(2).position(|w| w[1] <= w[0]) {
            problems.push(format!(
                "{}: {dim} is not increasing: {} then {} (at index {})",
                m.path.display(),
                c[i],
                c[i + 1],
                i + 1
            ));
        }
    }
    if !problems.is_empty() {
        return;
    }
    let mut positive: Vec<f64> = steps.iter().copied().filter(|s| *s > 0.0).collect();
    positive.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    let usual = positive.get(positive.len() / 2).copied();
    for w in members.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        let (Some(last), Some(next)) = (
            a.coords.as_ref().and_then(|c| c.last()),
            b.coords.as_ref().and_then(|c| c.first()),
        ) else {
            continue;
        };
        if next <= last {
            problems.push(format!(
                "{} and {} overlap: {dim} {next} (the first of {}) is not after {last} (the last \
                 of {})",
                a.path.display(),
                b.path.display(),
                b.path.display(),
                a.path.display()
            ));
        } else if let Some(usual) = usual
            && !allow_gaps
            && next - last > 1.5 * usual
        {
            problems.push(format!(
                "a gap between {} and {}: {dim} goes from {last} to {next}, a step of {} where \
                 the series steps by {usual} (a file missing? --allow-gaps joins them anyway)",
                a.path.display(),
                b.path.display(),
                next - last
            ));
        }
    }
}

/// Compare member `s` with the first, adding every difference.
fn compare(first: &Summary, s: &Summary, dim: &str, problems: &mut Vec<String>) {
    let here = s.path.display();
    if s.len.is_none() {
        problems.push(format!("{here}: has no dimension {dim}"));
        return;
    }
    for v in &first.vars {
        let Some(w) = s.vars.iter().find(|w| w.name == v.name) else {
            problems.push(format!(
                "{here}: has no variable {} (the first member, {}, has)",
                v.name,
                first.path.display()
            ));
            continue;
        };
        if w.dtype != v.dtype {
            problems.push(format!(
                "{here}: {} is {}, not {} as in {}",
                v.name,
                w.dtype,
                v.dtype,
                first.path.display()
            ));
        }
        if w.dims != v.dims {
            problems.push(format!(
                "{here}: {} has dimensions ({}), not ({}) as in {}",
                v.name,
                w.dims.join(", "),
                v.dims.join(", "),
                first.path.display()
            ));
            continue;
        }
        let skip = usize::from(v.joined);
        if w.shape.get(skip..) != v.shape.get(skip..) {
            problems.push(format!(
                "{here}: {} has shape {:?}, not {:?} as in {}{}",
                v.name,
                w.shape,
                v.shape,
                first.path.display(),
                if v.joined {
                    " (the join dimension aside)"
                } else {
                    ""
                }
            ));
        }
    }
    for w in &s.vars {
        if first.vars.iter().all(|v| v.name != w.name) {
            problems.push(format!(
                "{here}: has a variable {} that the first member, {}, has not",
                w.name,
                first.path.display()
            ));
        }
    }
    for (name, bytes) in &first.coords {
        if let Some((_, other)) = s.coords.iter().find(|(n, _)| n == name)
            && other != bytes
        {
            problems.push(format!(
                "{here}: coordinate {name} differs from {}'s",
                first.path.display()
            ));
        }
    }
}

/// Open `path` and summarise it.
fn summarise(opener: &Opener, path: &Path, dim: &str) -> Result<Summary, String> {
    let here = path.display();
    let ds = opener
        .open(path)
        .map_err(|e| format!("{here}: cannot be read: {e}"))?;
    if let Some(e) = ds.skipped.first() {
        return Err(format!("{here}: part of it cannot be read: {e}"));
    }
    let mut vars = Vec::new();
    let mut coords = Vec::new();
    let mut join = None;
    let mut len = None;
    for entry in &ds.entries {
        let meta = entry.array.meta();
        let mut dims = Vec::with_capacity(meta.rank());
        for (i, d) in meta.dimension_names.iter().enumerate() {
            match d {
                Some(d) => dims.push(d.clone()),
                None => {
                    return Err(format!(
                        "{here}: {}: dimension {i} has no name (a series joins named dimensions)",
                        entry.path
                    ));
                }
            }
        }
        let joined = dims.first().map(String::as_str) == Some(dim);
        if joined {
            let n = meta.shape[0];
            if let Some(l) = len
                && l != n
            {
                return Err(format!(
                    "{here}: {} is {n} long along {dim} where another variable is {l}",
                    entry.path
                ));
            }
            len = Some(n);
        } else if let Some(i) = dims.iter().position(|d| d == dim) {
            len.get_or_insert(meta.shape[i]);
        }
        let is_coord = dims.len() == 1 && dims[0] == entry.path;
        if is_coord {
            if meta.nbytes() > MAX_COORD_BYTES {
                return Err(format!(
                    "{here}: coordinate {} is {} bytes, more than {MAX_COORD_BYTES} a coordinate \
                     is read whole for",
                    entry.path,
                    meta.nbytes()
                ));
            }
            let mut bytes = vec![0u8; meta.nbytes() as usize];
            entry
                .array
                .read_region(&Region::whole(&meta.shape), &mut bytes)
                .map_err(|e| format!("{here}: {}: {e}", entry.path))?;
            if joined {
                let values = as_f64(&meta.dtype, &bytes).ok_or_else(|| {
                    format!(
                        "{here}: {dim} is {}, not numbers: a series is ordered by a number",
                        meta.dtype
                    )
                })?;
                let text = |k: &str| {
                    meta.attributes
                        .get(k)
                        .and_then(Value::as_str)
                        .map(str::to_string)
                };
                join = Some((values, text("units"), text("calendar")));
            } else {
                coords.push((entry.path.clone(), bytes));
            }
        }
        vars.push(Variable {
            name: entry.path.clone(),
            dtype: meta.dtype.clone(),
            dims,
            shape: meta.shape.clone(),
            joined,
            attributes: meta.attributes.clone(),
        });
    }
    Ok(Summary {
        path: path.to_path_buf(),
        vars,
        coords,
        join,
        len,
        attributes: ds
            .directories
            .get("")
            .map(|d| d.attributes.clone())
            .unwrap_or_default(),
    })
}

/// Native-order elements of a numeric `dtype` as doubles.
fn as_f64(dtype: &DataType, bytes: &[u8]) -> Option<Vec<f64>> {
    let prim = numeric::Prim::of(dtype)?;
    if matches!(dtype, DataType::Complex64 | DataType::Complex128) {
        return None;
    }
    let from = Element {
        prim,
        endian: Endian::NATIVE,
    };
    let to = Element {
        prim: numeric::Prim::of(&DataType::Float64)?,
        endian: Endian::NATIVE,
    };
    let n = bytes.len() / dtype.size();
    let mut out = vec![0u8; n * 8];
    numeric::convert(from, bytes, to, &mut out);
    Some(
        out.chunks_exact(8)
            .map(|c| f64::from_ne_bytes(c.try_into().expect("8 bytes")))
            .collect(),
    )
}

/// Which files of a directory are members: by default those the
/// registry knows by name as datasets (`*.nc`, `*.h5`, `*.zarr`...) but
/// descriptors (`*.ncml`, `*.nca.json`, kerchunk's `*.json`).
#[derive(Debug, Clone, Default)]
pub struct Select {
    /// Only names ending so (NcML's `<scan suffix>`).
    pub suffix: Option<String>,
    /// Only names this regular expression matches whole (NcML's
    /// `<scan regExp>`).
    pub regexp: Option<regex::Regex>,
    /// The files of subdirectories too.
    pub subdirs: bool,
}

/// The formats whose files describe other files: a directory's files of
/// these are no members by default.
const DESCRIPTORS: [&str; 3] = ["nca", "ncml", "kerchunk"];

/// At most this many files are listed from a directory.
pub const MAX_FILES: usize = 1_000_000;

/// The member files of `dir` as `select` says, sorted by path.
pub fn files_in(dir: &Path, select: &Select) -> crate::Result<Vec<PathBuf>> {
    let formats = crate::formats::registry::builtin();
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let io = |e| crate::Error::Io {
            path: d.display().to_string(),
            source: e,
        };
        for entry in std::fs::read_dir(&d).map_err(io)? {
            let entry = entry.map_err(io)?;
            let path = entry.path();
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            let kind = entry.file_type().map_err(io)?;
            let wanted = match (&select.suffix, &select.regexp) {
                (None, None) => match formats.classify_file(name) {
                    // Not descriptors of other files (an earlier run's
                    // output among its members).
                    Some(Found::Dataset { format, .. }) => !DESCRIPTORS.contains(&format.name),
                    _ => false,
                },
                (s, r) => {
                    s.as_ref().is_none_or(|s| name.ends_with(s.as_str()))
                        && r.as_ref().is_none_or(|r| {
                            r.find(name)
                                .is_some_and(|m| m.start() == 0 && m.end() == name.len())
                        })
                }
            };
            if kind.is_dir() && select.subdirs && !wanted {
                todo.push(path);
            } else if wanted {
                out.push(path);
                if out.len() > MAX_FILES {
                    return Err(crate::Error::metadata(
                        dir.display().to_string(),
                        format!("more than {MAX_FILES} files to aggregate"),
                    ));
                }
            }
        }
    }
    out.sort();
    Ok(out)
}

/// `path` relative to `dir` when it is under it, else absolute (a
/// descriptor's member locations are relative to the descriptor's own
/// directory).
pub fn location(path: &Path, dir: &Path) -> String {
    let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let (p, d) = (abs(path), abs(dir));
    match p.strip_prefix(&d) {
        Ok(rel) => rel.display().to_string(),
        Err(_) => p.display().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(name: &str, coords: &[f64]) -> Member {
        Member {
            path: PathBuf::from(name),
            len: coords.len() as u64,
            coords: Some(coords.to_vec()),
            converted: false,
        }
    }

    fn problems(members: &[Member], allow_gaps: bool) -> Vec<String> {
        let mut p = Vec::new();
        check_monotonic(members, "time", allow_gaps, &mut p);
        p
    }

    #[test]
    fn a_regular_series_passes() {
        let m = [
            member("a", &[0.0, 1.0]),
            member("b", &[2.0]),
            member("c", &[3.0, 4.0]),
        ];
        assert!(problems(&m, false).is_empty());
    }

    #[test]
    fn a_missing_file_is_a_gap_unless_allowed() {
        let m = [
            member("a", &[0.0]),
            member("b", &[1.0]),
            member("d", &[3.0]),
            member("e", &[4.0]),
        ];
        let p = problems(&m, false);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].contains("a gap between b and d"), "{p:?}");
        assert!(problems(&m, true).is_empty());
    }

    #[test]
    fn monthly_steps_of_28_to_31_days_are_no_gap() {
        let m = [
            member("jan", &[0.0]),
            member("feb", &[31.0]),
            member("mar", &[59.0]),
            member("apr", &[90.0]),
        ];
        assert!(problems(&m, false).is_empty());
    }

    #[test]
    fn overlaps_and_reversals_are_named() {
        let m = [member("a", &[0.0, 1.0, 2.0]), member("b", &[2.0, 3.0])];
        let p = problems(&m, false);
        assert!(p[0].contains("a and b overlap"), "{p:?}");
        let m = [member("a", &[0.0, 1.0]), member("b", &[3.0, 2.0])];
        let p = problems(&m, false);
        assert!(
            p[0].contains("b: time is not increasing: 3 then 2"),
            "{p:?}"
        );
    }

    #[test]
    fn units_are_put_on_the_first_members() {
        let (v, conv) = to_series_units(
            &[0.0, 1.0],
            Some("days since 2000-01-03"),
            None,
            Some("days since 2000-01-01"),
            None,
        )
        .unwrap();
        assert_eq!((v, conv), (vec![2.0, 3.0], true));
        let (v, conv) = to_series_units(
            &[12.0],
            Some("hours since 2000-01-02"),
            None,
            Some("days since 2000-01-01"),
            None,
        )
        .unwrap();
        assert_eq!((v, conv), (vec![1.5], true));
        let e = to_series_units(
            &[0.0],
            Some("days since 2000-01-01"),
            Some("noleap"),
            Some("days since 2000-01-01"),
            None,
        )
        .unwrap_err();
        assert!(e.contains("calendar"), "{e}");
        let e =
            to_series_units(&[0.0], None, None, Some("days since 2000-01-01"), None).unwrap_err();
        assert!(e.contains("has no units"), "{e}");
    }

    #[test]
    fn locations_are_relative_under_the_descriptors_directory() {
        assert_eq!(location(Path::new("/a/b/c.nc"), Path::new("/a")), "b/c.nc");
        assert_eq!(location(Path::new("/x/c.nc"), Path::new("/a")), "/x/c.nc");
    }
}
