//! The library's error type.
//!
//! The base of the crate: it imports nothing above it. Each layer types
//! its own errors where they arise (`codec::CodecError`,
//! `formats::nca::NcaError`, `formats::kerchunk::RefsError`...); this type
//! adds the context an operator needs (which file, which chunk) and is what
//! the read path returns. It carries those lower errors as boxed
//! `dyn Error` sources, so it never names a type of a layer above it; a
//! caller that needs the typed error back asks [`Error::source_as`]. It
//! carries no errno: the FUSE boundary chooses one, in one place
//! (`fs::error`), from the variant (an I/O error's `io::Error`, with its
//! kind and raw OS code, travels inside [`Error::Io`] as data).

/// An I/O error in words, as a sentence goes on: "no such file or
/// directory", not std's "No such file or directory (os error 2)" (the
/// number says nothing to a user; an errno name is in `errno(3)`). Errors
/// that are not the OS's keep their text.
pub fn os_words(e: &std::io::Error) -> String {
    let text = e.to_string();
    let Some(code) = e.raw_os_error() else {
        return text;
    };
    let words = text
        .strip_suffix(&format!(" (os error {code})"))
        .unwrap_or(&text);
    let mut chars = words.chars();
    match chars.next() {
        // "No such file", "Permission denied": lower-case mid-sentence,
        // but not an initialism ("EIO"-like words stay as they are).
        Some(c) if chars.clone().next().is_some_and(|n| n.is_lowercase()) => {
            c.to_lowercase().chain(chars).collect()
        }
        _ => words.to_string(),
    }
}

/// A typed error of some layer, carried as the source of an [`Error`].
pub type BoxedSource = Box<dyn std::error::Error + Send + Sync + 'static>;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An I/O error on a file of a dataset.
    #[error("{path}: {}", os_words(source))]
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
        /// The codec's error (a `codec::CodecError`, or the container's
        /// own complaint about a corrupt chunk).
        #[source]
        source: BoxedSource,
    },
    /// A name that does not exist in a dataset.
    #[error("{0}: no such array")]
    NotFound(String),
    /// An error typed by the format that found it: a malformed aggregation
    /// (NCA descriptor) or a partition of it that could not be read, a
    /// kerchunk references file or one of its references... `path` is the
    /// file (and variable) it is about; the source says what is wrong
    /// (boxed: format errors are large and this type travels in every
    /// `Result` of the read path).
    #[error("{path}: {source}")]
    Format {
        path: String,
        #[source]
        source: BoxedSource,
    },
}

impl Error {
    pub fn metadata(path: impl Into<String>, detail: impl Into<String>) -> Error {
        Error::Metadata {
            path: path.into(),
            detail: detail.into(),
        }
    }

    /// The typed error of [`Error::Format`] by value when it is an `E`,
    /// else this error back.
    pub fn into_source<E: std::error::Error + 'static>(self) -> std::result::Result<E, Error> {
        match self {
            Error::Format { path, source } => source
                .downcast::<E>()
                .map(|e| *e)
                .map_err(|source| Error::Format { path, source }),
            other => Err(other),
        }
    }

    /// The typed error this one carries, if it is an `E`: the format error
    /// of [`Error::Format`], the codec error of [`Error::Chunk`].
    pub fn source_as<E: std::error::Error + 'static>(&self) -> Option<&E> {
        match self {
            Error::Format { source, .. } | Error::Chunk { source, .. } => source.downcast_ref(),
            _ => None,
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_errors_read_as_words() {
        let e = std::io::Error::from_raw_os_error(libc::ENOENT);
        assert_eq!(os_words(&e), "no such file or directory");
        let e = std::io::Error::from_raw_os_error(libc::EACCES);
        assert_eq!(os_words(&e), "permission denied");
        let e = std::io::Error::other("Custom text");
        assert_eq!(os_words(&e), "Custom text");
        let io = Error::Io {
            path: "/data/a.nc".into(),
            source: std::io::Error::from_raw_os_error(libc::ENOENT),
        };
        assert_eq!(io.to_string(), "/data/a.nc: no such file or directory");
    }
}
