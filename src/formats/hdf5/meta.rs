//! The superblock, object headers and the header messages slabfs reads,
//! decoded from bytes (HDF5 File Format Specification version 3: sections
//! II "Disk Format: Level 0", IV.A "Object Header", IV.A.2 messages).
//!
//! Each parser takes the message's bytes and returns a plain struct;
//! nothing here reads the file except [`superblock`] and
//! [`object_header`], which gather the message bytes (following
//! continuation blocks) before anything is decoded.

use std::collections::HashSet;

use super::error::{H5Result, Hdf5Error};
use super::io::{Cursor, H5File, SIGNATURE, check_checksum};

pub use super::message::{
    MSG_ATTRIBUTE, MSG_ATTRIBUTE_INFO, MSG_CONTINUATION, MSG_DATASPACE, MSG_DATATYPE, MSG_FILL,
    MSG_FILL_OLD, MSG_FILTERS, MSG_FLAG_FAIL_IF_UNKNOWN, MSG_FLAG_SHARED, MSG_LAYOUT, MSG_LINK,
    MSG_LINK_INFO, MSG_SYMBOL_TABLE,
};

/// The highest message type the format defines (0x0018, the metadata
/// cache image); HDF5 calls every type above it unknown (`H5O_UNKNOWN_ID`).
const MSG_LAST_KNOWN: u16 = 0x0018;
/// The "bogus" message type HDF5 defines for its tests only: release
/// builds have no class for it, so it is unknown to them.
const MSG_BOGUS: u16 = 0x0009;

/// The HDF5 limit on a dataspace's rank (`H5S_MAX_RANK`).
const MAX_RANK: usize = 32;
/// More object header chunks than any writer produces (each holds many
/// messages): a cycle or corruption.
const MAX_HEADER_CHUNKS: usize = 4096;

/// What the superblock says.
#[derive(Debug, Clone)]
pub struct Superblock {
    pub version: u8,
    /// Address of the root group's object header.
    pub root: u64,
    /// Address of the superblock extension (versions 2 and 3), if any.
    pub extension: Option<u64>,
}

/// Read the superblock at `base` (where the signature is) and return the
/// file's geometry and the root group's address.
pub fn superblock(
    file: std::sync::Arc<dyn crate::storage::ReadAt>,
    base: u64,
    len: u64,
) -> H5Result<(H5File, Superblock)> {
    let mut f = H5File {
        file,
        base,
        len,
        sizeof_addr: 8,
        sizeof_len: 8,
        shared: Default::default(),
    };
    let what = "HDF5 superblock";
    // The largest superblock (version 1 with 8-byte fields) is under 128
    // bytes; a smaller file is read whole and the cursor finds the end.
    let avail = len.saturating_sub(base).min(128);
    let head = f.read(0, avail, what)?;
    let mut c = f.cursor(&head, what);
    if c.bytes(8)? != SIGNATURE {
        return Err(Hdf5Error::NoSignature);
    }
    let version = c.u8()?;
    let sizes = |a: u8, l: u8| -> H5Result<()> {
        for (name, s) in [("size of offsets", a), ("size of lengths", l)] {
            if ![2, 4, 8].contains(&s) {
                return Err(Hdf5Error::unsupported(what, format!("{name} of {s} bytes")));
            }
        }
        Ok(())
    };
    let mut extension = None;
    let root = match version {
        0 | 1 => {
            c.skip(4)?; // free-space, root symbol table, reserved, shared header versions
            let (a, l) = (c.u8()?, c.u8()?);
            sizes(a, l)?;
            (f.sizeof_addr, f.sizeof_len) = (a, l);
            c.sizeof_addr = a;
            c.sizeof_len = l;
            c.skip(1 + 2 + 2 + 4)?; // reserved, group leaf K, internal K, flags
            if version == 1 {
                c.skip(4)?; // indexed storage K, reserved
            }
            c.skip(4 * a as usize)?; // base, free-space info, end of file, driver info
            // The root group's symbol table entry: link name offset (a
            // length), then its object header address.
            c.length()?;
            c.addr()?
        }
        2 | 3 => {
            let (a, l) = (c.u8()?, c.u8()?);
            sizes(a, l)?;
            (f.sizeof_addr, f.sizeof_len) = (a, l);
            c.sizeof_addr = a;
            c.sizeof_len = l;
            c.skip(1 + a as usize)?; // flags, base
            extension = Some(c.addr()?);
            c.addr()?; // end of file
            let root = c.addr()?;
            if c.remaining() < 4 {
                return Err(Hdf5Error::Truncated {
                    what: what.to_string(),
                    needed: c.pos as u64 + 4,
                    have: head.len() as u64,
                });
            }
            check_checksum(&head[..c.pos + 4], what)?;
            root
        }
        v => {
            return Err(Hdf5Error::unsupported(what, format!("version {v}")));
        }
    };
    if f.undefined(root) {
        return Err(Hdf5Error::corrupt(what, "no root group address"));
    }
    let extension = extension.filter(|&a| !f.undefined(a));
    Ok((
        f,
        Superblock {
            version,
            root,
            extension,
        },
    ))
}

/// One header message, its bytes copied out of the header.
#[derive(Debug, Clone)]
pub struct Message {
    pub kind: u16,
    pub flags: u8,
    pub data: Vec<u8>,
}

