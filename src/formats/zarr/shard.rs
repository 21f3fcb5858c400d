//! Zarr v3 sharding (`sharding_indexed`): many inner chunks in one stored
//! object, found through an index.
//!
//! A shard is the stored chunk of the array's grid; inside it, inner
//! chunks of a smaller regular shape are encoded with their own codec
//! chain and concatenated in any order, and an index (a `uint64` array of
//! shape `chunks_per_shard + [2]`, `(offset, nbytes)` per inner chunk in C
//! order, encoded with `index_codecs`: `bytes` and usually `crc32c`) sits
//! at the start or end of the shard. An entry of two `2^64-1` is an empty
//! inner chunk: fill value. Inner chunks may themselves be shards
//! (nested sharding), each level with its own index.
//!
//! # How slabfs reads it
//!
//! The read path never sees shards: a sharded array is served as an array
//! chunked by its innermost chunks (the *leaf* grid, regular, since every
//! level's inner shape divides its block), so projection, the cache and
//! the parallel decode work exactly as for unsharded arrays, with inner
//! chunks as the cache unit. Only fetching a leaf chunk's bytes differs
//! ([`Sharding::fetch`]): from the shard key, each level's index (one range
//! read of its fixed size, decoded once and kept in the shared cache under
//! a per-level cache id) turns the leaf's position into a byte range of
//! the shard, and one more range read gets exactly those bytes. Reading one
//! inner chunk of a large shard thus costs two small reads (one per level
//! plus one), never the shard.
//!
//! A cached index is trusted only while reads through it work: when one
//! fails (the next level's index or the chunk does not decode, an entry
//! points outside its shard), the indexes on its way are dropped and read
//! again next time. An index without a checksum that was damaged in
//! transit decodes without complaint, and keeping it would make a
//! transient fault a permanent one.
//!
//! # Sharding inside a longer codec list
//!
//! The sharding codec is an array->bytes codec like any other, so a list
//! may put array->array codecs before it and bytes->bytes codecs after it
//! (zarr-python writes `[sharding_indexed, zstd]` for
//! `serializer=ShardingCodec(...)` with its default compressors, and
//! `[transpose, sharding_indexed]` for a transpose filter):
//!
//! - **Transposes before it, nothing after**: still read by inner chunks.
//!   The sharding codec gets the *transposed* shard (the spec's decoded
//!   representation after the array->array codecs; zarr-python's
//!   `TransposeCodec.resolve_metadata`, zarrs' "effective subchunk
//!   shape"), so `chunk_shape` and the index are in the stored axis
//!   order: the array is read by chunks of `chunk_shape` permuted back,
//!   an array tile is looked up at its permuted position (`Indexed`:
//!   a transpose of the whole array maps its shard grid onto the stored
//!   one, so the index arithmetic is unchanged), and the leaf chain is
//!   the transposes followed by the inner codecs. (zarr-python checks at
//!   creation that `chunk_shape` divides the *untransposed* shard too, so
//!   what it writes satisfies both.)
//! - **Bytes->bytes codecs after it, or other array->array codecs before
//!   it** (a compressor around the whole shard, a numcodecs filter over
//!   it): a shard can only be decoded whole, by `WholeShard`, an
//!   array->bytes codec of the chain, and the array is read by its shards
//!   (`Mode::Whole`). The decoded shard is then the cache unit: one
//!   fetch and one decode per shard however many readers ask, its real
//!   size against the cache budget, the use-once rule counting its bytes
//!   inside the array (an overhanging shard's fewer). A shard is at most
//!   as large as a chunk may be ([`MAX_CHUNK_BYTES`]); one larger than the
//!   cache budget is decoded for each read that needs it.
//!
//! The worst-case size of a whole shard follows from the metadata (index
//! plus every inner chunk at its largest: its fixed size, or twice its
//! decoded size plus `INNER_HEADROOM` when compressed), and each codec
//! after the sharding codec may produce at most that much, so a
//! decompression bomb costs one bounded buffer and an error. Nested
//! levels are read by index while their lists are a sharding codec
//! alone; a level below with a longer list is the leaf, decoded whole.
//!
//! Not supported, with a clear error at open: sharding over a rectilinear
//! grid, and index codecs whose output size is not fixed (the spec
//! requires it).

use serde_json::Value;
use std::ops::Range;

use crate::codec::transpose::Transpose;
use crate::codec::{
    ArrayToBytesCodec, BytesToBytesCodec, ChunkRepr, Codec, CodecChain, CodecError, DecodedSize,
    from_v3, v3_extension,
};
use crate::dtype::DataType;
use crate::engine::cache::{ChunkCache, ChunkKey, next_source_id};
use crate::engine::index::copy::{copy_region, fill_region};
use crate::error::{Error, Result};
use crate::formats::zarr::array::MAX_CHUNK_BYTES;
use crate::storage::{ByteRange, Store};

const NAME: &str = "sharding_indexed";

/// Deepest nesting of shards accepted (real data uses one level).
const MAX_LEVELS: usize = 8;

/// Marks an empty inner chunk in both fields of its index entry.
const EMPTY: u64 = u64::MAX;

/// Headroom of one compressed inner chunk over twice its decoded size, in
/// the worst-case size of a shard decoded whole ([`WholeShard`]): the
/// headers and trailers of every real compressor (zstd, gzip, blosc, lz4,
/// bz2, lzma) and checksum fit in it, and a shard of many tiny inner
/// chunks still gets a bound that is a small multiple of its size.
const INNER_HEADROOM: u64 = 4 << 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexLocation {
    Start,
    End,
}

/// The `configuration` of one `sharding_indexed` codec.
#[derive(Debug)]
struct Config<'a> {
    /// Shape of the inner chunks.
    inner: Vec<u64>,
    /// The inner chunks' codec list.
    codecs: &'a Value,
    index_chain: CodecChain,
    location: IndexLocation,
}

