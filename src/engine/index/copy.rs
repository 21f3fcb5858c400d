//! Strided copies between C-order arrays.
//!
//! The last step of a read: move one [`Piece`](super::tiling::Piece) of a
//! box from its decoded tile into the box's slice of the reply buffer, or
//! fill it with the fill value when the tile does not exist. Both arrays
//! are C order; trailing dimensions that are whole in source, destination
//! and piece are merged into one contiguous run, so copying a whole chunk
//! row-block is a handful of large `memcpy`s rather than one per row.
//!
//! These functions write one `&mut` buffer from one thread. A read whose
//! pieces are written from several threads at once gives each its own
//! [`DisjointView`](super::disjoint::DisjointView) of the buffer, which
//! walks the same `Plan`.

/// Copy the sub-box `count` starting at `src_start` of the C-order array
/// `src` (shape `src_shape`) to `dst_start` of the C-order array `dst`
/// (shape `dst_shape`). Elements are `item` bytes.
///
/// Panics if the sub-box does not fit either array: callers derive every
/// argument from a [`Projection`](super::tiling::Projection), so a misfit is
/// a bug, never bad input.
#[allow(clippy::too_many_arguments)]
pub fn copy_region(
    src: &[u8],
    src_shape: &[u64],
    src_start: &[u64],
    dst: &mut [u8],
    dst_shape: &[u64],
    dst_start: &[u64],
    count: &[u64],
    item: usize,
) {
    let plan = Plan::new(src_shape, dst_shape, count, item);
    plan.walk(src_start, dst_start, |s, d, len| {
        dst[d..d + len].copy_from_slice(&src[s..s + len]);
    });
}

/// Set the sub-box `count` at `dst_start` of the C-order array `dst` (shape
/// `dst_shape`) to the element `fill`.
pub fn fill_region(
    dst: &mut [u8],
    dst_shape: &[u64],
    dst_start: &[u64],
    count: &[u64],
    fill: &[u8],
) {
    let item = fill.len();
    let plan = Plan::new(dst_shape, dst_shape, count, item);
    if fill.iter().all(|&b| b == 0) {
        plan.walk(dst_start, dst_start, |_, d, len| dst[d..d + len].fill(0));
        return;
    }
    let pattern: Vec<u8> = fill.iter().copied().cycle().take(plan.run).collect();
    plan.walk(dst_start, dst_start, |_, d, len| {
        dst[d..d + len].copy_from_slice(&pattern[..len]);
    });
}

/// The loop structure of a strided copy: `outer` dimensions walked by an
/// odometer, and one contiguous run of `run` bytes per step.
pub(super) struct Plan<'a> {
    /// Dimensions walked one index at a time.
    pub(super) outer: usize,
    count: &'a [u64],
    /// Byte strides of the outer dimensions in source and destination.
    src_strides: Vec<usize>,
    dst_strides: Vec<usize>,
    /// Bytes per contiguous run.
    pub(super) run: usize,
}

