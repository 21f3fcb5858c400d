//! Disjoint views of one destination array: how several threads write one
//! reply buffer at once, with the `unsafe` confined to this file.
//!
//! A read of many chunks decodes them in parallel and copies each piece
//! into the reply buffer on the thread that decoded it, while the chunk is
//! still in that core's cache. The pieces' sub-boxes are disjoint, but in
//! a C-order buffer a sub-box is a strided set of runs that interleave with
//! the other pieces' runs, so safe Rust's `split_at_mut` cannot hand them
//! out. Instead:
//!
//! - [`DisjointView::split`] takes the buffer's `&mut` and a list of
//!   sub-boxes, checks once that they lie inside the array and are pairwise
//!   disjoint, and only then hands out one [`DisjointView`] per box
//!   ([`DisjointView::single`] and [`DisjointView::whole`] for one box).
//! - A view can write its own sub-box and nothing else. Copying a box of
//!   a decoded tile into it ([`DisjointView::copy_from`], or
//!   [`DisjointView::copy_from_dense`] from a buffer of exactly the box),
//!   filling it
//!   ([`DisjointView::fill`]) and borrowing it as one slice when its bytes
//!   are contiguous ([`DisjointView::contiguous`], for decoding straight
//!   into place) are safe methods taking `&mut self`, and a view is `Send`
//!   but not `Clone`: it moves to the worker that writes it.
//! - [`DisjointView::split_at`] cuts a view in two along a dimension
//!   (disjoint by construction; an aggregation partition reads a sparse
//!   box in halves).
//!
//! So the disjointness is established in exactly one place, the
//! constructors, and the code that relies on it is in this file: the
//! `Send` impl and the one private method that turns an in-bounds run into
//! a slice (`Bytes::run`). zarrs' `ArrayBytesFixedDisjointView` has the
//! same shape, but its constructor is `unsafe` (the caller promises the
//! disjointness); here the constructor checks it.
//!
//! # The check, in O(n log n)
//!
//! Testing n boxes pairwise costs O(n²), testing their bytes O(bytes). The
//! boxes a read splits into are the pieces of one
//! [`Projection`](super::tiling::Projection): the cross product of
//! per-dimension intervals. The check asks for that shape, which implies
//! disjointness:
//!
//! 1. along each dimension, any two boxes' intervals are equal or disjoint
//!    (sort the intervals: neighbours that differ must not overlap);
//! 2. no two boxes have the same first corner (sort the corners).
//!
//! Two different boxes then start differently in some dimension, where (1)
//! makes their intervals disjoint, so the boxes are disjoint. Boxes that
//! are disjoint but not on such a grid are refused (refusing is always
//! safe). Empty boxes hold no bytes and take no part in the check.
//!
//! ```text
//! a 4 x 6 array cut into the pieces of a projection:
//!
//!            cols 0..2   cols 2..6
//! rows 0..3  [   A     |     B     ]
//! row  3     [   C     |     D     ]
//!
//! dimension 0: [0,3) [0,3) [3,4) [3,4)   equal or disjoint
//! dimension 1: [0,2) [2,6) [0,2) [2,6)   equal or disjoint
//! corners:     (0,0) (0,2) (3,0) (3,2)   all different: accepted
//! ```
//!
//! Cost per read: O(r·n log n) comparisons for n pieces of rank r, on
//! the request thread before any decoding; a read inside one chunk (one
//! piece) checks only that the box lies inside the array.

use std::borrow::Cow;
use std::marker::PhantomData;

use super::copy::Plan;

