//! kerchunk / fsspec reference files as datasets.
//!
//! A reference file maps Zarr keys to bytes that live elsewhere: inline in
//! the JSON, or a byte range of another file. kerchunk writes them for
//! netCDF-3, netCDF-4/HDF5, GRIB... files, so that their chunks can be
//! read as a Zarr store without the format's library. slabfs reads them
//! the same way: the references become a [`Store`]
//! ([`RefStore`]) and the ordinary Zarr reader
//! ([`crate::formats::zarr::open_store`]) does the rest, so every codec, fill value
//! and dtype rule of Zarr applies unchanged. (kerchunk's HDF5 translator
//! writes `"compressor": null` with every codec in `filters`, which the
//! Zarr v2 chain already decodes in reverse filter order.)
//!
//! ```text
//! refs.json ─ load ─ refs::parse ─ key → Ref (inline | [url] | [url, offset, length])
//!               │        └ template: {{name}} urls, gen expressions
//!               └ resolve: url → local path, confined to the allowed roots
//!                   └ RefStore ─ zarr::open_store ─ ChunkedArray (chunks through the cache)
//! ```
//!
//! docs/KERCHUNK.md is the user's reference. The decisions:
//!
//! - **Recognised by content.** [`load`] answers `None` for a JSON file
//!   that is not references (another JSON document next to the data):
//!   version 1 is an object with `"version": 1` and `"refs"`, version 0 a
//!   bare object whose keys include a Zarr metadata key (`.zgroup`,
//!   `a/.zarray`, `zarr.json`...). A file that does not even start with
//!   `{` is not parsed at all.
//! - **Local files, and URLs only where allowed, confined.** A url is a
//!   path relative to the references file's directory, an absolute path,
//!   or a `file://` url; or a remote URL (`s3://`, `https://`...) under one
//!   of the `--allow-outside` URLs, read through
//!   [`crate::storage::UrlFiles`] with ranged GETs pinned to the
//!   object's ETag. Without such a URL root every remote URL is refused.
//!   Every target must resolve (symlinks and `..` followed, as
//!   [`crate::storage::local::confine`] does for aggregations) under an allowed
//!   root: by default the directory holding the references file; through
//!   [`crate::formats::dataset`], the mounted SOURCE plus the extra roots of
//!   `dataset::Opener::allow_outside` (`--allow-outside`). Another scheme
//!   (`s3://`, `http://`, `memory://`...) or a file outside is refused
//!   when the file is loaded: the arrays whose keys hold such a ref do not
//!   load (reported as skipped, naming the ref), the others do.
//! - **Missing targets fail reads, not loads.** A target that does not
//!   exist yet (or is too short for a range) is an error for the reads
//!   that touch it, naming the file, so the rest of the dataset mounts and
//!   the live refresh picks the file up when it appears.

pub mod entry;
pub mod error;
pub mod refs;
pub mod store;
pub mod template;

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use entry::ENTRY;
pub use error::RefsError;
pub use store::RefStore;

use crate::error::{Error, Result};
use crate::formats::Options;
use crate::formats::zarr::{self, Hierarchy};
use crate::storage::Store;
use crate::storage::location as remote;
use crate::storage::paths;
use crate::storage::scope::{Refusal, Scope};

/// Reference files larger than this are refused (kerchunk's JSON for a
/// few thousand chunks is a megabyte; much larger sets use its Parquet
/// form, which we do not read).
pub const MAX_REFS_BYTES: u64 = 256 << 20;

/// Whether a directory walk should look inside the file `name` for
/// references: its name ends in `.json` (any case). Content decides.
pub fn has_json_extension(name: &str) -> bool {
    name.rsplit_once('.')
        .is_some_and(|(stem, ext)| !stem.is_empty() && ext.eq_ignore_ascii_case("json"))
}

/// Read the references file at `path` (a local path or a URL) into a
/// store; `Ok(None)` when it is no references file. An error for a file
/// that is unreadable, not JSON, or references in a form we do not read.
/// Its references may lead where `opts` allows ([`Options::scope_for`]).
pub fn load(path: &Path, opts: &Options) -> Result<Option<RefStore>> {
    let real = paths::real_path(path).map_err(|e| Error::Io {
        path: path.display().to_string(),
        source: e,
    })?;
    let looks_like_json =
        |head: &[u8]| head.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    let Some(text) =
        paths::read_document(opts.files.as_ref(), &real, MAX_REFS_BYTES, looks_like_json)?
    else {
        return Ok(None);
    };
    let err = |source| Error::Format {
        path: real.display().to_string(),
        source: Box::new(source),
    };
    let doc: serde_json::Value =
        serde_json::from_slice(&text).map_err(|e| err(RefsError::Json(Arc::new(e))))?;
    drop(text);
    let Some(parsed) = refs::parse(doc).map_err(err)? else {
        return Ok(None);
    };
    let scope = opts.scope_for(&real);
    let check = scope.clone();
    let from = real.clone();
    Ok(Some(RefStore::new(
        &real,
        parsed.refs,
        scope,
        move |key, url| resolve(&from, &check, key, url),
    )))
}

