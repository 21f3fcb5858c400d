//! Where an NcML file's datasets come from: locations resolved and
//! confined, scans listed, members opened by whatever format they are.
//!
//! A `location` is relative to the NcML file's directory, an absolute
//! path, a `file:` URL, or a URL of a store slabfs reads (`s3://`,
//! `https://`...); every one must resolve under the mount's roots (or be
//! a URL `--allow-outside` admits), as NCA fragments must
//! ([`crate::storage::scope`]). An OPeNDAP URL (`dods:`, a `/dodsC/`
//! path) is a server's rendering of a dataset, not a file: it is no
//! location slabfs can read, and the reads that need it fail naming it.
//!
//! A member is opened as the registry opens any file or directory
//! ([`crate::formats::entry::Formats::open_file`], [`crate::formats::entry::Formats::classify_dir`]): netCDF-3,
//! netCDF-4/HDF5, Zarr, another NcML file, anything a format claims.
//! A member is opened at most once while it is kept ([`Member::view`]),
//! and a failure to open is not kept: the next read tries again.
//!
//! The build of a member's own `<netcdf>` element (its changes, a nested
//! aggregation) is above this file; it is handed in with the context
//! ([`Build`]), so the files of this folder import one another in a line.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;

use super::error::{NcmlError, Pos};
use super::model::{Netcdf, Scan};
use super::view::View;
use crate::error::{Error, Result};
use crate::formats::Options;
use crate::formats::entry::{At, DirProbe, Found};
use crate::formats::nca::fragment::uri_path;
use crate::storage::location::{is_url, url_of};
use crate::storage::scope::{Refusal, Scope};

/// NcML files nested deeper than this (a member that is an NcML file
/// whose member is one...) are refused.
pub const MAX_DEPTH: usize = 16;

/// More files than this in one scan is refused: an NcML file is not a
/// way to open a whole archive as one dataset by accident.
pub const MAX_SCAN: usize = 200_000;

/// Builds the view of a `<netcdf>` element (its location or
/// aggregation, then its changes) under a context.
pub type Build = fn(&Netcdf, &Arc<Ctx>) -> Result<View>;

/// Applies the changes an element states (its attributes, dimensions,
/// variables and removes) to a view: an aggregation's own changes, made
/// to every member as it is opened.
pub type Change = fn(View, &Netcdf, &Arc<Ctx>) -> Result<View>;

/// What one NcML file's datasets are opened against.
pub struct Ctx {
    pub opts: Options,
    /// Where its locations may lead.
    pub scope: Arc<Scope>,
    /// The NcML file (canonical, or its URL).
    pub file: PathBuf,
    /// The NcML files being built, outermost first, this one included.
    pub chain: Vec<PathBuf>,
    pub build: Build,
    pub change: Change,
    /// The members open now, least recently used first, at most
    /// [`Options::max_open`] (`--max-open-datasets`): an aggregation of
    /// more members opens and closes them as reads go, so its memory and
    /// descriptors do not grow with its members; a member opened past
    /// that closes the oldest
    /// (its length is known by then; it opens again when read).
    pub open: Mutex<std::collections::VecDeque<std::sync::Weak<Member>>>,
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx").field("file", &self.file).finish()
    }
}

impl Ctx {
    /// The file `location` names (see the module doc), confined.
    pub fn resolve(&self, location: &str, pos: Pos) -> std::result::Result<PathBuf, NcmlError> {
        let err = |detail: String| NcmlError::Location {
            pos,
            location: location.to_string(),
            detail,
        };
        if is_opendap(location) {
            return Err(err(
                "an OPeNDAP URL: slabfs reads files and objects, not a server's rendering of them"
                    .into(),
            ));
        }
        let written = if is_url(location) {
            location.to_string()
        } else {
            uri_path(location).map_err(err)?
        };
        let refused = |r: Refusal| match r {
            Refusal::Scheme => err("not a file name or a URL slabfs reads".into()),
            Refusal::NoUrls => err(format!(
                "a URL, outside the allowed roots ({}): --allow-outside URL admits one",
                self.scope.describe()
            )),
            Refusal::Outside(to) => err(format!(
                "resolves to {to}, outside the allowed roots ({})",
                self.scope.describe()
            )),
        };
        let p = self.scope.join(&self.file, &written).map_err(refused)?;
        self.scope.check(&p).map_err(refused)
    }

