//! The read path: bytes of the flat file → boxes → source reads.
//!
//! `read_at(array, offset, buf)` is what a FUSE `read` and `slabfs cat`
//! call. The byte range is clamped at EOF and widened to whole elements;
//! the element range becomes at most `2R-1` contiguous boxes
//! ([`crate::index::linear`]), each read by the source straight into its
//! own slice of `buf`. Only a partial first or last element goes through a
//! small scratch buffer. Byte order is converted once, in place, at the end.

use crate::array::ArraySource;
use crate::dtype::{Endian, swap_in_place};
use crate::error::Result;
use crate::index::linear::{boxes, element_range};

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

    // Whole elements inside the range go straight into `buf`; a partial
    // element at either end is read into a scratch element and trimmed.
    let first_whole = offset.div_ceil(item);
    let end_whole = end / item;
    if first_whole >= end_whole {
        // No whole element: the range lies within one or two elements.
        let (e0, e1) = element_range(offset, end - offset, item, meta.num_elements());
        let mut scratch = vec![0u8; ((e1 - e0) * item) as usize];
        read_elements(array, e0, e1, &mut scratch, order)?;
        let skip = (offset - e0 * item) as usize;
        buf.copy_from_slice(&scratch[skip..skip + n]);
        return Ok(n);
    }
    let head = (first_whole * item - offset) as usize;
    let middle = ((end_whole - first_whole) * item) as usize;
    if head > 0 {
        let mut scratch = vec![0u8; item as usize];
        read_elements(array, first_whole - 1, first_whole, &mut scratch, order)?;
        buf[..head].copy_from_slice(&scratch[item as usize - head..]);
    }
    read_elements(
        array,
        first_whole,
        end_whole,
        &mut buf[head..head + middle],
        order,
    )?;
    let tail = n - head - middle;
    if tail > 0 {
        let mut scratch = vec![0u8; item as usize];
        read_elements(array, end_whole, end_whole + 1, &mut scratch, order)?;
        buf[head + middle..].copy_from_slice(&scratch[..tail]);
    }
    Ok(n)
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
    use crate::array::ArrayMeta;
    use crate::dtype::DataType;
    use crate::index::{Region, c_strides};
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
