//! What can go wrong with an NcML file, typed.
//!
//! Every variant names where: the line and column of the element in the
//! NcML file, the member file, the variable. The NcML file's own path is
//! added by [`crate::Error::Format`] ([`NcmlError::at`]), which is how
//! these reach a listing's skipped datasets and the read path (EIO at the
//! mount).

use crate::error::Error;

/// A place in the NcML text: 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Pos {
    pub line: u32,
    pub col: u32,
}

impl std::fmt::Display for Pos {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}, column {}", self.line, self.col)
    }
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NcmlError {
    /// Not well-formed XML (the parser's message carries the position).
    #[error("not well-formed XML: {0}")]
    Xml(String),
    /// Well-formed, but not NcML (another root element, a wrong value).
    #[error("{pos}: {detail}")]
    Invalid { pos: Pos, detail: String },
    /// An element or attribute of NcML that slabfs does not serve: the
    /// whole file is skipped, never served in part.
    #[error("{pos}: <{element}> is not supported{why}")]
    Unsupported {
        pos: Pos,
        element: String,
        why: String,
    },
    /// A member (a `<netcdf location>` or a scanned file) that does not
    /// fit the aggregation: another dtype or shape, no such variable.
    #[error("member {member}: {detail}")]
    Member { member: String, detail: String },
    /// A location outside the allowed roots, or of a scheme slabfs does
    /// not read.
    #[error("{pos}: location {location}: {detail}")]
    Location {
        pos: Pos,
        location: String,
        detail: String,
    },
    /// NcML files that (indirectly) include themselves.
    #[error("NcML cycle: {0}")]
    Cycle(String),
}

impl NcmlError {
    pub(crate) fn invalid(pos: Pos, detail: impl Into<String>) -> NcmlError {
        NcmlError::Invalid {
            pos,
            detail: detail.into(),
        }
    }

    pub(crate) fn member(member: impl Into<String>, detail: impl Into<String>) -> NcmlError {
        NcmlError::Member {
            member: member.into(),
            detail: detail.into(),
        }
    }

    /// Attach the NcML file (`"agg.ncml"`, `"agg.ncml: tas"`).
    pub(crate) fn at(self, path: impl Into<String>) -> Error {
        Error::Format {
            path: path.into(),
            source: Box::new(self),
        }
    }
}