impl Config<'_> {
    /// The decoded index of a block of shape `block` (`uint64`, one
    /// `(offset, nbytes)` pair per inner chunk), and its encoded size.
    /// Checks that the inner chunks tile the block.
    fn index(&self, block: &[u64]) -> Result<(ChunkRepr, u64), String> {
        index_layout(&self.inner, &self.index_chain, block)
    }
}

fn index_layout(
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

fn parse_config(sharding: &Value) -> Result<Config<'_>, String> {
    let (_, config, _) = v3_extension(sharding)?;
    let config = config
        .and_then(Value::as_object)
        .ok_or_else(|| format!("{NAME} without a configuration"))?;
    let get = |key: &str| {
        config
            .get(key)
            .ok_or_else(|| format!("{NAME}: no \"{key}\""))
    };
    let inner: Vec<u64> = get("chunk_shape")?
        .as_array()
        .and_then(|a| a.iter().map(Value::as_u64).collect::<Option<Vec<u64>>>())
        .ok_or_else(|| format!("{NAME}: chunk_shape is not a list of integers"))?;
    let location = match config.get("index_location") {
        None => IndexLocation::End,
        Some(v) => match v.as_str() {
            Some("end") => IndexLocation::End,
            Some("start") => IndexLocation::Start,
            _ => {
                return Err(format!(
                    "{NAME}: index_location {v} is not \"start\" or \"end\""
                ));
            }
        },
    };
    let index_codecs = get("index_codecs")?
        .as_array()
        .ok_or_else(|| format!("{NAME}: index_codecs is not a list"))?;
    if index_codecs.iter().any(is_sharding) {
        return Err(format!("{NAME}: sharding inside index_codecs"));
    }
    let index_chain = plain_chain(index_codecs, &mut Vec::new())
        .map_err(|e| format!("{NAME} index_codecs: {e}"))?;
    let codecs = get("codecs")?;
    if !codecs.is_array() {
        return Err(format!("{NAME}: codecs is not a list"));
    }
    Ok(Config {
        inner,
        codecs,
        index_chain,
        location,
    })
}

/// One level of sharding whose inner chunks are read one by one.
#[derive(Debug)]
pub struct ShardLevel {
    /// Shape of the block this level divides: the shard for the first
    /// level, the enclosing level's inner chunk below it (in the stored
    /// shard's axis order).
    pub block: Vec<u64>,
    /// Shape of the inner chunks.
    pub inner: Vec<u64>,
    index_chain: CodecChain,
    index_repr: ChunkRepr,
    /// Encoded size of the index in bytes.
    index_len: u64,
    location: IndexLocation,
    /// Cache id under which this level's decoded indexes are kept.
    cache_id: u64,
}

impl ShardLevel {
    /// Inner chunks per block, per dimension.
    fn chunks_per_block(&self) -> impl Iterator<Item = u64> + '_ {
        self.block.iter().zip(&self.inner).map(|(b, i)| b / i)
    }
}

/// How the shards of an array are read.
#[derive(Debug)]
pub struct Sharding {
    mode: Mode,
    /// The largest a stored read unit (leaf chunk or shard) can be when it
    /// is, or holds, a shard decoded whole; `None` for the default rule.
    stored_limit: Option<u64>,
}

#[derive(Debug)]
enum Mode {
    /// Inner chunks are read one by one through the shard indexes: the
    /// array is read by its leaf chunks.
    Indexed(Indexed),
    /// Shards are decoded whole by the chain ([`WholeShard`]): the array
    /// is read by its shards.
    Whole,
}

/// Shards whose inner chunks are read one by one.
#[derive(Debug)]
struct Indexed {
    /// The levels, outermost first.
    levels: Vec<ShardLevel>,
    /// Axis `i` of the stored shard is axis `order[i]` of the array: the
    /// transposes before the sharding codec, composed (identity without
    /// one). The levels' shapes, and the tiles their methods take, are in
    /// the stored order: a transpose of the whole array maps its shard
    /// grid onto the stored shards' grid, so the index arithmetic of the
    /// untransposed case holds in the transposed index space.
    order: Vec<usize>,
}

/// What a v3 `codecs` list describes.
#[derive(Debug)]
pub struct Codecs {
    pub sharding: Option<Sharding>,
    /// The chain of the read unit: the leaf chunks of indexed shards, the
    /// shards when they are decoded whole, else the chunks.
    pub chain: CodecChain,
    /// Codec names for sidecars, in list order with a sharding codec's
    /// inner codecs after it.
    pub names: Vec<String>,
}