/// All messages of the object header at `addr`, continuation blocks
/// followed (each at most once).
pub fn object_header(f: &H5File, addr: u64, what: &str) -> H5Result<Vec<Message>> {
    let what = format!("{what}: object header at {addr:#x}");
    let first = f.read(addr, 1, &what)?;
    let mut messages = Vec::new();
    let mut pending: Vec<(u64, u64)> = Vec::new();
    let mut seen = HashSet::new();
    // The version 2 header's flags, which its continuation blocks need
    // too; `None` for version 1.
    let v2_flags = if first[0] == b'O' {
        // "OHDR", version, flags, then optional fields whose presence the
        // flags tell.
        let pre = f.read(addr, 6, &what)?;
        let mut c = f.cursor(&pre, &what);
        c.signature(b"OHDR")?;
        let version = c.u8()?;
        if version != 2 {
            return Err(Hdf5Error::unsupported(
                &what,
                format!("object header version {version}"),
            ));
        }
        let flags = c.u8()?;
        let times = if flags & 0x20 != 0 { 16 } else { 0 };
        let phase = if flags & 0x10 != 0 { 4 } else { 0 };
        let size_len = 1usize << (flags & 0x03);
        let prefix = 6 + times + phase + size_len;
        let pre = f.read(addr, prefix as u64, &what)?;
        let mut c = f.cursor(&pre, &what);
        c.skip(6 + times + phase)?;
        let chunk0 = c.uint(size_len)?;
        let total = (prefix as u64)
            .checked_add(chunk0)
            .and_then(|n| n.checked_add(4))
            .ok_or_else(|| Hdf5Error::corrupt(&what, "chunk size overflows"))?;
        let buf = f.read(addr, total, &what)?;
        check_checksum(&buf, &what)?;
        let body = &buf[prefix..buf.len() - 4];
        v2_messages(f, body, flags, &what, &mut messages, &mut pending)?;
        Some(flags)
    } else {
        let pre = f.read(addr, 16, &what)?;
        let mut c = f.cursor(&pre, &what);
        let version = c.u8()?;
        if version != 1 {
            return Err(Hdf5Error::unsupported(
                &what,
                format!("object header version {version}"),
            ));
        }
        c.skip(1 + 2 + 4)?; // reserved, number of messages, reference count
        let size = c.u32()? as u64;
        let body = f.read(addr.saturating_add(16), size, &what)?;
        v1_messages(f, &body, &what, &mut messages, &mut pending)?;
        None
    };
    let mut chunks = 1;
    while let Some((a, n)) = pending.pop() {
        chunks += 1;
        if chunks > MAX_HEADER_CHUNKS || !seen.insert(a) {
            return Err(Hdf5Error::corrupt(
                &what,
                "continuation blocks form a cycle or are too many",
            ));
        }
        let cw = format!("{what}: continuation block at {a:#x}");
        let buf = f.read(a, n, &cw)?;
        match v2_flags {
            Some(flags) => {
                check_checksum(&buf, &cw)?;
                f.cursor(&buf, &cw).signature(b"OCHK")?;
                let body = &buf[4..buf.len() - 4];
                v2_messages(f, body, flags, &cw, &mut messages, &mut pending)?;
            }
            None => v1_messages(f, &buf, &cw, &mut messages, &mut pending)?,
        }
    }
    Ok(messages)
}

fn push_message(
    f: &H5File,
    kind: u16,
    flags: u8,
    data: &[u8],
    what: &str,
    messages: &mut Vec<Message>,
    pending: &mut Vec<(u64, u64)>,
) -> H5Result<()> {
    check_known(kind, flags, what)?;
    if kind == MSG_CONTINUATION {
        let mut c = f.cursor(data, what);
        let (a, n) = (c.addr()?, c.length()?);
        pending.push((a, n));
    } else if kind != 0 {
        messages.push(Message {
            kind,
            flags,
            data: data.to_vec(),
        });
    }
    Ok(())
}

/// Refuse the object whose header holds a message of a type the format
/// does not define (a later library's, or HDF5's test-only "bogus" one)
/// flagged "fail if unknown always": its writer says that a reader
/// ignoring it would misread the object. HDF5 decides the same way when
/// it loads a header (`H5O__chunk_deserialize` in `H5Ocache.c`): a type
/// at or above `H5O_UNKNOWN_ID` or without a class is unknown, and it
/// fails on bit 7 always, on bit 3 only for a file opened for write. A
/// type the format defines is known here even when slabfs does not
/// decode it (a comment, a modification time: nothing it serves depends
/// on them), and unknown types without bit 7 are ignored, as HDF5 does.
fn check_known(kind: u16, flags: u8, what: &str) -> H5Result<()> {
    let unknown = kind > MSG_LAST_KNOWN || kind == MSG_BOGUS;
    if unknown && flags & MSG_FLAG_FAIL_IF_UNKNOWN != 0 {
        return Err(Hdf5Error::UnknownMessage {
            what: what.to_string(),
            kind,
        });
    }
    Ok(())
}

/// Version 1 messages: type (2), size (2), flags (1), reserved (3), data
/// padded to 8 bytes.
fn v1_messages(
    f: &H5File,
    body: &[u8],
    what: &str,
    messages: &mut Vec<Message>,
    pending: &mut Vec<(u64, u64)>,
) -> H5Result<()> {
    let mut c = f.cursor(body, what);
    while c.remaining() >= 8 {
        let kind = c.u16()?;
        let size = c.u16()? as usize;
        let flags = c.u8()?;
        c.skip(3)?;
        let data = c.bytes(size)?;
        push_message(f, kind, flags, data, what, messages, pending)?;
    }
    Ok(())
}

/// Version 2 messages: type (1), size (2), flags (1), creation order (2,
/// when the header tracks it), data. A gap shorter than a message header
/// may end the chunk.
fn v2_messages(
    f: &H5File,
    body: &[u8],
    header_flags: u8,
    what: &str,
    messages: &mut Vec<Message>,
    pending: &mut Vec<(u64, u64)>,
) -> H5Result<()> {
    let head = if header_flags & 0x04 != 0 { 6 } else { 4 };
    let mut c = f.cursor(body, what);
    while c.remaining() >= head {
        let kind = c.u8()? as u16;
        let size = c.u16()? as usize;
        let flags = c.u8()?;
        c.skip(head - 4)?;
        let data = c.bytes(size)?;
        push_message(f, kind, flags, data, what, messages, pending)?;
    }
    Ok(())
}

impl Message {
    /// This message's bytes, or those of the message it refers to when it
    /// is shared ([`shared_message`]).
    pub fn resolved(&self, f: &H5File, what: &str) -> H5Result<std::borrow::Cow<'_, [u8]>> {
        if self.flags & MSG_FLAG_SHARED == 0 {
            return Ok(std::borrow::Cow::Borrowed(&self.data));
        }
        shared_message(f, self.kind, &self.data, what).map(std::borrow::Cow::Owned)
    }
}

