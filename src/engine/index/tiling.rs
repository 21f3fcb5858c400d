//! Rectilinear tilings and the projection of a box over them.
//!
//! Every grid slabfs reads is a *rectilinear tiling* of an array's index
//! space: along each dimension the axis is cut into consecutive tiles, and
//! the tiles of the array are the cross product of the per-dimension cuts.
//! A Zarr regular chunk grid is the special case of equal cuts
//! ([`DimTiling::Regular`]); rectilinear chunk grids, shard-internal grids
//! and aggregation partition matrices list their cuts
//! ([`DimTiling::Explicit`]). One projection serves them all.
//!
//! Projecting a box (seed 000's algorithm, with stride 1 since slabfs boxes
//! are contiguous): each dimension's range `[start, start + count)` is cut
//! at the tile boundaries into [`DimPiece`]s (tile index, offset inside the
//! tile, offset inside the box, length), and an odometer walks the cross
//! product of the per-dimension pieces. Each combination is one
//! [`Piece`]: the part of the box that lies in one tile.
//!
//! ```text
//! dimension of length 10, tiles of 4:   |0 1 2 3|4 5 6 7|8 9|
//! range [3, 9):                                |3|4 5 6 7|8|
//! pieces: (tile 0, in tile 3, in box 0, len 1)
//!         (tile 1, in tile 0, in box 1, len 4)
//!         (tile 2, in tile 0, in box 5, len 1)
//! ```

use super::Region;

/// How one dimension is cut into tiles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DimTiling {
    /// Tiles of this many elements (positive): tile `t` covers
    /// `[t * size, (t + 1) * size)`. The last tile may overhang the array.
    Regular(u64),
    /// Tile `t` covers `[ends[t - 1], ends[t])` (with `ends[-1] = 0`);
    /// `ends` is strictly increasing and its last value reaches at least
    /// the array's extent (an overhanging last tile is allowed).
    Explicit(Vec<u64>),
}

impl DimTiling {
    /// Explicit cuts from tile lengths, or an error if a length is zero or
    /// the total overflows.
    pub fn from_lengths(lengths: &[u64]) -> Result<DimTiling, String> {
        let mut ends = Vec::with_capacity(lengths.len());
        let mut acc = 0u64;
        for &l in lengths {
            if l == 0 {
                return Err("a tile length is zero".into());
            }
            acc = acc
                .checked_add(l)
                .ok_or_else(|| "tile lengths overflow".to_string())?;
            ends.push(acc);
        }
        Ok(DimTiling::Explicit(ends))
    }

    /// The tile holding index `i`. For explicit tilings `i` must be below
    /// the last end.
    pub fn tile_of(&self, i: u64) -> u64 {
        match self {
            DimTiling::Regular(size) => i / size,
            DimTiling::Explicit(ends) => ends.partition_point(|&e| e <= i) as u64,
        }
    }

    /// First index of tile `t`.
    pub fn tile_start(&self, t: u64) -> u64 {
        match self {
            DimTiling::Regular(size) => t * size,
            DimTiling::Explicit(ends) => match t {
                0 => 0,
                _ => ends[t as usize - 1],
            },
        }
    }

    /// Full (stored) length of tile `t`, overhang included.
    pub fn tile_len(&self, t: u64) -> u64 {
        match self {
            DimTiling::Regular(size) => *size,
            DimTiling::Explicit(ends) => ends[t as usize] - self.tile_start(t),
        }
    }

    /// Number of tiles needed to cover `extent` elements (explicit tilings
    /// must [`cover`](Self::covers) it).
    pub fn num_tiles(&self, extent: u64) -> u64 {
        if extent == 0 {
            return 0;
        }
        match self {
            DimTiling::Regular(size) => extent.div_ceil(*size),
            DimTiling::Explicit(ends) => ends.partition_point(|&e| e < extent) as u64 + 1,
        }
    }

