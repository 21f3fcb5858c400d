//! Where the references a file makes may lead.
//!
//! Aggregations (NCA descriptors, CF-1.13 and CFA-0.4 files) and kerchunk
//! reference files name other files: by a path relative to themselves, an
//! absolute path, a `file://` URI or a URL. A [`Scope`] is what one
//! dataset's references may read, and the one place that turns a
//! reference into a location and checks it, for every format:
//!
//! - made by a **local file**: a relative path is relative to the file's
//!   directory; it, an absolute path or a `file://` URI must resolve
//!   under the local [`Roots`] (symlinks and `..` followed). A URL is read
//!   only when it lies under one of the URL roots (`--allow-outside URL`).
//! - made by a **remote file** (its path is its URL): a relative reference
//!   is resolved against the file's URL as a browser would (RFC 3986:
//!   `frag/a.nc`, `../b/a.nc`), and it or an absolute URL must lie under
//!   the URL roots: the source's own bucket and prefix (or host and path)
//!   and the `--allow-outside` URLs. A local path (`/etc/passwd`,
//!   `file:///x`) is never read for a remote file: whoever wrote a
//!   bucket's descriptor is not trusted with the daemon's disk.
//! - any other scheme (`memory://`, `simplecache::s3://`...) is refused.
//!
//! [`Location::parse`](super::location::Location) resolves `.`, `..` and
//! their percent-encoded forms before [`Location::within`](super::location::Location::within) compares whole
//! segments, so `s3://b/data/%2e%2e/x` is outside `s3://b/data` and
//! `s3://b/database` is not inside it.
//!
//! A local source whose references may read URLs opens them through
//! [`WithUrls`]: local paths go to the local [`Files`] (confined as
//! always), URLs to the URL roots' [`RemoteFiles`](super::remote::RemoteFiles).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::contract::Store;
use super::contract::{Files, ReadAt, UrlFiles};
use super::local::confine::Roots;
use super::location as remote;

/// What one dataset's references may read: local roots, URL roots, or
/// both (see the module doc).
#[derive(Debug, Clone, Default)]
pub struct Scope {
    local: Arc<Roots>,
    remote: Option<Arc<dyn UrlFiles>>,
}

/// Why a reference is not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Not a scheme slabfs reads (`memory://`, `simplecache::s3://`...).
    Scheme,
    /// A URL, where no URL may be read (a local source without
    /// `--allow-outside URL`).
    NoUrls,
    /// Outside every allowed location; where it leads (a real path, or a
    /// URL without secrets).
    Outside(String),
}

impl Scope {
    pub fn new(local: Arc<Roots>, remote: Option<Arc<dyn UrlFiles>>) -> Scope {
        Scope { local, remote }
    }

    /// The local roots.
    pub fn local(&self) -> &Roots {
        &self.local
    }

    /// The URL roots' files, when any URL may be read.
    pub fn remote(&self) -> Option<&Arc<dyn UrlFiles>> {
        self.remote.as_ref()
    }

    /// The location the reference `reference`, made by the file `from` (a
    /// local path or a URL), names; not yet checked ([`Scope::check`]).
    pub fn join(&self, from: &Path, reference: &str) -> Result<PathBuf, Refusal> {
        if remote::is_url(reference) {
            return match self.remote {
                Some(_) => Ok(PathBuf::from(reference)),
                None => Err(Refusal::NoUrls),
            };
        }
        let local = match reference.strip_prefix("file://") {
            // RFC 8089 allows the host "localhost" (file://localhost/a/b).
            Some(rest) => Some(
                rest.strip_prefix("localhost")
                    .filter(|r| r.starts_with('/'))
                    .unwrap_or(rest),
            ),
            // Any other scheme, chained ones (`simplecache::s3://`) too.
            None if reference.contains("://") => {
                return Err(Refusal::Scheme);
            }
            None => None,
        };
        match remote::url_of(from) {
            Some(base) => {
                // A remote file: never a local path.
                if local.is_some() || reference.starts_with('/') {
                    return Err(Refusal::Outside(format!(
                        "{} (a local path, and a remote file reads only URLs)",
                        local.unwrap_or(reference)
                    )));
                }
                url::Url::parse(base)
                    .and_then(|b| b.join(reference))
                    .map(|u| PathBuf::from(u.as_str()))
                    .map_err(|e| Refusal::Outside(format!("{reference}: {e}")))
            }
            None => {
                let dir = from.parent().unwrap_or(Path::new("/"));
                // An absolute path replaces `dir`.
                Ok(dir.join(local.unwrap_or(reference)))
            }
        }
    }

    /// Where `path` (a local path or a URL) really leads, if that is
    /// within the scope: its canonical path, or the URL.
    pub fn check(&self, path: &Path) -> Result<PathBuf, Refusal> {
        match remote::url_of(path) {
            Some(url) => match &self.remote {
                Some(files) => files
                    .admit(path)
                    .map(|_| path.to_path_buf())
                    .map_err(|_| Refusal::Outside(shown_url(url))),
                None => Err(Refusal::NoUrls),
            },
            None => self
                .local
                .check(path)
                .map_err(|real| Refusal::Outside(real.display().to_string())),
        }
    }

    /// [`Scope::join`] then [`Scope::check`]: the checked location (the
    /// joined form, not the real path: local files are checked again
    /// when opened).
    pub fn resolve(&self, from: &Path, reference: &str) -> Result<PathBuf, Refusal> {
        let path = self.join(from, reference)?;
        self.check(&path)?;
        Ok(path)
    }

