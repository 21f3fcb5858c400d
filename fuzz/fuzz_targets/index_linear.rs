//! The linear arithmetic of the read path (`index::linear`): a byte range
//! of the flat file to an element range (`element_range`), and an element
//! range to contiguous boxes (`boxes`), with shapes from tiny to the
//! largest whose element count fits 64 bits.
//!
//! Checked against references computed here in 128-bit arithmetic:
//!
//! - `element_range` is the smallest element range covering the bytes
//!   `[offset, offset + len)` clamped to the file (`n * item` bytes, which
//!   fits 64 bits as in every opened array), or an empty range at the
//!   clamped start;
//! - `boxes` lie inside the shape, are non-empty, each one contiguous in
//!   row-major order, together exactly the elements `first..end` in order
//!   (enumerated one by one; ranges of at most 4096 elements), and there
//!   are at most `2R - 1` of them.
#![no_main]

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use slabfs::engine::index::linear::{boxes, element_range};

/// Ranges longer than this are not enumerated element by element.
const MAX_ELEMENTS: u64 = 4096;

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let _ = check_element_range(&mut u);
    let _ = check_boxes(&mut u);
});

/// A value of a magnitude chosen by the input: small, medium or any.
fn value(u: &mut Unstructured, min: u64, max: u64) -> Result<u64> {
    let top = match u.int_in_range(0u8..=3)? {
        0 => min.saturating_add(8),
        1 => min.saturating_add(1000),
        2 => min.saturating_add(1 << 32),
        _ => max,
    };
    u.int_in_range(min..=top.min(max))
}

fn check_element_range(u: &mut Unstructured) -> Result<()> {
    let item = value(u, 1, u64::MAX)?;
    let n = value(u, 0, u64::MAX / item)?;
    let offset = value(u, 0, u64::MAX)?;
    let len = value(u, 0, u64::MAX)?;
    slabfs_fuzz::debug(|| format!("element_range({offset}, {len}, {item}, {n})"));
    let (e0, e1) = element_range(offset, len, item, n);
    let (item, size) = (item as u128, n as u128 * item as u128);
    let lo = (offset as u128).min(size);
    let hi = (offset as u128 + len as u128).min(size);
    let expected = if lo < hi {
        (lo / item, hi.div_ceil(item))
    } else {
        (lo / item, lo / item)
    };
    assert_eq!(
        (e0 as u128, e1 as u128),
        expected,
        "element_range({offset}, {len}, {item}, {n})"
    );
    Ok(())
}

fn check_boxes(u: &mut Unstructured) -> Result<()> {
    let rank = u.int_in_range(0usize..=6)?;
    let mut shape = Vec::with_capacity(rank);
    for _ in 0..rank {
        shape.push(value(u, 0, u64::MAX)?);
    }
    let Some(n) = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d)) else {
        return Ok(());
    };
    let first = value(u, 0, n)?;
    let end = first + value(u, 0, (n - first).min(MAX_ELEMENTS))?;
    slabfs_fuzz::debug(|| format!("boxes({shape:?}, {first}, {end})"));
    let bx = boxes(&shape, first, end);
    assert!(
        bx.len() <= (2 * rank).saturating_sub(1).max(1),
        "{} boxes for rank {rank}",
        bx.len()
    );
    if n == 0 {
        assert!(bx.is_empty(), "boxes of an empty array");
        return Ok(());
    }
    // Row-major strides; they fit, since the element count does (and is
    // not zero, which would let the trailing dimensions be anything).
    let mut strides = vec![1u128; rank];
    for d in (0..rank.saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1] as u128;
    }
    let mut next = first as u128;
    for r in &bx {
        assert_eq!((r.start.len(), r.count.len()), (rank, rank), "{r:?}");
        for d in 0..rank {
            assert!(
                r.start[d] as u128 + r.count[d] as u128 <= shape[d] as u128,
                "{r:?} outside {shape:?}"
            );
        }
        let m: u128 = r.count.iter().map(|&c| c as u128).product();
        assert!(m > 0, "empty box {r:?}");
        assert!(m <= MAX_ELEMENTS as u128, "box {r:?} larger than the range");
        for k in 0..m {
            let mut rem = k;
            let mut lin = 0u128;
            for d in (0..rank).rev() {
                let c = r.count[d] as u128;
                lin += (r.start[d] as u128 + rem % c) * strides[d];
                rem /= c;
            }
            assert_eq!(lin, next, "box {r:?} of {shape:?}: element {k}");
            next += 1;
        }
    }
    assert_eq!(
        next, end as u128,
        "boxes of {first}..{end} in {shape:?} stop early"
    );
    Ok(())
}
