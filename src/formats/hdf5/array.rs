//! A dataset as an array source: the HDF5 storage becomes the ranges of
//! the file ([`RangedStore`], which reads a read's chunks with one
//! `read_many` of merged ranges), and the ordinary [`ChunkedArray`] does
//! the reading, handing the store each chunk's grid coordinates as they
//! are ([`ChunkedArray::ranged`]); what only HDF5 knows, where chunk `c`
//! is and what its bytes need once read, is [`H5Chunks`] (a
//! [`Locate`]).
//!
//! - **chunked**: the chunk index, walked once on the first chunk read
//!   ([`super::index::LazyChunks`]), gives grid coordinates → (address,
//!   size, filter mask). HDF5 stores edge chunks whole, as
//!   Zarr does, so the grid is regular. The codec chain is the dataset's
//!   byte order (`bytes`) then its filter pipeline in order, each filter
//!   built from its HDF5 id through the codec registry.
//! - **filter masks**: a chunk may have skipped some filters of the
//!   pipeline (an optional filter that did not help, such as LZF or szip
//!   on noise, or a chunk written directly with `H5Dwrite_chunk`); bit `i`
//!   of its mask says filter `i` was not applied, and those are not
//!   undone. The chain belongs to the array, not the chunk, and whether
//!   any chunk skipped a filter is known only once the chunk index is
//!   read (on the first read, [`super::index::LazyChunks`]). So a filtered
//!   dataset has two arrays over one store ([`MaskAware`]): one with the
//!   plain chain (nearly every dataset; its fast paths), one whose whole
//!   pipeline is one bytes→bytes codec ([`MaskedPipeline`]). The store
//!   decides once from the index; when some chunk was masked it appends
//!   each chunk's mask to its bytes and the masked array reads, whose
//!   codec takes the mask off and undoes only the filters it names.
//! - **contiguous**: one range of the file, cut into tiles of whole rows
//!   of about [`CONTIGUOUS_TILE_BYTES`] (each a contiguous sub-range), so a
//!   large dataset is neither read whole nor cached whole.
//! - **external**: a contiguous dataset whose bytes are in other files
//!   ([`super::external`]): the same row tiles, each gathered from the
//!   slots it lies in.
//! - **unfiltered edge chunks** (`H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS`):
//!   a chunk reaching past the dataset's extent was stored without the
//!   pipeline; the store serves it with a mask naming every filter, so
//!   the masked array reads it as the chunk that skipped them all.
//! - **compact**: the bytes from the object header, one chunk.
//!
//! A chunk that was never written is absent from the store and reads as
//! the fill value; the projection, parallel decode, cache, readahead and
//! lent replies are those of every Zarr array.

use std::sync::{Arc, OnceLock};

use super::convert::{Convert, ConvertCodec};
use super::error::Hdf5Error;
use super::external::External;
use super::index::LazyChunks;
use super::io::H5File;
use super::meta::Filter;
use crate::codec::bytes::BytesCodec;
use crate::codec::shuffle::Shuffle;
use crate::codec::{
    BytesToBytesCodec, Codec, CodecChain, CodecError, DecodedSize, hdf5_plugin, registry,
    undo_bytes_to_bytes,
};
use crate::dtype::Endian;
use crate::engine::array::{ArrayMeta, ArraySource, Wrapper};
use crate::engine::cache::{ChunkCache, SharedBytes};
use crate::engine::index::Region;
use crate::engine::index::copy::{copy_region, fill_region};
use crate::engine::index::tiling::DimTiling;
use crate::error::{Error, Result};
use crate::formats::chunked::ChunkedArray;
use crate::formats::chunked::{ArraySpec, ChunkKeyEncoding};
use crate::storage::paths::file_stamp;
use crate::storage::ranged::{Locate, Located, RangedStore, key_of};

/// Tile size for contiguous datasets: large enough that a sequential read
/// is a few big preads, small enough that the cache keeps many.
pub const CONTIGUOUS_TILE_BYTES: u64 = 1 << 20;

