//! [`RefStore`]: a [`Store`] whose values are the references of a file.
//!
//! Built once from a parsed document ([`super::refs`]): every url is
//! resolved to a local path and checked against the allowed roots then
//! (see [`super::resolve`]), so a url to `s3://` or outside the roots is a
//! refused key from the start. Reads then do exactly what the ref says:
//!
//! - inline: the bytes held in memory;
//! - `[url, offset, length]`: one positioned read (`pread`) of those
//!   bytes (or of the part a [`ByteRange`] asks for), after checking that
//!   the file is long enough: a range past the end is an error naming
//!   the file, never a short value;
//! - `[url]`: the whole file;
//! - a URL target (admitted under an `--allow-outside URL` location when
//!   resolved): one ranged GET through [`UrlFiles`](crate::storage::UrlFiles), the object opened
//!   (one HEAD) once and kept while its reads succeed; its version is
//!   pinned (ETag), so a replaced object fails reads until the next one
//!   opens it again: never two versions in one value.
//!
//! The target is opened for every read, as [`crate::storage::local::FsStore`] opens
//! chunk files: no descriptor outlives a read, so a file replaced under
//! the mount is read in its new version, and it is checked against the
//! roots again just before (a symlink may have been planted since the
//! load). A target that changes while it is read (its length, times or
//! inode differ before and after) is read again, as
//! [`crate::storage::local::TORN_READ_RETRIES`] says.
//!
//! A missing target is an error for the reads that need it (EIO at the
//! mount), naming the file; the other references read normally, and the
//! file is found when it appears.
//!
//! [`Store::change_stamp`] hashes, for the keys under the prefix, the
//! references themselves and the identity (length, mtime, ctime, inode) of
//! every file they point to, so the live refresh notices both an edited
//! references file and a rewritten target.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::storage::ReadAt;
use crate::storage::local::{file_identity, read_verified};
use crate::storage::location::url_of;
use crate::storage::scope::Scope;
use crate::storage::{ByteRange, Store};

use super::error::RefsError;
use super::refs::Ref;

/// A file some references point to.
#[derive(Debug, Clone)]
pub struct Target {
    /// The url as the references (after templates) spell it.
    pub url: String,
    /// The local path it names (absolute, not canonicalised: the roots
    /// check canonicalises it at every open).
    pub path: PathBuf,
}

/// What a key holds.
#[derive(Debug)]
pub enum Entry {
    Inline(Vec<u8>),
    /// `len: None` for a whole-file reference.
    File {
        target: usize,
        range: Option<(u64, u64)>,
    },
    /// A reference that cannot be read, and why: every `get` of it fails.
    Refused(RefsError),
}

/// The references of one file as a key-value store.
#[derive(Debug)]
pub struct RefStore {
    /// The references file, for messages.
    file: String,
    entries: BTreeMap<String, Entry>,
    targets: Vec<Target>,
    /// Where targets may lead; its URL roots open URL targets (only those
    /// `resolve` admitted).
    scope: Arc<Scope>,
    /// URL targets opened (a HEAD each), by target index: reads reuse the
    /// version they pinned; a failed read drops it, so the next one opens
    /// the object again. At most one per target of this file.
    opened: Mutex<HashMap<usize, Arc<dyn ReadAt>>>,
    /// Whether some target is a URL (see [`RefStore::is_remote`]).
    any_remote: bool,
}

