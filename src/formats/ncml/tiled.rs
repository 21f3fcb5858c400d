//! A tiled aggregation (netCDF-Java's `AggregationTiled`): members that
//! are tiles of one mosaic along several dimensions (`dimName="lat lon"`),
//! each placed by its `section` (`"0:89,180:359"`: one inclusive
//! `first:last` range per tiled dimension, in `dimName`'s order).
//!
//! The mosaic's extent along a tiled dimension is the union of its
//! members' ranges, which must start at 0. Every variable of the first
//! member (the template) along a tiled dimension is tiled; each member's
//! variable of that name holds its section's box (the template's extent
//! along every other dimension). The boundaries of all sections cut
//! each tiled dimension into cells, so the mosaic is a grid
//! ([`DimTiling`]) read with the engine's piece loop: each cell is read
//! from the member covering it, at the cell's place in that member's
//! box. Where members overlap (the coordinate variables of a row of
//! tiles, each member holding the same `lat`), the last member listed
//! wins, as netCDF-Java copies the members in order. A cell no member
//! covers reads as the variable's fill value (netCDF-Java leaves zeros:
//! "LOOK need fill"), and the load logs it.

use std::sync::Arc;

use super::error::{NcmlError, Pos};
use super::members::{Member, members_stamp};
use crate::engine::array::{ArrayMeta, ArraySource, ChangeStamp};
use crate::engine::index::Region;
use crate::engine::index::disjoint::DisjointView;
use crate::engine::index::tiling::{DimTiling, Piece};
use crate::engine::pieces::{PieceSource, read_into, read_pieces};
use crate::error::Result;

/// A member's place in the mosaic: one `(first, count)` per tiled
/// dimension.
pub type Section = Vec<(u64, u64)>;

/// Parse a `section` attribute: `first:last` (inclusive) or `index`, one
/// per tiled dimension, comma-separated; a stride other than 1 is
/// refused.
pub fn parse_section(text: &str, rank: usize, pos: Pos) -> std::result::Result<Section, NcmlError> {
    let bad = |why: &str| NcmlError::invalid(pos, format!("section=\"{text}\": {why}"));
    let ranges: Vec<&str> = text.split(',').map(str::trim).collect();
    if ranges.len() != rank {
        return Err(bad(&format!(
            "{} ranges for {rank} tiled dimensions",
            ranges.len()
        )));
    }
    ranges
        .iter()
        .map(|r| {
            let parts: Vec<&str> = r.split(':').map(str::trim).collect();
            let num = |s: &str| {
                s.parse::<u64>()
                    .map_err(|_| bad(&format!("{s:?} is not an index")))
            };
            let (first, last) = match parts.as_slice() {
                [i] => (num(i)?, num(i)?),
                [a, b] => (num(a)?, num(b)?),
                [a, b, "1"] => (num(a)?, num(b)?),
                [_, _, _] => return Err(bad("a stride other than 1")),
                _ => return Err(bad(&format!("{r:?} is not first:last"))),
            };
            if last < first {
                return Err(bad(&format!("{r:?} ends before it starts")));
            }
            Ok((first, last - first + 1))
        })
        .collect()
}

/// One tiled variable.
pub struct Mosaic {
    meta: ArrayMeta,
    var: String,
    /// For each dimension of the variable, its tiled dimension's index in
    /// the sections (`None`: not tiled, the member holds all of it).
    axes: Vec<Option<usize>>,
    tiling: Vec<DimTiling>,
    /// Each tiled dimension's cell boundaries.
    bounds: Vec<Vec<u64>>,
    members: Vec<Arc<Member>>,
    sections: Vec<Section>,
    /// The member that serves each cell of this variable's own tiled
    /// dimensions (C order over its cells; `None` for a gap): of the
    /// members covering it along those dimensions, the last listed (a
    /// coordinate `lat(lat)` of a row of tiles is any of them).
    cover: Vec<Option<usize>>,
    /// A piece's tile coordinates to its index in `cover`: one stride per
    /// dimension of the variable, 0 where the dimension is not tiled.
    strides: Vec<usize>,
}