/// Why [`DisjointView::split`] refused to hand out views.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DisjointError {
    /// The buffer is not exactly the array's size (`want` is `None` when
    /// that size overflows `usize`).
    #[error(
        "a buffer of {len} bytes is not an array of shape {shape:?} of {item}-byte elements ({want:?} bytes)"
    )]
    BufferSize {
        len: usize,
        want: Option<usize>,
        shape: Vec<u64>,
        item: usize,
    },
    /// A box of another rank than the array, or reaching past it.
    #[error(
        "box {index} (start {start:?}, count {count:?}) is not inside the array of shape {shape:?}"
    )]
    OutOfBounds {
        index: usize,
        start: Vec<u64>,
        count: Vec<u64>,
        shape: Vec<u64>,
    },
    /// Two boxes whose intervals along `dim` overlap without being equal:
    /// the boxes may overlap, and are not the pieces of one projection.
    #[error("boxes {first} and {second} overlap along dimension {dim}")]
    Overlap {
        dim: usize,
        first: usize,
        second: usize,
    },
    /// Two boxes that are the same non-empty box.
    #[error("boxes {first} and {second} are the same box")]
    Duplicate { first: usize, second: usize },
}

/// The whole destination buffer, as a raw pointer: what every view of it
/// shares. Reached only through a [`DisjointView`], whose `&mut self`
/// methods ask it for runs of their own box.
struct Bytes<'a> {
    base: *mut u8,
    len: usize,
    _borrow: PhantomData<&'a mut [u8]>,
}

impl<'a> Bytes<'a> {
    fn new(buf: &'a mut [u8]) -> Bytes<'a> {
        Bytes {
            base: buf.as_mut_ptr(),
            len: buf.len(),
            _borrow: PhantomData,
        }
    }

    /// Another handle on the same buffer, for a view split off another.
    fn share(&self) -> Bytes<'a> {
        Bytes {
            base: self.base,
            len: self.len,
            _borrow: PhantomData,
        }
    }

    /// The `len` bytes at `offset`. Callers pass only runs of their own
    /// view's box (a [`Plan`] walk over it).
    fn run(&mut self, offset: usize, len: usize) -> &mut [u8] {
        assert!(
            offset.checked_add(len).is_some_and(|end| end <= self.len),
            "run outside the destination"
        );
        // SAFETY: `base..base + self.len` is the buffer borrowed mutably
        // for 'a (`Bytes::new`), and the run lies inside it (asserted).
        // No other live reference reaches these bytes: the caller is a
        // `DisjointView` (borrowed `&mut` for the slice's lifetime)
        // writing its own box, and every other view of the buffer has a
        // box disjoint from it, which `DisjointView::split` checked (or
        // `split_at` made so). The buffer's own `&mut` is held by the
        // views' lifetime 'a, so it cannot be used meanwhile.
        unsafe { std::slice::from_raw_parts_mut(self.base.add(offset), len) }
    }
}

/// One sub-box of a C-order destination array, writable independently of
/// every other view of the same array (see the [module docs](self)).
pub struct DisjointView<'a> {
    bytes: Bytes<'a>,
    /// The whole destination array's shape.
    shape: &'a [u64],
    /// Bytes per element.
    item: usize,
    /// This view's box: inside `shape`, disjoint from every other view's.
    start: Cow<'a, [u64]>,
    count: Cow<'a, [u64]>,
}

// SAFETY: a view is an exclusive borrow of its box's bytes, like the
// `&mut [u8]` it was split from (which is `Send`): no other view reaches
// those bytes (checked by `split`), so moving it to another thread and
// writing there races with nothing. Its other fields are shared `&[u64]`
// or owned data.
unsafe impl Send for DisjointView<'_> {}

