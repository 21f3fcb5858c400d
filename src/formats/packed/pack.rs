//! `slabfs pack`: a classic netCDF file into a blocked archive.
//!
//! Each variable's flat byte stream (big-endian, as the classic file
//! stores it, record variables de-interleaved) is read through the
//! ordinary netCDF-3 reader ([`crate::engine::read::read_at`]) and cut into blocks.
//! Blocks are independent, so a batch of them is read and compressed on
//! all cores at once (rayon); the batch is then written in order, and only
//! then are the offsets known, which is why the index goes at the end.
//! Memory stays at one batch: a few blocks per core, input and output.
//!
//! The archive is written to a temporary file next to the output, synced,
//! and renamed over the output name, then the directory is synced: a crash,
//! a full disk or an unreadable input leaves the output name either absent
//! or holding whatever it held before, never a partial archive. The
//! temporary file is removed on every error path.

use std::cell::RefCell;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

use rayon::prelude::*;

use super::format::{
    self, BlockCodec, MAX_BLOCK_SIZE, MIN_BLOCK_SIZE, SUPERBLOCK_LEN, Superblock, VarIndex,
};
use crate::dtype::Endian;
use crate::engine::read::read_at;
use crate::error::{Error, Result};
use crate::formats::netcdf3::header::NumRecs;
use crate::formats::netcdf3::{self, Format};
use crate::storage::Files;
use crate::storage::local::{OsFiles, TempOutput};

/// How `pack` compresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackOptions {
    /// Uncompressed bytes per block; rounded down to a multiple of 8.
    pub block_size: u64,
    pub codec: BlockCodec,
    /// The codec's level; `None` for its default (zstd 3, deflate 6).
    pub level: Option<i32>,
    /// Shuffle the bytes of multi-byte elements before compressing
    /// ([`VarIndex::shuffle`]).
    pub shuffle: bool,
}

impl Default for PackOptions {
    fn default() -> Self {
        PackOptions {
            block_size: 1 << 20,
            codec: BlockCodec::Zstd,
            level: None,
            shuffle: true,
        }
    }
}

impl PackOptions {
    /// The block size and level actually used, or an error for values the
    /// format cannot hold.
    fn resolve(&self) -> Result<(u64, i8), String> {
        let block_size = self.block_size / 8 * 8;
        if !(MIN_BLOCK_SIZE..=MAX_BLOCK_SIZE).contains(&block_size) {
            return Err(format!(
                "block size {} is outside {MIN_BLOCK_SIZE} bytes ..= {} MiB",
                self.block_size,
                MAX_BLOCK_SIZE >> 20
            ));
        }
        let (range, default) = match self.codec {
            BlockCodec::Zstd => (-7..=22, 3),
            BlockCodec::Deflate => (0..=9, 6),
        };
        let level = self.level.unwrap_or(default);
        if !range.contains(&level) {
            return Err(format!(
                "{} level {level} is outside {}..={}",
                self.codec.name(),
                range.start(),
                range.end()
            ));
        }
        Ok((block_size, level as i8))
    }
}

/// What a pack did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PackStats {
    pub variables: usize,
    pub blocks: u64,
    /// Bytes of variable data (unpadded, all variables).
    pub data_bytes: u64,
    /// Size of the classic input file.
    pub input_bytes: u64,
    /// Size of the archive written.
    pub archive_bytes: u64,
}

/// Blocks compressed per batch, per core: enough to keep every core busy
/// while the previous batch is written, few enough to bound memory.
const BATCH_PER_THREAD: usize = 4;

