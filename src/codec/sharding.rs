//! The whole-shard codec: Zarr v3 `sharding_indexed` as an array->bytes
//! codec that decodes a shard at once ([spec]).
//!
//! A shard is one stored object holding many inner chunks of a smaller
//! regular shape, each encoded with its own codec chain and concatenated in
//! any order, and an index (a `uint64` array of shape
//! `chunks_per_shard + [2]`, `(offset, nbytes)` per inner chunk in C order,
//! encoded with `index_codecs`: `bytes` and usually `crc32c`) at the start
//! or end of the shard. An entry of two `2^64-1` is an empty inner chunk:
//! fill value.
//!
//! Most sharded arrays are not read through this codec: while the sharding
//! codec is alone in its list (or after transposes only), the chunked array
//! reads inner chunks one by one through the index
//! (`formats::chunked::shard`), and a shard is never decoded whole. This
//! file is for the lists where that is impossible: bytes->bytes codecs
//! after the sharding codec (a compressor or checksum around the whole
//! shard, as zarr-python writes for `serializer=ShardingCodec(...)` with its
//! default compressors), an array->array codec other than a transpose
//! before it, and a sharded inner chunk inside such a shard. Then the shard
//! is one chunk of the array and [`WholeShard`] decodes it like any codec
//! of the chain.
//!
//! It has no entry in the [`registry`](super::registry): its configuration
//! holds nested codec lists and decides how the array is read, so Zarr's
//! metadata (`formats::zarr::shard`) parses it and builds a [`WholeShard`]
//! with [`WholeShard::new`]; this file knows only
//! the shard's byte layout, which the index fetch shares
//! ([`index_layout`], [`IndexLocation`], [`EMPTY`]).
//!
//! The worst-case size of a whole shard follows from the metadata (index
//! plus every inner chunk at its largest: its fixed size, or twice its
//! decoded size plus [`INNER_HEADROOM`] when compressed), and each codec
//! after the sharding codec may produce at most that much, so a
//! decompression bomb costs one bounded buffer and an error.
//!
//! An inner chunk is placed into the decoded shard by `place`, a copy of
//! whole rows written here rather than the engine's general strided copy
//! (`engine::index::copy`): codec and engine are peers, and the case is
//! simpler (the source is always a whole inner chunk, at a position
//! aligned to the inner grid).
//!
//! [spec]: https://zarr-specs.readthedocs.io/en/latest/v3/codecs/sharding-indexed/

use super::MAX_CHUNK_BYTES;
use super::{ArrayToBytesCodec, BytesToBytesCodec, ChunkRepr, CodecChain, CodecError, DecodedSize};
use crate::dtype::DataType;

/// The codec's name in Zarr v3 metadata.
pub const NAME: &str = "sharding_indexed";

/// Marks an empty inner chunk in both fields of its index entry.
pub const EMPTY: u64 = u64::MAX;

/// Headroom of one compressed inner chunk over twice its decoded size, in
/// the worst-case size of a shard decoded whole ([`WholeShard`]): the
/// headers and trailers of every real compressor (zstd, gzip, blosc, lz4,
/// bz2, lzma) and checksum fit in it, and a shard of many tiny inner
/// chunks still gets a bound that is a small multiple of its size.
pub const INNER_HEADROOM: u64 = 4 << 10;

/// Where a shard keeps its index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexLocation {
    Start,
    End,
}