/// Parse a v3 `codecs` list of an array of `dtype`. `chunk_shape` is the
/// grid's chunk shape when the grid is regular (sharding needs it).
///
/// A sharding codec alone, or after transposes only, is read by inner
/// chunks (`Mode::Indexed`); with bytes->bytes codecs after it (the
/// shard compressed as a whole) or other array->array codecs before it,
/// by whole shards (`Mode::Whole`).
pub fn parse_codecs(
    list: &Value,
    chunk_shape: Option<&[u64]>,
    dtype: &DataType,
) -> Result<Codecs, String> {
    let codecs = list.as_array().ok_or("codecs is not a list")?;
    let mut names = Vec::new();
    let Some(k) = codecs.iter().position(is_sharding) else {
        let chain = plain_chain(codecs, &mut names)?;
        return Ok(Codecs {
            sharding: None,
            chain,
            names,
        });
    };
    let shard = chunk_shape.ok_or_else(|| format!("{NAME} needs a regular chunk grid"))?;
    let (before, after) = (&codecs[..k], &codecs[k + 1..]);
    if after.is_empty()
        && let Some(order) = transposes(before, shard.len())?
    {
        let mut levels = Vec::new();
        let stored: Vec<u64> = order.iter().map(|&a| shard[a]).collect();
        let (leaf, stored_limit) = parse_level(&codecs[k], stored, dtype, &mut levels, &mut names)?;
        let mut prefix = Vec::new();
        for c in before {
            prefix.extend(from_v3(c).map_err(|e| e.to_string())?);
        }
        let mut before_names: Vec<String> =
            prefix.iter().map(|c| codec_name(c).to_string()).collect();
        before_names.append(&mut names);
        prefix.extend(leaf);
        let chain = CodecChain::new(prefix).map_err(|e| e.to_string())?;
        return Ok(Codecs {
            sharding: Some(Sharding {
                mode: Mode::Indexed(Indexed { levels, order }),
                stored_limit,
            }),
            chain,
            names: before_names,
        });
    }
    let repr = ChunkRepr {
        shape: shard.to_vec(),
        dtype: dtype.clone(),
        fill: vec![0; dtype.size()],
    };
    let (list, stored_limit) = codec_list(codecs, &repr, 1, &mut names)?;
    let chain = CodecChain::new(list).map_err(|e| e.to_string())?;
    Ok(Codecs {
        sharding: Some(Sharding {
            mode: Mode::Whole,
            stored_limit,
        }),
        chain,
        names,
    })
}

/// The axis order of the transposes `codecs` compose to, `None` if one of
/// them is not a transpose.
fn transposes(codecs: &[Value], rank: usize) -> Result<Option<Vec<usize>>, String> {
    let mut order: Vec<usize> = (0..rank).collect();
    for c in codecs {
        let ("transpose", config, _) = v3_extension(c)? else {
            return Ok(None);
        };
        let t = Transpose::from_v3(config.unwrap_or(&Value::Null)).map_err(|e| e.to_string())?;
        if t.order().len() != rank {
            return Err(format!(
                "transpose order {:?} does not match rank {rank}",
                t.order()
            ));
        }
        // The stored axis i is axis t[i] of what the transpose got, which
        // is axis order[t[i]] of the array.
        order = t.order().iter().map(|&a| order[a]).collect();
    }
    Ok(Some(order))
}

fn is_sharding(codec: &Value) -> bool {
    matches!(v3_extension(codec), Ok((NAME, _, _)))
}

/// Parse the indexed sharding level `sharding` dividing blocks of shape
/// `block`, and the levels under it while their codec lists are a
/// sharding codec alone. Returns the leaf chunks' codecs and, if they
/// hold a shard decoded whole, its stored size limit.
fn parse_level(
    sharding: &Value,
    block: Vec<u64>,
    dtype: &DataType,
    levels: &mut Vec<ShardLevel>,
    names: &mut Vec<String>,
) -> Result<(Vec<Codec>, Option<u64>), String> {
    if levels.len() == MAX_LEVELS {
        return Err(format!("{NAME} nested more than {MAX_LEVELS} levels deep"));
    }
    let config = parse_config(sharding)?;
    let (index_repr, index_len) = config.index(&block)?;
    names.push(NAME.to_string());
    let inner = config.inner.clone();
    levels.push(ShardLevel {
        block,
        inner: inner.clone(),
        index_chain: config.index_chain,
        index_repr,
        index_len,
        location: config.location,
        cache_id: next_source_id(),
    });
    let list = config.codecs.as_array().expect("checked by parse_config");
    if let [only] = list.as_slice()
        && is_sharding(only)
    {
        return parse_level(only, inner, dtype, levels, names);
    }
    let repr = ChunkRepr {
        shape: inner,
        dtype: dtype.clone(),
        fill: vec![0; dtype.size()],
    };
    codec_list(list, &repr, levels.len() + 1, names)
}

/// The codecs of `list` applied to chunks of `repr`, a sharding codec
/// among them (at nesting `depth`) decoding its shards whole with the
/// bytes->bytes codecs after it ([`WholeShard`]); and then the largest a
/// stored chunk can be.
fn codec_list(
    list: &[Value],
    repr: &ChunkRepr,
    depth: usize,
    names: &mut Vec<String>,
) -> Result<(Vec<Codec>, Option<u64>), String> {
    let Some(k) = list.iter().position(is_sharding) else {
        let mut codecs = Vec::new();
        for c in list {
            codecs.extend(from_v3(c).map_err(|e| e.to_string())?);
        }
        names.extend(codecs.iter().map(|c| codec_name(c).to_string()));
        return Ok((codecs, None));
    };
    if depth > MAX_LEVELS {
        return Err(format!("{NAME} nested more than {MAX_LEVELS} levels deep"));
    }
    let mut codecs = Vec::new();
    let mut repr = repr.clone();
    for c in &list[..k] {
        match from_v3(c).map_err(|e| e.to_string())? {
            Some(Codec::ArrayToArray(a)) => {
                repr = a.encoded_repr(&repr).map_err(|e| e.to_string())?;
                names.push(a.name().to_string());
                codecs.push(Codec::ArrayToArray(a));
            }
            Some(other) => {
                return Err(format!(
                    "{} before {NAME} is not an array->array codec",
                    codec_name(&other)
                ));
            }
            None => {}
        }
    }
    let config = parse_config(&list[k])?;
    let (_, index_len) = config.index(&repr.shape)?;
    names.push(NAME.to_string());
    let inner_repr = ChunkRepr {
        shape: config.inner.clone(),
        ..repr.clone()
    };
    let inner_list = config.codecs.as_array().expect("checked by parse_config");
    let (inner_codecs, inner_limit) = codec_list(inner_list, &inner_repr, depth + 1, names)?;
    let inner_chain = CodecChain::new(inner_codecs).map_err(|e| e.to_string())?;
    let mut outer = Vec::new();
    for c in &list[k + 1..] {
        match from_v3(c).map_err(|e| e.to_string())? {
            Some(Codec::BytesToBytes(b)) => {
                names.push(b.name().to_string());
                outer.push(b);
            }
            Some(other) => {
                return Err(format!(
                    "{} after {NAME} is not a bytes->bytes codec",
                    codec_name(&other)
                ));
            }
            None => {}
        }
    }
    let whole = WholeShard {
        inner: config.inner,
        inner_chain,
        inner_limit,
        index_chain: config.index_chain,
        location: config.location,
        outer,
    };
    let limit = whole.bounds(&repr, index_len).last().copied();
    codecs.push(Codec::ArrayToBytes(Box::new(whole)));
    Ok((codecs, limit))
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
struct WholeShard {
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
    fn bounds(&self, shard: &ChunkRepr, index_len: u64) -> Vec<u64> {
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
        let zeros = vec![0; self.inner.len()];
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
                fill_region(&mut out, &decoded.shape, &start, &self.inner, &decoded.fill);
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
            copy_region(
                &chunk,
                &self.inner,
                &zeros,
                &mut out,
                &decoded.shape,
                &start,
                &self.inner,
                item,
            );
        }
        Ok(out)
    }
}

