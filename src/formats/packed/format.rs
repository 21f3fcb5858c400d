//! The on-disk structures of a blocked archive: the superblock and the
//! block index ([`docs/FORMAT-BLOCKED-NC3.md`] is the reference; this
//! module is its code). Pure functions over byte slices: no I/O, so the
//! parsers are fuzzed and property-tested directly.
//!
//! Everything read here is input. Every count is checked against the bytes
//! that hold it before anything is allocated from it, every offset against
//! the file it points into, and each structure carries a CRC-32C, so a
//! damaged or forged archive is a [`FormatError`] naming what is wrong,
//! never a panic or a huge allocation.
//!
//! [`docs/FORMAT-BLOCKED-NC3.md`]: https://github.com/slabfs/slabfs/blob/main/docs/FORMAT-BLOCKED-NC3.md

/// The first 8 bytes of every archive.
pub const MAGIC: [u8; 8] = *b"SLABNC3\0";

/// The format version this code writes and reads.
pub const VERSION: u32 = 1;

/// Bytes of the superblock; the embedded header starts right after it.
pub const SUPERBLOCK_LEN: u64 = 64;

/// Blocks are at most this large uncompressed: a block is decoded whole
/// into memory (and cached), so a forged `block_size` must not make a
/// read allocate gigabytes.
pub const MAX_BLOCK_SIZE: u64 = 256 << 20;

/// The smallest block: one element of the widest type.
pub const MIN_BLOCK_SIZE: u64 = 8;

/// An index larger than this is refused (about 20 million blocks: 20 TiB
/// of data at the default 1 MiB blocks).
pub const MAX_INDEX_LEN: u64 = 256 << 20;

/// Bytes of a variable's index entry before its offsets.
const ENTRY_FIXED: u64 = 1 + 1 + 2 + 4 + 8 + 8;

/// What can be wrong with an archive's structures.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    #[error("not a blocked netCDF-3 archive (no SLABNC3 magic)")]
    NotArchive,
    #[error("archive format version {0}; this slabfs reads version {VERSION}")]
    Version(u32),
    #[error("unknown flags {0:#x} in the superblock")]
    Flags(u32),
    #[error("{what} checksum mismatch (stored {stored:#010x}, computed {computed:#010x})")]
    Checksum {
        what: &'static str,
        stored: u32,
        computed: u32,
    },
    #[error("{0}")]
    Invalid(String),
}

fn invalid(msg: impl Into<String>) -> FormatError {
    FormatError::Invalid(msg.into())
}

/// The fixed-size start of an archive: where the header and index are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Superblock {
    pub header_offset: u64,
    pub header_len: u64,
    pub index_offset: u64,
    /// Bytes of the index, not counting its trailing CRC-32C.
    pub index_len: u64,
    /// Length of the classic file the archive was packed from: the
    /// header's offsets are relative to it, and `unpack` restores it.
    pub classic_len: u64,
}

