//! Confinement: which files a dataset may read.
//!
//! An aggregation or a references file names files by path, and whoever wrote the descriptor
//! is not necessarily trusted with the whole machine: a mount of
//! `/data/shared` must not serve `/etc/shadow` because a descriptor there
//! says `"file": "../../etc/shadow"` or points a symlink at it. So every
//! referenced file is resolved the way the kernel will resolve it (the
//! deepest existing ancestor canonicalised, which follows symlinks and
//! `..`, the rest applied lexically) and must lie under one of the
//! allowed roots (canonicalised too). By default the root is the mounted
//! SOURCE (the directory holding the descriptor when one is opened
//! directly); `--allow-outside` adds more.
//!
//! A file that does not exist yet is resolved through its deepest
//! existing ancestor, so a reference outside the roots is refused even
//! when its target is missing. The check runs again when a missing
//! fragment is opened later (a symlink may have appeared in between).
//!
//! Being under a root is not enough: only regular files and directories
//! on ordinary file systems are ever data. A device (`/dev/zero` never
//! ends, `/dev/urandom` is not data), a FIFO (opening one blocks until a
//! writer comes, hanging the read) or a socket, and anything on the
//! kernel's pseudo file systems (`/proc/self/environ` is the daemon's
//! environment; sysfs, debugfs, cgroup...), are refused even when an
//! allowed root covers them (`--allow-outside /` included).
//!
//! This file is the policy alone: it decides, it never opens a file.
//! [`super::descriptors::open_confined`] is the race-free way to read a
//! checked file: it opens without blocking, then asks
//! [`Roots::judge_opened`] about the file it actually got (its type, and
//! its path through `/proc/self/fd`), so a symlink or FIFO swapped in
//! between the check and the open is caught too. docs/SECURITY.md states
//! the guarantees and the tests that back them.

use std::io;
use std::os::unix::fs::FileTypeExt;
use std::path::{Component, Path, PathBuf};

/// The directories an aggregation may read from, canonicalised.
#[derive(Debug, Clone, Default)]
pub struct Roots(Vec<PathBuf>);

impl Roots {
    /// Canonicalise `roots`; a root that does not exist is dropped (it
    /// cannot contain anything) with a warning.
    pub fn new(roots: impl IntoIterator<Item = PathBuf>) -> Roots {
        let mut seen = std::collections::HashSet::new();
        Roots(
            roots
                .into_iter()
                // "" is what `Path::parent` gives for a bare file name.
                .map(|r| {
                    if r.as_os_str().is_empty() {
                        PathBuf::from(".")
                    } else {
                        r
                    }
                })
                // A URL is no local root: remote reads are confined by
                // their own locations (storage::location), not here.
                .filter(|r| !r.to_str().is_some_and(crate::storage::location::is_url))
                .filter_map(|r| match r.canonicalize() {
                    Ok(c) => Some(c),
                    Err(e) => {
                        log::warn!("allowed root {}: {e}; ignored", r.display());
                        None
                    }
                })
                // One root given twice (a descriptor's directory that is
                // also the source) is one root, named once in messages.
                .filter(|c| seen.insert(c.clone()))
                .collect(),
        )
    }

    /// Whether there is no root at all (nothing local may be read).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Where `path` really points, if that is under a root and is not
    /// special (see the module doc; a path that does not exist is not).
    pub fn check(&self, path: &Path) -> Result<PathBuf, PathBuf> {
        let real = resolve(path);
        if self.0.iter().any(|r| real.starts_with(r)) && special(&real).is_none() {
            Ok(real)
        } else {
            Err(real)
        }
    }

    /// The roots, for messages (which say "outside the allowed roots
    /// (...)", so the rule for special files is spelled out too).
    pub fn describe(&self) -> String {
        let roots = if self.0.is_empty() {
            "none".to_string()
        } else {
            self.0
                .iter()
                .map(|r| r.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!("{roots}; devices, FIFOs, sockets and /proc, /sys files never are")
    }

    /// Whether the file opened for the checked path `real` may be read,
    /// now that it is known to be at `opened`. Another path than the one
    /// checked, outside the roots or special: a component was swapped
    /// between the check and the open (refused), or the file was renamed
    /// out of the roots, or deleted, meanwhile. In the last case `real`
    /// is gone and the answer is "not found", as it would have been a
    /// moment later: a dataset moved away mid-read is ENOENT for the
    /// reader, not a refusal. Either way nothing is read.
    pub fn judge_opened(&self, real: &Path, opened: &Path) -> io::Result<()> {
        if opened == real
            || (self.0.iter().any(|r| opened.starts_with(r)) && special(opened).is_none())
        {
            return Ok(());
        }
        match std::fs::symlink_metadata(real) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{} was moved or removed while being opened", real.display()),
            )),
            _ => Err(self.refused(opened)),
        }
    }

    /// The error refusing `real`: `PermissionDenied`, saying why.
    pub fn refused(&self, real: &Path) -> io::Error {
        io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "resolves to {}, outside the allowed roots ({})",
                real.display(),
                self.describe()
            ),
        )
    }
}