fn codec_name(c: &Codec) -> &'static str {
    match c {
        Codec::ArrayToArray(c) => c.name(),
        Codec::ArrayToBytes(c) => c.name(),
        Codec::BytesToBytes(c) => c.name(),
    }
}

fn plain_chain(codecs: &[Value], names: &mut Vec<String>) -> Result<CodecChain, String> {
    let mut chain = Vec::new();
    for c in codecs {
        if let Some(codec) = from_v3(c).map_err(|e| e.to_string())? {
            chain.push(codec);
        }
    }
    let chain = CodecChain::new(chain).map_err(|e| e.to_string())?;
    names.extend(chain.names().into_iter().map(String::from));
    Ok(chain)
}

impl Sharding {
    /// The shape of the chunks the array is read by: the innermost chunks
    /// of indexed shards, in the array's axis order; `None` when shards
    /// are decoded whole (the array is read by its shards).
    pub fn read_shape(&self) -> Option<Vec<u64>> {
        match &self.mode {
            Mode::Indexed(ix) => {
                let mut shape = vec![0; ix.order.len()];
                for (&a, &n) in ix.order.iter().zip(ix.leaf_shape()) {
                    shape[a] = n;
                }
                Some(shape)
            }
            Mode::Whole => None,
        }
    }

    /// Whether shards are decoded whole (the array is read by its shards).
    pub fn decodes_whole(&self) -> bool {
        matches!(self.mode, Mode::Whole)
    }

    /// The shard (chunk of the stored grid) holding read unit `tile`.
    pub fn shard_of(&self, tile: &[u64]) -> Vec<u64> {
        match &self.mode {
            Mode::Indexed(ix) => {
                let stored = ix.block_of(0, &ix.stored_tile(tile));
                let mut shard = vec![0; stored.len()];
                for (&a, s) in ix.order.iter().zip(stored) {
                    shard[a] = s;
                }
                shard
            }
            Mode::Whole => tile.to_vec(),
        }
    }

    /// The cache ids of the decoded indexes, one per indexed level.
    pub fn cache_ids(&self) -> impl Iterator<Item = u64> + '_ {
        let levels = match &self.mode {
            Mode::Indexed(ix) => ix.levels.as_slice(),
            Mode::Whole => &[],
        };
        levels.iter().map(|l| l.cache_id)
    }

    /// The stored bytes of read unit `tile` (a leaf chunk of the shard
    /// stored under `key`, or that whole shard), `None` if it is empty.
    /// `limit` caps the stored size, raised to what a shard decoded whole
    /// may legitimately take. On failure the indexes on the way are
    /// dropped from the cache ([`Sharding::forget_indexes`]).
    pub fn fetch(
        &self,
        store: &dyn Store,
        key: &str,
        tile: &[u64],
        cache: &ChunkCache,
        version: u64,
        limit: u64,
    ) -> Result<Option<Vec<u8>>> {
        let limit = self.stored_limit.map_or(limit, |l| l.max(limit));
        match &self.mode {
            Mode::Indexed(ix) => ix.fetch(store, key, tile, cache, version, limit),
            Mode::Whole => {
                let raw = store.get(key, limit)?;
                match &raw {
                    None => log::debug!(
                        "{}: shard {tile:?} missing, fill value",
                        store.describe(key)
                    ),
                    Some(raw) => log::debug!(
                        "{}: decoding shard {tile:?} whole ({} bytes)",
                        store.describe(key),
                        raw.len()
                    ),
                }
                Ok(raw)
            }
        }
    }

    /// [`fetch`](Self::fetch) of many chunks at once, each `(key of its
    /// shard, tile, limit)`: the indexes on the way as `fetch` reads them
    /// (cached), then the chunks' byte ranges, all in one
    /// [`Store::get_ranges`], which a remote store answers with one GET
    /// per run of nearby chunks of a shard, all at once.
    pub fn fetch_many(
        &self,
        store: &dyn Store,
        wanted: &[(String, Vec<u64>, u64)],
        cache: &ChunkCache,
        version: u64,
    ) -> Vec<Result<Option<Vec<u8>>>> {
        let limit = |l: u64| self.stored_limit.map_or(l, |s| s.max(l));
        match &self.mode {
            Mode::Indexed(ix) => ix.fetch_many(store, wanted, cache, version, limit),
            Mode::Whole => {
                let keys: Vec<(String, u64)> = wanted
                    .iter()
                    .map(|(k, _, l)| (k.clone(), limit(*l)))
                    .collect();
                store.get_many(&keys)
            }
        }
    }

    /// Drop the cached indexes on the way to read unit `tile` (see
    /// `Indexed::forget_indexes`); nothing for shards decoded whole,
    /// whose indexes are never kept apart from the shard.
    pub fn forget_indexes(&self, tile: &[u64], cache: &ChunkCache, version: u64) {
        if let Mode::Indexed(ix) = &self.mode {
            ix.forget_indexes(tile, cache, version);
        }
    }
}

