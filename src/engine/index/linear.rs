//! Linear ranges of the flat file → contiguous boxes.
//!
//! The flat view of an array of shape `S` (rank `R`) lists its elements in
//! row-major order. A read of bytes `[offset, offset + len)` first becomes
//! the element range `[e0, e1)` that covers it (a read may start or end in
//! the middle of an element; the caller trims), and the element range
//! becomes a short list of boxes, each of which is one contiguous run of
//! the flat file, listed in file order. Every box can then be read
//! independently straight into its own slice of the reply buffer.
//!
//! # Worked example
//!
//! Shape `[4, 3, 5]` (60 elements, row-major strides `[15, 5, 1]`) and the
//! element range `[7, 52)`:
//!
//! ```text
//! element 7  = index (0, 1, 2)     element 51 = index (3, 1, 1)
//!
//! head:    (0, 1, 2..5)            elements  7.. 10  finish row (0,1)
//!          (0, 2, 0..5)            elements 10.. 15  finish plane 0
//! middle:  (1..3, 0..3, 0..5)      elements 15.. 45  whole planes 1 and 2
//! tail:    (3, 0..1, 0..5)         elements 45.. 50  whole rows of plane 3
//!          (3, 1, 0..2)            elements 50.. 52  start of row (3,1)
//! ```
//!
//! Five boxes, the most possible for rank 3 (`2R - 1`): at each level, a
//! partial head, then whole sub-blocks, then a partial tail, with the head
//! and tail recursing one level deeper.

use super::Region;

/// The element range `[first, end)` whose bytes cover
/// `[offset, offset + len)` of a file of `num_elements` elements of
/// `item_size` bytes, clamped at the end of the file.
pub fn element_range(offset: u64, len: u64, item_size: u64, num_elements: u64) -> (u64, u64) {
    assert!(item_size > 0, "element size must be positive");
    let file_size = num_elements.saturating_mul(item_size);
    let start = offset.min(file_size);
    let end = offset.saturating_add(len).min(file_size);
    if start >= end {
        return (start / item_size, start / item_size);
    }
    (start / item_size, end.div_ceil(item_size))
}

/// Decompose the element range `[first, end)` of an array of `shape` into
/// boxes, each one contiguous in row-major order, in file order. At most
/// `2R - 1` boxes (1 for rank 0 and 1); none for an empty range. `end` must
/// not exceed the number of elements.
pub fn boxes(shape: &[u64], first: u64, end: u64) -> Vec<Region> {
    let mut out = Vec::new();
    if first >= end {
        return out;
    }
    if shape.is_empty() {
        debug_assert!(first == 0 && end == 1);
        out.push(Region {
            start: vec![],
            count: vec![],
        });
        return out;
    }
    let mut prefix = Vec::with_capacity(shape.len());
    decompose(shape, &mut prefix, first, end, &mut out);
    out
}

