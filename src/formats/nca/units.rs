//! The unit conversions an aggregation may need, and nothing more.
//!
//! A partition may state units different from (but equivalent to) the
//! master's; its values are then converted with one affine map
//! `master = a * partition + b`, computed in `f64`. slabfs understands a
//! deliberately small subset of UDUNITS, the part real aggregations use,
//! and refuses everything else with a [`UnitError`] (the caller names the
//! partition and both unit strings): a value passed through unconverted
//! would be silently wrong, which is worse than an error.
//!
//! - **Identical strings** (after trimming and collapsing blanks), or a
//!   partition without units: the identity, whatever the string means
//!   (`degrees_north`, `1`, `kg m-2 s-1` all work without being parsed).
//! - **Temperatures** `K`, `degC`, `degF` (and their spelled-out names)
//!   alone: affine, through kelvin (`K = degC + 273.15`,
//!   `K = (degF + 459.67) * 5/9`).
//! - **Scaled units**: products of powers of named units with SI prefixes,
//!   blank-, `.`- or `*`-separated, `/` dividing by the next factor,
//!   exponents written `m2`, `s-1`, `m^2` or `m**2`, and plain number
//!   factors (`1e-3 kg kg-1`). Base units: metre, gram, second (and
//!   `min`, `h`, `day`), kelvin, mole, ampere, candela, with the derived
//!   pascal, newton, joule, watt, hertz, bar, litre, and `percent` / `%`
//!   and `ppm` as dimensionless fractions. Two such units convert when
//!   their dimensions agree: `a` is the ratio of their scales.
//! - **Reference time** `<unit> since <date>` with `unit` one of second,
//!   minute, hour, day (any common spelling) and the date
//!   `YYYY-MM-DD[( |T)hh:mm[:ss[.f]]][ Z|UTC|±hh[:mm]]`: both must use the
//!   same calendar (after canonicalising the CF synonyms `gregorian` =
//!   `standard`, `365_day` = `noleap`, `366_day` = `all_leap`; absent
//!   means `standard`); `a` is the ratio of the units and `b` the distance
//!   between the reference dates in that calendar. `standard` is the mixed
//!   Julian/Gregorian calendar of CF (dates before 1582-10-15 are Julian).
//!   `months since` and `years since` are refused: their length depends on
//!   the calendar and on conventions slabfs does not guess.

use std::fmt;

/// Why two unit strings cannot be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UnitError(pub String);

fn err<T>(msg: impl Into<String>) -> Result<T, UnitError> {
    Err(UnitError(msg.into()))
}

/// `master = a * partition + b`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Affine {
    pub a: f64,
    pub b: f64,
}

impl Affine {
    pub const IDENTITY: Affine = Affine { a: 1.0, b: 0.0 };

    pub fn is_identity(&self) -> bool {
        self.a == 1.0 && self.b == 0.0
    }

    #[inline]
    pub fn apply(&self, x: f64) -> f64 {
        if self.is_identity() {
            x
        } else {
            self.a * x + self.b
        }
    }
}

/// A CF calendar, synonyms merged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Calendar {
    /// Julian before 1582-10-15, Gregorian from then on (CF `standard`).
    Standard,
    ProlepticGregorian,
    NoLeap,
    AllLeap,
    Day360,
    Julian,
}

impl Calendar {
    /// Parse a CF calendar name; `None` (absent) is `standard`.
    pub fn parse(name: Option<&str>) -> Result<Calendar, UnitError> {
        let Some(name) = name else {
            return Ok(Calendar::Standard);
        };
        Ok(match name.trim().to_ascii_lowercase().as_str() {
            "" | "standard" | "gregorian" => Calendar::Standard,
            "proleptic_gregorian" => Calendar::ProlepticGregorian,
            "noleap" | "365_day" => Calendar::NoLeap,
            "all_leap" | "366_day" => Calendar::AllLeap,
            "360_day" => Calendar::Day360,
            "julian" => Calendar::Julian,
            _ => return err(format!("unsupported calendar {name:?}")),
        })
    }