impl<'a> Plan<'a> {
    pub(super) fn new(
        src_shape: &[u64],
        dst_shape: &[u64],
        count: &'a [u64],
        item: usize,
    ) -> Plan<'a> {
        let rank = count.len();
        assert!(
            src_shape.len() == rank && dst_shape.len() == rank,
            "rank mismatch"
        );
        // Merge trailing dimensions that are whole in both arrays: the run
        // then spans them plus the first partial dimension before them.
        let mut outer = rank;
        let mut run = item;
        while outer > 0 {
            let d = outer - 1;
            run *= count[d] as usize;
            outer -= 1;
            if !(count[d] == src_shape[d] && count[d] == dst_shape[d]) {
                break;
            }
        }
        let byte_strides = |shape: &[u64]| {
            let mut strides = vec![0usize; rank];
            let mut acc = item;
            for d in (0..rank).rev() {
                strides[d] = acc;
                acc *= shape[d] as usize;
            }
            strides
        };
        Plan {
            outer,
            count,
            src_strides: byte_strides(src_shape),
            dst_strides: byte_strides(dst_shape),
            run,
        }
    }

    /// Call `f(src_offset, dst_offset, run)` for every contiguous run.
    pub(super) fn walk(
        &self,
        src_start: &[u64],
        dst_start: &[u64],
        mut f: impl FnMut(usize, usize, usize),
    ) {
        if self.count.contains(&0) {
            return;
        }
        let base = |start: &[u64], strides: &[usize]| -> usize {
            start
                .iter()
                .zip(strides)
                .map(|(&s, &st)| s as usize * st)
                .sum()
        };
        let mut s = base(src_start, &self.src_strides);
        let mut d = base(dst_start, &self.dst_strides);
        let mut idx = vec![0u64; self.outer];
        loop {
            f(s, d, self.run);
            // Advance the odometer over the outer dimensions.
            let mut dim = self.outer;
            loop {
                if dim == 0 {
                    return;
                }
                dim -= 1;
                idx[dim] += 1;
                s += self.src_strides[dim];
                d += self.dst_strides[dim];
                if idx[dim] < self.count[dim] {
                    break;
                }
                s -= self.src_strides[dim] * idx[dim] as usize;
                d -= self.dst_strides[dim] * idx[dim] as usize;
                idx[dim] = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::index::c_strides;
    use crate::engine::index::disjoint::DisjointView;
    use proptest::prelude::*;

    fn lin(strides: &[u64], idx: &[u64]) -> usize {
        idx.iter().zip(strides).map(|(i, s)| (i * s) as usize).sum()
    }

    /// Element-by-element reference of `copy_region`.
    #[allow(clippy::too_many_arguments)]
    fn reference(
        src: &[u8],
        ss: &[u64],
        s0: &[u64],
        dst: &mut [u8],
        ds: &[u64],
        d0: &[u64],
        count: &[u64],
        item: usize,
    ) {
        let n: u64 = count.iter().product();
        let (sst, dst_) = (c_strides(ss), c_strides(ds));
        for k in 0..n {
            let mut rem = k;
            let mut idx = vec![0u64; count.len()];
            for d in (0..count.len()).rev() {
                idx[d] = rem % count[d];
                rem /= count[d];
            }
            let si: Vec<u64> = idx.iter().zip(s0).map(|(i, s)| i + s).collect();
            let di: Vec<u64> = idx.iter().zip(d0).map(|(i, s)| i + s).collect();
            let (a, b) = (lin(&sst, &si) * item, lin(&dst_, &di) * item);
            dst[b..b + item].copy_from_slice(&src[a..a + item]);
        }
    }

    /// (source shape, destination shape, count, source start, destination start, item size)
    type Case = (Vec<u64>, Vec<u64>, Vec<u64>, Vec<u64>, Vec<u64>, usize);

    fn case() -> impl Strategy<Value = Case> {
        prop::collection::vec((1u64..6, 1u64..6), 0..=4)
            .prop_flat_map(|dims| {
                let per_dim: Vec<_> = dims
                    .iter()
                    .map(|&(sa, da)| {
                        (1..=sa.min(da)).prop_flat_map(move |c| (Just(c), 0..=sa - c, 0..=da - c))
                    })
                    .collect();
                (Just(dims), per_dim, 1usize..4)
            })
            .prop_map(|(dims, per, item)| {
                let ss = dims.iter().map(|d| d.0).collect();
                let ds = dims.iter().map(|d| d.1).collect();
                let count = per.iter().map(|p| p.0).collect();
                let s0 = per.iter().map(|p| p.1).collect();
                let d0 = per.iter().map(|p| p.2).collect();
                (ss, ds, count, s0, d0, item)
            })
    }

    proptest! {
        #[test]
        fn copy_matches_reference((ss, ds, count, s0, d0, item) in case()) {
            let sn: u64 = ss.iter().product();
            let dn: u64 = ds.iter().product();
            let src: Vec<u8> = (0..sn as usize * item).map(|i| (i * 7 + 3) as u8).collect();
            let mut got = vec![0xEEu8; dn as usize * item];
            let mut want = got.clone();
            copy_region(&src, &ss, &s0, &mut got, &ds, &d0, &count, item);
            reference(&src, &ss, &s0, &mut want, &ds, &d0, &count, item);
            prop_assert_eq!(got, want);
        }

        /// A [`DisjointView`] of the destination box copies as
        /// `copy_region` does, and lends the box as one slice exactly when
        /// its bytes are one run.
        #[test]
        fn view_matches_copy_region((ss, ds, count, s0, d0, item) in case()) {
            let sn: u64 = ss.iter().product();
            let dn: u64 = ds.iter().product();
            let src: Vec<u8> = (0..sn as usize * item).map(|i| (i * 5 + 1) as u8).collect();
            let mut want = vec![0xEEu8; dn as usize * item];
            copy_region(&src, &ss, &s0, &mut want, &ds, &d0, &count, item);
            let mut got = vec![0xEEu8; dn as usize * item];
            {
                let mut view = DisjointView::split(&mut got, &ds, item, [(&d0[..], &count[..])])
                    .unwrap()
                    .pop()
                    .unwrap();
                view.copy_from(&src, &ss, &s0);
            }
            prop_assert_eq!(&got, &want);

            let mut marked = vec![0u8; dn as usize * item];
            fill_region(&mut marked, &ds, &d0, &count, &vec![1u8; item]);
            let first = marked.iter().position(|&b| b == 1).unwrap();
            let last = marked.iter().rposition(|&b| b == 1).unwrap();
            let is_run = marked[first..=last].iter().all(|&b| b == 1);
            let mut view = DisjointView::split(&mut got, &ds, item, [(&d0[..], &count[..])])
                .unwrap()
                .pop()
                .unwrap();
            let slot = view.contiguous();
            prop_assert_eq!(slot.is_some(), is_run);
            if let Some(slot) = slot {
                prop_assert_eq!(slot.len(), last + 1 - first);
                slot.fill(9);
                prop_assert!(got[first..=last].iter().all(|&b| b == 9));
            }
        }

        #[test]
        fn fill_matches_reference((ss, ds, count, s0, d0, item) in case(), zero in any::<bool>()) {
            let _ = (ss, s0);
            let dn: u64 = ds.iter().product();
            let fill: Vec<u8> = (0..item).map(|i| if zero { 0 } else { 0x10 + i as u8 }).collect();
            let src: Vec<u8> = fill.iter().copied().cycle().take(count.iter().product::<u64>() as usize * item).collect();
            let mut got = vec![0xEEu8; dn as usize * item];
            let mut want = got.clone();
            fill_region(&mut got, &ds, &d0, &count, &fill);
            reference(&src, &count, &vec![0; count.len()], &mut want, &ds, &d0, &count, item);
            prop_assert_eq!(got, want);
        }
    }
}
