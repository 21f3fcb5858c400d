//! Reading an archive: open it from its superblock, header and index, and
//! serve each variable through the same machinery as a Zarr array.
//!
//! A variable's data is one linear byte stream cut into blocks, which is
//! exactly a one-dimensional Zarr array of the variable's elements chunked
//! by the block (big-endian `bytes`, optionally `shuffle`, then zstd or
//! zlib). So each variable is a [`ChunkedArray`] of shape `[elements]`
//! over the archive's ranges ([`RangedStore`], block `i` found by
//! [`BlockStore`] in the index): the shared chunk cache, parallel decoding
//! of the blocks of a large read, decoding whole blocks straight into the
//! reply, the sequential prefetcher and the use-once rule all apply
//! unchanged; the blocks of a read are one [`ReadAt::read_many`].
//! The last block is shorter than the others, so the grid lists its cut
//! explicitly ([`DimTiling::Explicit`](crate::engine::index::tiling::DimTiling::Explicit)) unless the data fills it.
//!
//! [`Reshaped`] shows that 1-D array with the variable's real shape: a box
//! of the N-D array is a set of runs of the linear stream (one run when the
//! box covers whole rows), each read from the 1-D array.
//!
//! The store checks each block's CRC-32C before it is decompressed, and the
//! decompressor is bounded by the block's known size, so a damaged block
//! fails the reads that touch it (an error naming the file, the variable
//! and the block) and nothing else.

use std::sync::Arc;

use super::format::{BlockCodec, FormatError, SUPERBLOCK_LEN, Superblock, VarIndex, parse_index};
use crate::codec::{CodecError, v2_chain};
use crate::dtype::Endian;
use crate::engine::array::{ArrayMeta, ArraySource, Wrapper};
use crate::engine::cache::{ChunkCache, SharedBytes};
use crate::engine::index::{Region, c_strides, checked_num_elements, contiguous_run};
use crate::error::{Error, Result};
use crate::formats::chunked::ChunkedArray;
use crate::formats::netcdf3;
use crate::formats::netcdf3::header::{self, Header, NumRecs};
use crate::formats::netcdf3::layout::Layout;
use crate::formats::netcdf3::{HeaderError, MAX_HEADER_BYTES};
use crate::storage::ReadAt;
use crate::storage::paths::file_stamp;
use crate::storage::ranged::{Locate, Located, RangedStore};

/// An open archive, shared by its variables.
#[derive(Debug)]
pub struct Archive {
    pub path: String,
    file: Arc<dyn ReadAt>,
    pub superblock: Superblock,
    /// The embedded classic header, as stored.
    pub header_bytes: Vec<u8>,
    /// Per variable, in header order.
    pub vars: Vec<VarIndex>,
}

impl Archive {
    /// Read `buf.len()` bytes at `offset`; errors name the file and `what`.
    pub fn pread(&self, buf: &mut [u8], offset: u64, what: &str) -> Result<()> {
        self.file.read_exact_at(buf, offset).map_err(|e| {
            let end = offset + buf.len() as u64;
            let source = if e.kind() == std::io::ErrorKind::UnexpectedEof {
                std::io::Error::new(
                    e.kind(),
                    format!("bytes {offset}..{end} lie past the end of the file: it is truncated"),
                )
            } else {
                e
            };
            Error::Io {
                path: format!("{} ({what})", self.path),
                source,
            }
        })
    }

    /// The compressed bytes `buf` of block `i` of variable `var`, as read
    /// from the range the index gives, checked against the index's
    /// CRC-32C. `name` is the variable's, for errors.
    pub fn check_block(&self, var: usize, i: u64, name: &str, buf: &[u8]) -> Result<()> {
        let v = &self.vars[var];
        let (a, b) = v.block_range(i);
        let computed = crc32c::crc32c(buf);
        let stored = v.crcs[i as usize];
        if computed != stored {
            return Err(Error::Chunk {
                path: format!("{} (variable {name:?})", self.path),
                chunk: format!("block {i} (bytes {a}..{b})"),
                source: CodecError::corrupt(
                    "crc32c",
                    format!(
                        "checksum mismatch (index says {stored:#010x}, block has {computed:#010x})"
                    ),
                )
                .into(),
            });
        }
        Ok(())
    }
}

