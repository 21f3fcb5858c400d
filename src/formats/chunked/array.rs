//! A chunked array as an [`ArraySource`]: a grid of chunks in a
//! [`Store`], each decoded by a [`CodecChain`].
//!
//! Reading a box: the engine's piece loop ([`read_pieces`]) projects it
//! over the chunk grid and splits the output into one disjoint view per
//! chunk touched; this file says how one piece is read
//! ([`PieceSource`]): its decoded chunk fetched (in parallel, through the
//! shared cache, or decoded straight into place when the read covers it
//! whole) and copied into its view; a chunk that does not exist is filled
//! with the fill value without touching any other chunk.

use std::sync::Arc;
use std::time::Instant;

use super::shard::Sharding;
pub use crate::codec::MAX_CHUNK_BYTES;
use crate::codec::{ChunkRepr, CodecChain};
use crate::engine::array::{ArrayMeta, ArraySource};
use crate::engine::buffers::{CHUNK_SLOT, CODEC_SLOT};
use crate::engine::cache::{ChunkCache, ChunkKey, Claim, Reading, SharedBytes, next_source_id};
use crate::engine::decodes::Decoder;
use crate::engine::index::disjoint::DisjointView;
use crate::engine::index::tiling::{DimTiling, Piece, Projection};
use crate::engine::index::{Region, contiguous_run};
use crate::engine::pieces::{PieceSource, prefetch_pieces, read_pieces};
use crate::error::{Error, Result};
use crate::storage::Store;
use crate::storage::ranged::RangedStore;

/// How chunk coordinates become store keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkKeyEncoding {
    /// Zarr v2 style: `1.23.45` (`0` for a 0-d array).
    V2 { separator: char },
    /// Zarr v3 `default`: `c/1/23/45` (`c` for a 0-d array).
    Default { separator: char },
}

impl ChunkKeyEncoding {
    pub fn key(&self, coords: &[u64]) -> String {
        let join = |sep: char| {
            coords
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(&sep.to_string())
        };
        match *self {
            ChunkKeyEncoding::V2 { .. } if coords.is_empty() => "0".to_string(),
            ChunkKeyEncoding::V2 { separator } => join(separator),
            ChunkKeyEncoding::Default { .. } if coords.is_empty() => "c".to_string(),
            ChunkKeyEncoding::Default { separator } => format!("c{separator}{}", join(separator)),
        }
    }
}

/// Everything a format's metadata yields about a chunked array: what Zarr
/// v2/v3 metadata, an HDF5 dataset's layout, a blocked byte stream say.
#[derive(Debug)]
pub struct ArraySpec {
    pub meta: ArrayMeta,
    pub grid: Vec<DimTiling>,
    pub keys: ChunkKeyEncoding,
    pub chain: CodecChain,
    /// The codec names, outermost last, for sidecars.
    pub codec_names: Vec<String>,
    /// For sharded arrays, how leaf chunks are found in shards; `grid`
    /// and `chain` are then those of the leaf chunks.
    pub sharding: Option<Sharding>,
}

pub struct ChunkedArray {
    spec: ArraySpec,
    store: Arc<dyn Store>,
    /// The same store when its chunks are ranges of one file, asked for by
    /// coordinates ([`ChunkedArray::ranged`]): no key is made for a fetch.
    ranged: Option<Arc<RangedStore>>,
    /// Key prefix of the array inside its store: "" or "path/to/array/".
    prefix: String,
    cache: Arc<ChunkCache>,
    id: u64,
    version: u64,
    /// Where its decodes are counted: its codec chain's counters in the
    /// cache's [`crate::engine::decodes::Decodes`].
    decoder: Arc<Decoder>,
}

impl std::fmt::Debug for ChunkedArray {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkedArray")
            .field("source", &self.spec.meta.source)
            .field("shape", &self.spec.meta.shape)
            .finish()
    }
}

impl ChunkedArray {
    /// The id its chunks are cached under ([`ChangeStamp::cache_id`]).
    ///
    /// [`ChangeStamp::cache_id`]: crate::engine::array::ChangeStamp::cache_id
    pub fn cache_id(&self) -> u64 {
        self.id
    }

