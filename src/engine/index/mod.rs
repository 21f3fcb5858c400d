//! I/O-free index arithmetic: the read path's geometry.
//!
//! A read of the flat file goes through three pure steps:
//!
//! 1. [`linear`]: a byte range of the flat row-major file becomes an element
//!    range, and that becomes at most `2R-1` boxes ([`Region`]s), each of
//!    which is one contiguous run of the flat file.
//! 2. [`tiling`]: a box is projected, one dimension at a time, over a
//!    rectilinear tiling of the index space (a chunk grid, a shard's inner
//!    grid, an aggregation's partition matrix), and an odometer walks the
//!    cross product of the per-dimension projections.
//! 3. [`copy`]: each piece is copied (strided) from its decoded tile into
//!    the box's slice of the output buffer, or filled with the fill value.
//!    When the pieces are written from several threads at once, each gets
//!    a [`disjoint::DisjointView`] of the buffer: the views' boxes are
//!    checked disjoint once, when the buffer is split, so writing through
//!    them is safe (this module's only `unsafe`).
//!
//! Nothing here does I/O or allocates per element, and every step is
//! property-tested against an element-by-element reference.

pub mod copy;
pub mod disjoint;
pub mod linear;
pub mod tiling;

/// A box of an array's index space: `start[d] .. start[d] + count[d]` in
/// every dimension `d`. Rank 0 is the single element of a scalar.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Region {
    pub start: Vec<u64>,
    pub count: Vec<u64>,
}

impl Region {
    /// The whole of an array of the given shape.
    pub fn whole(shape: &[u64]) -> Region {
        Region {
            start: vec![0; shape.len()],
            count: shape.to_vec(),
        }
    }

    pub fn rank(&self) -> usize {
        self.start.len()
    }

    /// Number of elements. Regions come from shapes whose element count was
    /// checked at open time, so this cannot overflow for them.
    pub fn num_elements(&self) -> u64 {
        self.count.iter().product()
    }
}

/// Number of elements of `shape`, or None if it overflows u64.
pub fn checked_num_elements(shape: &[u64]) -> Option<u64> {
    shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d))
}

/// Row-major strides (in elements) of an array of `shape`.
pub fn c_strides(shape: &[u64]) -> Vec<u64> {
    let mut strides = vec![1u64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    strides
}

/// Where the box `start`/`count` (inside an array of `shape`) lies in the
/// array's row-major order, as (first element, number of elements), when
/// its elements are consecutive there: every dimension after the first one
/// with more than one element is covered whole. `None` otherwise. This is
/// when a piece of a decoded chunk can be handed out as one slice.
pub fn contiguous_run(shape: &[u64], start: &[u64], count: &[u64]) -> Option<(u64, u64)> {
    let wide = count.iter().position(|&c| c > 1).unwrap_or(count.len());
    let covered = |d: usize| start[d] == 0 && count[d] == shape[d];
    if !(wide + 1..shape.len()).all(covered) {
        return None;
    }
    let strides = c_strides(shape);
    let first = start.iter().zip(&strides).map(|(s, t)| s * t).sum();
    Some((first, count.iter().product()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A shape of rank 0 to 4 and a box inside it.
    fn shape_and_box() -> impl Strategy<Value = (Vec<u64>, Vec<u64>, Vec<u64>)> {
        proptest::collection::vec(1u64..5, 0..5).prop_flat_map(|shape| {
            let dims: Vec<_> = shape
                .iter()
                .map(|&n| (0..n).prop_flat_map(move |s| (Just(s), 1..=n - s)))
                .collect();
            (Just(shape), dims).prop_map(|(shape, d)| {
                let (start, count) = d.into_iter().unzip();
                (shape, start, count)
            })
        })
    }

    proptest! {
        /// Against the element-by-element definition: the box's row-major
        /// offsets, walked in C order, are consecutive exactly when a run
        /// is reported, and then they are that run.
        #[test]
        fn contiguous_run_matches_the_offsets((shape, start, count) in shape_and_box()) {
            let strides = c_strides(&shape);
            let n: u64 = count.iter().product();
            let offsets: Vec<u64> = (0..n)
                .map(|mut k| {
                    let mut off = 0;
                    for d in (0..shape.len()).rev() {
                        off += (start[d] + k % count[d]) * strides[d];
                        k /= count[d];
                    }
                    off
                })
                .collect();
            let consecutive = offsets.windows(2).all(|w| w[1] == w[0] + 1);
            match contiguous_run(&shape, &start, &count) {
                Some((first, len)) => {
                    prop_assert!(consecutive);
                    prop_assert_eq!(first, offsets[0]);
                    prop_assert_eq!(len, n);
                }
                None => prop_assert!(!consecutive),
            }
        }
    }
}