    /// The files a `<scan>` finds, sorted by path (netCDF-Java sorts
    /// scanned files by name), at most [`MAX_SCAN`], and when the scan
    /// should be made again (a file left out for being newer than
    /// `olderThan` will not be then), each with the date
    /// its name holds when the scan has a `dateFormatMark`
    /// ([`super::dates`]; a name without one refuses the scan, naming it).
    #[allow(clippy::type_complexity)]
    pub fn scan(
        &self,
        scan: &Scan,
    ) -> std::result::Result<(Vec<(PathBuf, Option<String>)>, Option<Duration>), NcmlError> {
        let (found, again) = self.scan_at_most(scan, MAX_SCAN)?;
        let Some(mark) = &scan.date_format_mark else {
            return Ok((found.into_iter().map(|p| (p, None)).collect(), again));
        };
        let dated = found
            .into_iter()
            .map(|p| {
                let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
                let date =
                    super::dates::date_of(name, mark).map_err(|detail| NcmlError::Location {
                        pos: scan.pos,
                        location: scan.location.clone(),
                        detail,
                    })?;
                Ok((p, Some(date)))
            })
            .collect::<std::result::Result<_, NcmlError>>()?;
        Ok((dated, again))
    }

    fn scan_at_most(
        &self,
        scan: &Scan,
        limit: usize,
    ) -> std::result::Result<(Vec<PathBuf>, Option<Duration>), NcmlError> {
        let dir = self.resolve(&scan.location, scan.pos)?;
        let err = |detail: String| NcmlError::Location {
            pos: scan.pos,
            location: scan.location.clone(),
            detail,
        };
        let re = match &scan.reg_exp {
            None => None,
            Some(r) => Some(
                regex::Regex::new(&format!("^(?:{r})$"))
                    .map_err(|e| err(format!("regExp {r:?}: {e}")))?,
            ),
        };
        let store = self.opts.files.store(&dir);
        let now = SystemTime::now();
        let mut found = Vec::new();
        let mut again: Option<Duration> = None;
        let mut todo = vec![String::new()];
        while let Some(sub) = todo.pop() {
            let listed = store
                .list_dir(&sub)
                .map_err(|e| err(format!("cannot list {}: {e}", store.describe(&sub))))?;
            for (name, is_dir) in listed {
                let rel = if sub.is_empty() {
                    name.clone()
                } else {
                    format!("{sub}/{name}")
                };
                if is_dir {
                    if scan.subdirs {
                        todo.push(rel);
                    }
                    continue;
                }
                let path = join_path(&dir, &rel);
                let full = path.display().to_string();
                // netCDF-Java 5 matches regExp against the file's name,
                // whole (its documentation says the path: see
                // docs/AGGREGATION.md), and suffix against the path's end.
                let wanted = match (&re, &scan.suffix) {
                    (Some(re), _) => re.is_match(&name),
                    (None, Some(s)) => full.ends_with(s.as_str()),
                    (None, None) => true,
                };
                if !wanted {
                    continue;
                }
                if let Some(age) = scan.older_than
                    && url_of(&path).is_none()
                    && let Ok(m) = std::fs::metadata(&path).and_then(|m| m.modified())
                    && now.duration_since(m).unwrap_or_default() < age
                {
                    // Scanned again once it is old enough.
                    let left = age - now.duration_since(m).unwrap_or_default();
                    let left = left + Duration::from_millis(100);
                    again = Some(again.map_or(left, |a| a.min(left)));
                    log::info!(
                        "{}: {}: left out of the scan until it is older than {:?}",
                        self.file.display(),
                        full,
                        age
                    );
                    continue;
                }
                found.push(path);
                if found.len() > limit {
                    return Err(err(format!(
                        "more than {limit} files: split the aggregation"
                    )));
                }
            }
        }
        found.sort();
        Ok((found, again))
    }

