//! External storage: a contiguous dataset whose raw data lives in other
//! files (the External Data Files message, type 0x0007; spec IV.A.2.h;
//! h5py's `create_dataset(..., external=[(name, offset, size), ...])`,
//! `H5Pset_external`).
//!
//! The message holds the address of a local heap of file names, then one
//! slot per file: (name offset in the heap, offset in the file, size).
//! The dataset's bytes are the slots' bytes in order: the first `size`
//! bytes from the first file at its offset, the next from the second...
//! A size of `H5F_UNLIMITED` (all bits set) means "to the end of the
//! data" and may only be the last slot.
//!
//! # Where the files are, and what may be read
//!
//! A name is resolved as every other reference a file makes
//! ([`crate::storage::scope::Scope`]): relative to the HDF5 file's
//! directory (HDF5 itself resolves relative names against the process's
//! current directory unless `H5Pset_efile_prefix` says otherwise, which
//! a daemon cannot honour; h5py users write them beside the file), an
//! absolute path as is, and it must lie under the roots the mount allows.
//! The files are opened when the HDF5 file is loaded, as the file itself
//! is (opening is where a file is fixed: [`crate::storage::contract`]). One
//! that cannot be opened then is not remembered as failed: each read that
//! needs it tries again (it may have appeared since), and the first open
//! that succeeds is kept.
//!
//! # Failures are errors, never zeros
//!
//! HDF5 reads zeros where a data file is shorter than its slot; slabfs
//! does not: a read that touches a slot whose file is missing, refused
//! (outside the roots) or too short, or bytes past the last slot, fails
//! with an error naming the file (EIO in the mount, with a log line), and
//! the other reads of the dataset are served.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::error::{H5Result, Hdf5Error};
use super::index::{heap_string, local_heap};
use super::io::H5File;
use crate::storage::scope::{Refusal, Scope};
use crate::storage::{Files, ReadAt};

/// The External Data Files message type.
pub const MSG_EXTERNAL: u16 = 0x0007;

/// One slot of the message: `size` bytes of the file `name` from
/// `offset`; `size` `None` for `H5F_UNLIMITED` (to the end of the data).
#[derive(Debug, Clone, PartialEq)]
pub struct Slot {
    pub name: String,
    pub offset: u64,
    pub size: Option<u64>,
}

/// Decode the message `data` (version 1, the only one): its slots, names
/// read from the local heap.
pub fn slots(f: &H5File, data: &[u8], what: &str) -> H5Result<Vec<Slot>> {
    let mut c = f.cursor(data, what);
    let version = c.u8()?;
    if version != 1 {
        return Err(Hdf5Error::unsupported(
            what,
            format!("external data files message version {version}"),
        ));
    }
    c.skip(3)?; // reserved
    c.u16()?; // allocated slots
    let used = c.u16()? as usize;
    let heap = c.addr()?;
    let names = local_heap(f, heap, what)?;
    // H5F_UNLIMITED is all bits of a length set.
    let unlimited = match f.sizeof_len {
        8 => u64::MAX,
        n => (1u64 << (8 * n as u32)) - 1,
    };
    let mut out = Vec::with_capacity(used.min(1024));
    for i in 0..used {
        let name_offset = c.length()?;
        let offset = c.length()?;
        let size = c.length()?;
        let name = heap_string(&names, name_offset, what)?;
        if name.is_empty() {
            return Err(Hdf5Error::corrupt(
                what,
                format!("external slot {i} has no file name"),
            ));
        }
        let size = (size != unlimited).then_some(size);
        if size.is_none() && i + 1 != used {
            return Err(Hdf5Error::corrupt(
                what,
                format!("external slot {i} of unlimited size is not the last"),
            ));
        }
        out.push(Slot { name, offset, size });
    }
    Ok(out)
}

/// How a dataset's external files are reached: the files seam (confined
/// as the mount is) and where the HDF5 file's references may lead.
#[derive(Clone, Debug)]
pub struct Linked {
    pub files: Arc<dyn Files>,
    pub scope: Arc<Scope>,
}

impl Linked {
    pub fn new(files: Arc<dyn Files>, scope: Arc<Scope>) -> Linked {
        Linked { files, scope }
    }
}