/// How a dataset's bytes are found.
#[derive(Debug)]
pub enum Storage {
    Chunks {
        chunks: Box<LazyChunks>,
        chunk: Vec<u64>,
        filters: Vec<Filter>,
        /// Edge chunks are stored unfiltered (`partial_edge`).
        partial_unfiltered: bool,
    },
    /// Row-tiles of a contiguous range; `addr` `None` when never written
    /// or when the bytes are kept in other files (`external`).
    Contiguous {
        addr: Option<u64>,
        external: Option<Arc<External>>,
    },
    Compact(Vec<u8>),
}

/// How stored elements become the served ones: reordered bytes, or a
/// conversion from an integer type with padding bits or a float type of
/// another layout ([`super::convert`]).
#[derive(Debug, Clone, Copy)]
pub enum Elements {
    Bytes(Endian),
    Converted(Convert),
}

impl Elements {
    /// The array-to-bytes codec that decodes them.
    fn codec(&self) -> Codec {
        match *self {
            Elements::Bytes(endian) => Codec::ArrayToBytes(Box::new(BytesCodec::new(Some(endian)))),
            Elements::Converted(p) => Codec::ArrayToBytes(Box::new(ConvertCodec(p))),
        }
    }
}

/// Build the array of a dataset whose metadata is `meta`, stored with
/// byte order `endian`.
pub fn array(
    file: &Arc<FileRef>,
    dataset: &str,
    meta: ArrayMeta,
    endian: Endian,
    storage: Storage,
    cache: Arc<ChunkCache>,
) -> Result<Arc<dyn ArraySource>> {
    array_of(file, dataset, meta, Elements::Bytes(endian), storage, cache)
}

/// [`array()`] of elements stored as `elements` says (their stored size
/// may differ from `meta`'s served one).
pub fn array_of(
    file: &Arc<FileRef>,
    dataset: &str,
    meta: ArrayMeta,
    elements: Elements,
    storage: Storage,
    cache: Arc<ChunkCache>,
) -> Result<Arc<dyn ArraySource>> {
    let rank = meta.rank();
    // The stored element size, which addresses in the file count in.
    let item = match elements {
        Elements::Bytes(_) => meta.item_size() as u64,
        Elements::Converted(p) => p.size() as u64,
    };
    let src = meta.source.clone();
    let shape = meta.shape.clone();
    let whole: Vec<u64> = shape.iter().map(|&e| e.max(1)).collect();
    let (grid, kind, filters, chunk_shape) = match storage {
        Storage::Chunks {
            chunks,
            chunk,
            filters,
            partial_unfiltered,
        } => {
            let grid = chunk.iter().map(|&c| DimTiling::Regular(c)).collect();
            let applies = applies(filters.len());
            let partial =
                (partial_unfiltered && !filters.is_empty()).then(|| (shape.clone(), chunk.clone()));
            let kind = Kind::Chunks {
                chunks,
                applies,
                partial,
            };
            (grid, kind, filters, Some(chunk))
        }
        Storage::Compact(data) => {
            let grid = whole.iter().map(|&e| DimTiling::Regular(e)).collect();
            (grid, Kind::Inline(data), Vec::new(), None)
        }
        Storage::Contiguous { addr, external } => {
            // Saturating: with a zero-length first dimension the rest may be
            // anything (no byte is ever read then).
            let row_bytes: u64 = shape.iter().skip(1).fold(item, |a, &e| a.saturating_mul(e));
            let mut grid: Vec<DimTiling> = whole.iter().map(|&e| DimTiling::Regular(e)).collect();
            let mut rows_per_tile = 1;
            if rank > 0 && shape[0] > 0 && row_bytes > 0 {
                rows_per_tile = (CONTIGUOUS_TILE_BYTES / row_bytes).clamp(1, shape[0]);
                let n = shape[0];
                grid[0] = if n.is_multiple_of(rows_per_tile) {
                    DimTiling::Regular(rows_per_tile)
                } else {
                    let mut ends: Vec<u64> = (1..n.div_ceil(rows_per_tile))
                        .map(|i| i * rows_per_tile)
                        .collect();
                    ends.push(n);
                    DimTiling::Explicit(ends)
                };
            }
            (
                grid,
                Kind::Rows {
                    addr,
                    external,
                    row_bytes,
                    rows_per_tile,
                    rows: shape.first().copied().unwrap_or(1),
                    nbytes: meta.num_elements().saturating_mul(item),
                },
                Vec::new(),
                None,
            )
        }
    };
    let chunked = matches!(kind, Kind::Chunks { .. });
    let mut meta = meta;
    meta.chunk_shape = chunk_shape;
    let chunks = Arc::new(H5Chunks {
        file: file.clone(),
        dataset: dataset.to_string(),
        rank,
        kind,
        masked: OnceLock::new(),
    });
    let store = Arc::new(RangedStore::new(file.f.file.clone(), chunks.clone()));
    #[cfg(test)]
    tests::BUILT
        .lock()
        .push((file.path.clone(), dataset.to_string(), store.clone()));
    let zarr = |masked: bool| -> Result<Arc<dyn ArraySource>> {
        let chain =
            chain(elements, &filters, item, masked).map_err(|e| Error::metadata(&src, e))?;
        let spec = ArraySpec {
            meta: meta.clone(),
            grid: grid.clone(),
            keys: ChunkKeyEncoding::V2 { separator: '.' },
            codec_names: chain.names().into_iter().map(String::from).collect(),
            chain,
            sharding: None,
        };
        Ok(Arc::new(ChunkedArray::ranged(
            spec,
            store.clone(),
            cache.clone(),
        )?))
    };
    let plain = zarr(false)?;
    if !chunked || filters.is_empty() {
        return Ok(plain);
    }
    // Whether a chunk skipped filters is known once the (lazy) index is
    // read: both arrays are ready and the first read picks one.
    let masked = zarr(true)?;
    Ok(Arc::new(MaskAware {
        plain,
        masked,
        chunks,
    }))
}