    /// Days from a calendar-specific epoch to `y-m-d`, checking the date
    /// exists in the calendar.
    fn day_number(self, y: i64, m: i64, d: i64) -> Result<i64, UnitError> {
        let bad = || {
            err(format!(
                "{y:04}-{m:02}-{d:02} is not a date in the {self} calendar"
            ))
        };
        if !(1..=12).contains(&m) || d < 1 {
            return bad();
        }
        const DAYS: [i64; 12] = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
        let gregorian_leap =
            y.rem_euclid(4) == 0 && (y.rem_euclid(100) != 0 || y.rem_euclid(400) == 0);
        let julian_leap = y.rem_euclid(4) == 0;
        let month_len = |leap: bool| DAYS[m as usize - 1] + i64::from(m == 2 && leap);
        let cum = |leap: bool| -> i64 {
            (1..m)
                .map(|k| DAYS[k as usize - 1] + i64::from(k == 2 && leap))
                .sum()
        };
        match self {
            Calendar::Day360 => {
                if d > 30 {
                    return bad();
                }
                Ok(y * 360 + (m - 1) * 30 + d - 1)
            }
            Calendar::NoLeap => {
                if d > month_len(false) {
                    return bad();
                }
                Ok(y * 365 + cum(false) + d - 1)
            }
            Calendar::AllLeap => {
                if d > month_len(true) {
                    return bad();
                }
                Ok(y * 366 + cum(true) + d - 1)
            }
            Calendar::ProlepticGregorian => {
                if d > month_len(gregorian_leap) {
                    return bad();
                }
                Ok(jdn(y, m, d, true))
            }
            Calendar::Julian => {
                if d > month_len(julian_leap) {
                    return bad();
                }
                Ok(jdn(y, m, d, false))
            }
            Calendar::Standard => {
                if (y, m, d) >= (1582, 10, 15) {
                    if d > month_len(gregorian_leap) {
                        return bad();
                    }
                    Ok(jdn(y, m, d, true))
                } else if (y, m, d) <= (1582, 10, 4) {
                    if d > month_len(julian_leap) {
                        return bad();
                    }
                    Ok(jdn(y, m, d, false))
                } else {
                    err(format!(
                        "{y:04}-{m:02}-{d:02} falls in the days the standard calendar skips"
                    ))
                }
            }
        }
    }
}

impl fmt::Display for Calendar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Calendar::Standard => "standard",
            Calendar::ProlepticGregorian => "proleptic_gregorian",
            Calendar::NoLeap => "noleap",
            Calendar::AllLeap => "all_leap",
            Calendar::Day360 => "360_day",
            Calendar::Julian => "julian",
        })
    }
}

/// The Julian Day Number of a date in the Gregorian or Julian calendar
/// (the classic integer formulas, with floor division so that years
/// before 4800 BC stay correct).
fn jdn(y: i64, m: i64, d: i64, gregorian: bool) -> i64 {
    let a = (14 - m).div_euclid(12);
    let yy = y + 4800 - a;
    let mm = m + 12 * a - 3;
    let base = d + (153 * mm + 2).div_euclid(5) + 365 * yy + yy.div_euclid(4);
    if gregorian {
        base - yy.div_euclid(100) + yy.div_euclid(400) - 32045
    } else {
        base - 32083
    }
}