    /// A one-dimensional array of `meta.shape[0]` elements in blocks of
    /// `block` elements (the last one shorter when they do not divide),
    /// block `i` the value of key `i` in `store`, decoded by `chain`: how
    /// a byte stream cut into blocks (a blocked archive's variable, a
    /// remote classic file) is read with everything a chunked array gets.
    pub fn blocks(
        mut meta: ArrayMeta,
        block: u64,
        chain: CodecChain,
        store: Arc<RangedStore>,
        cache: Arc<ChunkCache>,
    ) -> Result<ChunkedArray> {
        let len = meta.shape[0];
        let grid = if len.is_multiple_of(block) {
            DimTiling::Regular(block)
        } else {
            let mut ends: Vec<u64> = (1..len.div_ceil(block)).map(|i| i * block).collect();
            ends.push(len);
            DimTiling::Explicit(ends)
        };
        meta.chunk_shape = Some(vec![block]);
        let spec = ArraySpec {
            meta,
            grid: vec![grid],
            keys: ChunkKeyEncoding::V2 { separator: '.' },
            codec_names: chain.names().into_iter().map(String::from).collect(),
            chain,
            sharding: None,
        };
        ChunkedArray::ranged(spec, store, cache)
    }

    /// [`ChunkedArray::new`] over the ranges of one file: chunks are
    /// fetched by their coordinates ([`RangedStore::get_each_at`]), which
    /// the store's locator looks up as they are (an HDF5 chunk index, a
    /// block table), with no key made and parsed back. `spec` may not be
    /// sharded.
    pub fn ranged(
        spec: ArraySpec,
        store: Arc<RangedStore>,
        cache: Arc<ChunkCache>,
    ) -> Result<ChunkedArray> {
        if spec.sharding.is_some() {
            return Err(Error::metadata(
                &spec.meta.source,
                "a sharded array over the ranges of a file",
            ));
        }
        let mut array = ChunkedArray::new(spec, store.clone(), "", cache)?;
        array.ranged = Some(store);
        Ok(array)
    }

    /// Check the spec's grid and codecs against its shape, and build the
    /// array. `path` is the array's path inside the store ("" for root).
    pub fn new(
        spec: ArraySpec,
        store: Arc<dyn Store>,
        path: &str,
        cache: Arc<ChunkCache>,
    ) -> Result<ChunkedArray> {
        let meta = &spec.meta;
        let src = &meta.source;
        if spec.grid.len() != meta.rank() {
            return Err(Error::metadata(
                src,
                format!(
                    "chunk grid of rank {} for an array of rank {}",
                    spec.grid.len(),
                    meta.rank()
                ),
            ));
        }
        for (d, (t, &extent)) in spec.grid.iter().zip(&meta.shape).enumerate() {
            if !t.covers(extent) {
                return Err(Error::metadata(
                    src,
                    format!("chunk grid does not cover dimension {d}"),
                ));
            }
        }
        let prefix = if path.is_empty() {
            String::new()
        } else {
            format!("{}/", path.trim_matches('/'))
        };
        let decoder = cache.decodes().of(&spec.chain.names());
        let array = ChunkedArray {
            spec,
            store,
            ranged: None,
            prefix,
            cache,
            id: next_source_id(),
            version: 0,
            decoder,
        };
        // Every chunk of a regular grid has the first chunk's shape; for
        // explicit grids check the largest tile per dimension.
        let largest: Vec<u64> = array
            .spec
            .grid
            .iter()
            .zip(&array.spec.meta.shape)
            .map(|(t, &extent)| match t {
                DimTiling::Regular(s) => *s,
                DimTiling::Explicit(_) => (0..t.num_tiles(extent))
                    .map(|i| t.tile_len(i))
                    .max()
                    .unwrap_or(1),
            })
            .collect();
        let repr = ChunkRepr {
            shape: largest,
            dtype: array.spec.meta.dtype.clone(),
            fill: array.spec.meta.fill_value.clone(),
        };
        match repr.nbytes() {
            Some(n) if n as u64 <= MAX_CHUNK_BYTES => {}
            _ => {
                return Err(Error::metadata(
                    src_of(&array),
                    format!(
                        "chunk shape {:?} is larger than the {} GiB limit",
                        repr.shape,
                        MAX_CHUNK_BYTES >> 30
                    ),
                ));
            }
        }
        array
            .spec
            .chain
            .validate(&repr)
            .map_err(|e| Error::metadata(src_of(&array), e.to_string()))?;
        // A shard decoded whole that the cache cannot keep is decoded
        // again by every read that needs a part of it: readable, but slow.
        if let Some(s) = &array.spec.sharding
            && s.decodes_whole()
            && repr.nbytes().is_some_and(|n| n > array.cache.budget())
        {
            log::warn!(
                "{}: its shards of {:?} are compressed whole and larger than the {}-byte cache; \
                 every read decodes a whole shard (a larger --cache-size helps)",
                array.spec.meta.source,
                repr.shape,
                array.cache.budget()
            );
        }
        Ok(array)
    }