/// The bytes of the message of type `kind` that the shared message
/// `data` refers to (spec IV.A.2 "Shared Messages"): a message kept in
/// another object's header, as a committed datatype is (h5py's
/// `create_dataset(..., dtype=f["t"])`, netCDF-4 user-defined types).
///
/// Encodings: version 1 (type, 6 reserved bytes, a symbol table entry:
/// name offset, address) and 2 (type,
/// address) always point to an object header; version 3 says where by
/// its type, 2 for an object header, 1 for the shared object header
/// message heap (a file-wide table of messages HDF5 writes when asked to
/// with `H5Pset_shared_mesg_nindexes`): then an 8-byte heap ID in the
/// fractal heap of the index for the message's type
/// ([`super::extension`]). A message found in another header must not
/// itself be shared: HDF5 never chains them, so a chain is corruption
/// (and could loop).
pub fn shared_message(f: &H5File, kind: u16, data: &[u8], what: &str) -> H5Result<Vec<u8>> {
    let mut c = f.cursor(data, what);
    let version = c.u8()?;
    let place = c.u8()?;
    let addr = match (version, place) {
        (1, _) => {
            // 6 reserved bytes, then a symbol table entry (HDF5 1.4's
            // `H5G_obj_ent_decode`): its link name offset, then the
            // object header address.
            c.skip(6)?;
            c.length()?;
            c.addr()?
        }
        (2, _) | (3, 2) => c.addr()?,
        (3, 1) => {
            // An 8-byte fractal heap ID in the heap of the index that
            // keeps messages of this type.
            let id = c.bytes(8)?;
            let Some(heap) = f.shared.heap_for(kind) else {
                return Err(Hdf5Error::corrupt(
                    what,
                    format!(
                        "a message of type {kind:#x} in the shared message heap, \
                         and no shared message index for its type"
                    ),
                ));
            };
            let swhat = format!("{what}: shared message heap");
            return super::dense::heap_object(f, heap, id, &swhat);
        }
        (3, t) => {
            return Err(Hdf5Error::corrupt(
                what,
                format!("a shared message of type {t}"),
            ));
        }
        (v, _) => {
            return Err(Hdf5Error::unsupported(
                what,
                format!("shared message version {v}"),
            ));
        }
    };
    if f.undefined(addr) {
        return Err(Hdf5Error::corrupt(what, "a shared message with no address"));
    }
    let swhat = format!("{what}: shared message at {addr:#x}");
    let m = object_header(f, addr, &swhat)?
        .into_iter()
        .find(|m| m.kind == kind)
        .ok_or_else(|| Hdf5Error::corrupt(&swhat, format!("no message of type {kind:#x} there")))?;
    if m.flags & MSG_FLAG_SHARED != 0 {
        return Err(Hdf5Error::corrupt(
            &swhat,
            "a shared message refers to another shared message",
        ));
    }
    Ok(m.data)
}

/// A dataspace message.
#[derive(Debug, Clone, PartialEq)]
pub struct Dataspace {
    pub dims: Vec<u64>,
    /// Maximum sizes (`u64::MAX` or all-ones for unlimited), when stored.
    pub max: Option<Vec<u64>>,
    /// The null dataspace: no elements at all.
    pub null: bool,
}

impl Dataspace {
    /// Number of elements (0 for a null dataspace), `None` on overflow.
    pub fn num_elements(&self) -> Option<u64> {
        if self.null {
            return Some(0);
        }
        self.dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d))
    }
}

pub fn dataspace(f: &H5File, data: &[u8], what: &str) -> H5Result<Dataspace> {
    let mut c = f.cursor(data, what);
    let version = c.u8()?;
    let rank = c.u8()? as usize;
    let flags = c.u8()?;
    let null = match version {
        1 => {
            c.skip(5)?;
            false
        }
        2 => c.u8()? == 2,
        v => {
            return Err(Hdf5Error::unsupported(
                what,
                format!("dataspace message version {v}"),
            ));
        }
    };
    if rank > MAX_RANK {
        return Err(Hdf5Error::corrupt(what, format!("rank {rank}")));
    }
    let dims = (0..rank)
        .map(|_| c.length())
        .collect::<H5Result<Vec<_>>>()?;
    let max = if flags & 1 != 0 {
        Some(
            (0..rank)
                .map(|_| c.length())
                .collect::<H5Result<Vec<_>>>()?,
        )
    } else {
        None
    };
    Ok(Dataspace { dims, max, null })
}

/// A datatype, as far as slabfs tells types apart.
#[derive(Debug, Clone, PartialEq)]
pub enum H5Type {
    /// Fixed-point (class 0).
    Int {
        size: usize,
        signed: bool,
        big: bool,
    },
    /// Fixed-point with padding bits or of a size other than 1, 2, 4, 8
    /// bytes (up to 8): served widened ([`super::convert`]).
    PaddedInt(super::convert::PaddedInt),
    /// IEEE floating point (class 1) of 2, 4 or 8 bytes.
    Float { size: usize, big: bool },
    /// Floating point of any other layout: served converted
    /// ([`super::convert`]).
    OtherFloat(super::convert::FloatType),
    /// Fixed-length string (class 3); `pad` 0 null-terminated, 1
    /// null-padded, 2 space-padded.
    FixedString { size: usize, pad: u8 },
    /// Variable-length string (class 9, type 1): stored as a global heap
    /// reference.
    VlenString,
    /// Variable-length sequence of `base` (class 9, type 0).
    VlenSequence(Box<H5Type>),
    /// Object reference (class 7, type 0): an object header address.
    ObjectRef,
    /// Enumeration (class 8): stored as its integer `base`; `members` are
    /// (name, value in `base`'s bytes), in the type's order.
    Enum {
        base: Box<H5Type>,
        members: Vec<(String, Vec<u8>)>,
    },
    /// Any other class: its name, for the "skipped" line.
    Other { class: &'static str, size: usize },
}

impl H5Type {
    /// What the flat file cannot show about this type, if anything.
    pub fn class_name(&self) -> &'static str {
        match self {
            H5Type::Int { .. } => "integer",
            H5Type::PaddedInt(_) => "integer with padding bits",
            H5Type::Float { .. } => "floating point",
            H5Type::OtherFloat(_) => "floating point of a non-IEEE layout",
            H5Type::FixedString { .. } => "fixed-length string",
            H5Type::VlenString => "variable-length string",
            H5Type::VlenSequence(_) => "variable-length sequence",
            H5Type::ObjectRef => "object reference",
            H5Type::Enum { .. } => "enum",
            H5Type::Other { class, .. } => class,
        }
    }
}

/// The class name of an integer type HDF5 refuses to open: more than half
/// its bits unused (and wider than a byte).
pub const MOSTLY_UNUSED_INTEGER: &str = "an integer type with more than half its bits unused, \
     which HDF5 refuses to open as possibly corrupted";

