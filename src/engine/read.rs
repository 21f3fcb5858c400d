//! The read path: bytes of the flat file → boxes → source reads.
//!
//! `read_at(array, offset, buf)` is what a FUSE `read` and `slabfs cat`
//! call. The byte range is clamped at EOF and widened to whole elements;
//! the element range becomes at most `2R-1` contiguous boxes
//! ([`crate::engine::index::linear`]), each read by the source straight into its
//! own slice of `buf`. A range that starts or ends inside an element is
//! read whole-element-wide into a scratch buffer and trimmed. Byte order
//! is converted once, in place, at the end.
//!
//! `read_shared_at` is the copy-free variant the mount tries first: when
//! the range is whole elements, one box lying contiguously inside one
//! cached chunk (the kernel's page-aligned requests on arrays chunked by
//! whole rows, and those inside one block of a blocked netCDF-3 archive),
//! and needs no byte swap, the reply is written to the kernel straight
//! from the chunk.

use crate::dtype::{Endian, swap_in_place};
use crate::engine::array::ArraySource;
use crate::engine::cache::SharedBytes;
use crate::engine::index::linear::{boxes, element_range};
use crate::error::Result;

/// Read up to `buf.len()` bytes of the flat file of `array` starting at
/// `offset`, in byte order `order`. Returns the number of bytes read: less
/// than `buf.len()` only at the end of the file, 0 at or past it.
pub fn read_at(
    array: &dyn ArraySource,
    offset: u64,
    buf: &mut [u8],
    order: Endian,
) -> Result<usize> {
    let meta = array.meta();
    let item = meta.item_size() as u64;
    let size = meta.nbytes();
    if offset >= size || buf.is_empty() {
        return Ok(0);
    }
    let end = offset.saturating_add(buf.len() as u64).min(size);
    let n = (end - offset) as usize;
    let buf = &mut buf[..n];

    // A range of whole elements goes straight into `buf`. One that starts
    // or ends inside an element (O_DIRECT and `slabfs cat` readers, and
    // page-sized requests of arrays whose item size does not divide 4096)
    // reads the whole elements covering it, in the same single pass, into
    // a scratch buffer and is trimmed from there. Reading a partial edge
    // element on its own would read its chunk a second time: if the chunk
    // was evicted meanwhile and its file replaced, the edge bytes would
    // come from another version of the chunk than their neighbours.
    if offset.is_multiple_of(item) && end.is_multiple_of(item) {
        read_elements(array, offset / item, end / item, buf, order)?;
        return Ok(n);
    }
    let (e0, e1) = element_range(offset, end - offset, item, meta.num_elements());
    let mut scratch = vec![0u8; ((e1 - e0) * item) as usize];
    read_elements(array, e0, e1, &mut scratch, order)?;
    let skip = (offset - e0 * item) as usize;
    buf.copy_from_slice(&scratch[skip..skip + n]);
    Ok(n)
}

/// Bytes `[offset, offset + len)` of the flat file of `array` (clamped at
/// EOF, as [`read_at`]) lent from one cached chunk instead of copied, when
/// the range is whole elements forming one box that the source can serve
/// from one chunk ([`ArraySource::read_shared`]) and `order` needs no swap.
/// `None` otherwise, decided before any I/O: then use [`read_at`].
pub fn read_shared_at(
    array: &dyn ArraySource,
    offset: u64,
    len: usize,
    order: Endian,
) -> Option<Result<SharedBytes>> {
    let meta = array.meta();
    let item = meta.item_size() as u64;
    let end = offset.saturating_add(len as u64).min(meta.nbytes());
    if offset >= end || !offset.is_multiple_of(item) || !end.is_multiple_of(item) {
        return None;
    }
    if order != Endian::NATIVE && meta.dtype.swap_unit() > 1 {
        return None;
    }
    match boxes(&meta.shape, offset / item, end / item).as_slice() {
        [region] => array.read_shared(region),
        _ => None,
    }
}

/// Whether reading bytes `[offset, offset + len)` of the flat file of
/// `array` now would find everything it needs decoded in the cache
/// ([`ArraySource::cached`] of each of its boxes): a read that waits on
/// nothing. An empty range (at or past EOF) waits on nothing either.
pub fn cached_at(array: &dyn ArraySource, offset: u64, len: u64) -> bool {
    let meta = array.meta();
    let (first, end) = element_range(offset, len, meta.item_size() as u64, meta.num_elements());
    boxes(&meta.shape, first, end)
        .iter()
        .all(|region| array.cached(region))
}

