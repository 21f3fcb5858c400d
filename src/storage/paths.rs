//! Path-level helpers over any [`Files`], local or remote alike: whether
//! something is at a path, its change stamp, its real path, a small
//! document read whole. Each tells a URL from a local path
//! ([`crate::storage::location::url_of`]) and asks the right side.

use std::io;
use std::path::Path;

use crate::storage::contract::Files;

/// A hash of what `stat` says about `path` (device, inode, length, times):
/// changes when the file is rewritten or replaced; `None` if it cannot be
/// read. How sources that read single files answer
/// [`crate::engine::array::ArraySource::change_stamp`] when their
/// [`ReadAt::stamp`](crate::storage::ReadAt::stamp) cannot.
pub fn file_stamp(path: &Path) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (m.dev(), m.ino(), m.len(), m.mtime(), m.mtime_nsec()).hash(&mut h);
    (m.ctime(), m.ctime_nsec()).hash(&mut h);
    Some(h.finish())
}

/// [`file_stamp`] of a local path; for a URL, the remote object's own
/// stamp (a HEAD: its ETag, size and time), opened through `files`.
pub fn stamp_at(files: &dyn Files, path: &Path) -> Option<u64> {
    if crate::storage::location::url_of(path).is_some() {
        files.open(path).ok()?.stamp()
    } else {
        file_stamp(path)
    }
}

/// Whether something is at `path`: a local file or directory, or a
/// remote object that answers (a HEAD).
pub fn exists_at(files: &dyn Files, path: &Path) -> bool {
    if crate::storage::location::url_of(path).is_some() {
        files.open(path).is_ok()
    } else {
        path.exists()
    }
}

/// The path references made by the file `path` are resolved against: its
/// canonical path locally (symlinks followed, as the kernel will), the
/// URL itself for a remote object.
pub fn real_path(path: &Path) -> io::Result<std::path::PathBuf> {
    if crate::storage::location::url_of(path).is_some() {
        Ok(path.to_path_buf())
    } else {
        path.canonicalize()
    }
}

/// A small document (a descriptor, a references file) read whole through
/// `files`, local or remote alike. Its first bytes (up to
/// [`SNIFF_BYTES`]) are shown to `wanted` first: `Ok(None)` when it says
/// the file is not what the caller reads, without reading the rest or
/// minding its size. Larger than `limit` bytes: [`Error::TooLarge`](crate::error::Error::TooLarge).
pub fn read_document(
    files: &dyn Files,
    path: &Path,
    limit: u64,
    wanted: impl Fn(&[u8]) -> bool,
) -> crate::error::Result<Option<Vec<u8>>> {
    use crate::error::Error;
    let io = |e| Error::Io {
        path: path.display().to_string(),
        source: e,
    };
    let file = files.open(path).map_err(io)?;
    let size = file.size().map_err(io)?;
    let mut text = vec![0u8; size.min(SNIFF_BYTES) as usize];
    file.read_exact_at(&mut text, 0).map_err(io)?;
    if !wanted(&text) {
        return Ok(None);
    }
    if size > limit {
        return Err(Error::TooLarge {
            path: path.display().to_string(),
            size,
            limit,
        });
    }
    let head = text.len();
    if (head as u64) < size {
        text.resize(size as usize, 0);
        file.read_exact_at(&mut text[head..], head as u64)
            .map_err(io)?;
    }
    Ok(Some(text))
}

/// How much of a document [`read_document`] reads before deciding: small
/// documents (most descriptors) in one read, one round trip remotely.
pub const SNIFF_BYTES: u64 = 64 << 10;
