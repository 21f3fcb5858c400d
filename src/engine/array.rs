//! What every source of array data answers: its metadata, and "fill this
//! box of my index space".
//!
//! Zarr arrays, netCDF variables and aggregations all implement
//! [`ArraySource`]; the read path ([`crate::engine::read`]) turns a byte range of
//! the flat file into boxes and asks the source for each. Sources fill
//! boxes in native byte order; the read path converts once at the end.
//!
//! # Wrappers
//!
//! Some sources show another one with a few answers changed: an HDF5
//! dataset padded to its unlimited dimension, a filtered dataset that
//! picks one of two chains, a 1-D block stream shown with its variable's
//! shape. Each implements [`Wrapper`] (its [`inner`](Wrapper::inner)
//! source, and the methods it changes) and gets [`ArraySource`] from the
//! blanket impl below, which forwards every method it does not change to
//! the inner source. A wrapper that implemented [`ArraySource`] itself got
//! the trait's default for every method it did not write, and those are
//! "local, nothing cached": `MaskAware` and `Extended` (HDF5) and
//! `Reshaped` (blocked archives) answered that of a remote array, so its
//! reads always went to the waiting pool and the readahead sized it as a
//! local one (issue 41).
//!
//! What keeps this true as the trait grows: `tests/it/forwarding.rs`
//! checks as text that [`Wrapper`] and the blanket impl name every method
//! of [`ArraySource`] (a new method cannot fall back to its default in a
//! wrapper unseen), that a wrapper showing another index space (one that
//! changes [`meta`](Wrapper::meta)) decides every method taking a region
//! itself (forwarding a region of the outer shape to the inner source is
//! wrong there), and that every other implementation of [`ArraySource`]
//! outside tests is on its list of sources that read their own data or
//! combine several, with the reason.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::dtype::DataType;
use crate::engine::cache::SharedBytes;
use crate::engine::index::{Region, checked_num_elements};
use crate::error::{Error, Result};

/// The facts about an array that the flat view and its sidecars show.
#[derive(Debug, Clone, PartialEq)]
pub struct ArrayMeta {
    pub shape: Vec<u64>,
    pub dtype: DataType,
    /// One element in native byte order.
    pub fill_value: Vec<u8>,
    /// One entry per dimension; `None` where unnamed.
    pub dimension_names: Vec<Option<String>>,
    pub attributes: Map<String, Value>,
    /// The shape of the stored chunks (the first chunk for irregular
    /// grids), for sidecars; `None` for unchunked sources.
    pub chunk_shape: Option<Vec<u64>>,
    /// Where the data comes from, for logs and sidecars.
    pub source: String,
    /// Elements and bytes of the flat file, checked for overflow.
    num_elements: u64,
    nbytes: u64,
}

impl ArrayMeta {
    /// Build the metadata, checking that the flat file's size fits a u64
    /// and that per-dimension facts agree with the rank.
    pub fn new(
        source: impl Into<String>,
        shape: Vec<u64>,
        dtype: DataType,
        fill_value: Vec<u8>,
    ) -> Result<ArrayMeta> {
        let source = source.into();
        let num_elements = checked_num_elements(&shape)
            .ok_or_else(|| Error::metadata(&source, format!("shape {shape:?} overflows")))?;
        let nbytes = num_elements
            .checked_mul(dtype.size() as u64)
            .ok_or_else(|| {
                Error::metadata(
                    &source,
                    format!("shape {shape:?} of {dtype} is more than 2^64 bytes"),
                )
            })?;
        if fill_value.len() != dtype.size() {
            return Err(Error::metadata(
                &source,
                format!("fill value of {} bytes for {dtype}", fill_value.len()),
            ));
        }
        let rank = shape.len();
        Ok(ArrayMeta {
            shape,
            dtype,
            fill_value,
            dimension_names: vec![None; rank],
            attributes: Map::new(),
            chunk_shape: None,
            source,
            num_elements,
            nbytes,
        })
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    pub fn num_elements(&self) -> u64 {
        self.num_elements
    }

    /// Size of the flat file in bytes.
    pub fn nbytes(&self) -> u64 {
        self.nbytes
    }

    pub fn item_size(&self) -> usize {
        self.dtype.size()
    }
}

/// What the live refresh ([`crate::fs::refresh`]) asks a source: how to
/// tell whether its stored data changed, and under which id its decoded
/// chunks are cached (to drop them when it is replaced).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChangeStamp {
    /// The cache id of the source's chunks ([`crate::engine::cache::ChunkKey::source`]).
    pub cache_id: Option<u64>,
    /// Changes whenever any of the source's files changes; `None` when the
    /// source cannot tell (then only a metadata change counts as a change).
    pub data: Option<u64>,
    /// The stamp covers files other than the one the array was opened
    /// from (an aggregation's fragments, a virtual dataset's sources): the
    /// version of that one file does not tell whether the array changed.
    pub elsewhere: bool,
}

