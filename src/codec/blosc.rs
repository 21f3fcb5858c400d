//! `blosc`: Blosc1 frames, decoded by the reference C-Blosc.
//!
//! Spec: <https://zarr-specs.readthedocs.io/en/latest/v3/codecs/blosc/index.html>;
//! numcodecs `Blosc`; frame format: c-blosc `README_CHUNK_FORMAT.rst`
//! (and `blosc/blosc.c`, which wins where they disagree).
//!
//! ```json
//! {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 4, "blocksize": 0}}
//! {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0}
//! ```
//!
//! Everything needed to decode a frame is in its 16-byte header (codec,
//! shuffle, type size, block size), so the configuration is only checked
//! for sense: a cname this build cannot decode (`snappy`) fails when the
//! array is opened rather than on every chunk. numcodecs' `shuffle: -1`
//! ("auto") writes bit-shuffle for 1-byte items and byte-shuffle otherwise,
//! which the header records like any other choice.
//!
//! # Safety of the C call
//!
//! C-Blosc trusts the header it is given, so before calling it the header
//! is checked here (`Header::parse`): format version 2, known flags,
//! `cbytes` equal to the input's length (numcodecs' own
//! `blosc_cbuffer_validate` demands the same), `nbytes` within the size the
//! chain expects, a sane block size, and for compressed frames that the
//! block-start table lies inside the frame and every block start leaves
//! room for a stream length inside it (block starts are absolute offsets
//! from the start of the frame). C-Blosc 1.21 then bounds every read by
//! `cbytes` and every write by the destination size. Frames stored
//! uncompressed ("memcpyed") are copied out here without calling C.
//!
//! Decoding calls `blosc_decompress_ctx` with one internal thread: it keeps
//! no global state, so chunks decode in parallel from many threads.

use serde_json::Value;

use super::entry::{CodecEntry, Hdf5Filter, Numcodecs, json_param};
use super::numeric::{config_int, config_object, config_str, reject_unknown_keys};
use super::{BytesToBytesCodec, Codec, CodecError, DecodedSize};

const NAME: &str = "blosc";

/// numcodecs `blosc`, Zarr v3 `blosc`, and HDF5 filter 32001 (PyTables'
/// `H5Zblosc.c`), which stores the same frames. Its seven `cd_values`
/// (netcdf-c `NCZ_blosc_codec`): `[0]`, `[1]`, `[2]` filter revision,
/// Blosc format version and type size, which netcdf-c fills in from the
/// variable (zero here, as in netcdf-c's "visible" parameters), `[3]` the chunk size in
/// bytes, which netcdf-c (and kerchunk) carry as numcodecs' `blocksize`,
/// `[4]` clevel, `[5]` shuffle (0, 1, 2), `[6]` the compressor code
/// ([`HDF5_COMPRESSORS`]).
pub const ENTRY: CodecEntry = CodecEntry {
    numcodecs: Some((
        NAME,
        Numcodecs::Bytes(|c| Ok(Box::new(Blosc::from_config(c)?))),
    )),
    v3: Some((NAME, |c| {
        Ok(Codec::BytesToBytes(Box::new(Blosc::from_config(c)?)))
    })),
    hdf5: Some(Hdf5Filter {
        id: 32001,
        to_json: hdf5_to_json,
        to_params: json_to_hdf5,
    }),
};

/// C-Blosc's compressor codes (`BLOSC_BLOSCLZ`...), the HDF5 filter's
/// `cd_values[6]`.
pub const HDF5_COMPRESSORS: [&str; 6] = ["blosclz", "lz4", "lz4hc", "snappy", "zlib", "zstd"];

/// netcdf-c's `NCZ_blosc_hdf5_to_codec`. Parameters the vector leaves out
/// take `H5Zblosc.c`'s defaults (clevel 5, byte shuffle, blosclz) where
/// netcdf-c would read past its end.
fn hdf5_to_json(p: &[u32]) -> Result<Value, CodecError> {
    if p.is_empty() {
        return Err(CodecError::config(NAME, "no HDF5 parameters"));
    }
    let code = p.get(6).copied().unwrap_or(0);
    let cname = HDF5_COMPRESSORS
        .get(code as usize)
        .ok_or_else(|| CodecError::config(NAME, format!("unknown HDF5 compressor code {code}")))?;
    Ok(serde_json::json!({
        "id": NAME,
        "clevel": p.get(4).copied().unwrap_or(5),
        "blocksize": p.get(3).copied().unwrap_or(0),
        "cname": cname,
        "shuffle": p.get(5).copied().unwrap_or(1),
    }))
}