    /// Whether the tiling reaches `extent` (explicit cuts must cover the
    /// whole dimension).
    pub fn covers(&self, extent: u64) -> bool {
        match self {
            DimTiling::Regular(size) => *size > 0,
            DimTiling::Explicit(ends) => ends.last().copied().unwrap_or(0) >= extent,
        }
    }
}

/// The part of one dimension's range that lies in one tile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DimPiece {
    pub tile: u64,
    /// Offset of the piece from the start of the tile.
    pub in_tile: u64,
    /// Offset of the piece from the start of the box.
    pub in_box: u64,
    pub len: u64,
}

/// Cut `[start, start + count)` at the tile boundaries.
pub fn project_dim(tiling: &DimTiling, start: u64, count: u64) -> Vec<DimPiece> {
    let mut pieces = Vec::new();
    let end = start + count;
    let mut pos = start;
    while pos < end {
        let tile = tiling.tile_of(pos);
        let tile_start = tiling.tile_start(tile);
        // A regular tile near 2^64 may end past it (its overhang lies
        // outside any array); saturating keeps `min(end)` exact (found by
        // the `index_projection` fuzz target).
        let tile_end = tile_start.saturating_add(tiling.tile_len(tile));
        let piece_end = tile_end.min(end);
        pieces.push(DimPiece {
            tile,
            in_tile: pos - tile_start,
            in_box: pos - start,
            len: piece_end - pos,
        });
        pos = piece_end;
    }
    pieces
}

/// The part of a box that lies in one tile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    /// Tile coordinates in the grid.
    pub tile: Vec<u64>,
    /// Where the piece starts inside the tile.
    pub tile_start: Vec<u64>,
    /// Where the piece starts inside the box.
    pub box_start: Vec<u64>,
    /// The piece's extent.
    pub count: Vec<u64>,
}

/// A box projected over a tiling: the per-dimension pieces, whose cross
/// product (walked by [`Projection::pieces`]) covers the box exactly once.
#[derive(Debug, Clone)]
pub struct Projection {
    per_dim: Vec<Vec<DimPiece>>,
}

impl Projection {
    /// Project `region` over `tiling` (one [`DimTiling`] per dimension).
    pub fn new(tiling: &[DimTiling], region: &Region) -> Projection {
        assert_eq!(tiling.len(), region.rank(), "tiling rank != region rank");
        let per_dim = tiling
            .iter()
            .zip(region.start.iter().zip(&region.count))
            .map(|(t, (&s, &c))| project_dim(t, s, c))
            .collect();
        Projection { per_dim }
    }

    /// Number of tiles the box touches.
    pub fn num_pieces(&self) -> usize {
        self.per_dim.iter().map(Vec::len).product()
    }