impl Indexed {
    /// The shape of the innermost chunks, in the stored order.
    fn leaf_shape(&self) -> &[u64] {
        &self.levels.last().expect("at least one level").inner
    }

    /// Leaf `tile` of the array's grid as a tile of the stored order.
    fn stored_tile(&self, tile: &[u64]) -> Vec<u64> {
        self.order.iter().map(|&a| tile[a]).collect()
    }

    /// Global coordinates of the level-`l` block holding leaf `tile`.
    fn block_of(&self, l: usize, tile: &[u64]) -> Vec<u64> {
        let leaf = self.leaf_shape();
        tile.iter()
            .zip(leaf)
            .zip(&self.levels[l].block)
            .map(|((&t, &lf), &b)| t * lf / b)
            .collect()
    }

    /// The stored bytes of leaf chunk `tile` (of the array's grid) of the
    /// shard stored under `key`, `None` if the shard or the chunk is empty. Reads each level's
    /// index (cached under `version`) and then exactly the chunk's bytes.
    /// `limit` caps the chunk's stored size. On failure the indexes on
    /// the way are dropped from the cache ([`Indexed::forget_indexes`]).
    fn fetch(
        &self,
        store: &dyn Store,
        key: &str,
        tile: &[u64],
        cache: &ChunkCache,
        version: u64,
        limit: u64,
    ) -> Result<Option<Vec<u8>>> {
        let stored = self.stored_tile(tile);
        let r = self
            .locate(store, key, &stored, tile, cache, version, limit)
            .and_then(|at| match at {
                // A shard that vanished since its index was read: empty.
                Some((offset, len)) => store.get_range(key, ByteRange::At { offset, len }),
                None => Ok(None),
            });
        if r.is_err() {
            self.forget_indexes(tile, cache, version);
        }
        r
    }

    /// [`Sharding::fetch_many`] of indexed shards.
    fn fetch_many(
        &self,
        store: &dyn Store,
        wanted: &[(String, Vec<u64>, u64)],
        cache: &ChunkCache,
        version: u64,
        limit: impl Fn(u64) -> u64,
    ) -> Vec<Result<Option<Vec<u8>>>> {
        let mut out: Vec<Option<Result<Option<Vec<u8>>>>> = wanted.iter().map(|_| None).collect();
        // Per shard: its key, the chunks' ranges, and which of `wanted`.
        let mut shards: Vec<(String, Vec<Range<u64>>, Vec<usize>)> = Vec::new();
        for (i, (key, tile, l)) in wanted.iter().enumerate() {
            let stored = self.stored_tile(tile);
            match self.locate(store, key, &stored, tile, cache, version, limit(*l)) {
                Ok(Some((offset, len))) => {
                    let s = match shards.iter().position(|s| s.0 == *key) {
                        Some(s) => s,
                        None => {
                            shards.push((key.clone(), Vec::new(), Vec::new()));
                            shards.len() - 1
                        }
                    };
                    shards[s].1.push(offset..offset + len);
                    shards[s].2.push(i);
                }
                Ok(None) => out[i] = Some(Ok(None)),
                Err(e) => {
                    self.forget_indexes(tile, cache, version);
                    out[i] = Some(Err(e));
                }
            }
        }
        let requests: Vec<(String, Vec<Range<u64>>)> = shards
            .iter()
            .map(|(k, r, _)| (k.clone(), r.clone()))
            .collect();
        for ((key, _, which), got) in shards.iter().zip(store.get_ranges(&requests)) {
            match got {
                Ok(Some(parts)) => {
                    for (&i, part) in which.iter().zip(parts) {
                        out[i] = Some(Ok(Some(part)));
                    }
                }
                // A shard that vanished since its index was read: empty.
                Ok(None) => which.iter().for_each(|&i| out[i] = Some(Ok(None))),
                Err(e) => {
                    let detail = e.to_string();
                    for &i in which {
                        self.forget_indexes(&wanted[i].1, cache, version);
                        out[i] = Some(Err(Error::Io {
                            path: store.describe(key),
                            source: std::io::Error::other(detail.clone()),
                        }));
                    }
                }
            }
        }
        out.into_iter()
            .map(|o| o.expect("every chunk answered"))
            .collect()
    }

    /// Drop the cached indexes on the way to leaf chunk `tile`. Called
    /// when a read through them failed: an index without a checksum may
    /// itself be what is wrong (a bit flipped on its way from storage
    /// decodes to offsets that point at the wrong bytes), and keeping it
    /// would turn one transient fault into a shard that fails until the
    /// cache evicts it. The next read of the shard reads its index again.
    fn forget_indexes(&self, tile: &[u64], cache: &ChunkCache, version: u64) {
        let stored = self.stored_tile(tile);
        for (l, level) in self.levels.iter().enumerate() {
            cache.forget(&ChunkKey {
                source: level.cache_id,
                version,
                coords: self.block_of(l, &stored).into(),
            });
        }
    }

