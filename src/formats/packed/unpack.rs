//! `slabfs unpack`: a blocked archive back into a classic netCDF file.
//!
//! The embedded header is written unchanged at offset 0 and the file is
//! sized to the original's length, so every variable's `begin` offset
//! holds again. Each variable's flat stream is then read through the
//! archive reader ([`crate::engine::read::read_at`], big-endian: the stored bytes)
//! in large pieces, whose blocks the reader decodes in parallel, and put
//! in place: a fixed variable contiguously at its `begin`, a record
//! variable one slab per record, `recsize` bytes apart. The padding
//! netCDF-3 adds after a variable (or a record slab) to reach 4 bytes is
//! written as netcdf-c's default fill mode writes it, the variable's fill
//! value repeated, so a file written in fill mode (the default of netcdf-c
//! and netCDF4-python) comes back byte for byte, apart from a streaming
//! record count, which the archive stores as the real one. Written
//! through a temporary file renamed into place, like `pack`.

use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::dtype::Endian;
use crate::engine::read::read_at;
use crate::error::{Error, Result};
use crate::formats::netcdf3;
use crate::storage::local::TempOutput;

/// What an unpack did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UnpackStats {
    pub variables: usize,
    /// Bytes of variable data (unpadded, all variables).
    pub data_bytes: u64,
    /// Size of the classic file written.
    pub output_bytes: u64,
}

/// Bytes of a variable read per step: many blocks, decoded in parallel.
const PIECE: usize = 16 << 20;

/// Unpack the archive `input` into the classic file `output` (replacing
/// it if it exists).
pub fn unpack(input: &Path, output: &Path) -> Result<UnpackStats> {
    let file = super::open(input)?;
    let archive = super::archive_of(&file)
        .cloned()
        .expect("an archive opens with its body");
    let out = TempOutput::create(output)?;
    let io_err = |e| Error::Io {
        path: output.display().to_string(),
        source: e,
    };
    let classic_len = archive.superblock.classic_len;
    out.file().set_len(classic_len).map_err(io_err)?;
    out.file()
        .write_all_at(&archive.header_bytes, 0)
        .map_err(io_err)?;
    let recsize = file_recsize(&file);
    let mut stats = UnpackStats {
        output_bytes: classic_len,
        ..UnpackStats::default()
    };
    let record_vars = file.variables().iter().filter(|v| v.is_record).count();
    let mut buf = Vec::new();
    for v in file.variables() {
        let array = file.array_at(v.index)?;
        let data_len = array.meta().nbytes();
        // A record variable's stream is its records' slabs back to back.
        let slab = if v.is_record {
            let records = v.shape.first().copied().unwrap_or(0).max(1);
            data_len / records
        } else {
            data_len
        };
        let mut off = 0u64;
        while off < data_len {
            let len = (data_len - off).min(PIECE as u64) as usize;
            buf.resize(len, 0);
            read_at(array.as_ref(), off, &mut buf, Endian::Big)?;
            // Place the piece slab by slab (one slab for fixed variables).
            let mut done = 0usize;
            while done < len {
                let at = off + done as u64;
                let (record, within) = match slab {
                    0 => (0, 0),
                    s => (at / s, at % s),
                };
                let n = ((slab - within) as usize).min(len - done);
                let dest = v.layout.begin + record * recsize + within;
                out.file()
                    .write_all_at(&buf[done..done + n], dest)
                    .map_err(io_err)?;
                done += n;
            }
            off += len as u64;
        }
        // Padding after the data (fixed) or after each slab (records; a
        // lone record variable has none: its records are not padded).
        let pad = match v.is_record {
            false => v.layout.vsize.saturating_sub(data_len),
            true if record_vars > 1 => v.layout.vsize.saturating_sub(slab),
            true => 0,
        };
        if pad > 0 {
            let mut fill = v.fill_value.clone();
            if cfg!(target_endian = "little") {
                fill.reverse(); // one element, native -> big-endian
            }
            let pattern: Vec<u8> = fill.iter().copied().cycle().take(pad as usize).collect();
            let (count, step, first) = match v.is_record {
                false => (1, 0, v.layout.begin + data_len),
                true => (v.shape[0], recsize, v.layout.begin + slab),
            };
            for r in 0..count {
                let at = first + r * step;
                if at + pad <= classic_len {
                    out.file().write_all_at(&pattern, at).map_err(io_err)?;
                }
            }
        }
        stats.variables += 1;
        stats.data_bytes += data_len;
    }
    out.commit()?;
    log::info!(
        "unpacked {} into {}: {} variables, {} bytes",
        input.display(),
        output.display(),
        stats.variables,
        stats.output_bytes
    );
    Ok(stats)
}

/// Bytes from one record to the next in the classic layout.
fn file_recsize(file: &netcdf3::File) -> u64 {
    file.variables()
        .iter()
        .find(|v| v.is_record)
        .and_then(|v| v.layout.strides.first().copied())
        .unwrap_or(0)
}