/// Decode a datatype; returns it and its element size in bytes.
pub fn datatype(f: &H5File, data: &[u8], what: &str) -> H5Result<(H5Type, usize)> {
    let mut c = f.cursor(data, what);
    datatype_at(&mut c, 0)
}

fn datatype_at(c: &mut Cursor<'_>, depth: usize) -> H5Result<(H5Type, usize)> {
    if depth > 8 {
        return Err(Hdf5Error::corrupt(c.what, "datatypes nested too deep"));
    }
    let cv = c.u8()?;
    let class = cv & 0x0F;
    let bits = c.bytes(3)?;
    let (b0, b1) = (bits[0], bits[1]);
    let size = c.u32()? as usize;
    let t = match class {
        // Fixed-point; a bitfield (class 4) is read as the unsigned
        // integer of its size, as h5py reads it.
        0 | 4 => {
            let (offset, precision) = (c.u16()?, c.u16()?);
            let (signed, big) = (class == 0 && b0 & 0x08 != 0, b0 & 0x01 != 0);
            if size > 1 && 8 * size > 2 * precision as usize {
                // HDF5 2.0 refuses these ("unusually large # of unused
                // bits ... possibly corrupted file", H5Odtype.c), so h5py
                // and netCDF4-python read nothing to compare with.
                H5Type::Other {
                    class: MOSTLY_UNUSED_INTEGER,
                    size,
                }
            } else if offset != 0 || precision as usize != size * 8 || ![1, 2, 4, 8].contains(&size)
            {
                match super::convert::PaddedInt::new(
                    size,
                    signed,
                    big,
                    offset.into(),
                    precision.into(),
                ) {
                    Some(p) => H5Type::PaddedInt(p),
                    None => H5Type::Other {
                        class: if class == 0 {
                            "integer with padding bits or an unusual size"
                        } else {
                            "bitfield with padding bits or an unusual size"
                        },
                        size,
                    },
                }
            } else {
                H5Type::Int { size, signed, big }
            }
        }
        1 => {
            // Class bits (spec IV.A.2.d, H5O__dtype_decode_helper): bit 0
            // byte order, with bit 6 VAX order (version 3 on); bits 1-3 padding; bits
            // 4-5 mantissa normalisation (0 none, 1 msb set, 2 implied);
            // bits 8-15 the sign bit's position. Properties: offset,
            // precision, exponent position and size, mantissa position
            // and size, exponent bias. Only IEEE's layout of 2, 4 or 8
            // bytes is served as it is stored; any other (an
            // nbit-reduced float, 20 bits at offset 7 in HDF5's test
            // files; the x87 long double; VAX) is converted
            // ([`super::convert::FloatType`]).
            let (offset, precision) = (c.u16()?, c.u16()?);
            let (epos, esize, mpos, msize) = (c.u8()?, c.u8()?, c.u8()?, c.u8()?);
            let ebias = c.u32()?;
            let ieee = match size {
                2 => (0, 16, 10, 5, 0, 10, 15),
                4 => (0, 32, 23, 8, 0, 23, 127),
                8 => (0, 64, 52, 11, 0, 52, 1023),
                _ => (0, 0, 0, 0, 0, 0, 0),
            };
            let props = (offset, precision, epos, esize, mpos, msize, ebias);
            let norm = (b0 >> 4) & 0x03;
            // Bit 6 means VAX order only from datatype version 3 on: an
            // earlier message's bit 6 is ignored, as
            // H5O__dtype_decode_helper ignores it.
            let vax = cv >> 4 >= 3 && b0 & 0x40 != 0;
            let big = b0 & 0x01 != 0;
            if props == ieee && norm == 2 && b1 as usize == 8 * size - 1 && !vax {
                H5Type::Float { size, big }
            } else {
                use super::convert::{FloatBits, FloatOrder, FloatType, Norm};
                let order = match (vax, big) {
                    (false, false) => Some(FloatOrder::Little),
                    (false, true) => Some(FloatOrder::Big),
                    (true, true) => Some(FloatOrder::Vax),
                    (true, false) => None,
                };
                let norm = match norm {
                    0 => Some(Norm::None),
                    2 => Some(Norm::Implied),
                    _ => None,
                };
                let t = match (order, norm) {
                    (None, _) => Err("floating point of an unknown byte order"),
                    (_, None) => Err("floating point with the \"msb set\" or an unknown \
                         mantissa normalisation (HDF5 cannot convert either)"),
                    (Some(order), Some(norm)) => FloatType::new(
                        size,
                        order,
                        FloatBits {
                            precision: precision.into(),
                            offset: offset.into(),
                            sign: b1.into(),
                            epos: epos.into(),
                            esize: esize.into(),
                            ebias: ebias.into(),
                            mpos: mpos.into(),
                            msize: msize.into(),
                            norm,
                        },
                    ),
                };
                match t {
                    Ok(t) => H5Type::OtherFloat(t),
                    Err(class) => H5Type::Other { class, size },
                }
            }
        }
        2 => H5Type::Other {
            class: "time",
            size,
        },
        3 => H5Type::FixedString {
            size,
            pad: b0 & 0x0F,
        },
        5 => H5Type::Other {
            class: "opaque",
            size,
        },
        6 => H5Type::Other {
            class: "compound",
            size,
        },
        7 if b0 & 0x0F == 0 => H5Type::ObjectRef,
        7 => H5Type::Other {
            class: "region reference",
            size,
        },
        8 => enumeration(c, cv >> 4, u16::from_le_bytes([b0, b1]), size, depth)?,
        9 if b0 & 0x0F == 1 => H5Type::VlenString,
        9 => {
            let (base, _) = datatype_at(c, depth + 1)?;
            let _ = b1;
            H5Type::VlenSequence(Box::new(base))
        }
        10 => H5Type::Other {
            class: "array",
            size,
        },
        _ => H5Type::Other {
            class: "unknown class",
            size,
        },
    };
    Ok((t, size))
}