    /// Where leaf `tile` (in the stored order) lies in the shard stored
    /// under `key`: `(offset, len)`, `None` if the shard or the chunk is
    /// empty. Reads each level's index (cached under `version`). `shown`
    /// is the same tile in the array's order, for messages.
    #[allow(clippy::too_many_arguments)]
    fn locate(
        &self,
        store: &dyn Store,
        key: &str,
        tile: &[u64],
        shown: &[u64],
        cache: &ChunkCache,
        version: u64,
        limit: u64,
    ) -> Result<Option<(u64, u64)>> {
        let leaf = self.leaf_shape();
        let corrupt = |detail: String| Error::Chunk {
            path: store.describe(key),
            chunk: format!("{shown:?}"),
            source: CodecError::corrupt(NAME, detail).into(),
        };
        // The byte range of the current block inside the stored value;
        // `None` for the whole value (the shard).
        let mut range: Option<(u64, u64)> = None;
        for (l, level) in self.levels.iter().enumerate() {
            let block = self.block_of(l, tile);
            let index_key = ChunkKey {
                source: level.cache_id,
                version,
                coords: block.clone().into(),
            };
            let index = cache.get_or_load(&index_key, || {
                self.load_index(level, store, key, range, &block)
            })?;
            let Some(index) = index else {
                return Ok(None);
            };
            // C-order position of the inner chunk within its block.
            let flat = tile
                .iter()
                .zip(leaf)
                .zip(&level.inner)
                .zip(level.chunks_per_block())
                .fold(0u64, |acc, (((&t, &lf), &i), per)| {
                    acc * per + (t * lf / i) % per
                }) as usize;
            let entry = |k: usize| {
                let at = 16 * flat + 8 * k;
                u64::from_ne_bytes(index[at..at + 8].try_into().expect("8 bytes"))
            };
            let (offset, nbytes) = (entry(0), entry(1));
            if offset == EMPTY && nbytes == EMPTY {
                log::debug!(
                    "{}: inner chunk {shown:?} is empty, fill value",
                    store.describe(key)
                );
                return Ok(None);
            }
            let end = offset
                .checked_add(nbytes)
                .ok_or_else(|| corrupt(format!("index entry ({offset}, {nbytes}) overflows")))?;
            if let Some((_, len)) = range
                && end > len
            {
                return Err(corrupt(format!(
                    "index entry ({offset}, {nbytes}) is outside its {len}-byte shard"
                )));
            }
            let base = range.map_or(0, |(start, _)| start);
            range = Some((base + offset, nbytes));
        }
        let (offset, len) = range.expect("at least one level");
        if len > limit {
            return Err(Error::TooLarge {
                path: store.describe(key),
                size: len,
                limit,
            });
        }
        log::debug!(
            "{}: inner chunk {shown:?} at bytes {offset}..{}",
            store.describe(key),
            offset + len
        );
        Ok(Some((offset, len)))
    }

    /// Read and decode one index of `level` for the block at `range` of
    /// the value `key` (the whole value when `None`).
    fn load_index(
        &self,
        level: &ShardLevel,
        store: &dyn Store,
        key: &str,
        range: Option<(u64, u64)>,
        block: &[u64],
    ) -> Result<Option<Vec<u8>>> {
        let n = level.index_len;
        let corrupt = |detail: String| Error::Chunk {
            path: store.describe(key),
            chunk: format!("shard index of block {block:?}"),
            source: CodecError::corrupt(NAME, detail).into(),
        };
        let at = match (range, level.location) {
            (None, IndexLocation::Start) => ByteRange::At { offset: 0, len: n },
            (None, IndexLocation::End) => ByteRange::Suffix(n),
            (Some((_, len)), _) if len < n => {
                return Err(corrupt(format!(
                    "a {len}-byte inner shard cannot hold its {n}-byte index"
                )));
            }
            (Some((offset, _)), IndexLocation::Start) => ByteRange::At { offset, len: n },
            (Some((offset, len)), IndexLocation::End) => ByteRange::At {
                offset: offset + len - n,
                len: n,
            },
        };
        // An inner shard must lie inside the stored value. Reading an
        // index at its end checks that; one at its start does not, so a
        // zero-length read at the inner shard's end does (found by the
        // `shard_index` fuzz target: an entry claiming bytes past the end
        // of the shard was accepted whenever the entries under it pointed
        // inside). No overflow: `fetch` checked every entry's end.
        if let (Some((offset, len)), IndexLocation::Start) = (range, level.location) {
            let end = ByteRange::At {
                offset: offset + len,
                len: 0,
            };
            if store.get_range(key, end)?.is_none() {
                return Ok(None);
            }
        }
        let Some(raw) = store.get_range(key, at)? else {
            return Ok(None);
        };
        let index = level
            .index_chain
            .decode(raw, &level.index_repr)
            .map_err(|source| Error::Chunk {
                path: store.describe(key),
                chunk: format!("shard index of block {block:?}"),
                source: source.into(),
            })?;
        log::debug!("{}: read the shard index of {block:?}", store.describe(key));
        Ok(Some(index))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sharded(inner: &[u64], location: &str, inner_codecs: Value) -> Value {
        json!([{"name": "sharding_indexed", "configuration": {
            "chunk_shape": inner,
            "codecs": inner_codecs,
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                             {"name": "crc32c"}],
            "index_location": location}}])
    }

    fn bytes() -> Value {
        json!([{"name": "bytes", "configuration": {"endian": "little"}}])
    }

    /// `list` with `codec` added at its end (`front` false) or start.
    fn with(mut list: Value, codec: Value, front: bool) -> Value {
        let a = list.as_array_mut().unwrap();
        if front {
            a.insert(0, codec);
        } else {
            a.push(codec);
        }
        list
    }

    fn indexed(s: &Sharding) -> &Indexed {
        match &s.mode {
            Mode::Indexed(ix) => ix,
            Mode::Whole => panic!("decoded whole"),
        }
    }