    /// Open the dataset at `path` by its format (see the module doc).
    pub fn open_path(&self, path: &Path) -> Result<View> {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        let formats = &self.opts.formats;
        let at = At::new(path, "", &name, &self.opts);
        let is_dir = url_of(path).is_none() && path.is_dir();
        let ds = if is_dir {
            let probe = DirProbe::with_files(path, self.opts.files.as_ref());
            match formats.classify_dir(&probe, false) {
                Some(Found::Dataset { format, .. }) => (format.open)(&at)?,
                _ => {
                    return Err(Error::metadata(
                        path.display().to_string(),
                        "a directory that is no dataset slabfs reads",
                    ));
                }
            }
        } else {
            let claimed = match formats.classify_file(&name) {
                Some(Found::Dataset { format, .. }) => Some(format),
                _ => None,
            };
            formats.open_file(&at, claimed)?
        };
        let ds =
            ds.ok_or_else(|| Error::metadata(path.display().to_string(), "holds no dataset"))?;
        Ok(View::of_dataset(ds))
    }

    /// The context of the NcML file `path` met as a member: an error for
    /// a cycle or a chain deeper than [`MAX_DEPTH`].
    pub fn nested(&self, path: &Path) -> std::result::Result<Ctx, NcmlError> {
        if self.chain.iter().any(|p| p == path) {
            let chain: Vec<String> = self
                .chain
                .iter()
                .chain(std::iter::once(&path.to_path_buf()))
                .map(|p| p.display().to_string())
                .collect();
            return Err(NcmlError::Cycle(chain.join(" -> ")));
        }
        if self.chain.len() >= MAX_DEPTH {
            return Err(NcmlError::Cycle(format!(
                "NcML files nested more than {MAX_DEPTH} deep"
            )));
        }
        let mut chain = self.chain.clone();
        chain.push(path.to_path_buf());
        Ok(Ctx {
            opts: self.opts.clone(),
            scope: self.opts.scope_for(path),
            file: path.to_path_buf(),
            chain,
            build: self.build,
            change: self.change,
            open: Mutex::default(),
        })
    }
}

/// `dir/rel`, for a path or a URL held as a path.
fn join_path(dir: &Path, rel: &str) -> PathBuf {
    if url_of(dir).is_some() {
        PathBuf::from(format!(
            "{}/{rel}",
            dir.display().to_string().trim_end_matches('/')
        ))
    } else {
        dir.join(rel)
    }
}

/// An OPeNDAP location: `dods:` or `dap4:` URLs, or a THREDDS `/dodsC/`
/// path.
pub fn is_opendap(location: &str) -> bool {
    let l = location.to_ascii_lowercase();
    l.starts_with("dods:") || l.starts_with("dap4:") || l.contains("/dodsc/")
}

/// One dataset of an aggregation: a listed `<netcdf>` (with its own
/// changes, or an aggregation of its own) or a scanned file, opened on
/// first use.
pub struct Member {
    /// Its location as written (or the scanned file's path): what
    /// messages name.
    label: String,
    element: Netcdf,
    /// The aggregation's own changes, made to it once opened.
    changes: Option<Arc<Netcdf>>,
    /// Found by a `<scan>` (not listed).
    scanned: bool,
    /// The date its name holds (a scan's `dateFormatMark`), ISO 8601.
    date: Option<String>,
    ctx: Arc<Ctx>,
    /// The view while it is kept; a failure is not kept.
    view: Mutex<Option<Arc<View>>>,
}

impl std::fmt::Debug for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.label)
    }
}