impl RefStore {
    /// A store over `refs` (from the references file `file`), each url
    /// already resolved by `resolve` to a target path or refused.
    pub fn new(
        file: &Path,
        refs: BTreeMap<String, std::result::Result<Ref, RefsError>>,
        scope: Arc<Scope>,
        resolve: impl Fn(&str, &str) -> std::result::Result<PathBuf, RefsError>,
    ) -> RefStore {
        let mut targets: Vec<Target> = Vec::new();
        // url -> target index, or the resolution error of its first key.
        let mut by_url: HashMap<String, std::result::Result<usize, RefsError>> = HashMap::new();
        let mut entries = BTreeMap::new();
        for (key, r) in refs {
            let entry = match r {
                Err(e) => Entry::Refused(e),
                Ok(Ref::Inline(v)) => Entry::Inline(v),
                Ok(Ref::Url { url, range }) => {
                    let resolved = by_url
                        .entry(url.clone())
                        .or_insert_with(|| {
                            resolve(&key, &url).map(|path| {
                                targets.push(Target {
                                    url: url.clone(),
                                    path,
                                });
                                targets.len() - 1
                            })
                        })
                        .clone();
                    match resolved {
                        Ok(target) => Entry::File { target, range },
                        Err(e) => Entry::Refused(rekey(e, &key)),
                    }
                }
            };
            entries.insert(key, entry);
        }
        let mut store = RefStore {
            file: file.display().to_string(),
            entries,
            targets,
            scope,
            opened: Mutex::new(HashMap::new()),
            any_remote: false,
        };
        store.any_remote = store.targets.iter().any(|t| store.is_remote(t));
        store
    }

    /// Whether target `t` is a URL (admitted when it was resolved).
    fn is_remote(&self, t: &Target) -> bool {
        self.scope.remote().is_some() && url_of(&t.path).is_some()
    }

    /// The opened URL target `t` (index `i`), opening it if need be.
    fn open_remote(&self, i: usize, t: &Target) -> io::Result<Arc<dyn ReadAt>> {
        if let Some(f) = self.opened.lock().get(&i) {
            return Ok(f.clone());
        }
        let files = self
            .scope
            .remote()
            .ok_or_else(|| io::Error::other("no URL is allowed"))?;
        let f = files.open(&t.path)?;
        self.opened.lock().insert(i, f.clone());
        Ok(f)
    }

    /// [`RefStore::read_target`] of a URL target: one ranged GET.
    fn read_remote(
        &self,
        key: &str,
        t: &Target,
        pick: &dyn Fn(u64) -> Result<(u64, u64)>,
    ) -> Result<Vec<u8>> {
        let i = self
            .targets
            .iter()
            .position(|x| std::ptr::eq(x, t))
            .expect("a target of this store");
        let io_err = |e: io::Error| {
            self.err(RefsError::Target {
                key: key.to_string(),
                file: t.path.clone(),
                source: Arc::new(e),
            })
        };
        let file = self.open_remote(i, t).map_err(io_err)?;
        let size = file.size().map_err(io_err)?;
        let (start, end) = pick(size)?;
        let mut buf = vec![0u8; (end - start) as usize];
        if let Err(e) = file.read_exact_at(&mut buf, start) {
            // Nothing failed is kept: the next read opens it again (a
            // replaced object is read in its new version then).
            self.opened.lock().remove(&i);
            return Err(io_err(e));
        }
        Ok(buf)
    }

    /// The keys whose references are refused, with why.
    pub fn refused(&self) -> impl Iterator<Item = (&str, &RefsError)> {
        self.entries.iter().filter_map(|(k, e)| match e {
            Entry::Refused(err) => Some((k.as_str(), err)),
            _ => None,
        })
    }

    /// The files the references point to.
    pub fn targets(&self) -> &[Target] {
        &self.targets
    }

    fn err(&self, source: RefsError) -> Error {
        Error::Format {
            path: self.file.clone(),
            source: Box::new(source),
        }
    }

