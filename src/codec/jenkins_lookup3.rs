//! numcodecs `jenkins_lookup3`: Bob Jenkins' lookup3 hash after the data.
//!
//! numcodecs `JenkinsLookup3` (`numcodecs/checksum32.py` and
//! `jenkins.pyx`, converted from HDF5's `H5_checksum_lookup3`, which HDF5
//! uses for its metadata); zarr-python 3 writes it into Zarr v3 metadata
//! as `numcodecs.jenkins_lookup3`.
//!
//! ```json
//! {"id": "jenkins_lookup3", "initval": 0, "prefix": null}
//! ```
//!
//! The hash (`hashlittle` of lookup3.c, seeded with `initval`) of the
//! payload follows it as a little-endian `u32`. numcodecs' `prefix` (bytes
//! hashed before the payload) cannot be written to JSON as anything but
//! `null`, so any other value is refused.

use serde_json::Value;

use super::checksum32::{Location, strip};
use super::entry::{CodecEntry, Numcodecs};
use super::numeric::{config_int, config_object};
use super::{BytesToBytesCodec, CodecError, DecodedSize};

const NAME: &str = "jenkins_lookup3";

/// numcodecs `jenkins_lookup3`; v3 `numcodecs.jenkins_lookup3`.
pub const ENTRY: CodecEntry = CodecEntry {
    numcodecs: Some((
        NAME,
        Numcodecs::Bytes(|c| Ok(Box::new(JenkinsLookup3::from_v2(c)?))),
    )),
    v3: None,
    hdf5: None,
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JenkinsLookup3 {
    initval: u32,
}

impl JenkinsLookup3 {
    pub fn new(initval: u32) -> Self {
        JenkinsLookup3 { initval }
    }

    /// From the numcodecs object.
    pub fn from_v2(config: &Value) -> Result<Self, CodecError> {
        let initval = match config_int(NAME, config, "initval")? {
            None => 0,
            Some(v) => u32::try_from(v).map_err(|_| {
                CodecError::config(NAME, format!("\"initval\" {v} is not a 32-bit unsigned"))
            })?,
        };
        match config_object(NAME, config)?.get("prefix") {
            None | Some(Value::Null) => {}
            Some(p) => {
                return Err(CodecError::config(
                    NAME,
                    format!("a \"prefix\" is not supported: {p}"),
                ));
            }
        }
        Ok(JenkinsLookup3::new(initval))
    }
}

/// lookup3's `hashlittle(data, initval)`, reading the key byte by byte as
/// numcodecs and HDF5 do (the same on any machine).
pub fn hashlittle(data: &[u8], initval: u32) -> u32 {
    let word = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    // lookup3 adds the length as a 32-bit number.
    let seed = 0xdead_beefu32
        .wrapping_add(data.len() as u32)
        .wrapping_add(initval);
    let (mut a, mut b, mut c) = (seed, seed, seed);
    if data.is_empty() {
        return c;
    }
    let mut k = data;
    while k.len() > 12 {
        a = a.wrapping_add(word(&k[0..4]));
        b = b.wrapping_add(word(&k[4..8]));
        c = c.wrapping_add(word(&k[8..12]));
        mix(&mut a, &mut b, &mut c);
        k = &k[12..];
    }
    // The last 1 to 12 bytes, zero-padded.
    let mut last = [0u8; 12];
    last[..k.len()].copy_from_slice(k);
    a = a.wrapping_add(word(&last[0..4]));
    b = b.wrapping_add(word(&last[4..8]));
    c = c.wrapping_add(word(&last[8..12]));
    final_mix(a, b, c)
}

fn mix(a: &mut u32, b: &mut u32, c: &mut u32) {
    *a = a.wrapping_sub(*c);
    *a ^= c.rotate_left(4);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a);
    *b ^= a.rotate_left(6);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b);
    *c ^= b.rotate_left(8);
    *b = b.wrapping_add(*a);
    *a = a.wrapping_sub(*c);
    *a ^= c.rotate_left(16);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a);
    *b ^= a.rotate_left(19);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b);
    *c ^= b.rotate_left(4);
    *b = b.wrapping_add(*a);
}

fn final_mix(mut a: u32, mut b: u32, mut c: u32) -> u32 {
    c ^= b;
    c = c.wrapping_sub(b.rotate_left(14));
    a ^= c;
    a = a.wrapping_sub(c.rotate_left(11));
    b ^= a;
    b = b.wrapping_sub(a.rotate_left(25));
    c ^= b;
    c = c.wrapping_sub(b.rotate_left(16));
    a ^= c;
    a = a.wrapping_sub(c.rotate_left(4));
    b ^= a;
    b = b.wrapping_sub(a.rotate_left(14));
    c ^= b;
    c.wrapping_sub(b.rotate_left(24))
}

impl BytesToBytesCodec for JenkinsLookup3 {
    fn name(&self) -> &'static str {
        NAME
    }

    fn encoded_size(&self, decoded_size: usize) -> Option<usize> {
        decoded_size.checked_add(4)
    }

    fn decode(&self, encoded: Vec<u8>, size: DecodedSize) -> Result<Vec<u8>, CodecError> {
        strip(NAME, encoded, size, Location::End, |p| {
            hashlittle(p, self.initval)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lookup3_self_test_values() {
        // From lookup3.c's driver5().
        assert_eq!(hashlittle(b"", 0), 0xdeadbeef);
        assert_eq!(hashlittle(b"", 0xdeadbeef), 0xbd5b7dde);
        assert_eq!(hashlittle(b"Four score and seven years ago", 0), 0x17770551);
        assert_eq!(hashlittle(b"Four score and seven years ago", 1), 0xcd628161);
    }

    #[test]
    fn codec() {
        let c =
            JenkinsLookup3::from_v2(&json!({"id": NAME, "initval": 0, "prefix": null})).unwrap();
        let mut enc = b"Four score and seven years ago".to_vec();
        enc.extend(0x17770551u32.to_le_bytes());
        assert_eq!(
            c.decode(enc.clone(), DecodedSize::Exact(30)).unwrap().len(),
            30
        );
        let c1 = JenkinsLookup3::from_v2(&json!({"id": NAME, "initval": 1})).unwrap();
        assert!(matches!(
            c1.decode(enc, DecodedSize::Exact(30)),
            Err(CodecError::Checksum { .. })
        ));
        for bad in [
            json!({"id": NAME, "initval": -1}),
            json!({"id": NAME, "prefix": "abc"}),
        ] {
            assert!(JenkinsLookup3::from_v2(&bad).is_err(), "{bad}");
        }
    }
}
