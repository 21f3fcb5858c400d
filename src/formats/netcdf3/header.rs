//! The classic netCDF header, parsed from bytes: a pure function, no I/O.
//!
//! ```text
//! header    = magic numrecs dim_list gatt_list var_list
//! magic     = 'C' 'D' 'F' VERSION          1: CDF-1, 2: CDF-2, 5: CDF-5
//! numrecs   = NON_NEG | STREAMING          STREAMING = all ones
//! dim_list  = ABSENT | NC_DIMENSION nelems [dim ...]       (tag 0x0A)
//! gatt_list = ABSENT | NC_ATTRIBUTE nelems [attr ...]      (tag 0x0C)
//! var_list  = ABSENT | NC_VARIABLE  nelems [var ...]       (tag 0x0B)
//! ABSENT    = ZERO ZERO
//! dim       = name dim_length                  dim_length 0: the record dimension
//! attr      = name nc_type nelems [values] pad-to-4
//! var       = name nelems [dimid ...] vatt_list nc_type vsize begin
//! name      = nelems bytes pad-to-4            UTF-8, NUL-padded (below)
//! ```
//!
//! Tags and `nc_type` are 4 bytes. Every other integer (`numrecs`, list
//! counts, name lengths, dimension lengths, dimids, `vsize`) is 4 bytes in
//! CDF-1 and CDF-2 and 8 bytes in CDF-5; `begin` is 4 bytes in CDF-1 and
//! 8 bytes in CDF-2 and CDF-5. All big-endian.
//!
//! [`parse`] takes the bytes read so far and the file's length, so the
//! caller can read a small prefix and grow it: [`HeaderError::Short`] says
//! how many bytes the header needs at least. Counts are checked against
//! the bytes left *in the file* before anything is read or allocated, so a
//! header claiming 2^60 dimensions is an [`HeaderError::Invalid`] at once,
//! and nothing is ever preallocated from a count. The parser knows only the
//! grammar; whether the pieces fit together (dimension ids, the record
//! dimension, data offsets) is [`super::layout`]'s job.
//!
//! # Names, as netCDF-C reads them
//!
//! netCDF-C reads a name's `nelems` bytes into a NUL-terminated C string
//! (`v1h_get_NC_string` in `libsrc/v1hpg.c`, `new_NC_string` in
//! `libdispatch/dstring.c`) and from then on uses it as one: the name
//! lookups hash `strlen(cp)` bytes (`v1h_get_NC_vararray`,
//! `v1h_get_NC_dimarray`), `nc_inq_varname` copies with `strncpy`
//! (`NC3_inq_var`), attribute lookup compares `strlen` bytes
//! (`NC_findattr`). So a name is its bytes **up to the first NUL**, and
//! NULs inside the declared length are padding. netCDF-C writes such
//! names itself: renaming to a shorter name outside define mode keeps the
//! old length and pads with NULs (`set_NC_string`, from `NC3_rename_var`
//! and the attribute rename; its own `nctest` leaves the variable `yy`
//! stored as `yy\0` so). Reading does **not** check the name
//! (`NC_check_name`, the character rules, and NFC normalization apply when
//! a name is defined or looked up, never to what a header holds), so
//! [`parse`] accepts any
//! bytes: [`Dim::name`] and [`Attr::name`] are the bytes before the first
//! NUL (lossily decoded if not UTF-8), and a variable keeps its raw bytes
//! too ([`Var::raw_name`]) so that [`super::File`] can decide which names
//! the mount can show.

use serde_json::{Map, Value};

use super::types::{Format, NcType};

/// The header's record count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumRecs {
    Known(u64),
    /// All ones: "as many whole records as the file holds", written by
    /// streaming writers that cannot seek back to update the header.
    Streaming,
}

/// A dimension as declared; length 0 marks the record dimension.
#[derive(Debug, Clone, PartialEq)]
pub struct Dim {
    pub name: String,
    pub len: u64,
}

/// An attribute: its type and its values, big-endian, padding removed.
#[derive(Debug, Clone, PartialEq)]
pub struct Attr {
    pub name: String,
    pub nc_type: NcType,
    /// Number of values (characters for NC_CHAR).
    pub count: u64,
    pub data: Vec<u8>,
}

impl Attr {
    /// The values as JSON (see [`NcType::values_json`]).
    pub fn to_json(&self) -> Value {
        self.nc_type.values_json(&self.data)
    }
}