impl Member {
    pub fn new(element: Netcdf, changes: Option<Arc<Netcdf>>, ctx: Arc<Ctx>) -> Member {
        let label = element
            .location
            .clone()
            .unwrap_or_else(|| format!("<netcdf> at {}", element.pos));
        Member {
            label,
            element,
            changes,
            scanned: false,
            date: None,
            ctx,
            view: Mutex::new(None),
        }
    }

    /// A scanned file: a `<netcdf location>` of its path.
    pub fn scanned(
        path: &Path,
        date: Option<String>,
        pos: Pos,
        changes: Option<Arc<Netcdf>>,
        ctx: Arc<Ctx>,
    ) -> Member {
        let element = Netcdf {
            pos,
            location: Some(path.display().to_string()),
            ..Netcdf::default()
        };
        Member {
            scanned: true,
            date,
            ..Member::new(element, changes, ctx)
        }
    }

    /// The date its name holds (a scan's `dateFormatMark`).
    pub fn date(&self) -> Option<&str> {
        self.date.as_deref()
    }

    pub fn is_scanned(&self) -> bool {
        self.scanned
    }

    /// The last part of its location (a joinNew's coordinate value when
    /// none is given, as netCDF-Java takes it).
    pub fn file_name(&self) -> String {
        let l = self
            .label
            .rsplit_once('#')
            .map_or(self.label.as_str(), |(a, _)| a);
        l.rsplit('/').next().unwrap_or(l).to_string()
    }

    pub fn label(&self) -> String {
        self.label.clone()
    }

    pub fn element(&self) -> &Netcdf {
        &self.element
    }

    /// The member's dataset if it is open.
    pub fn opened(&self) -> Option<Arc<View>> {
        self.view.lock().clone()
    }

    /// The member's dataset, opened (and built) now if it is not open. An
    /// error names the NcML file and the member, and is logged.
    pub fn view(self: &Arc<Self>) -> Result<Arc<View>> {
        let mut held = self.view.lock();
        if let Some(v) = &*held {
            let v = v.clone();
            drop(held);
            self.used();
            return Ok(v);
        }
        let built = (self.ctx.build)(&self.element, &self.ctx).and_then(|v| match &self.changes {
            Some(c) => (self.ctx.change)(v, c, &self.ctx),
            None => Ok(v),
        });
        let v = Arc::new(built.map_err(|e| {
            let e = NcmlError::member(self.label.clone(), e.to_string()).at(self
                .ctx
                .file
                .display()
                .to_string());
            log::warn!("{e}");
            e
        })?);
        *held = Some(v.clone());
        drop(held);
        self.used();
        Ok(v)
    }

    /// Mark it the most recently used open member, closing the least
    /// recently used one past [`Options::max_open`] (those reading it keep
    /// their view until they are done).
    fn used(self: &Arc<Self>) {
        let closing = {
            let mut open = self.ctx.open.lock();
            open.retain(|w| w.strong_count() > 0 && !std::ptr::eq(w.as_ptr(), Arc::as_ptr(self)));
            open.push_back(Arc::downgrade(self));
            let mut closing = Vec::new();
            while open.len() > self.ctx.opts.max_open.max(1) {
                closing.extend(open.pop_front().and_then(|w| w.upgrade()));
            }
            closing
        };
        for m in closing {
            m.view.lock().take();
        }
    }
}