pub trait ArraySource: Send + Sync {
    fn meta(&self) -> &ArrayMeta;

    /// The source's current [`ChangeStamp`]. May do I/O (a Zarr array
    /// stats its files); called by the refresh thread, never on a read.
    fn change_stamp(&self) -> ChangeStamp {
        ChangeStamp::default()
    }

    /// Fill `out` with the elements of `region`, C order over the region,
    /// native byte order. `out.len()` is exactly the region's size in bytes
    /// and the region lies inside the array.
    fn read_region(&self, region: &Region, out: &mut [u8]) -> Result<()>;

    /// The array as its file stores it, when this one shows it otherwise
    /// (netCDF-4's variables padded to their unlimited dimension's
    /// length): what another dataset that names it reads (an HDF5
    /// virtual dataset's source: past the stored extent is missing data,
    /// not fill). `None` (the default): as shown.
    fn stored(&self) -> Option<Arc<dyn ArraySource>> {
        None
    }

    /// The elements of `region` (C order, native byte order) as a slice of
    /// one decoded chunk in the cache, when they lie contiguously in one:
    /// a reply then goes out straight from the chunk instead of through a
    /// copy into a fresh buffer. `None` when this source cannot serve
    /// `region` that way (the default); the caller then uses
    /// [`read_region`](Self::read_region). Decided before any I/O, so
    /// `None` costs nothing.
    fn read_shared(&self, region: &Region) -> Option<Result<SharedBytes>> {
        let _ = region;
        None
    }

    /// Whether reading `region` now would find every chunk it needs
    /// decoded in the cache, so that the read waits on nothing: no
    /// network, no disk, no decode. The mount answers such a read on the
    /// thread the request arrived on and hands the others to threads that
    /// may wait ([`crate::fs::SlabFs::serve_read`]). `false` (the
    /// default) is always safe: it only costs that hand-over. Cheap, and
    /// decided without I/O.
    fn cached(&self, region: &Region) -> bool {
        let _ = region;
        false
    }

    /// The typical latency of one fetch from where this source's data
    /// lives, for remote sources ([`crate::storage::Store::latency`]);
    /// `None` for local ones. Readahead keeps more in flight for a source
    /// that has one ([`crate::engine::readahead`]).
    fn fetch_latency(&self) -> Option<Duration> {
        None
    }

    /// Decode what reading `regions` will need into the shared cache,
    /// ahead of a read expected soon ([`crate::engine::readahead`]): the
    /// boxes of one byte range, given together so that a remote source
    /// fetches all their chunks in one round trip. Runs to completion;
    /// callers run it in the background. Failures are left for the real
    /// read to report. Sources without a cache do nothing.
    fn prefetch(&self, regions: &[Region]) {
        let _ = regions;
    }
}

/// A source that shows another one, its [`inner`](Self::inner), changing
/// some of its answers: every method defaults to the inner source's
/// answer, and a wrapper writes only the ones it changes. The blanket
/// impl makes every wrapper an [`ArraySource`] (the module doc says why
/// this is the one way to write one). The methods mirror
/// [`ArraySource`]'s, whose docs say what each answers.
pub trait Wrapper: Send + Sync {
    /// The source this one shows, which answers what the wrapper does not
    /// change.
    fn inner(&self) -> &dyn ArraySource;

    fn meta(&self) -> &ArrayMeta {
        self.inner().meta()
    }

    fn change_stamp(&self) -> ChangeStamp {
        self.inner().change_stamp()
    }

    fn read_region(&self, region: &Region, out: &mut [u8]) -> Result<()> {
        self.inner().read_region(region, out)
    }

    fn stored(&self) -> Option<Arc<dyn ArraySource>> {
        self.inner().stored()
    }

