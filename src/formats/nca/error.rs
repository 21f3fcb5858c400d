//! What can go wrong with an aggregation, typed.
//!
//! Every variant names what an operator needs to fix the descriptor: the
//! key (`Partitions[3].location`), the partition (`Partitions[3]`, its
//! position in the descriptor's list, with its matrix index), the fragment
//! file, both unit strings. The descriptor file and variable are added by
//! [`crate::Error::Format`], which is how these reach the read path
//! (and EIO at the mount).

use crate::error::Error;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NcaError {
    /// The descriptor (or an `nca_array` attribute) is not JSON.
    #[error("not valid JSON: {0}")]
    Json(String),
    /// A required key is absent.
    #[error("missing {0}")]
    Missing(String),
    /// A key whose value is of the wrong type, out of range or unsupported.
    #[error("{at}: {detail}")]
    Invalid { at: String, detail: String },
    /// Two partitions claim the same element of the master array.
    #[error("{first} and {second} overlap (both cover master index {at:?})")]
    Overlap {
        first: String,
        second: String,
        at: Vec<u64>,
    },
    /// A referenced file resolves (symlinks and `..` followed) outside
    /// every allowed root.
    #[error("{partition}: {path} is outside the allowed roots ({roots})")]
    OutsideRoot {
        partition: String,
        path: String,
        roots: String,
    },
    /// Units that slabfs cannot convert (see [`super::units`]).
    #[error("{partition}: cannot convert units {from:?} to the master's {to:?}: {detail}")]
    Units {
        partition: String,
        from: String,
        to: String,
        detail: String,
    },
    /// A fragment that does not fit its partition: shape, rank, dtype.
    #[error("{partition} ({file}): {detail}")]
    Mismatch {
        partition: String,
        file: String,
        detail: String,
    },
    /// An aggregation that (indirectly) references itself.
    #[error("aggregation cycle: {0}")]
    Cycle(String),
    /// Aggregations nested deeper than the limit.
    #[error("aggregations nested more than {0} levels deep")]
    TooDeep(usize),
    /// A fragment that could not be opened or read (a missing file, an
    /// I/O error, a corrupt chunk): the underlying error names the file.
    #[error("{partition} ({file}): {source}")]
    Fragment {
        partition: String,
        file: String,
        #[source]
        source: Box<Error>,
    },
}

impl NcaError {
    pub(crate) fn invalid(at: impl Into<String>, detail: impl Into<String>) -> NcaError {
        NcaError::Invalid {
            at: at.into(),
            detail: detail.into(),
        }
    }

    /// Attach the descriptor file and variable (`"agg.nca.json: tas"`).
    pub(crate) fn at(self, path: impl Into<String>) -> Error {
        Error::Format {
            path: path.into(),
            source: Box::new(self),
        }
    }
}
