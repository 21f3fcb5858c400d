//! Strided copies between C-order arrays.
//!
//! The last step of a read: move one [`Piece`](super::tiling::Piece) of a
//! box from its decoded tile into the box's slice of the reply buffer, or
//! fill it with the fill value when the tile does not exist. Both arrays
//! are C order; trailing dimensions that are whole in source, destination
//! and piece are merged into one contiguous run, so copying a whole chunk
//! row-block is a handful of large `memcpy`s rather than one per row.

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

/// A destination array that several threads fill at once, each writing a
/// different sub-box: the pieces of one [`Projection`](super::tiling::Projection)
/// partition the box, so a large read copies every decoded chunk into place
/// on the thread that decoded it, while it is still in that core's cache.
///
/// Safe Rust cannot hand out overlapping `&mut` views of one buffer, even
/// when the bytes each thread touches are disjoint, so this holds a raw
/// pointer and its writers are `unsafe`: their contract is that concurrent
/// calls write disjoint sub-boxes. Every run is still bounds-checked.
pub struct SharedDest<'a> {
    ptr: *mut u8,
    len: usize,
    shape: &'a [u64],
    _borrow: std::marker::PhantomData<&'a mut [u8]>,
}

// SAFETY: SharedDest is a `&mut [u8]` split among threads; the `unsafe`
// writers require disjoint concurrent writes, which is what makes sharing
// it sound.
unsafe impl Send for SharedDest<'_> {}
// SAFETY: as above: no method reads through the pointer, and concurrent
// writes are disjoint by the writers' contract.
unsafe impl Sync for SharedDest<'_> {}

impl<'a> SharedDest<'a> {
    /// Borrow `dst`, a C-order array of `shape`, for the lifetime `'a`.
    pub fn new(dst: &'a mut [u8], shape: &'a [u64]) -> SharedDest<'a> {
        SharedDest {
            ptr: dst.as_mut_ptr(),
            len: dst.len(),
            shape,
            _borrow: std::marker::PhantomData,
        }
    }

    /// [`copy_region`] into the shared destination.
    ///
    /// # Safety
    /// No other thread may write the same destination bytes during the
    /// call (the sub-boxes of concurrent calls must be disjoint).
    pub unsafe fn copy_region(
        &self,
        src: &[u8],
        src_shape: &[u64],
        src_start: &[u64],
        dst_start: &[u64],
        count: &[u64],
        item: usize,
    ) {
        let plan = Plan::new(src_shape, self.shape, count, item);
        plan.walk(src_start, dst_start, |s, d, len| {
            let from = &src[s..s + len];
            assert!(d + len <= self.len, "run outside the destination");
            // SAFETY: `d + len` is within the borrowed buffer (checked
            // above), `from` is a distinct borrowed slice, and by the
            // caller's contract no other thread writes these bytes now.
            unsafe { std::ptr::copy_nonoverlapping(from.as_ptr(), self.ptr.add(d), len) };
        });
    }

    /// [`fill_region`] into the shared destination.
    ///
    /// # Safety
    /// As for [`SharedDest::copy_region`].
    pub unsafe fn fill_region(&self, dst_start: &[u64], count: &[u64], fill: &[u8]) {
        let item = fill.len();
        let plan = Plan::new(self.shape, self.shape, count, item);
        let pattern: Vec<u8> = fill.iter().copied().cycle().take(plan.run).collect();
        plan.walk(dst_start, dst_start, |_, d, len| {
            assert!(d + len <= self.len, "run outside the destination");
            // SAFETY: in bounds (checked above); disjoint from concurrent
            // writers by the caller's contract; `pattern` is `run` bytes.
            unsafe { std::ptr::copy_nonoverlapping(pattern.as_ptr(), self.ptr.add(d), len) };
        });
    }

    /// A plain mutable view of the sub-box when it is one contiguous run of
    /// the destination (a chunk spanning whole trailing dimensions), so a
    /// decoder can write into it directly.
    ///
    /// # Safety
    /// As for [`SharedDest::copy_region`], for as long as the slice lives.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn contiguous(
        &self,
        dst_start: &[u64],
        count: &[u64],
        item: usize,
    ) -> Option<&mut [u8]> {
        let plan = Plan::new(count, self.shape, count, item);
        if plan.outer != 0 && !plan.count[..plan.outer].iter().all(|&c| c == 1) {
            return None;
        }
        let mut start = None;
        plan.walk(dst_start, dst_start, |_, d, _| start = Some(d));
        let d = start?;
        let len = count.iter().product::<u64>() as usize * item;
        assert!(d + len <= self.len, "run outside the destination");
        // SAFETY: in bounds (checked above); the caller guarantees no other
        // thread touches these bytes while the slice lives.
        Some(unsafe { std::slice::from_raw_parts_mut(self.ptr.add(d), len) })
    }
}

/// The loop structure of a strided copy: `outer` dimensions walked by an
/// odometer, and one contiguous run of `run` bytes per step.
struct Plan<'a> {
    /// Dimensions walked one index at a time.
    outer: usize,
    count: &'a [u64],
    /// Byte strides of the outer dimensions in source and destination.
    src_strides: Vec<usize>,
    dst_strides: Vec<usize>,
    /// Bytes per contiguous run.
    run: usize,
}

impl<'a> Plan<'a> {
    fn new(src_shape: &[u64], dst_shape: &[u64], count: &'a [u64], item: usize) -> Plan<'a> {
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
    fn walk(&self, src_start: &[u64], dst_start: &[u64], mut f: impl FnMut(usize, usize, usize)) {
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

        #[test]
        fn shared_dest_matches_copy_region((ss, ds, count, s0, d0, item) in case()) {
            let sn: u64 = ss.iter().product();
            let dn: u64 = ds.iter().product();
            let src: Vec<u8> = (0..sn as usize * item).map(|i| (i * 5 + 1) as u8).collect();
            let mut want = vec![0xEEu8; dn as usize * item];
            copy_region(&src, &ss, &s0, &mut want, &ds, &d0, &count, item);
            let mut got = vec![0xEEu8; dn as usize * item];
            {
                let dest = SharedDest::new(&mut got, &ds);
                // SAFETY: a single writer.
                unsafe { dest.copy_region(&src, &ss, &s0, &d0, &count, item) };
            }
            prop_assert_eq!(&got, &want);

            // `contiguous` is the sub-box's bytes exactly when they are one run.
            let mut marked = vec![0u8; dn as usize * item];
            fill_region(&mut marked, &ds, &d0, &count, &vec![1u8; item]);
            let first = marked.iter().position(|&b| b == 1).unwrap();
            let last = marked.iter().rposition(|&b| b == 1).unwrap();
            let is_run = marked[first..=last].iter().all(|&b| b == 1);
            let dest = SharedDest::new(&mut got, &ds);
            // SAFETY: a single writer.
            let slot = unsafe { dest.contiguous(&d0, &count, item) };
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