/// Open the archive `path` (already opened as `file`): its superblock,
/// embedded header and index. Returns the header and its layout (relative
/// to the original classic file) for [`crate::formats::netcdf3::File`].
pub fn open(path: &str, file: Arc<dyn ReadAt>) -> Result<(Archive, Header, Layout)> {
    let io = |source| Error::Io {
        path: path.to_string(),
        source,
    };
    let bad = |e: FormatError| Error::metadata(path, format!("blocked archive: {e}"));
    let file_len = file.size().map_err(io)?;
    let mut sb_bytes = [0u8; SUPERBLOCK_LEN as usize];
    let n = (file_len.min(SUPERBLOCK_LEN)) as usize;
    file.read_exact_at(&mut sb_bytes[..n], 0).map_err(io)?;
    let superblock = Superblock::parse(&sb_bytes[..n], file_len).map_err(bad)?;
    if superblock.header_len > MAX_HEADER_BYTES {
        return Err(Error::TooLarge {
            path: format!("{path} (embedded netCDF header)"),
            size: superblock.header_len,
            limit: MAX_HEADER_BYTES,
        });
    }
    let mut archive = Archive {
        path: path.to_string(),
        file,
        superblock,
        header_bytes: vec![0u8; superblock.header_len as usize],
        vars: Vec::new(),
    };
    let mut header_bytes = std::mem::take(&mut archive.header_bytes);
    archive.pread(
        &mut header_bytes,
        superblock.header_offset,
        "embedded header",
    )?;
    let header = match header::parse(&header_bytes, superblock.classic_len) {
        Ok(h) => h,
        Err(HeaderError::Short { needed, .. }) => {
            return Err(Error::metadata(
                path,
                format!(
                    "blocked archive: the embedded header is {} bytes but needs {needed}",
                    superblock.header_len
                ),
            ));
        }
        Err(e) => {
            return Err(Error::metadata(
                path,
                format!("blocked archive: embedded header: {e}"),
            ));
        }
    };
    if header.numrecs == NumRecs::Streaming {
        return Err(Error::metadata(
            path,
            "blocked archive: the embedded header has no record count (streaming numrecs)",
        ));
    }
    let layout = Layout::new(&header, superblock.classic_len)
        .map_err(|d| Error::metadata(path, format!("blocked archive: {d}")))?;
    let data_lens = layout
        .vars
        .iter()
        .map(|v| {
            checked_num_elements(&v.shape)
                .and_then(|n| n.checked_mul(v.item))
                .ok_or_else(|| Error::metadata(path, "a variable's size overflows"))
        })
        .collect::<Result<Vec<u64>>>()?;
    let mut index = vec![0u8; superblock.index_len as usize + 4];
    archive.pread(&mut index, superblock.index_offset, "block index")?;
    archive.vars = parse_index(
        &index,
        &data_lens,
        superblock.data_start(),
        superblock.index_offset,
    )
    .map_err(bad)?;
    archive.header_bytes = header_bytes;
    Ok((archive, header, layout))
}

/// The cache of an archive opened without a shared one (`slabfs cat`,
/// `unpack`, tests): enough for a few blocks being read at once.
const PRIVATE_CACHE_BYTES: usize = 64 << 20;

/// An archive as the body of the netCDF-3 file it stands for: its
/// variables read from compressed blocks through `cache`.
struct ArchiveBody {
    archive: Arc<Archive>,
    cache: Arc<ChunkCache>,
}

impl std::fmt::Debug for ArchiveBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ArchiveBody").field(&self.archive).finish()
    }
}