/// The affine map from values in `from` units (calendar `from_cal`) to
/// values in `to` units (calendar `to_cal`). Calendars only matter for
/// reference-time units.
pub fn conversion(
    from: &str,
    from_cal: Option<&str>,
    to: &str,
    to_cal: Option<&str>,
) -> Result<Affine, UnitError> {
    let norm = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let (f, t) = (norm(from), norm(to));
    let time = |s: &str| split_since(s).is_some();
    if f == t && !time(&f) {
        return Ok(Affine::IDENTITY);
    }
    match (split_since(&f), split_since(&t)) {
        (Some((fu, fd)), Some((tu, td))) => {
            let (fc, tc) = (Calendar::parse(from_cal)?, Calendar::parse(to_cal)?);
            if fc != tc {
                return err(format!("different calendars ({fc} and {tc})"));
            }
            if f == t {
                return Ok(Affine::IDENTITY);
            }
            let fs = time_unit_seconds(fu)?;
            let ts = time_unit_seconds(tu)?;
            let fref = reference_seconds(fd, fc)?;
            let tref = reference_seconds(td, tc)?;
            Ok(Affine {
                a: fs / ts,
                b: (fref - tref) as f64 / ts,
            })
        }
        (None, None) => {
            let fu = parse_unit(&f)?;
            let tu = parse_unit(&t)?;
            if fu.dims != tu.dims {
                return err(format!(
                    "incompatible dimensions ({} and {})",
                    fu.dims_string(),
                    tu.dims_string()
                ));
            }
            // value_SI = value * scale + offset on both sides.
            Ok(Affine {
                a: fu.scale / tu.scale,
                b: (fu.offset - tu.offset) / tu.scale,
            })
        }
        _ => err("a reference time and a unit that is not one"),
    }
}

/// Split `"<unit> since <date>"`.
fn split_since(s: &str) -> Option<(&str, &str)> {
    let lower = s.to_ascii_lowercase();
    let at = lower.find(" since ")?;
    Some((s[..at].trim(), s[at + 7..].trim()))
}

/// Seconds in one step of a reference-time unit.
fn time_unit_seconds(u: &str) -> Result<f64, UnitError> {
    let lower = u.to_ascii_lowercase();
    Ok(match lower.as_str() {
        "s" | "sec" | "secs" | "second" | "seconds" => 1.0,
        "ms" | "msec" | "millisecond" | "milliseconds" => 1e-3,
        "us" | "microsecond" | "microseconds" => 1e-6,
        "min" | "mins" | "minute" | "minutes" => 60.0,
        "h" | "hr" | "hrs" | "hour" | "hours" => 3600.0,
        "d" | "day" | "days" => 86400.0,
        "month" | "months" | "year" | "years" | "yr" | "a" => {
            return err(format!(
                "{u:?} since ...: months and years have no fixed length; not supported"
            ));
        }
        _ => return err(format!("{u:?} is not a unit of time")),
    })
}

/// Seconds from the calendar's epoch to the reference date `s`.
fn reference_seconds(s: &str, cal: Calendar) -> Result<i128, UnitError> {
    let bad = || err(format!("cannot parse the reference date {s:?}"));
    let s = s.trim();
    // Date: YYYY-M-D (a leading '-' for years before 1 BC is not supported).
    let (date, rest) = match s.find([' ', 'T']) {
        Some(i) => (&s[..i], s[i + 1..].trim()),
        None => (s, ""),
    };
    let parts: Vec<&str> = date.split('-').collect();
    let [y, m, d] = parts[..] else {
        return bad();
    };
    let num = |x: &str| -> Option<i64> {
        (!x.is_empty() && x.chars().all(|c| c.is_ascii_digit()))
            .then(|| x.parse().ok())
            .flatten()
    };
    let (Some(y), Some(m), Some(d)) = (num(y), num(m), num(d)) else {
        return bad();
    };
    let days = cal.day_number(y, m, d)?;
    // Time of day, then an optional zone.
    let (time, zone) = match rest.find(|c: char| c.is_alphabetic() || " +-".contains(c)) {
        Some(i) => (&rest[..i], rest[i..].trim()),
        None => (rest, ""),
    };
    let mut secs = 0f64;
    if !time.is_empty() {
        let hms: Vec<&str> = time.split(':').collect();
        if hms.len() < 2 || hms.len() > 3 {
            return bad();
        }
        let (Some(h), Some(mi)) = (num(hms[0]), num(hms[1])) else {
            return bad();
        };
        let sec: f64 = match hms.get(2) {
            Some(x) => match x.parse::<f64>() {
                Ok(v) if v.is_finite() && (0.0..61.0).contains(&v) => v,
                _ => return bad(),
            },
            None => 0.0,
        };
        if h > 24 || mi > 59 {
            return bad();
        }
        secs = (h * 3600 + mi * 60) as f64 + sec;
    }
    let offset = match zone.trim() {
        "" | "Z" | "UTC" | "GMT" | "utc" => 0,
        z => {
            let sign = match z.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return bad(),
            };
            let body = &z[1..];
            let (h, mi) = match body.split_once(':') {
                Some((h, mi)) => (num(h), num(mi)),
                None if body.len() == 4 => (num(&body[..2]), num(&body[2..])),
                None => (num(body), Some(0)),
            };
            let (Some(h), Some(mi)) = (h, mi) else {
                return bad();
            };
            sign * (h * 3600 + mi * 60)
        }
    };
    if secs.fract() != 0.0 {
        return err(format!(
            "fractional seconds in the reference date {s:?} are not supported"
        ));
    }
    Ok(days as i128 * 86400 + secs as i128 - offset as i128)
}

