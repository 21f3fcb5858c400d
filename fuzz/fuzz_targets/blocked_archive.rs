//! Blocked-compressed netCDF-3 archives (`packed::format`: the superblock
//! and the block index; `packed::reader`: the embedded header, block reads
//! and decompression), parsed directly and opened as a dataset.
//!
//! Input: a flags byte, then the archive. Every structure of the format
//! carries a CRC-32C, which random mutations almost never get right, so
//! the flags let the target write the right checksums (computed here from
//! the format's definition in docs/FORMAT-BLOCKED-NC3.md) before parsing,
//! and the fuzzer explores what lies behind them:
//!
//! - bit 0: the superblock's CRC (of bytes 0..56, big-endian at 56);
//! - bit 1: the index's CRC (after `index_len` bytes at `index_offset`);
//! - bit 2: each block's CRC in the index (then the index's again).
//!
//! Checked: no panic; a superblock that parses places the header between
//! itself and the index and the index inside the file; an index that
//! parses lists `ceil(data_len / block_size)` blocks per variable, in
//! order, inside the data area; reads return what `read_at` promises.
//! Seeds: archives packed by `slabfs pack` from `tests/fixtures/netcdf3`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use slabfs::engine::index::checked_num_elements;
use slabfs::formats::netcdf3::header;
use slabfs::formats::netcdf3::layout::Layout;
use slabfs::formats::packed::format::{
    MAX_BLOCK_SIZE, MAX_INDEX_LEN, MIN_BLOCK_SIZE, SUPERBLOCK_LEN, Superblock, VarIndex,
    parse_index,
};

/// Bytes of a variable's index entry before its offsets (codec, level,
/// reserved, block_size, data_len, nblocks).
const ENTRY_FIXED: usize = 1 + 1 + 2 + 4 + 8 + 8;

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

fn be64(b: &[u8]) -> u64 {
    u64::from_be_bytes(b[..8].try_into().unwrap())
}

/// The index bytes (with CRC) of `sb` in `file`.
fn index_range(sb: &Superblock) -> (usize, usize) {
    let start = sb.index_offset as usize;
    (start, start + sb.index_len as usize + 4)
}

/// The byte length of every variable's data, from the embedded header
/// (as the reader computes it), or `None`.
fn data_lens(file: &[u8], sb: &Superblock) -> Option<Vec<u64>> {
    let start = sb.header_offset as usize;
    let bytes = file.get(start..start.checked_add(sb.header_len as usize)?)?;
    let h = header::parse(bytes, sb.classic_len).ok()?;
    let layout = Layout::new(&h, sb.classic_len).ok()?;
    layout
        .vars
        .iter()
        .map(|v| checked_num_elements(&v.shape)?.checked_mul(v.item))
        .collect()
}

fn check_index(vars: &[VarIndex], sb: &Superblock) {
    let mut prev = sb.data_start();
    for v in vars {
        assert!((MIN_BLOCK_SIZE..=MAX_BLOCK_SIZE).contains(&v.block_size));
        let n = v.data_len.div_ceil(v.block_size);
        assert_eq!(v.crcs.len() as u64, n);
        assert_eq!(v.offsets.len() as u64, n + 1);
        for w in v.offsets.windows(2) {
            assert!(w[0] <= w[1], "blocks out of order");
        }
        assert!(v.offsets[0] >= prev, "block before the data area");
        prev = *v.offsets.last().unwrap();
        assert!(prev <= sb.index_offset, "block past the data area");
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, archive)) = data.split_first() else {
        return;
    };
    let mut file = archive.to_vec();
    let len = file.len() as u64;
    if flags & 1 != 0 && file.len() >= 60 {
        let sum = crc32c(&file[..56]);
        file[56..60].copy_from_slice(&sum.to_be_bytes());
    }
    slabfs_fuzz::dump("archive.ncb", &file);
    let sb = Superblock::parse(&file, len);
    if let Ok(sb) = &sb {
        assert!(sb.header_offset >= SUPERBLOCK_LEN);
        assert!(sb.header_offset + sb.header_len <= sb.index_offset);
        assert!(sb.index_offset + sb.index_len + 4 <= len);
        assert!(sb.index_len <= MAX_INDEX_LEN);
        let (a, b) = index_range(sb);
        if flags & 4 != 0 && flags & 2 != 0 {
            // Walk the entries as the format lays them out and write each
            // block's CRC; stop at the first entry that does not fit.
            let mut at = a;
            while at + ENTRY_FIXED <= b - 4 {
                let n = be64(&file[at + 16..]);
                let Some(end) = (n as usize)
                    .checked_mul(12)
                    .and_then(|x| x.checked_add(at + ENTRY_FIXED + 8))
                    .filter(|&e| e <= b - 4)
                else {
                    break;
                };
                let offsets = at + ENTRY_FIXED;
                let crcs = offsets + 8 * (n as usize + 1);
                for i in 0..n as usize {
                    let lo = be64(&file[offsets + 8 * i..]) as usize;
                    let hi = be64(&file[offsets + 8 * i + 8..]) as usize;
                    if lo <= hi && hi <= file.len() {
                        let sum = crc32c(&file[lo..hi]);
                        file[crcs + 4 * i..crcs + 4 * i + 4].copy_from_slice(&sum.to_be_bytes());
                    }
                }
                at = end;
            }
        }
        if flags & 2 != 0 {
            let sum = crc32c(&file[a..b - 4]);
            file[b - 4..b].copy_from_slice(&sum.to_be_bytes());
        }
        if let Some(lens) = data_lens(&file, sb)
            && let Ok(vars) = parse_index(&file[a..b], &lens, sb.data_start(), sb.index_offset)
        {
            assert_eq!(vars.len(), lens.len());
            for (v, &l) in vars.iter().zip(&lens) {
                assert_eq!(v.data_len, l);
            }
            check_index(&vars, sb);
        }
    }
    slabfs_fuzz::dump("archive.ncb", &file);
    slabfs_fuzz::open_and_probe("netcdf3/data", "fuzz.ncb", &file);
});
