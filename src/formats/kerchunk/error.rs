//! What can be wrong with a references file or one of its references.
//!
//! The crate-level [`crate::Error::Format`] carries one of these with
//! the path of the references file; each variant names what it is about
//! (the ref's key, its url, the target file). Errors are `Clone` (I/O and
//! JSON errors are behind an `Arc`) because a ref refused at load time is
//! kept in the store and reported again by every read that asks for it.

use std::path::PathBuf;
use std::sync::Arc;

#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum RefsError {
    /// The file is not JSON at all.
    #[error("not valid JSON: {0}")]
    Json(Arc<serde_json::Error>),
    /// A `"version"` other than 1 next to `"refs"`.
    #[error("reference spec version {0} is not supported (version 0, a bare dict, and 1 are)")]
    Version(String),
    /// The document's structure is wrong (`"refs"` not an object, a
    /// template that is not a string...).
    #[error("{0}")]
    Document(String),
    /// A `gen` entry that cannot be expanded.
    #[error("gen entry {index}: {detail}")]
    Gen { index: usize, detail: String },
    /// A gen section that expands to more references than we hold.
    #[error("gen expands to more than {limit} references")]
    TooMany { limit: u64 },
    /// A reference that is not one of the forms the spec allows, bad
    /// base64, a negative offset, an unknown template...
    #[error("ref {key:?}: {detail}")]
    BadRef { key: String, detail: String },
    /// A url that is not a local file (`s3://`, `http://`, `memory://`...).
    #[error(
        "ref {key:?}: url {url:?} is not a local file (only relative paths, absolute paths and \
         file:// urls can be read, and URLs under an --allow-outside URL)"
    )]
    Scheme { key: String, url: String },
    /// A url that resolves (symlinks and `..` followed) outside every
    /// allowed root.
    #[error(
        "ref {key:?}: url {url:?} resolves to {}, outside the allowed roots ({roots})",
        resolved.display()
    )]
    Outside {
        key: String,
        url: String,
        resolved: PathBuf,
        roots: String,
    },
    /// The target file could not be opened or read (it does not exist,
    /// it kept changing while read...).
    #[error("ref {key:?}: {}: {source}", file.display())]
    Target {
        key: String,
        file: PathBuf,
        #[source]
        source: Arc<std::io::Error>,
    },
    /// A `[url, offset, length]` range that ends past the end of its file.
    #[error(
        "ref {key:?}: {}: bytes {start}..{end} are past the end of the file ({size} bytes)",
        file.display()
    )]
    PastEnd {
        key: String,
        file: PathBuf,
        start: u64,
        end: u64,
        size: u64,
    },
}