/// Powers of the SI base units: m, kg, s, K, mol, A, cd.
type Dims = [i8; 7];

const NAMES: [&str; 7] = ["m", "kg", "s", "K", "mol", "A", "cd"];

/// A parsed unit: `value_SI = value * scale + offset`.
#[derive(Debug, Clone, PartialEq)]
struct Unit {
    scale: f64,
    offset: f64,
    dims: Dims,
}

impl Unit {
    fn dims_string(&self) -> String {
        let parts: Vec<String> = self
            .dims
            .iter()
            .zip(NAMES)
            .filter(|(p, _)| **p != 0)
            .map(|(p, n)| {
                if *p == 1 {
                    n.to_string()
                } else {
                    format!("{n}{p}")
                }
            })
            .collect();
        if parts.is_empty() {
            "dimensionless".into()
        } else {
            parts.join(" ")
        }
    }
}

/// A named unit: its scale to SI, dimensions, and whether SI prefixes
/// apply to it.
struct Named {
    scale: f64,
    dims: Dims,
    prefixable: bool,
}

const M: Dims = [1, 0, 0, 0, 0, 0, 0];
const KG: Dims = [0, 1, 0, 0, 0, 0, 0];
const S: Dims = [0, 0, 1, 0, 0, 0, 0];
const K: Dims = [0, 0, 0, 1, 0, 0, 0];
const MOL: Dims = [0, 0, 0, 0, 1, 0, 0];
const AMP: Dims = [0, 0, 0, 0, 0, 1, 0];
const CD: Dims = [0, 0, 0, 0, 0, 0, 1];
const NONE: Dims = [0; 7];
const PA: Dims = [-1, 1, -2, 0, 0, 0, 0];
const NEWTON: Dims = [1, 1, -2, 0, 0, 0, 0];
const JOULE: Dims = [2, 1, -2, 0, 0, 0, 0];
const WATT: Dims = [2, 1, -3, 0, 0, 0, 0];
const HZ: Dims = [0, 0, -1, 0, 0, 0, 0];
const M3: Dims = [3, 0, 0, 0, 0, 0, 0];

fn named(name: &str) -> Option<Named> {
    let n = |scale: f64, dims: Dims, prefixable: bool| {
        Some(Named {
            scale,
            dims,
            prefixable,
        })
    };
    match name {
        "m" | "meter" | "meters" | "metre" | "metres" => n(1.0, M, true),
        "g" | "gram" | "grams" | "gramme" | "grammes" => n(1e-3, KG, true),
        "s" | "sec" | "second" | "seconds" => n(1.0, S, true),
        "min" | "minute" | "minutes" => n(60.0, S, false),
        "h" | "hr" | "hour" | "hours" => n(3600.0, S, false),
        "d" | "day" | "days" => n(86400.0, S, false),
        "K" | "kelvin" | "kelvins" | "degK" | "deg_K" | "degree_K" | "degrees_K" => n(1.0, K, true),
        "mol" | "mole" | "moles" => n(1.0, MOL, true),
        "A" | "ampere" | "amperes" => n(1.0, AMP, true),
        "cd" | "candela" => n(1.0, CD, true),
        "Pa" | "pascal" | "pascals" => n(1.0, PA, true),
        "N" | "newton" | "newtons" => n(1.0, NEWTON, true),
        "J" | "joule" | "joules" => n(1.0, JOULE, true),
        "W" | "watt" | "watts" => n(1.0, WATT, true),
        "Hz" | "hertz" => n(1.0, HZ, true),
        "bar" | "bars" => n(1e5, PA, true),
        "L" | "l" | "liter" | "liters" | "litre" | "litres" => n(1e-3, M3, true),
        "percent" | "%" => n(1e-2, NONE, false),
        "ppm" => n(1e-6, NONE, false),
        "ppb" => n(1e-9, NONE, false),
        _ => None,
    }
}