impl std::fmt::Debug for Mosaic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mosaic")
            .field("var", &self.var)
            .field("shape", &self.meta.shape)
            .field("members", &self.members.len())
            .finish()
    }
}

/// The cell boundaries of every tiled dimension (each section's start and
/// end), and which member covers each cell (the last listed).
pub fn grid(sections: &[Section], lens: &[u64]) -> (Vec<Vec<u64>>, Vec<Option<usize>>) {
    let bounds: Vec<Vec<u64>> = (0..lens.len())
        .map(|d| {
            let mut b: Vec<u64> = sections
                .iter()
                .flat_map(|s| [s[d].0, s[d].0 + s[d].1])
                .chain([0, lens[d]])
                .collect();
            b.sort_unstable();
            b.dedup();
            b
        })
        .collect();
    let cells: Vec<usize> = bounds.iter().map(|b| b.len() - 1).collect();
    let total: usize = cells.iter().product();
    let mut cover = vec![None; total];
    for (k, s) in sections.iter().enumerate() {
        // The cells of this section, per dimension.
        let spans: Vec<(usize, usize)> = (0..lens.len())
            .map(|d| {
                let lo = bounds[d].binary_search(&s[d].0).expect("a boundary");
                let hi = bounds[d]
                    .binary_search(&(s[d].0 + s[d].1))
                    .expect("a boundary");
                (lo, hi)
            })
            .collect();
        if spans.iter().any(|s| s.0 == s.1) {
            continue;
        }
        // Every cell of the section, odometer order.
        let mut idx: Vec<usize> = spans.iter().map(|s| s.0).collect();
        'cells: loop {
            let flat = idx
                .iter()
                .zip(&cells)
                .fold(0usize, |acc, (&i, &n)| acc * n + i);
            cover[flat] = Some(k);
            let mut d = idx.len();
            loop {
                if d == 0 {
                    break 'cells;
                }
                d -= 1;
                idx[d] += 1;
                if idx[d] < spans[d].1 {
                    break;
                }
                idx[d] = spans[d].0;
            }
        }
    }
    (bounds, cover)
}

