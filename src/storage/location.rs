//! Remote locations: a URL split into the store it names (scheme, bucket
//! or host) and a prefix inside it, shown without its secrets.
//!
//! Pure parsing, with no remote state: formats and the file system name
//! URLs through this module, never through [`super::remote`], which is
//! the only code that reaches the network (`tests/it/layers.rs` holds the
//! formats to it).
//!
//! `s3://bucket/runs/a.zarr` is the store `s3://bucket` and the prefix
//! `runs/a.zarr`; `https://host:8443/data/x.nc` is the store
//! `https://host:8443` and the prefix `data/x.nc`. The URL's password and
//! query string never appear in [`Location::display`] (they are
//! remembered for [`redact`] instead). URLs are parsed by the `url`
//! crate, which resolves `.` and `..` segments (also percent-encoded
//! ones), so confinement ([`Location::within`]) compares resolved
//! locations.

use std::fmt;

use object_store::ObjectStoreScheme;
use object_store::path::Path as ObjectPath;
use url::Url;

use parking_lot::RwLock;

use crate::error::{Error, Result};

/// The URL schemes slabfs reads (and `https://` URLs of the clouds' own
/// hosts, which `object_store` recognises as S3, GCS or Azure).
pub const SCHEMES: &[&str] = &[
    "s3", "s3a", "gs", "gcs", "az", "azure", "abfs", "abfss", "adl", "http", "https",
];

/// Whether `s` is a URL of a remote source (rather than a local path).
pub fn is_url(s: &str) -> bool {
    s.split_once("://")
        .is_some_and(|(scheme, _)| SCHEMES.iter().any(|k| scheme.eq_ignore_ascii_case(k)))
}

/// The URL a path stands for, when the path is one (the formats carry a
/// remote object's URL as its `Path`).
pub fn url_of(path: &std::path::Path) -> Option<&str> {
    path.to_str().filter(|s| is_url(s))
}

/// Which kind of store a location is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    S3,
    Gcs,
    Azure,
    Http,
    Https,
}

impl Scheme {
    /// Whether the store can list keys under a prefix (HTTP cannot).
    pub fn lists(self) -> bool {
        !matches!(self, Scheme::Http | Scheme::Https)
    }
}

/// A store and a prefix inside it (see the module doc).
#[derive(Clone, PartialEq, Eq)]
pub struct Location {
    scheme: Scheme,
    /// The URL without path, query or password: what connects.
    store: String,
    /// `store` without any user info: what messages show.
    shown: String,
    prefix: ObjectPath,
}

impl fmt::Debug for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.display())
    }
}

impl Location {
    /// Parse a source URL. Its password and query values are remembered
    /// as secrets whatever happens next.
    pub fn parse(s: &str) -> Result<Location> {
        let shown_input = strip_secrets(s);
        let bad = |detail: String| Error::metadata(shown_input.clone(), detail);
        let url = Url::parse(s).map_err(|e| bad(format!("not a URL: {e}")))?;
        let mut secrets: Vec<String> = url.password().map(str::to_string).into_iter().collect();
        secrets.extend(url.query_pairs().map(|(_, v)| v.into_owned()));
        remember_secrets(secrets);
        if url.password().is_some() {
            return Err(bad(
                "URLs with a password are not supported; give credentials through the \
                 environment"
                    .into(),
            ));
        }
        if url.query().is_some() {
            return Err(bad(
                "URLs with a query string (presigned URLs, SAS tokens) are not supported; \
                 give credentials through the environment"
                    .into(),
            ));
        }
        let (kind, path) = ObjectStoreScheme::parse(&url)
            .map_err(|e| bad(format!("not a supported URL: {}", redact(&e.to_string()))))?;
        let scheme = match kind {
            ObjectStoreScheme::AmazonS3 => Scheme::S3,
            ObjectStoreScheme::GoogleCloudStorage => Scheme::Gcs,
            ObjectStoreScheme::MicrosoftAzure => Scheme::Azure,
            ObjectStoreScheme::Http if url.scheme() == "http" => Scheme::Http,
            ObjectStoreScheme::Http => Scheme::Https,
            _ => return Err(bad("not a remote URL".into())),
        };
        let prefix = ObjectPath::parse(path).map_err(|e| bad(format!("bad path in URL: {e}")))?;
        let mut base = url.clone();
        let _ = base.set_password(None);
        base.set_path("");
        base.set_query(None);
        base.set_fragment(None);
        // For S3/GCS/Azure the builders take the bucket from the URL; the
        // path part of what the builders see is irrelevant. For HTTP the
        // store is the server root and the whole path is the prefix.
        let store = match scheme {
            Scheme::Http | Scheme::Https => url[..url::Position::BeforePath].to_string(),
            _ => base.as_str().trim_end_matches('/').to_string(),
        };
        let _ = base.set_username("");
        // Azure's `abfs://container@account...` keeps the container (the
        // user name part) in what is shown: it is no secret.
        let shown = match scheme {
            Scheme::Azure => strip_secrets(store.as_str()),
            _ => base.as_str().trim_end_matches('/').to_string(),
        };
        Ok(Location {
            scheme,
            store,
            shown,
            prefix,
        })
    }

    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// The URL a store builder is given.
    pub(crate) fn store_url(&self) -> String {
        match self.scheme {
            Scheme::Http | Scheme::Https => {
                // `url` crate form without password.
                strip_secrets(&self.store)
            }
            _ => self.store.clone(),
        }
    }