/// The attributes as a JSON object. Of two attributes with one name the
/// first wins, as in netCDF-C, whose `NC_findattr` returns the first match
/// (netCDF libraries never write duplicates, but NUL padding can make
/// two names equal).
pub fn attrs_json(attrs: &[Attr]) -> Map<String, Value> {
    let mut out = Map::new();
    for a in attrs {
        if !out.contains_key(&a.name) {
            out.insert(a.name.clone(), a.to_json());
        }
    }
    out
}

/// A name as netCDF-C reads it: the declared bytes up to the first NUL
/// (see the module doc).
pub fn c_name(raw: &[u8]) -> &[u8] {
    raw.iter().position(|&b| b == 0).map_or(raw, |n| &raw[..n])
}

/// [`c_name`] as text; bytes that are not UTF-8 become U+FFFD.
fn c_name_lossy(raw: &[u8]) -> String {
    String::from_utf8_lossy(c_name(raw)).into_owned()
}

/// A variable as declared.
#[derive(Debug, Clone, PartialEq)]
pub struct Var {
    /// The name as netCDF-C reads it: [`c_name`] of [`Var::raw_name`],
    /// lossily decoded if it is not UTF-8.
    pub name: String,
    /// The name's bytes as declared, NUL padding included.
    pub raw_name: Vec<u8>,
    /// Indices into [`Header::dims`], outermost first.
    pub dimids: Vec<u64>,
    pub attrs: Vec<Attr>,
    pub nc_type: NcType,
    /// As written; redundant, and 2^32-1 in CDF-1/2 for variables of 4 GiB
    /// or more, so readers recompute it ([`super::layout`]).
    pub vsize: u64,
    /// File offset of the variable's data (of its first record).
    pub begin: u64,
}

/// A parsed header.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    pub format: Format,
    pub numrecs: NumRecs,
    pub dims: Vec<Dim>,
    pub attrs: Vec<Attr>,
    pub vars: Vec<Var>,
    /// Bytes the header occupies; data begins at or after this offset.
    pub len: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HeaderError {
    /// The first four bytes are not `CDF\x01`, `CDF\x02` or `CDF\x05`.
    #[error("not a classic netCDF file (magic {0:?})")]
    NotNetcdf3(Vec<u8>),
    /// The bytes given end inside the header; it needs at least `needed`
    /// bytes (never more than the file's length). Read more and retry.
    #[error("header needs at least {needed} bytes, only {have} read")]
    Short { needed: u64, have: u64 },
    /// A malformed header.
    #[error("{0}")]
    Invalid(String),
}

const NC_DIMENSION: u32 = 0x0A;
const NC_VARIABLE: u32 = 0x0B;
const NC_ATTRIBUTE: u32 = 0x0C;

/// Parse the header at the start of `bytes`, a prefix of a file of
/// `file_len` bytes.
pub fn parse(bytes: &[u8], file_len: u64) -> Result<Header, HeaderError> {
    let have = (bytes.len() as u64).min(file_len);
    if have < 4 {
        if file_len < 4 {
            return Err(HeaderError::Invalid(format!(
                "{file_len} bytes: too short for a netCDF header"
            )));
        }
        return Err(HeaderError::Short { needed: 4, have });
    }
    let format = Format::from_magic(&bytes[..4])
        .ok_or_else(|| HeaderError::NotNetcdf3(bytes[..4].to_vec()))?;
    let mut c = Cursor {
        bytes: &bytes[..have as usize],
        pos: 4,
        file_len,
        format,
    };
    let numrecs = {
        let n = c.size("numrecs")?;
        let all_ones = if format == Format::Data64 {
            u64::MAX
        } else {
            u32::MAX as u64
        };
        if n == all_ones {
            NumRecs::Streaming
        } else {
            NumRecs::Known(n)
        }
    };
    let w = format.size_width();

    let mut dims = Vec::new();
    for i in 0..c.list(NC_DIMENSION, "dimension", 2 * w)? {
        let name = c_name_lossy(&c.name(&format!("dimension {i}"))?);
        let len = c.size(&format!("length of dimension {name:?}"))?;
        dims.push(Dim { name, len });
    }
    let attrs = c.attrs("global attribute")?;

    let mut vars: Vec<Var> = Vec::new();
    // name, ndims, an empty attribute list, nc_type, vsize, begin.
    let min_var = 3 * w + 8 + 4 + format.offset_width();
    for i in 0..c.list(NC_VARIABLE, "variable", min_var)? {
        let raw_name = c.name(&format!("variable {i}"))?;
        let name = c_name_lossy(&raw_name);
        let what = format!("variable {name:?}");
        let ndims = c.count(&format!("dimension ids of {what}"), w)?;
        let mut dimids = Vec::new();
        for _ in 0..ndims {
            dimids.push(c.size(&format!("dimension ids of {what}"))?);
        }
        let attrs = c.attrs(&format!("attribute of {what}"))?;
        let nc_type = c.nc_type(&what)?;
        let vsize = c.size(&format!("vsize of {what}"))?;
        let begin = c.uint(format.offset_width(), &format!("begin of {what}"))?;
        vars.push(Var {
            name,
            raw_name,
            dimids,
            attrs,
            nc_type,
            vsize,
            begin,
        });
    }
    Ok(Header {
        format,
        numrecs,
        dims,
        attrs,
        vars,
        len: c.pos,
    })
}