    fn read_shared(&self, region: &Region) -> Option<Result<SharedBytes>> {
        self.inner().read_shared(region)
    }

    fn cached(&self, region: &Region) -> bool {
        self.inner().cached(region)
    }

    fn fetch_latency(&self) -> Option<Duration> {
        self.inner().fetch_latency()
    }

    fn prefetch(&self, regions: &[Region]) {
        self.inner().prefetch(regions)
    }
}

/// Every method, named once: none falls back to [`ArraySource`]'s default
/// (checked by `tests/it/forwarding.rs`).
impl<W: Wrapper> ArraySource for W {
    fn meta(&self) -> &ArrayMeta {
        Wrapper::meta(self)
    }

    fn change_stamp(&self) -> ChangeStamp {
        Wrapper::change_stamp(self)
    }

    fn read_region(&self, region: &Region, out: &mut [u8]) -> Result<()> {
        Wrapper::read_region(self, region, out)
    }

    fn stored(&self) -> Option<Arc<dyn ArraySource>> {
        Wrapper::stored(self)
    }

    fn read_shared(&self, region: &Region) -> Option<Result<SharedBytes>> {
        Wrapper::read_shared(self, region)
    }

    fn cached(&self, region: &Region) -> bool {
        Wrapper::cached(self, region)
    }

    fn fetch_latency(&self) -> Option<Duration> {
        Wrapper::fetch_latency(self)
    }

    fn prefetch(&self, regions: &[Region]) {
        Wrapper::prefetch(self, regions)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A source whose every answer differs from the trait's default, and
    /// which records the calls that answer nothing.
    struct Answers {
        meta: ArrayMeta,
        calls: Mutex<Vec<String>>,
    }

    impl ArraySource for Answers {
        fn meta(&self) -> &ArrayMeta {
            &self.meta
        }
        fn change_stamp(&self) -> ChangeStamp {
            ChangeStamp {
                cache_id: Some(7),
                data: Some(8),
                elsewhere: true,
            }
        }
        fn read_region(&self, region: &Region, out: &mut [u8]) -> Result<()> {
            out.fill(region.start[0] as u8);
            Ok(())
        }
        fn stored(&self) -> Option<Arc<dyn ArraySource>> {
            Some(Arc::new(Answers {
                meta: self.meta.clone(),
                calls: Mutex::default(),
            }))
        }
        fn read_shared(&self, region: &Region) -> Option<Result<SharedBytes>> {
            Some(Ok(SharedBytes::owned(vec![9; region.count[0] as usize])))
        }
        fn cached(&self, region: &Region) -> bool {
            region.start[0] == 1
        }
        fn fetch_latency(&self) -> Option<Duration> {
            Some(Duration::from_millis(20))
        }
        fn prefetch(&self, regions: &[Region]) {
            self.calls
                .lock()
                .unwrap()
                .push(format!("prefetch {}", regions.len()));
        }
    }

    /// A wrapper that changes nothing.
    struct Same(Answers);

    impl Wrapper for Same {
        fn inner(&self) -> &dyn ArraySource {
            &self.0
        }
    }

    /// A wrapper that writes only `inner` answers every method as its
    /// inner source does, none with the trait's default.
    #[test]
    fn a_wrapper_forwards_every_method_it_does_not_change() {
        let meta = ArrayMeta::new("t", vec![4], DataType::UInt8, vec![0]).unwrap();
        let same = Same(Answers {
            meta: meta.clone(),
            calls: Mutex::default(),
        });
        let a: &dyn ArraySource = &same;
        let at = |start| Region {
            start: vec![start],
            count: vec![2],
        };
        assert_eq!(a.meta(), &meta);
        assert_eq!(a.change_stamp(), same.0.change_stamp());
        let mut out = [0u8; 2];
        a.read_region(&at(3), &mut out).unwrap();
        assert_eq!(out, [3, 3]);
        assert_eq!(
            a.stored().unwrap().fetch_latency(),
            Some(Duration::from_millis(20))
        );
        assert_eq!(&*a.read_shared(&at(0)).unwrap().unwrap(), &[9, 9]);
        assert!(a.cached(&at(1)) && !a.cached(&at(0)));
        assert_eq!(a.fetch_latency(), Some(Duration::from_millis(20)));
        a.prefetch(&[at(0), at(2)]);
        assert_eq!(*same.0.calls.lock().unwrap(), ["prefetch 2"]);
    }
}