/// One slot with its file opened once one open succeeded.
#[derive(Debug)]
struct Part {
    /// The name as the message gives it.
    name: String,
    /// Where it led (for messages).
    path: String,
    /// The file, once opened (never a failure: see the module doc).
    file: Mutex<Option<Arc<dyn ReadAt>>>,
    offset: u64,
    /// Where this slot's bytes start in the dataset's bytes.
    start: u64,
    size: Option<u64>,
}

/// A dataset's external storage, its files opened (or to be).
#[derive(Debug)]
pub struct External {
    parts: Vec<Part>,
    /// The HDF5 file naming them, and how they are reached (`None`: no
    /// other file may be read).
    from: PathBuf,
    linked: Option<Linked>,
}

impl External {
    /// Open the files of `slots`, named by the HDF5 file `from`. A file
    /// that cannot be opened is logged and left to the reads that need
    /// it, which try again ([`External::read`]). A file named by several
    /// slots is opened once.
    pub fn open(slots: Vec<Slot>, from: &Path, linked: Option<Linked>) -> External {
        let mut start = 0u64;
        let mut parts: Vec<Part> = Vec::with_capacity(slots.len());
        let mut ext = External {
            parts: Vec::new(),
            from: from.to_path_buf(),
            linked,
        };
        for s in slots {
            let opened = match parts.iter().find(|p| p.name == s.name) {
                Some(p) => Ok((p.path.clone(), p.file.lock().expect("not poisoned").clone())),
                None => ext.open_one(&s.name).map(|(path, f)| (path, Some(f))),
            };
            let (path, file) = match opened {
                Ok(x) => x,
                Err((path, why)) => {
                    log::warn!(
                        "{}: external data file {:?} ({path}) cannot be read: {why}; \
                         reads of the dataset's bytes stored there will fail \
                         until it can",
                        from.display(),
                        s.name
                    );
                    (path, None)
                }
            };
            parts.push(Part {
                name: s.name,
                path,
                file: Mutex::new(file),
                offset: s.offset,
                start,
                size: s.size,
            });
            start = s.size.map_or(u64::MAX, |n| start.saturating_add(n));
        }
        ext.parts = parts;
        ext
    }

    /// Resolve and open the file `name`: (where it led, the file), or
    /// (where it led, why not).
    fn open_one(&self, name: &str) -> Result<(String, Arc<dyn ReadAt>), (String, String)> {
        let Some(l) = &self.linked else {
            return Err((
                name.to_string(),
                "this HDF5 file was opened without access to other files".to_string(),
            ));
        };
        match l.scope.resolve(&self.from, name) {
            Ok(p) => {
                let path = p.display().to_string();
                match l.files.open(&p) {
                    Ok(f) => Ok((path, f)),
                    Err(e) => Err((path, e.to_string())),
                }
            }
            Err(r) => {
                let why = match r {
                    Refusal::Outside(real) => format!(
                        "{real} is outside the allowed roots ({})",
                        l.scope.describe()
                    ),
                    Refusal::Scheme | Refusal::NoUrls => {
                        "not a location slabfs may read".to_string()
                    }
                };
                Err((name.to_string(), why))
            }
        }
    }

    /// A hash of every slot's file stamp (its path's, or a URL's object's;
    /// a marker where there is none): it changes when one of the files is
    /// rewritten, replaced, removed or appears, so that a refresh sees it
    /// (the HDF5 file's own stamp does not).
    pub fn stamp(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        for p in &self.parts {
            let s = self.linked.as_ref().and_then(|l| {
                crate::storage::paths::stamp_at(l.files.as_ref(), Path::new(&p.path))
            });
            (&p.path, s).hash(&mut h);
        }
        h.finish()
    }

    /// The file of part `p`, opened now if it was not (a failure is
    /// returned, not kept: the next read tries again).
    fn file(&self, p: &Part) -> Result<Arc<dyn ReadAt>, String> {
        if let Some(f) = p.file.lock().expect("not poisoned").as_ref() {
            return Ok(f.clone());
        }
        // Opened outside the lock; a race opens twice, the first kept.
        let (_, f) = self.open_one(&p.name).map_err(|(_, why)| why)?;
        Ok(p.file
            .lock()
            .expect("not poisoned")
            .get_or_insert(f)
            .clone())
    }