impl<'a> DisjointView<'a> {
    /// The whole of `buf`, a C-order array of `shape` with `item`-byte
    /// elements, as one view. Fails if `buf` is not exactly that size.
    pub fn whole(
        buf: &'a mut [u8],
        shape: &'a [u64],
        item: usize,
    ) -> Result<DisjointView<'a>, DisjointError> {
        check_size(buf.len(), shape, item)?;
        Ok(DisjointView {
            bytes: Bytes::new(buf),
            shape,
            item,
            start: Cow::Owned(vec![0; shape.len()]),
            count: Cow::Borrowed(shape),
        })
    }

    /// One view per box (`(start, count)`, in the order given) of `buf`, a
    /// C-order array of `shape` with `item`-byte elements. Fails unless
    /// `buf` is exactly that size, every box lies inside the array, and
    /// the boxes are proven disjoint as the [module docs](self) describe
    /// (the pieces of one projection always are).
    pub fn split<I>(
        buf: &'a mut [u8],
        shape: &'a [u64],
        item: usize,
        boxes: I,
    ) -> Result<Vec<DisjointView<'a>>, DisjointError>
    where
        I: IntoIterator<Item = (&'a [u64], &'a [u64])>,
    {
        check_size(buf.len(), shape, item)?;
        let boxes: Vec<(&'a [u64], &'a [u64])> = boxes.into_iter().collect();
        for (index, &(start, count)) in boxes.iter().enumerate() {
            check_inside(index, start, count, shape)?;
        }
        check_disjoint(&boxes, shape.len())?;
        let bytes = Bytes::new(buf);
        Ok(boxes
            .into_iter()
            .map(|(start, count)| DisjointView {
                bytes: bytes.share(),
                shape,
                item,
                start: Cow::Borrowed(start),
                count: Cow::Borrowed(count),
            })
            .collect())
    }

    /// The one view of the box `start + count` of `buf` (as
    /// [`split`](Self::split) with one box, without its `Vec`: a read
    /// inside one chunk). Fails unless `buf` is exactly the array's size
    /// and the box lies inside it.
    pub fn single(
        buf: &'a mut [u8],
        shape: &'a [u64],
        item: usize,
        start: &'a [u64],
        count: &'a [u64],
    ) -> Result<DisjointView<'a>, DisjointError> {
        check_size(buf.len(), shape, item)?;
        check_inside(0, start, count, shape)?;
        Ok(DisjointView {
            bytes: Bytes::new(buf),
            shape,
            item,
            start: Cow::Borrowed(start),
            count: Cow::Borrowed(count),
        })
    }

    /// Where the box starts in the destination array.
    pub fn start(&self) -> &[u64] {
        &self.start
    }

    /// The box's extent.
    pub fn count(&self) -> &[u64] {
        &self.count
    }

    /// Bytes per element.
    pub fn item(&self) -> usize {
        self.item
    }

    /// Copy the box of this view's extent at `src_start` of the C-order
    /// array `src` (shape `src_shape`, same element size) into the view.
    ///
    /// Panics if that box does not fit `src`: callers derive the arguments
    /// from a [`Projection`](super::tiling::Projection), so a misfit is a
    /// bug, never bad input.
    pub fn copy_from(&mut self, src: &[u8], src_shape: &[u64], src_start: &[u64]) {
        let rank = self.count.len();
        assert!(
            src_shape.len() == rank
                && src_start.len() == rank
                && (0..rank).all(|d| src_start[d]
                    .checked_add(self.count[d])
                    .is_some_and(|e| e <= src_shape[d])),
            "source box {src_start:?} + {:?} outside the source {src_shape:?}",
            self.count
        );
        let plan = Plan::new(src_shape, self.shape, &self.count, self.item);
        let bytes = &mut self.bytes;
        plan.walk(src_start, &self.start, |s, d, len| {
            bytes.run(d, len).copy_from_slice(&src[s..s + len]);
        });
    }

    /// Copy `src`, the view's elements in C order over its box (so exactly
    /// its size), into the view.
    pub fn copy_from_dense(&mut self, src: &[u8]) {
        let want = self.count.iter().product::<u64>() as usize * self.item;
        assert_eq!(src.len(), want, "source of another size than the view");
        let plan = Plan::new(&self.count, self.shape, &self.count, self.item);
        // The source starts at its origin; on the stack for the usual ranks.
        let zeros = [0u64; 8];
        let rank = self.count.len();
        let owned;
        let src_start: &[u64] = if rank <= zeros.len() {
            &zeros[..rank]
        } else {
            owned = vec![0u64; rank];
            &owned
        };
        let bytes = &mut self.bytes;
        plan.walk(src_start, &self.start, |s, d, len| {
            bytes.run(d, len).copy_from_slice(&src[s..s + len]);
        });
    }

    /// Set every element of the view to `fill` (one element's bytes).
    pub fn fill(&mut self, fill: &[u8]) {
        assert_eq!(fill.len(), self.item, "fill value of another element size");
        let plan = Plan::new(self.shape, self.shape, &self.count, self.item);
        let bytes = &mut self.bytes;
        if fill.iter().all(|&b| b == 0) {
            plan.walk(&self.start, &self.start, |_, d, len| {
                bytes.run(d, len).fill(0)
            });
            return;
        }
        let pattern: Vec<u8> = fill.iter().copied().cycle().take(plan.run).collect();
        plan.walk(&self.start, &self.start, |_, d, len| {
            bytes.run(d, len).copy_from_slice(&pattern[..len]);
        });
    }

    /// The view's bytes as one slice (C order over the box) when they are
    /// one contiguous run of the destination (the box spans the array's
    /// trailing dimensions), so a decoder can write straight into them.
    /// `None` otherwise, or when the box is empty.
    pub fn contiguous(&mut self) -> Option<&mut [u8]> {
        let plan = Plan::new(&self.count, self.shape, &self.count, self.item);
        if plan.outer != 0 && !self.count[..plan.outer].iter().all(|&c| c == 1) {
            return None;
        }
        let mut first = None;
        plan.walk(&self.start, &self.start, |_, d, _| first = Some(d));
        let d = first?;
        let len = self.count.iter().product::<u64>() as usize * self.item;
        Some(self.bytes.run(d, len))
    }

    /// Cut the view in two along dimension `dim`: the first `at` indices of
    /// the box, and the rest. Panics if `dim` or `at` is out of range.
    pub fn split_at(self, dim: usize, at: u64) -> (DisjointView<'a>, DisjointView<'a>) {
        assert!(
            dim < self.count.len() && at <= self.count[dim],
            "split of {:?} at {at} along {dim}",
            self.count
        );
        let mut first_count = self.count.to_vec();
        first_count[dim] = at;
        let mut second_start = self.start.to_vec();
        second_start[dim] += at;
        let mut second_count = self.count.to_vec();
        second_count[dim] -= at;
        let second = DisjointView {
            bytes: self.bytes.share(),
            shape: self.shape,
            item: self.item,
            start: Cow::Owned(second_start),
            count: Cow::Owned(second_count),
        };
        // `self` is consumed: the two halves are its box's only views.
        let first = DisjointView {
            bytes: self.bytes,
            shape: self.shape,
            item: self.item,
            start: self.start,
            count: Cow::Owned(first_count),
        };
        (first, second)
    }
}