/// Why the existing file `real` (canonical) can never be read as data,
/// if it cannot: a device, FIFO or socket, or a file of one of the
/// kernel's pseudo file systems. `None` also for a path that does not
/// exist (reading it will fail on its own; it is checked again then).
pub fn special(real: &Path) -> Option<&'static str> {
    let meta = std::fs::metadata(real).ok()?;
    let ft = meta.file_type();
    if ft.is_char_device() || ft.is_block_device() {
        return Some("a device");
    }
    if ft.is_fifo() {
        return Some("a FIFO");
    }
    if ft.is_socket() {
        return Some("a socket");
    }
    // /proc and /sys by their usual places, and by file system type
    // wherever they (or their kin) are mounted.
    if real.starts_with("/proc") || real.starts_with("/sys") {
        return Some("a kernel pseudo file");
    }
    let c = std::ffi::CString::new(real.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: `c` is a valid NUL-terminated path and `st` a plain struct
    // the call fills in.
    let st = unsafe {
        let mut st: libc::statfs = std::mem::zeroed();
        if libc::statfs(c.as_ptr(), &mut st) != 0 {
            return None;
        }
        st
    };
    // <linux/magic.h>: proc, sysfs, debugfs, tracefs, securityfs,
    // cgroup, cgroup2, bpf, configfs, efivarfs, pstore.
    // The magics are 32-bit; `f_type`'s width differs between targets.
    const PSEUDO: [u32; 11] = [
        0x9fa0,
        0x6265_6572,
        0x6462_6720,
        0x7472_6163,
        0x7363_6673,
        0x0027_e0eb,
        0x6367_7270,
        0xcafe_4a11,
        0x6265_6570,
        0xde5e_81e4,
        0x6165_676c,
    ];
    PSEUDO
        .contains(&(st.f_type as u32))
        .then_some("a kernel pseudo file")
}

/// Resolve `path` as the kernel would: canonicalise its deepest existing
/// ancestor, then apply the remaining components lexically.
pub fn resolve(path: &Path) -> PathBuf {
    if let Ok(c) = path.canonicalize() {
        return c;
    }
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    };
    // Find the deepest existing ancestor.
    let comps: Vec<Component> = absolute.components().collect();
    let mut base = PathBuf::new();
    let mut rest = comps.len();
    for k in (0..=comps.len()).rev() {
        let candidate: PathBuf = comps[..k].iter().collect();
        if let Ok(c) = candidate.canonicalize() {
            base = c;
            rest = k;
            break;
        }
    }
    for c in &comps[rest..] {
        match c {
            Component::ParentDir => {
                base.pop();
            }
            Component::CurDir => {}
            Component::Normal(n) => base.push(n),
            Component::RootDir | Component::Prefix(_) => {}
        }
    }
    base
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_given_twice_is_named_once() {
        let tmp = tempfile::tempdir().unwrap();
        let roots = Roots::new([tmp.path().to_path_buf(), tmp.path().join(".")]);
        let real = tmp.path().canonicalize().unwrap();
        assert_eq!(
            roots.describe(),
            format!(
                "{}; devices, FIFOs, sockets and /proc, /sys files never are",
                real.display()
            )
        );
    }

    #[test]
    fn dotdot_and_symlinks_are_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(tmp.path().join("secret"), b"x").unwrap();
        std::fs::write(root.join("sub/ok"), b"x").unwrap();
        std::os::unix::fs::symlink(tmp.path().join("secret"), root.join("link")).unwrap();
        let roots = Roots::new([root.clone()]);
        assert!(roots.check(&root.join("sub/../sub/ok")).is_ok());
        assert!(roots.check(&root.join("sub/../../secret")).is_err());
        assert!(roots.check(&root.join("link")).is_err());
        // Missing files resolve through their existing ancestors.
        assert!(roots.check(&root.join("sub/missing.nc")).is_ok());
        assert!(roots.check(&root.join("nope/../../x/missing.nc")).is_err());
        assert!(roots.check(&root.join("nope/deeper/../missing.nc")).is_ok());
    }

    /// Regression (a rare failure of tests/it/soak.rs): a file renamed out of
    /// the roots between the check and the open was refused (EIO at the
    /// mount) instead of being not found (ENOENT). The judgement after the
    /// open, for a file that turned out to be outside: "not found" when
    /// the checked path is gone, refused when it is still there (a
    /// component was swapped: the path leads elsewhere than what was
    /// opened).
    #[test]
    fn a_file_moved_out_while_opened_is_not_found() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        std::fs::create_dir(&root).unwrap();
        let outside = tmp.path().join("moved.nc");
        std::fs::write(&outside, b"x").unwrap();
        let roots = Roots::new([root.clone()]);
        let gone = root.join("data.nc");
        let e = roots.judge_opened(&gone, &outside).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
        std::fs::write(&gone, b"y").unwrap();
        let e = roots.judge_opened(&gone, &outside).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
        assert!(roots.judge_opened(&gone, &gone).is_ok());
    }
}