impl netcdf3::Body for ArchiveBody {
    fn array(&self, index: usize, name: &str, meta: ArrayMeta) -> Result<Arc<dyn ArraySource>> {
        array(&self.archive, index, name, meta, self.cache.clone())
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// The archive `name` (already opened as `file`) as the classic netCDF-3
/// file it stands for: the same header, dimensions and variables, the
/// data decoded from blocks through `cache` (a private one when `None`).
pub fn open_file(
    name: String,
    file: Arc<dyn ReadAt>,
    cache: Option<&Arc<ChunkCache>>,
) -> Result<netcdf3::File> {
    let (archive, header, layout) = open(&name, file.clone())?;
    let cache = cache
        .cloned()
        .unwrap_or_else(|| Arc::new(ChunkCache::new(PRIVATE_CACHE_BYTES)));
    let body = ArchiveBody {
        archive: Arc::new(archive),
        cache,
    };
    netcdf3::File::with_body(name, file, header, layout, Arc::new(body))
}

/// The archive behind `file`, when it was opened from one.
pub fn archive_of(file: &netcdf3::File) -> Option<&Arc<Archive>> {
    let body = file.body()?.as_any().downcast_ref::<ArchiveBody>()?;
    Some(&body.archive)
}

/// Variable `var` (named `name`) of `archive` as an array source with the
/// metadata `meta` (its N-D shape, type, attributes...).
pub fn array(
    archive: &Arc<Archive>,
    var: usize,
    name: &str,
    meta: ArrayMeta,
    cache: Arc<ChunkCache>,
) -> Result<Arc<dyn ArraySource>> {
    let v = &archive.vars[var];
    let item = meta.item_size() as u64;
    let elements = meta.num_elements();
    let block_elems = v.block_size / item;
    let compressor = match v.codec {
        BlockCodec::Zstd => serde_json::json!({"id": "zstd", "level": v.level}),
        BlockCodec::Deflate => serde_json::json!({"id": "zlib", "level": v.level}),
    };
    let source = format!("{} (variable {name:?})", archive.path);
    let filters: Vec<serde_json::Value> = match v.shuffle && item > 1 {
        true => vec![serde_json::json!({"id": "shuffle", "elementsize": item})],
        false => Vec::new(),
    };
    let chain = v2_chain(1, false, Endian::Big, &filters, Some(&compressor))
        .map_err(|e| Error::metadata(&source, e.to_string()))?;
    let flat = ArrayMeta::new(
        source.clone(),
        vec![elements],
        meta.dtype.clone(),
        meta.fill_value.clone(),
    )?;
    let store = Arc::new(BlockStore::store(archive, var, name));
    let inner = ChunkedArray::blocks(flat, block_elems, chain, store, cache)?;
    Ok(Arc::new(Reshaped { meta, inner }))
}

/// Where the blocks of one variable are (key `i` is block `i`, at the
/// range the archive's index gives), each checked against its CRC-32C
/// once read. The reading is the [`RangedStore`]'s: the blocks of a read
/// are one [`ReadAt::read_many`].
#[derive(Debug)]
struct BlockStore {
    archive: Arc<Archive>,
    var: usize,
    name: String,
}

impl BlockStore {
    /// The blocks of variable `var` (named `name`) of `archive`.
    fn store(archive: &Arc<Archive>, var: usize, name: &str) -> RangedStore {
        let blocks = BlockStore {
            archive: archive.clone(),
            var,
            name: name.to_string(),
        };
        RangedStore::new(archive.file.clone(), Arc::new(blocks))
    }
}

impl Locate for BlockStore {
    fn rank(&self) -> usize {
        1
    }

    fn locate(&self, coords: &[u64]) -> Result<Located> {
        let v = &self.archive.vars[self.var];
        let i = coords[0];
        if i >= v.nblocks() {
            return Ok(Located::Missing);
        }
        let (a, b) = v.block_range(i);
        Ok(Located::At {
            offset: a,
            len: b - a,
            tag: 0,
        })
    }

    fn finish(&self, coords: &[u64], _tag: u32, bytes: Vec<u8>) -> Result<Vec<u8>> {
        self.archive
            .check_block(self.var, coords[0], &self.name, &bytes)?;
        Ok(bytes)
    }

    fn describe(&self, key: &str) -> String {
        format!(
            "{} (variable {:?} block {key})",
            self.archive.path, self.name
        )
    }

    /// A block cut short by the end of the file: the archive is truncated.
    fn read_error(&self, key: &str, offset: u64, len: u64, e: std::io::Error) -> Error {
        let end = offset + len;
        let source = if e.kind() == std::io::ErrorKind::UnexpectedEof {
            std::io::Error::new(
                e.kind(),
                format!("bytes {offset}..{end} lie past the end of the file: it is truncated"),
            )
        } else {
            e
        };
        Error::Io {
            path: format!("{} (bytes {offset}..{end})", self.describe(key)),
            source,
        }
    }

    /// The archive file's identity and times: archives are replaced whole
    /// (pack writes a new file and renames it), never edited.
    fn change_stamp(&self) -> Result<Option<u64>> {
        Ok(self
            .archive
            .file
            .stamp()
            .or_else(|| file_stamp(std::path::Path::new(&self.archive.path))))
    }
}

/// A one-dimensional source shown with another shape of the same number of
/// elements (row-major on both sides).
pub struct Reshaped<A> {
    meta: ArrayMeta,
    inner: A,
}

impl<A> Reshaped<A> {
    /// The stretch of the flat stream from the first element of `regions`
    /// to their last (row-major, the first and last elements of a box are
    /// its corners); `None` when they hold no element.
    fn span(&self, regions: &[Region]) -> Option<Region> {
        let strides = c_strides(&self.meta.shape);
        let linear =
            |index: &[u64]| -> u64 { index.iter().zip(&strides).map(|(i, s)| i * s).sum() };
        let (mut lo, mut hi) = (u64::MAX, 0u64);
        for r in regions.iter().filter(|r| r.num_elements() > 0) {
            let last: Vec<u64> = r
                .start
                .iter()
                .zip(&r.count)
                .map(|(s, n)| s + n - 1)
                .collect();
            lo = lo.min(linear(&r.start));
            hi = hi.max(linear(&last) + 1);
        }
        (lo < hi).then(|| Region {
            start: vec![lo],
            count: vec![hi - lo],
        })
    }

    /// For each contiguous run of `region` in the row-major order of
    /// `shape`: its first linear element and length, in order.
    fn runs(&self, region: &Region, mut f: impl FnMut(u64, u64) -> Result<()>) -> Result<()> {
        let shape = &self.meta.shape;
        let rank = shape.len();
        if region.num_elements() == 0 {
            return Ok(());
        }
        if rank == 0 {
            return f(0, 1);
        }
        // Dimensions `j..` form one run: all after `j` are covered whole.
        let mut j = rank - 1;
        while j > 0 && region.start[j] == 0 && region.count[j] == shape[j] {
            j -= 1;
        }
        let strides = c_strides(shape);
        let run = region.count[j] * strides[j];
        let mut idx = vec![0u64; j];
        loop {
            let first: u64 = (0..j)
                .map(|d| (region.start[d] + idx[d]) * strides[d])
                .sum::<u64>()
                + region.start[j] * strides[j];
            f(first, run)?;
            // Odometer over the outer dimensions `..j`.
            let mut d = j;
            loop {
                if d == 0 {
                    return Ok(());
                }
                d -= 1;
                idx[d] += 1;
                if idx[d] < region.count[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
    }
}

/// Shows another index space than the 1-D `inner`: every method taking a
/// region maps it to runs of the stream; the change stamp and the latency
/// are the stream's.
impl<A: ArraySource> Wrapper for Reshaped<A> {
    fn inner(&self) -> &dyn ArraySource {
        &self.inner
    }

    fn meta(&self) -> &ArrayMeta {
        &self.meta
    }

    /// As shown: the flat stream is how the archive stores the variable,
    /// not another array of it.
    fn stored(&self) -> Option<Arc<dyn ArraySource>> {
        None
    }

    fn read_region(&self, region: &Region, out: &mut [u8]) -> Result<()> {
        let item = self.meta.item_size();
        let mut pos = 0usize;
        self.runs(region, |first, len| {
            let n = len as usize * item;
            let r = Region {
                start: vec![first],
                count: vec![len],
            };
            self.inner.read_region(&r, &mut out[pos..pos + n])?;
            pos += n;
            Ok(())
        })
    }

    /// A region that is one run of the flat order is one range of the
    /// inner source.
    fn read_shared(&self, region: &Region) -> Option<Result<SharedBytes>> {
        let (first, len) = contiguous_run(&self.meta.shape, &region.start, &region.count)?;
        self.inner.read_shared(&Region {
            start: vec![first],
            count: vec![len],
        })
    }

    /// The stretch of the stream from the region's first run to its last:
    /// a region's runs are many short ones at worst, and the blocks
    /// between them are few (a false answer only costs the hand-over).
    fn cached(&self, region: &Region) -> bool {
        match self.span(std::slice::from_ref(region)) {
            Some(span) => self.inner.cached(&span),
            None => true,
        }
    }

    fn prefetch(&self, regions: &[Region]) {
        if let Some(span) = self.span(regions) {
            self.inner.prefetch(&[span]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DataType;
    use proptest::prelude::*;

    /// The blocks of a packed variable keep the storage contract: block
    /// `i` is the archive's bytes its index gives, as stored.
    #[test]
    fn block_store_conforms() {
        use crate::formats::packed::{PackOptions, pack};
        use crate::storage::testing::conformance::{Limits, check_values};
        let tmp = tempfile::tempdir().unwrap();
        let input = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/netcdf3/data/classic_types.nc");
        let path = tmp.path().join("packed.nc");
        let opts = PackOptions {
            block_size: 8,
            ..PackOptions::default()
        };
        pack(&input, &path, &opts).unwrap();
        let name = path.display().to_string();
        let file = crate::storage::local::os().open(&path).unwrap();
        let (archive, _, _) = open(&name, file).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let var = (0..archive.vars.len())
            .find(|&v| archive.vars[v].nblocks() >= 2)
            .expect("a variable of two blocks or more");
        let entries: Vec<(String, Vec<u8>)> = (0..archive.vars[var].nblocks())
            .map(|i| {
                let (a, b) = archive.vars[var].block_range(i);
                (i.to_string(), bytes[a as usize..b as usize].to_vec())
            })
            .collect();
        let entries: Vec<(&str, Vec<u8>)> = entries
            .iter()
            .map(|(k, v)| (k.as_str(), v.clone()))
            .collect();
        let store = BlockStore::store(&Arc::new(archive), var, "v");
        let limits = Limits {
            flat: true,
            ..Limits::default()
        };
        check_values("packed BlockStore", &store, &entries, limits);
    }

    /// Issue 41: a variable of an archive read from an object store
    /// answers its blocks' latency and whether they are cached, as the
    /// blocks' array does (`Reshaped` answered "local" and "not cached",
    /// the trait's defaults: no read-ahead sized to the link, every read
    /// handed to the waiting pool).
    #[test]
    fn a_remote_archives_variables_answer_latency_and_cached_blocks() {
        use crate::formats::packed::{PackOptions, pack};
        use crate::storage::testing::{Flight, LatentFile};
        let tmp = tempfile::tempdir().unwrap();
        let input = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/netcdf3/data/classic_types.nc");
        let path = tmp.path().join("packed.nc");
        let opts = PackOptions {
            block_size: 8,
            ..PackOptions::default()
        };
        pack(&input, &path, &opts).unwrap();
        let latency = std::time::Duration::from_millis(1);
        let local = crate::storage::local::os().open(&path).unwrap();
        let remote = Arc::new(LatentFile::new(local, latency, Flight::new()));
        let file = open_file(path.display().to_string(), remote, None).unwrap();
        let mut seen = 0;
        for v in file.variables() {
            let array = file.array_at(v.index).unwrap();
            assert_eq!(array.fetch_latency(), Some(latency), "{}", v.name);
            let whole = Region::whole(&array.meta().shape);
            if whole.num_elements() == 0 {
                continue;
            }
            assert!(!array.cached(&whole), "{}: nothing read yet", v.name);
            array.prefetch(std::slice::from_ref(&whole));
            assert!(array.cached(&whole), "{}: prefetched", v.name);
            seen += (array.meta().rank() > 1) as usize;
        }
        assert!(seen > 0, "a variable of more than one dimension");
    }

    /// A 1-D source whose element `i` is `i` as a u32.
    struct Counting(ArrayMeta);

    impl ArraySource for Counting {
        fn meta(&self) -> &ArrayMeta {
            &self.0
        }
        fn read_region(&self, region: &Region, out: &mut [u8]) -> Result<()> {
            for (k, chunk) in out.chunks_exact_mut(4).enumerate() {
                chunk.copy_from_slice(&((region.start[0] + k as u64) as u32).to_ne_bytes());
            }
            Ok(())
        }
    }

    proptest! {
        /// The stretch of the stream `cached` and `prefetch` ask for runs
        /// from the first of a box's runs to the end of its last.
        #[test]
        fn a_boxs_span_runs_from_its_first_run_to_its_last(
            shape in proptest::collection::vec(1u64..6, 0..4),
            seed in any::<u64>(),
        ) {
            let n: u64 = shape.iter().product();
            let flat = ArrayMeta::new("t", vec![n], DataType::UInt32, vec![0; 4]).unwrap();
            let meta = ArrayMeta::new("t", shape.clone(), DataType::UInt32, vec![0; 4]).unwrap();
            let r = Reshaped { meta, inner: Counting(flat) };
            let mut s = seed;
            let mut next = |m: u64| { s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407); (s >> 33) % m };
            let start: Vec<u64> = shape.iter().map(|&e| next(e)).collect();
            let count: Vec<u64> = shape.iter().zip(&start).map(|(&e, &a)| 1 + next(e - a)).collect();
            let region = Region { start, count };
            let (mut lo, mut hi) = (u64::MAX, 0);
            r.runs(&region, |first, len| {
                lo = lo.min(first);
                hi = hi.max(first + len);
                Ok(())
            }).unwrap();
            let want = Region { start: vec![lo], count: vec![hi - lo] };
            prop_assert_eq!(r.span(std::slice::from_ref(&region)), Some(want));
        }

        /// Every element of a box of the reshaped view is the linear index
        /// a brute-force row-major walk gives.
        #[test]
        fn reshaped_boxes_match_row_major_walk(
            shape in proptest::collection::vec(1u64..5, 0..4),
            seed in any::<u64>(),
        ) {
            let n: u64 = shape.iter().product();
            let flat = ArrayMeta::new("t", vec![n], DataType::UInt32, vec![0; 4]).unwrap();
            let meta = ArrayMeta::new("t", shape.clone(), DataType::UInt32, vec![0; 4]).unwrap();
            let r: &dyn ArraySource = &Reshaped { meta, inner: Counting(flat) };
            let mut s = seed;
            let mut next = |m: u64| { s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407); (s >> 33) % m };
            let start: Vec<u64> = shape.iter().map(|&e| next(e)).collect();
            let count: Vec<u64> = shape.iter().zip(&start).map(|(&e, &a)| 1 + next(e - a)).collect();
            let region = Region { start: start.clone(), count: count.clone() };
            let mut out = vec![0u8; region.num_elements() as usize * 4];
            r.read_region(&region, &mut out).unwrap();
            // Brute force: walk the box in C order.
            let strides = c_strides(&shape);
            let mut want = Vec::new();
            let total = region.num_elements();
            for k in 0..total {
                let mut rem = k;
                let mut lin = 0;
                for d in (0..shape.len()).rev() {
                    let i = rem % count[d];
                    rem /= count[d];
                    lin += (start[d] + i) * strides[d];
                }
                want.extend((lin as u32).to_ne_bytes());
            }
            prop_assert_eq!(out, want);
        }
    }
}