/// The properties of an enumeration of `n` members (spec IV.A.2.d, class
/// 8): its base type, then the names (NUL-terminated, padded to 8 bytes
/// before datatype version 3), then the values, `size` bytes each. An
/// enumeration over anything but a standard integer is shown as an
/// unsupported type.
fn enumeration(
    c: &mut Cursor<'_>,
    version: u8,
    n: u16,
    size: usize,
    depth: usize,
) -> H5Result<H5Type> {
    let (base, base_size) = datatype_at(c, depth + 1)?;
    if !matches!(base, H5Type::Int { .. }) || base_size != size {
        return Ok(H5Type::Other {
            class: "enum of a base type other than a standard integer",
            size,
        });
    }
    let mut names = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let rest = &c.buf[c.pos..];
        let len = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| Hdf5Error::corrupt(c.what, "an enum member name without its NUL"))?;
        let name = String::from_utf8_lossy(&rest[..len]).into_owned();
        let stored = if version < 3 {
            (len + 1).div_ceil(8) * 8
        } else {
            len + 1
        };
        c.skip(stored)?;
        names.push(name);
    }
    let members = names
        .into_iter()
        .map(|name| Ok((name, c.bytes(size)?.to_vec())))
        .collect::<H5Result<Vec<_>>>()?;
    Ok(H5Type::Enum {
        base: Box::new(base),
        members,
    })
}

/// A dataset's fill value property as HDF5 reads it from its fill value
/// message (`H5O_fill_t`): the value, and whether never-written elements
/// are filled at all.
#[derive(Debug, Clone, PartialEq)]
pub struct Fill {
    pub value: FillValue,
    /// Fill time `H5D_FILL_TIME_NEVER`: HDF5 leaves never-written
    /// elements as the reader's buffer was (netcdf-c's fill mode off).
    pub never: bool,
}

/// `H5Pfill_value_defined`'s three answers.
#[derive(Debug, Clone, PartialEq)]
pub enum FillValue {
    /// `H5D_FILL_VALUE_UNDEFINED` (`H5Pset_fill_value(.., NULL)`, or an
    /// old message of size 0).
    Undefined,
    /// `H5D_FILL_VALUE_DEFAULT`: never set; the library's zeros.
    Default,
    /// `H5D_FILL_VALUE_USER_DEFINED`: these bytes, in the dataset's
    /// stored byte order.
    User(Vec<u8>),
}

impl Default for Fill {
    /// A dataset without any fill value message: the library's defaults
    /// (value default, fill time "if set").
    fn default() -> Fill {
        Fill {
            value: FillValue::Default,
            never: false,
        }
    }
}

impl Fill {
    /// What HDF5 reads in a never-written element of `size` bytes: the
    /// user's value, zeros for the default, `None` where it leaves the
    /// reader's buffer untouched (fill time never, or an undefined value
    /// with fill time "if set": `H5D__chunk_read`'s `skip_missing_chunks`,
    /// `H5D__read` for an unallocated contiguous dataset).
    pub fn hdf5_reads(&self, size: usize) -> Option<Vec<u8>> {
        match &self.value {
            _ if self.never => None,
            FillValue::User(v) => Some(v.clone()),
            FillValue::Default => Some(vec![0; size]),
            FillValue::Undefined => None,
        }
    }

    /// The user-defined value, if any.
    pub fn user(&self) -> Option<&[u8]> {
        match &self.value {
            FillValue::User(v) => Some(v),
            _ => None,
        }
    }
}

/// Decode a fill value message of type `kind` ([`MSG_FILL`], versions 1
/// to 3, or the old [`MSG_FILL_OLD`]) as HDF5's `H5O__fill_new_decode`
/// and `H5O__fill_old_decode` do.
pub fn fill(f: &H5File, kind: u16, data: &[u8], what: &str) -> H5Result<Fill> {
    /// `H5D_FILL_TIME_NEVER`.
    const NEVER: u8 = 1;
    let mut c = f.cursor(data, what);
    let sized = |c: &mut Cursor<'_>| -> H5Result<FillValue> {
        let n = c.u32()? as usize;
        Ok(if n == 0 {
            FillValue::Default
        } else {
            FillValue::User(c.bytes(n)?.to_vec())
        })
    };
    if kind == MSG_FILL_OLD {
        // Fill time "if set"; a size of 0 is an undefined value.
        let value = match sized(&mut c)? {
            FillValue::Default => FillValue::Undefined,
            v => v,
        };
        return Ok(Fill {
            value,
            never: false,
        });
    }
    let version = c.u8()?;
    match version {
        1 | 2 => {
            c.skip(1)?; // allocation time
            let time = c.u8()?;
            let defined = c.u8()? != 0;
            let value = if defined {
                sized(&mut c)?
            } else {
                FillValue::Undefined
            };
            Ok(Fill {
                value,
                never: time == NEVER,
            })
        }
        3 => {
            let flags = c.u8()?;
            let value = if flags & 0x10 != 0 {
                FillValue::Undefined
            } else if flags & 0x20 != 0 {
                // A value of size 0 here is the default as well.
                sized(&mut c)?
            } else {
                FillValue::Default
            };
            Ok(Fill {
                value,
                never: (flags >> 2) & 0x03 == NEVER,
            })
        }
        v => Err(Hdf5Error::unsupported(
            what,
            format!("fill value message version {v}"),
        )),
    }
}

/// Where a dataset's elements are.
#[derive(Debug, Clone, PartialEq)]
pub enum Layout {
    /// Inside the object header.
    Compact(Vec<u8>),
    /// One range of the file (`addr` undefined: never written); `size`
    /// `None` where the message does not store it (versions 1 and 2: the
    /// dataset's size).
    Contiguous { addr: u64, size: Option<u64> },
    /// Chunks of `chunk` elements (rank entries; the element size
    /// dimension dropped), found through `index`.
    Chunked {
        chunk: Vec<u64>,
        element_size: u64,
        index: ChunkIndex,
        /// Edge chunks (those reaching past the dataset's extent) are
        /// stored without the filter pipeline (layout version 4 flag bit
        /// 0, set by `H5Pset_chunk_opts(H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS)`).
        partial_unfiltered: bool,
    },
    /// A virtual dataset: its mappings are object `index` of the global
    /// heap collection at `heap` (undefined: no mapping at all), decoded
    /// by [`super::vds`].
    Virtual { heap: u64, index: u32 },
}