/// A filtered chunked dataset before its chunk index is read: reads go to
/// the array with the plain chain (nearly every dataset, with its fast
/// paths) or, when some chunk skipped filters, to the one with a
/// [`MaskedPipeline`]. The locator decides once, from the index
/// ([`H5Chunks::masked`]), and appends the masks to the chunks it serves
/// exactly when the masked array is the one reading.
struct MaskAware {
    plain: Arc<dyn ArraySource>,
    masked: Arc<dyn ArraySource>,
    chunks: Arc<H5Chunks>,
}

impl MaskAware {
    fn pick(&self) -> Result<&Arc<dyn ArraySource>> {
        Ok(if self.chunks.masked("index")? {
            &self.masked
        } else {
            &self.plain
        })
    }
}

/// The plain array answers what does not depend on the chain (metadata,
/// change stamp, latency: both arrays share one store); reads go to the
/// one the store picked.
impl Wrapper for MaskAware {
    fn inner(&self) -> &dyn ArraySource {
        self.plain.as_ref()
    }

    fn read_region(&self, region: &Region, out: &mut [u8]) -> Result<()> {
        self.pick()?.read_region(region, out)
    }

    fn read_shared(&self, region: &Region) -> Option<Result<SharedBytes>> {
        match self.pick() {
            Ok(a) => a.read_shared(region),
            Err(e) => Some(Err(e)),
        }
    }

    /// The picked array's chunks; before the index is read nothing of this
    /// dataset was decoded, and finding out would be I/O.
    fn cached(&self, region: &Region) -> bool {
        match self.chunks.masked.get() {
            Some(true) => self.masked.cached(region),
            Some(false) => self.plain.cached(region),
            None => false,
        }
    }

    fn prefetch(&self, regions: &[Region]) {
        // A failed index read is left for the real read to report.
        if let Ok(a) = self.pick() {
            a.prefetch(regions);
        }
    }
}