    /// Walk the cross product of the per-dimension pieces in row-major
    /// order of tile coordinates (an odometer whose last wheel turns
    /// fastest). Rank 0 yields one piece.
    pub fn pieces(&self) -> impl Iterator<Item = Piece> + '_ {
        let rank = self.per_dim.len();
        let total = self.num_pieces();
        let mut wheels = vec![0usize; rank];
        (0..total).map(move |k| {
            if k > 0 {
                // Advance the odometer by one.
                for d in (0..rank).rev() {
                    wheels[d] += 1;
                    if wheels[d] < self.per_dim[d].len() {
                        break;
                    }
                    wheels[d] = 0;
                }
            }
            let mut p = Piece {
                tile: Vec::with_capacity(rank),
                tile_start: Vec::with_capacity(rank),
                box_start: Vec::with_capacity(rank),
                count: Vec::with_capacity(rank),
            };
            for (d, &w) in wheels.iter().enumerate() {
                let dp = self.per_dim[d][w];
                p.tile.push(dp.tile);
                p.tile_start.push(dp.in_tile);
                p.box_start.push(dp.in_box);
                p.count.push(dp.len);
            }
            p
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn doc_example() {
        let p = project_dim(&DimTiling::Regular(4), 3, 6);
        let got: Vec<_> = p
            .iter()
            .map(|d| (d.tile, d.in_tile, d.in_box, d.len))
            .collect();
        assert_eq!(got, vec![(0, 3, 0, 1), (1, 0, 1, 4), (2, 0, 5, 1)]);
    }

    #[test]
    fn explicit_tiles() {
        let t = DimTiling::from_lengths(&[1, 2, 3, 4]).unwrap();
        assert_eq!(t, DimTiling::Explicit(vec![1, 3, 6, 10]));
        assert_eq!(
            (t.tile_of(0), t.tile_of(1), t.tile_of(5), t.tile_of(6)),
            (0, 1, 2, 3)
        );
        assert_eq!(t.num_tiles(10), 4);
        assert_eq!(t.num_tiles(7), 4);
        assert_eq!(t.num_tiles(6), 3);
        assert_eq!(t.num_tiles(0), 0);
        assert_eq!(DimTiling::Regular(4).num_tiles(9), 3);
        assert!(DimTiling::from_lengths(&[1, 0]).is_err());
        assert!(DimTiling::from_lengths(&[u64::MAX, 1]).is_err());
    }

    fn dim_tiling(extent: u64) -> impl Strategy<Value = DimTiling> {
        prop_oneof![
            (1u64..6).prop_map(DimTiling::Regular),
            prop::collection::vec(1u64..5, 1..8).prop_map(move |mut ls| {
                // Make the cuts cover the extent, possibly overhanging.
                let sum: u64 = ls.iter().sum();
                if sum < extent {
                    ls.push(extent - sum);
                }
                DimTiling::from_lengths(&ls).unwrap()
            }),
        ]
    }

    fn case() -> impl Strategy<Value = (Vec<u64>, Vec<DimTiling>, Region)> {
        prop::collection::vec(1u64..9, 0..=4).prop_flat_map(|shape| {
            let tilings: Vec<_> = shape.iter().map(|&e| dim_tiling(e)).collect();
            let region: Vec<_> = shape
                .iter()
                .map(|&e| (0..e).prop_flat_map(move |s| (Just(s), 1..=e - s)))
                .collect();
            (Just(shape), tilings, region).prop_map(|(shape, t, r)| {
                let (start, count) = r.into_iter().unzip();
                (shape, t, Region { start, count })
            })
        })
    }

    proptest! {
        /// Every element of the box is covered by exactly one piece, the
        /// piece's tile really holds it, and the offsets agree.
        #[test]
        fn pieces_cover_box_once((shape, tiling, region) in case()) {
            let _ = shape;
            let proj = Projection::new(&tiling, &region);
            let mut seen = std::collections::HashMap::new();
            for piece in proj.pieces() {
                // Brute force: enumerate every element of the piece.
                let n: u64 = piece.count.iter().product();
                prop_assert!(n > 0);
                for k in 0..n {
                    let mut rem = k;
                    let mut idx = vec![0u64; region.rank()];
                    for d in (0..region.rank()).rev() {
                        idx[d] = rem % piece.count[d];
                        rem /= piece.count[d];
                    }
                    let global: Vec<u64> = (0..region.rank())
                        .map(|d| region.start[d] + piece.box_start[d] + idx[d])
                        .collect();
                    for d in 0..region.rank() {
                        let t = &tiling[d];
                        prop_assert_eq!(t.tile_of(global[d]), piece.tile[d]);
                        prop_assert_eq!(
                            t.tile_start(piece.tile[d]) + piece.tile_start[d] + idx[d],
                            global[d]
                        );
                        prop_assert!(piece.tile_start[d] + idx[d] < t.tile_len(piece.tile[d]));
                    }
                    prop_assert!(seen.insert(global, ()).is_none(), "element covered twice");
                }
            }
            prop_assert_eq!(seen.len() as u64, region.num_elements());
        }
    }
}