/// netcdf-c's `NCZ_blosc_codec_to_hdf5`, absent keys taking numcodecs'
/// defaults (the JSON is a numcodecs codec). numcodecs' automatic shuffle
/// (-1) depends on the type size, which the JSON does not give: refused.
fn json_to_hdf5(c: &Value) -> Result<Vec<u32>, CodecError> {
    let cname = config_str(NAME, c, "cname")?.unwrap_or("lz4");
    let code = HDF5_COMPRESSORS
        .iter()
        .position(|n| *n == cname)
        .ok_or_else(|| CodecError::config(NAME, format!("unknown cname {cname:?}")))?;
    let shuffle = match config_int(NAME, c, "shuffle")? {
        None => 1,
        Some(s @ 0..=2) => s as u32,
        Some(s) => {
            return Err(CodecError::config(
                NAME,
                format!("shuffle {s} has no HDF5 form (0, 1 or 2)"),
            ));
        }
    };
    Ok(vec![
        0,
        0,
        0,
        json_param(NAME, c, "blocksize", Some(0))?,
        json_param(NAME, c, "clevel", Some(5))?,
        shuffle,
        code as u32,
    ])
}

/// Bytes of the Blosc1 header.
const HEADER: usize = 16;
/// The only frame format C-Blosc 1.x reads (`BLOSC_VERSION_FORMAT`).
const FORMAT_VERSION: u8 = 2;
/// Largest block C-Blosc accepts (`BLOSC_MAX_BLOCKSIZE`).
const MAX_BLOCKSIZE: usize = 715_827_542;
/// Largest buffer C-Blosc handles (`BLOSC_MAX_BUFFERSIZE`: `i32::MAX` minus
/// the header).
const MAX_BUFFERSIZE: usize = 2_147_483_631;

// Flags 0x01 (byte shuffle), 0x04 (bit shuffle) and 0x10 (streams not
// split by byte) are C-Blosc's business; only these two matter here.
const FLAG_MEMCPYED: u8 = 0x02;
/// Reserved; C-Blosc 1.x refuses frames that set it.
const FLAG_RESERVED: u8 = 0x08;