    /// Read from target `t` for `key` the span `pick` chooses given the
    /// file's size (or its error), checking confinement first and reading
    /// again if the file changes meanwhile.
    fn read_target(
        &self,
        key: &str,
        t: &Target,
        pick: &dyn Fn(u64) -> Result<(u64, u64)>,
    ) -> Result<Vec<u8>> {
        if self.is_remote(t) {
            return self.read_remote(key, t, pick);
        }
        let roots = self.scope.local();
        let real = roots.check(&t.path).map_err(|resolved| {
            self.err(RefsError::Outside {
                key: key.to_string(),
                url: t.url.clone(),
                resolved,
                roots: self.scope.describe(),
            })
        })?;
        let io_err = |e: io::Error| {
            self.err(RefsError::Target {
                key: key.to_string(),
                file: t.path.clone(),
                source: Arc::new(e),
            })
        };
        // Checks again what it opens (a symlink or FIFO swapped in since
        // the check above is refused, never read or waited on), and reads
        // again a file that changed while it was read.
        read_verified(roots, &real, |m| pick(m.len()), io_err)
    }

    /// `[start, end)` of a file of `size` bytes, or the past-the-end error.
    fn span(&self, key: &str, t: &Target, start: u64, len: u64, size: u64) -> Result<(u64, u64)> {
        let end = start + len; // no overflow: checked when the ref was parsed
        if end > size {
            return Err(self.err(RefsError::PastEnd {
                key: key.to_string(),
                file: t.path.clone(),
                start,
                end,
                size,
            }));
        }
        Ok((start, end))
    }
}

/// `e`, as the error of `key` (a url's resolution error is computed once,
/// for the first key that uses it).
fn rekey(e: RefsError, key: &str) -> RefsError {
    let key = key.to_string();
    match e {
        RefsError::Scheme { url, .. } => RefsError::Scheme { key, url },
        RefsError::Outside {
            url,
            resolved,
            roots,
            ..
        } => RefsError::Outside {
            key,
            url,
            resolved,
            roots,
        },
        RefsError::BadRef { detail, .. } => RefsError::BadRef { key, detail },
        other => other,
    }
}

impl Store for RefStore {
    fn get(&self, key: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        let too_large = |size| Error::TooLarge {
            path: self.describe(key),
            size,
            limit,
        };
        match self.entries.get(key) {
            None => Ok(None),
            Some(Entry::Refused(e)) => Err(self.err(e.clone())),
            Some(Entry::Inline(v)) if v.len() as u64 > limit => Err(too_large(v.len() as u64)),
            Some(Entry::Inline(v)) => Ok(Some(v.clone())),
            Some(&Entry::File { target, range }) => {
                let t = &self.targets[target];
                match range {
                    Some((_, len)) if len > limit => Err(too_large(len)),
                    Some((offset, len)) => self
                        .read_target(key, t, &|size| self.span(key, t, offset, len, size))
                        .map(Some),
                    None => self
                        .read_target(key, t, &|size| {
                            if size > limit {
                                Err(too_large(size))
                            } else {
                                Ok((0, size))
                            }
                        })
                        .map(Some),
                }
            }
        }
    }

    /// One positioned read of the part of the referenced bytes `range`
    /// asks for.
    fn get_range(&self, key: &str, range: ByteRange) -> Result<Option<Vec<u8>>> {
        match self.entries.get(key) {
            None => Ok(None),
            Some(Entry::Refused(e)) => Err(self.err(e.clone())),
            Some(Entry::Inline(v)) => {
                let (s, e) = range
                    .resolve(v.len() as u64)
                    .ok_or_else(|| range.out_of_bounds(&self.describe(key), v.len() as u64))?;
                Ok(Some(v[s as usize..e as usize].to_vec()))
            }
            Some(&Entry::File {
                target,
                range: Some((offset, len)),
            }) => {
                let t = &self.targets[target];
                let (s, e) = range
                    .resolve(len)
                    .ok_or_else(|| range.out_of_bounds(&self.describe(key), len))?;
                self.read_target(key, t, &|size| self.span(key, t, offset + s, e - s, size))
                    .map(Some)
            }
            Some(&Entry::File {
                target,
                range: None,
            }) => {
                let t = &self.targets[target];
                self.read_target(key, t, &|size| {
                    range
                        .resolve(size)
                        .ok_or_else(|| range.out_of_bounds(&self.describe(key), size))
                })
                .map(Some)
            }
        }
    }