/// How a chunked dataset finds its chunks (layout message version 3: a
/// v1 B-tree; version 4: the index type byte).
#[derive(Debug, Clone, PartialEq)]
pub enum ChunkIndex {
    BTreeV1 {
        addr: u64,
    },
    /// One chunk covering the dataset; `filtered` its stored size and
    /// filter mask when filters apply.
    Single {
        addr: u64,
        filtered: Option<(u64, u32)>,
    },
    /// Chunks stored back to back from `addr`, unfiltered.
    Implicit {
        addr: u64,
    },
    FixedArray {
        addr: u64,
    },
    ExtensibleArray {
        addr: u64,
    },
    BTreeV2 {
        addr: u64,
    },
}

pub fn layout(f: &H5File, data: &[u8], what: &str) -> H5Result<Layout> {
    let mut c = f.cursor(data, what);
    let version = c.u8()?;
    // Version 5 (HDF5 2.0) has version 4's fields; only its chunk
    // indexes store filtered sizes in fixed-width fields, which the index
    // headers describe themselves. Versions 1 and 2 are HDF5 1.4's.
    if version == 1 || version == 2 {
        return layout_v1(&mut c);
    }
    if !(3..=5).contains(&version) {
        return Err(Hdf5Error::unsupported(
            what,
            format!("data layout message version {version}"),
        ));
    }
    let class = c.u8()?;
    match class {
        0 => {
            let n = c.u16()? as usize;
            Ok(Layout::Compact(c.bytes(n)?.to_vec()))
        }
        1 => Ok(Layout::Contiguous {
            addr: c.addr()?,
            size: Some(c.length()?),
        }),
        2 if version == 3 => {
            let ndims = c.u8()? as usize;
            let addr = c.addr()?;
            let dims = (0..ndims)
                .map(|_| c.u32().map(u64::from))
                .collect::<H5Result<Vec<_>>>()?;
            chunked(dims, ChunkIndex::BTreeV1 { addr }, false, what)
        }
        2 => {
            let flags = c.u8()?;
            let ndims = c.u8()? as usize;
            let enc = c.u8()? as usize;
            if !(1..=8).contains(&enc) {
                return Err(Hdf5Error::corrupt(
                    what,
                    format!("{enc} bytes per chunk dimension"),
                ));
            }
            let dims = (0..ndims)
                .map(|_| c.uint(enc))
                .collect::<H5Result<Vec<_>>>()?;
            let kind = c.u8()?;
            let index = match kind {
                1 => {
                    // Bit 1: the single chunk is filtered, its stored size
                    // and filter mask follow.
                    let filtered = if flags & 0x02 != 0 {
                        Some((c.length()?, c.u32()?))
                    } else {
                        None
                    };
                    ChunkIndex::Single {
                        addr: c.addr()?,
                        filtered,
                    }
                }
                2 => ChunkIndex::Implicit { addr: c.addr()? },
                3 => {
                    c.skip(1)?; // max data block page bits
                    ChunkIndex::FixedArray { addr: c.addr()? }
                }
                4 => {
                    c.skip(5)?;
                    ChunkIndex::ExtensibleArray { addr: c.addr()? }
                }
                5 => {
                    c.skip(6)?;
                    ChunkIndex::BTreeV2 { addr: c.addr()? }
                }
                k => {
                    return Err(Hdf5Error::corrupt(what, format!("chunk index type {k}")));
                }
            };
            chunked(dims, index, flags & 0x01 != 0, what)
        }
        3 if version >= 4 => Ok(Layout::Virtual {
            heap: c.addr()?,
            index: c.u32()?,
        }),
        k => Err(Hdf5Error::corrupt(what, format!("layout class {k}"))),
    }
}

/// Layout message versions 1 and 2 (HDF5 1.4 and older; version 2 only
/// added the compact class's meaning), after the version byte: the
/// dimensionality, the class, 5 reserved bytes, the address (contiguous
/// and chunked only), one 4-byte size per dimension (chunked: the chunk's,
/// the last being the element size, as version 3; contiguous and compact:
/// the array's, which HDF5 ignores because they may be truncated: the
/// dataspace says), then for compact the data's size (4 bytes) and the
/// data (`H5O__layout_decode`). Chunks are indexed by a v1 B-tree.
fn layout_v1(c: &mut Cursor<'_>) -> H5Result<Layout> {
    let what = c.what;
    let ndims = c.u8()? as usize;
    if ndims == 0 || ndims > MAX_RANK + 1 {
        return Err(Hdf5Error::corrupt(
            what,
            format!("layout of {ndims} dimensions"),
        ));
    }
    let class = c.u8()?;
    c.skip(5)?;
    let addr = match class {
        1 | 2 => Some(c.addr()?),
        _ => None,
    };
    let dims = (0..ndims)
        .map(|_| c.u32().map(u64::from))
        .collect::<H5Result<Vec<_>>>()?;
    match (class, addr) {
        (0, _) => {
            let n = c.u32()? as usize;
            Ok(Layout::Compact(c.bytes(n)?.to_vec()))
        }
        (1, Some(addr)) => Ok(Layout::Contiguous { addr, size: None }),
        (2, Some(addr)) => chunked(dims, ChunkIndex::BTreeV1 { addr }, false, what),
        (k, _) => Err(Hdf5Error::corrupt(what, format!("layout class {k}"))),
    }
}

/// The chunk dimensions carry one more entry than the rank: the element
/// size.
fn chunked(
    mut dims: Vec<u64>,
    index: ChunkIndex,
    partial_unfiltered: bool,
    what: &str,
) -> H5Result<Layout> {
    let Some(element_size) = dims.pop() else {
        return Err(Hdf5Error::corrupt(what, "chunked layout of no dimensions"));
    };
    if dims.len() > MAX_RANK || dims.contains(&0) {
        return Err(Hdf5Error::corrupt(
            what,
            format!("chunk dimensions {dims:?}"),
        ));
    }
    Ok(Layout::Chunked {
        chunk: dims,
        element_size,
        index,
        partial_unfiltered,
    })
}

/// One filter of a pipeline.
#[derive(Debug, Clone, PartialEq)]
pub struct Filter {
    pub id: u32,
    pub name: String,
    /// Optional filters may have been skipped for some chunks (their bit
    /// set in the chunk's filter mask).
    pub optional: bool,
    pub params: Vec<u32>,
}