/// Temperatures with an offset: (scale, offset) to kelvin.
fn affine_temperature(name: &str) -> Option<(f64, f64)> {
    match name {
        "degC" | "deg_C" | "degree_C" | "degrees_C" | "degree_Celsius" | "degrees_Celsius"
        | "celsius" | "Celsius" => Some((1.0, 273.15)),
        "degF" | "deg_F" | "degree_F" | "degrees_F" | "degree_Fahrenheit"
        | "degrees_Fahrenheit" | "fahrenheit" | "Fahrenheit" => {
            Some((5.0 / 9.0, 459.67 * 5.0 / 9.0))
        }
        _ => None,
    }
}

const PREFIXES: [(&str, f64); 21] = [
    ("da", 1e1),
    ("Y", 1e24),
    ("Z", 1e21),
    ("E", 1e18),
    ("P", 1e15),
    ("T", 1e12),
    ("G", 1e9),
    ("M", 1e6),
    ("k", 1e3),
    ("h", 1e2),
    ("d", 1e-1),
    ("c", 1e-2),
    ("m", 1e-3),
    ("u", 1e-6),
    ("µ", 1e-6),
    ("n", 1e-9),
    ("p", 1e-12),
    ("f", 1e-15),
    ("a", 1e-18),
    ("z", 1e-21),
    ("y", 1e-24),
];

const WORD_PREFIXES: [(&str, f64); 8] = [
    ("mega", 1e6),
    ("kilo", 1e3),
    ("hecto", 1e2),
    ("deca", 1e1),
    ("deci", 1e-1),
    ("centi", 1e-2),
    ("milli", 1e-3),
    ("micro", 1e-6),
];

/// A name with an optional SI prefix.
fn prefixed(name: &str) -> Option<(f64, Dims)> {
    if let Some(u) = named(name) {
        return Some((u.scale, u.dims));
    }
    for (p, f) in WORD_PREFIXES.iter().chain(PREFIXES.iter()) {
        if let Some(rest) = name.strip_prefix(p)
            && let Some(u) = named(rest)
            && u.prefixable
            // Symbol prefixes go with symbols, word prefixes with words.
            && (p.len() > 2) == (rest.len() > 3)
        {
            return Some((f * u.scale, u.dims));
        }
    }
    None
}

