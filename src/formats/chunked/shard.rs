//! The shard index fetch: how the chunked array reads one inner chunk of a
//! Zarr v3 shard (`sharding_indexed`) without reading the shard.
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
//! plus one), never the shard. Many chunks at once ([`Sharding::fetch_many`])
//! are one [`Store::get_ranges`], which a remote store coalesces.
//!
//! A cached index is trusted only while reads through it work: when one
//! fails (the next level's index or the chunk does not decode, an entry
//! points outside its shard), the indexes on its way are dropped and read
//! again next time. An index without a checksum that was damaged in
//! transit decodes without complaint, and keeping it would make a
//! transient fault a permanent one.
//!
//! With a transpose before the sharding codec the index is in the stored
//! axis order (`Indexed::order`); with codecs around the shard that make
//! inner chunks unreachable one by one, the array is read by whole shards
//! (`Mode::Whole`) decoded by the chain's [`WholeShard`] codec.
//!
//! Who builds what: Zarr's metadata (`formats::zarr::shard`) parses the
//! `sharding_indexed` configuration into [`ShardLevel`]s and a
//! [`Sharding`]; the byte layout of a shard and its index is the codec's
//! ([`crate::codec::sharding`]); this file only reads.
//!
//! [`WholeShard`]: crate::codec::sharding::WholeShard

use std::ops::Range;

use crate::codec::sharding::{EMPTY, IndexLocation, NAME};
use crate::codec::{ChunkRepr, CodecChain, CodecError};
use crate::engine::cache::{ChunkCache, ChunkKey, next_source_id};
use crate::error::{Error, Result};
use crate::storage::{ByteRange, Store};

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
    pub(crate) index_len: u64,
    location: IndexLocation,
    /// Cache id under which this level's decoded indexes are kept.
    cache_id: u64,
}

impl ShardLevel {
    /// A level dividing blocks of shape `block` into inner chunks of shape
    /// `inner`, its index decoded by `index_chain` to `index_repr`
    /// (`index_len` bytes stored, at `location`;
    /// [`index_layout`](crate::codec::sharding::index_layout)). Its
    /// indexes are cached under a cache id of their own.
    pub fn new(
        block: Vec<u64>,
        inner: Vec<u64>,
        index_chain: CodecChain,
        (index_repr, index_len): (ChunkRepr, u64),
        location: IndexLocation,
    ) -> ShardLevel {
        ShardLevel {
            block,
            inner,
            index_chain,
            index_repr,
            index_len,
            location,
            cache_id: next_source_id(),
        }
    }

    /// Inner chunks per block, per dimension.
    fn chunks_per_block(&self) -> impl Iterator<Item = u64> + '_ {
        self.block.iter().zip(&self.inner).map(|(b, i)| b / i)
    }
}

/// How the shards of an array are read.
#[derive(Debug)]
pub struct Sharding {
    pub(crate) mode: Mode,
    /// The largest a stored read unit (leaf chunk or shard) can be when it
    /// is, or holds, a shard decoded whole; `None` for the default rule.
    pub(crate) stored_limit: Option<u64>,
}

#[derive(Debug)]
pub(crate) enum Mode {
    /// Inner chunks are read one by one through the shard indexes: the
    /// array is read by its leaf chunks.
    Indexed(Indexed),
    /// Shards are decoded whole by the chain
    /// ([`WholeShard`](crate::codec::sharding::WholeShard)): the array
    /// is read by its shards.
    Whole,
}

/// Shards whose inner chunks are read one by one.
#[derive(Debug)]
pub(crate) struct Indexed {
    /// The levels, outermost first.
    pub(crate) levels: Vec<ShardLevel>,
    /// Axis `i` of the stored shard is axis `order[i]` of the array: the
    /// transposes before the sharding codec, composed (identity without
    /// one). The levels' shapes, and the tiles their methods take, are in
    /// the stored order: a transpose of the whole array maps its shard
    /// grid onto the stored shards' grid, so the index arithmetic of the
    /// untransposed case holds in the transposed index space.
    pub(crate) order: Vec<usize>,
}

impl Sharding {
    /// Shards whose leaf chunks are read one by one through the index of
    /// each of `levels` (outermost first); axis `i` of the stored shard is
    /// axis `order[i]` of the array. `stored_limit`: see
    /// [`Sharding::fetch`].
    pub fn indexed(levels: Vec<ShardLevel>, order: Vec<usize>, stored_limit: Option<u64>) -> Self {
        Sharding {
            mode: Mode::Indexed(Indexed { levels, order }),
            stored_limit,
        }
    }

    /// Shards decoded whole by the chain: the array is read by its shards.
    pub fn whole(stored_limit: Option<u64>) -> Self {
        Sharding {
            mode: Mode::Whole,
            stored_limit,
        }
    }

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
    pub(crate) fn leaf_shape(&self) -> &[u64] {
        &self.levels.last().expect("at least one level").inner
    }

    /// Leaf `tile` of the array's grid as a tile of the stored order.
    pub(crate) fn stored_tile(&self, tile: &[u64]) -> Vec<u64> {
        self.order.iter().map(|&a| tile[a]).collect()
    }

    /// Global coordinates of the level-`l` block holding leaf `tile`.
    pub(crate) fn block_of(&self, l: usize, tile: &[u64]) -> Vec<u64> {
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