/// The decoded index of a block of shape `block` divided into inner chunks
/// of shape `inner` (`uint64`, one `(offset, nbytes)` pair per inner chunk)
/// and its encoded size under `index_chain`. Checks that the inner chunks
/// tile the block and that the index has a fixed, bounded size.
pub fn index_layout(
    inner: &[u64],
    index_chain: &CodecChain,
    block: &[u64],
) -> Result<(ChunkRepr, u64), String> {
    if inner.len() != block.len() || inner.iter().zip(block).any(|(&i, &b)| i == 0 || b % i != 0) {
        return Err(format!(
            "{NAME}: inner chunk shape {inner:?} does not divide the shard shape {block:?}"
        ));
    }
    let mut index_shape: Vec<u64> = block.iter().zip(inner).map(|(b, i)| b / i).collect();
    index_shape.push(2);
    let index_repr = ChunkRepr {
        shape: index_shape,
        dtype: DataType::UInt64,
        fill: EMPTY.to_ne_bytes().to_vec(),
    };
    // 16 bytes per inner chunk, decoded whole and cached: an index past
    // the chunk size limit (or past 2^64 bytes) is no real shard, and
    // must not pass for an index codec problem below.
    if index_repr
        .nbytes()
        .is_none_or(|n| n as u64 > MAX_CHUNK_BYTES)
    {
        let count = &index_repr.shape[..index_repr.shape.len() - 1];
        return Err(format!(
            "{NAME}: shards of {count:?} inner chunks need an index larger than the {} GiB \
             limit",
            MAX_CHUNK_BYTES >> 30
        ));
    }
    let index_len = index_chain.encoded_size(&index_repr).ok_or_else(|| {
        format!("{NAME}: index_codecs must have a fixed output size (no compressor)")
    })? as u64;
    Ok((index_repr, index_len))
}

/// A `sharding_indexed` codec whose shards are decoded whole, together
/// with the bytes->bytes codecs after it in its list: an array->bytes
/// codec of the chain like `bytes`.
///
/// Used where inner chunks cannot be read one by one: a compressor (or
/// checksum) after the sharding codec wraps the whole shard, so the index
/// and the inner chunks are only found once the shard is decompressed;
/// an array->array codec other than a transpose before it (a numcodecs
/// filter) works on the whole shard; and a nested shard inside such one.
/// The decoded shard is the cache unit: one decode per shard, its real
/// size against the budget, and the use-once rule counting its bytes.
///
/// Decoding: undo the bytes->bytes codecs, each allowed at most its
/// worst-case output ([`WholeShard::bounds`]); decode the index at the
/// start or end of the result; decode every non-empty inner chunk with
/// the inner chain (which may hold a nested `WholeShard`) into its place
/// in the C-order shard; empty ones are the fill value. A damaged shard
/// is a [`CodecError`] for its reads, never a panic.
#[derive(Debug)]
pub struct WholeShard {
    inner: Vec<u64>,
    inner_chain: CodecChain,
    /// Largest stored inner chunk when inner chunks are themselves shards
    /// decoded whole.
    inner_limit: Option<u64>,
    index_chain: CodecChain,
    location: IndexLocation,
    /// The bytes->bytes codecs after the sharding codec, in encoding order.
    outer: Vec<Box<dyn BytesToBytesCodec>>,
}

impl WholeShard {
    /// The codec of a sharding level whose inner chunks (of shape `inner`)
    /// are encoded with `inner_chain` (each stored in at most `inner_limit`
    /// bytes when they are themselves shards decoded whole), its index
    /// with `index_chain` at `location`, and the whole shard then with
    /// `outer` (the bytes->bytes codecs after it, in encoding order).
    pub fn new(
        inner: Vec<u64>,
        inner_chain: CodecChain,
        inner_limit: Option<u64>,
        index_chain: CodecChain,
        location: IndexLocation,
        outer: Vec<Box<dyn BytesToBytesCodec>>,
    ) -> WholeShard {
        WholeShard {
            inner,
            inner_chain,
            inner_limit,
            index_chain,
            location,
            outer,
        }
    }

    fn inner_repr(&self, shard: &ChunkRepr) -> ChunkRepr {
        ChunkRepr {
            shape: self.inner.clone(),
            ..shard.clone()
        }
    }

    /// The most bytes each stage of a stored shard of `shard` can take:
    /// `[0]` the shard as the sharding codec wrote it (its index plus
    /// every inner chunk at its largest), `[j + 1]` that after the
    /// bytes->bytes codec `outer[j]` (its fixed size for a checksum, twice
    /// as much plus 64 KiB for a compressor, as for unsharded chunks);
    /// the last is the stored shard's. Saturating.
    pub fn bounds(&self, shard: &ChunkRepr, index_len: u64) -> Vec<u64> {
        let inner = self.inner_repr(shard);
        let count: u64 = shard
            .shape
            .iter()
            .zip(&self.inner)
            .map(|(b, i)| b / i)
            .product();
        let inner_bytes = inner.nbytes().unwrap_or(usize::MAX) as u64;
        let one = match self.inner_chain.encoded_size(&inner) {
            Some(n) => n as u64,
            None => inner_bytes
                .saturating_mul(2)
                .saturating_add(INNER_HEADROOM)
                .max(self.inner_limit.unwrap_or(0)),
        };
        let mut bounds = vec![index_len.saturating_add(count.saturating_mul(one))];
        for c in &self.outer {
            let last = *bounds.last().expect("non-empty");
            let next = usize::try_from(last)
                .ok()
                .and_then(|n| c.encoded_size(n))
                .map_or(last.saturating_mul(2).saturating_add(64 << 10), |n| {
                    n as u64
                });
            bounds.push(next);
        }
        bounds
    }