/// The codec chain of a dataset: its byte order, then its filters in
/// pipeline order (the order HDF5 applied them when writing), each built
/// from its HDF5 id through the codec registry, or why one cannot be.
/// `masked`: some chunks skipped filters; the filters then form one
/// [`MaskedPipeline`].
fn chain(
    elements: Elements,
    filters: &[Filter],
    item: u64,
    masked: bool,
) -> std::result::Result<CodecChain, String> {
    let mut codecs = vec![elements.codec()];
    let mut pipeline = Vec::new();
    for f in filters {
        let codec: Box<dyn BytesToBytesCodec> = if f.id == SHUFFLE {
            // HDF5 sets the element size when the dataset is created;
            // without it, the dataset's. HDF5's shuffle copies a partial
            // tail (netCDF-4 runs fletcher32 before it).
            let size = f.params.first().map_or(item, |&p| p as u64);
            Box::new(Shuffle::hdf5(size as usize))
        } else {
            match registry::from_hdf5(f.id, &f.params) {
                Ok(c) => c,
                // No built-in codec: a filter plugin, if the operator
                // allowed them and one provides it; otherwise a codec whose
                // decodes fail naming the filter and the plugin directories,
                // so the dataset is still listed and only its reads fail.
                Err(CodecError::UnknownHdf5Filter { .. }) => hdf5_plugin::codec(f.id, &f.params),
                Err(e) => {
                    let name = if f.name.is_empty() {
                        registry::hdf5_filter_name(f.id).unwrap_or("unregistered")
                    } else {
                        &f.name
                    };
                    return Err(format!(
                        "HDF5 filter {} ({name}) cannot be decoded: {e}",
                        f.id
                    ));
                }
            }
        };
        pipeline.push(codec);
    }
    if masked {
        codecs.push(Codec::BytesToBytes(Box::new(MaskedPipeline {
            filters: pipeline,
        })));
    } else {
        codecs.extend(pipeline.into_iter().map(Codec::BytesToBytes));
    }
    CodecChain::new(codecs).map_err(|e| e.to_string())
}

/// Whether the chunk at grid coordinates `coords` reaches past the
/// dataset's current extent `shape` in some dimension: an edge chunk, which
/// a dataset created with `H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS` stores
/// without its filters (HDF5's `H5D__chunk_is_partial_edge_chunk`; HDF5
/// re-filters old edge chunks when a dataset grows, so the current extent
/// is the one that counts).
fn partial_edge(coords: &[u64], chunk: &[u64], shape: &[u64]) -> bool {
    coords
        .iter()
        .zip(chunk)
        .zip(shape)
        .any(|((&i, &c), &s)| i.saturating_add(1).saturating_mul(c) > s)
}

/// The mask bits that name filters of a pipeline of `n` (HDF5 allows 32).
fn applies(n: usize) -> u32 {
    if n >= 32 { u32::MAX } else { (1u32 << n) - 1 }
}

/// A dataset's whole filter pipeline as one codec, for datasets where
/// some chunks skipped filters: its input is a chunk's bytes followed by
/// its filter mask (4 bytes, little-endian, appended by [`H5Chunks::finish`]), and
/// it undoes, last to first, the filters the mask does not name.
#[derive(Debug)]
struct MaskedPipeline {
    filters: Vec<Box<dyn BytesToBytesCodec>>,
}

const MASKED_PIPELINE: &str = "hdf5 filters (masked chunks)";

impl BytesToBytesCodec for MaskedPipeline {
    fn name(&self) -> &'static str {
        MASKED_PIPELINE
    }

    fn encoded_size(&self, _decoded_size: usize) -> Option<usize> {
        None
    }

    fn decode(
        &self,
        mut buf: Vec<u8>,
        size: DecodedSize,
    ) -> std::result::Result<Vec<u8>, CodecError> {
        let Some(at) = buf.len().checked_sub(4) else {
            return Err(CodecError::corrupt(MASKED_PIPELINE, "no filter mask"));
        };
        let mask = u32::from_le_bytes(buf[at..].try_into().expect("4 bytes"));
        buf.truncate(at);
        let applied: Vec<&dyn BytesToBytesCodec> = self
            .filters
            .iter()
            .enumerate()
            .filter(|&(i, _)| i >= 32 || mask >> i & 1 == 0)
            .map(|(_, c)| c.as_ref())
            .collect();
        let first = match size {
            DecodedSize::Exact(n) => Some(n),
            DecodedSize::AtMost(_) => None,
        };
        let buf = undo_bytes_to_bytes(&applied, first, size.limit(), buf)?;
        size.check(MASKED_PIPELINE, buf.len())?;
        Ok(buf)
    }
}

/// HDF5's shuffle filter id.
const SHUFFLE: u32 = 2;

