//! The piece loop: how a read of a tiled source fans out over its tiles.
//!
//! Every tiled source (a chunked array, an aggregation over its partition
//! matrix) reads a box the same way, so the loop is written once, here:
//!
//! 1. project the box over the source's tiling ([`Projection`]): one
//!    [`Piece`] per tile it touches;
//! 2. let the source fetch what the pieces need together, in one round
//!    trip rather than one per piece ([`PieceSource::fetch_together`]:
//!    an object store's chunks);
//! 3. split the output buffer into one [`DisjointView`] per piece (the
//!    only place where the pieces' disjointness is checked, and what lets
//!    the rest be safe code);
//! 4. read every piece into its view: on the rayon pool when there are
//!    several and any of them waits on something, each piece decoded and
//!    copied into place by the same worker (while it is in that core's
//!    cache); on this thread when there is one piece, or when every piece
//!    is ready ([`PieceSource::is_ready`]: decoded in the cache, so the
//!    read is only copies, not worth waking the pool for).
//!
//! A source says how to read one piece; it never sees the other pieces'
//! views, so it cannot write outside its own.
//!
//! Readahead runs the same projection ahead of the reads
//! ([`prefetch_pieces`]): the tiles under the coming boxes, each once,
//! fetched together when the source batches its fetches, else decoded into
//! the cache one per rayon task.

use rayon::prelude::*;

use super::array::ArraySource;
use super::index::Region;
use super::index::disjoint::DisjointView;
use super::index::tiling::{DimTiling, Piece, Projection};
use crate::error::Result;

/// A source whose index space is tiled, read one tile at a time.
pub trait PieceSource: Sync {
    /// What [`fetch_together`](Self::fetch_together) hands a piece's read
    /// (a chunk's stored bytes, or the error of fetching them).
    type Fetched: Send;

    /// The tiling of the index space, one [`DimTiling`] per dimension.
    fn tiling(&self) -> &[DimTiling];

    /// Bytes per element of the output.
    fn item_size(&self) -> usize;

    /// Fetch together what the `pieces` of one read need (called only
    /// when there are several), one entry per piece: `None` for a piece
    /// to fetch for itself. The default fetches nothing ahead.
    fn fetch_together(&self, pieces: &[Piece]) -> Vec<Option<Self::Fetched>> {
        pieces.iter().map(|_| None).collect()
    }

    /// Whether reading `piece` now waits on nothing (its tile is decoded
    /// in a cache). The default, `false`, is always safe: it only costs
    /// handing the pieces to the rayon pool.
    fn is_ready(&self, piece: &Piece) -> bool {
        let _ = piece;
        false
    }

    /// Read `piece` into `view` (its box of the output). `many` is true
    /// when the read has several pieces (this may then run on a rayon
    /// worker); `fetched` is what [`fetch_together`](Self::fetch_together)
    /// fetched for it.
    fn read_piece(
        &self,
        piece: &Piece,
        view: DisjointView<'_>,
        many: bool,
        fetched: Option<Self::Fetched>,
    ) -> Result<()>;

    /// Prefetch the `tiles` of one readahead together, when this source
    /// batches its fetches (an object store's chunks fetched in one round
    /// trip): `true` when it did, and [`prefetch_pieces`] then leaves them
    /// alone. The default, `false`, prefetches each tile by itself.
    fn prefetch_together(&self, tiles: &[Vec<u64>]) -> bool {
        let _ = tiles;
        false
    }

    /// Decode tile `tile` into the source's cache ahead of a read
    /// ([`prefetch_pieces`]); failures are left for the read to report.
    /// The default does nothing: a source without a cache has nothing to
    /// prefetch into.
    fn prefetch_tile(&self, tile: &[u64]) {
        let _ = tile;
    }
}

/// Decode into the cache what reading `regions` of `source` will need:
/// the tiles under every region, each once (the boxes of one byte range
/// are disjoint but may share tiles), handed together to
/// [`PieceSource::prefetch_together`], or else prefetched one per rayon
/// task ([`PieceSource::prefetch_tile`]). What
/// [`ArraySource::prefetch`] does for a
/// tiled source: the readahead's loop, beside the read's.
pub fn prefetch_pieces<S: PieceSource>(source: &S, regions: &[Region]) {
    let mut tiles: Vec<Vec<u64>> = regions
        .iter()
        .flat_map(|r| {
            Projection::new(source.tiling(), r)
                .pieces()
                .map(|p| p.tile)
                .collect::<Vec<_>>()
        })
        .collect();
    tiles.sort_unstable();
    tiles.dedup();
    if tiles.is_empty() || source.prefetch_together(&tiles) {
        return;
    }
    tiles.par_iter().for_each(|tile| source.prefetch_tile(tile));
}