/// Box `index` must have the array's rank and lie inside it.
fn check_inside(
    index: usize,
    start: &[u64],
    count: &[u64],
    shape: &[u64],
) -> Result<(), DisjointError> {
    let inside = start.len() == shape.len()
        && count.len() == shape.len()
        && (0..shape.len()).all(|d| {
            start[d]
                .checked_add(count[d])
                .is_some_and(|e| e <= shape[d])
        });
    if inside {
        return Ok(());
    }
    Err(DisjointError::OutOfBounds {
        index,
        start: start.to_vec(),
        count: count.to_vec(),
        shape: shape.to_vec(),
    })
}

/// `len` must be the bytes of an array of `shape` with `item`-byte elements.
fn check_size(len: usize, shape: &[u64], item: usize) -> Result<(), DisjointError> {
    let want = shape.iter().try_fold(item, |acc, &n| {
        usize::try_from(n).ok().and_then(|n| acc.checked_mul(n))
    });
    if want == Some(len) {
        return Ok(());
    }
    Err(DisjointError::BufferSize {
        len,
        want,
        shape: shape.to_vec(),
        item,
    })
}

/// The grid check of the [module docs](self) over boxes already known to
/// lie inside an array of rank `rank`.
fn check_disjoint(boxes: &[(&[u64], &[u64])], rank: usize) -> Result<(), DisjointError> {
    // One box (a read inside one chunk): nothing to compare, no allocation.
    if boxes.len() < 2 {
        return Ok(());
    }
    // Empty boxes hold no bytes.
    let live: Vec<usize> = (0..boxes.len())
        .filter(|&i| !boxes[i].1.contains(&0))
        .collect();
    if live.len() < 2 {
        return Ok(());
    }
    // 1. Along each dimension, intervals equal or disjoint.
    let mut intervals: Vec<(u64, u64, usize)> = Vec::with_capacity(live.len());
    for dim in 0..rank {
        intervals.clear();
        intervals.extend(live.iter().map(|&i| (boxes[i].0[dim], boxes[i].1[dim], i)));
        intervals.sort_unstable();
        let mut prev = intervals[0];
        for &cur in &intervals[1..] {
            if (cur.0, cur.1) == (prev.0, prev.1) {
                continue;
            }
            // Sorted by start: distinct neighbours must not overlap (then
            // no two distinct intervals do, their ends being increasing).
            if prev.0 + prev.1 > cur.0 {
                return Err(DisjointError::Overlap {
                    dim,
                    first: prev.2,
                    second: cur.2,
                });
            }
            prev = cur;
        }
    }
    // 2. No two boxes with the same first corner.
    let mut order = live;
    order.sort_unstable_by(|&a, &b| boxes[a].0.cmp(boxes[b].0));
    for pair in order.windows(2) {
        if boxes[pair[0]].0 == boxes[pair[1]].0 {
            let (first, second) = (pair[0].min(pair[1]), pair[0].max(pair[1]));
            return Err(DisjointError::Duplicate { first, second });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::index::Region;
    use crate::engine::index::copy::{copy_region, fill_region};
    use crate::engine::index::tiling::{DimTiling, Piece, Projection};
    use proptest::prelude::*;
    use rayon::prelude::*;

    fn split_boxes<'a>(
        buf: &'a mut [u8],
        shape: &'a [u64],
        item: usize,
        boxes: &'a [(Vec<u64>, Vec<u64>)],
    ) -> Result<Vec<DisjointView<'a>>, DisjointError> {
        DisjointView::split(
            buf,
            shape,
            item,
            boxes.iter().map(|(s, c)| (s.as_slice(), c.as_slice())),
        )
    }

    /// The module docs' example: accepted, and each view writes its box.
    #[test]
    fn doc_example() {
        let shape = [4u64, 6];
        let boxes = vec![
            (vec![0, 0], vec![3, 2]),
            (vec![0, 2], vec![3, 4]),
            (vec![3, 0], vec![1, 2]),
            (vec![3, 2], vec![1, 4]),
        ];
        let mut buf = vec![0u8; 24];
        let views = split_boxes(&mut buf, &shape, 1, &boxes).unwrap();
        for (k, mut v) in views.into_iter().enumerate() {
            v.fill(&[b'A' + k as u8]);
        }
        assert_eq!(
            String::from_utf8(buf).unwrap(),
            "AABBBB\
             AABBBB\
             AABBBB\
             CCDDDD"
        );
    }

    #[test]
    fn refuses_overlapping_boxes() {
        let shape = [4u64, 4];
        let mut buf = vec![0u8; 16];
        // Overlapping along both dimensions.
        let boxes = vec![(vec![0, 0], vec![2, 2]), (vec![1, 1], vec![2, 2])];
        assert!(matches!(
            split_boxes(&mut buf, &shape, 1, &boxes),
            Err(DisjointError::Overlap { dim: 0, .. })
        ));
        // Same rows, overlapping columns.
        let boxes = vec![(vec![0, 0], vec![4, 3]), (vec![0, 2], vec![4, 2])];
        assert!(matches!(
            split_boxes(&mut buf, &shape, 1, &boxes),
            Err(DisjointError::Overlap { dim: 1, .. })
        ));
        // One box inside another (same start, longer).
        let boxes = vec![(vec![1, 1], vec![1, 1]), (vec![1, 1], vec![2, 2])];
        assert!(matches!(
            split_boxes(&mut buf, &shape, 1, &boxes),
            Err(DisjointError::Overlap { .. })
        ));
        // The same box twice.
        let boxes = vec![
            (vec![0, 0], vec![2, 2]),
            (vec![2, 2], vec![2, 2]),
            (vec![0, 0], vec![2, 2]),
        ];
        assert_eq!(
            split_boxes(&mut buf, &shape, 1, &boxes).err(),
            Some(DisjointError::Duplicate {
                first: 0,
                second: 2
            })
        );
        // Rank 0: the one element twice.
        let mut one = vec![0u8; 8];
        let boxes = vec![(vec![], vec![]), (vec![], vec![])];
        assert!(matches!(
            split_boxes(&mut one, &[], 8, &boxes),
            Err(DisjointError::Duplicate { .. })
        ));
        // Disjoint, but not a grid (a pinwheel): refused, conservatively.
        let boxes = vec![
            (vec![0, 0], vec![1, 2]),
            (vec![1, 0], vec![2, 1]),
            (vec![2, 1], vec![1, 2]),
            (vec![0, 2], vec![2, 1]),
        ];
        let mut nine = vec![0u8; 9];
        assert!(split_boxes(&mut nine, &[3, 3], 1, &boxes).is_err());
    }

    #[test]
    fn accepts_empty_and_single_boxes() {
        let shape = [4u64, 4];
        let mut buf = vec![0u8; 16];
        // An empty box overlaps nothing, wherever it is.
        let boxes = vec![(vec![0, 0], vec![4, 4]), (vec![1, 1], vec![0, 2])];
        let views = split_boxes(&mut buf, &shape, 1, &boxes).unwrap();
        assert_eq!(views.len(), 2);
        drop(views);
        let mut one = vec![0u8; 8];
        let boxes = vec![(vec![], vec![])];
        let mut views = split_boxes(&mut one, &[], 8, &boxes).unwrap();
        views[0].fill(&[7; 8]);
        assert_eq!(one, [7; 8]);
    }

    #[test]
    fn refuses_boxes_outside_the_buffer() {
        let shape = [4u64, 4];
        let mut buf = vec![0u8; 16];
        for (start, count) in [
            (vec![3, 0], vec![2, 1]),
            (vec![0, 4], vec![1, 1]),
            (vec![0, 0], vec![1]),
            (vec![0, 0, 0], vec![1, 1, 1]),
            (vec![u64::MAX, 0], vec![2, 1]),
        ] {
            let boxes = vec![(start, count)];
            assert!(
                matches!(
                    split_boxes(&mut buf, &shape, 1, &boxes),
                    Err(DisjointError::OutOfBounds { index: 0, .. })
                ),
                "{boxes:?}"
            );
        }
        // The buffer must be the array's size exactly.
        let boxes = vec![(vec![0, 0], vec![1, 1])];
        let mut short = vec![0u8; 15];
        assert!(matches!(
            split_boxes(&mut short, &shape, 1, &boxes),
            Err(DisjointError::BufferSize { len: 15, .. })
        ));
        let mut long = vec![0u8; 33];
        assert!(split_boxes(&mut long, &shape, 2, &boxes).is_err());
        assert!(DisjointView::whole(&mut long, &shape, 2).is_err());
        let huge = [u64::MAX, 2];
        assert!(matches!(
            DisjointView::whole(&mut buf, &huge, 1),
            Err(DisjointError::BufferSize { want: None, .. })
        ));
    }

    #[test]
    fn copies_and_fills_land_in_their_box() {
        // A 3 x 5 destination of 2-byte elements; the source is a 4 x 4
        // tile whose element (r, c) is [r, c].
        let src: Vec<u8> = (0..4u8)
            .flat_map(|r| (0..4u8).flat_map(move |c| [r, c]))
            .collect();
        let shape = [3u64, 5];
        let mut buf = vec![0xEEu8; 30];
        let boxes = vec![(vec![1, 1], vec![2, 3]), (vec![0, 4], vec![1, 1])];
        {
            let mut views = split_boxes(&mut buf, &shape, 2, &boxes).unwrap();
            views[0].copy_from(&src, &[4, 4], &[2, 1]);
            views[1].fill(&[9, 8]);
            assert_eq!(views[0].start(), [1, 1]);
            assert_eq!(views[0].count(), [2, 3]);
            assert_eq!(views[0].item(), 2);
        }
        let e = |r: usize, c: usize| [buf[(r * 5 + c) * 2], buf[(r * 5 + c) * 2 + 1]];
        assert_eq!(e(1, 1), [2, 1]);
        assert_eq!(e(1, 3), [2, 3]);
        assert_eq!(e(2, 2), [3, 2]);
        assert_eq!(e(0, 4), [9, 8]);
        // Untouched outside the boxes.
        for (r, c) in [(0, 0), (0, 3), (1, 0), (2, 0), (1, 4), (2, 4)] {
            assert_eq!(e(r, c), [0xEE, 0xEE], "({r}, {c})");
        }
    }

    #[test]
    fn single_and_dense_copies() {
        // A 3 x 4 destination; the box rows 1..3, columns 1..3.
        let shape = [3u64, 4];
        let (start, count) = ([1u64, 1], [2u64, 2]);
        let mut buf = vec![0u8; 12];
        let mut v = DisjointView::single(&mut buf, &shape, 1, &start, &count).unwrap();
        v.copy_from_dense(&[1, 2, 3, 4]);
        assert_eq!(buf, [0, 0, 0, 0, 0, 1, 2, 0, 0, 3, 4, 0]);
        let far = [2u64, 3];
        assert!(matches!(
            DisjointView::single(&mut buf, &shape, 1, &far, &count),
            Err(DisjointError::OutOfBounds { .. })
        ));
        assert!(DisjointView::single(&mut buf, &shape, 2, &start, &count).is_err());
        // A rank above the zeros held on the stack.
        let shape9 = [1u64, 1, 1, 1, 1, 1, 1, 2, 2];
        let mut nine = vec![0u8; 4];
        let mut v = DisjointView::whole(&mut nine, &shape9, 1).unwrap();
        v.copy_from_dense(&[5, 6, 7, 8]);
        assert_eq!(nine, [5, 6, 7, 8]);
    }

    #[test]
    #[should_panic(expected = "another size")]
    fn dense_copy_of_the_wrong_size_panics() {
        let mut buf = vec![0u8; 4];
        let mut v = DisjointView::whole(&mut buf, &[2, 2], 1).unwrap();
        v.copy_from_dense(&[0; 3]);
    }

    #[test]
    #[should_panic(expected = "outside the source")]
    fn copy_from_a_source_too_small_panics() {
        let mut buf = vec![0u8; 4];
        let mut v = DisjointView::whole(&mut buf, &[2, 2], 1).unwrap();
        v.copy_from(&[0; 4], &[2, 2], &[1, 0]);
    }

    #[test]
    fn contiguous_and_split_at() {
        let shape = [4u64, 3];
        let mut buf = vec![0u8; 12];
        let whole = DisjointView::whole(&mut buf, &shape, 1).unwrap();
        // Rows 0..1 and 1..4: both whole rows, so contiguous.
        let (mut top, rest) = whole.split_at(0, 1);
        let (mut middle, mut bottom) = rest.split_at(1, 2);
        top.contiguous().unwrap().fill(1);
        // Columns 0..2 of rows 1..4: not one run.
        assert!(middle.contiguous().is_none());
        middle.fill(&[2]);
        bottom.fill(&[3]);
        assert_eq!(bottom.start(), [1, 2]);
        assert_eq!(bottom.count(), [3, 1]);
        assert_eq!(buf, [1, 1, 1, 2, 2, 3, 2, 2, 3, 2, 2, 3]);
    }

    /// (array shape, tiling, region) as tiling.rs's projection test draws them.
    fn projection_case() -> impl Strategy<Value = (Vec<DimTiling>, Region, usize)> {
        prop::collection::vec(1u64..9, 0..=4).prop_flat_map(|shape| {
            let tilings: Vec<_> = shape
                .iter()
                .map(|_| (1u64..5).prop_map(DimTiling::Regular))
                .collect();
            let region: Vec<_> = shape
                .iter()
                .map(|&e| (0..e).prop_flat_map(move |s| (Just(s), 1..=e - s)))
                .collect();
            (tilings, region, 1usize..4).prop_map(|(t, r, item)| {
                let (start, count) = r.into_iter().unzip();
                (t, Region { start, count }, item)
            })
        })
    }

    /// The tile (tile `t` along each dimension holds values derived from
    /// its coordinates) a piece copies from, as a decoder would produce it.
    fn tile_bytes(piece: &Piece, tiling: &[DimTiling], item: usize) -> (Vec<u64>, Vec<u8>) {
        let shape: Vec<u64> = tiling
            .iter()
            .zip(&piece.tile)
            .map(|(t, &c)| t.tile_len(c))
            .collect();
        let n = shape.iter().product::<u64>() as usize * item;
        let seed = piece.tile.iter().fold(7u64, |a, &t| a * 31 + t) as usize;
        (shape, (0..n).map(|i| (i * 13 + seed) as u8).collect())
    }

    proptest! {
        /// The pieces of a projection are accepted, and writing them from
        /// rayon workers through their views gives the bytes of the safe
        /// serial `copy_region` / `fill_region` over the same pieces.
        #[test]
        fn parallel_views_match_serial_copies((tiling, region, item) in projection_case()) {
            let pieces: Vec<Piece> = Projection::new(&tiling, &region).pieces().collect();
            let n = region.num_elements() as usize * item;
            let fill: Vec<u8> = (0..item as u8).map(|b| 0xA0 + b).collect();
            // Every third piece is a missing tile (filled).
            let missing = |k: usize| k % 3 == 2;

            let mut want = vec![0u8; n];
            for (k, p) in pieces.iter().enumerate() {
                if missing(k) {
                    fill_region(&mut want, &region.count, &p.box_start, &p.count, &fill);
                } else {
                    let (shape, src) = tile_bytes(p, &tiling, item);
                    copy_region(&src, &shape, &p.tile_start, &mut want, &region.count, &p.box_start, &p.count, item);
                }
            }

            let mut got = vec![0u8; n];
            let views = DisjointView::split(
                &mut got,
                &region.count,
                item,
                pieces.iter().map(|p| (p.box_start.as_slice(), p.count.as_slice())),
            ).unwrap();
            prop_assert_eq!(views.len(), pieces.len());
            pieces.par_iter().zip(views).enumerate().for_each(|(k, (p, mut v))| {
                if missing(k) {
                    v.fill(&fill);
                } else {
                    let (shape, src) = tile_bytes(p, &tiling, item);
                    v.copy_from(&src, &shape, &p.tile_start);
                }
            });
            prop_assert_eq!(got, want);
        }

        /// Against a brute-force overlap test: a list of boxes is accepted
        /// only if no two of them share an element.
        #[test]
        fn accepted_boxes_are_disjoint(
            boxes in prop::collection::vec(
                prop::collection::vec((0u64..4, 0u64..3), 2),
                0..6,
            )
        ) {
            let shape = [6u64, 6];
            let boxes: Vec<(Vec<u64>, Vec<u64>)> = boxes
                .into_iter()
                .map(|b| b.into_iter().unzip())
                .collect();
            let mut buf = vec![0u8; 36];
            let accepted = split_boxes(&mut buf, &shape, 1, &boxes).is_ok();
            let mut owner = [usize::MAX; 36];
            let mut disjoint = true;
            for (k, (s, c)) in boxes.iter().enumerate() {
                for r in s[0]..s[0] + c[0] {
                    for col in s[1]..s[1] + c[1] {
                        let cell = &mut owner[(r * 6 + col) as usize];
                        disjoint &= *cell == usize::MAX;
                        *cell = k;
                    }
                }
            }
            prop_assert!(!accepted || disjoint, "accepted overlapping boxes {:?}", boxes);
        }
    }
}
