//! `--read-ahead-kb`: raise the mount's kernel readahead through sysfs
//! (not to be confused with slabfs's own chunk prefetching).
//!
//! Buffered reads of a FUSE file reach the daemon sized by the mount's
//! readahead, 128 KiB by default. The FUSE INIT handshake can only lower
//! it (`max_readahead`, see `fuse.rs`), so raising it takes root: every
//! FUSE mount has an anonymous device `MAJ:MIN` (third field of its line in
//! /proc/self/mountinfo) and a backing-device entry
//! `/sys/class/bdi/MAJ:MIN/read_ahead_kb` that the kernel reads on each
//! readahead. slabfs writes it right after the mount is live (after the
//! INIT reply, which would otherwise clamp it again) and before it reports
//! ready, so a `--daemon` caller or systemd never sees the old value.
//!
//! The device number comes from mountinfo rather than `stat(MOUNTPOINT)`:
//! the daemon has not started serving yet, and a stat of its own mount
//! root would wait for an answer only it can give.
//!
//! Failing to set it is not fatal (the mount works, with the kernel's
//! readahead): the caller logs a warning.

use std::io;
use std::path::{Path, PathBuf};

/// Why the readahead could not be set.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadAheadError {
    #[error("{mnt} is not in /proc/self/mountinfo")]
    NotMounted { mnt: String },
    #[error("{path}: {}{hint}", crate::error::os_words(source))]
    Sysfs {
        path: String,
        #[source]
        source: io::Error,
        /// Why it probably failed, for the reader of the log.
        hint: &'static str,
    },
}

/// What changed: the backing device and the value before and after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadAhead {
    /// `MAJ:MIN` of the mount.
    pub bdi: String,
    pub before_kb: u32,
    pub after_kb: u32,
}

/// Set the readahead of the mount at `mnt` (canonical) to `kb` KiB and
/// read it back.
pub fn set(mnt: &Path, kb: u32) -> Result<ReadAhead, ReadAheadError> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let bdi = super::parse_mountinfo(
        &info,
        std::os::unix::ffi::OsStrExt::as_bytes(mnt.as_os_str()),
    )
    .map(|m| m.dev)
    .ok_or_else(|| ReadAheadError::NotMounted {
        mnt: mnt.display().to_string(),
    })?;
    let path = sysfs_path(&bdi);
    let sysfs = |source: io::Error| {
        let hint = match source.raw_os_error() {
            Some(libc::EACCES | libc::EPERM | libc::EROFS) => {
                " (setting the readahead needs root and a writable /sys)"
            }
            _ => "",
        };
        ReadAheadError::Sysfs {
            path: path.display().to_string(),
            source,
            hint,
        }
    };
    let before_kb = read_kb(&path).map_err(sysfs)?;
    std::fs::write(&path, format!("{kb}\n")).map_err(sysfs)?;
    let after_kb = read_kb(&path).map_err(sysfs)?;
    Ok(ReadAhead {
        bdi,
        before_kb,
        after_kb,
    })
}

/// `/sys/class/bdi/MAJ:MIN/read_ahead_kb`.
pub fn sysfs_path(bdi: &str) -> PathBuf {
    Path::new("/sys/class/bdi").join(bdi).join("read_ahead_kb")
}

fn read_kb(path: &Path) -> io::Result<u32> {
    let s = std::fs::read_to_string(path)?;
    s.trim().parse().map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("not a number: {:?}", s.trim()),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        assert_eq!(
            sysfs_path("0:39"),
            Path::new("/sys/class/bdi/0:39/read_ahead_kb")
        );
    }

    #[test]
    fn a_path_that_is_not_a_mount_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let mnt = dir.path().canonicalize().unwrap().join("not-a-mount");
        assert!(matches!(
            set(&mnt, 1024),
            Err(ReadAheadError::NotMounted { mnt: m }) if m.ends_with("not-a-mount")
        ));
    }
}