/// Compressor names and the codec numbers frames carry in flag bits 5-7.
const CODECS: [(&str, u8); 5] = [
    ("blosclz", 0),
    ("lz4", 1),
    ("lz4hc", 1),
    ("zlib", 3),
    ("zstd", 4),
];
/// Codec number 2 is Snappy, which this build of C-Blosc leaves out (as
/// numcodecs does).
const SNAPPY: u8 = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shuffle {
    NoShuffle,
    Byte,
    Bit,
    /// numcodecs `-1`: bit for 1-byte items, byte otherwise.
    Auto,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blosc {
    cname: String,
    clevel: Option<i64>,
    shuffle: Shuffle,
    typesize: Option<i64>,
    blocksize: Option<i64>,
}

impl Blosc {
    /// From a v3 configuration (string `shuffle`) or a numcodecs object
    /// (`"id": "blosc"`, integer `shuffle`).
    pub fn from_config(config: &Value) -> Result<Self, CodecError> {
        let obj = config_object(NAME, config)?;
        let v2 = obj.contains_key("id");
        if !v2 {
            reject_unknown_keys(
                NAME,
                config,
                &["cname", "clevel", "shuffle", "typesize", "blocksize"],
            )?;
        }
        let cname = config_str(NAME, config, "cname")?
            .unwrap_or("lz4")
            .to_string();
        if cname == "snappy" {
            return Err(CodecError::config(
                NAME,
                "cname \"snappy\" is not supported by this build",
            ));
        }
        if !CODECS.iter().any(|(n, _)| *n == cname) {
            return Err(CodecError::config(NAME, format!("unknown cname {cname:?}")));
        }
        let shuffle = match obj.get("shuffle") {
            None | Some(Value::Null) => Shuffle::Byte,
            Some(Value::String(s)) if !v2 => match s.as_str() {
                "noshuffle" => Shuffle::NoShuffle,
                "shuffle" => Shuffle::Byte,
                "bitshuffle" => Shuffle::Bit,
                other => {
                    return Err(CodecError::config(
                        NAME,
                        format!("unknown shuffle {other:?}"),
                    ));
                }
            },
            Some(v) if v2 => match v.as_i64() {
                Some(0) => Shuffle::NoShuffle,
                Some(1) => Shuffle::Byte,
                Some(2) => Shuffle::Bit,
                Some(-1) => Shuffle::Auto,
                _ => return Err(CodecError::config(NAME, format!("unknown shuffle {v}"))),
            },
            Some(v) => return Err(CodecError::config(NAME, format!("unknown shuffle {v}"))),
        };
        Ok(Blosc {
            cname,
            clevel: config_int(NAME, config, "clevel")?,
            shuffle,
            typesize: config_int(NAME, config, "typesize")?,
            blocksize: config_int(NAME, config, "blocksize")?,
        })
    }

    pub fn cname(&self) -> &str {
        &self.cname
    }

    pub fn shuffle(&self) -> Shuffle {
        self.shuffle
    }
}

/// A checked Blosc1 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Header {
    flags: u8,
    typesize: usize,
    nbytes: usize,
    blocksize: usize,
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

impl Header {
    /// Check everything C-Blosc would otherwise trust (see the module
    /// documentation).
    fn parse(frame: &[u8], size: DecodedSize) -> Result<Header, CodecError> {
        let bad = |d: String| CodecError::corrupt(NAME, d);
        if frame.len() < HEADER {
            return Err(bad(format!(
                "{} bytes is shorter than a Blosc header",
                frame.len()
            )));
        }
        if frame[0] != FORMAT_VERSION {
            return Err(bad(format!(
                "unsupported Blosc format version {}",
                frame[0]
            )));
        }
        let flags = frame[2];
        let typesize = frame[3] as usize;
        let nbytes = le32(frame, 4) as usize;
        let blocksize = le32(frame, 8) as usize;
        let cbytes = le32(frame, 12) as usize;
        if flags & FLAG_RESERVED != 0 {
            return Err(bad(format!("unknown flags {flags:#04x}")));
        }
        if cbytes != frame.len() {
            return Err(bad(format!(
                "header says {cbytes} bytes, the frame has {}",
                frame.len()
            )));
        }
        if nbytes > MAX_BUFFERSIZE {
            return Err(bad(format!(
                "header claims {nbytes} bytes, more than Blosc can hold"
            )));
        }
        match size {
            DecodedSize::Exact(n) if n != nbytes => {
                return Err(CodecError::WrongSize {
                    codec: NAME,
                    expected: n,
                    actual: nbytes,
                });
            }
            DecodedSize::AtMost(limit) if nbytes > limit => {
                return Err(CodecError::TooLarge { codec: NAME, limit });
            }
            _ => {}
        }
        let h = Header {
            flags,
            typesize,
            nbytes,
            blocksize,
        };
        if nbytes == 0 {
            return Ok(h);
        }
        if typesize == 0 {
            return Err(bad("type size 0".into()));
        }
        if blocksize == 0 || blocksize > nbytes || blocksize > MAX_BLOCKSIZE {
            return Err(bad(format!("block size {blocksize} for {nbytes} bytes")));
        }
        if flags & FLAG_MEMCPYED != 0 {
            if cbytes != HEADER + nbytes {
                return Err(bad(format!(
                    "uncompressed frame of {nbytes} bytes has {cbytes} bytes"
                )));
            }
            return Ok(h);
        }
        let codec = flags >> 5;
        if codec == SNAPPY {
            return Err(bad(
                "Snappy-compressed frame: not supported by this build".into()
            ));
        }
        if !CODECS.iter().any(|&(_, c)| c == codec) {
            return Err(bad(format!("unknown compressor {codec}")));
        }
        let nblocks = nbytes.div_ceil(blocksize);
        let table_end = nblocks
            .checked_mul(4)
            .and_then(|t| t.checked_add(HEADER))
            .filter(|&e| e <= cbytes)
            .ok_or_else(|| {
                bad(format!(
                    "{nblocks} block starts do not fit in {cbytes} bytes"
                ))
            })?;
        for j in 0..nblocks {
            let start = le32(frame, HEADER + 4 * j) as usize;
            // Each block begins with a 4-byte stream length.
            if start < table_end || start > cbytes - 4 {
                return Err(bad(format!(
                    "block {j} starts at {start}, outside {table_end}..{}",
                    cbytes - 4
                )));
            }
        }
        Ok(h)
    }
}

impl BytesToBytesCodec for Blosc {
    fn name(&self) -> &'static str {
        NAME
    }

    fn encoded_size(&self, _decoded_size: usize) -> Option<usize> {
        None
    }

    fn decode(&self, mut encoded: Vec<u8>, size: DecodedSize) -> Result<Vec<u8>, CodecError> {
        let h = Header::parse(&encoded, size)?;
        if h.nbytes == 0 {
            return Ok(Vec::new());
        }
        if h.flags & FLAG_MEMCPYED != 0 {
            encoded.drain(..HEADER);
            return Ok(encoded);
        }
        let mut out = Vec::new();
        out.try_reserve_exact(h.nbytes)
            .map_err(|_| CodecError::TooLarge {
                codec: NAME,
                limit: size.limit(),
            })?;
        // Zeroed, so that no byte C might skip is ever uninitialised (for a
        // large buffer the allocator hands out fresh zero pages, so this
        // costs nothing).
        out.resize(h.nbytes, 0);
        // SAFETY: `encoded` is a whole frame whose header `Header::parse`
        // checked: cbytes equals `encoded.len()`, so every read C-Blosc
        // makes (bounded by cbytes, with block starts and stream lengths
        // validated against it) stays inside `encoded`; `out` is
        // `h.nbytes` writable bytes and C-Blosc writes at most `destsize`
        // bytes. One internal thread means no thread pool and no global
        // state. Both buffers outlive the call.
        let n = unsafe {
            blosc_src::blosc_decompress_ctx(
                encoded.as_ptr().cast(),
                out.as_mut_ptr().cast(),
                out.len(),
                1,
            )
        };
        if n < 0 || n as usize != h.nbytes {
            return Err(CodecError::corrupt(
                NAME,
                format!(
                    "C-Blosc failed to decode the frame (returned {n}, expected {} bytes)",
                    h.nbytes
                ),
            ));
        }
        Ok(out)
    }

    fn decode_into(&self, encoded: &[u8], out: &mut [u8]) -> Option<Result<(), CodecError>> {
        Some(decode_frame_into(encoded, out))
    }
}