pub fn filters(f: &H5File, data: &[u8], what: &str) -> H5Result<Vec<Filter>> {
    let mut c = f.cursor(data, what);
    let version = c.u8()?;
    let n = c.u8()? as usize;
    if version == 1 {
        c.skip(6)?;
    } else if version != 2 {
        return Err(Hdf5Error::unsupported(
            what,
            format!("filter pipeline message version {version}"),
        ));
    }
    let mut out = Vec::with_capacity(n.min(32));
    for _ in 0..n {
        let id = c.u16()? as u32;
        let name_len = if version == 1 || id >= 256 {
            c.u16()? as usize
        } else {
            0
        };
        let flags = c.u16()?;
        let nvalues = c.u16()? as usize;
        let name_bytes = c.bytes(name_len)?;
        if version == 1 {
            // Names are padded to a multiple of eight bytes.
            c.skip((8 - name_len % 8) % 8)?;
        }
        let name = String::from_utf8_lossy(name_bytes)
            .trim_end_matches('\0')
            .to_string();
        let params = (0..nvalues)
            .map(|_| c.u32())
            .collect::<H5Result<Vec<_>>>()?;
        if version == 1 && nvalues % 2 == 1 {
            c.skip(4)?;
        }
        out.push(Filter {
            id,
            name,
            optional: flags & 1 != 0,
            params,
        });
    }
    Ok(out)
}

/// An attribute message, its value still raw.
#[derive(Debug, Clone)]
pub struct Attribute {
    pub name: String,
    pub dtype: H5Type,
    pub size: usize,
    pub space: Dataspace,
    pub data: Vec<u8>,
}

pub fn attribute(f: &H5File, data: &[u8], what: &str) -> H5Result<Attribute> {
    let mut c = f.cursor(data, what);
    let version = c.u8()?;
    let flags = c.u8()?;
    let name_len = c.u16()? as usize;
    let dt_len = c.u16()? as usize;
    let ds_len = c.u16()? as usize;
    if version == 3 {
        c.skip(1)?; // name character set
    } else if version != 1 && version != 2 {
        return Err(Hdf5Error::unsupported(
            what,
            format!("attribute message version {version}"),
        ));
    }
    let pad = |n: usize| if version == 1 { n.div_ceil(8) * 8 } else { n };
    let name = c.bytes(name_len)?;
    c.skip(pad(name_len) - name_len)?;
    let name = String::from_utf8_lossy(name)
        .trim_end_matches('\0')
        .to_string();
    let awhat = format!("{what}: attribute {name:?}");
    let dt = c.bytes(dt_len)?;
    c.skip(pad(dt_len) - dt_len)?;
    let ds = c.bytes(ds_len)?;
    c.skip(pad(ds_len) - ds_len)?;
    // Flag bit 0: the datatype is shared (h5py's `dtype=f["t"]`): the
    // bytes say where it is.
    let (dtype, size) = if flags & 0x01 != 0 {
        datatype(f, &shared_message(f, MSG_DATATYPE, dt, &awhat)?, &awhat)?
    } else {
        datatype(f, dt, &awhat)?
    };
    // Bit 1: the dataspace is shared (in the shared message heap).
    let space = if flags & 0x02 != 0 {
        dataspace(f, &shared_message(f, MSG_DATASPACE, ds, &awhat)?, &awhat)?
    } else {
        dataspace(f, ds, &awhat)?
    };
    let n = space
        .num_elements()
        .and_then(|n| n.checked_mul(size as u64))
        .ok_or_else(|| Hdf5Error::corrupt(&awhat, "size overflows"))?;
    let data = c.bytes(usize::try_from(n).unwrap_or(usize::MAX))?.to_vec();
    Ok(Attribute {
        name,
        dtype,
        size,
        space,
        data,
    })
}

/// Where a link points.
#[derive(Debug, Clone, PartialEq)]
pub enum LinkTarget {
    Hard(u64),
    /// Soft and external links, which slabfs does not follow.
    Other(&'static str),
}

pub fn link(f: &H5File, data: &[u8], what: &str) -> H5Result<(String, LinkTarget)> {
    let mut c = f.cursor(data, what);
    let version = c.u8()?;
    if version != 1 {
        return Err(Hdf5Error::unsupported(
            what,
            format!("link message version {version}"),
        ));
    }
    let flags = c.u8()?;
    let kind = if flags & 0x08 != 0 { c.u8()? } else { 0 };
    if flags & 0x04 != 0 {
        c.skip(8)?; // creation order
    }
    if flags & 0x10 != 0 {
        c.skip(1)?; // character set
    }
    let len_size = 1usize << (flags & 0x03);
    let n = c.uint(len_size)? as usize;
    let name = String::from_utf8_lossy(c.bytes(n)?).into_owned();
    let target = match kind {
        0 => LinkTarget::Hard(c.addr()?),
        1 => LinkTarget::Other("soft link"),
        64 => LinkTarget::Other("external link"),
        _ => LinkTarget::Other("user-defined link"),
    };
    Ok((name, target))
}

/// Link info message: the fractal heap and name index (v2 B-tree) where
/// a new-style group keeps links that did not fit in its header (dense
/// storage), `None` when it keeps none.
pub fn link_info_dense(f: &H5File, data: &[u8], what: &str) -> H5Result<Option<(u64, u64)>> {
    info_dense(f, data, 8, what)
}

/// Attribute info message: the fractal heap and name index of dense
/// attributes, if any.
pub fn attribute_info_dense(f: &H5File, data: &[u8], what: &str) -> H5Result<Option<(u64, u64)>> {
    info_dense(f, data, 2, what)
}

/// Both info messages: version, flags, the maximum creation index
/// (`index_len` bytes, when flag bit 0 says it is tracked), heap address,
/// name index address.
fn info_dense(
    f: &H5File,
    data: &[u8],
    index_len: usize,
    what: &str,
) -> H5Result<Option<(u64, u64)>> {
    let mut c = f.cursor(data, what);
    c.skip(1)?;
    let flags = c.u8()?;
    if flags & 1 != 0 {
        c.skip(index_len)?;
    }
    let heap = c.addr()?;
    let names = c.addr()?;
    Ok((!f.undefined(heap) && !f.undefined(names)).then_some((heap, names)))
}

/// Symbol table message: the v1 B-tree and local heap of an old-style
/// group.
pub fn symbol_table(f: &H5File, data: &[u8], what: &str) -> H5Result<(u64, u64)> {
    let mut c = f.cursor(data, what);
    Ok((c.addr()?, c.addr()?))
}

#[cfg(test)]
mod storage_tests {
    use super::*;
    use std::sync::Arc;