    /// The allowed locations, for messages.
    pub fn describe(&self) -> String {
        match &self.remote {
            None => self.local.describe(),
            Some(r) if self.local.is_empty() => {
                format!("{}; never a local file", r.describe())
            }
            Some(r) => format!("{}; {}", r.describe(), self.local.describe()),
        }
    }
}

/// A URL as messages show it (resolved, no secrets).
fn shown_url(url: &str) -> String {
    remote::Location::parse(url)
        .map(|l| l.display())
        .unwrap_or_else(|_| remote::strip_secrets(url))
}

/// Local paths through `local`, URLs through `remote`: the files of a
/// local source whose references may read `--allow-outside` URLs.
#[derive(Debug)]
pub struct WithUrls {
    pub local: Arc<dyn Files>,
    pub remote: Arc<dyn UrlFiles>,
}

impl Files for WithUrls {
    fn open(&self, path: &Path) -> io::Result<Arc<dyn ReadAt>> {
        if remote::url_of(path).is_some() {
            self.remote.open(path)
        } else {
            self.local.open(path)
        }
    }

    fn store(&self, root: &Path) -> Arc<dyn Store> {
        if remote::url_of(root).is_some() {
            self.remote.store(root)
        } else {
            self.local.store(root)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::remote::{Location, Remote, RemoteFiles};

    fn remote_scope(root: &str) -> Scope {
        let files =
            RemoteFiles::new(&Remote::default(), vec![Location::parse(root).unwrap()]).unwrap();
        Scope::new(Arc::default(), Some(Arc::new(files)))
    }

    #[test]
    fn a_remote_files_references_resolve_against_its_url() {
        let s = remote_scope("s3://bucket/data");
        let from = Path::new("s3://bucket/data/aggs/x.nca.json");
        let r = |reference: &str| s.resolve(from, reference);
        assert_eq!(
            r("frag/a.nc").unwrap(),
            Path::new("s3://bucket/data/aggs/frag/a.nc")
        );
        assert_eq!(
            r("../other/a.nc").unwrap(),
            Path::new("s3://bucket/data/other/a.nc")
        );
        assert_eq!(
            r("s3://bucket/data/z/a.nc").unwrap(),
            Path::new("s3://bucket/data/z/a.nc")
        );
        assert_eq!(
            r("a%20b.nc").unwrap(),
            Path::new("s3://bucket/data/aggs/a%20b.nc")
        );
        for bad in [
            "../../secret.nc",
            "%2e%2e/%2e%2e/secret.nc",
            "../../database/a.nc",
            "s3://bucket/database/a.nc",
            "s3://other/data/a.nc",
            "gs://bucket/data/a.nc",
            "http://127.0.0.1:1/bucket/data/a.nc",
        ] {
            assert!(
                matches!(r(bad), Err(Refusal::Outside(_))),
                "{bad}: {:?}",
                r(bad)
            );
        }
        // Local paths, never, even under a local root.
        for local in [
            "/etc/passwd",
            "file:///etc/passwd",
            "file://localhost/etc/hosts",
        ] {
            let e = r(local).unwrap_err();
            assert!(
                matches!(&e, Refusal::Outside(w) if w.contains("local path")),
                "{e:?}"
            );
        }
        assert_eq!(r("memory://a"), Err(Refusal::Scheme));
        assert_eq!(r("simplecache::s3://bucket/data/a"), Err(Refusal::Scheme));
        // (A relative URL's first segment may not hold a ':': RFC 3986
        // takes "a::b.nc" for a scheme; "./a::b.nc" is the name.)
        assert!(r("./a::b.nc").is_ok());
        assert!(
            s.describe().contains("s3://bucket/data"),
            "{}",
            s.describe()
        );
        assert!(s.describe().contains("never a local file"));
    }

    #[test]
    fn a_local_files_references_read_urls_only_under_url_roots() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let from = root.join("x.nca.json");
        let local_only = Scope::new(Arc::new(Roots::new([root.clone()])), None);
        assert_eq!(
            local_only.resolve(&from, "a.nc").unwrap(),
            root.join("a.nc")
        );
        // file:// URIs and absolute paths, as the descriptors write them.
        let abs = root.join("a.nc").display().to_string();
        assert_eq!(
            local_only.join(&from, &format!("file://{abs}")).unwrap(),
            root.join("a.nc")
        );
        assert_eq!(local_only.join(&from, &abs).unwrap(), root.join("a.nc"));
        // A local name with "::" is a name, not a chained URL.
        assert_eq!(
            local_only.resolve(&from, "a::b.nc").unwrap(),
            root.join("a::b.nc")
        );
        assert_eq!(
            local_only.resolve(&from, "s3://bucket/data/a.nc"),
            Err(Refusal::NoUrls)
        );
        assert!(matches!(
            local_only.resolve(&from, "../a.nc"),
            Err(Refusal::Outside(_))
        ));
        let files = RemoteFiles::new(
            &Remote::default(),
            vec![Location::parse("s3://bucket/data").unwrap()],
        )
        .unwrap();
        let both = Scope::new(Arc::new(Roots::new([root.clone()])), Some(Arc::new(files)));
        assert!(both.resolve(&from, "s3://bucket/data/a.nc").is_ok());
        assert!(both.resolve(&from, "s3://bucket/data/../x.nc").is_err());
        assert_eq!(both.resolve(&from, "a.nc").unwrap(), root.join("a.nc"));
    }
}
