//! What can be wrong with an HDF5 file, typed.
//!
//! Every variant names the structure it is about (`object header at
//! 0x1a0`, `v1 B-tree node at 0x2c8 of dataset /grp/temp`...); the file's
//! path is added by the [`crate::error::Error::Format`] that carries it.

use std::sync::Arc;

#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Hdf5Error {
    /// No `\x89HDF\r\n\x1a\n` at offset 0, 512, 1024, 2048...
    #[error("no HDF5 signature at offset 0 or at any power of two from 512 within the file")]
    NoSignature,
    /// A structure that ends before its own fields do.
    #[error("{what}: truncated ({needed} bytes needed, {have} present)")]
    Truncated {
        what: String,
        needed: u64,
        have: u64,
    },
    /// An address or length that points past the end of the file.
    #[error(
        "{what}: bytes {offset}..{end} lie past the end of the file ({file_len} bytes): \
         it is truncated or corrupt"
    )]
    PastEof {
        what: String,
        offset: u64,
        end: u64,
        file_len: u64,
    },
    /// A field whose value contradicts the format.
    #[error("{what}: {detail}")]
    Corrupt { what: String, detail: String },
    /// A checksum that does not match the bytes it covers.
    #[error("{what}: checksum mismatch (stored {stored:#010x}, computed {computed:#010x})")]
    Checksum {
        what: String,
        stored: u32,
        computed: u32,
    },
    /// Valid HDF5 that this reader does not read (yet).
    #[error("{what}: {detail} (not supported yet)")]
    Unsupported { what: String, detail: String },
    /// A dataset whose element type a flat file of fixed-size numbers
    /// cannot carry.
    #[error(
        "{what}: its type is {class} ({size}-byte elements), which a flat file of fixed-size \
         numbers or bytes cannot carry"
    )]
    NotFlat {
        what: String,
        class: &'static str,
        size: usize,
    },
    /// An object header message of a type the format does not define,
    /// flagged "fail if unknown always": HDF5 refuses the object too.
    #[error(
        "{what}: header message type {kind:#06x} is unknown and flagged 'fail if unknown \
         always' (HDF5 refuses to open the object too)"
    )]
    UnknownMessage { what: String, kind: u16 },
    /// A dataset whose dataspace is null (`H5S_NULL`, h5py's `Empty`).
    #[error("{what}: a null dataspace: no shape and no elements, nothing to serve")]
    NullDataspace { what: String },
    /// A structure claiming more bytes than any real file writes.
    #[error("{what}: {size} bytes, more than the {limit}-byte limit for it")]
    TooLarge { what: String, size: u64, limit: u64 },
    /// A file of a dataset's external storage that cannot serve the
    /// bytes asked for (missing, refused, too short).
    #[error("{what}: external data file {file}: {reason}")]
    External {
        what: String,
        file: String,
        reason: String,
    },
    #[error("{what}: {}", crate::error::os_words(source))]
    Io {
        what: String,
        #[source]
        source: Arc<std::io::Error>,
    },
}

impl Hdf5Error {
    pub fn corrupt(what: impl Into<String>, detail: impl Into<String>) -> Hdf5Error {
        Hdf5Error::Corrupt {
            what: what.into(),
            detail: detail.into(),
        }
    }

    pub fn unsupported(what: impl Into<String>, detail: impl Into<String>) -> Hdf5Error {
        Hdf5Error::Unsupported {
            what: what.into(),
            detail: detail.into(),
        }
    }

    /// The same error about `outer`'s `what` (`"dataset /x: " + what`).
    pub fn within(self, outer: &str) -> Hdf5Error {
        let wrap = |w: String| format!("{outer}: {w}");
        match self {
            Hdf5Error::NoSignature => Hdf5Error::NoSignature,
            Hdf5Error::Truncated { what, needed, have } => Hdf5Error::Truncated {
                what: wrap(what),
                needed,
                have,
            },
            Hdf5Error::PastEof {
                what,
                offset,
                end,
                file_len,
            } => Hdf5Error::PastEof {
                what: wrap(what),
                offset,
                end,
                file_len,
            },
            Hdf5Error::Corrupt { what, detail } => Hdf5Error::Corrupt {
                what: wrap(what),
                detail,
            },
            Hdf5Error::Checksum {
                what,
                stored,
                computed,
            } => Hdf5Error::Checksum {
                what: wrap(what),
                stored,
                computed,
            },
            Hdf5Error::Unsupported { what, detail } => Hdf5Error::Unsupported {
                what: wrap(what),
                detail,
            },
            Hdf5Error::NotFlat { what, class, size } => Hdf5Error::NotFlat {
                what: wrap(what),
                class,
                size,
            },
            Hdf5Error::UnknownMessage { what, kind } => Hdf5Error::UnknownMessage {
                what: wrap(what),
                kind,
            },
            Hdf5Error::NullDataspace { what } => Hdf5Error::NullDataspace { what: wrap(what) },
            Hdf5Error::TooLarge { what, size, limit } => Hdf5Error::TooLarge {
                what: wrap(what),
                size,
                limit,
            },
            Hdf5Error::External { what, file, reason } => Hdf5Error::External {
                what: wrap(what),
                file,
                reason,
            },
            Hdf5Error::Io { what, source } => Hdf5Error::Io {
                what: wrap(what),
                source,
            },
        }
    }
}

pub type H5Result<T> = std::result::Result<T, Hdf5Error>;