    /// Messages are decoded from bytes only: the file is never read.
    fn h5() -> H5File {
        let file = tempfile::tempfile().unwrap();
        H5File {
            file: Arc::new(file),
            base: 0,
            len: 0,
            sizeof_addr: 8,
            sizeof_len: 8,
            shared: Default::default(),
        }
    }

    /// Bit 6 of a float's class bits is VAX order only in datatype
    /// version 3 and later (H5O__dtype_decode_helper); before, it is
    /// ignored: an IEEE f32 with bits 0 and 6 set is big-endian IEEE in
    /// versions 1 and 2, VAX in version 3, and little-endian IEEE in
    /// version 1 with bit 0 clear (version 3 refuses that byte order).
    #[test]
    fn float_vax_bit_counts_from_datatype_version_3() {
        let f = h5();
        let msg = |version: u8, b0: u8| {
            let mut m = vec![(version << 4) | 1, b0, 31, 0];
            m.extend(4u32.to_le_bytes());
            m.extend(0u16.to_le_bytes()); // offset
            m.extend(32u16.to_le_bytes()); // precision
            m.extend([23, 8, 0, 23]); // epos, esize, mpos, msize
            m.extend(127u32.to_le_bytes());
            m
        };
        let ty = |version, b0| datatype(&f, &msg(version, b0), "t").unwrap().0;
        // Implied normalisation (0x20), VAX bit (0x40), big-endian (0x01).
        for version in [1, 2] {
            assert_eq!(ty(version, 0x61), H5Type::Float { size: 4, big: true });
            assert_eq!(
                ty(version, 0x60),
                H5Type::Float {
                    size: 4,
                    big: false
                }
            );
        }
        assert!(
            matches!(ty(3, 0x61), H5Type::OtherFloat(t) if t.order == super::super::convert::FloatOrder::Vax)
        );
        assert!(!matches!(
            ty(3, 0x60),
            H5Type::Float { .. } | H5Type::OtherFloat(_)
        ));
    }

    /// The fill value message's versions as `H5O__fill_new_decode` reads
    /// them: defined (user value or default), undefined, fill time never.
    #[test]
    fn fill_messages_tell_user_default_undefined_and_never() {
        let f = h5();
        let fill = |kind, b: &[u8]| super::fill(&f, kind, b, "t").unwrap();
        // Version 2: alloc time, fill time (2 = if set), defined, size, value.
        let user = fill(MSG_FILL, &[2, 2, 2, 1, 2, 0, 0, 0, 7, 1]);
        assert_eq!(user.value, FillValue::User(vec![7, 1]));
        assert_eq!(user.hdf5_reads(2), Some(vec![7, 1]));
        // Defined with size 0: HDF5's default (zeros).
        let default = fill(MSG_FILL, &[2, 2, 2, 1, 0, 0, 0, 0]);
        assert_eq!(default.value, FillValue::Default);
        assert_eq!(default.hdf5_reads(3), Some(vec![0, 0, 0]));
        // Not defined: undefined, left unfilled.
        let undefined = fill(MSG_FILL, &[2, 2, 2, 0]);
        assert_eq!(undefined.value, FillValue::Undefined);
        assert_eq!(undefined.hdf5_reads(2), None);
        // Fill time never (netcdf-c's fill mode off): unfilled whatever the value.
        let never = fill(MSG_FILL, &[2, 2, 1, 1, 0, 0, 0, 0]);
        assert!(never.never && never.hdf5_reads(2).is_none());
        // Version 3: flags (alloc time bits 0-1, fill time bits 2-3,
        // undefined 0x10, value present 0x20).
        assert_eq!(fill(MSG_FILL, &[3, 0x02 | 0x08]).value, FillValue::Default);
        assert_eq!(fill(MSG_FILL, &[3, 0x10]).value, FillValue::Undefined);
        assert!(fill(MSG_FILL, &[3, 0x04]).never);
        assert_eq!(
            fill(MSG_FILL, &[3, 0x20, 1, 0, 0, 0, 5]).value,
            FillValue::User(vec![5])
        );
        // The old message: a size of 0 is undefined.
        assert_eq!(
            fill(MSG_FILL_OLD, &[0, 0, 0, 0]).value,
            FillValue::Undefined
        );
        assert_eq!(
            fill(MSG_FILL_OLD, &[1, 0, 0, 0, 9]).value,
            FillValue::User(vec![9])
        );
        assert!(super::fill(&f, MSG_FILL, &[4, 0], "t").is_err());
    }

    /// Layout message versions 1 and 2: compact (no address; the data's
    /// size and bytes after the dimension sizes), contiguous (no size
    /// stored), chunked (the element size last); a dimensionality of 0 is
    /// corrupt, as HDF5 says.
    #[test]
    fn layout_messages_v1_and_v2() {
        let f = h5();
        let head = |v: u8, ndims: u8, class: u8| {
            let mut b = vec![v, ndims, class];
            b.extend([0; 5]);
            b
        };
        let mut compact = head(2, 2, 0);
        compact.extend(3u32.to_le_bytes());
        compact.extend(2u32.to_le_bytes());
        compact.extend(6u32.to_le_bytes());
        compact.extend([1, 2, 3, 4, 5, 6]);
        assert_eq!(
            layout(&f, &compact, "t").unwrap(),
            Layout::Compact(vec![1, 2, 3, 4, 5, 6])
        );
        let mut contiguous = head(1, 2, 1);
        contiguous.extend(0x800u64.to_le_bytes());
        contiguous.extend([10, 0, 0, 0, 4, 0, 0, 0]);
        assert_eq!(
            layout(&f, &contiguous, "t").unwrap(),
            Layout::Contiguous {
                addr: 0x800,
                size: None
            }
        );
        let mut chunked = head(1, 3, 2);
        chunked.extend(0x400u64.to_le_bytes());
        for d in [5u32, 5, 4] {
            chunked.extend(d.to_le_bytes());
        }
        assert_eq!(
            layout(&f, &chunked, "t").unwrap(),
            Layout::Chunked {
                chunk: vec![5, 5],
                element_size: 4,
                index: ChunkIndex::BTreeV1 { addr: 0x400 },
                partial_unfiltered: false,
            }
        );
        assert!(layout(&f, &head(1, 0, 1), "t").is_err());
    }
}