/// Read the whole elements `[first, end)` into `out` (exactly their size).
fn read_elements(
    array: &dyn ArraySource,
    first: u64,
    end: u64,
    out: &mut [u8],
    order: Endian,
) -> Result<()> {
    let meta = array.meta();
    let item = meta.item_size();
    let mut pos = 0usize;
    for region in boxes(&meta.shape, first, end) {
        let len = region.num_elements() as usize * item;
        array.read_region(&region, &mut out[pos..pos + len])?;
        pos += len;
    }
    debug_assert_eq!(pos, out.len());
    if order != Endian::NATIVE {
        swap_in_place(out, meta.dtype.swap_unit());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DataType;
    use crate::engine::array::ArrayMeta;
    use crate::engine::index::{Region, c_strides};
    use proptest::prelude::*;

    /// A source whose element at linear index i is the bytes of
    /// `i * 1000003` truncated to the item size (distinct per element).
    struct Synthetic(ArrayMeta);

    fn element(i: u64, item: usize) -> Vec<u8> {
        (i.wrapping_mul(1_000_003).wrapping_add(17)).to_ne_bytes()[..item.min(8)]
            .iter()
            .copied()
            .chain(std::iter::repeat_n(i as u8, item.saturating_sub(8)))
            .collect()
    }

    impl ArraySource for Synthetic {
        fn meta(&self) -> &ArrayMeta {
            &self.0
        }
        fn read_region(&self, r: &Region, out: &mut [u8]) -> Result<()> {
            let item = self.0.item_size();
            let strides = c_strides(&self.0.shape);
            for k in 0..r.num_elements() {
                let mut rem = k;
                let mut lin = 0;
                for d in (0..r.rank()).rev() {
                    lin += (r.start[d] + rem % r.count[d]) * strides[d];
                    rem /= r.count[d];
                }
                let at = k as usize * item;
                out[at..at + item].copy_from_slice(&element(lin, item));
            }
            Ok(())
        }
    }

    /// A 1-D uint32 array that changes between any two reads, like a
    /// chunk file replaced under a cache that let go of it: read number
    /// `v` (from 1) fills element `i` with `v << 16 | i`.
    struct Changing(ArrayMeta, std::sync::atomic::AtomicU32);

    impl ArraySource for Changing {
        fn meta(&self) -> &ArrayMeta {
            &self.0
        }
        fn read_region(&self, r: &Region, out: &mut [u8]) -> Result<()> {
            let v = self.1.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            for (k, o) in out.chunks_exact_mut(4).enumerate() {
                o.copy_from_slice(&(v << 16 | (r.start[0] as u32 + k as u32)).to_ne_bytes());
            }
            Ok(())
        }
    }

    /// Regression (found by tests/it/soak.rs): a read starting and ending
    /// inside elements read its partial edge elements with reads of their
    /// own, so an `O_DIRECT` read of a chunk rewritten meanwhile got its
    /// last bytes from the new version and the rest from the old one.
    #[test]
    fn partial_edge_elements_come_from_the_same_read_as_their_neighbours() {
        let meta = ArrayMeta::new("changing", vec![100], DataType::UInt32, vec![0; 4]).unwrap();
        let a = Changing(meta, 0.into());
        // Bytes 6..397: elements 1..100, partial at both ends.
        let mut buf = vec![0u8; 391];
        assert_eq!(read_at(&a, 6, &mut buf, Endian::NATIVE).unwrap(), 391);
        let mut want = Vec::new();
        for i in 1..100u32 {
            want.extend((1 << 16 | i).to_ne_bytes());
        }
        assert_eq!(buf, want[2..393]);
        assert_eq!(a.1.load(std::sync::atomic::Ordering::SeqCst), 1, "one read");
    }

    fn dtype(i: usize) -> DataType {
        [
            DataType::UInt8,
            DataType::Int16,
            DataType::Float32,
            DataType::Float64,
            DataType::Complex64,
            DataType::FixedBytes(3),
        ][i]
            .clone()
    }

    proptest! {
        /// Any byte range of any shape reads the same bytes as the
        /// element-by-element flat file, in either byte order.
        #[test]
        fn read_at_matches_flat_reference(
            shape in prop::collection::vec(0u64..5, 0..=5),
            dt in 0usize..6,
            offset in 0u64..2000,
            len in 0usize..2000,
            big in any::<bool>(),
        ) {
            let dt = dtype(dt);
            let item = dt.size();
            let meta = ArrayMeta::new("synthetic", shape.clone(), dt.clone(), vec![0; item]).unwrap();
            let n = meta.num_elements();
            let mut flat = Vec::new();
            for i in 0..n {
                let mut e = element(i, item);
                if big != cfg!(target_endian = "big") {
                    swap_in_place(&mut e, dt.swap_unit());
                }
                flat.extend(e);
            }
            let order = if big { Endian::Big } else { Endian::Little };
            let mut buf = vec![0xAAu8; len];
            let got = read_at(&Synthetic(meta), offset, &mut buf, order).unwrap();
            let lo = (offset as usize).min(flat.len());
            let hi = (offset as usize + len).min(flat.len());
            prop_assert_eq!(got, hi - lo);
            prop_assert_eq!(&buf[..got], &flat[lo..hi]);
        }
    }
}
