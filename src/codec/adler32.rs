//! numcodecs `adler32`: an Adler-32 checksum next to the data.
//!
//! numcodecs `Adler32` (`numcodecs/checksum32.py`, `zlib.adler32`);
//! zarr-python 3 writes it into Zarr v3 metadata as `numcodecs.adler32`.
//!
//! ```json
//! {"id": "adler32"}
//! {"id": "adler32", "location": "end"}
//! {"name": "numcodecs.adler32", "configuration": {}}
//! ```
//!
//! A little-endian `u32` at the **start** unless `location` says `"end"`
//! (the layout and its checks: [`super::checksum32`]). The checksum
//! starts from 1, as `zlib.adler32` does by default.

use serde_json::Value;

use super::checksum32::{Algorithm, Checksum32, Location};
use super::entry::{CodecEntry, Numcodecs};
use super::{BytesToBytesCodec, CodecError};

const NAME: &str = "adler32";

static ALGORITHM: Algorithm = Algorithm {
    name: NAME,
    default_location: Location::Start,
    checksum: adler2::adler32_slice,
};

/// numcodecs `adler32`; v3 `numcodecs.adler32`.
pub const ENTRY: CodecEntry = CodecEntry {
    numcodecs: Some((NAME, Numcodecs::Bytes(from_v2))),
    v3: None,
    hdf5: None,
};

/// From the numcodecs object `{"id": "adler32", "location": ...}`.
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
        // zlib.adler32(b"abc") == 0x024d0127; zlib.adler32(b"") == 1.
        let c = from_v2(&json!({"id": "adler32"})).unwrap();
        let enc = [[0x27, 0x01, 0x4d, 0x02].as_slice(), b"abc"].concat();
        assert_eq!(
            c.decode(enc.clone(), DecodedSize::Exact(3)).unwrap(),
            b"abc"
        );
        assert_eq!(
            c.decode(vec![1, 0, 0, 0], DecodedSize::Exact(0)).unwrap(),
            b""
        );
        let c = from_v2(&json!({"id": "adler32", "location": "end"})).unwrap();
        assert!(matches!(
            c.decode(enc, DecodedSize::Exact(3)),
            Err(CodecError::Checksum {
                codec: "adler32",
                ..
            })
        ));
    }
}