    /// The decoded index of shards of `shard` and its stored size.
    fn index(&self, shard: &ChunkRepr) -> Result<(ChunkRepr, u64), CodecError> {
        index_layout(&self.inner, &self.index_chain, &shard.shape).map_err(CodecError::Chain)
    }
}

impl ArrayToBytesCodec for WholeShard {
    fn name(&self) -> &'static str {
        NAME
    }

    fn encoded_size(&self, _decoded: &ChunkRepr) -> Option<usize> {
        None
    }

    fn validate(&self, decoded: &ChunkRepr) -> Result<(), CodecError> {
        self.index(decoded)?;
        self.inner_chain.validate(&self.inner_repr(decoded))
    }

    fn decode(&self, encoded: Vec<u8>, decoded: &ChunkRepr) -> Result<Vec<u8>, CodecError> {
        let (index_repr, index_len) = self.index(decoded)?;
        let bounds = self.bounds(decoded, index_len);
        let mut blob = encoded;
        for (j, c) in self.outer.iter().enumerate().rev() {
            let limit = DecodedSize::AtMost(usize::try_from(bounds[j]).unwrap_or(usize::MAX));
            blob = c.decode(blob, limit)?;
            limit.check(c.name(), blob.len())?;
        }
        let len = blob.len() as u64;
        if len < index_len {
            return Err(CodecError::corrupt(
                NAME,
                format!("a {len}-byte shard cannot hold its {index_len}-byte index"),
            ));
        }
        let raw_index = match self.location {
            IndexLocation::Start => &blob[..index_len as usize],
            IndexLocation::End => &blob[(len - index_len) as usize..],
        };
        let index = self.index_chain.decode(raw_index.to_vec(), &index_repr)?;
        let item = decoded.dtype.size();
        let nbytes = decoded.nbytes().ok_or_else(|| {
            CodecError::Chain(format!("shard shape {:?} is too large", decoded.shape))
        })?;
        let mut out = vec![0u8; nbytes];
        let inner = self.inner_repr(decoded);
        let per: Vec<u64> = index_repr.shape[..index_repr.shape.len() - 1].to_vec();
        let mut position = vec![0u64; per.len()];
        for (k, entry) in index.chunks_exact(16).enumerate() {
            if k > 0 {
                // Odometer over the inner chunks, C order like the index.
                for d in (0..per.len()).rev() {
                    position[d] += 1;
                    if position[d] < per[d] {
                        break;
                    }
                    position[d] = 0;
                }
            }
            let field =
                |i: usize| u64::from_ne_bytes(entry[8 * i..8 * i + 8].try_into().expect("8"));
            let (offset, size) = (field(0), field(1));
            let start: Vec<u64> = position
                .iter()
                .zip(&self.inner)
                .map(|(p, i)| p * i)
                .collect();
            if offset == EMPTY && size == EMPTY {
                place(
                    &mut out,
                    &decoded.shape,
                    &start,
                    &self.inner,
                    Source::Fill(&decoded.fill),
                );
                continue;
            }
            let end = offset
                .checked_add(size)
                .filter(|&e| e <= len)
                .ok_or_else(|| {
                    CodecError::corrupt(
                        NAME,
                        format!(
                            "index entry ({offset}, {size}) of inner chunk {position:?} is outside \
                         its {len}-byte shard"
                        ),
                    )
                })?;
            let chunk = self
                .inner_chain
                .decode(blob[offset as usize..end as usize].to_vec(), &inner)?;
            if chunk.len() != inner.nbytes().unwrap_or(usize::MAX) {
                return Err(CodecError::corrupt(
                    NAME,
                    format!("inner chunk {position:?} decoded to {} bytes", chunk.len()),
                ));
            }
            place(
                &mut out,
                &decoded.shape,
                &start,
                &self.inner,
                Source::Chunk(&chunk, item),
            );
        }
        Ok(out)
    }
}

