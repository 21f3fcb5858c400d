//! The master array: an [`ArraySource`] over a partition matrix.
//!
//! The partition matrix is a rectilinear tiling of the master's index
//! space, so a read is projected over it with the same code that projects
//! reads over chunk grids ([`crate::engine::index::tiling`]). The tiling is built
//! from the partitions' `location`s rather than trusted from `index` and
//! `pshape`: along each dimension the cuts are every partition boundary
//! (plus 0 and the extent), and each cell of the resulting grid belongs to
//! at most one partition. For the hyperrectangular matrices the seed
//! describes this is exactly the partition matrix (one cell per
//! partition); for descriptors whose partitions are not aligned it is a
//! finer grid whose cells still each come from one partition, so such
//! descriptors read correctly too.
//!
//! Building the cell map is where two kinds of broken descriptors are
//! caught: a cell claimed by two partitions is an overlap (a load error
//! naming both); a cell claimed by none is a hole, which reads as the
//! master's fill value (like a missing Zarr chunk). The map costs one
//! `u32` per cell and is bounded ([`MAX_CELLS`]).
//!
//! A read projects its box over the cells with the engine's piece loop
//! ([`read_pieces`], the one Zarr chunks are read with): each piece is
//! read from its partition ([`Partition::read`]) or filled, in parallel
//! when there are several, each written straight into its place in the
//! caller's buffer through its own [`DisjointView`].

use std::sync::Arc;

use super::descriptor::MasterSpec;
use super::error::NcaError;
use super::fragment::Context;
use super::partition::{MasterFacts, Partition};
use crate::engine::array::{ArrayMeta, ArraySource, ChangeStamp};
use crate::engine::index::Region;
use crate::engine::index::disjoint::DisjointView;
use crate::engine::index::tiling::{DimTiling, Piece};
use crate::engine::pieces::{PieceSource, read_pieces};
use crate::error::Result;
use crate::storage::{Files, paths};

/// Cell grids larger than this are refused: partitions so misaligned that
/// their boundaries cut the master into more cells than this are not a
/// real aggregation.
pub const MAX_CELLS: u64 = 1 << 24;

/// No partition covers the cell.
const HOLE: u32 = u32::MAX;

pub struct Aggregation {
    meta: ArrayMeta,
    tiling: Vec<DimTiling>,
    /// Cells per dimension.
    grid: Vec<u64>,
    /// Partition of each cell (row-major over `grid`), or [`HOLE`].
    cells: Vec<u32>,
    partitions: Vec<Partition>,
    /// The descriptor (or NCA netCDF file) this master was read from.
    descriptor: std::path::PathBuf,
    /// What opened it (asked for its stamp when it is a URL).
    files: Arc<dyn Files>,
}

impl std::fmt::Debug for Aggregation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Aggregation")
            .field("source", &self.meta.source)
            .field("shape", &self.meta.shape)
            .field("partitions", &self.partitions.len())
            .finish()
    }
}

impl Aggregation {
    /// Build the master `spec` (named `name`, `"descriptor: variable"`),
    /// opening partitions against `ctx`. Errors are load errors.
    pub fn new(spec: MasterSpec, name: &str, ctx: Arc<Context>) -> Result<Aggregation> {
        let err = |e: NcaError| e.at(name);
        let rank = spec.shape.len();
        let (tiling, grid) = cuts(&spec).map_err(err)?;
        let ncells = grid.iter().product::<u64>();
        let mut cells = vec![HOLE; ncells as usize];
        // Claim every partition's cells; a cell claimed twice is an overlap.
        let strides = crate::engine::index::c_strides(&grid);
        for (i, p) in spec.array.partitions.iter().enumerate() {
            let ranges: Vec<(u64, u64)> = (0..rank)
                .map(|d| {
                    let (a, b) = p.location[d];
                    let t = &tiling[d];
                    (t.tile_of(a), t.tile_of(b - 1) + 1)
                })
                .collect();
            let n: u64 = ranges.iter().map(|(a, b)| b - a).product();
            for k in 0..n {
                let mut rem = k;
                let mut lin = 0;
                let mut at = vec![0u64; rank];
                for d in (0..rank).rev() {
                    let (a, b) = ranges[d];
                    let c = a + rem % (b - a);
                    rem /= b - a;
                    lin += c * strides[d];
                    at[d] = tiling[d].tile_start(c);
                }
                let cell = &mut cells[lin as usize];
                if *cell != HOLE {
                    return Err(err(NcaError::Overlap {
                        first: spec.array.partitions[*cell as usize].label.clone(),
                        second: p.label.clone(),
                        at,
                    }));
                }
                *cell = i as u32;
            }
        }
        let holes = cells.iter().filter(|&&c| c == HOLE).count();
        if holes > 0 {
            log::info!(
                "{name}: {holes} of {ncells} cells have no partition: they read as the fill value"
            );
        }
        let facts = Arc::new(MasterFacts {
            name: name.to_string(),
            dims: spec.dims.clone(),
            directions: spec.array.directions.clone(),
            dtype: spec.dtype.clone(),
            fill: spec.fill.clone(),
            units: spec.units.clone(),
            calendar: spec.calendar.clone(),
        });
        let descriptor = ctx.file.clone();
        let files = ctx.files.clone();
        let mut partitions = Vec::with_capacity(spec.array.partitions.len());
        for p in spec.array.partitions {
            partitions.push(Partition::new(p, ctx.clone(), facts.clone()).map_err(err)?);
        }
        let mut meta = ArrayMeta::new(name, spec.shape, spec.dtype, spec.fill)?;
        meta.dimension_names = spec.dims.into_iter().map(Some).collect();
        meta.attributes = spec.attributes;
        Ok(Aggregation {
            meta,
            tiling,
            grid,
            cells,
            partitions,
            descriptor,
            files,
        })
    }