/// The open file the stores of one HDF5 file read from.
#[derive(Debug)]
pub struct FileRef {
    pub path: String,
    pub f: H5File,
    /// The external storage of each dataset that has some, by object
    /// header address, its files opened (or why its message is
    /// unreadable).
    pub externals: std::collections::HashMap<u64, std::result::Result<Arc<External>, Hdf5Error>>,
}

#[derive(Debug)]
enum Kind {
    Chunks {
        chunks: Box<LazyChunks>,
        /// The mask bits that name a filter of the pipeline.
        applies: u32,
        /// The dataset's shape and chunk shape when its edge chunks are
        /// stored unfiltered: each such chunk is served with a mask naming
        /// every filter (`partial_edge`).
        partial: Option<(Vec<u64>, Vec<u64>)>,
    },
    Rows {
        addr: Option<u64>,
        /// The bytes are in external files (`addr` is then `None`).
        external: Option<Arc<External>>,
        row_bytes: u64,
        rows_per_tile: u64,
        rows: u64,
        nbytes: u64,
    },
    Inline(Vec<u8>),
}

/// Where one dataset's chunks are in its file: the chunk index (or the
/// contiguous range, cut in row tiles) maps grid coordinates to a range
/// and a filter mask; the reading is the [`RangedStore`]'s, which takes
/// the coordinates as the chunked array hands them over.
#[derive(Debug)]
struct H5Chunks {
    file: Arc<FileRef>,
    dataset: String,
    rank: usize,
    kind: Kind,
    /// [`H5Chunks::masked`], once known.
    masked: OnceLock<bool>,
}

impl H5Chunks {
    /// Whether some chunk of this dataset skipped filters, so every chunk
    /// served carries its mask for [`MaskedPipeline`]: read from the chunk
    /// index (walking it if no read has yet), once. An index that cannot
    /// be read is an error for this read, not remembered.
    fn masked(&self, key: &str) -> Result<bool> {
        let Kind::Chunks {
            chunks,
            applies,
            partial,
        } = &self.kind
        else {
            return Ok(false);
        };
        if let Some(&m) = self.masked.get() {
            return Ok(m);
        }
        if partial.is_some() {
            // Edge chunks skip every filter whatever their mask says.
            return Ok(*self.masked.get_or_init(|| true));
        }
        let index = chunks.load(&self.file.f).map_err(|e| self.error(key, e))?;
        Ok(*self.masked.get_or_init(|| index.any_masked(*applies)))
    }

    /// `size` bytes at the file address `addr`: where they are in the
    /// file (addresses count from the superblock), if inside it.
    fn at(&self, coords: &[u64], addr: u64, size: u64, tag: u32) -> Result<Located> {
        let f = &self.file.f;
        let what = || format!("chunk {} of {size} bytes at {addr:#x}", key_of(coords));
        let offset = f.base.checked_add(addr);
        let end = offset.and_then(|o| o.checked_add(size));
        let (Some(offset), Some(end)) = (offset, end) else {
            let e = Hdf5Error::corrupt(
                what(),
                format!("address {addr:#x} + {size} bytes overflows"),
            );
            return Err(self.error(&key_of(coords), e));
        };
        if end > f.len {
            let e = Hdf5Error::PastEof {
                what: what(),
                offset,
                end,
                file_len: f.len,
            };
            return Err(self.error(&key_of(coords), e));
        }
        Ok(Located::At {
            offset,
            len: size,
            tag,
        })
    }

    /// The bytes `at..at + n` of a contiguous dataset that tile `coords`
    /// holds, `None` past its rows.
    fn tile(&self, coords: &[u64]) -> Option<(u64, u64)> {
        let Kind::Rows {
            row_bytes,
            rows_per_tile,
            rows,
            nbytes,
            ..
        } = &self.kind
        else {
            return None;
        };
        if self.rank == 0 {
            return Some((0, *nbytes));
        }
        let first = coords[0].saturating_mul(*rows_per_tile);
        if first >= *rows {
            return None;
        }
        let n = (*rows_per_tile).min(rows - first);
        Some((first.saturating_mul(*row_bytes), n * row_bytes))
    }