/// What [`place`] writes: a decoded inner chunk (elements of the given
/// size), or the fill value (one element) everywhere.
enum Source<'a> {
    Chunk(&'a [u8], usize),
    Fill(&'a [u8]),
}

/// Write a whole inner chunk of shape `inner` at element `start` of the
/// C-order shard `out` of shape `shape`, one contiguous row (the inner
/// chunk's last dimension) at a time. The caller checked that the inner
/// chunks tile the shard ([`index_layout`]) and that a chunk has its
/// shape's size, so every row lies inside both buffers.
fn place(out: &mut [u8], shape: &[u64], start: &[u64], inner: &[u64], src: Source<'_>) {
    let item = match src {
        Source::Chunk(_, item) => item,
        Source::Fill(fill) => fill.len(),
    };
    let rank = shape.len();
    let row = inner.last().map_or(1, |&n| n as usize) * item;
    let pattern: Vec<u8> = match src {
        Source::Fill(fill) => fill.iter().copied().cycle().take(row).collect(),
        Source::Chunk(..) => Vec::new(),
    };
    // C-order strides of the shard, in elements.
    let mut strides = vec![1u64; rank];
    for d in (0..rank.saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    let rows: u64 = inner[..rank.saturating_sub(1)].iter().product();
    let mut position = vec![0u64; rank.saturating_sub(1)];
    for r in 0..rows as usize {
        let at = (0..rank)
            .map(|d| (start[d] + position.get(d).copied().unwrap_or(0)) * strides[d])
            .sum::<u64>() as usize
            * item;
        let dst = &mut out[at..at + row];
        match src {
            Source::Chunk(chunk, _) => dst.copy_from_slice(&chunk[r * row..(r + 1) * row]),
            Source::Fill(_) => dst.copy_from_slice(&pattern),
        }
        // Odometer over the inner chunk's rows, C order.
        for d in (0..position.len()).rev() {
            position[d] += 1;
            if position[d] < inner[d] {
                break;
            }
            position[d] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`place`] against an element-by-element reference: every inner
    /// chunk of a 3-D shard placed, each element where C order puts it.
    #[test]
    fn place_puts_every_element_where_c_order_says() {
        let shape = [4u64, 6, 5];
        let inner = [2u64, 3, 5];
        let item = 2;
        let mut out = vec![0u8; 4 * 6 * 5 * item];
        let mut want = out.clone();
        for (i0, i1) in [(0u64, 0u64), (0, 1), (1, 0), (1, 1)] {
            let start = [i0 * 2, i1 * 3, 0];
            let chunk: Vec<u8> = (0..2 * 3 * 5)
                .flat_map(|e: u64| [(i0 * 2 + i1) as u8, e as u8])
                .collect();
            if (i0, i1) == (1, 0) {
                place(&mut out, &shape, &start, &inner, Source::Fill(&[7, 9]));
            } else {
                place(
                    &mut out,
                    &shape,
                    &start,
                    &inner,
                    Source::Chunk(&chunk, item),
                );
            }
            for a in 0..2 {
                for b in 0..3 {
                    for c in 0..5 {
                        let e = ((a * 3 + b) * 5 + c) as usize;
                        let at = (((start[0] + a) * 6 + start[1] + b) * 5 + c) as usize * item;
                        let v = if (i0, i1) == (1, 0) {
                            [7, 9]
                        } else {
                            [chunk[e * item], chunk[e * item + 1]]
                        };
                        want[at..at + item].copy_from_slice(&v);
                    }
                }
            }
        }
        assert_eq!(out, want);
    }

    /// A 0-d shard has one element and one inner chunk.
    #[test]
    fn place_handles_rank_zero() {
        let mut out = vec![0u8; 4];
        place(&mut out, &[], &[], &[], Source::Chunk(&[1, 2, 3, 4], 4));
        assert_eq!(out, [1, 2, 3, 4]);
    }
}
