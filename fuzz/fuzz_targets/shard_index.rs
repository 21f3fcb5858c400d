//! The sharding index (`chunked::shard`): a shard's index found at its start
//! or end, verified by `crc32c` when the index codecs say so, its entries
//! turned into byte ranges, one level or two (nested shards), empty inner
//! chunks as fill value. Checked against a reference reader written here
//! from the sharding spec, element by element.
//!
//! The array is fixed: `uint16` of shape `[4, 6]`, one shard `[4, 6]`,
//! fill value `0x1234`, little-endian `bytes` inner chunks; one level of
//! `[2, 3]` inner chunks, or two levels (`[2, 6]` sub-shards of `[1, 3]`
//! chunks). Input: a flags byte, then the shard.
//!
//! - bit 0: outer index at the start (else the end)
//! - bit 1: index codecs end with `crc32c`
//! - bit 2: "fix up": write the right checksums before reading, so that
//!   the entries behind a checksum are explored too
//! - bit 3: nested (two levels)
//! - bit 4: inner index at the start
//!
//! The reference: an index needs its whole encoded size inside its block,
//! a checksum mismatch is an error, an entry of two `u64::MAX` is fill
//! value, any other entry must lie inside its block (no overflow) and a
//! leaf must be exactly 12 or 6 bytes. If any leaf is an error the read
//! must fail; otherwise it must return exactly the reference's array.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};
use slabfs::dtype::Endian;
use slabfs::engine::read::read_at;
use slabfs::storage::testing::MemoryStore;

const SHAPE: [u64; 2] = [4, 6];
const FILL: u16 = 0x1234;
const EMPTY: u64 = u64::MAX;

/// One level of the reference: the block it cuts and its inner chunks.
#[derive(Clone, Copy)]
struct Level {
    block: [u64; 2],
    inner: [u64; 2],
    start: bool,
}

impl Level {
    fn per_block(&self) -> [u64; 2] {
        [self.block[0] / self.inner[0], self.block[1] / self.inner[1]]
    }
    fn entries(&self) -> usize {
        let p = self.per_block();
        (p[0] * p[1]) as usize
    }
}

struct Layout {
    levels: Vec<Level>,
    crc: bool,
}

impl Layout {
    fn leaf(&self) -> [u64; 2] {
        self.levels.last().unwrap().inner
    }

    fn index_len(&self, l: usize) -> usize {
        self.levels[l].entries() * 16 + if self.crc { 4 } else { 0 }
    }

    /// `[lo, hi)` of the index of level `l` in the block `[lo, hi)`.
    fn index_range(&self, l: usize, lo: usize, hi: usize) -> Option<(usize, usize)> {
        let n = self.index_len(l);
        if hi - lo < n {
            return None;
        }
        Some(if self.levels[l].start {
            (lo, lo + n)
        } else {
            (hi - n, hi)
        })
    }

    /// C-order position, within its level-`l` block, of the inner chunk
    /// holding leaf `t`.
    fn position(&self, l: usize, t: [u64; 2]) -> usize {
        let (lv, leaf) = (self.levels[l], self.leaf());
        let p = lv.per_block();
        let i = |d: usize| (t[d] * leaf[d] / lv.inner[d]) % p[d];
        (i(0) * p[1] + i(1)) as usize
    }

    fn codecs(&self, l: usize) -> Value {
        let bytes = json!({"name": "bytes", "configuration": {"endian": "little"}});
        if l == self.levels.len() {
            return json!([bytes]);
        }
        let mut index_codecs = vec![bytes];
        if self.crc {
            index_codecs.push(json!({"name": "crc32c"}));
        }
        let lv = self.levels[l];
        json!([{"name": "sharding_indexed", "configuration": {
            "chunk_shape": lv.inner,
            "codecs": self.codecs(l + 1),
            "index_codecs": index_codecs,
            "index_location": if lv.start { "start" } else { "end" },
        }}])
    }

    /// Write the right checksum into every index reachable from the block
    /// `[lo, hi)` of level `l`.
    fn fix(&self, buf: &mut [u8], l: usize, lo: usize, hi: usize) {
        let Some((a, b)) = self.index_range(l, lo, hi) else {
            return;
        };
        if self.crc {
            let sum = crc32c(&buf[a..b - 4]);
            buf[b - 4..b].copy_from_slice(&sum.to_le_bytes());
        }
        if l + 1 == self.levels.len() {
            return;
        }
        for k in 0..self.levels[l].entries() {
            let (off, nb) = entry(&buf[a..b], k);
            if let Some(end) = off.checked_add(nb)
                && end <= (hi - lo) as u64
            {
                self.fix(buf, l + 1, lo + off as usize, lo + end as usize);
            }
        }
    }