/// A hash of every member's variable `var`'s stamp: a member rewritten
/// or replaced changes it (the refresh re-opens the NcML file and
/// compares; the entry's stamp is `Reopen`). Unknown while a member is
/// not open, or cannot tell. What a joined or tiled variable answers.
pub fn members_stamp<'a>(
    members: impl Iterator<Item = &'a Arc<Member>>,
    var: &str,
) -> crate::engine::array::ChangeStamp {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let mut known = Some(());
    for m in members {
        let stamp = m
            .opened()
            .and_then(|v| v.var(var).and_then(|v| v.array.change_stamp().data));
        known = known.and(stamp.map(|s| s.hash(&mut h)));
    }
    crate::engine::array::ChangeStamp {
        cache_id: None,
        data: known.map(|()| h.finish()),
        elsewhere: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::cache::ChunkCache;
    use crate::formats::entry::Formats;

    fn ctx(dir: &Path) -> Ctx {
        let opts = Options::new(
            vec![dir.to_path_buf()],
            Arc::new(ChunkCache::new(1 << 16)),
            Formats::new(&[]),
        );
        let file = dir.join("a.ncml");
        Ctx {
            scope: opts.scope_for(&file),
            opts,
            file: file.clone(),
            chain: vec![file],
            build: |_, _| Ok(View::default()),
            change: |v, _, _| Ok(v),
            open: Mutex::default(),
        }
    }

    fn scan(location: &str) -> Scan {
        Scan {
            pos: Pos::default(),
            location: location.into(),
            suffix: None,
            reg_exp: None,
            subdirs: true,
            older_than: None,
            date_format_mark: None,
        }
    }

    #[test]
    fn scans_filter_sort_and_stop_at_their_bound() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(d.join("s/sub")).unwrap();
        for f in ["s/b.nc", "s/a.nc", "s/c.txt", "s/sub/d.nc", "s/sub/e.nc4"] {
            std::fs::write(d.join(f), b"x").unwrap();
        }
        let c = ctx(&d);
        let names = |v: Vec<(PathBuf, Option<String>)>| -> Vec<String> {
            v.iter()
                .map(|(p, _)| p.strip_prefix(&d).unwrap().display().to_string())
                .collect()
        };
        let mut s = scan("s");
        s.suffix = Some(".nc".into());
        assert_eq!(
            names(c.scan(&s).unwrap().0),
            ["s/a.nc", "s/b.nc", "s/sub/d.nc"]
        );
        s.subdirs = false;
        assert_eq!(names(c.scan(&s).unwrap().0), ["s/a.nc", "s/b.nc"]);
        // regExp: the whole name, and it wins over suffix.
        let mut r = scan("s");
        r.suffix = Some(".nc".into());
        r.reg_exp = Some("[a-d]\\.nc4?|e.*".into());
        assert_eq!(
            names(c.scan(&r).unwrap().0),
            ["s/a.nc", "s/b.nc", "s/sub/d.nc", "s/sub/e.nc4"]
        );
        r.reg_exp = Some("a".into());
        assert!(c.scan(&r).unwrap().0.is_empty());
        // Too many files: refused, not truncated.
        let mut dated = scan("s");
        dated.subdirs = false;
        dated.suffix = Some(".nc".into());
        dated.date_format_mark = Some("#y".into());
        let e = c.scan(&dated).unwrap_err().to_string();
        assert!(e.contains("\"a.nc\""), "{e}");
        let e = c.scan_at_most(&scan("s"), 4).unwrap_err().to_string();
        assert!(e.contains("more than 4 files"), "{e}");
        assert_eq!(c.scan_at_most(&scan("s"), 5).unwrap().0.len(), 5);
        // A file newer than olderThan is left out until it is older.
        let mut o = scan("s");
        o.older_than = Some(std::time::Duration::from_secs(3600));
        assert!(c.scan(&o).unwrap().0.is_empty());
        o.older_than = Some(std::time::Duration::ZERO);
        assert_eq!(c.scan(&o).unwrap().0.len(), 5);
        // Outside the roots: refused.
        let e = c.scan(&scan("..")).unwrap_err().to_string();
        assert!(e.contains("outside the allowed roots"), "{e}");
    }

    #[test]
    fn opendap_locations_are_told() {
        assert!(is_opendap("dods://server/x.nc"));
        assert!(is_opendap("https://h/thredds/dodsC/a/b.nc"));
        assert!(!is_opendap("https://h/thredds/fileServer/a/b.nc"));
    }
}
