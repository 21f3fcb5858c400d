//! Requests inside an archive ([`super::datasets`]): looking a name up in
//! one of its directories, listing one, and opening the dataset a request
//! needs. A directory of the archive is no tree node: it is listed from
//! the source ([`crate::formats::dataset::archive::Archive::list`]) when
//! read, and a name in it is looked up by what the archive finds there
//! ([`Archive::find`]). A plain directory or a dataset that is a directory
//! answers without opening anything; a single-array Zarr store (one file,
//! whose size needs its metadata) and a `*.json` file (a dataset only if
//! it holds references) are opened to answer. The handlers in
//! [`super`] call these for [`super::Place::Listed`] directories.
//!
//! [`Archive::find`]: crate::formats::dataset::archive::Archive::find

use std::collections::HashSet;
use std::sync::Arc;
use std::time::SystemTime;

use super::datasets::{Datasets, Lazy};
use super::tree::{NAME_MAX, Node, Tree, child_path, name_of, parent_of};
use super::{
    Attr, CONTROL_DIR, FsError, FsResult, Kind, Listed, Place, SlabFs, failures, push_sorted,
};
use crate::formats::dataset::Found;

impl SlabFs {
    /// The tree of the archive's dataset at `unit` (found as `found`, if
    /// the caller knows), opened if it is not; a Zarr store opened is
    /// watched whole from now on (its chunks live in directories of
    /// their own).
    pub(super) fn open_unit(
        &self,
        lazy: &Lazy,
        unit: &str,
        found: Option<Found>,
    ) -> FsResult<Option<Arc<Tree>>> {
        if let Some(t) = lazy.get(unit) {
            return Ok(Some(t));
        }
        let found = found.or_else(|| lazy.archive.find(unit));
        let Some(found) = found else { return Ok(None) };
        let tree = lazy.open(unit, found, &self.config, &self.failures, SystemTime::now())?;
        if let Some(t) = &tree {
            self.ask_recheck(unit, t.recheck_in);
            // The directories it lists (an NcML scan's), watched so that
            // a file landing there re-opens it.
            let source = lazy.archive.source();
            for dir in &t.watch {
                if let Ok(rel) = dir.strip_prefix(source) {
                    self.touch(&rel.display().to_string(), true);
                }
            }
        }
        if tree.is_some() && found.is_directory_dataset() {
            self.touch(unit, true);
        }
        Ok(tree)
    }

    /// A lookup of `name` in the archive's directory `dir`: `None` when
    /// it is not there.
    pub(super) fn lookup_listed(&self, dir: &str, name: &str) -> Option<FsResult<Attr>> {
        let Datasets::Archive(lazy) = &self.datasets else {
            return None;
        };
        let rel = child_path(dir, name);
        // A view beside a single-array store (`a.zarr.json`), where no
        // dataset has the name; the sidecar of one that fails to open says
        // why.
        let view = || {
            let (stem, _) = name.rsplit_once('.')?;
            let unit = child_path(dir, stem);
            let found = lazy.archive.find(&unit).filter(|f| f.is_single())?;
            Some(
                self.lookup_in_unit(lazy, &unit, found, &rel)
                    .or_else(|e| self.failed_sidecar_attr(&unit, &rel, e)),
            )
        };
        let found = match lazy.archive.find(&rel) {
            None => return view(),
            // A dataset only if it holds references: opened to know.
            Some(found) if found.by_content() => match self.open_unit(lazy, &rel, Some(found)) {
                Ok(None) => return view(),
                Ok(Some(_)) => return Some(self.lookup_in_unit(lazy, &rel, found, &rel)),
                Err(e) => return Some(Err(e)),
            },
            Some(found) => found,
        };
        // A dataset open since before it changed what it is (a directory
        // that became a single-array store, or a group): opened again.
        let kind = match found.is_single() {
            true => Kind::File,
            false => Kind::Directory,
        };
        if let Some(tree) = lazy.get(&rel)
            && tree.node(&rel).map(Node::kind) != Some(kind)
        {
            lazy.close(&rel);
        }
        Some(match found {
            Found::Directory => {
                let ino = self.inodes.remember(&rel, Kind::Directory, None);
                // Every time: the directory may have been removed and
                // created again while the kernel held it (the refresh
                // thread ignores a directory already watched).
                self.touch(&rel, false);
                Ok(self.attr(ino, &Place::Listed(Arc::from(rel))))
            }
            // One file: its size needs the open.
            _ if found.is_single() => self.lookup_in_unit(lazy, &rel, found, &rel),
            _ => {
                let ino = self.inodes.remember(&rel, Kind::Directory, Some(&rel));
                // The tree open now, if its root is this directory (a
                // refresh may have swapped it since the check above).
                let open = lazy
                    .get(&rel)
                    .filter(|t| t.node(&rel).map(Node::kind) == Some(Kind::Directory));
                Ok(match open {
                    Some(tree) => self.attr(
                        ino,
                        &Place::Node {
                            tree,
                            path: Arc::from(rel),
                        },
                    ),
                    None => self.attr(ino, &Place::Closed(Arc::from(rel))),
                })
            }
        })
    }