    /// The number of partitions.
    pub fn num_partitions(&self) -> usize {
        self.partitions.len()
    }
}

/// A read projects its box over the cells (the engine's piece loop): each
/// piece is one partition's, or a hole's.
impl PieceSource for Aggregation {
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
        let lin: u64 = piece
            .tile
            .iter()
            .zip(crate::engine::index::c_strides(&self.grid))
            .map(|(t, s)| t * s)
            .sum();
        let cell = self.cells[lin as usize];
        if cell == HOLE {
            view.fill(&self.meta.fill_value);
            return Ok(());
        }
        let p = &self.partitions[cell as usize];
        // The piece relative to the partition's location.
        let start: Vec<u64> = (0..piece.tile.len())
            .map(|d| {
                self.tiling[d].tile_start(piece.tile[d]) + piece.tile_start[d]
                    - p.spec.location[d].0
            })
            .collect();
        p.read(&start, view)
    }
}

/// The cuts of every dimension: 0, each partition boundary, the extent.
fn cuts(spec: &MasterSpec) -> Result<(Vec<DimTiling>, Vec<u64>), NcaError> {
    let mut tiling = Vec::with_capacity(spec.shape.len());
    let mut grid = Vec::with_capacity(spec.shape.len());
    let mut total: u64 = 1;
    for (d, &extent) in spec.shape.iter().enumerate() {
        let mut ends: Vec<u64> = spec
            .array
            .partitions
            .iter()
            .flat_map(|p| [p.location[d].0, p.location[d].1])
            .chain([extent])
            .filter(|&e| e > 0)
            .collect();
        ends.sort_unstable();
        ends.dedup();
        total = total.saturating_mul(ends.len() as u64);
        grid.push(ends.len() as u64);
        tiling.push(DimTiling::Explicit(ends));
    }
    if total > MAX_CELLS {
        return Err(NcaError::invalid(
            "nca_array.Partitions",
            format!(
                "partition boundaries cut the master into {total} cells, more than {MAX_CELLS}: \
                 the partitions are not a partition matrix"
            ),
        ));
    }
    Ok((tiling, grid))
}

impl ArraySource for Aggregation {
    fn meta(&self) -> &ArrayMeta {
        &self.meta
    }

    /// A hash of the descriptor file's stamp and every partition's: any
    /// fragment rewritten, replaced or appearing changes it (then the
    /// refresh swaps in the freshly opened aggregation, whose Zarr
    /// fragments have new cache identities). No cache of its own.
    fn change_stamp(&self) -> ChangeStamp {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        let mut known =
            paths::stamp_at(self.files.as_ref(), &self.descriptor).map(|s| s.hash(&mut h));
        for p in &self.partitions {
            known = known.and(p.change_stamp().map(|s| s.hash(&mut h)));
        }
        ChangeStamp {
            cache_id: None,
            data: known.map(|()| h.finish()),
            elsewhere: true,
        }
    }

    fn read_region(&self, region: &Region, out: &mut [u8]) -> Result<()> {
        if region.num_elements() == 0 {
            return Ok(());
        }
        read_pieces(self, region, out)
    }
}