    pub fn spec(&self) -> &ArraySpec {
        &self.spec
    }

    fn chunk_repr(&self, tile: &[u64]) -> ChunkRepr {
        ChunkRepr {
            shape: self.chunk_shape(tile),
            dtype: self.spec.meta.dtype.clone(),
            fill: self.spec.meta.fill_value.clone(),
        }
    }

    /// The stored (decoded) shape of chunk `tile`, overhang included.
    fn chunk_shape(&self, tile: &[u64]) -> Vec<u64> {
        self.spec
            .grid
            .iter()
            .zip(tile)
            .map(|(g, &t)| g.tile_len(t))
            .collect()
    }

    /// Store key of chunk `tile`.
    pub fn chunk_key(&self, tile: &[u64]) -> String {
        format!("{}{}", self.prefix, self.spec.keys.key(tile))
    }

    /// The key of the stored object holding chunk `tile`: its shard's
    /// for sharded arrays.
    fn storage_key(&self, tile: &[u64]) -> String {
        match &self.spec.sharding {
            Some(s) => self.chunk_key(&s.shard_of(tile)),
            None => self.chunk_key(tile),
        }
    }

    /// The decoded chunk `tile`, `None` if it is not stored.
    fn key(&self, tile: &[u64]) -> ChunkKey {
        ChunkKey {
            source: self.id,
            version: self.version,
            coords: tile.into(),
        }
    }

    /// Bytes of chunk `tile` inside the array (an edge chunk overhangs).
    fn useful_bytes(&self, tile: &[u64]) -> usize {
        let elements: u64 = self
            .spec
            .grid
            .iter()
            .zip(tile)
            .zip(&self.spec.meta.shape)
            .map(|((g, &t), &extent)| g.tile_len(t).min(extent - g.tile_start(t)))
            .product();
        elements as usize * self.spec.meta.item_size()
    }

    fn load_chunk(&self, tile: &[u64]) -> Result<Option<Vec<u8>>> {
        self.decode_chunk(tile, self.fetch(tile)?)
    }

    /// Chunk `tile` decoded from its stored bytes `raw` (`None`: not
    /// stored).
    fn decode_chunk(&self, tile: &[u64], raw: Option<Vec<u8>>) -> Result<Option<Vec<u8>>> {
        let Some(raw) = raw else {
            return Ok(None);
        };
        let repr = self.chunk_repr(tile);
        let err = |source| self.chunk_error(tile, source);
        let nbytes = repr.nbytes().expect("checked at open");
        // Straight into a recycled buffer when the chain allows.
        let mut buf = self.cache.take_buffer(nbytes);
        let started = Instant::now();
        let decoded = match self
            .spec
            .chain
            .decode_into(&raw, &repr, &mut buf, &|f| self.codec_scratch(f))
        {
            Some(done) => done.map(|()| Some(buf)).map_err(err),
            None => {
                self.cache.give_back(buf);
                self.spec.chain.decode(raw, &repr).map(Some).map_err(err)
            }
        };
        self.decoder.record(nbytes, started.elapsed());
        decoded
    }

    /// The codec chain's intermediate buffer
    /// ([`Scratch`](crate::codec::Scratch)): this thread's from the cache's
    /// buffer pool.
    fn codec_scratch(&self, f: &mut dyn FnMut(&mut Vec<u8>)) {
        self.cache.buffers().with_scratch(CODEC_SLOT, |b| f(b))
    }

