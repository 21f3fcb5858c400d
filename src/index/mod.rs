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
//!
//! Nothing here does I/O or allocates per element, and every step is
//! property-tested against an element-by-element reference.

pub mod copy;
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