/// Fill `out` with the elements of `region` of `source` (C order over the
/// region; `out` is exactly its size), one piece per tile touched, as the
/// [module docs](self) describe.
/// Whether reading `region` of `source` waits on nothing: every piece
/// [`PieceSource::is_ready`]. A region over more than [`MAX_READY_CHECK`]
/// tiles is not looked at (`false`): a read that large is not one to
/// answer on a request thread anyway. What
/// [`ArraySource::cached`] answers for
/// a tiled source.
pub fn ready<S: PieceSource>(source: &S, region: &Region) -> bool {
    let projection = Projection::new(source.tiling(), region);
    let mut pieces = projection.pieces();
    pieces
        .by_ref()
        .take(MAX_READY_CHECK)
        .all(|p| source.is_ready(&p))
        && pieces.next().is_none()
}

/// Tiles [`ready`] looks at most: the kernel's largest request (1 MiB)
/// over 16 KiB chunks.
pub const MAX_READY_CHECK: usize = 64;

pub fn read_pieces<S: PieceSource>(source: &S, region: &Region, out: &mut [u8]) -> Result<()> {
    let pieces: Vec<Piece> = Projection::new(source.tiling(), region).pieces().collect();
    // A read inside one tile: its one view, straight away.
    if let [piece] = pieces.as_slice() {
        let view = DisjointView::single(
            out,
            &region.count,
            source.item_size(),
            &piece.box_start,
            &piece.count,
        )
        .expect("a projection's piece lies inside its region");
        return source.read_piece(piece, view, false, None);
    }
    let many = pieces.len() > 1;
    let fetched = if many {
        source.fetch_together(&pieces)
    } else {
        pieces.iter().map(|_| None).collect()
    };
    assert_eq!(fetched.len(), pieces.len(), "one fetch per piece");
    let views = DisjointView::split(
        out,
        &region.count,
        source.item_size(),
        pieces
            .iter()
            .map(|p| (p.box_start.as_slice(), p.count.as_slice())),
    )
    .expect("the pieces of one projection are disjoint boxes of its region");
    let read = |((p, view), f): ((&Piece, DisjointView<'_>), Option<S::Fetched>)| {
        source.read_piece(p, view, many, f)
    };
    if many && !pieces.iter().all(|p| source.is_ready(p)) {
        pieces.par_iter().zip(views).zip(fetched).try_for_each(read)
    } else {
        pieces.iter().zip(views).zip(fetched).try_for_each(read)
    }
}

/// Read `region` of `source` into `view`, whose box holds as many
/// elements in the same order (a piece of an aggregation read from its
/// member or fragment as it is stored): straight into the reply when the
/// view is one run of it, else through a buffer of the box.
pub fn read_into(
    source: &dyn ArraySource,
    region: &Region,
    view: &mut DisjointView<'_>,
) -> Result<()> {
    if let Some(out) = view.contiguous() {
        return source.read_region(region, out);
    }
    let mut buf = vec![0u8; region.num_elements() as usize * source.meta().item_size()];
    source.read_region(region, &mut buf)?;
    view.copy_from_dense(&buf);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A 2-D source of regular tiles whose element (r, c) is the 2-byte
    /// `[r, c]`; tiles in column 1 are missing (filled with `0xFF 0xFF`),
    /// and tile (2, 0) fails to read.
    struct Grid {
        tiling: Vec<DimTiling>,
        ready: bool,
        fetched_together: AtomicUsize,
        read_on_pool: AtomicUsize,
        prefetched: parking_lot::Mutex<Vec<Vec<u64>>>,
    }

    impl Grid {
        fn new(ready: bool) -> Grid {
            Grid {
                tiling: vec![DimTiling::Regular(3), DimTiling::Regular(4)],
                ready,
                fetched_together: AtomicUsize::new(0),
                read_on_pool: AtomicUsize::new(0),
                prefetched: parking_lot::Mutex::new(Vec::new()),
            }
        }
    }

    impl PieceSource for Grid {
        type Fetched = u64;

        fn tiling(&self) -> &[DimTiling] {
            &self.tiling
        }

        fn item_size(&self) -> usize {
            2
        }

        fn fetch_together(&self, pieces: &[Piece]) -> Vec<Option<u64>> {
            self.fetched_together
                .fetch_add(pieces.len(), Ordering::Relaxed);
            pieces
                .iter()
                .map(|p| Some(p.tile[0] * 100 + p.tile[1]))
                .collect()
        }

        fn is_ready(&self, _: &Piece) -> bool {
            self.ready
        }

        fn read_piece(
            &self,
            piece: &Piece,
            mut view: DisjointView<'_>,
            many: bool,
            fetched: Option<u64>,
        ) -> Result<()> {
            let id = piece.tile[0] * 100 + piece.tile[1];
            assert_eq!(fetched, many.then_some(id));
            if rayon::current_thread_index().is_some() {
                self.read_on_pool.fetch_add(1, Ordering::Relaxed);
            }
            if piece.tile == [2, 0] {
                return Err(Error::NotFound("tile (2, 0)".into()));
            }
            if piece.tile[1] == 1 {
                view.fill(&[0xFF, 0xFF]);
                return Ok(());
            }
            let shape = [3u64, 4];
            let (r0, c0) = (piece.tile[0] * shape[0], piece.tile[1] * shape[1]);
            let tile: Vec<u8> = (0..shape[0])
                .flat_map(|r| (0..shape[1]).flat_map(move |c| [(r0 + r) as u8, (c0 + c) as u8]))
                .collect();
            view.copy_from(&tile, &shape, &piece.tile_start);
            Ok(())
        }

        /// A "ready" grid batches its prefetches; the other prefetches
        /// tile by tile.
        fn prefetch_together(&self, tiles: &[Vec<u64>]) -> bool {
            if self.ready {
                self.prefetched.lock().extend(tiles.iter().cloned());
            }
            self.ready
        }

        fn prefetch_tile(&self, tile: &[u64]) {
            self.prefetched.lock().push(tile.to_vec());
        }
    }

    fn expected(region: &Region) -> Vec<u8> {
        let mut out = Vec::new();
        for r in region.start[0]..region.start[0] + region.count[0] {
            for c in region.start[1]..region.start[1] + region.count[1] {
                if (4..8).contains(&c) {
                    out.extend([0xFF, 0xFF]);
                } else {
                    out.extend([r as u8, c as u8]);
                }
            }
        }
        out
    }

    #[test]
    fn pieces_land_in_place_on_the_pool() {
        let g = Grid::new(false);
        let region = Region {
            start: vec![1, 2],
            count: vec![4, 9],
        };
        let mut out = vec![0u8; 4 * 9 * 2];
        read_pieces(&g, &region, &mut out).unwrap();
        assert_eq!(out, expected(&region));
        // 2 x 3 pieces, fetched together, read by rayon workers.
        assert_eq!(g.fetched_together.load(Ordering::Relaxed), 6);
        assert_eq!(g.read_on_pool.load(Ordering::Relaxed), 6);
    }

    #[test]
    fn ready_pieces_and_single_pieces_stay_on_this_thread() {
        let g = Grid::new(true);
        let region = Region {
            start: vec![0, 0],
            count: vec![3, 12],
        };
        let mut out = vec![0u8; 3 * 12 * 2];
        read_pieces(&g, &region, &mut out).unwrap();
        assert_eq!(out, expected(&region));
        assert_eq!(g.read_on_pool.load(Ordering::Relaxed), 0);

        let g = Grid::new(false);
        let region = Region {
            start: vec![1, 9],
            count: vec![2, 2],
        };
        let mut out = vec![0u8; 2 * 2 * 2];
        read_pieces(&g, &region, &mut out).unwrap();
        assert_eq!(out, expected(&region));
        assert_eq!(g.fetched_together.load(Ordering::Relaxed), 0);
        assert_eq!(g.read_on_pool.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_failing_piece_fails_the_read() {
        let g = Grid::new(false);
        let region = Region {
            start: vec![4, 0],
            count: vec![4, 5],
        };
        let mut out = vec![0u8; 4 * 5 * 2];
        let err = read_pieces(&g, &region, &mut out).unwrap_err();
        assert!(matches!(err, Error::NotFound(_)), "{err}");
    }

    /// Two boxes of one byte range sharing a tile row: every tile under
    /// them prefetched once, together or one by one.
    #[test]
    fn prefetch_visits_each_tile_once() {
        let regions = [
            Region {
                start: vec![1, 5],
                count: vec![1, 7],
            },
            Region {
                start: vec![2, 0],
                count: vec![2, 12],
            },
        ];
        // Row 1 is in tile row 0, rows 2..4 in tile rows 0 and 1; columns
        // 5..12 in tiles 1 and 2, 0..12 in tiles 0, 1, 2: tiles (0, 1) and
        // (0, 2) are under both boxes.
        let want = vec![
            vec![0, 0],
            vec![0, 1],
            vec![0, 2],
            vec![1, 0],
            vec![1, 1],
            vec![1, 2],
        ];
        for batched in [false, true] {
            let g = Grid::new(batched);
            prefetch_pieces(&g, &regions);
            let mut got = g.prefetched.lock().clone();
            got.sort();
            assert_eq!(got, want, "batched: {batched}");
        }
        let g = Grid::new(false);
        prefetch_pieces(&g, &[]);
        assert!(g.prefetched.lock().is_empty());
    }

    #[test]
    fn an_empty_region_reads_nothing() {
        let g = Grid::new(false);
        let region = Region {
            start: vec![2, 2],
            count: vec![0, 3],
        };
        read_pieces(&g, &region, &mut []).unwrap();
    }
}