    fn error(&self, key: &str, e: Hdf5Error) -> Error {
        Error::Chunk {
            path: format!("{} (dataset {})", self.file.path, self.dataset),
            chunk: key.to_string(),
            source: Box::new(e),
        }
    }
}

impl Locate for H5Chunks {
    fn rank(&self) -> usize {
        self.rank
    }

    fn locate(&self, coords: &[u64]) -> Result<Located> {
        match &self.kind {
            Kind::Chunks { chunks, .. } => {
                let found = chunks.get(&self.file.f, coords);
                match found.map_err(|e| self.error(&key_of(coords), e))? {
                    Some(loc) => self.at(coords, loc.addr, loc.size, loc.mask),
                    None => Ok(Located::Missing),
                }
            }
            Kind::Rows { addr, external, .. } => {
                let Some((at, n)) = self.tile(coords) else {
                    return Ok(Located::Missing);
                };
                if external.is_some() {
                    return Ok(Located::Other { len: n });
                }
                match addr {
                    Some(addr) => self.at(coords, addr.saturating_add(at), n, 0),
                    None => Ok(Located::Missing),
                }
            }
            Kind::Inline(data) => Ok(Located::Other {
                len: data.len() as u64,
            }),
        }
    }

    /// A chunk of a dataset where some chunk skipped filters carries its
    /// mask (an unfiltered edge chunk one naming every filter).
    fn finish(&self, coords: &[u64], tag: u32, mut bytes: Vec<u8>) -> Result<Vec<u8>> {
        let Kind::Chunks {
            applies, partial, ..
        } = &self.kind
        else {
            return Ok(bytes);
        };
        if self.masked(&key_of(coords))? {
            let mask = match partial {
                Some((shape, chunk)) if partial_edge(coords, chunk, shape) => *applies,
                _ => tag & applies,
            };
            bytes.extend_from_slice(&mask.to_le_bytes());
        }
        Ok(bytes)
    }

    /// A compact dataset's bytes, or a tile gathered from external files.
    fn read_other(&self, coords: &[u64]) -> Result<Vec<u8>> {
        match &self.kind {
            Kind::Inline(data) => Ok(data.clone()),
            Kind::Rows {
                external: Some(ext),
                ..
            } => {
                let key = key_of(coords);
                let (at, n) = self.tile(coords).expect("located");
                let what = format!("tile {key} (bytes {at}..{})", at + n);
                ext.read(at, n, &what).map_err(|e| self.error(&key, e))
            }
            _ => unreachable!("only compact and external datasets are located elsewhere"),
        }
    }

    fn describe(&self, key: &str) -> String {
        format!("{} (dataset {}, chunk {key})", self.file.path, self.dataset)
    }

    fn read_error(&self, key: &str, offset: u64, len: u64, e: std::io::Error) -> Error {
        let what = format!("chunk {key} of {len} bytes at offset {offset:#x}");
        self.error(
            key,
            Hdf5Error::Io {
                what,
                source: Arc::new(e),
            },
        )
    }

    /// The file's identity and times: an HDF5 file changes as a whole
    /// for our purposes (its indexes are read once per load); with its
    /// external data files' stamps folded in where it has some (review 9
    /// finding 5: a rewritten external file was never seen).
    fn change_stamp(&self) -> Result<Option<u64>> {
        let own = file_stamp(std::path::Path::new(&self.file.path));
        let Kind::Rows {
            external: Some(ext),
            ..
        } = &self.kind
        else {
            return Ok(own);
        };
        use std::hash::{Hash, Hasher};
        Ok(own.map(|o| {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            (o, ext.stamp()).hash(&mut h);
            h.finish()
        }))
    }
}

/// A dataset shown longer than it is stored: netCDF-4 gives every variable
/// along an unlimited dimension the dimension's length (the longest
/// variable's), reading the records a shorter variable never had as its
/// fill value. `inner` is the dataset as stored; elements outside its
/// extent read as the fill value, never as whatever an allocated chunk
/// holds past the extent.
pub struct Extended {
    meta: ArrayMeta,
    inner: Arc<dyn ArraySource>,
    /// What the elements past `inner`'s extent read as (native order):
    /// netCDF's fill for them, which may differ from the value of
    /// `inner`'s never-written chunks (`meta.fill_value`; see
    /// `super::fills`).
    fill: Vec<u8>,
}