impl Superblock {
    pub fn encode(&self) -> [u8; SUPERBLOCK_LEN as usize] {
        let mut b = [0u8; SUPERBLOCK_LEN as usize];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..12].copy_from_slice(&VERSION.to_be_bytes());
        // 12..16: flags, zero.
        b[16..24].copy_from_slice(&self.header_offset.to_be_bytes());
        b[24..32].copy_from_slice(&self.header_len.to_be_bytes());
        b[32..40].copy_from_slice(&self.index_offset.to_be_bytes());
        b[40..48].copy_from_slice(&self.index_len.to_be_bytes());
        b[48..56].copy_from_slice(&self.classic_len.to_be_bytes());
        let crc = crc32c::crc32c(&b[..56]);
        b[56..60].copy_from_slice(&crc.to_be_bytes());
        b
    }

    /// Parse and check the superblock of an archive of `file_len` bytes.
    pub fn parse(bytes: &[u8], file_len: u64) -> Result<Superblock, FormatError> {
        if bytes.len() < 8 || bytes[..8] != MAGIC {
            return Err(FormatError::NotArchive);
        }
        if bytes.len() < SUPERBLOCK_LEN as usize || file_len < SUPERBLOCK_LEN {
            return Err(invalid(format!(
                "the file ({file_len} bytes) is shorter than the {SUPERBLOCK_LEN}-byte superblock"
            )));
        }
        let stored = be32(&bytes[56..60]);
        let computed = crc32c::crc32c(&bytes[..56]);
        if stored != computed {
            return Err(FormatError::Checksum {
                what: "superblock",
                stored,
                computed,
            });
        }
        let version = be32(&bytes[8..12]);
        if version != VERSION {
            return Err(FormatError::Version(version));
        }
        let flags = be32(&bytes[12..16]);
        if flags != 0 {
            return Err(FormatError::Flags(flags));
        }
        let sb = Superblock {
            header_offset: be64(&bytes[16..24]),
            header_len: be64(&bytes[24..32]),
            index_offset: be64(&bytes[32..40]),
            index_len: be64(&bytes[40..48]),
            classic_len: be64(&bytes[48..56]),
        };
        let header_fits = sb
            .header_offset
            .checked_add(sb.header_len)
            .is_some_and(|end| sb.header_offset >= SUPERBLOCK_LEN && end <= sb.index_offset);
        if !header_fits {
            return Err(invalid(format!(
                "header at {}..+{} does not lie between the superblock and the index at {}",
                sb.header_offset, sb.header_len, sb.index_offset
            )));
        }
        let index_end = sb
            .index_offset
            .checked_add(sb.index_len)
            .and_then(|e| e.checked_add(4))
            .ok_or_else(|| invalid("index length overflows"))?;
        if index_end > file_len {
            return Err(invalid(format!(
                "the index ends at byte {index_end} but the file has {file_len} bytes: \
                 the archive is truncated"
            )));
        }
        if sb.index_len > MAX_INDEX_LEN {
            return Err(invalid(format!(
                "index of {} bytes is larger than the {} MiB limit",
                sb.index_len,
                MAX_INDEX_LEN >> 20
            )));
        }
        Ok(sb)
    }

    /// First byte after the embedded header: where block data may start.
    pub fn data_start(&self) -> u64 {
        self.header_offset + self.header_len
    }
}

/// How a variable's blocks are compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockCodec {
    Zstd,
    /// A zlib stream (RFC 1950), as numcodecs' `zlib` writes.
    Deflate,
}

impl BlockCodec {
    fn id(self) -> u8 {
        match self {
            BlockCodec::Zstd => 1,
            BlockCodec::Deflate => 2,
        }
    }

    fn from_id(id: u8) -> Option<BlockCodec> {
        match id {
            1 => Some(BlockCodec::Zstd),
            2 => Some(BlockCodec::Deflate),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            BlockCodec::Zstd => "zstd",
            BlockCodec::Deflate => "deflate",
        }
    }

    /// The largest compressed size a block of `n` bytes can have: the
    /// codecs' documented worst-case expansion (zstd's `ZSTD_COMPRESSBOUND`
    /// is n + n/256 + 128 KiB slack for small inputs; zlib adds 5 bytes per
    /// 16 KiB stored block plus 11) with room to spare. An index claiming
    /// more is forged or damaged.
    pub fn max_compressed(self, n: u64) -> u64 {
        n + n / 128 + (192 << 10)
    }
}

/// One variable's entry in the index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VarIndex {
    pub codec: BlockCodec,
    pub level: i8,
    /// Whether each block's bytes were shuffled by element (all first
    /// bytes of the block's elements, then all second bytes...) before
    /// compression, as HDF5's and numcodecs' shuffle filter does: the
    /// slowly varying high bytes of numbers then compress far better, and
    /// faster to decompress.
    pub shuffle: bool,
    /// Uncompressed bytes per block; the last block may be shorter.
    pub block_size: u64,
    /// Uncompressed bytes of the variable (elements × element size).
    pub data_len: u64,
    /// `nblocks + 1` file offsets: block `i` is `offsets[i]..offsets[i+1]`.
    pub offsets: Vec<u64>,
    /// CRC-32C of each compressed block.
    pub crcs: Vec<u32>,
}

impl VarIndex {
    pub fn nblocks(&self) -> u64 {
        self.crcs.len() as u64
    }

    /// The file range of compressed block `i`.
    pub fn block_range(&self, i: u64) -> (u64, u64) {
        (self.offsets[i as usize], self.offsets[i as usize + 1])
    }

    /// Uncompressed bytes of block `i` (the last may be shorter).
    pub fn block_data_len(&self, i: u64) -> u64 {
        (self.data_len - i * self.block_size).min(self.block_size)
    }

    /// Bytes this entry takes in the index.
    fn encoded_len(&self) -> u64 {
        ENTRY_FIXED + 8 * (self.nblocks() + 1) + 4 * self.nblocks()
    }
}