    #[test]
    fn parses_levels_and_index_size() {
        let u16 = &DataType::UInt16;
        let c = parse_codecs(&sharded(&[2, 5], "end", bytes()), Some(&[4, 10]), u16).unwrap();
        let s = c.sharding.unwrap();
        assert_eq!(s.read_shape().unwrap(), [2, 5]);
        // 2x2 inner chunks, 16 bytes each, plus the crc32c.
        assert_eq!(indexed(&s).levels[0].index_len, 4 * 16 + 4);
        assert_eq!(c.names, ["sharding_indexed", "bytes"]);

        let nested = sharded(&[2, 5], "start", sharded(&[1, 5], "end", bytes()));
        let c = parse_codecs(&nested, Some(&[4, 10]), u16).unwrap();
        let s = c.sharding.unwrap();
        let ix = indexed(&s);
        assert_eq!(ix.levels.len(), 2);
        assert_eq!(s.read_shape().unwrap(), [1, 5]);
        assert_eq!(s.shard_of(&[3, 1]), vec![0, 0]);
        assert_eq!(s.shard_of(&[4, 1]), vec![1, 0]);
        assert_eq!(s.shard_of(&[4, 2]), vec![1, 1]);
        assert_eq!(ix.block_of(1, &[3, 1]), vec![1, 1]);
    }

    /// A transpose before the sharding codec: the inner chunk shape is of
    /// the transposed shard (the spec's decoded representation the
    /// sharding codec gets; zarrs' "effective subchunk shape",
    /// zarr-python's `TransposeCodec.resolve_metadata`), so the array is
    /// read by its inverse permutation, and a tile of the array is found
    /// at the permuted position of the permuted shard.
    #[test]
    fn a_transpose_before_sharding_permutes_the_inner_grid() {
        let t = json!({"name": "transpose", "configuration": {"order": [2, 0, 1]}});
        // Shards (4, 12, 6) stored as (6, 4, 12), inner chunks (2, 2, 3)
        // of that: (2, 3, 2) of the array.
        let list = with(sharded(&[2, 2, 3], "end", bytes()), t.clone(), true);
        let c = parse_codecs(&list, Some(&[4, 12, 6]), &DataType::Float32).unwrap();
        assert_eq!(c.names, ["transpose", "sharding_indexed", "bytes"]);
        assert_eq!(c.chain.names(), ["transpose", "bytes"]);
        let s = c.sharding.unwrap();
        assert_eq!(s.read_shape().unwrap(), [2, 3, 2]);
        let ix = indexed(&s);
        assert_eq!(ix.order, [2, 0, 1]);
        assert_eq!(ix.levels[0].block, [6, 4, 12]);
        // Array tile (3, 5, 4) covers elements (6.., 15.., 8..): shard
        // (1, 1, 1); stored tile (4, 3, 5).
        assert_eq!(s.shard_of(&[3, 5, 4]), [1, 1, 1]);
        assert_eq!(ix.stored_tile(&[3, 5, 4]), [4, 3, 5]);
        assert_eq!(ix.block_of(0, &[4, 3, 5]), [1, 1, 1]);
        // Two transposes compose: [1, 0] then [1, 0] is the identity.
        let t10 = json!({"name": "transpose", "configuration": {"order": [1, 0]}});
        let list = with(sharded(&[2, 5], "end", bytes()), t10.clone(), true);
        let list = with(list, t10, true);
        let c = parse_codecs(&list, Some(&[4, 10]), &DataType::Float32).unwrap();
        assert_eq!(indexed(c.sharding.as_ref().unwrap()).order, [0, 1]);
        // The inner shape must divide the transposed shard: (2, 5) does
        // not divide (10, 4).
        let list = with(
            sharded(&[2, 5], "end", bytes()),
            json!({"name": "transpose", "configuration": {"order": [1, 0]}}),
            true,
        );
        let err = parse_codecs(&list, Some(&[4, 10]), &DataType::Float32).unwrap_err();
        assert!(err.contains("[10, 4]"), "{err}");
        let bad = with(sharded(&[2, 5], "end", bytes()), t, true);
        assert!(parse_codecs(&bad, Some(&[4, 10]), &DataType::Float32).is_err());
    }

    /// A 2x2 shard of 1x2 `u16` inner chunks, the index at `location`:
    /// inner chunk (0, 0) = [1, 2], (1, 0) empty, (0, 1) = [3, 4], (1, 1)
    /// = [5, 6], stored out of order.
    fn shard_bytes(location: IndexLocation) -> Vec<u8> {
        shard_with_first_entry(location, None)
    }

    /// [`shard_bytes`] with the first index entry replaced (checksum
    /// kept valid).
    fn shard_with_first_entry(location: IndexLocation, first: Option<(u64, u64)>) -> Vec<u8> {
        let body: Vec<u8> = [3u16, 4, 1, 2, 5, 6]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let index_len = 4 * 16 + 4;
        let base = match location {
            IndexLocation::Start => index_len,
            IndexLocation::End => 0,
        };
        let entries = [
            first.unwrap_or((base + 4, 4)),
            (base, 4),
            (EMPTY, EMPTY),
            (base + 8, 4),
        ];
        let mut index: Vec<u8> = entries
            .iter()
            .flat_map(|&(o, n)| [o.to_le_bytes(), n.to_le_bytes()].concat())
            .collect();
        let crc = crc32c::crc32c(&index);
        index.extend(crc.to_le_bytes());
        match location {
            IndexLocation::Start => [index, body].concat(),
            IndexLocation::End => [body, index].concat(),
        }
    }

    fn zstd_frame(data: &[u8]) -> Vec<u8> {
        ::zstd::bulk::compress(data, 1).unwrap()
    }