    /// The stored bytes of leaf `t`: `None` for fill value, `Err` for a
    /// corrupt shard.
    fn resolve<'a>(&self, shard: &'a [u8], t: [u64; 2]) -> Result<Option<&'a [u8]>, ()> {
        let mut blob = shard;
        for l in 0..self.levels.len() {
            let (a, b) = self.index_range(l, 0, blob.len()).ok_or(())?;
            let index = &blob[a..b];
            if self.crc {
                let stored = u32::from_le_bytes(index[index.len() - 4..].try_into().unwrap());
                if stored != crc32c(&index[..index.len() - 4]) {
                    return Err(());
                }
            }
            let (off, nb) = entry(index, self.position(l, t));
            if off == EMPTY && nb == EMPTY {
                return Ok(None);
            }
            let end = off.checked_add(nb).ok_or(())?;
            if end > blob.len() as u64 {
                return Err(());
            }
            blob = &blob[off as usize..end as usize];
        }
        let leaf = self.leaf();
        if blob.len() as u64 != leaf[0] * leaf[1] * 2 {
            return Err(());
        }
        Ok(Some(blob))
    }

    /// The whole array as native-order `u16`s, or `Err`.
    fn read(&self, shard: &[u8]) -> Result<Vec<u16>, ()> {
        let leaf = self.leaf();
        let mut out = vec![0u16; (SHAPE[0] * SHAPE[1]) as usize];
        for t0 in 0..SHAPE[0] / leaf[0] {
            for t1 in 0..SHAPE[1] / leaf[1] {
                let bytes = self.resolve(shard, [t0, t1])?;
                for i in 0..leaf[0] {
                    for j in 0..leaf[1] {
                        let k = (i * leaf[1] + j) as usize;
                        let v = match bytes {
                            None => FILL,
                            Some(b) => u16::from_le_bytes([b[2 * k], b[2 * k + 1]]),
                        };
                        let (y, x) = (t0 * leaf[0] + i, t1 * leaf[1] + j);
                        out[(y * SHAPE[1] + x) as usize] = v;
                    }
                }
            }
        }
        Ok(out)
    }
}

fn entry(index: &[u8], k: usize) -> (u64, u64) {
    let word = |at: usize| u64::from_le_bytes(index[at..at + 8].try_into().unwrap());
    (word(16 * k), word(16 * k + 8))
}

/// CRC-32C, bit by bit.
fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, shard)) = data.split_first() else {
        return;
    };
    let levels = if flags & 8 == 0 {
        vec![Level {
            block: SHAPE,
            inner: [2, 3],
            start: flags & 1 != 0,
        }]
    } else {
        vec![
            Level {
                block: SHAPE,
                inner: [2, 6],
                start: flags & 1 != 0,
            },
            Level {
                block: [2, 6],
                inner: [1, 3],
                start: flags & 16 != 0,
            },
        ]
    };
    let layout = Layout {
        levels,
        crc: flags & 2 != 0,
    };
    let mut shard = shard.to_vec();
    if flags & 4 != 0 {
        let len = shard.len();
        layout.fix(&mut shard, 0, 0, len);
    }

    let meta = json!({
        "zarr_format": 3, "node_type": "array", "shape": SHAPE, "data_type": "uint16",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": SHAPE}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": FILL, "codecs": layout.codecs(0),
    });
    let store = MemoryStore::new();
    store.set("zarr.json", meta.to_string());
    store.set("c/0/0", shard.clone());
    let h = slabfs::formats::zarr::open_store(std::sync::Arc::new(store), slabfs_fuzz::cache())
        .expect("the fixed metadata opens");
    let array = h.nodes[0].array.as_ref().expect("an array");
    let mut got = vec![0u8; (SHAPE[0] * SHAPE[1] * 2) as usize];
    let read = read_at(array.as_ref(), 0, &mut got, Endian::NATIVE);
    match (read, layout.read(&shard)) {
        (Ok(n), Ok(expected)) => {
            assert_eq!(n, got.len());
            let expected: Vec<u8> = expected.iter().flat_map(|v| v.to_ne_bytes()).collect();
            assert_eq!(got, expected, "the array differs from the reference");
        }
        (Err(_), Err(())) => {}
        (Ok(_), Err(())) => panic!("read a shard the reference finds corrupt"),
        (Err(e), Ok(_)) => panic!("refused a shard the reference reads: {e}"),
    }
});