    /// The names directly under `dir`, from the keys. Skips over each
    /// child directory's keys instead of visiting them, so listing a group
    /// costs O(children · log keys), not O(chunks).
    fn list_dir(&self, dir: &str) -> Result<Vec<(String, bool)>> {
        let prefix = match dir.trim_end_matches('/') {
            "" => String::new(),
            d => format!("{d}/"),
        };
        let mut out = Vec::new();
        let mut from = Bound::Included(prefix.clone());
        while let Some((key, _)) = self
            .entries
            .range::<String, _>((from.clone(), Bound::Unbounded))
            .next()
        {
            let Some(rest) = key.strip_prefix(&prefix) else {
                break;
            };
            match rest.split_once('/') {
                Some((child, _)) => {
                    if !child.is_empty() {
                        out.push((child.to_string(), true));
                    }
                    // '0' is the character after '/': the first key past
                    // every "prefix/child/..." key.
                    from = Bound::Included(format!("{prefix}{child}0"));
                }
                None => {
                    if !rest.is_empty() {
                        out.push((rest.to_string(), false));
                    }
                    from = Bound::Excluded(key.clone());
                }
            }
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// An object store's when some target is a URL: the references of a
    /// read are then fetched several at once ([`Store::get_many`]).
    fn latency(&self) -> Option<std::time::Duration> {
        self.any_remote.then(|| {
            self.scope
                .remote()
                .map_or(std::time::Duration::ZERO, |r| r.latency())
        })
    }

    fn describe(&self, key: &str) -> String {
        match self.entries.get(key) {
            _ if key.is_empty() => self.file.clone(),
            Some(&Entry::File {
                target,
                range: Some((offset, len)),
            }) => format!(
                "{}: {key:?} = {} bytes {offset}..{}",
                self.file,
                self.targets[target].path.display(),
                offset + len
            ),
            Some(&Entry::File {
                target,
                range: None,
            }) => format!(
                "{}: {key:?} = {}",
                self.file,
                self.targets[target].path.display()
            ),
            Some(Entry::Inline(_)) => format!("{}: {key:?} (inline)", self.file),
            _ => format!("{}: {key:?}", self.file),
        }
    }

    fn change_stamp(&self, prefix: &str) -> Result<Option<u64>> {
        let mut h = DefaultHasher::new();
        let mut files = BTreeSet::new();
        for (key, entry) in self
            .entries
            .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
        {
            key.hash(&mut h);
            match entry {
                Entry::Inline(v) => (0u8, v).hash(&mut h),
                Entry::File { target, range } => {
                    (1u8, &self.targets[*target].path, range).hash(&mut h);
                    files.insert(*target);
                }
                Entry::Refused(e) => (2u8, e.to_string()).hash(&mut h),
            }
        }
        for t in files {
            let path = &self.targets[t].path;
            if self.is_remote(&self.targets[t]) {
                // A HEAD now: its ETag, size and time.
                let stamp = self
                    .scope
                    .remote()
                    .and_then(|f| f.open(path).ok())
                    .and_then(|f| f.stamp());
                match stamp {
                    Some(s) => s.hash(&mut h),
                    None => "unknown".hash(&mut h),
                }
                continue;
            }
            match std::fs::metadata(path) {
                Ok(m) => file_identity(&m).hash(&mut h),
                // Missing now: that is its state (it may appear later).
                Err(e) if e.kind() == io::ErrorKind::NotFound => "missing".hash(&mut h),
                Err(e) => {
                    return Err(self.err(RefsError::Target {
                        key: prefix.to_string(),
                        file: path.clone(),
                        source: Arc::new(e),
                    }));
                }
            }
        }
        Ok(Some(h.finish()))
    }
}