/// Parse a unit string of the supported subset (see the module doc).
fn parse_unit(s: &str) -> Result<Unit, UnitError> {
    if let Some((scale, offset)) = affine_temperature(s.trim()) {
        return Ok(Unit {
            scale,
            offset,
            dims: K,
        });
    }
    let mut unit = Unit {
        scale: 1.0,
        offset: 0.0,
        dims: NONE,
    };
    let bytes: Vec<char> = s.chars().collect();
    let mut i = 0;
    let mut divide = false;
    let mut any = false;
    while i < bytes.len() {
        let c = bytes[i];
        if c == ' ' || c == '.' || c == '*' || c == '·' {
            i += 1;
            continue;
        }
        if c == '/' {
            if divide {
                return err(format!("{s:?}: two '/' in a row"));
            }
            divide = true;
            i += 1;
            continue;
        }
        // A number factor.
        if c.is_ascii_digit() {
            let start = i;
            while i < bytes.len()
                && (bytes[i].is_ascii_digit()
                    || bytes[i] == 'e'
                    || bytes[i] == 'E'
                    || (bytes[i] == '.' && i + 1 < bytes.len() && bytes[i + 1].is_ascii_digit())
                    || ((bytes[i] == '-' || bytes[i] == '+') && matches!(bytes[i - 1], 'e' | 'E')))
            {
                i += 1;
            }
            let text: String = bytes[start..i].iter().collect();
            let v: f64 = text
                .parse()
                .map_err(|_| UnitError(format!("{s:?}: cannot parse the number {text:?}")))?;
            if v == 0.0 || !v.is_finite() {
                return err(format!(
                    "{s:?}: factor {text} is not a positive finite number"
                ));
            }
            unit.scale = if divide {
                unit.scale / v
            } else {
                unit.scale * v
            };
            divide = false;
            any = true;
            continue;
        }
        // A name, then an optional exponent.
        let start = i;
        while i < bytes.len() && (bytes[i].is_alphabetic() || bytes[i] == '_' || bytes[i] == '%') {
            i += 1;
        }
        if i == start {
            return err(format!("{s:?}: unexpected {c:?}"));
        }
        let name: String = bytes[start..i].iter().collect();
        if affine_temperature(&name).is_some() {
            return err(format!(
                "{s:?}: {name} has an offset and can only stand alone"
            ));
        }
        let (scale, dims) =
            prefixed(&name).ok_or_else(|| UnitError(format!("{s:?}: unknown unit {name:?}")))?;
        let mut j = i;
        if j < bytes.len() && bytes[j] == '^' {
            j += 1;
        } else if j + 1 < bytes.len() && bytes[j] == '*' && bytes[j + 1] == '*' {
            j += 2;
        }
        let exp_start = j;
        if j < bytes.len() && (bytes[j] == '-' || bytes[j] == '+') {
            j += 1;
        }
        while j < bytes.len() && bytes[j].is_ascii_digit() {
            j += 1;
        }
        let mut exp: i32 = 1;
        if j > exp_start {
            let text: String = bytes[exp_start..j].iter().collect();
            exp = text
                .parse()
                .map_err(|_| UnitError(format!("{s:?}: bad exponent {text:?}")))?;
            i = j;
        } else if j != i {
            return err(format!("{s:?}: '^' without an exponent"));
        }
        if divide {
            exp = -exp;
        }
        if exp.abs() > 16 {
            return err(format!("{s:?}: exponent {exp} is out of range"));
        }
        unit.scale *= scale.powi(exp);
        for (d, p) in unit.dims.iter_mut().zip(dims) {
            *d = d
                .checked_add((p as i32 * exp) as i8)
                .ok_or_else(|| UnitError(format!("{s:?}: exponent overflow")))?;
        }
        divide = false;
        any = true;
    }
    if divide {
        return err(format!("{s:?}: ends with '/'"));
    }
    if !any {
        return err(format!("{s:?}: no unit"));
    }
    Ok(unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conv(from: &str, to: &str) -> Affine {
        conversion(from, None, to, None).unwrap()
    }

    fn close(x: f64, y: f64) -> bool {
        (x - y).abs() <= 1e-12 * y.abs().max(1.0)
    }

    #[test]
    fn identical_strings_are_identity() {
        assert!(conv("degrees_north", "degrees_north").is_identity());
        assert!(conv(" kg  m-2 s-1", "kg m-2 s-1").is_identity());
        assert!(conv("days since 2000-01-01", "days since 2000-01-01").is_identity());
    }

    #[test]
    fn temperatures() {
        let c = conv("degC", "K");
        assert!(close(c.apply(0.0), 273.15) && close(c.apply(-273.15), 0.0));
        let f = conv("degF", "K");
        assert!(close(f.apply(32.0), 273.15));
        assert!(close(f.apply(212.0), 373.15));
        let k = conv("K", "degrees_Celsius");
        assert!(close(k.apply(300.0), 26.85));
        let fc = conv("degF", "degC");
        assert!(close(fc.apply(-40.0), -40.0));
        assert!(conversion("degC m-1", None, "K m-1", None).is_err());
    }

    #[test]
    fn scaled_units() {
        assert_eq!(conv("km", "m"), Affine { a: 1000.0, b: 0.0 });
        assert_eq!(conv("hPa", "Pa").a, 100.0);
        assert!(close(conv("mm day-1", "m s-1").a, 1e-3 / 86400.0));
        assert!(close(conv("g/kg", "1").a, 1e-3));
        assert!(close(conv("percent", "1").a, 0.01));
        assert!(close(conv("1", "%").a, 100.0));
        assert!(close(conv("m^2", "cm**2").a, 1e4));
        assert!(close(conv("kilometre", "m").a, 1000.0));
        assert!(close(conv("min", "s").a, 60.0));
        assert!(close(conv("h", "min").a, 60.0));
        assert!(close(conv("mbar", "hPa").a, 1.0));
        assert!(close(conv("1e-3 kg kg-1", "g kg-1").a, 1.0));
        let e = conversion("m", None, "s", None).unwrap_err().0;
        assert!(e.contains("incompatible"), "{e}");
        assert!(conversion("furlongs", None, "m", None).is_err());
        assert!(conversion("m/", None, "m", None).is_err());
        assert!(conversion("(m)", None, "m", None).is_err());
    }

    #[test]
    fn reference_times() {
        let c = conv("hours since 2000-01-02", "days since 2000-01-01");
        assert!(close(c.a, 1.0 / 24.0) && close(c.b, 1.0));
        let c = conv(
            "seconds since 1970-01-01T00:00:00Z",
            "days since 1970-01-02",
        );
        assert!(close(c.apply(86400.0), 0.0));
        let c = conv(
            "days since 2000-01-01 06:00 +06:00",
            "days since 2000-01-01",
        );
        assert!(close(c.b, 0.0));
        let noleap = conversion(
            "days since 2001-01-01",
            Some("noleap"),
            "days since 2000-01-01",
            Some("365_day"),
        )
        .unwrap();
        assert_eq!(noleap.b, 365.0);
        let std = conv("days since 2001-01-01", "days since 2000-01-01");
        assert_eq!(std.b, 366.0);
        let d360 = conversion(
            "days since 2000-03-01",
            Some("360_day"),
            "days since 2000-01-01",
            Some("360_day"),
        )
        .unwrap();
        assert_eq!(d360.b, 60.0);
        // The Julian/Gregorian switch: 1582-10-04 is followed by 10-15.
        assert_eq!(
            conv("days since 1582-10-15", "days since 1582-10-04").b,
            1.0
        );
        let pg = conversion(
            "days since 1582-10-15",
            Some("proleptic_gregorian"),
            "days since 1582-10-04",
            Some("proleptic_gregorian"),
        )
        .unwrap();
        assert_eq!(pg.b, 11.0);
        assert!(conv("days since 1582-10-15", "days since 1582-10-15").is_identity());
        let e = conversion(
            "days since 2000-01-01",
            Some("noleap"),
            "days since 2000-01-01",
            None,
        )
        .unwrap_err();
        assert!(e.0.contains("calendars"), "{e}");
        assert!(conv_err("months since 2000-01-01", "days since 2000-01-01").contains("months"));
        assert!(conv_err("days since 2000-02-30", "days since 2000-01-01").contains("not a date"));
        assert!(conv_err("days since 1582-10-10", "days since 2000-01-01").contains("skips"));
        assert!(conv_err("days since 2000-01-01", "K").contains("reference time"));
        assert!(
            conversion(
                "days since 2001-02-29",
                Some("noleap"),
                "days since 2000-01-01",
                Some("noleap")
            )
            .is_err()
        );
    }

    fn conv_err(from: &str, to: &str) -> String {
        conversion(from, None, to, None).unwrap_err().0
    }

    #[test]
    fn julian_day_numbers() {
        // Known JDNs: 2000-01-01 (Gregorian) = 2451545; 1582-10-04 Julian
        // = 2299160 and 1582-10-15 Gregorian = 2299161.
        assert_eq!(jdn(2000, 1, 1, true), 2451545);
        assert_eq!(jdn(1582, 10, 4, false), 2299160);
        assert_eq!(jdn(1582, 10, 15, true), 2299161);
    }
}
