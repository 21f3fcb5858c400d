//! Zarr v3 sharding (`sharding_indexed`) metadata: the `configuration` of
//! the codec, parsed into how the chunked array reads its shards.
//!
//! Sharding is three jobs in three places: this file parses the codec list
//! (Zarr's dialect: the JSON); the chunked array reads inner chunks through
//! the shard indexes ([`crate::formats::chunked::shard`]); a shard that can
//! only be decoded whole is a codec of the chain
//! ([`crate::codec::sharding`]), beside the other codecs.
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
//! # What the parse decides
//!
//! Whether the array is read by its inner chunks through the shard
//! indexes (`Sharding::indexed`: the leaf grid, one [`ShardLevel`] per
//! nesting level, read by [`crate::formats::chunked::shard`]) or by whole
//! shards (`Sharding::whole`: the chain then holds a [`WholeShard`]).
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
//!   it): a shard can only be decoded whole, by [`WholeShard`], an
//!   array->bytes codec of the chain, and the array is read by its shards
//!   (`Mode::Whole`). The decoded shard is then the cache unit: one
//!   fetch and one decode per shard however many readers ask, its real
//!   size against the cache budget, the use-once rule counting its bytes
//!   inside the array (an overhanging shard's fewer). A shard is at most
//!   as large as a chunk may be (`MAX_CHUNK_BYTES`); one larger than the
//!   cache budget is decoded for each read that needs it.
//!
//! The worst-case size of a whole shard follows from the metadata (index
//! plus every inner chunk at its largest: its fixed size, or twice its
//! decoded size plus `INNER_HEADROOM` when compressed; see
//! [`crate::codec::sharding`]), and each codec after the sharding codec
//! may produce at most that much, so a decompression bomb costs one
//! bounded buffer and an error. Nested
//! levels are read by index while their lists are a sharding codec
//! alone; a level below with a longer list is the leaf, decoded whole.
//!
//! Not supported, with a clear error at open: sharding over a rectilinear
//! grid, and index codecs whose output size is not fixed (the spec
//! requires it).

use serde_json::Value;

use crate::codec::sharding::{IndexLocation, NAME, WholeShard, index_layout};
use crate::codec::transpose::Transpose;
use crate::codec::{ChunkRepr, Codec, CodecChain, from_v3, v3_extension};
use crate::dtype::DataType;
use crate::formats::chunked::shard::{ShardLevel, Sharding};

/// Deepest nesting of shards accepted (real data uses one level).
const MAX_LEVELS: usize = 8;

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
            sharding: Some(Sharding::indexed(levels, order, stored_limit)),
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
        sharding: Some(Sharding::whole(stored_limit)),
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
    let index = config.index(&block)?;
    names.push(NAME.to_string());
    let inner = config.inner.clone();
    levels.push(ShardLevel::new(
        block,
        inner.clone(),
        config.index_chain,
        index,
        config.location,
    ));
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
    let whole = WholeShard::new(
        config.inner,
        inner_chain,
        inner_limit,
        config.index_chain,
        config.location,
        outer,
    );
    let limit = whole.bounds(&repr, index_len).last().copied();
    codecs.push(Codec::ArrayToBytes(Box::new(whole)));
    Ok((codecs, limit))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::sharding::EMPTY;
    use crate::formats::chunked::shard::{Indexed, Mode};
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
