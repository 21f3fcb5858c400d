//! A netCDF-3 variable as an [`ArraySource`]: positioned reads of exactly
//! the bytes a box needs, then one byte swap to native order.
//!
//! `read_region` asks [`VarLayout::runs`] for the file runs of the box and
//! [`coalesce`]s them into windows. A window of one run is read straight
//! into its slice of the output buffer (`pread`, no copy); a window of
//! several runs separated by small gaps is read once into a scratch buffer
//! and its runs copied out. Runs come in C order over the box, so the
//! output is filled front to back. Reads go through the one `File` the
//! dataset opened, shared by every variable; no chunk cache is involved:
//! the data is stored uncompressed and the kernel's page cache already
//! holds what was read recently.
//!
//! A remote object ([`ReadAt::latency`] is `Some`) pays a round trip per
//! read rather than a system call, so there the runs are merged across
//! gaps up to its [`ReadAt::coalesce_gap`] (a record variable's records, the other
//! variables' bytes between them read and dropped) and all the windows
//! of a read are fetched at once: a read costs about one round trip,
//! whatever its number of records. The windows are read from the file's
//! blocks in the chunk cache ([`super::blocks`]), which the sequential
//! prefetcher fills ahead of the reader ([`ArraySource::prefetch`]).

use std::sync::Arc;

use super::layout::{VarLayout, coalesce, read_runs};
use crate::dtype::swap_in_place;
use crate::engine::array::{ArrayMeta, ArraySource, ChangeStamp};
use crate::engine::index::Region;
use crate::error::{Error, Result};
use crate::formats::chunked::ChunkedArray;
use crate::storage::ReadAt;

/// Runs separated by at most this many bytes are read with one call: one
/// page, about what a system call costs in copying time, and what the page
/// cache reads anyway.
pub const MAX_GAP: u64 = 4096;

/// A window of several runs is at most this long, bounding the scratch
/// buffer of one read.
pub const MAX_WINDOW: u64 = 4 << 20;

/// The longest window of merged runs over a remote object.
pub const REMOTE_MAX_WINDOW: u64 = 16 << 20;

/// The open file a dataset's variables read from.
#[derive(Debug)]
pub(crate) struct Shared {
    pub path: String,
    pub file: Arc<dyn ReadAt>,
    /// A remote file's bytes in blocks through the chunk cache
    /// ([`super::blocks`]); `None` locally.
    pub blocks: Option<ChunkedArray>,
}

/// One variable of an open netCDF-3 file.
pub struct Netcdf3Array {
    meta: ArrayMeta,
    name: String,
    layout: VarLayout,
    shared: Arc<Shared>,
}

impl Netcdf3Array {
    pub(crate) fn new(
        meta: ArrayMeta,
        name: String,
        layout: VarLayout,
        shared: Arc<Shared>,
    ) -> Netcdf3Array {
        Netcdf3Array {
            meta,
            name,
            layout,
            shared,
        }
    }

    /// Read `buf.len()` bytes at `offset`, with errors naming the file and
    /// the variable.
    fn pread(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.shared
            .file
            .read_exact_at(buf, offset)
            .map_err(|e| self.read_error(e, offset, offset + buf.len() as u64))
    }

