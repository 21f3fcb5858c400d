//! Errors of the filesystem core and the one place they become errnos.
//!
//! Every request the core refuses or fails returns an [`FsError`]; the FUSE
//! adapter hands it to one helper that logs it at [`FsError::level`] and
//! replies [`FsError::errno`]. The library's errors ([`LibError`], which
//! every layer below returns, typed and errno-free) get theirs here too,
//! from [`ToErrno`]: no other file of the crate chooses an errno. Both
//! matches are exhaustive on purpose: a new variant must decide what the
//! kernel is told.

use crate::error::Error as LibError;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FsError {
    /// An inode number the core never handed out (or one from before a
    /// remount that the kernel still remembers).
    #[error("no inode {0}")]
    NoInode(u64),
    /// A name that is not in its directory.
    #[error("{0}: no such file or directory")]
    NotFound(String),
    /// A directory operation on a file.
    #[error("{0}: not a directory")]
    NotDir(String),
    /// A file operation on a directory.
    #[error("{0}: is a directory")]
    IsDir(String),
    /// Anything that would change the filesystem: writes, creates, renames,
    /// truncation, setattr, setxattr, an open for writing.
    #[error("{op}: read-only filesystem")]
    ReadOnly { op: &'static str },
    /// An extended attribute the node does not have.
    #[error("{path}: no attribute {name:?}")]
    NoXattr { path: String, name: String },
    /// The caller's buffer is too small for the attribute value or list.
    #[error("{path}: attribute of {len} bytes does not fit a {size}-byte buffer")]
    XattrRange { path: String, len: usize, size: u32 },
    /// The bytes of a range of an array file could not be produced. The
    /// library error names the store file and chunk (boxed: it is large and
    /// every other result of the core is small).
    #[error("{path} offset {offset} size {size}: {source}")]
    Read {
        path: String,
        offset: u64,
        size: u32,
        #[source]
        source: Box<LibError>,
    },
    /// The dataset at `path` (a mount path) of an archive could not be
    /// opened: everything inside it fails until it opens.
    #[error("/{path}: the dataset could not be opened: {source}")]
    Dataset {
        path: String,
        #[source]
        source: Box<LibError>,
    },
    /// A directory of the archive could not be listed.
    #[error("/{path}: the directory could not be listed: {source}")]
    List {
        path: String,
        #[source]
        source: Box<LibError>,
    },
}

pub type FsResult<T> = Result<T, FsError>;

impl FsError {
    /// A failed read of `size` bytes at `offset` of the file at `path`.
    pub fn read(path: &str, offset: u64, size: u32, source: LibError) -> Self {
        FsError::Read {
            path: path.to_string(),
            offset,
            size,
            source: Box::new(source),
        }
    }

    /// The errno the kernel (and so the caller's syscall) gets.
    pub fn errno(&self) -> i32 {
        match self {
            // A stale inode number: the kernel treats ENOENT as "gone".
            FsError::NoInode(_) | FsError::NotFound(_) => libc::ENOENT,
            FsError::NotDir(_) => libc::ENOTDIR,
            FsError::IsDir(_) => libc::EISDIR,
            FsError::ReadOnly { .. } => libc::EROFS,
            // ENODATA is Linux's ENOATTR, what getfattr expects.
            FsError::NoXattr { .. } => libc::ENODATA,
            FsError::XattrRange { .. } => libc::ERANGE,
            // EIO for anything that means "these bytes cannot be
            // delivered", ENOENT for a vanished array: [`ToErrno`].
            FsError::Read { source, .. } => source.errno(),
            // The dataset or directory is there; what it holds cannot be
            // shown (ENOENT would say it is gone).
            FsError::Dataset { .. } | FsError::List { .. } => libc::EIO,
        }
    }

    /// How loudly to log it. Lookups of absent names, probes for xattrs and
    /// attempts to write are routine (shells, editors and file managers do
    /// them all the time): debug. A read that fails is a data problem an
    /// operator must see: error.
    pub fn level(&self) -> log::Level {
        match self {
            FsError::NotFound(_)
            | FsError::NotDir(_)
            | FsError::IsDir(_)
            | FsError::ReadOnly { .. }
            | FsError::NoXattr { .. }
            | FsError::XattrRange { .. } => log::Level::Debug,
            FsError::NoInode(_) => log::Level::Warn,
            FsError::Read { .. } => log::Level::Error,
            // The open already warned, naming the file (once an hour).
            FsError::Dataset { .. } => log::Level::Debug,
            FsError::List { .. } => log::Level::Warn,
        }
    }
}

/// The errno a library error becomes at the mount. A trait (rather than a
/// method of [`LibError`]) so that the errno is chosen here, at the FUSE
/// boundary, and the layers below stay errno-free; tests of the read path
/// import it to pin what a caller's syscall gets.
pub trait ToErrno {
    fn errno(&self) -> i32;
}

impl ToErrno for LibError {
    fn errno(&self) -> i32 {
        match self {
            // A missing name is the only error that is not the data's fault.
            LibError::NotFound(_) => libc::ENOENT,
            // Everything else means the bytes cannot be produced: the
            // classic "the device could not deliver this block". An I/O
            // error keeps its own kind and OS code in the log line, but
            // the caller is told EIO whatever it was: ENOENT from a chunk
            // file that vanished, EACCES from one refused by confinement,
            // would tell the caller the *array file* is missing or
            // forbidden, which it is not.
            LibError::Io { .. }
            | LibError::TooLarge { .. }
            | LibError::Metadata { .. }
            | LibError::Chunk { .. }
            | LibError::Format { .. } => libc::EIO,
        }
    }
}

/// The error and every cause in its source chain that its message does not
/// already include, joined by ": " (library errors embed their cause in
/// their message; I/O errors wrapped elsewhere may not).
pub fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut cause = err.source();
    while let Some(c) = cause {
        let msg = c.to_string();
        if !text.contains(&msg) {
            text.push_str(": ");
            text.push_str(&msg);
        }
        cause = c.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errnos() {
        assert_eq!(FsError::NotFound("x".into()).errno(), libc::ENOENT);
        assert_eq!(FsError::ReadOnly { op: "write" }.errno(), libc::EROFS);
        let read = FsError::Read {
            path: "a/b".into(),
            offset: 4096,
            size: 131072,
            source: Box::new(LibError::metadata("store/c/0", "truncated")),
        };
        assert_eq!(read.errno(), libc::EIO);
        assert_eq!(read.level(), log::Level::Error);
        let msg = chain(&read);
        assert!(
            msg.contains("a/b") && msg.contains("4096") && msg.contains("store/c/0"),
            "{msg}"
        );
        // The cause is already in the message: not repeated.
        assert_eq!(msg.matches("truncated").count(), 1, "{msg}");
    }

    /// Every library error's errno, pinned here where it is chosen (the
    /// storage and format tests pin the typed error they expect).
    #[test]
    fn library_errnos() {
        let io = |kind| LibError::Io {
            path: "f".into(),
            source: std::io::Error::from(kind),
        };
        // An I/O error is EIO whatever its kind or OS code.
        assert_eq!(io(std::io::ErrorKind::Other).errno(), libc::EIO);
        assert_eq!(io(std::io::ErrorKind::NotFound).errno(), libc::EIO);
        assert_eq!(io(std::io::ErrorKind::PermissionDenied).errno(), libc::EIO);
        let os = LibError::Io {
            path: "f".into(),
            source: std::io::Error::from_raw_os_error(libc::ENOENT),
        };
        assert_eq!(os.errno(), libc::EIO);
        let too_large = LibError::TooLarge {
            path: "f".into(),
            size: 2,
            limit: 1,
        };
        assert_eq!(too_large.errno(), libc::EIO);
        assert_eq!(LibError::metadata("f", "bad").errno(), libc::EIO);
        let chunk = LibError::Chunk {
            path: "f".into(),
            chunk: "[0]".into(),
            source: "corrupt".into(),
        };
        assert_eq!(chunk.errno(), libc::EIO);
        let format = LibError::Format {
            path: "f".into(),
            source: "bad".into(),
        };
        assert_eq!(format.errno(), libc::EIO);
        assert_eq!(LibError::NotFound("a".into()).errno(), libc::ENOENT);
    }
}