impl Extended {
    /// `inner` shown with `meta` (the same element type, a shape at least
    /// as large in every dimension), the elements past its extent reading
    /// as `fill`.
    pub fn new(meta: ArrayMeta, inner: Arc<dyn ArraySource>, fill: Vec<u8>) -> Extended {
        debug_assert_eq!(meta.rank(), inner.meta().rank());
        debug_assert_eq!(fill.len(), meta.item_size());
        Extended { meta, inner, fill }
    }

    /// The part of `region` inside the stored extent, `None` if empty.
    fn clip(&self, region: &Region) -> Option<Region> {
        let stored = &self.inner.meta().shape;
        let mut count = Vec::with_capacity(region.rank());
        for ((&start, &n), &extent) in region.start.iter().zip(&region.count).zip(stored) {
            let end = (start + n).min(extent);
            if end <= start {
                return None;
            }
            count.push(end - start);
        }
        Some(Region {
            start: region.start.clone(),
            count,
        })
    }
}

/// Shows a larger index space than `inner`'s: every method taking a
/// region clips it to the stored extent; the change stamp and the latency
/// are the stored dataset's.
impl Wrapper for Extended {
    fn inner(&self) -> &dyn ArraySource {
        self.inner.as_ref()
    }

    fn meta(&self) -> &ArrayMeta {
        &self.meta
    }

    fn stored(&self) -> Option<Arc<dyn ArraySource>> {
        Some(self.inner.clone())
    }

    fn read_region(&self, region: &Region, out: &mut [u8]) -> Result<()> {
        let clipped = self.clip(region);
        if clipped.as_ref() == Some(region) {
            return self.inner.read_region(region, out);
        }
        let zeros = vec![0; region.rank()];
        fill_region(out, &region.count, &zeros, &region.count, &self.fill);
        if let Some(c) = clipped {
            let item = self.meta.item_size();
            let mut buf = vec![0u8; c.num_elements() as usize * item];
            self.inner.read_region(&c, &mut buf)?;
            copy_region(
                &buf,
                &c.count,
                &zeros,
                out,
                &region.count,
                &zeros,
                &c.count,
                item,
            );
        }
        Ok(())
    }

    fn read_shared(&self, region: &Region) -> Option<Result<SharedBytes>> {
        (self.clip(region).as_ref() == Some(region))
            .then(|| self.inner.read_shared(region))
            .flatten()
    }

    /// The stored part's chunks; a region wholly past the stored extent is
    /// fill, which waits on nothing.
    fn cached(&self, region: &Region) -> bool {
        self.clip(region).is_none_or(|c| self.inner.cached(&c))
    }