/// The number of blocks of a variable: `ceil(data_len / block_size)`.
pub fn nblocks(data_len: u64, block_size: u64) -> u64 {
    data_len.div_ceil(block_size)
}

/// Serialise the index of all variables, followed by its CRC-32C.
pub fn encode_index(vars: &[VarIndex]) -> Vec<u8> {
    let len: u64 = vars.iter().map(VarIndex::encoded_len).sum();
    let mut out = Vec::with_capacity(len as usize + 4);
    for v in vars {
        debug_assert_eq!(v.offsets.len(), v.crcs.len() + 1);
        debug_assert_eq!(v.nblocks(), nblocks(v.data_len, v.block_size));
        out.push(v.codec.id());
        out.push(v.level as u8);
        out.extend([u8::from(v.shuffle), 0]);
        out.extend((v.block_size as u32).to_be_bytes());
        out.extend(v.data_len.to_be_bytes());
        out.extend(v.nblocks().to_be_bytes());
        for o in &v.offsets {
            out.extend(o.to_be_bytes());
        }
        for c in &v.crcs {
            out.extend(c.to_be_bytes());
        }
    }
    let crc = crc32c::crc32c(&out);
    out.extend(crc.to_be_bytes());
    out
}

/// Parse the index (`bytes` = the index and its trailing CRC) of an
/// archive whose variables hold `data_lens` bytes each (in header order,
/// computed from the header), with block data in `data_start..data_end`.
pub fn parse_index(
    bytes: &[u8],
    data_lens: &[u64],
    data_start: u64,
    data_end: u64,
) -> Result<Vec<VarIndex>, FormatError> {
    let Some(body_len) = bytes.len().checked_sub(4) else {
        return Err(invalid("index shorter than its checksum"));
    };
    let (body, crc) = bytes.split_at(body_len);
    let stored = be32(crc);
    let computed = crc32c::crc32c(body);
    if stored != computed {
        return Err(FormatError::Checksum {
            what: "index",
            stored,
            computed,
        });
    }
    let mut r = Reader { bytes: body, at: 0 };
    let mut vars = Vec::with_capacity(data_lens.len().min(body.len() / ENTRY_FIXED as usize));
    let mut prev_end = data_start;
    for (n, &expected_len) in data_lens.iter().enumerate() {
        let what = |msg: String| invalid(format!("index entry {n}: {msg}"));
        let codec_id = r.u8().ok_or_else(|| what("truncated".into()))?;
        let codec = BlockCodec::from_id(codec_id)
            .ok_or_else(|| what(format!("unknown codec id {codec_id}")))?;
        let level = r.u8().ok_or_else(|| what("truncated".into()))? as i8;
        let flags = r.take(2).ok_or_else(|| what("truncated".into()))?;
        let shuffle = match flags {
            [0, 0] => false,
            [1, 0] => true,
            _ => return Err(what(format!("unknown filter flags {flags:?}"))),
        };
        let block_size = r.u32().ok_or_else(|| what("truncated".into()))? as u64;
        if !(MIN_BLOCK_SIZE..=MAX_BLOCK_SIZE).contains(&block_size) || !block_size.is_multiple_of(8)
        {
            return Err(what(format!(
                "block size {block_size} is not a multiple of 8 between \
                 {MIN_BLOCK_SIZE} and {MAX_BLOCK_SIZE}"
            )));
        }
        let data_len = r.u64().ok_or_else(|| what("truncated".into()))?;
        if data_len != expected_len {
            return Err(what(format!(
                "holds {data_len} bytes but the header says the variable has {expected_len}"
            )));
        }
        let count = r.u64().ok_or_else(|| what("truncated".into()))?;
        if count != nblocks(data_len, block_size) {
            return Err(what(format!(
                "{count} blocks for {data_len} bytes in blocks of {block_size}"
            )));
        }
        // Check the entry fits before allocating for it.
        let fits = count
            .checked_mul(12)
            .and_then(|x| x.checked_add(8))
            .is_some_and(|need| need <= r.remaining() as u64);
        if !fits {
            return Err(what(format!("{count} blocks do not fit in the index")));
        }
        let mut offsets = Vec::with_capacity(count as usize + 1);
        for _ in 0..=count {
            offsets.push(r.u64().expect("length checked"));
        }
        let mut crcs = Vec::with_capacity(count as usize);
        for _ in 0..count {
            crcs.push(r.u32().expect("length checked"));
        }
        let v = VarIndex {
            codec,
            level,
            shuffle,
            block_size,
            data_len,
            offsets,
            crcs,
        };
        // Blocks lie in the data area, in order (variable after variable),
        // each within the codec's worst-case size for its length.
        if v.offsets[0] < prev_end {
            return Err(what(format!(
                "first block at {} lies before byte {prev_end} (the data area or the \
                 previous variable's blocks)",
                v.offsets[0]
            )));
        }
        // The loop below checks block ends; a variable without blocks has
        // only this offset (found by the `blocked_archive` fuzz target).
        if v.offsets[0] > data_end {
            return Err(what(format!(
                "first offset {} lies past the data area ending at {data_end}",
                v.offsets[0]
            )));
        }
        for i in 0..count {
            let (a, b) = v.block_range(i);
            let max = codec.max_compressed(v.block_data_len(i));
            if b < a || b - a > max || b > data_end {
                return Err(what(format!(
                    "block {i} at bytes {a}..{b} is out of order, larger than {max} bytes \
                     or past the data area ending at {data_end}"
                )));
            }
        }
        prev_end = *v.offsets.last().expect("nblocks + 1 offsets");
        vars.push(v);
    }
    if r.remaining() != 0 {
        return Err(invalid(format!(
            "{} bytes left over after the index entries of {} variables",
            r.remaining(),
            data_lens.len()
        )));
    }
    Ok(vars)
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes(b[..4].try_into().expect("4 bytes"))
}

