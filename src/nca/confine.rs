//! Confinement: which files an aggregation may read.
//!
//! An aggregation names files by path, and whoever wrote the descriptor
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

use std::path::{Component, Path, PathBuf};

/// The directories an aggregation may read from, canonicalised.
#[derive(Debug, Clone, Default)]
pub struct Roots(Vec<PathBuf>);

impl Roots {
    /// Canonicalise `roots`; a root that does not exist is dropped (it
    /// cannot contain anything) with a warning.
    pub fn new(roots: impl IntoIterator<Item = PathBuf>) -> Roots {
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
                .filter_map(|r| match r.canonicalize() {
                    Ok(c) => Some(c),
                    Err(e) => {
                        log::warn!("allowed root {}: {e}; ignored", r.display());
                        None
                    }
                })
                .collect(),
        )
    }

    /// Where `path` really points, if that is under a root.
    pub fn check(&self, path: &Path) -> Result<PathBuf, PathBuf> {
        let real = resolve(path);
        if self.0.iter().any(|r| real.starts_with(r)) {
            Ok(real)
        } else {
            Err(real)
        }
    }

    /// The roots, for messages.
    pub fn describe(&self) -> String {
        if self.0.is_empty() {
            return "none".into();
        }
        self.0
            .iter()
            .map(|r| r.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }
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

/// The path a descriptor's `file` names: relative to the descriptor's
/// directory, or absolute; a `file://` URI is accepted as its path.
pub fn reference(base_dir: &Path, file: &str) -> PathBuf {
    let file = file.strip_prefix("file://").unwrap_or(file);
    let p = Path::new(file);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base_dir.join(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(
            reference(Path::new("/a/b"), "file:///c/d.nc"),
            PathBuf::from("/c/d.nc")
        );
        assert_eq!(
            reference(Path::new("/a/b"), "d.nc"),
            PathBuf::from("/a/b/d.nc")
        );
    }
}