/// The location `url` names, made by the references file `from`: a local
/// path (relative to `from`'s directory, absolute, `file://`) or a URL
/// (absolute, or relative to a remote `from`), if `scope` allows it
/// ([`Scope`]).
pub fn resolve(
    from: &Path,
    scope: &Scope,
    key: &str,
    url: &str,
) -> std::result::Result<PathBuf, RefsError> {
    scope.resolve(from, url).map_err(|r| match r {
        Refusal::Scheme | Refusal::NoUrls => RefsError::Scheme {
            key: key.to_string(),
            url: url.to_string(),
        },
        Refusal::Outside(resolved) => RefsError::Outside {
            key: key.to_string(),
            url: remote::strip_secrets(url),
            resolved: PathBuf::from(resolved),
            roots: scope.describe(),
        },
    })
}

/// Open the references file at `path` as a Zarr hierarchy; `Ok(None)`
/// when it is no references file. An array whose keys hold a refused
/// reference (another scheme, outside the roots, malformed) is moved to
/// [`Hierarchy::skipped`] with the first such reason.
pub fn open(path: &Path, opts: &Options) -> Result<Option<Hierarchy>> {
    let Some(store) = load(path, opts)? else {
        return Ok(None);
    };
    let store = Arc::new(store);
    let mut h = zarr::open_store(store.clone(), opts.cache.clone())?;
    let refused: Vec<(&str, &RefsError)> = store.refused().collect();
    if refused.is_empty() {
        return Ok(Some(h));
    }
    let nodes = std::mem::take(&mut h.nodes);
    for node in nodes {
        let prefix = if node.path.is_empty() {
            String::new()
        } else {
            format!("{}/", node.path)
        };
        let bad = node
            .array
            .as_ref()
            .and_then(|_| refused.iter().find(|(k, _)| k.starts_with(&prefix)));
        match bad {
            Some((_, e)) => {
                log::debug!("skipping array {:?}: {e}", node.path);
                h.skipped.push(Error::Format {
                    path: store.describe(""),
                    source: Box::new((*e).clone()),
                });
            }
            None => h.nodes.push(node),
        }
    }
    Ok(Some(h))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::local::confine::Roots;
    use crate::storage::remote::{Remote, RemoteFiles};

    #[test]
    fn resolves_local_urls_and_refuses_the_rest() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("sub")).unwrap();
        std::fs::write(root.join("sub/a.nc"), b"x").unwrap();
        let scope = Scope::new(Arc::new(Roots::new([root.clone()])), None);
        let from = root.join("sub/refs.json");
        let r = |url: &str| resolve(&from, &scope, "k", url);
        assert_eq!(r("a.nc").unwrap(), root.join("sub/a.nc"));
        assert_eq!(r("../sub/a.nc").unwrap(), root.join("sub/../sub/a.nc"));
        let abs = root.join("sub/a.nc").display().to_string();
        assert_eq!(r(&abs).unwrap(), root.join("sub/a.nc"));
        assert_eq!(r(&format!("file://{abs}")).unwrap(), root.join("sub/a.nc"));
        assert_eq!(
            r(&format!("file://localhost{abs}")).unwrap(),
            root.join("sub/a.nc")
        );
        // Missing files are fine here (reads will fail), if inside.
        assert!(r("missing.nc").is_ok());
        for url in [
            "s3://b/a.nc",
            "http://h/a.nc",
            "memory://a",
            "simplecache::s3://b/k",
        ] {
            assert!(matches!(r(url), Err(RefsError::Scheme { .. })), "{url}");
        }
        for url in ["../../x.nc", "/etc/passwd", "file:///etc/passwd"] {
            let e = r(url).unwrap_err();
            assert!(matches!(e, RefsError::Outside { .. }), "{url}: {e}");
            assert!(e.to_string().contains(url), "{e}");
        }
    }

    #[test]
    fn urls_resolve_only_under_the_allowed_url_roots() {
        let tmp = tempfile::tempdir().unwrap();
        let roots = Roots::new([tmp.path().to_path_buf()]);
        let allowed = remote::Location::parse("s3://bucket/refs").unwrap();
        let files = RemoteFiles::new(&Remote::default(), vec![allowed]).unwrap();
        let scope = Scope::new(Arc::new(roots), Some(Arc::new(files)));
        let from = tmp.path().join("refs.json");
        let r = |url: &str| resolve(&from, &scope, "k", url);
        assert_eq!(
            r("s3://bucket/refs/a/b.nc").unwrap(),
            PathBuf::from("s3://bucket/refs/a/b.nc")
        );
        for url in [
            "s3://bucket/refs/../other/b.nc",
            "s3://bucket/refs/%2e%2e/other/b.nc",
            "s3://bucket/refs/%2E%2E%2Fother%2Fb.nc",
            "s3://bucket/refsX/b.nc",
            "s3://bucket/b.nc",
            "s3://other/refs/b.nc",
            "gs://bucket/refs/b.nc",
            "https://bucket.s3.amazonaws.com/other/b.nc",
            "http://127.0.0.1:1/bucket/refs/b.nc",
        ] {
            let e = r(url).unwrap_err();
            assert!(matches!(e, RefsError::Outside { .. }), "{url}: {e}");
        }
        // Local paths keep their own rules; other schemes stay refused.
        assert!(matches!(r("memory://a"), Err(RefsError::Scheme { .. })));
        assert!(matches!(r("/etc/passwd"), Err(RefsError::Outside { .. })));
    }

    #[test]
    fn json_extension() {
        assert!(has_json_extension("refs.json"));
        assert!(has_json_extension("a.b.JSON"));
        assert!(!has_json_extension(".json"));
        assert!(!has_json_extension("refs.nc"));
        assert!(!has_json_extension("json"));
    }
}
