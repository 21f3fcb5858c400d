//! The library's error type.
//!
//! Module-level errors ([`CodecError`]) are typed where they arise; this
//! type adds the context an operator needs (which file, which chunk) and is
//! what the read path returns. The FUSE boundary maps it to one errno with
//! [`Error::errno`].

use crate::codec::CodecError;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An I/O error on a file of a dataset.
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// A stored value (chunk, metadata document) larger than anything the
    /// metadata allows it to be: corrupt or hostile input.
    #[error("{path}: {size} bytes, more than the {limit} bytes it can legitimately hold")]
    TooLarge { path: String, size: u64, limit: u64 },
    /// Metadata that is malformed, inconsistent or unsupported.
    #[error("{path}: {detail}")]
    Metadata { path: String, detail: String },
    /// A chunk that failed to decode.
    #[error("{path}: chunk {chunk}: {source}")]
    Chunk {
        /// The file (or store key) the chunk was read from.
        path: String,
        /// The chunk's grid coordinates, e.g. `[0, 3]`.
        chunk: String,
        #[source]
        source: CodecError,
    },
    /// A name that does not exist in a dataset.
    #[error("{0}: no such array")]
    NotFound(String),
    /// An aggregation (NCA descriptor) that is malformed, or a partition
    /// of it that could not be read. `path` is the descriptor and variable
    /// (boxed: the aggregation errors are large, the common ones small).
    #[error("{path}: {source}")]
    Aggregation {
        path: String,
        #[source]
        source: Box<crate::nca::NcaError>,
    },
    /// A kerchunk references file that cannot be read, or one of its
    /// references (refused, or its target unreadable). `path` is the
    /// references file; the error names the ref and target (boxed: it
    /// is large and this type travels in every `Result` of the read path).
    #[error("{path}: {source}")]
    References {
        path: String,
        #[source]
        source: Box<crate::kerchunk::RefsError>,
    },
}

impl Error {
    pub fn metadata(path: impl Into<String>, detail: impl Into<String>) -> Error {
        Error::Metadata {
            path: path.into(),
            detail: detail.into(),
        }
    }

    /// The errno a FUSE reply carries for this error.
    pub fn errno(&self) -> i32 {
        match self {
            // A missing name is the only error that is not the data's fault.
            Error::NotFound(_) => libc_errno::ENOENT,
            // Everything else means the bytes cannot be produced: the
            // classic "the device could not deliver this block".
            Error::Io { .. }
            | Error::TooLarge { .. }
            | Error::Metadata { .. }
            | Error::Chunk { .. }
            | Error::Aggregation { .. }
            | Error::References { .. } => libc_errno::EIO,
        }
    }
}

/// The two errno values the library needs, without a libc dependency.
mod libc_errno {
    pub const ENOENT: i32 = 2;
    pub const EIO: i32 = 5;
}

/// The message of a caught panic (`panic!("...")` carries a `&str` or a
/// `String`), for the log line of a request or job that panicked.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}
