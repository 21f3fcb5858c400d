//! The projection of a box over a rectilinear tiling (`index::tiling`):
//! regular and explicit cuts, overhanging last tiles, coordinates from
//! tiny to near 2^64, ranks 0 to 4.
//!
//! Checked element by element against the tiling's definition (boxes of
//! at most 4096 elements): every element of the box lies in exactly one
//! piece; the piece's tile holds it (`start(t) <= i < start(t) + len(t)`,
//! computed here in 128 bits); the piece's offsets inside
//! the tile and the box agree with the element's index; `num_pieces` is
//! the number of pieces walked; and `num_tiles(extent)` is the number of
//! tiles starting below the extent.
#![no_main]

use std::collections::HashSet;

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use slabfs::engine::index::Region;
use slabfs::engine::index::tiling::{DimTiling, Projection};

const MAX_ELEMENTS: u64 = 4096;

fuzz_target!(|data: &[u8]| {
    let _ = check(&mut Unstructured::new(data));
});

fn value(u: &mut Unstructured, min: u64, max: u64) -> Result<u64> {
    let top = match u.int_in_range(0u8..=3)? {
        0 => min.saturating_add(8),
        1 => min.saturating_add(1000),
        2 => min.saturating_add(1 << 32),
        _ => max,
    };
    u.int_in_range(min..=top.min(max))
}

/// Start of tile `t` and its length, from the definition.
fn tile_bounds(t: &DimTiling, tile: u64) -> (u128, u128) {
    match t {
        DimTiling::Regular(s) => (tile as u128 * *s as u128, *s as u128),
        DimTiling::Explicit(ends) => {
            let start = if tile == 0 {
                0
            } else {
                ends[tile as usize - 1]
            };
            (start as u128, (ends[tile as usize] - start) as u128)
        }
    }
}

fn check(u: &mut Unstructured) -> Result<()> {
    let rank = u.int_in_range(0usize..=4)?;
    let (mut tilings, mut start, mut count) = (vec![], vec![], vec![]);
    let mut elements = 1u64;
    for _ in 0..rank {
        let extent = value(u, 1, u64::MAX)?;
        let tiling = if u.arbitrary()? {
            DimTiling::Regular(value(u, 1, u64::MAX)?)
        } else {
            let k = u.int_in_range(1usize..=16)?;
            let mut lengths = Vec::with_capacity(k + 1);
            for _ in 0..k {
                lengths.push(value(u, 1, u64::MAX)?);
            }
            let sum = lengths.iter().try_fold(0u64, |a, &l| a.checked_add(l));
            match sum {
                Some(s) if s < extent => lengths.push(extent - s),
                Some(_) => {}
                None => return Ok(()),
            }
            match DimTiling::from_lengths(&lengths) {
                Ok(t) => t,
                Err(_) => return Ok(()),
            }
        };
        assert!(tiling.covers(extent));
        // num_tiles against the definition: tiles starting below extent.
        let expected_tiles = match &tiling {
            DimTiling::Regular(s) => (extent as u128).div_ceil(*s as u128),
            DimTiling::Explicit(ends) => 1 + ends.iter().filter(|&&e| e < extent).count() as u128,
        };
        assert_eq!(
            tiling.num_tiles(extent) as u128,
            expected_tiles,
            "{tiling:?} over {extent}"
        );
        let s = value(u, 0, extent - 1)?;
        let c = value(u, 1, (extent - s).min(MAX_ELEMENTS / elements))?;
        elements *= c;
        tilings.push(tiling);
        start.push(s);
        count.push(c);
    }
    let region = Region { start, count };
    slabfs_fuzz::debug(|| format!("tilings {tilings:?}\nregion {region:?}"));
    let proj = Projection::new(&tilings, &region);
    let mut seen = HashSet::new();
    let mut pieces = 0;
    for p in proj.pieces() {
        pieces += 1;
        let n: u64 = p.count.iter().product();
        assert!(n > 0, "empty piece {p:?}");
        for k in 0..n {
            let mut rem = k;
            let mut idx = vec![0u64; rank];
            for d in (0..rank).rev() {
                idx[d] = rem % p.count[d];
                rem /= p.count[d];
            }
            let mut global = Vec::with_capacity(rank);
            for d in 0..rank {
                let g = region.start[d] as u128 + p.box_start[d] as u128 + idx[d] as u128;
                assert!(
                    g < region.start[d] as u128 + region.count[d] as u128,
                    "outside the box"
                );
                let (ts, tl) = tile_bounds(&tilings[d], p.tile[d]);
                assert!(
                    ts <= g && g < ts + tl,
                    "element {g} not in tile {} of {:?}",
                    p.tile[d],
                    tilings[d]
                );
                assert_eq!(
                    ts + p.tile_start[d] as u128 + idx[d] as u128,
                    g,
                    "offset in tile"
                );
                global.push(g as u64);
            }
            assert!(seen.insert(global), "element covered twice");
        }
    }
    assert_eq!(pieces, proj.num_pieces());
    assert_eq!(seen.len() as u64, region.num_elements(), "box not covered");
    Ok(())
}