    /// The key prefix inside the store ("" for its root).
    pub(crate) fn prefix(&self) -> &ObjectPath {
        &self.prefix
    }

    /// The URL as messages show it: no password, no query string.
    pub fn display(&self) -> String {
        if self.prefix.as_ref().is_empty() {
            self.shown.clone()
        } else {
            format!("{}/{}", self.shown, self.prefix)
        }
    }

    /// The last segment of the prefix (a dataset's name), if any.
    pub fn name(&self) -> Option<String> {
        self.prefix.filename().map(str::to_string)
    }

    /// The location one segment up (the "directory" holding an object);
    /// the store's root is its own parent.
    pub fn parent(&self) -> Location {
        let prefix = match self.prefix.as_ref().rsplit_once('/') {
            Some((up, _)) => ObjectPath::from(up),
            None => ObjectPath::default(),
        };
        Location {
            prefix,
            ..self.clone()
        }
    }

    /// The location of `rel` under this one. `rel` is relative (keys come
    /// from metadata, which is input): empty, `.` and `..` segments are
    /// refused.
    pub fn child(&self, rel: &str) -> Result<Location> {
        let rel = rel.trim_end_matches('/');
        if rel.is_empty() {
            return Ok(self.clone());
        }
        if rel
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..")
        {
            return Err(Error::metadata(
                self.display(),
                format!("key {rel:?} escapes the store"),
            ));
        }
        let joined = if self.prefix.as_ref().is_empty() {
            rel.to_string()
        } else {
            format!("{}/{rel}", self.prefix)
        };
        let prefix = ObjectPath::parse(&joined).map_err(|e| {
            Error::metadata(
                self.display(),
                format!("key {rel:?} is not a valid object name: {e}"),
            )
        })?;
        Ok(Location {
            prefix,
            ..self.clone()
        })
    }

    /// Whether `other` lies in the same store as this one and under its
    /// prefix (segment by segment: `s3://b/data` does not cover
    /// `s3://b/database`).
    pub fn within(&self, other: &Location) -> bool {
        self.scheme == other.scheme
            && self.store == other.store
            && other.prefix.prefix_matches(&self.prefix)
    }
}

/// `s` with any `user:password@` reduced to `user@` and without query
/// string and fragment: what a URL the user typed may show.
pub fn strip_secrets(s: &str) -> String {
    match Url::parse(s) {
        Ok(mut u) => {
            let _ = u.set_password(None);
            u.set_query(None);
            u.set_fragment(None);
            u.to_string()
        }
        // Not a URL: show only up to any '?' or '@'.
        Err(_) => {
            let cut = s.split(['?', '#']).next().unwrap_or("");
            match cut.split_once("://") {
                Some((scheme, rest)) => match rest.split_once('@') {
                    Some((_, host)) => format!("{scheme}://{host}"),
                    None => cut.to_string(),
                },
                None => cut.to_string(),
            }
        }
    }
}

// Secrets: what messages never show.

/// Environment variables whose values are secrets, never to be shown.
const SECRET_VARS: &[&str] = &[
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN",
    "GOOGLE_SERVICE_ACCOUNT_KEY",
    "GOOGLE_APPLICATION_CREDENTIALS_JSON",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_ACCESS_KEY",
    "AZURE_STORAGE_MASTER_KEY",
    "AZURE_STORAGE_SAS_KEY",
    "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_STORAGE_TOKEN",
    "AZURE_CLIENT_SECRET",
    "AZURE_STORAGE_CLIENT_SECRET",
];