fn be64(b: &[u8]) -> u64 {
    u64::from_be_bytes(b[..8].try_into().expect("8 bytes"))
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn u32(&mut self) -> Option<u32> {
        self.take(4).map(be32)
    }

    fn u64(&mut self) -> Option<u64> {
        self.take(8).map(be64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> Vec<VarIndex> {
        vec![
            VarIndex {
                codec: BlockCodec::Zstd,
                level: 3,
                shuffle: true,
                block_size: 16,
                data_len: 40,
                offsets: vec![200, 210, 230, 235],
                crcs: vec![1, 2, 3],
            },
            VarIndex {
                codec: BlockCodec::Deflate,
                level: -1,
                shuffle: false,
                block_size: 8,
                data_len: 0,
                offsets: vec![235],
                crcs: vec![],
            },
        ]
    }

    #[test]
    fn index_round_trips_and_detects_damage() {
        let vars = sample();
        let bytes = encode_index(&vars);
        assert_eq!(parse_index(&bytes, &[40, 0], 100, 300).unwrap(), vars);
        // Any flipped byte is caught by the checksum.
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x40;
            assert!(parse_index(&bad, &[40, 0], 100, 300).is_err(), "byte {i}");
        }
        // Lengths that disagree with the header, blocks outside the data.
        assert!(parse_index(&bytes, &[41, 0], 100, 300).is_err());
        assert!(parse_index(&bytes, &[40, 0], 201, 300).is_err());
        assert!(parse_index(&bytes, &[40, 0], 100, 234).is_err());
        assert!(parse_index(&bytes, &[40], 100, 300).is_err(), "left over");
    }

    #[test]
    fn superblock_round_trips_and_checks() {
        let sb = Superblock {
            header_offset: 64,
            header_len: 100,
            index_offset: 1000,
            index_len: 50,
            classic_len: 5000,
        };
        let b = sb.encode();
        assert_eq!(Superblock::parse(&b, 1054).unwrap(), sb);
        assert!(matches!(
            Superblock::parse(&b, 1053),
            Err(FormatError::Invalid(m)) if m.contains("truncated")
        ));
        let mut bad = b;
        bad[20] ^= 1;
        assert!(matches!(
            Superblock::parse(&bad, 1054),
            Err(FormatError::Checksum { .. })
        ));
        assert_eq!(
            Superblock::parse(b"CDF\x01", 4),
            Err(FormatError::NotArchive)
        );
    }

    proptest! {
        /// Arbitrary bytes never panic the parsers.
        #[test]
        fn parsers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300),
                               lens in proptest::collection::vec(0u64..100, 0..4)) {
            let _ = Superblock::parse(&bytes, bytes.len() as u64);
            let _ = parse_index(&bytes, &lens, 64, 1 << 20);
            // With a valid checksum, the structural checks are exercised.
            let mut framed = bytes.clone();
            framed.extend(crc32c::crc32c(&bytes).to_be_bytes());
            let _ = parse_index(&framed, &lens, 64, 1 << 20);
        }
    }
}