    /// A lookup of the node `path` of the dataset at `unit` (found as
    /// `found`), opened.
    fn lookup_in_unit(&self, lazy: &Lazy, unit: &str, found: Found, path: &str) -> FsResult<Attr> {
        let tree = self
            .open_unit(lazy, unit, Some(found))?
            .ok_or_else(|| FsError::NotFound(path.to_string()))?;
        let kind = tree
            .node(path)
            .ok_or_else(|| FsError::NotFound(path.to_string()))?
            .kind();
        let ino = self.inodes.remember(path, kind, Some(unit));
        Ok(self.attr(
            ino,
            &Place::Node {
                tree,
                path: Arc::from(path),
            },
        ))
    }

    /// The entries of the archive's directory `dir` (listed from the
    /// source now), each with the dataset it belongs to.
    pub(super) fn archive_listing(&self, lazy: &Lazy, dir: &str) -> FsResult<Vec<Listed>> {
        let mut out: Vec<Listed> = Vec::new();
        let (at, now) = (failures::mount_path(dir), SystemTime::now());
        let found = match lazy.archive.list(dir) {
            Ok(found) => {
                let list = failures::Kind::List;
                self.failures
                    .resolve(|f| f.kind == list && f.path == at, now);
                found
            }
            // Removed while the kernel held it: gone, not broken.
            Err(crate::error::Error::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                self.failures.gone(&at, now);
                return Err(FsError::NotFound(dir.to_string()));
            }
            Err(e) => {
                let reason = failures::reason(&e);
                self.failures
                    .record(failures::Kind::List, &at, &reason, now);
                return Err(FsError::List {
                    path: dir.to_string(),
                    source: Box::new(e),
                });
            }
        };
        // Datasets and directories first, then the views beside
        // single-array stores where no listed entry has the name
        // (as the eager tree places them).
        let mut views: Vec<Listed> = Vec::new();
        for (name, f) in &found {
            let rel = child_path(dir, name);
            let unit = Some(Arc::from(rel.as_str()));
            match f {
                Found::Directory => out.push((name.clone(), Kind::Directory, None)),
                // A single-array store: the array file and its
                // views, known by name (the ENVI header only if
                // ENVI can describe the array: that needs it open).
                f if f.is_single() && !self.config.views.hdr => {
                    let v = self.config.views;
                    if v.raw {
                        out.push((name.clone(), Kind::File, unit.clone()));
                    }
                    for (on, ext) in [(v.json, ".json"), (v.npy, ".npy")] {
                        let n = format!("{name}{ext}");
                        if on && n.len() <= NAME_MAX as usize {
                            views.push((n, Kind::File, unit.clone()));
                        }
                    }
                }
                f if f.is_single() || f.by_content() => {
                    // Only its tree says: the array and its views
                    // beside it, or whether it is references.
                    match self.open_unit(lazy, &rel, Some(*f)) {
                        Ok(Some(tree)) => {
                            for (p, kind) in tree.paths() {
                                if parent_of(p) == dir {
                                    let entry = (name_of(p).to_string(), kind, unit.clone());
                                    if p == rel {
                                        out.push(entry)
                                    } else {
                                        views.push(entry)
                                    }
                                }
                            }
                        }
                        // No references: no dataset, not listed.
                        Ok(None) => {}
                        // A dataset that fails: listed, failing
                        // inside (as every other one).
                        Err(_) => {
                            let kind = match f.is_single() {
                                true => Kind::File,
                                false => Kind::Directory,
                            };
                            out.push((name.clone(), kind, unit));
                        }
                    }
                }
                _ => out.push((name.clone(), Kind::Directory, unit)),
            }
        }
        let names: HashSet<String> = out.iter().map(|(n, _, _)| n.clone()).collect();
        views.retain(|(n, _, _)| !names.contains(n));
        out.extend(views);
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out.dedup_by(|a, b| a.0 == b.0);
        if dir.is_empty() {
            push_sorted(&mut out, CONTROL_DIR, Kind::Directory);
        }
        Ok(out)
    }
}