/// The secrets of the URLs parsed so far. Process-wide, unlike the rest
/// of the remote state ([`super::remote::Remote`]): what it guards is the
/// process's log and every error message, whichever `Remote` (or none)
/// the URL was parsed for, and a secret once seen must stay blanked.
static URL_SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Remember the secrets of a source URL (password, query values) so that
/// [`redact`] blanks them.
pub fn remember_secrets(secrets: impl IntoIterator<Item = String>) {
    let mut known = URL_SECRETS.write();
    for s in secrets {
        // Short values ("1", "true") would blank innocent text; a secret
        // worth the name is longer.
        if s.len() >= 6 && !known.contains(&s) {
            known.push(s);
        }
    }
}

/// `message` with every known secret replaced by `***`.
pub fn redact(message: &str) -> String {
    let mut out = message.to_string();
    let env = SECRET_VARS
        .iter()
        .filter_map(|v| std::env::var(v).ok())
        .filter(|s| s.len() >= 6);
    for secret in env.chain(URL_SECRETS.read().iter().cloned()) {
        if out.contains(&secret) {
            out = out.replace(&secret, "***");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redact_blanks_url_secrets() {
        remember_secrets(["s3cr3t-value-xyz".to_string(), "1".to_string()]);
        assert_eq!(
            redact("GET https://h/x?sig=s3cr3t-value-xyz failed (1 try)"),
            "GET https://h/x?sig=*** failed (1 try)"
        );
    }

    #[test]
    fn urls_split_into_store_and_prefix() {
        let l = Location::parse("s3://bucket/runs/a.zarr/").unwrap();
        assert_eq!(l.scheme(), Scheme::S3);
        assert_eq!(l.display(), "s3://bucket/runs/a.zarr");
        assert_eq!(l.name().as_deref(), Some("a.zarr"));
        assert_eq!(l.prefix().as_ref(), "runs/a.zarr");
        let h = Location::parse("http://127.0.0.1:8080/data/x.nc").unwrap();
        assert_eq!(h.scheme(), Scheme::Http);
        assert_eq!(h.store_url(), "http://127.0.0.1:8080/");
        assert_eq!(h.display(), "http://127.0.0.1:8080/data/x.nc");
        let root = Location::parse("gs://bucket").unwrap();
        assert_eq!(root.display(), "gs://bucket");
        assert_eq!(root.name(), None);
        assert!(Location::parse("ftp://x/y").is_err());
        assert!(is_url("S3://b/k") && is_url("https://h/x") && !is_url("/data/x.zarr"));
        assert!(!is_url("file:///x"));
    }

    #[test]
    fn secrets_never_show() {
        let e = Location::parse("https://user:hunter2-secret@host/x.nc").unwrap_err();
        assert!(!e.to_string().contains("hunter2"), "{e}");
        assert!(e.to_string().contains("password"), "{e}");
        let e = Location::parse("https://host/x.nc?X-Amz-Signature=deadbeef-sig").unwrap_err();
        assert!(!e.to_string().contains("deadbeef"), "{e}");
        assert!(e.to_string().contains("query string"), "{e}");
        assert_eq!(redact("oops deadbeef-sig"), "oops ***");
    }

    #[test]
    fn confinement_is_by_store_and_whole_segments() {
        let root = Location::parse("s3://b/data").unwrap();
        let ok = Location::parse("s3://b/data/x/y.nc").unwrap();
        assert!(root.within(&ok));
        assert!(root.within(&root));
        for bad in [
            "s3://b/database/y.nc",
            "s3://other/data/y.nc",
            "gs://b/data/y.nc",
            "s3://b/data/../secret.nc",
            "s3://b/data/%2e%2e/secret.nc",
        ] {
            let l = Location::parse(bad).unwrap();
            assert!(!root.within(&l), "{bad} admitted as {l:?}");
        }
        assert!(root.child("x/../../y").is_err());
        assert_eq!(ok.parent().display(), "s3://b/data/x");
        assert_eq!(root.parent().display(), "s3://b");
        assert_eq!(root.parent().parent().display(), "s3://b");
        assert!(root.child("/y").is_err());
        assert_eq!(root.child("x/y").unwrap().display(), "s3://b/data/x/y");
        let h = Location::parse("http://h:1/a").unwrap();
        assert!(!h.within(&Location::parse("http://h:2/a/x").unwrap()));
        assert!(!h.within(&Location::parse("http://evil/a/x").unwrap()));
    }
}
