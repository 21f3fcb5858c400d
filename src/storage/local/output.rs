//! The one place slabfs creates a local file: the output of `slabfs pack`
//! and `slabfs unpack`, written beside its final name and renamed into
//! place, so a reader of the target never sees half a file and a failed
//! run leaves nothing behind.
//!
//! It lives in storage, beside [`super::descriptors`] (the only code that
//! opens a local file for reading), so that no format opens or creates a
//! file itself: `tests/it/layers.rs` fails on any file under
//! `src/formats/` that does.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

fn out_err(output: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: output.display().to_string(),
        source,
    }
}

/// A file being written next to its final name, renamed into place by
/// [`commit`](TempOutput::commit) and removed if dropped before.
pub struct TempOutput {
    temp: PathBuf,
    target: PathBuf,
    file: Option<std::fs::File>,
}

impl TempOutput {
    /// A new, empty temporary file in `target`'s directory (created, never
    /// opened over an existing one: two runs cannot write one file).
    pub fn create(target: &Path) -> Result<TempOutput> {
        let dir = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let name = target
            .file_name()
            .ok_or_else(|| Error::metadata(target.display().to_string(), "not a file name"))?;
        let temp = dir.join(format!(
            ".{}.slabfs-{}.tmp",
            name.to_string_lossy(),
            std::process::id()
        ));
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
            // A missing directory is named as such, not as the temporary
            // file's name the user never gave.
            .map_err(|e| out_err(if dir.is_dir() { &temp } else { &dir }, e))?;
        Ok(TempOutput {
            temp,
            target: target.to_path_buf(),
            file: Some(file),
        })
    }

    /// The file to write (sequentially, or at offsets with
    /// `std::os::unix::fs::FileExt`).
    pub fn file(&self) -> &std::fs::File {
        self.file.as_ref().expect("open until commit")
    }

    /// Sync the file, rename it over the target and sync the directory.
    pub fn commit(mut self) -> Result<()> {
        let file = self.file.take().expect("open until commit");
        file.sync_all().map_err(|e| out_err(&self.temp, e))?;
        drop(file);
        std::fs::rename(&self.temp, &self.target).map_err(|e| out_err(&self.target, e))?;
        if let Some(dir) = self.target.parent().filter(|p| !p.as_os_str().is_empty()) {
            // Best effort: the data is safe; only the rename's durability
            // across a power cut depends on this.
            if let Err(e) = std::fs::File::open(dir).and_then(|d| d.sync_all()) {
                log::warn!("{}: cannot sync the directory: {e}", dir.display());
            }
        }
        self.temp = PathBuf::new();
        Ok(())
    }
}

impl Drop for TempOutput {
    fn drop(&mut self) {
        if !self.temp.as_os_str().is_empty() {
            self.file.take();
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}