    fn prefetch(&self, regions: &[Region]) {
        let clipped: Vec<Region> = regions.iter().filter_map(|r| self.clip(r)).collect();
        self.inner.prefetch(&clipped);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// The stores [`array_of`] built, by file and dataset: how a test
    /// reaches the store of a dataset opened the ordinary way.
    pub(super) static BUILT: parking_lot::Mutex<Vec<(String, String, Arc<RangedStore>)>> =
        parking_lot::Mutex::new(Vec::new());

    /// The chunks of a netCDF-4 dataset keep the storage contract, each
    /// key's value the bytes where h5py says the chunk lies
    /// (tests/fixtures/hdf5/chunk_map.json: `get_chunk_info`'s offset and
    /// size), keyed by its grid coordinates.
    #[test]
    fn dataset_chunks_conform() {
        use crate::storage::testing::conformance::{Limits, check_values};
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hdf5");
        let path = root.join("data/nc4.nc");
        let map: serde_json::Value =
            serde_json::from_slice(&std::fs::read(root.join("chunk_map.json")).unwrap()).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let files = crate::storage::local::OsFiles::unconfined();
        let contents =
            super::super::open(&path, &files, Arc::new(ChunkCache::new(1 << 20))).unwrap();
        let name = path.display().to_string();
        for dataset in ["temp", "bzip2"] {
            let array = &contents
                .arrays
                .iter()
                .find(|(p, _)| p == dataset)
                .unwrap()
                .1;
            let chunk = array.meta().chunk_shape.clone().unwrap();
            let store = BUILT
                .lock()
                .iter()
                .rev()
                .find(|(f, d, _)| *f == name && d.trim_start_matches('/') == dataset)
                .map(|(_, _, s)| s.clone())
                .expect("built");
            let entries: Vec<(String, Vec<u8>)> = map["nc4.nc"][dataset]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| {
                    let coords: Vec<u64> = c["start"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .zip(&chunk)
                        .map(|(s, n)| s.as_u64().unwrap() / n)
                        .collect();
                    let (at, n) = (c["offset"].as_u64().unwrap(), c["size"].as_u64().unwrap());
                    (
                        key_of(&coords),
                        bytes[at as usize..(at + n) as usize].to_vec(),
                    )
                })
                .collect();
            let entries: Vec<(&str, Vec<u8>)> = entries
                .iter()
                .map(|(k, v)| (k.as_str(), v.clone()))
                .collect();
            let limits = Limits {
                flat: true,
                ..Limits::default()
            };
            check_values(&format!("HDF5 {dataset}"), store.as_ref(), &entries, limits);
        }
    }

    fn zlib(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(4));
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn filter(id: u32, params: &[u32]) -> Filter {
        Filter {
            id,
            name: String::new(),
            optional: true,
            params: params.to_vec(),
        }
    }

    /// `H5D__chunk_is_partial_edge_chunk`: a chunk reaching past the
    /// current extent in any dimension.
    #[test]
    fn partial_edge_chunks() {
        // 10 elements in chunks of 4: chunk 2 (8..12) is partial.
        assert!(!partial_edge(&[1], &[4], &[10]));
        assert!(partial_edge(&[2], &[4], &[10]));
        // 5 x 7 in 2 x 3: the last row or the last column of chunks.
        assert!(!partial_edge(&[1, 1], &[2, 3], &[5, 7]));
        assert!(partial_edge(&[2, 0], &[2, 3], &[5, 7]));
        assert!(partial_edge(&[0, 2], &[2, 3], &[5, 7]));
        // An exact fit has none.
        assert!(!partial_edge(&[1], &[4], &[8]));
    }

    /// Shuffle then deflate, as h5py writes them; chunks with the mask
    /// appended, as the store hands them over.
    #[test]
    fn a_masked_pipeline_undoes_only_the_filters_applied() {
        let filters = [filter(2, &[4]), filter(1, &[4])];
        let pipeline = MaskedPipeline {
            filters: filters
                .iter()
                .map(|f| registry::from_hdf5(f.id, &f.params).unwrap())
                .collect(),
        };
        let data: Vec<u8> = (0..64u32).flat_map(|i| (i * 3).to_le_bytes()).collect();
        let n = data.len();
        let shuffled: Vec<u8> = (0..4)
            .flat_map(|b| data.iter().skip(b).step_by(4).copied().collect::<Vec<_>>())
            .collect();
        let with = |mut v: Vec<u8>, mask: u32| {
            v.extend(mask.to_le_bytes());
            v
        };
        for (stored, mask) in [
            (zlib(&shuffled), 0),
            (zlib(&data), 1),
            (shuffled.clone(), 2),
            (data.clone(), 3),
        ] {
            let got = pipeline
                .decode(with(stored, mask), DecodedSize::Exact(n))
                .unwrap();
            assert_eq!(got, data, "mask {mask}");
        }
        // Without the mask's effect: the wrong filters undone are an error
        // or wrong bytes, never silently right.
        assert!(
            pipeline
                .decode(with(data.clone(), 0), DecodedSize::Exact(n))
                .is_err()
        );
        assert!(pipeline.decode(vec![1, 2], DecodedSize::Exact(n)).is_err());
        assert_eq!(applies(2), 3);
        assert_eq!(applies(32), u32::MAX);
        // The chain: one codec for a masked dataset, one per filter otherwise.
        let c = chain(Elements::Bytes(Endian::Little), &filters, 4, true).unwrap();
        assert_eq!(c.names(), ["bytes", MASKED_PIPELINE]);
        let c = chain(Elements::Bytes(Endian::Little), &filters, 4, false).unwrap();
        assert_eq!(c.names().len(), 3);
    }
}