    /// The error for a failed read of bytes `offset..end`, naming the
    /// file and the variable.
    fn read_error(&self, e: std::io::Error, offset: u64, end: u64) -> Error {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            let size = self
                .shared
                .file
                .size()
                .map_or_else(|_| "unknown".to_string(), |n| n.to_string());
            Error::metadata(
                &self.shared.path,
                format!(
                    "variable {:?}: bytes {offset}..{end} lie past the end of the file \
                         ({size} bytes): the file is truncated",
                    self.name
                ),
            )
        } else {
            Error::Io {
                path: format!(
                    "{} (variable {:?}, bytes {offset}..{end})",
                    self.shared.path, self.name
                ),
                source: e,
            }
        }
    }

    /// Fill `out` with the runs of `region`, merged across gaps up to
    /// [`MAX_GAP`], one positioned read per window: for a local file.
    /// Returns the number of windows read.
    fn read_one_by_one(&self, region: &Region, out: &mut [u8]) -> Result<usize> {
        read_runs(
            self.layout.runs(region),
            MAX_GAP,
            MAX_WINDOW,
            out,
            |buf, offset| self.pread(buf, offset),
        )
    }

    /// The windows of `regions`' runs merged across gaps up to
    /// the file's [`ReadAt::coalesce_gap`], as boxes of the file's byte
    /// view.
    fn byte_boxes(&self, regions: &[Region]) -> Vec<Region> {
        let gap = self.shared.file.coalesce_gap();
        regions
            .iter()
            .flat_map(|r| coalesce(self.layout.runs(r), gap, REMOTE_MAX_WINDOW))
            .map(|w| byte_box(w.offset, w.len))
            .collect()
    }

    /// Fill `out` with the runs of `region`, merged across gaps up to
    /// the file's [`ReadAt::coalesce_gap`], from the file's blocks (`blocks`): all the
    /// blocks not cached fetched at once, then each window read from
    /// them. For a remote object. Returns the number of windows read.
    fn read_from_blocks(
        &self,
        blocks: &ChunkedArray,
        region: &Region,
        out: &mut [u8],
    ) -> Result<usize> {
        let boxes = self.byte_boxes(std::slice::from_ref(region));
        if boxes.len() > 1 {
            // One round trip for every window's blocks.
            blocks.prefetch(&boxes);
        }
        let runs = self.layout.runs(region);
        read_runs(
            runs,
            self.shared.file.coalesce_gap(),
            REMOTE_MAX_WINDOW,
            out,
            |buf, offset| blocks.read_region(&byte_box(offset, buf.len() as u64), buf),
        )
    }
}

/// The box of `len` bytes at `offset` of a file's byte view.
fn byte_box(offset: u64, len: u64) -> Region {
    Region {
        start: vec![offset],
        count: vec![len],
    }
}

impl std::fmt::Debug for Netcdf3Array {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Netcdf3Array")
            .field("file", &self.shared.path)
            .field("name", &self.name)
            .field("layout", &self.layout)
            .finish()
    }
}

impl ArraySource for Netcdf3Array {
    fn meta(&self) -> &ArrayMeta {
        &self.meta
    }

    /// The file's identity and modification times: a rewrite in place or
    /// a replacement by rename changes it. Nothing of a local file is
    /// cached by slabfs, so there is no cache id; a remote file's blocks
    /// are cached under its byte view's.
    fn change_stamp(&self) -> ChangeStamp {
        let data =
            self.shared.file.stamp().or_else(|| {
                crate::storage::paths::file_stamp(std::path::Path::new(&self.shared.path))
            });
        if data.is_none() {
            log::warn!("{}: cannot check for changes", self.shared.path);
        }
        ChangeStamp {
            cache_id: self.shared.blocks.as_ref().map(ChunkedArray::cache_id),
            data,
            elsewhere: false,
        }
    }

    /// A remote file's: the engine then reads ahead of a sequential
    /// reader with a window sized to the link.
    fn fetch_latency(&self) -> Option<std::time::Duration> {
        self.shared.blocks.as_ref().and(self.shared.file.latency())
    }

    /// A remote file's blocks under `region`'s reads all in the cache. A
    /// local file is read from disk (the kernel's page cache): `false`.
    fn cached(&self, region: &Region) -> bool {
        self.shared.blocks.as_ref().is_some_and(|blocks| {
            self.byte_boxes(std::slice::from_ref(region))
                .iter()
                .all(|b| blocks.cached(b))
        })
    }

    /// The blocks under `regions`' runs fetched into the cache (a remote
    /// file's; nothing locally, where the kernel reads ahead).
    fn prefetch(&self, regions: &[Region]) {
        if let Some(blocks) = &self.shared.blocks {
            let boxes = self.byte_boxes(regions);
            blocks.prefetch(&boxes);
        }
    }

    fn read_region(&self, region: &Region, out: &mut [u8]) -> Result<()> {
        let windows = match &self.shared.blocks {
            Some(blocks) => self.read_from_blocks(blocks, region, out)?,
            None => self.read_one_by_one(region, out)?,
        };
        log::debug!(
            "netcdf3 read: file={} variable={} start={:?} count={:?} bytes={} reads={windows}",
            self.shared.path,
            self.name,
            region.start,
            region.count,
            out.len()
        );
        // netCDF-3 data is big-endian on disk.
        if cfg!(target_endian = "little") {
            swap_in_place(out, self.meta.dtype.swap_unit());
        }
        Ok(())
    }
}