/// Decompose `[a, b)` (element offsets within the sub-array `shape`, which
/// is the trailing part of the full shape under the fixed leading indices
/// `prefix`) into boxes.
fn decompose(shape: &[u64], prefix: &mut Vec<u64>, a: u64, b: u64, out: &mut Vec<Region>) {
    let inner: u64 = shape[1..].iter().product();
    let push = |prefix: &[u64], lo: u64, hi: u64, out: &mut Vec<Region>| {
        let mut start = prefix.to_vec();
        let mut count = vec![1; prefix.len()];
        start.push(lo);
        count.push(hi - lo);
        for &d in &shape[1..] {
            start.push(0);
            count.push(d);
        }
        out.push(Region { start, count });
    };
    let (mut row, a_off) = (a / inner, a % inner);
    let (b_row, b_off) = (b / inner, b % inner);
    if row == b_row {
        // Inside a single row of this level (a_off < b_off): one level deeper.
        prefix.push(row);
        decompose(&shape[1..], prefix, a_off, b_off, out);
        prefix.pop();
        return;
    }
    if a_off != 0 {
        prefix.push(row);
        decompose(&shape[1..], prefix, a_off, inner, out);
        prefix.pop();
        row += 1;
    }
    if row < b_row {
        push(prefix, row, b_row, out);
    }
    if b_off != 0 {
        prefix.push(b_row);
        decompose(&shape[1..], prefix, 0, b_off, out);
        prefix.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::index::c_strides;
    use proptest::prelude::*;

    /// Linear index of every element of `r`, in row-major order over `r`.
    fn flat_indices(shape: &[u64], r: &Region) -> Vec<u64> {
        let strides = c_strides(shape);
        let n = r.num_elements();
        let mut out = Vec::with_capacity(n as usize);
        for k in 0..n {
            // Unravel k over r.count.
            let mut rem = k;
            let mut lin = 0;
            for d in (0..r.rank()).rev() {
                let i = rem % r.count[d];
                rem /= r.count[d];
                lin += (r.start[d] + i) * strides[d];
            }
            out.push(lin);
        }
        out
    }

    #[test]
    fn worked_example() {
        let b = boxes(&[4, 3, 5], 7, 52);
        let as_pairs: Vec<(Vec<u64>, Vec<u64>)> =
            b.into_iter().map(|r| (r.start, r.count)).collect();
        assert_eq!(
            as_pairs,
            vec![
                (vec![0, 1, 2], vec![1, 1, 3]),
                (vec![0, 2, 0], vec![1, 1, 5]),
                (vec![1, 0, 0], vec![2, 3, 5]),
                (vec![3, 0, 0], vec![1, 1, 5]),
                (vec![3, 1, 0], vec![1, 1, 2]),
            ]
        );
    }

    #[test]
    fn element_range_edges() {
        // 10 elements of 4 bytes = 40 bytes.
        assert_eq!(element_range(0, 40, 4, 10), (0, 10));
        assert_eq!(element_range(1, 2, 4, 10), (0, 1)); // inside one element
        assert_eq!(element_range(3, 2, 4, 10), (0, 2)); // straddles two
        assert_eq!(element_range(38, 100, 4, 10), (9, 10)); // clamped
        assert_eq!(element_range(40, 4, 4, 10), (10, 10)); // at EOF
        assert_eq!(element_range(100, 4, 4, 10), (10, 10)); // past EOF
        assert_eq!(element_range(8, 0, 4, 10), (2, 2)); // empty
        assert_eq!(element_range(u64::MAX - 1, u64::MAX, 1, 10), (10, 10));
    }

    #[test]
    fn rank_zero_and_one() {
        assert_eq!(
            boxes(&[], 0, 1),
            vec![Region {
                start: vec![],
                count: vec![]
            }]
        );
        assert_eq!(boxes(&[], 0, 0), vec![]);
        assert_eq!(
            boxes(&[10], 3, 7),
            vec![Region {
                start: vec![3],
                count: vec![4]
            }]
        );
    }

    fn shape_and_range() -> impl Strategy<Value = (Vec<u64>, u64, u64)> {
        prop::collection::vec(0u64..6, 0..=6).prop_flat_map(|shape| {
            let n: u64 = shape.iter().product();
            (Just(shape), 0..=n, 0..=n).prop_map(|(s, a, b)| (s, a.min(b), a.max(b)))
        })
    }

    proptest! {
        /// The boxes, flattened in order, are exactly the elements
        /// `first..end`, each box is contiguous, and there are at most 2R-1.
        #[test]
        fn boxes_cover_exactly_the_range((shape, a, b) in shape_and_range()) {
            let bx = boxes(&shape, a, b);
            let mut all = Vec::new();
            for r in &bx {
                prop_assert!(r.num_elements() > 0);
                let idx = flat_indices(&shape, r);
                for w in idx.windows(2) {
                    prop_assert_eq!(w[1], w[0] + 1, "box {:?} not contiguous", r);
                }
                all.extend(idx);
            }
            prop_assert_eq!(all, (a..b).collect::<Vec<_>>());
            prop_assert!(bx.len() <= (2 * shape.len()).saturating_sub(1).max(1));
        }

        /// Byte ranges map to the smallest element range covering them.
        #[test]
        fn element_range_covers_bytes(offset in 0u64..200, len in 0u64..200, item in 1u64..17, n in 0u64..20) {
            let (e0, e1) = element_range(offset, len, item, n);
            let size = n * item;
            let (lo, hi) = (offset.min(size), (offset + len).min(size));
            if lo < hi {
                prop_assert!(e0 * item <= lo && lo < (e0 + 1) * item);
                prop_assert!((e1 - 1) * item < hi && hi <= e1 * item);
            } else {
                prop_assert_eq!(e0, e1);
            }
        }
    }
}