    /// The most stored bytes chunk `tile` may have: no codec expands
    /// data by more than 2x; a bigger file is not a chunk of this array.
    fn fetch_limit(&self, tile: &[u64]) -> u64 {
        let nbytes = self.chunk_repr(tile).nbytes().expect("checked at open") as u64;
        nbytes.saturating_mul(2).saturating_add(1 << 20)
    }

    /// Whether reads gather the fetches of their chunks into one
    /// [`fetch_many`](Self::fetch_many): when the store's cost is latency
    /// (an object store).
    fn fetches_together(&self) -> bool {
        self.store.latency().is_some()
    }

    /// The stored bytes of chunks `tiles`, all asked for at once: one
    /// [`Store::get_many`] of their keys, or for a sharded array their
    /// ranges of the shards in one [`Store::get_ranges`] (after the shard
    /// indexes, read as [`fetch`](Self::fetch) reads them), which the
    /// store coalesces.
    fn fetch_many(&self, tiles: &[&[u64]]) -> Vec<Result<Option<Vec<u8>>>> {
        let mut out: Vec<Option<Result<Option<Vec<u8>>>>> = tiles.iter().map(|_| None).collect();
        self.fetch_each(tiles, &mut |i, got| out[i] = Some(got));
        out.into_iter()
            .map(|got| got.expect("one answer per chunk"))
            .collect()
    }

    /// [`fetch_many`](Self::fetch_many), each chunk's bytes handed to
    /// `each` (with its index in `tiles`) as they arrive
    /// ([`Store::get_each`]); a sharded array's all at once, after the
    /// last range arrived.
    fn fetch_each(&self, tiles: &[&[u64]], each: &mut dyn FnMut(usize, Result<Option<Vec<u8>>>)) {
        log::debug!(
            "{}: fetching {} chunks at once",
            self.spec.meta.source,
            tiles.len()
        );
        if let Some(sharding) = &self.spec.sharding {
            let wanted: Vec<(String, Vec<u64>, u64)> = tiles
                .iter()
                .map(|t| {
                    let key = self.chunk_key(&sharding.shard_of(t));
                    (key, t.to_vec(), self.fetch_limit(t))
                })
                .collect();
            let got = sharding.fetch_many(self.store.as_ref(), &wanted, &self.cache, self.version);
            got.into_iter().enumerate().for_each(|(i, g)| each(i, g));
            return;
        }
        if let Some(ranged) = &self.ranged {
            let wanted: Vec<(&[u64], u64)> =
                tiles.iter().map(|t| (*t, self.fetch_limit(t))).collect();
            return ranged.get_each_at(&wanted, each);
        }
        let keys: Vec<(String, u64)> = tiles
            .iter()
            .map(|t| (self.chunk_key(t), self.fetch_limit(t)))
            .collect();
        self.store.get_each(&keys, each)
    }

    /// The stored bytes of chunk `tile`, `None` if it is not stored.
    fn fetch(&self, tile: &[u64]) -> Result<Option<Vec<u8>>> {
        let limit = self.fetch_limit(tile);
        if let Some(sharding) = &self.spec.sharding {
            let key = self.chunk_key(&sharding.shard_of(tile));
            return sharding.fetch(
                self.store.as_ref(),
                &key,
                tile,
                &self.cache,
                self.version,
                limit,
            );
        }
        if let Some(ranged) = &self.ranged {
            let raw = ranged.get_at(tile, limit)?;
            log::debug!(
                "{}: chunk {tile:?}: {}",
                self.spec.meta.source,
                raw.as_ref()
                    .map_or("missing, fill value".to_string(), |r| format!(
                        "decoding {} bytes",
                        r.len()
                    ))
            );
            return Ok(raw);
        }
        let key = self.chunk_key(tile);
        // As one of many (`get_many`), not as a single value (`get`): a
        // store tells chunks from metadata that way (a remote store keeps
        // chunks in its disk cache, never metadata).
        let raw = self
            .store
            .get_many(&[(key.clone(), limit)])
            .pop()
            .expect("one answer")?;
        match &raw {
            None => log::debug!(
                "{}: chunk {tile:?} missing, fill value",
                self.store.describe(&key)
            ),
            Some(raw) => log::debug!(
                "{}: decoding chunk {tile:?} ({} bytes)",
                self.store.describe(&key),
                raw.len()
            ),
        }
        Ok(raw)
    }