/// Decode one frame into `out`, which must be exactly its decoded size.
fn decode_frame_into(encoded: &[u8], out: &mut [u8]) -> Result<(), CodecError> {
    let h = Header::parse(encoded, DecodedSize::Exact(out.len()))?;
    if h.nbytes == 0 {
        return Ok(());
    }
    if h.flags & FLAG_MEMCPYED != 0 {
        // Header::parse checked cbytes == HEADER + nbytes == encoded.len().
        out.copy_from_slice(&encoded[HEADER..]);
        return Ok(());
    }
    // SAFETY: as in `decode`: the header was validated against the frame
    // (cbytes == encoded.len(), block starts inside it), `out` is exactly
    // `h.nbytes` initialised writable bytes and C-Blosc writes at most
    // `destsize`; one internal thread, no global state; both buffers
    // outlive the call.
    let n = unsafe {
        blosc_src::blosc_decompress_ctx(
            encoded.as_ptr().cast(),
            out.as_mut_ptr().cast(),
            out.len(),
            1,
        )
    };
    if n < 0 || n as usize != h.nbytes {
        return Err(CodecError::corrupt(
            NAME,
            format!(
                "C-Blosc failed to decode the frame (returned {n}, expected {} bytes)",
                h.nbytes
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// Compress with C-Blosc (for tests only).
    fn compress(
        data: &[u8],
        typesize: usize,
        clevel: i32,
        shuffle: i32,
        cname: &str,
        blocksize: usize,
    ) -> Vec<u8> {
        let mut out = vec![0u8; data.len() + HEADER];
        let cname = std::ffi::CString::new(cname).unwrap();
        // SAFETY: `data` is readable for `data.len()` bytes and `out` is
        // writable for `out.len()` bytes, at least `data.len()` plus
        // `BLOSC_MAX_OVERHEAD` as C-Blosc requires; `cname` is a valid C
        // string; one thread.
        let n = unsafe {
            blosc_src::blosc_compress_ctx(
                clevel,
                shuffle,
                typesize,
                data.len(),
                data.as_ptr().cast(),
                out.as_mut_ptr().cast(),
                out.len(),
                cname.as_ptr(),
                blocksize,
                1,
            )
        };
        assert!(n > 0, "compress failed: {n}");
        out.truncate(n as usize);
        out
    }

    fn sample() -> Vec<u8> {
        (0..5000u32)
            .flat_map(|i| ((i as f32 * 0.01).sin()).to_le_bytes())
            .collect()
    }

    fn codec() -> Blosc {
        Blosc::from_config(
            &json!({"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0}),
        )
        .unwrap()
    }

    #[test]
    fn every_cname_and_shuffle_round_trips() {
        let data = sample();
        for cname in ["blosclz", "lz4", "lz4hc", "zlib", "zstd"] {
            for shuffle in [0, 1, 2] {
                for blocksize in [0, 1024, 3000] {
                    let enc = compress(&data, 4, 5, shuffle, cname, blocksize);
                    let out = codec().decode(enc, DecodedSize::Exact(data.len())).unwrap();
                    assert!(out == data, "{cname} {shuffle} {blocksize}");
                }
            }
        }
    }

    #[test]
    fn memcpyed_frames() {
        let data = sample();
        let enc = compress(&data, 4, 0, 1, "lz4", 0);
        assert_ne!(enc[2] & FLAG_MEMCPYED, 0);
        assert_eq!(
            codec().decode(enc, DecodedSize::Exact(data.len())).unwrap(),
            data
        );
    }

    #[test]
    fn configs() {
        let v3 = Blosc::from_config(
            &json!({"cname": "zstd", "clevel": 3, "shuffle": "bitshuffle", "typesize": 4, "blocksize": 0}),
        )
        .unwrap();
        assert_eq!(v3.shuffle(), Shuffle::Bit);
        assert_eq!(v3.cname(), "zstd");
        let auto = Blosc::from_config(
            &json!({"id": "blosc", "cname": "blosclz", "clevel": 5, "shuffle": -1}),
        )
        .unwrap();
        assert_eq!(auto.shuffle(), Shuffle::Auto);
        for bad in [
            json!({"cname": "snappy", "clevel": 3, "shuffle": "shuffle"}),
            json!({"cname": "brotli", "clevel": 3, "shuffle": "shuffle"}),
            json!({"cname": "lz4", "clevel": 3, "shuffle": 1}),
            json!({"cname": "lz4", "clevel": 3, "shuffle": "shuffle", "extra": 0}),
            json!({"id": "blosc", "cname": "lz4", "shuffle": "shuffle"}),
            json!({"id": "blosc", "cname": "lz4", "shuffle": 3}),
        ] {
            assert!(Blosc::from_config(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn malformed_headers_are_errors() {
        let data = sample();
        let good = compress(&data, 4, 5, 1, "lz4", 4096);
        let n = data.len();
        let exact = DecodedSize::Exact(n);
        let with = |f: &dyn Fn(&mut Vec<u8>)| {
            let mut v = good.clone();
            f(&mut v);
            codec().decode(v, exact)
        };
        // Huge nbytes.
        let r = with(&|v| v[4..8].copy_from_slice(&u32::MAX.to_le_bytes()));
        assert!(matches!(r, Err(CodecError::Corrupt { .. })), "{r:?}");
        let r = codec().decode(
            {
                let mut v = good.clone();
                v[4..8].copy_from_slice(&(1u32 << 30).to_le_bytes());
                v
            },
            DecodedSize::AtMost(1 << 20),
        );
        assert!(matches!(r, Err(CodecError::TooLarge { .. })), "{r:?}");
        // nbytes different from the expected size.
        let r = with(&|v| v[4..8].copy_from_slice(&(n as u32 - 4).to_le_bytes()));
        assert!(matches!(r, Err(CodecError::WrongSize { .. })), "{r:?}");
        // cbytes mismatch, both ways, and a truncated frame.
        let r = with(&|v| {
            let l = v.len() as u32 + 1;
            v[12..16].copy_from_slice(&l.to_le_bytes())
        });
        assert!(matches!(r, Err(CodecError::Corrupt { .. })), "{r:?}");
        let r = with(&|v| v.push(0));
        assert!(matches!(r, Err(CodecError::Corrupt { .. })), "{r:?}");
        let r = with(&|v| v.truncate(v.len() - 10));
        assert!(matches!(r, Err(CodecError::Corrupt { .. })), "{r:?}");
        let r = with(&|v| v.truncate(10));
        assert!(matches!(r, Err(CodecError::Corrupt { .. })), "{r:?}");
        // Block starts outside the frame, inside the header, or the table
        // not fitting.
        let r = with(&|v| {
            let len = v.len() as u32;
            v[16..20].copy_from_slice(&len.to_le_bytes())
        });
        assert!(matches!(r, Err(CodecError::Corrupt { .. })), "{r:?}");
        let r = with(&|v| v[20..24].copy_from_slice(&u32::MAX.to_le_bytes()));
        assert!(matches!(r, Err(CodecError::Corrupt { .. })), "{r:?}");
        let r = with(&|v| v[16..20].copy_from_slice(&0u32.to_le_bytes()));
        assert!(matches!(r, Err(CodecError::Corrupt { .. })), "{r:?}");
        let r = with(&|v| v[8..12].copy_from_slice(&1u32.to_le_bytes()));
        assert!(matches!(r, Err(CodecError::Corrupt { .. })), "{r:?}");
        // Block size 0 or above nbytes; version; flags; type size 0.
        for (at, val) in [(8usize, 0u32), (8, n as u32 + 1)] {
            let r = with(&|v| v[at..at + 4].copy_from_slice(&val.to_le_bytes()));
            assert!(matches!(r, Err(CodecError::Corrupt { .. })), "{r:?}");
        }
        let r = with(&|v| v[0] = 3);
        assert!(matches!(r, Err(CodecError::Corrupt { .. })), "{r:?}");
        let r = with(&|v| v[2] |= FLAG_RESERVED);
        assert!(matches!(r, Err(CodecError::Corrupt { .. })), "{r:?}");
        let r = with(&|v| v[2] = (v[2] & 0x1f) | (SNAPPY << 5));
        assert!(matches!(r, Err(CodecError::Corrupt { .. })), "{r:?}");
        let r = with(&|v| v[2] = (v[2] & 0x1f) | (7 << 5));
        assert!(matches!(r, Err(CodecError::Corrupt { .. })), "{r:?}");
        let r = with(&|v| v[3] = 0);
        assert!(matches!(r, Err(CodecError::Corrupt { .. })), "{r:?}");
        // A corrupt stream inside a valid header: C-Blosc reports it.
        let r = with(&|v| {
            let l = v.len();
            for b in &mut v[l - 200..l - 100] {
                *b ^= 0x5a;
            }
        });
        assert!(r.is_err() || r.unwrap().len() == n);
        // Memcpyed frame with a wrong length.
        let mut m = compress(&data, 4, 0, 0, "lz4", 0);
        m.pop();
        let l = m.len() as u32;
        m[12..16].copy_from_slice(&l.to_le_bytes());
        assert!(matches!(
            codec().decode(m, DecodedSize::AtMost(n)),
            Err(CodecError::Corrupt { .. })
        ));
    }

    #[test]
    fn empty_frame() {
        let enc = compress(&[], 4, 5, 1, "lz4", 0);
        assert_eq!(codec().decode(enc, DecodedSize::Exact(0)).unwrap(), b"");
    }

    /// Valid frames to mutate (built once: compressing is the slow part).
    fn frames() -> &'static [Vec<u8>] {
        static FRAMES: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
        FRAMES.get_or_init(|| {
            let data = sample();
            let mut v = Vec::new();
            for cname in ["blosclz", "lz4", "zlib", "zstd"] {
                for shuffle in [0, 1, 2] {
                    v.push(compress(&data, 4, 5, shuffle, cname, 2048));
                }
            }
            v.push(compress(&data, 4, 0, 0, "lz4", 0));
            v
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..256)) {
            if let Ok(out) = codec().decode(data, DecodedSize::AtMost(4096)) {
                prop_assert!(out.len() <= 4096);
            }
        }

        #[test]
        fn mutated_frames_never_crash(
            which in any::<prop::sample::Index>(),
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
            in_header in any::<bool>(),
        ) {
            let frames = frames();
            let mut f = frames[which.index(frames.len())].clone();
            for (i, b) in flips {
                // Aim half the mutations at the header and the block table.
                let span = if in_header { f.len().min(64) } else { f.len() };
                let i = i.index(span);
                f[i] ^= b;
            }
            let n = sample().len();
            if let Ok(out) = codec().decode(f, DecodedSize::Exact(n)) {
                prop_assert_eq!(out.len(), n);
            }
        }

        #[test]
        fn random_headers_never_crash(
            hdr in proptest::collection::vec(any::<u8>(), 16),
            body in proptest::collection::vec(any::<u8>(), 0..512),
            valid_len in any::<bool>(),
        ) {
            let mut f = hdr;
            f[0] = FORMAT_VERSION;
            // Keep sizes small enough to get past the size checks often.
            f[6] = 0;
            f[7] = 0;
            f[10] &= 0x01;
            f[11] = 0;
            f.extend(body);
            if valid_len {
                let l = f.len() as u32;
                f[12..16].copy_from_slice(&l.to_le_bytes());
            }
            if let Ok(out) = codec().decode(f, DecodedSize::AtMost(1 << 16)) {
                prop_assert!(out.len() <= 1 << 16);
            }
        }
    }
}
