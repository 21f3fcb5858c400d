//! An NcML document read into a typed model: what each element says,
//! nothing opened.
//!
//! The XML is parsed by `roxmltree` (a DOM with positions; DTDs, and so
//! entity expansion, refused) and walked once. Elements and attributes are
//! matched by local name in NcML 2.2's namespace
//! (`http://www.unidata.ucar.edu/namespaces/netcdf/ncml-2.2`) or in none
//! (hand-written files often omit it). Anything of NcML that slabfs does
//! not serve (an FMRC aggregation, `<group>`, `enhance`, a
//! `<promoteGlobalAttribute>`...) is an error naming the element and its
//! line: the file is skipped, never served with part of its meaning
//! dropped. Elements of other namespaces are ignored, as XML allows.
//!
//! The support table, element by element, is in docs/AGGREGATION.md
//! (its NcML section).

use roxmltree::{Document, Node, ParsingOptions};

use super::error::{NcmlError, Pos};
use crate::dtype::DataType;

/// NcML 2.2's namespace.
pub const NAMESPACE: &str = "http://www.unidata.ucar.edu/namespaces/netcdf/ncml-2.2";

/// More elements than this is no hand- or tool-written NcML file (a
/// joinExisting over 10^5 listed files is about 3·10^5 nodes).
const MAX_NODES: u32 = 4_000_000;