    /// The error for chunk `tile` failing to decode. A sharded chunk may
    /// have been read from where a damaged index pointed, so its indexes
    /// are dropped from the cache and read again next time
    /// ([`Sharding::forget_indexes`]).
    fn chunk_error(&self, tile: &[u64], source: crate::codec::CodecError) -> Error {
        if let Some(s) = &self.spec.sharding {
            s.forget_indexes(tile, &self.cache, self.version);
        }
        Error::Chunk {
            path: self.store.describe(&self.storage_key(tile)),
            chunk: format!("{tile:?}"),
            source: source.into(),
        }
    }
}

fn src_of(a: &ChunkedArray) -> String {
    a.spec.meta.source.clone()
}

impl ArraySource for ChunkedArray {
    fn meta(&self) -> &ArrayMeta {
        &self.spec.meta
    }

    /// The store's stamp of every file under the array's prefix (its
    /// metadata and chunks); `None` if they cannot be listed right now.
    fn change_stamp(&self) -> crate::engine::array::ChangeStamp {
        let data = self
            .store
            .change_stamp(&self.prefix)
            .map_err(|e| log::warn!("{}: cannot check for changes: {e}", self.spec.meta.source))
            .ok()
            .flatten();
        crate::engine::array::ChangeStamp {
            cache_id: Some(self.id),
            data,
            elsewhere: false,
        }
    }

    fn fetch_latency(&self) -> Option<std::time::Duration> {
        self.store.latency()
    }

    /// Every chunk under `region` decoded in the cache: the driver's
    /// [`ready`](crate::engine::pieces::ready) over [`PieceSource::is_ready`].
    fn cached(&self, region: &Region) -> bool {
        crate::engine::pieces::ready(self, region)
    }

    /// Each chunk decoded into the cache, through the engine's prefetch
    /// loop ([`prefetch_pieces`]): on the rayon pool, or over an object
    /// store all fetched at once
    /// ([`prefetch_together`](PieceSource::prefetch_together)).
    fn prefetch(&self, regions: &[Region]) {
        prefetch_pieces(self, regions)
    }

    /// A region inside one chunk whose elements are consecutive in it
    /// (the chunk spans the region's trailing dimensions, as a row-chunked
    /// array's chunks do for the kernel's page-aligned requests): the
    /// chunk through the cache as [`read_region`](Self::read_region) would
    /// get it, the region's range of it lent instead of copied. A missing
    /// chunk is its fill value.
    fn read_shared(&self, region: &Region) -> Option<Result<SharedBytes>> {
        let projection = Projection::new(&self.spec.grid, region);
        let mut pieces = projection.pieces();
        let piece = pieces.next()?;
        if pieces.next().is_some() {
            return None;
        }
        let shape = self.chunk_shape(&piece.tile);
        let (first, len) = contiguous_run(&shape, &piece.tile_start, &piece.count)?;
        let item = self.spec.meta.item_size();
        let key = self.key(&piece.tile);
        let chunk = match self
            .cache
            .get_or_load(&key, || self.load_chunk(&piece.tile))
        {
            Ok(chunk) => chunk,
            Err(e) => return Some(Err(e)),
        };
        let Some(data) = chunk else {
            return Some(Ok(SharedBytes::owned(
                self.spec.meta.fill_value.repeat(len as usize),
            )));
        };
        let range = first as usize * item..(first + len) as usize * item;
        let useful = self.useful_bytes(&piece.tile);
        // A decoded chunk is exactly its shape's size (the codec chain
        // checks), so the range is inside it.
        let len = data.len();
        Some(
            SharedBytes::served(data, range.clone(), self.cache.clone(), key, useful).ok_or_else(
                || Error::Metadata {
                    path: self.store.describe(&self.storage_key(&piece.tile)),
                    detail: format!(
                        "chunk {:?} decoded to {len} bytes, short of bytes {range:?}",
                        piece.tile
                    ),
                },
            ),
        )
    }

    fn read_region(&self, region: &Region, out: &mut [u8]) -> Result<()> {
        read_pieces(self, region, out)
    }
}