    #[test]
    fn shards_compressed_whole_decode_with_their_index_at_either_end() {
        let zstd = json!({"name": "zstd", "configuration": {"level": 1}});
        let repr = ChunkRepr {
            shape: vec![2, 4],
            dtype: DataType::UInt16,
            fill: 9u16.to_ne_bytes().to_vec(),
        };
        let want: Vec<u8> = [1u16, 2, 3, 4, 9, 9, 5, 6]
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect();
        for (name, location) in [("start", IndexLocation::Start), ("end", IndexLocation::End)] {
            let list = with(sharded(&[1, 2], name, bytes()), zstd.clone(), false);
            let c = parse_codecs(&list, Some(&[2, 4]), &DataType::UInt16).unwrap();
            assert!(matches!(c.sharding.as_ref().unwrap().mode, Mode::Whole));
            assert!(c.sharding.unwrap().read_shape().is_none());
            assert_eq!(c.names, ["sharding_indexed", "bytes", "zstd"]);
            c.chain.validate(&repr).unwrap();
            let stored = zstd_frame(&shard_bytes(location));
            assert_eq!(c.chain.decode(stored, &repr).unwrap(), want, "{name}");
        }
    }

    /// A damaged shard is an error of its decode, never a panic or wrong
    /// bytes: a bad compressed stream, a checksum mismatch of the index,
    /// an entry pointing out of the shard, a shard too short for its
    /// index, and a decompression bomb, stopped at the shard's worst-case
    /// size known from the metadata.
    #[test]
    fn damaged_and_oversized_shards_are_errors() {
        let zstd = json!({"name": "zstd", "configuration": {"level": 1}});
        let list = with(sharded(&[1, 2], "end", bytes()), zstd, false);
        let c = parse_codecs(&list, Some(&[2, 4]), &DataType::UInt16).unwrap();
        let repr = ChunkRepr {
            shape: vec![2, 4],
            dtype: DataType::UInt16,
            fill: vec![0; 2],
        };
        let good = shard_bytes(IndexLocation::End);
        let err = |stored: Vec<u8>| c.chain.decode(stored, &repr).unwrap_err().to_string();

        let mut frame = zstd_frame(&good);
        let n = frame.len();
        frame.truncate(n - 3);
        assert!(err(frame).contains("zstd"));
        let mut bad_crc = good.clone();
        let n = bad_crc.len();
        bad_crc[n - 10] ^= 1;
        assert!(err(zstd_frame(&bad_crc)).contains("crc32c"));
        let end = IndexLocation::End;
        let outside = shard_with_first_entry(end, Some((100, 4)));
        assert!(err(zstd_frame(&outside)).contains("outside"));
        let overflow = shard_with_first_entry(end, Some((u64::MAX - 1, 4)));
        assert!(err(zstd_frame(&overflow)).contains("outside"));
        assert!(err(zstd_frame(&good[..40])).contains("cannot hold"));

        // The worst case: index (68 bytes) + 4 inner chunks of 4 bytes.
        let Mode::Whole = c.sharding.as_ref().unwrap().mode else {
            panic!("indexed");
        };
        assert_eq!(
            c.sharding.as_ref().unwrap().stored_limit,
            Some(2 * 84 + (64 << 10))
        );
        let bomb = zstd_frame(&vec![0u8; 1 << 20]);
        let e = err(bomb);
        assert!(e.contains("exceeds the expected 84 bytes"), "{e}");
    }

    #[test]
    fn a_sharded_inner_chunk_compressed_whole_is_the_leaf() {
        // Shards (4, 10) of inner shards (2, 5), each [sharding(1, 5), gzip]:
        // the outer level reads inner shards one by one, each decoded whole.
        let gzip = json!({"name": "gzip", "configuration": {"level": 1}});
        let inner = with(sharded(&[1, 5], "end", bytes()), gzip, false);
        let list = sharded(&[2, 5], "end", inner);
        let c = parse_codecs(&list, Some(&[4, 10]), &DataType::UInt16).unwrap();
        let s = c.sharding.unwrap();
        assert_eq!(s.read_shape().unwrap(), [2, 5]);
        assert_eq!(indexed(&s).levels.len(), 1);
        assert!(s.stored_limit.is_some());
        assert_eq!(
            c.names,
            ["sharding_indexed", "sharding_indexed", "bytes", "gzip"]
        );
        assert_eq!(c.chain.names(), ["sharding_indexed"]);
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        let u16 = &DataType::UInt16;
        let err = |list: Value, shape: Option<&[u64]>| parse_codecs(&list, shape, u16).unwrap_err();
        assert!(err(sharded(&[3, 5], "end", bytes()), Some(&[4, 10])).contains("divide"));
        assert!(err(sharded(&[2, 5], "middle", bytes()), Some(&[4, 10])).contains("start"));
        assert!(err(sharded(&[2, 5], "end", bytes()), None).contains("regular"));
        let gzip = json!({"name": "gzip", "configuration": {"level": 1}});
        // Codecs of the wrong family around the sharding codec.
        let err_gzip_first = err(
            with(sharded(&[2, 5], "end", bytes()), gzip.clone(), true),
            Some(&[4, 10]),
        );
        assert!(
            err_gzip_first.contains("not an array->array"),
            "{err_gzip_first}"
        );
        let two = with(sharded(&[2, 5], "end", bytes()), bytes()[0].clone(), false);
        assert!(err(two, Some(&[4, 10])).contains("not a bytes->bytes"));
        let compressed_index = json!([{"name": "sharding_indexed", "configuration": {
            "chunk_shape": [2, 5], "codecs": bytes(),
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                             {"name": "zstd", "configuration": {"level": 1}}]}}]);
        assert!(err(compressed_index, Some(&[4, 10])).contains("fixed"));
    }
}
