//! Paths inside the mount (`dir/name`, the root is `""`): joining and
//! splitting them. A module of its own so that every part of the
//! filesystem layer (the tree, the archive, georeferencing) can use them
//! without importing one another.

/// `name` inside `dir` (`""` is the root).
pub(super) fn child_path(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

/// The directory `path` is in (`""` for the root's children).
pub(super) fn parent_of(path: &str) -> &str {
    path.rsplit_once('/').map(|(p, _)| p).unwrap_or("")
}

/// The last component of `path`.
pub(super) fn name_of(path: &str) -> &str {
    path.rsplit_once('/').map(|(_, n)| n).unwrap_or(path)
}
