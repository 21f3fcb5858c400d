//! A [`Series`] as an NcML joinExisting aggregation (netCDF-Java's NcML
//! 2.2), which slabfs, netCDF-Java, THREDDS and xncml read.
//!
//! Every member is listed in series order with its `ncoords`, so a
//! reader knows the joined length without opening the members (slabfs
//! loads the NcML from it alone). When some member's coordinate had to be
//! put on the first member's units, every member also carries its
//! converted values as `coordValue` (netCDF-Java takes the joined
//! coordinate from them when every member has them), and the joined
//! coordinate keeps the first member's `units`.

use std::fmt::Write;
use std::path::Path;

use super::{Series, location};
use crate::dtype::{DataType, NumericKind};

/// The NcML namespace.
const NS: &str = "http://www.unidata.ucar.edu/namespaces/netcdf/ncml-2.2";

/// A `<scan>` to write instead of the member list: the series follows its
/// directory in a mount (docs/AGGREGATION.md, "Live scans").
#[derive(Debug, Clone)]
pub struct Scan {
    /// The directory scanned.
    pub dir: std::path::PathBuf,
    pub suffix: Option<String>,
    pub regexp: Option<String>,
    pub subdirs: bool,
}

/// The NcML text of `series`, its locations relative to `dir` (the
/// directory the file is written to); `note` goes in a comment.
pub fn write(series: &Series, dir: &Path, note: &str) -> String {
    write_with(series, dir, note, None)
}

/// [`write()`], with a `<scan>` of `scan` in place of the listed members
/// when given (and `timeUnitsChange` when some member's coordinate was in
/// other units: a scan has no `coordValue`s).
pub fn write_with(series: &Series, dir: &Path, note: &str, scan: Option<&Scan>) -> String {
    let mut s = String::new();
    s.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(s, "<!-- {} -->", note.replace("--", "- -"));
    let _ = writeln!(s, "<netcdf xmlns=\"{NS}\">");
    let with_values = series.converted();
    if let Some(scan) = scan {
        let _ = writeln!(
            s,
            "  <aggregation dimName=\"{}\" type=\"joinExisting\"{}>",
            escape(&series.dim),
            if with_values {
                " timeUnitsChange=\"true\""
            } else {
                ""
            }
        );
        let _ = write!(
            s,
            "    <scan location=\"{}\"",
            escape(&location(&scan.dir, dir))
        );
        if let Some(x) = &scan.suffix {
            let _ = write!(s, " suffix=\"{}\"", escape(x));
        }
        if let Some(x) = &scan.regexp {
            let _ = write!(s, " regExp=\"{}\"", escape(x));
        }
        let _ = writeln!(s, " subdirs=\"{}\"/>", scan.subdirs);
        s.push_str("  </aggregation>\n</netcdf>\n");
        return s;
    }
    let _ = writeln!(
        s,
        "  <aggregation dimName=\"{}\" type=\"joinExisting\">",
        escape(&series.dim)
    );
    let dtype = series.coordinate.as_ref().map(|c| &c.dtype);
    for m in &series.members {
        let _ = write!(
            s,
            "    <netcdf location=\"{}\" ncoords=\"{}\"",
            escape(&location(&m.path, dir)),
            m.len
        );
        if with_values && let (Some(c), Some(d)) = (&m.coords, dtype) {
            let values: Vec<String> = c.iter().map(|&x| number(d, x)).collect();
            let _ = write!(s, " coordValue=\"{}\"", values.join(","));
        }
        s.push_str("/>\n");
    }
    s.push_str("  </aggregation>\n</netcdf>\n");
    s
}

/// `x` as the shortest text that reads back (as a double, narrowed to
/// `dtype`) as the same value.
fn number(dtype: &DataType, x: f64) -> String {
    match dtype.kind() {
        NumericKind::Int | NumericKind::UInt => format!("{}", x as i64),
        _ if *dtype == DataType::Float32 => format!("{}", x as f32),
        _ => format!("{x}"),
    }
}

/// `s` as XML attribute text.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::series::{Coordinate, Member};
    use std::path::PathBuf;

    fn series(converted: bool) -> Series {
        let m = |p: &str, c: &[f64]| Member {
            path: PathBuf::from(p),
            len: c.len() as u64,
            coords: Some(c.to_vec()),
            converted,
        };
        Series {
            dim: "time".into(),
            members: vec![m("/d/a&b.nc", &[0.0, 0.5]), m("/d/sub/c.nc", &[1.0])],
            variables: vec![],
            coordinate: Some(Coordinate {
                dtype: DataType::Float32,
                units: Some("days since 2000-01-01".into()),
                calendar: None,
            }),
            attributes: Default::default(),
        }
    }

    #[test]
    fn members_are_listed_with_their_lengths_and_escaped() {
        let x = write(&series(false), Path::new("/d"), "a -- note");
        assert!(x.contains("<!-- a - - note -->"), "{x}");
        assert!(
            x.contains(r#"<netcdf location="a&amp;b.nc" ncoords="2"/>"#),
            "{x}"
        );
        assert!(
            x.contains(r#"<netcdf location="sub/c.nc" ncoords="1"/>"#),
            "{x}"
        );
        let doc = roxmltree::Document::parse(&x).unwrap();
        assert_eq!(doc.root_element().tag_name().namespace(), Some(NS));
    }

    #[test]
    fn converted_coordinates_are_written_on_every_member() {
        let x = write(&series(true), Path::new("/d"), "");
        assert!(x.contains(r#"ncoords="2" coordValue="0,0.5"/>"#), "{x}");
        assert!(x.contains(r#"ncoords="1" coordValue="1"/>"#), "{x}");
    }
}