fn pad4(n: u64) -> u64 {
    n.div_ceil(4) * 4
}

struct Cursor<'a> {
    /// What has been read of the file (a prefix of it).
    bytes: &'a [u8],
    pos: u64,
    file_len: u64,
    format: Format,
}

impl<'a> Cursor<'a> {
    /// The next `n` bytes, describing the field as `what` if the file (or
    /// the prefix read so far) ends first.
    fn take(&mut self, n: u64, what: &str) -> Result<&'a [u8], HeaderError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.file_len);
        let Some(end) = end else {
            return Err(HeaderError::Invalid(format!(
                "{what} at byte {} needs {n} bytes but the file ends at byte {}",
                self.pos, self.file_len
            )));
        };
        if end > self.bytes.len() as u64 {
            return Err(HeaderError::Short {
                needed: end,
                have: self.bytes.len() as u64,
            });
        }
        let out = &self.bytes[self.pos as usize..end as usize];
        self.pos = end;
        Ok(out)
    }

    /// A big-endian unsigned integer of `width` (4 or 8) bytes.
    fn uint(&mut self, width: u64, what: &str) -> Result<u64, HeaderError> {
        let b = self.take(width, what)?;
        Ok(b.iter().fold(0u64, |acc, &x| (acc << 8) | x as u64))
    }

    /// A count, length or dimid: 4 bytes, or 8 in CDF-5.
    fn size(&mut self, what: &str) -> Result<u64, HeaderError> {
        self.uint(self.format.size_width(), what)
    }

    /// A count of items each at least `min_bytes` long, checked against
    /// what is left of the file.
    fn count(&mut self, what: &str, min_bytes: u64) -> Result<u64, HeaderError> {
        let at = self.pos;
        let n = self.size(what)?;
        let left = self.file_len - self.pos;
        if n > left / min_bytes.max(1) {
            return Err(HeaderError::Invalid(format!(
                "{what}: {n} claimed at byte {at}, but only {left} bytes of the file remain"
            )));
        }
        Ok(n)
    }

    /// A list header: its tag and count; `ABSENT` (or any empty list) is 0.
    fn list(&mut self, tag: u32, what: &str, min_bytes: u64) -> Result<u64, HeaderError> {
        let at = self.pos;
        let t = self.uint(4, &format!("{what} list"))? as u32;
        let n = self.count(&format!("{what}s"), min_bytes)?;
        if n > 0 && t != tag {
            return Err(HeaderError::Invalid(format!(
                "{what} list at byte {at}: tag {t:#x}, expected {tag:#x}"
            )));
        }
        Ok(n)
    }

    /// A name's declared bytes, NULs included (see the module doc).
    fn name(&mut self, what: &str) -> Result<Vec<u8>, HeaderError> {
        let len = self.count(&format!("name bytes of {what}"), 1)?;
        let raw = self.take(pad4(len), &format!("name of {what}"))?;
        Ok(raw[..len as usize].to_vec())
    }

    fn nc_type(&mut self, what: &str) -> Result<NcType, HeaderError> {
        let at = self.pos;
        let code = self.uint(4, &format!("type of {what}"))?;
        NcType::from_code(code as u32, self.format).ok_or_else(|| {
            HeaderError::Invalid(format!(
                "{what}: type code {code} at byte {at} is not a {} type",
                self.format.name()
            ))
        })
    }

    fn attrs(&mut self, what: &str) -> Result<Vec<Attr>, HeaderError> {
        let w = self.format.size_width();
        let mut attrs = Vec::new();
        for i in 0..self.list(NC_ATTRIBUTE, what, 2 * w + 4)? {
            let name = c_name_lossy(&self.name(&format!("{what} {i}"))?);
            let desc = format!("{what} {name:?}");
            let nc_type = self.nc_type(&desc)?;
            let count = self.count(&format!("values of {desc}"), nc_type.size() as u64)?;
            // count * size <= bytes left, so neither product nor padding overflows.
            let len = count * nc_type.size() as u64;
            let data = self.take(pad4(len), &format!("values of {desc}"))?[..len as usize].to_vec();
            attrs.push(Attr {
                name,
                nc_type,
                count,
                data,
            });
        }
        Ok(attrs)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A tiny header writer for tests: CDF-1/2 (4-byte sizes) or CDF-5.
    pub(crate) struct Writer {
        pub buf: Vec<u8>,
        pub format: Format,
    }

    impl Writer {
        pub fn new(format: Format, numrecs: u64) -> Writer {
            let v = match format {
                Format::Classic => 1,
                Format::Offset64 => 2,
                Format::Data64 => 5,
            };
            let mut w = Writer {
                buf: vec![b'C', b'D', b'F', v],
                format,
            };
            w.size(numrecs);
            w
        }
        pub fn u32(&mut self, x: u32) -> &mut Self {
            self.buf.extend(x.to_be_bytes());
            self
        }
        pub fn size(&mut self, x: u64) -> &mut Self {
            if self.format == Format::Data64 {
                self.buf.extend(x.to_be_bytes());
            } else {
                self.buf.extend((x as u32).to_be_bytes());
            }
            self
        }
        pub fn offset(&mut self, x: u64) -> &mut Self {
            if self.format == Format::Classic {
                self.buf.extend((x as u32).to_be_bytes());
            } else {
                self.buf.extend(x.to_be_bytes());
            }
            self
        }
        pub fn name(&mut self, s: &[u8]) -> &mut Self {
            self.size(s.len() as u64);
            self.buf.extend(s);
            self.pad()
        }
        pub fn pad(&mut self) -> &mut Self {
            while !self.buf.len().is_multiple_of(4) {
                self.buf.push(0);
            }
            self
        }
        pub fn absent(&mut self) -> &mut Self {
            self.u32(0).size(0)
        }
        pub fn dims(&mut self, dims: &[(&str, u64)]) -> &mut Self {
            if dims.is_empty() {
                return self.absent();
            }
            self.u32(NC_DIMENSION).size(dims.len() as u64);
            for (n, l) in dims {
                self.name(n.as_bytes()).size(*l);
            }
            self
        }
        /// Attributes of type NC_CHAR.
        pub fn text_attrs(&mut self, attrs: &[(&str, &str)]) -> &mut Self {
            if attrs.is_empty() {
                return self.absent();
            }
            self.u32(NC_ATTRIBUTE).size(attrs.len() as u64);
            for (n, v) in attrs {
                self.name(n.as_bytes()).u32(2).name(v.as_bytes());
            }
            self
        }
        /// Variables: name, dimids, nc_type code, begin (no attributes).
        pub fn vars(&mut self, vars: &[(&str, &[u64], u32, u64)]) -> &mut Self {
            if vars.is_empty() {
                return self.absent();
            }
            self.u32(NC_VARIABLE).size(vars.len() as u64);
            for (n, dimids, ty, begin) in vars {
                self.name(n.as_bytes()).size(dimids.len() as u64);
                for d in *dimids {
                    self.size(*d);
                }
                self.absent().u32(*ty).size(0).offset(*begin);
            }
            self
        }
    }

    #[test]
    fn parses_a_cdf5_header() {
        let mut w = Writer::new(Format::Data64, 3);
        w.dims(&[("t", 0), ("x", 5)])
            .text_attrs(&[("title", "hi")])
            .vars(&[("v", &[0, 1], 11, 1000)]);
        let h = parse(&w.buf, 2000).unwrap();
        assert_eq!(h.format, Format::Data64);
        assert_eq!(h.numrecs, NumRecs::Known(3));
        assert_eq!(
            h.dims[1],
            Dim {
                name: "x".into(),
                len: 5
            }
        );
        assert_eq!(h.attrs[0].to_json(), serde_json::json!("hi"));
        assert_eq!(h.vars[0].dimids, vec![0, 1]);
        assert_eq!(h.vars[0].nc_type, NcType::UInt64);
        assert_eq!(h.vars[0].begin, 1000);
        assert_eq!(h.len, w.buf.len() as u64);
    }

    #[test]
    fn streaming_numrecs() {
        let mut w = Writer::new(Format::Classic, u32::MAX as u64);
        w.absent().absent().absent();
        assert_eq!(parse(&w.buf, 100).unwrap().numrecs, NumRecs::Streaming);
        let mut w = Writer::new(Format::Data64, u64::MAX);
        w.absent().absent().absent();
        assert_eq!(parse(&w.buf, 100).unwrap().numrecs, NumRecs::Streaming);
        // In CDF-5 the 32-bit all-ones value is an ordinary count.
        let mut w = Writer::new(Format::Data64, u32::MAX as u64);
        w.absent().absent().absent();
        assert_eq!(
            parse(&w.buf, 100).unwrap().numrecs,
            NumRecs::Known(u32::MAX as u64)
        );
    }

    #[test]
    fn a_short_prefix_asks_for_more() {
        let mut w = Writer::new(Format::Offset64, 0);
        w.dims(&[("x", 5)]).absent().vars(&[("v", &[0], 5, 200)]);
        let full = parse(&w.buf, 400).unwrap();
        for n in 0..w.buf.len() {
            match parse(&w.buf[..n], 400) {
                Err(HeaderError::Short { needed, .. }) => {
                    assert!(needed > n as u64 && needed <= w.buf.len() as u64, "{n}")
                }
                other => panic!("prefix {n}: {other:?}"),
            }
        }
        assert_eq!(parse(&w.buf, 400).unwrap(), full);
    }

    #[test]
    fn huge_counts_are_errors_before_any_allocation() {
        let mut w = Writer::new(Format::Data64, 0);
        w.u32(NC_DIMENSION).size(1 << 60);
        let err = parse(&w.buf, 1 << 20).unwrap_err().to_string();
        assert!(
            err.contains("dimensions: 1152921504606846976 claimed"),
            "{err}"
        );

        let mut w = Writer::new(Format::Classic, 0);
        w.absent()
            .u32(NC_ATTRIBUTE)
            .size(1)
            .name(b"a")
            .u32(6)
            .size(1 << 30);
        let err = parse(&w.buf, 4096).unwrap_err().to_string();
        assert!(
            err.contains("values of global attribute \"a\": 1073741824 claimed"),
            "{err}"
        );
    }

    /// netCDF-C checks no name when reading (only `nc_def_*` and renames
    /// call `NC_check_name`), so no name makes a header malformed: names
    /// are the bytes before the first NUL, and whether a variable can be
    /// shown is the file's business ([`super::super::File`]).
    #[test]
    fn any_name_parses() {
        for (raw, name) in [
            (&b"\xffbad"[..], "\u{fffd}bad"),
            (b"a/b", "a/b"),
            (b"..", ".."),
            (b"", ""),
            (b"tab\there", "tab\there"),
            (b"yy\0", "yy"),
            (b"m\0m", "m"),
        ] {
            let mut w = Writer::new(Format::Classic, 0);
            w.u32(NC_DIMENSION).size(1).name(raw).size(3);
            w.u32(NC_ATTRIBUTE).size(1).name(raw).u32(2).name(b"t");
            w.u32(NC_VARIABLE).size(2);
            for v in [raw, raw] {
                w.name(v).size(0).absent().u32(5).size(0).offset(100);
            }
            let h = parse(&w.buf, 4096).unwrap();
            assert_eq!(h.dims[0].name, name);
            assert_eq!(h.attrs[0].name, name);
            assert_eq!((&h.vars[1].name[..], &h.vars[1].raw_name[..]), (name, raw));
        }
    }

    #[test]
    fn bad_headers() {
        let bad = |w: &Writer, want: &str| {
            let err = parse(&w.buf, 4096).unwrap_err().to_string();
            assert!(err.contains(want), "{err} does not contain {want:?}");
        };
        let mut w = Writer::new(Format::Classic, 0);
        w.u32(NC_VARIABLE).size(1).name(b"x");
        bad(&w, "tag 0xb, expected 0xa");

        let mut w = Writer::new(Format::Classic, 0);
        w.dims(&[]).absent().vars(&[("v", &[], 7, 100)]);
        bad(&w, "type code 7 at byte");

        assert!(matches!(
            parse(b"HDF\x01xxxx", 8),
            Err(HeaderError::NotNetcdf3(_))
        ));
        assert!(matches!(parse(b"CD", 2), Err(HeaderError::Invalid(_))));
        // A header running past the end of the file.
        let mut w = Writer::new(Format::Classic, 0);
        w.dims(&[("x", 5)]);
        let err = parse(&w.buf, w.buf.len() as u64).unwrap_err().to_string();
        assert!(err.contains("the file ends at byte"), "{err}");
    }
}