    /// The dataset's bytes `at..at + n`, gathered from the slots they lie
    /// in; an error naming the file for a slot that cannot be read, or
    /// for bytes that lie in no slot.
    pub fn read(&self, at: u64, n: u64, what: &str) -> H5Result<Vec<u8>> {
        let end = at
            .checked_add(n)
            .ok_or_else(|| Hdf5Error::corrupt(what, "external range overflows"))?;
        let mut out = Vec::with_capacity(usize::try_from(n).unwrap_or(0));
        let mut pos = at;
        for p in &self.parts {
            if pos >= end {
                break;
            }
            let part_end = p.size.map_or(u64::MAX, |s| p.start.saturating_add(s));
            if pos >= part_end || pos < p.start {
                continue;
            }
            let take = end.min(part_end) - pos;
            let err = |reason: String| Hdf5Error::External {
                what: what.to_string(),
                file: format!("{:?} ({})", p.name, p.path),
                reason,
            };
            let file = self.file(p).map_err(err)?;
            let offset = p
                .offset
                .checked_add(pos - p.start)
                .ok_or_else(|| err("offset overflows".to_string()))?;
            let from = out.len();
            out.resize(from + take as usize, 0);
            file.read_exact_at(&mut out[from..], offset).map_err(|e| {
                if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    err(format!(
                        "the file ends before byte {} which the dataset stores there \
                         (HDF5 would read zeros; slabfs does not guess)",
                        offset.saturating_add(take)
                    ))
                } else {
                    err(e.to_string())
                }
            })?;
            pos += take;
        }
        if pos < end {
            let total = self.parts.last().map_or(0, |p| {
                p.size.map_or(u64::MAX, |s| p.start.saturating_add(s))
            });
            return Err(Hdf5Error::corrupt(
                what,
                format!(
                    "bytes {pos}..{end} lie past the external files' slots, which hold \
                     {total} bytes"
                ),
            ));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::storage::testing::InMemory as Mem;

    fn part(name: &str, data: Option<Vec<u8>>, offset: u64, start: u64, size: Option<u64>) -> Part {
        Part {
            name: name.to_string(),
            path: name.to_string(),
            file: Mutex::new(data.map(|d| Arc::new(Mem(d)) as Arc<dyn ReadAt>)),
            offset,
            start,
            size,
        }
    }

    /// Parts not backed by any file seam: a part not opened fails with
    /// "without access to other files".
    fn external(parts: Vec<Part>) -> External {
        External {
            parts,
            from: PathBuf::from("t.h5"),
            linked: None,
        }
    }

    /// Slots in order, an offset into the second file, a read across
    /// them; a missing file fails only the reads that touch its slot; a
    /// short file and bytes past the slots are errors, never zeros.
    #[test]
    fn reads_gather_the_slots_and_fail_where_a_file_fails() {
        let ext = external(vec![
            part("a", Some((0..8).collect()), 0, 0, Some(8)),
            part("b", Some((100..120).collect()), 4, 8, Some(8)),
            part("c", None, 0, 16, Some(4)),
        ]);
        assert_eq!(ext.read(6, 4, "d").unwrap(), [6, 7, 104, 105]);
        assert_eq!(
            ext.read(8, 8, "d").unwrap(),
            (104..112).collect::<Vec<u8>>()
        );
        let e = ext.read(14, 4, "d").unwrap_err().to_string();
        assert!(e.contains("\"c\"") && e.contains("without access"), "{e}");
        let e = ext.read(16, 8, "d").unwrap_err().to_string();
        assert!(e.contains("\"c\""), "{e}");
        let short = external(vec![part("s", Some(vec![1, 2, 3]), 1, 0, Some(4))]);
        let e = short.read(0, 4, "d").unwrap_err().to_string();
        assert!(e.contains("\"s\"") && e.contains("ends before"), "{e}");
        let slots = external(vec![part("l", Some(vec![0; 10]), 0, 0, Some(4))]);
        assert_eq!(slots.read(2, 2, "d").unwrap(), [0, 0]);
        let e = slots.read(2, 4, "d").unwrap_err().to_string();
        assert!(e.contains("past the external files"), "{e}");
        // An unlimited last slot reaches as far as its file does.
        let open = external(vec![part("u", Some((0..50).collect()), 10, 0, None)]);
        assert_eq!(open.read(30, 5, "d").unwrap(), [40, 41, 42, 43, 44]);
    }
}