/// A `<netcdf>` element: a dataset, read from `location` or made by its
/// aggregation (or neither: everything declared here), then changed by
/// the elements inside.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Netcdf {
    pub pos: Pos,
    pub location: Option<String>,
    /// The member's length along a joinExisting dimension, when the NcML
    /// says it (so the member need not be opened to know it).
    pub ncoords: Option<u64>,
    /// The member's coordinate value(s) along the aggregation dimension.
    pub coord_value: Option<String>,
    /// A tiled aggregation's member: its place in the mosaic
    /// (`"0:89,0:179"`, parsed by the aggregation).
    pub section: Option<String>,
    /// `<explicit/>`: nothing of the referenced dataset is kept unless
    /// declared here. Else (`<readMetadata/>`, the default) all of it.
    pub explicit: bool,
    pub dimensions: Vec<Dimension>,
    pub attributes: Vec<Attribute>,
    pub variables: Vec<Variable>,
    pub removes: Vec<Remove>,
    pub aggregation: Option<Box<Aggregation>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Dimension {
    pub pos: Pos,
    pub name: String,
    pub org_name: Option<String>,
    pub length: Option<u64>,
    pub unlimited: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Attribute {
    pub pos: Pos,
    pub name: String,
    pub org_name: Option<String>,
    /// NcML's type name (`String` when absent).
    pub kind: AttrType,
    /// The `value` XML attribute: the only thing that changes an
    /// existing attribute's value (netCDF-Java's `readAtt`).
    pub value: Option<String>,
    /// The element's text (whitespace collapsed): a new attribute's value
    /// when it has no `value`.
    pub text: Option<String>,
    pub separator: Option<String>,
}

/// An attribute's type.
#[derive(Debug, Clone, PartialEq)]
pub enum AttrType {
    String,
    Number(DataType),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Variable {
    pub pos: Pos,
    pub name: String,
    pub org_name: Option<String>,
    /// `None`: the existing variable's.
    pub dtype: Option<VarType>,
    /// Dimension names; `None`: the existing variable's. `Some(vec![])`:
    /// a scalar.
    pub shape: Option<Vec<String>>,
    pub attributes: Vec<Attribute>,
    pub values: Option<Values>,
    pub removes: Vec<Remove>,
}

/// A variable's type.
#[derive(Debug, Clone, PartialEq)]
pub enum VarType {
    Number(DataType),
    /// NcML `char`: one byte per element.
    Char,
    /// NcML `String`: served as fixed-length bytes as long as the longest.
    String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Values {
    pub pos: Pos,
    /// `start` and `increment` (with `npts`, or the shape's size).
    pub start: Option<f64>,
    pub increment: Option<f64>,
    pub npts: Option<u64>,
    /// The list (the element's text), split at `separator` or whitespace.
    pub text: String,
    pub separator: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoveKind {
    Attribute,
    Variable,
    Dimension,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Remove {
    pub pos: Pos,
    pub name: String,
    pub kind: RemoveKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggType {
    JoinExisting,
    JoinNew,
    Union,
    Tiled,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Aggregation {
    pub pos: Pos,
    pub kind: AggType,
    pub dim_name: Option<String>,
    /// joinNew: the variables given the new dimension.
    pub variable_agg: Vec<String>,
    /// The listed members, in order.
    pub members: Vec<Netcdf>,
    /// Scanned members (before the listed ones, as netCDF-Java orders
    /// them: every scan's files pooled and sorted by path).
    pub scans: Vec<Scan>,
    pub time_units_change: bool,
    /// Attributes, dimensions, variables and removes written directly
    /// inside `<aggregation>`: applied to every member as it is opened.
    pub changes: Netcdf,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Scan {
    pub pos: Pos,
    pub location: String,
    pub suffix: Option<String>,
    pub reg_exp: Option<String>,
    /// Whether subdirectories are scanned too (NcML's default: yes).
    pub subdirs: bool,
    /// Files modified less than this long ago are left out (still being
    /// written).
    pub older_than: Option<std::time::Duration>,
    pub date_format_mark: Option<String>,
}

/// Parse the NcML document `text`.
pub fn parse(text: &str) -> Result<Netcdf, NcmlError> {
    let opts = ParsingOptions {
        allow_dtd: false,
        nodes_limit: MAX_NODES,
        ..ParsingOptions::default()
    };
    let doc =
        Document::parse_with_options(text, opts).map_err(|e| NcmlError::Xml(e.to_string()))?;
    let root = doc.root_element();
    let p = Parser { doc: &doc };
    if !p.is_ncml(root) || root.tag_name().name() != "netcdf" {
        return Err(NcmlError::invalid(
            p.pos(root),
            format!(
                "the root element is <{}>, not NcML's <netcdf>",
                root.tag_name().name()
            ),
        ));
    }
    p.netcdf(root, 0)
}

/// Nested `<netcdf>` elements deeper than this are refused (each level
/// is a recursion of the parser and of the build).
pub const MAX_NESTING: usize = 32;

struct Parser<'a, 'input> {
    doc: &'a Document<'input>,
}

impl<'a, 'input> Parser<'a, 'input> {
    fn pos(&self, n: Node<'_, '_>) -> Pos {
        let p = self.doc.text_pos_at(n.range().start);
        Pos {
            line: p.row,
            col: p.col,
        }
    }

    /// Whether `n` is an element of NcML (its namespace or none).
    fn is_ncml(&self, n: Node<'_, '_>) -> bool {
        n.is_element() && matches!(n.tag_name().namespace(), None | Some(NAMESPACE))
    }

    fn children<'b>(&self, n: Node<'b, 'input>) -> impl Iterator<Item = Node<'b, 'input>> {
        n.children().filter(|c| {
            c.is_element() && matches!(c.tag_name().namespace(), None | Some(NAMESPACE))
        })
    }

    /// `n`'s attributes checked against `known` (a misspelt `orgName`
    /// would otherwise silently add a variable); `unsupported` are NcML's
    /// but not served.
    fn check_attrs(
        &self,
        n: Node<'_, '_>,
        known: &[&str],
        unsupported: &[&str],
    ) -> Result<(), NcmlError> {
        for a in n.attributes() {
            if a.namespace().is_some() {
                // xmlns and other namespaces' attributes (xsi:...).
                continue;
            }
            let name = a.name();
            if unsupported.contains(&name) {
                return Err(NcmlError::Unsupported {
                    pos: self.pos(n),
                    element: format!("{} {name}=\"{}\"", n.tag_name().name(), a.value()),
                    why: String::new(),
                });
            }
            if !known.contains(&name) {
                return Err(NcmlError::invalid(
                    self.pos(n),
                    format!(
                        "<{}> has no attribute {name:?} in NcML 2.2",
                        n.tag_name().name()
                    ),
                ));
            }
        }
        Ok(())
    }

    fn required(&self, n: Node<'_, '_>, name: &str) -> Result<String, NcmlError> {
        n.attribute(name).map(str::to_string).ok_or_else(|| {
            NcmlError::invalid(
                self.pos(n),
                format!("<{}> needs {name}=\"...\"", n.tag_name().name()),
            )
        })
    }

    fn flag(&self, n: Node<'_, '_>, name: &str, default: bool) -> Result<bool, NcmlError> {
        match n.attribute(name) {
            None => Ok(default),
            Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
            Some(v) if v.eq_ignore_ascii_case("false") => Ok(false),
            Some(v) => Err(NcmlError::invalid(
                self.pos(n),
                format!("{name}=\"{v}\": true or false"),
            )),
        }
    }

    /// `enhance` only as "none": slabfs serves stored values.
    fn no_enhance(&self, n: Node<'_, '_>) -> Result<(), NcmlError> {
        match n.attribute("enhance") {
            None => Ok(()),
            Some(v) if v.eq_ignore_ascii_case("false") || v.eq_ignore_ascii_case("none") => Ok(()),
            Some(v) => Err(NcmlError::Unsupported {
                pos: self.pos(n),
                element: format!("{} enhance=\"{v}\"", n.tag_name().name()),
                why: " (slabfs serves stored values: the sidecar has scale_factor, _FillValue...)"
                    .into(),
            }),
        }
    }

    fn unsupported(&self, n: Node<'_, '_>, why: &str) -> NcmlError {
        NcmlError::Unsupported {
            pos: self.pos(n),
            element: n.tag_name().name().to_string(),
            why: if why.is_empty() {
                String::new()
            } else {
                format!(" ({why})")
            },
        }
    }

    fn netcdf(&self, n: Node<'_, '_>, depth: usize) -> Result<Netcdf, NcmlError> {
        if depth > MAX_NESTING {
            return Err(NcmlError::invalid(
                self.pos(n),
                format!("<netcdf> elements nested more than {MAX_NESTING} deep"),
            ));
        }
        self.check_attrs(
            n,
            &[
                "location",
                "id",
                "title",
                "ncoords",
                "coordValue",
                "section",
            ],
            &[
                "enhance",
                "addRecords",
                "fmrcDefinition",
                "iosp",
                "iospParam",
                "bufferSize",
                "timeUnitsChange",
                "coordValueFmrc",
            ],
        )?;
        self.no_enhance(n)?;
        let ncoords = match n.attribute("ncoords") {
            None => None,
            Some(v) => Some(v.trim().parse::<u64>().map_err(|_| {
                NcmlError::invalid(self.pos(n), format!("ncoords=\"{v}\": not a count"))
            })?),
        };
        let mut out = Netcdf {
            pos: self.pos(n),
            location: n.attribute("location").map(str::to_string),
            ncoords,
            coord_value: n.attribute("coordValue").map(str::to_string),
            section: n.attribute("section").map(str::to_string),
            ..Netcdf::default()
        };
        let mut read_metadata = false;
        for c in self.children(n) {
            match c.tag_name().name() {
                "readMetadata" => read_metadata = true,
                "explicit" => out.explicit = true,
                "dimension" => out.dimensions.push(self.dimension(c)?),
                "attribute" => out.attributes.push(self.attribute(c)?),
                "variable" => out.variables.push(self.variable(c)?),
                "remove" => out.removes.push(self.remove(c)?),
                "aggregation" => {
                    if out.aggregation.is_some() {
                        return Err(NcmlError::invalid(
                            self.pos(c),
                            "a second <aggregation> in one <netcdf>",
                        ));
                    }
                    out.aggregation = Some(Box::new(self.aggregation(c, depth)?));
                }
                "group" => {
                    return Err(
                        self.unsupported(c, "slabfs serves the root group of an NcML dataset")
                    );
                }
                _ => return Err(self.unsupported(c, "")),
            }
        }
        if read_metadata && out.explicit {
            return Err(NcmlError::invalid(
                out.pos,
                "both <readMetadata/> and <explicit/>",
            ));
        }
        Ok(out)
    }

    fn dimension(&self, n: Node<'_, '_>) -> Result<Dimension, NcmlError> {
        self.check_attrs(
            n,
            &["name", "length", "orgName", "isUnlimited", "isShared"],
            &["isVariableLength"],
        )?;
        if !self.flag(n, "isShared", true)? {
            return Err(self.unsupported(n, "isShared=\"false\""));
        }
        let length = match n.attribute("length") {
            None => None,
            Some(v) => Some(v.trim().parse::<u64>().map_err(|_| {
                NcmlError::invalid(self.pos(n), format!("length=\"{v}\": not a length"))
            })?),
        };
        Ok(Dimension {
            pos: self.pos(n),
            name: self.required(n, "name")?,
            org_name: n.attribute("orgName").map(str::to_string),
            length,
            unlimited: self.flag(n, "isUnlimited", false)?,
        })
    }

    fn attribute(&self, n: Node<'_, '_>) -> Result<Attribute, NcmlError> {
        self.check_attrs(
            n,
            &[
                "name",
                "type",
                "value",
                "separator",
                "orgName",
                "isUnsigned",
            ],
            &[],
        )?;
        let kind = match n.attribute("type") {
            None => AttrType::String,
            Some(t) => match parse_type(t) {
                Some(VarType::Number(d)) => AttrType::Number(d),
                Some(VarType::String) => AttrType::String,
                // A char attribute is text.
                Some(VarType::Char) => AttrType::String,
                None => {
                    return Err(NcmlError::invalid(
                        self.pos(n),
                        format!("type=\"{t}\": not an NcML attribute type"),
                    ));
                }
            },
        };
        let kind = match (kind, self.flag(n, "isUnsigned", false)?) {
            (AttrType::Number(d), true) => AttrType::Number(unsigned(d)),
            (k, _) => k,
        };
        let text = n
            .text()
            .filter(|_| has_text(n))
            .map(|t| t.split_whitespace().collect::<Vec<_>>().join(" "));
        Ok(Attribute {
            pos: self.pos(n),
            name: self.required(n, "name")?,
            org_name: n.attribute("orgName").map(str::to_string),
            kind,
            value: n.attribute("value").map(str::to_string),
            text,
            separator: n.attribute("separator").map(str::to_string),
        })
    }

    fn variable(&self, n: Node<'_, '_>) -> Result<Variable, NcmlError> {
        self.check_attrs(n, &["name", "type", "shape", "orgName"], &[])?;
        let dtype = match n.attribute("type") {
            None => None,
            Some(t) => Some(parse_type(t).ok_or_else(|| {
                if is_structure(t) {
                    self.unsupported(n, &format!("type=\"{t}\""))
                } else {
                    NcmlError::invalid(
                        self.pos(n),
                        format!("type=\"{t}\": not an NcML variable type"),
                    )
                }
            })?),
        };
        let mut out = Variable {
            pos: self.pos(n),
            name: self.required(n, "name")?,
            org_name: n.attribute("orgName").map(str::to_string),
            dtype,
            shape: n
                .attribute("shape")
                .map(|s| s.split_whitespace().map(str::to_string).collect()),
            attributes: Vec::new(),
            values: None,
            removes: Vec::new(),
        };
        for c in self.children(n) {
            match c.tag_name().name() {
                "attribute" => out.attributes.push(self.attribute(c)?),
                "values" => {
                    if out.values.is_some() {
                        return Err(NcmlError::invalid(self.pos(c), "a second <values>"));
                    }
                    out.values = Some(self.values(c)?);
                }
                "remove" => {
                    let r = self.remove(c)?;
                    if r.kind != RemoveKind::Attribute {
                        return Err(NcmlError::invalid(
                            r.pos,
                            "inside a <variable>, only attributes can be removed",
                        ));
                    }
                    out.removes.push(r);
                }
                "logicalSection" | "logicalSlice" | "logicalReduce" | "variable" => {
                    return Err(self.unsupported(c, ""));
                }
                _ => return Err(self.unsupported(c, "")),
            }
        }
        Ok(out)
    }

    fn values(&self, n: Node<'_, '_>) -> Result<Values, NcmlError> {
        self.check_attrs(
            n,
            &["start", "increment", "npts", "separator"],
            &["fromAttribute"],
        )?;
        let num = |name: &str| -> Result<Option<f64>, NcmlError> {
            match n.attribute(name) {
                None => Ok(None),
                Some(v) => v.trim().parse::<f64>().map(Some).map_err(|_| {
                    NcmlError::invalid(self.pos(n), format!("{name}=\"{v}\": not a number"))
                }),
            }
        };
        let npts = match n.attribute("npts") {
            None => None,
            Some(v) => Some(v.trim().parse::<u64>().map_err(|_| {
                NcmlError::invalid(self.pos(n), format!("npts=\"{v}\": not a count"))
            })?),
        };
        let out = Values {
            pos: self.pos(n),
            start: num("start")?,
            increment: num("increment")?,
            npts,
            text: n.text().unwrap_or_default().to_string(),
            separator: n.attribute("separator").map(str::to_string),
        };
        if out.start.is_some() != out.increment.is_some() {
            return Err(NcmlError::invalid(
                out.pos,
                "<values> needs both start and increment, or neither (a list)",
            ));
        }
        if out.start.is_some() && !out.text.trim().is_empty() {
            return Err(NcmlError::invalid(
                out.pos,
                "<values> has start/increment and a list",
            ));
        }
        Ok(out)
    }

    fn remove(&self, n: Node<'_, '_>) -> Result<Remove, NcmlError> {
        self.check_attrs(n, &["name", "type"], &[])?;
        let kind = match self.required(n, "type")?.as_str() {
            "attribute" => RemoveKind::Attribute,
            "variable" => RemoveKind::Variable,
            "dimension" => RemoveKind::Dimension,
            "group" => return Err(self.unsupported(n, "type=\"group\"")),
            t => {
                return Err(NcmlError::invalid(
                    self.pos(n),
                    format!("type=\"{t}\": attribute, variable or dimension"),
                ));
            }
        };
        Ok(Remove {
            pos: self.pos(n),
            name: self.required(n, "name")?,
            kind,
        })
    }

    fn aggregation(&self, n: Node<'_, '_>, depth: usize) -> Result<Aggregation, NcmlError> {
        self.check_attrs(
            n,
            &["type", "dimName", "recheckEvery", "timeUnitsChange"],
            &["fmrcDefinition"],
        )?;
        let kind = match self.required(n, "type")?.as_str() {
            "joinExisting" => AggType::JoinExisting,
            "joinNew" => AggType::JoinNew,
            "union" => AggType::Union,
            "tiled" => AggType::Tiled,
            t @ ("forecastModelRunCollection" | "forecastModelRunSingleCollection") => {
                return Err(NcmlError::Unsupported {
                    pos: self.pos(n),
                    element: format!("aggregation type=\"{t}\""),
                    why: " (FMRC: serve the files, or a joinExisting of them)".into(),
                });
            }
            t => {
                return Err(NcmlError::invalid(
                    self.pos(n),
                    format!("type=\"{t}\": not an NcML aggregation type"),
                ));
            }
        };
        let mut out = Aggregation {
            pos: self.pos(n),
            kind,
            dim_name: n.attribute("dimName").map(str::to_string),
            variable_agg: Vec::new(),
            members: Vec::new(),
            scans: Vec::new(),
            time_units_change: self.flag(n, "timeUnitsChange", false)?,
            changes: Netcdf {
                pos: self.pos(n),
                ..Netcdf::default()
            },
        };
        if out.time_units_change && kind != AggType::JoinExisting {
            return Err(NcmlError::invalid(
                out.pos,
                "timeUnitsChange is for joinExisting aggregations",
            ));
        }
        if matches!(kind, AggType::JoinExisting | AggType::JoinNew) && out.dim_name.is_none() {
            return Err(NcmlError::invalid(
                out.pos,
                "a joinExisting or joinNew aggregation needs dimName=\"...\"",
            ));
        }
        for c in self.children(n) {
            match c.tag_name().name() {
                "netcdf" => out.members.push(self.netcdf(c, depth + 1)?),
                "variableAgg" => {
                    self.check_attrs(c, &["name"], &[])?;
                    out.variable_agg.push(self.required(c, "name")?);
                }
                "scan" => out.scans.push(self.scan(c)?),
                "attribute" => out.changes.attributes.push(self.attribute(c)?),
                "dimension" => out.changes.dimensions.push(self.dimension(c)?),
                "variable" => out.changes.variables.push(self.variable(c)?),
                "remove" => out.changes.removes.push(self.remove(c)?),
                _ => return Err(self.unsupported(c, "")),
            }
        }
        Ok(out)
    }

    fn scan(&self, n: Node<'_, '_>) -> Result<Scan, NcmlError> {
        self.check_attrs(
            n,
            &[
                "location",
                "suffix",
                "regExp",
                "subdirs",
                "olderThan",
                "dateFormatMark",
                "enhance",
            ],
            &[],
        )?;
        self.no_enhance(n)?;
        let older_than = match n.attribute("olderThan") {
            None => None,
            Some(v) => Some(parse_duration(v).ok_or_else(|| {
                NcmlError::invalid(
                    self.pos(n),
                    format!("olderThan=\"{v}\": a number and a unit (\"5 min\", \"1 hour\")"),
                )
            })?),
        };
        Ok(Scan {
            pos: self.pos(n),
            location: self.required(n, "location")?,
            suffix: n.attribute("suffix").map(str::to_string),
            reg_exp: n.attribute("regExp").map(str::to_string),
            subdirs: self.flag(n, "subdirs", true)?,
            older_than,
            date_format_mark: n.attribute("dateFormatMark").map(str::to_string),
        })
    }
}

/// Whether `n` has non-blank text of its own.
fn has_text(n: Node<'_, '_>) -> bool {
    n.text().is_some_and(|t| !t.trim().is_empty())
}

/// NcML's type names (netCDF-Java's `DataType` names, any case).
pub fn parse_type(t: &str) -> Option<VarType> {
    Some(VarType::Number(match t.to_ascii_lowercase().as_str() {
        "byte" => DataType::Int8,
        "ubyte" => DataType::UInt8,
        "short" => DataType::Int16,
        "ushort" => DataType::UInt16,
        "int" => DataType::Int32,
        "uint" => DataType::UInt32,
        "long" | "int64" => DataType::Int64,
        "ulong" | "uint64" => DataType::UInt64,
        "float" => DataType::Float32,
        "double" => DataType::Float64,
        "char" => return Some(VarType::Char),
        "string" => return Some(VarType::String),
        _ => return None,
    }))
}

fn is_structure(t: &str) -> bool {
    let t = t.to_ascii_lowercase();
    matches!(t.as_str(), "structure" | "sequence" | "opaque") || t.starts_with("enum")
}

fn unsigned(d: DataType) -> DataType {
    match d {
        DataType::Int8 => DataType::UInt8,
        DataType::Int16 => DataType::UInt16,
        DataType::Int32 => DataType::UInt32,
        DataType::Int64 => DataType::UInt64,
        d => d,
    }
}

/// `"5 min"`, `"10 sec"`, `"1 hour"`, `"2 days"` (netCDF-Java's
/// `TimeDuration` units).
pub fn parse_duration(s: &str) -> Option<std::time::Duration> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (num, unit) = s.split_at(split);
    let n: f64 = num.parse().ok()?;
    let secs = match unit.trim().to_ascii_lowercase().trim_end_matches('s') {
        "sec" | "second" | "" => 1.0,
        "min" | "minute" => 60.0,
        "hour" | "hr" => 3600.0,
        "day" => 86400.0,
        "msec" | "millisecond" => 0.001,
        _ => return None,
    };
    (n.is_finite() && n >= 0.0).then(|| std::time::Duration::from_secs_f64(n * secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    const WRAP: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<netcdf xmlns="http://www.unidata.ucar.edu/namespaces/netcdf/ncml-2.2" location="a.nc">
  <attribute name="title" value="renamed"/>
  <variable name="T2" orgName="T">
    <attribute name="units" value="K"/>
    <remove name="long_name" type="attribute"/>
  </variable>
  <variable name="level" type="int" shape="level">
    <values start="0" increment="10"/>
  </variable>
  <remove name="P" type="variable"/>
</netcdf>"#;

    #[test]
    fn a_wrapper_reads_into_the_model() {
        let n = parse(WRAP).unwrap();
        assert_eq!(n.location.as_deref(), Some("a.nc"));
        assert_eq!(n.attributes[0].name, "title");
        assert_eq!(n.attributes[0].kind, AttrType::String);
        assert_eq!(n.variables[0].org_name.as_deref(), Some("T"));
        assert_eq!(n.variables[0].removes[0].name, "long_name");
        assert_eq!(n.variables[1].dtype, Some(VarType::Number(DataType::Int32)));
        assert_eq!(
            n.variables[1].values.as_ref().unwrap().increment,
            Some(10.0)
        );
        assert_eq!(n.removes[0].kind, RemoveKind::Variable);
        assert_eq!(n.removes[0].pos, Pos { line: 11, col: 3 });
    }

    #[test]
    fn fmrc_and_unknown_elements_are_refused_at_their_line() {
        let fmrc = r#"<netcdf xmlns="http://www.unidata.ucar.edu/namespaces/netcdf/ncml-2.2">
  <aggregation dimName="run" type="forecastModelRunCollection"/>
</netcdf>"#;
        let e = parse(fmrc).unwrap_err().to_string();
        assert!(
            e.contains("line 2") && e.contains("forecastModelRunCollection"),
            "{e}"
        );
        let group = "<netcdf>\n<group name=\"g\"/></netcdf>";
        let e = parse(group).unwrap_err().to_string();
        assert!(e.contains("<group>") && e.contains("line 2"), "{e}");
        let typo = r#"<netcdf><variable name="a" orgname="b"/></netcdf>"#;
        let e = parse(typo).unwrap_err().to_string();
        assert!(e.contains("orgname"), "{e}");
    }

    #[test]
    fn malformed_xml_says_where() {
        let e = parse("<netcdf>\n  <variable name=\"a\">\n</netcdf>").unwrap_err();
        let s = e.to_string();
        assert!(
            s.contains("3:") || s.contains("line 3") || s.contains("3:3"),
            "{s}"
        );
        let dtd = r#"<!DOCTYPE x [<!ENTITY a "aaaa">]><netcdf>&a;</netcdf>"#;
        assert!(parse(dtd).is_err());
        assert!(
            parse("<dataset/>")
                .unwrap_err()
                .to_string()
                .contains("<dataset>")
        );
    }

    #[test]
    fn other_namespaces_are_ignored() {
        let t = r#"<netcdf xmlns="http://www.unidata.ucar.edu/namespaces/netcdf/ncml-2.2"
  xmlns:x="urn:other"><x:note>hi</x:note><attribute name="a" type="int" value="1 2"/></netcdf>"#;
        let n = parse(t).unwrap();
        assert_eq!(n.attributes.len(), 1);
        assert_eq!(n.attributes[0].kind, AttrType::Number(DataType::Int32));
    }

    #[test]
    fn durations() {
        assert_eq!(
            parse_duration("5 min"),
            Some(std::time::Duration::from_secs(300))
        );
        assert_eq!(
            parse_duration("10 sec"),
            Some(std::time::Duration::from_secs(10))
        );
        assert_eq!(
            parse_duration("1 hour"),
            Some(std::time::Duration::from_secs(3600))
        );
        assert_eq!(parse_duration("soon"), None);
    }
}