impl Mosaic {
    /// The variable `var` of `meta` (the mosaic's shape), `axes` mapping
    /// its dimensions to the tiled ones, over `members` placed by
    /// `sections` on the grid `bounds`/`cover` ([`grid`]).
    pub fn new(
        meta: ArrayMeta,
        var: String,
        axes: Vec<Option<usize>>,
        members: Vec<Arc<Member>>,
        sections: Vec<Section>,
        (bounds, grid_cover): (Vec<Vec<u64>>, Vec<Option<usize>>),
    ) -> Result<Mosaic> {
        let tiling = axes
            .iter()
            .zip(&meta.shape)
            .map(|(a, &n)| match a {
                Some(t) => {
                    let lens: Vec<u64> = bounds[*t].windows(2).map(|w| w[1] - w[0]).collect();
                    DimTiling::from_lengths(&lens)
                        .map_err(|e| crate::Error::metadata(meta.source.clone(), e))
                }
                None => Ok(DimTiling::Regular(n.max(1))),
            })
            .collect::<Result<Vec<_>>>()?;
        // The grid's cells projected onto this variable's tiled dimensions
        // (in its own order), each keeping the last member over it.
        let cells: Vec<usize> = bounds.iter().map(|b| b.len() - 1).collect();
        let mut strides = vec![0usize; axes.len()];
        let mut n = 1usize;
        for (d, a) in axes.iter().enumerate().rev() {
            if let Some(t) = a {
                strides[d] = n;
                n *= cells[*t];
            }
        }
        let mut own = vec![None; n];
        let mut idx = vec![0usize; cells.len()];
        for k in &grid_cover {
            // `idx` is the grid cell of `k`, in C order.
            let at: usize = axes
                .iter()
                .zip(&strides)
                .map(|(a, &st)| a.map_or(0, |t| idx[t] * st))
                .sum();
            own[at] = own[at].max(*k);
            for d in (0..cells.len()).rev() {
                idx[d] += 1;
                if idx[d] < cells[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        Ok(Mosaic {
            meta,
            var,
            axes,
            tiling,
            bounds,
            members,
            sections,
            cover: own,
            strides,
        })
    }

    /// The shape member `k`'s variable must have.
    fn member_shape(&self, k: usize) -> Vec<u64> {
        self.axes
            .iter()
            .zip(&self.meta.shape)
            .map(|(a, &n)| a.map_or(n, |t| self.sections[k][t].1))
            .collect()
    }

    fn member_array(&self, k: usize) -> Result<Arc<dyn ArraySource>> {
        let m = &self.members[k];
        let view = m.view()?;
        let err = |d: String| NcmlError::member(m.label(), d).at(self.meta.source.clone());
        let v = view
            .var(&self.var)
            .ok_or_else(|| err(format!("has no variable {}", self.var)))?;
        let want = self.member_shape(k);
        if v.shape() != want.as_slice() || *v.dtype() != self.meta.dtype {
            return Err(err(format!(
                "variable {} is {} {:?}; its section needs {} {want:?}",
                self.var,
                v.dtype(),
                v.shape(),
                self.meta.dtype
            )));
        }
        Ok(v.array.clone())
    }

    /// Check every member already open (the load opens them all).
    pub fn check_opened(&self) -> Result<()> {
        for (k, m) in self.members.iter().enumerate() {
            if m.opened().is_some() {
                self.member_array(k)?;
            }
        }
        Ok(())
    }
}

impl PieceSource for Mosaic {
    type Fetched = ();

    fn tiling(&self) -> &[DimTiling] {
        &self.tiling
    }

    fn item_size(&self) -> usize {
        self.meta.item_size()
    }

    fn read_piece(
        &self,
        piece: &Piece,
        mut view: DisjointView<'_>,
        _many: bool,
        _fetched: Option<()>,
    ) -> Result<()> {
        // The cell this piece is in (its tile along each tiled dimension).
        let flat: usize = piece
            .tile
            .iter()
            .zip(&self.strides)
            .map(|(&i, &st)| i as usize * st)
            .sum();
        let Some(k) = self.cover[flat] else {
            view.fill(&self.meta.fill_value);
            return Ok(());
        };
        let array = self.member_array(k)?;
        let start = self
            .axes
            .iter()
            .enumerate()
            .map(|(d, a)| match a {
                // Absolute position minus the member's origin.
                Some(t) => {
                    self.bounds[*t][piece.tile[d] as usize] + piece.tile_start[d]
                        - self.sections[k][*t].0
                }
                None => piece.tile_start[d],
            })
            .collect();
        read_into(
            array.as_ref(),
            &Region {
                start,
                count: piece.count.clone(),
            },
            &mut view,
        )
    }
}

impl ArraySource for Mosaic {
    fn meta(&self) -> &ArrayMeta {
        &self.meta
    }

    /// The members' variables' stamps together ([`members_stamp`]).
    fn change_stamp(&self) -> ChangeStamp {
        members_stamp(self.members.iter(), &self.var)
    }

    fn read_region(&self, region: &Region, out: &mut [u8]) -> Result<()> {
        if region.num_elements() == 0 {
            return Ok(());
        }
        read_pieces(self, region, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_are_inclusive_ranges() {
        let p = Pos::default();
        assert_eq!(
            parse_section("0:9, 10:19", 2, p).unwrap(),
            [(0, 10), (10, 10)]
        );
        assert_eq!(parse_section("3,0:4:1", 2, p).unwrap(), [(3, 1), (0, 5)]);
        for bad in ["0:9", "0:9,x", "5:4,0:1", "0:9:2,0:1", "0:1:2:3,0:1"] {
            assert!(parse_section(bad, 2, p).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_grid_is_cut_at_every_section_and_the_last_member_wins() {
        // Two tiles side by side in lon, a third overlapping the second,
        // and lat 4..6 of lon 0..2 covered by none.
        let sections = vec![
            vec![(0, 4), (0, 2)],
            vec![(0, 6), (2, 3)],
            vec![(2, 2), (2, 3)],
        ];
        let (bounds, cover) = grid(&sections, &[6, 5]);
        assert_eq!(bounds, [vec![0, 2, 4, 6], vec![0, 2, 5]]);
        assert_eq!(cover, [Some(0), Some(1), Some(0), Some(2), None, Some(1)]);
    }
}
