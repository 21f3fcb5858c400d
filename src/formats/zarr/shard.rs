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
//! Not supported, with a clear error at open: sharding combined with other
//! codecs at the same level (array->array codecs before it, or a
//! compressor around the whole shard), sharding over a rectilinear grid,
//! and index codecs whose output size is not fixed (the spec requires it).

use serde_json::Value;

use crate::codec::{ChunkRepr, CodecChain, CodecError, from_v3, v3_extension};
use crate::dtype::DataType;
use crate::engine::cache::{ChunkCache, ChunkKey, next_source_id};
use crate::error::{Error, Result};
use crate::storage::store::{ByteRange, Store};

const NAME: &str = "sharding_indexed";

/// Deepest nesting of shards accepted (real data uses one level).
const MAX_LEVELS: usize = 8;

/// Marks an empty inner chunk in both fields of its index entry.
const EMPTY: u64 = u64::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexLocation {
    Start,
    End,
}

/// One level of sharding.
#[derive(Debug)]
pub struct ShardLevel {
    /// Shape of the block this level divides: the shard for the first
    /// level, the enclosing level's inner chunk below it.
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

/// The sharding levels of an array, outermost first.
#[derive(Debug)]
pub struct Sharding {
    levels: Vec<ShardLevel>,
}

/// What a v3 `codecs` list describes.
#[derive(Debug)]
pub struct Codecs {
    pub sharding: Option<Sharding>,
    /// The chain of the leaf chunks (of the whole chunks if not sharded).
    pub chain: CodecChain,
    /// Codec names for sidecars, outermost first.
    pub names: Vec<String>,
}

/// Parse a v3 `codecs` list. `chunk_shape` is the grid's chunk shape when
/// the grid is regular (sharding needs it).
pub fn parse_codecs(list: &Value, chunk_shape: Option<&[u64]>) -> Result<Codecs, String> {
    let mut levels = Vec::new();
    let mut names = Vec::new();
    let chain = parse_level(
        list,
        chunk_shape.map(<[u64]>::to_vec),
        &mut levels,
        &mut names,
    )?;
    Ok(Codecs {
        sharding: (!levels.is_empty()).then_some(Sharding { levels }),
        chain,
        names,
    })
}

fn is_sharding(codec: &Value) -> bool {
    matches!(v3_extension(codec), Ok((NAME, _, _)))
}

fn parse_level(
    list: &Value,
    block: Option<Vec<u64>>,
    levels: &mut Vec<ShardLevel>,
    names: &mut Vec<String>,
) -> Result<CodecChain, String> {
    let codecs = list.as_array().ok_or("codecs is not a list")?;
    let Some(sharding) = codecs.iter().find(|c| is_sharding(c)) else {
        return plain_chain(codecs, names);
    };
    if codecs.len() != 1 {
        return Err(format!(
            "{NAME} combined with other codecs in one list is not supported ({})",
            Value::Array(codecs.clone())
        ));
    }
    if levels.len() == MAX_LEVELS {
        return Err(format!("{NAME} nested more than {MAX_LEVELS} levels deep"));
    }
    let block = block.ok_or_else(|| format!("{NAME} needs a regular chunk grid"))?;
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
    if inner.len() != block.len()
        || inner
            .iter()
            .zip(&block)
            .any(|(&i, &b)| i == 0 || b % i != 0)
    {
        return Err(format!(
            "{NAME}: inner chunk shape {inner:?} does not divide the shard shape {block:?}"
        ));
    }
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
    let mut index_shape: Vec<u64> = block.iter().zip(&inner).map(|(b, i)| b / i).collect();
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
        .is_none_or(|n| n as u64 > crate::formats::zarr::array::MAX_CHUNK_BYTES)
    {
        let count = &index_repr.shape[..index_repr.shape.len() - 1];
        return Err(format!(
            "{NAME}: shards of {count:?} inner chunks need an index larger than the {} GiB \
             limit",
            crate::formats::zarr::array::MAX_CHUNK_BYTES >> 30
        ));
    }
    let index_len = index_chain.encoded_size(&index_repr).ok_or_else(|| {
        format!("{NAME}: index_codecs must have a fixed output size (no compressor)")
    })? as u64;
    names.push(NAME.to_string());
    levels.push(ShardLevel {
        block,
        inner: inner.clone(),
        index_chain,
        index_repr,
        index_len,
        location,
        cache_id: next_source_id(),
    });
    parse_level(get("codecs")?, Some(inner), levels, names)
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
    /// The shape of the innermost chunks: the grid slabfs reads by.
    pub fn leaf_shape(&self) -> &[u64] {
        &self.levels.last().expect("at least one level").inner
    }

    /// The shard (chunk of the stored grid) holding leaf chunk `tile`.
    pub fn shard_of(&self, tile: &[u64]) -> Vec<u64> {
        self.block_of(0, tile)
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

    /// The cache ids of the decoded indexes, one per level.
    pub fn cache_ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.levels.iter().map(|l| l.cache_id)
    }

    /// The stored bytes of leaf chunk `tile` of the shard stored under
    /// `key`, `None` if the shard or the chunk is empty. Reads each level's
    /// index (cached under `version`) and then exactly the chunk's bytes.
    /// `limit` caps the chunk's stored size. On failure the indexes on
    /// the way are dropped from the cache ([`Sharding::forget_indexes`]).
    pub fn fetch(
        &self,
        store: &dyn Store,
        key: &str,
        tile: &[u64],
        cache: &ChunkCache,
        version: u64,
        limit: u64,
    ) -> Result<Option<Vec<u8>>> {
        let r = self.fetch_through_indexes(store, key, tile, cache, version, limit);
        if r.is_err() {
            self.forget_indexes(tile, cache, version);
        }
        r
    }

    /// Drop the cached indexes on the way to leaf chunk `tile`. Called
    /// when a read through them failed: an index without a checksum may
    /// itself be what is wrong (a bit flipped on its way from storage
    /// decodes to offsets that point at the wrong bytes), and keeping it
    /// would turn one transient fault into a shard that fails until the
    /// cache evicts it. The next read of the shard reads its index again.
    pub fn forget_indexes(&self, tile: &[u64], cache: &ChunkCache, version: u64) {
        for (l, level) in self.levels.iter().enumerate() {
            cache.forget(&ChunkKey {
                source: level.cache_id,
                version,
                coords: self.block_of(l, tile).into(),
            });
        }
    }

    fn fetch_through_indexes(
        &self,
        store: &dyn Store,
        key: &str,
        tile: &[u64],
        cache: &ChunkCache,
        version: u64,
        limit: u64,
    ) -> Result<Option<Vec<u8>>> {
        let leaf = self.leaf_shape();
        let corrupt = |detail: String| Error::Chunk {
            path: store.describe(key),
            chunk: format!("{tile:?}"),
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
                    "{}: inner chunk {tile:?} is empty, fill value",
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
            "{}: inner chunk {tile:?} at bytes {offset}..{}",
            store.describe(key),
            offset + len
        );
        // A shard that vanished since its index was read: treat as empty.
        store.get_range(key, ByteRange::At { offset, len })
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

    #[test]
    fn parses_levels_and_index_size() {
        let bytes = json!([{"name": "bytes", "configuration": {"endian": "little"}}]);
        let c = parse_codecs(&sharded(&[2, 5], "end", bytes.clone()), Some(&[4, 10])).unwrap();
        let s = c.sharding.unwrap();
        assert_eq!(s.leaf_shape(), &[2, 5]);
        // 2x2 inner chunks, 16 bytes each, plus the crc32c.
        assert_eq!(s.levels[0].index_len, 4 * 16 + 4);
        assert_eq!(c.names, ["sharding_indexed", "bytes"]);

        let nested = sharded(&[2, 5], "start", sharded(&[1, 5], "end", bytes.clone()));
        let c = parse_codecs(&nested, Some(&[4, 10])).unwrap();
        let s = c.sharding.unwrap();
        assert_eq!(s.levels.len(), 2);
        assert_eq!(s.leaf_shape(), &[1, 5]);
        assert_eq!(s.shard_of(&[3, 1]), vec![0, 0]);
        assert_eq!(s.shard_of(&[4, 1]), vec![1, 0]);
        assert_eq!(s.shard_of(&[4, 2]), vec![1, 1]);
        assert_eq!(s.block_of(1, &[3, 1]), vec![1, 1]);
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        let bytes = json!([{"name": "bytes", "configuration": {"endian": "little"}}]);
        let err = |list: Value, shape: Option<&[u64]>| parse_codecs(&list, shape).unwrap_err();
        assert!(err(sharded(&[3, 5], "end", bytes.clone()), Some(&[4, 10])).contains("divide"));
        assert!(err(sharded(&[2, 5], "middle", bytes.clone()), Some(&[4, 10])).contains("start"));
        assert!(err(sharded(&[2, 5], "end", bytes.clone()), None).contains("regular"));
        let mut with_gzip = sharded(&[2, 5], "end", bytes.clone());
        with_gzip
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "gzip", "configuration": {"level": 1}}));
        assert!(err(with_gzip, Some(&[4, 10])).contains("combined"));
        let compressed_index = json!([{"name": "sharding_indexed", "configuration": {
            "chunk_shape": [2, 5], "codecs": bytes,
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                             {"name": "zstd", "configuration": {"level": 1}}]}}]);
        assert!(err(compressed_index, Some(&[4, 10])).contains("fixed"));
    }
}
