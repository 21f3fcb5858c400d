//! numcodecs `crc32`: a CRC-32 (zlib's, ISO-HDLC) checksum next to the data.
//!
//! numcodecs `CRC32` (`numcodecs/checksum32.py`, `zlib.crc32`);
//! zarr-python 3 writes it into Zarr v3 metadata as `numcodecs.crc32`.
//!
//! ```json
//! {"id": "crc32"}
//! {"id": "crc32", "location": "end"}
//! {"name": "numcodecs.crc32", "configuration": {}}
//! ```
//!
//! A little-endian `u32` at the **start** unless `location` says `"end"`
//! (the layout and its checks: [`super::checksum32`]).

use serde_json::Value;

use super::checksum32::{Algorithm, Checksum32, Location};
use super::entry::{CodecEntry, Numcodecs};
use super::{BytesToBytesCodec, CodecError};

const NAME: &str = "crc32";

static ALGORITHM: Algorithm = Algorithm {
    name: NAME,
    default_location: Location::Start,
    checksum: crc32fast::hash,
};

/// numcodecs `crc32`; v3 `numcodecs.crc32`.
pub const ENTRY: CodecEntry = CodecEntry {
    numcodecs: Some((NAME, Numcodecs::Bytes(from_v2))),
    v3: None,
    hdf5: None,
};

/// From the numcodecs object `{"id": "crc32", "location": ...}`.
pub fn from_v2(config: &Value) -> Result<Box<dyn BytesToBytesCodec>, CodecError> {
    Ok(Box::new(Checksum32::from_v2(&ALGORITHM, config)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{CodecError, DecodedSize};
    use serde_json::json;

    #[test]
    fn known_value() {
        // zlib.crc32(b"abc") == 0x352441c2; numcodecs puts it first.
        let c = from_v2(&json!({"id": "crc32"})).unwrap();
        let enc = [[0xc2, 0x41, 0x24, 0x35].as_slice(), b"abc"].concat();
        assert_eq!(c.decode(enc, DecodedSize::Exact(3)).unwrap(), b"abc");
        let c = from_v2(&json!({"id": "crc32", "location": "end"})).unwrap();
        let enc = [b"abc".as_slice(), &[0xc2, 0x41, 0x24, 0x35]].concat();
        assert_eq!(
            c.decode(enc.clone(), DecodedSize::Exact(3)).unwrap(),
            b"abc"
        );
        let c = from_v2(&json!({"id": "crc32"})).unwrap();
        assert!(matches!(
            c.decode(enc, DecodedSize::Exact(3)),
            Err(CodecError::Checksum { codec: "crc32", .. })
        ));
    }
}