/// A read of a box goes through the engine's piece loop: over an object
/// store the chunks not cached are fetched together first; the chunks are
/// decoded in parallel, each copied into place by the thread that decoded
/// it; a read inside one chunk, or of chunks all decoded already, stays on
/// the calling thread.
impl PieceSource for ChunkedArray {
    /// A chunk's stored bytes (`None`: it does not exist), fetched with
    /// the others of the read or left for the piece to fetch, and the
    /// chunk marked as the read's meanwhile ([`ChunkCache::reading`]).
    type Fetched = (Option<Result<Option<Vec<u8>>>>, Reading);

    fn tiling(&self) -> &[DimTiling] {
        &self.spec.grid
    }

    fn item_size(&self) -> usize {
        self.spec.meta.item_size()
    }

    /// Over an object store, the chunks not cached, all at once (one round
    /// trip, not one per chunk), each marked as this read's until its
    /// piece is read, so that a readahead at that moment does not fetch
    /// it too. Their stored bytes are held together meanwhile: no more
    /// than the read's own output buffer, since codecs rarely expand.
    fn fetch_together(&self, pieces: &[Piece]) -> Vec<Option<Self::Fetched>> {
        let mut fetched: Vec<Option<Self::Fetched>> = pieces.iter().map(|_| None).collect();
        if !self.fetches_together() {
            return fetched;
        }
        let mut want = Vec::new();
        for (i, piece) in pieces.iter().enumerate() {
            if let Some(mark) = self.cache.reading(&self.key(&piece.tile)) {
                fetched[i] = Some((None, mark));
                want.push(i);
            }
        }
        // One chunk to fetch: its piece fetches it, as a read of one does.
        if want.len() > 1 {
            let tiles: Vec<&[u64]> = want.iter().map(|&i| pieces[i].tile.as_slice()).collect();
            for (i, raw) in want.iter().zip(self.fetch_many(&tiles)) {
                if let Some((slot, _)) = &mut fetched[*i] {
                    *slot = Some(raw);
                }
            }
        }
        fetched
    }

    /// Over an object store, the chunks not cached are claimed (so a read
    /// that arrives meanwhile waits for them rather than fetching them
    /// again), fetched all at once, then decoded.
    fn prefetch_together(&self, tiles: &[Vec<u64>]) -> bool {
        if !self.fetches_together() {
            return false;
        }
        // Claimed first, so that a read arriving meanwhile waits for
        // the claim instead of fetching the chunk a second time.
        let mut claims: Vec<Option<Claim<'_>>> = tiles
            .iter()
            .filter_map(|t| self.cache.claim(&self.key(t)))
            .map(Some)
            .collect();
        if claims.is_empty() {
            return true;
        }
        let wanted: Vec<Vec<u64>> = claims
            .iter()
            .flatten()
            .map(|c| c.key().coords.to_vec())
            .collect();
        let wanted: Vec<&[u64]> = wanted.iter().map(Vec::as_slice).collect();
        // Each chunk decoded here, on the prefetch's own thread, as
        // soon as its bytes are in: handing it to rayon could
        // deadlock, its workers may all be reads waiting for these
        // very claims.
        self.fetch_each(&wanted, &mut |i, raw| {
            if let Some(claim) = claims[i].take() {
                claim.finish(|| self.decode_chunk(wanted[i], raw?));
            }
        });
        true
    }

    /// The chunk decoded into the cache, unless it is there or on its way.
    fn prefetch_tile(&self, tile: &[u64]) {
        self.cache
            .prefetch(&self.key(tile), || self.load_chunk(tile));
    }

    /// Decoded in the cache: reading the piece is only a copy.
    fn is_ready(&self, piece: &Piece) -> bool {
        self.cache.contains(&self.key(&piece.tile))
    }