/// Pack the classic netCDF file `input` into the archive `output`
/// (replacing it if it exists).
pub fn pack(input: &Path, output: &Path, opts: &PackOptions) -> Result<PackStats> {
    let in_name = input.display().to_string();
    let (block_size, level) = opts
        .resolve()
        .map_err(|e| Error::metadata(output.display().to_string(), e))?;
    let opened = OsFiles::unconfined().open(input);
    if opened.is_ok_and(|f| super::is_archive(f.as_ref()).unwrap_or(false)) {
        return Err(Error::metadata(
            &in_name,
            "already a blocked archive (unpack it first)",
        ));
    }
    let file = netcdf3::File::open(input)?;
    let input_bytes = std::fs::metadata(input)
        .map_err(|e| Error::Io {
            path: in_name.clone(),
            source: e,
        })?
        .len();
    let header_bytes = classic_header(input, &file)?;

    let out = TempOutput::create(output)?;
    let mut w = BufWriter::with_capacity(1 << 20, out.file());
    let io_err = |e| out_err(output, e);
    w.write_all(&[0u8; SUPERBLOCK_LEN as usize])
        .map_err(io_err)?;
    w.write_all(&header_bytes).map_err(io_err)?;
    let mut pos = SUPERBLOCK_LEN + header_bytes.len() as u64;

    let mut stats = PackStats {
        input_bytes,
        ..PackStats::default()
    };
    let batch = rayon::current_num_threads() * BATCH_PER_THREAD;
    let mut index = Vec::with_capacity(file.variables().len());
    for v in file.variables() {
        let array = file.array_at(v.index)?;
        let data_len = array.meta().nbytes();
        let item = array.meta().item_size();
        let shuffle = opts.shuffle && item > 1;
        let nblocks = format::nblocks(data_len, block_size);
        let mut offsets = Vec::with_capacity(nblocks as usize + 1);
        let mut crcs = Vec::with_capacity(nblocks as usize);
        offsets.push(pos);
        for first in (0..nblocks).step_by(batch) {
            let last = (first + batch as u64).min(nblocks);
            let compressed: Vec<Result<Vec<u8>>> = (first..last)
                .into_par_iter()
                .map(|i| {
                    let start = i * block_size;
                    let len = (data_len - start).min(block_size) as usize;
                    let mut raw = vec![0u8; len];
                    let got = read_at(array.as_ref(), start, &mut raw, Endian::Big)?;
                    debug_assert_eq!(got, len);
                    if shuffle {
                        raw = shuffled(&raw, item);
                    }
                    compress(opts.codec, level, &raw).map_err(|e| out_err(output, e))
                })
                .collect();
            for block in compressed {
                let block = block?;
                crcs.push(crc32c::crc32c(&block));
                w.write_all(&block).map_err(io_err)?;
                pos += block.len() as u64;
                offsets.push(pos);
            }
        }
        stats.variables += 1;
        stats.blocks += nblocks;
        stats.data_bytes += data_len;
        index.push(VarIndex {
            codec: opts.codec,
            level,
            shuffle,
            block_size,
            data_len,
            offsets,
            crcs,
        });
    }
    let index_bytes = format::encode_index(&index);
    w.write_all(&index_bytes).map_err(io_err)?;
    w.flush().map_err(io_err)?;
    drop(w);
    let superblock = Superblock {
        header_offset: SUPERBLOCK_LEN,
        header_len: header_bytes.len() as u64,
        index_offset: pos,
        index_len: index_bytes.len() as u64 - 4,
        classic_len: input_bytes,
    };
    out.file()
        .write_all_at(&superblock.encode(), 0)
        .map_err(io_err)?;
    stats.archive_bytes = pos + index_bytes.len() as u64;
    out.commit()?;
    log::info!(
        "packed {in_name} into {}: {} variables, {} blocks, {} -> {} bytes",
        output.display(),
        stats.variables,
        stats.blocks,
        stats.input_bytes,
        stats.archive_bytes
    );
    Ok(stats)
}

/// The input's header bytes as the archive embeds them: unchanged, except
/// that a streaming record count becomes the real one.
fn classic_header(input: &Path, file: &netcdf3::File) -> Result<Vec<u8>> {
    let header = file.header();
    let mut bytes = vec![0u8; header.len as usize];
    let io_err = |e| Error::Io {
        path: input.display().to_string(),
        source: e,
    };
    let f = OsFiles::unconfined().open(input).map_err(io_err)?;
    f.read_exact_at(&mut bytes, 0).map_err(io_err)?;
    if header.numrecs == NumRecs::Streaming {
        // numrecs follows the 4-byte magic: 8 bytes in CDF-5, else 4.
        let n = file.numrecs();
        match header.format {
            Format::Data64 => bytes[4..12].copy_from_slice(&n.to_be_bytes()),
            _ => {
                let n = u32::try_from(n).map_err(|_| {
                    Error::metadata(input.display().to_string(), "too many records for CDF-1/2")
                })?;
                bytes[4..8].copy_from_slice(&n.to_be_bytes());
            }
        }
    }
    Ok(bytes)
}

/// `raw` (whole elements of `item` bytes) with its bytes grouped by
/// position in the element: every element's byte 0, then every byte 1...
fn shuffled(raw: &[u8], item: usize) -> Vec<u8> {
    let n = raw.len() / item;
    let mut out = vec![0u8; raw.len()];
    for (i, elem) in raw.chunks_exact(item).enumerate() {
        for (j, &b) in elem.iter().enumerate() {
            out[j * n + i] = b;
        }
    }
    out
}

thread_local! {
    /// One zstd compression context per thread, for the level last used.
    static ZSTD: RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> =
        const { RefCell::new(None) };
}

/// Compress one block.
pub fn compress(codec: BlockCodec, level: i8, raw: &[u8]) -> std::io::Result<Vec<u8>> {
    match codec {
        BlockCodec::Zstd => ZSTD.with(|cell| {
            let mut cell = cell.borrow_mut();
            let level = i32::from(level);
            if cell.as_ref().is_none_or(|(l, _)| *l != level) {
                *cell = Some((level, zstd::bulk::Compressor::new(level)?));
            }
            let (_, c) = cell.as_mut().expect("just set");
            c.compress(raw)
        }),
        BlockCodec::Deflate => {
            let mut e = flate2::write::ZlibEncoder::new(
                Vec::with_capacity(raw.len() / 2),
                flate2::Compression::new(level as u32),
            );
            e.write_all(raw)?;
            e.finish()
        }
    }
}

fn out_err(output: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: output.display().to_string(),
        source,
    }
}