    /// Put one piece of a read into place. `fetched` is the chunk's
    /// stored bytes when the read fetched them already (with the other
    /// chunks', [`fetch_together`](PieceSource::fetch_together)).
    fn read_piece(
        &self,
        piece: &Piece,
        mut view: DisjointView<'_>,
        many: bool,
        fetched: Option<Self::Fetched>,
    ) -> Result<()> {
        let shape = self.chunk_shape(&piece.tile);
        // A chunk a multi-chunk read covers whole is used once: decode it
        // straight into place, bypassing the cache (see ChunkCache::peek).
        // A chunk read piecemeal goes through the cache.
        let key = self.key(&piece.tile);
        // The mark held until the piece is in place (dropped last).
        let (fetched, _mark) = match fetched {
            Some((raw, mark)) => (raw, Some(mark)),
            None => (None, None),
        };
        let fetched = parking_lot::Mutex::new(fetched);
        let stored = || match fetched.lock().take() {
            Some(raw) => raw,
            None => self.fetch(&piece.tile),
        };
        if !(many && piece.count == shape) {
            let chunk = self
                .cache
                .get_or_load(&key, || self.decode_chunk(&piece.tile, stored()?))?;
            match chunk {
                Some(data) => {
                    view.copy_from(&data, &shape, &piece.tile_start);
                    // Let go of it first, so a chunk now wholly served can
                    // hand its buffer back.
                    drop(data);
                    let bytes = piece.count.iter().product::<u64>() as usize * view.item();
                    self.cache
                        .served(&key, bytes, self.useful_bytes(&piece.tile));
                }
                None => view.fill(&self.spec.meta.fill_value),
            }
            return Ok(());
        }
        if let Some(data) = self.cache.peek(&key) {
            view.copy_from(&data, &shape, &piece.tile_start);
            return Ok(());
        }
        let taken = self.read_whole(piece, view, stored()?);
        if taken.is_ok() {
            self.cache.taken_whole(&key);
        }
        taken
    }
}

impl ChunkedArray {
    /// Put chunk `piece.tile`, stored as `raw` (`None`: not stored), whole
    /// into `view`, decoded straight into it when it is contiguous there.
    fn read_whole(
        &self,
        piece: &Piece,
        mut view: DisjointView<'_>,
        raw: Option<Vec<u8>>,
    ) -> Result<()> {
        let shape = self.chunk_shape(&piece.tile);
        let Some(raw) = raw else {
            view.fill(&self.spec.meta.fill_value);
            return Ok(());
        };
        let repr = self.chunk_repr(&piece.tile);
        let chain = &self.spec.chain;
        let err = |e| self.chunk_error(&piece.tile, e);
        let nbytes = repr.nbytes().expect("checked at open");
        // Contiguous in the destination (the chunk spans the read's
        // trailing dimensions): decode right into it.
        let started = Instant::now();
        if let Some(slot) = view.contiguous()
            && let Some(done) = chain.decode_into(&raw, &repr, slot, &|f| self.codec_scratch(f))
        {
            self.decoder.record(nbytes, started.elapsed());
            return done.map_err(err);
        }
        // Otherwise into this thread's scratch buffer (the pool's, freed
        // after use when past its cap), then into place.
        let codec_scratch = |f: &mut dyn FnMut(&mut Vec<u8>)| self.codec_scratch(f);
        self.cache.buffers().with_scratch(CHUNK_SLOT, |scratch| {
            scratch.resize(nbytes, 0);
            let mut copy = |data: &[u8]| view.copy_from(data, &shape, &piece.tile_start);
            let started = Instant::now();
            let decoded = chain.decode_into(&raw, &repr, &mut scratch[..nbytes], &codec_scratch);
            let result = match decoded {
                Some(done) => {
                    self.decoder.record(nbytes, started.elapsed());
                    done.map(|()| copy(&scratch[..nbytes]))
                }
                None => {
                    let data = chain.decode(raw, &repr);
                    self.decoder.record(nbytes, started.elapsed());
                    data.map(|data| copy(&data))
                }
            };
            result.map_err(err)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_keys() {
        let v2 = ChunkKeyEncoding::V2 { separator: '.' };
        assert_eq!(v2.key(&[1, 23, 45]), "1.23.45");
        assert_eq!(v2.key(&[]), "0");
        let v2s = ChunkKeyEncoding::V2 { separator: '/' };
        assert_eq!(v2s.key(&[1, 2]), "1/2");
        let d = ChunkKeyEncoding::Default { separator: '/' };
        assert_eq!(d.key(&[1, 23, 45]), "c/1/23/45");
        assert_eq!(d.key(&[]), "c");
        let dd = ChunkKeyEncoding::Default { separator: '.' };
        assert_eq!(dd.key(&[0, 1]), "c.0.1");
    }
}
