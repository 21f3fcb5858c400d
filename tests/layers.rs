//! The tree's layers, checked: no module imports a layer above its own.
//!
//! `src/` is grouped by layer (docs/ARCHITECTURE.md):
//!
//! ```text
//! cli      src/main.rs, src/cli.rs, src/cli/
//! fs       src/fs/
//! formats  src/formats/          (inside: dataset > nca > netcdf > packed > netcdf3, kerchunk, hdf5 > zarr)
//! engine   src/engine/    codec  src/codec/    (peers: neither imports the other)
//! storage  src/storage/
//! base     src/error.rs, src/dtype.rs, src/logging.rs, src/histogram.rs
//! ```
//!
//! This test reads every source file, finds each path through the crate
//! (`crate::x::...`, `slabfs::x::...` in the binary, grouped `use` lists
//! included; comments and string literals skipped, so a doc link to a
//! higher layer is fine) and fails naming the file and the import when one
//! points up the stack or sideways between peers. Inside `formats/` one
//! format may build on another only downwards, in the order above.
//!
//! One more seam: no file under `src/formats/` names `storage::remote`
//! (the network code and its state). Formats reach URLs through the
//! storage traits (`files::Network`, `files::UrlFiles`, `ReadAt`) and
//! name them through `storage::location`; `fs` and `cli` wire the remote
//! state in. A format's unit tests (its `#[cfg(test)] mod tests`) may
//! wire one too, as the CLI does.

use std::path::{Path, PathBuf};

/// The layers, bottom first; a module may import its own layer and any
/// layer of a lower rank. Engine and codec share a rank and are peers.
fn layer_of(file: &str) -> Option<(&'static str, u32)> {
    let prefixes: [(&str, &str, u32); 9] = [
        ("src/storage/", "storage", 1),
        ("src/engine/", "engine", 2),
        ("src/codec/", "codec", 2),
        ("src/formats/", "formats", 3),
        ("src/fs/", "fs", 4),
        ("src/cli/", "cli", 5),
        ("src/cli.rs", "cli", 5),
        ("src/main.rs", "cli", 5),
        ("src/lib.rs", "root", 9),
    ];
    for (prefix, name, rank) in prefixes {
        if file.starts_with(prefix) {
            return Some((name, rank));
        }
    }
    match file {
        "src/error.rs" | "src/dtype.rs" | "src/logging.rs" | "src/histogram.rs" => {
            Some(("base", 0))
        }
        _ => None,
    }
}

/// The layer a path's first segment after `crate::` names.
fn layer_named(segment: &str) -> Option<(&'static str, u32)> {
    Some(match segment {
        "error" | "dtype" | "logging" | "histogram" => ("base", 0),
        "storage" => ("storage", 1),
        "engine" => ("engine", 2),
        "codec" => ("codec", 2),
        "formats" => ("formats", 3),
        "fs" => ("fs", 4),
        "cli" => ("cli", 5),
        _ => return None,
    })
}

/// Ranks of the modules inside `formats/`: one may import another of a
/// lower rank only.
fn format_rank(module: &str) -> Option<u32> {
    Some(match module {
        "zarr" => 0,
        // netcdf3 reads remote files in blocks through a ZarrArray.
        "netcdf3" | "kerchunk" | "hdf5" => 1,
        "packed" => 2,
        "netcdf" => 3,
        "nca" => 4,
        "dataset" => 5,
        _ => return None,
    })
}

/// `text` with comments, string and char literals blanked out.
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                    i += 1;
                }
                i += 2;
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                out.push_str("\"\"");
            }
            // Char literals holding a quote: `'"'`, `'\''`, `'\"'`.
            b'\'' if b.get(i + 2) == Some(&b'\'') => {
                i += 3;
                out.push_str("' '");
            }
            b'\'' if b.get(i + 1) == Some(&b'\\') && b.get(i + 3) == Some(&b'\'') => {
                i += 4;
                out.push_str("' '");
            }
            c => {
                out.push(c as char);
                i += 1;
            }
        }
    }
    out
}

/// Every path through the crate in `code`: the segments after `crate::`
/// (or `slabfs::`), one list per path, grouped lists expanded.
fn crate_paths(code: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    for root in ["crate::", "slabfs::"] {
        let mut from = 0;
        while let Some(at) = code[from..].find(root) {
            let start = from + at;
            from = start + root.len();
            let before = code[..start].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
                continue;
            }
            expand(&code[from..], Vec::new(), &mut paths);
        }
    }
    paths
}

/// Expand the path starting at `rest` (after `prefix`) into `out`.
fn expand(rest: &str, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let ident: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    if ident.is_empty() {
        if let Some(group) = rest.strip_prefix('{') {
            // Split the group's top level at commas.
            let mut depth = 0;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        expand(item.trim(), prefix.clone(), out);
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
            if !item.trim().is_empty() {
                expand(item.trim(), prefix, out);
            }
        } else if !prefix.is_empty() {
            out.push(prefix);
        }
        return;
    }
    let mut path = prefix;
    path.push(ident.clone());
    match rest[ident.len()..].strip_prefix("::") {
        Some(more) => expand(more, path, out),
        None => out.push(path),
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// What is wrong with the imports of the source file `file` (a path
/// relative to the crate root) holding `text`.
fn violations(file: &str, text: &str) -> Vec<String> {
    let Some((own, rank)) = layer_of(file) else {
        return vec![format!("{file}: in no layer (add it to tests/layers.rs)")];
    };
    let own_format = file
        .strip_prefix("src/formats/")
        .map(|rest| rest.split(['/', '.']).next().unwrap_or(""));
    let mut bad = Vec::new();
    let code = code_only(text);
    if file.starts_with("src/formats/") {
        bad.extend(names_remote(file, &code));
    }
    for path in crate_paths(&code) {
        let Some((target, target_rank)) = layer_named(&path[0]) else {
            continue; // a re-export at the root (`crate::Error`), a macro...
        };
        let shown = path.join("::");
        if target != own && target_rank >= rank {
            bad.push(format!("{file} ({own}) imports {shown} ({target})"));
        }
        if let (Some(own_format), "formats", Some(module)) = (own_format, target, path.get(1)) {
            let (Some(a), Some(b)) = (format_rank(own_format), format_rank(module)) else {
                if format_rank(own_format).is_none() && own_format != "mod" {
                    bad.push(format!("{file}: formats/{own_format} has no rank"));
                }
                continue;
            };
            if module != own_format && b >= a {
                bad.push(format!(
                    "{file} (formats/{own_format}) imports {shown}, not below it"
                ));
            }
        }
    }
    bad
}

/// The places the code of a file under `src/formats/` (comments and
/// strings blanked) names `storage::remote`: a path through the crate
/// (grouped `use` lists included), or `storage::remote` after a `use` of
/// `crate::storage`. Its unit tests are not looked at.
fn names_remote(file: &str, code: &str) -> Vec<String> {
    let code = code
        .find("#[cfg(test)]\nmod tests")
        .map_or(code, |at| &code[..at]);
    let mut bad: Vec<String> = crate_paths(code)
        .into_iter()
        .filter(|p| p.len() >= 2 && p[0] == "storage" && p[1] == "remote")
        .map(|p| {
            format!(
                "{file} (formats) names {}: use the storage traits",
                p.join("::")
            )
        })
        .collect();
    let mut from = 0;
    while let Some(at) = code[from..].find("storage::remote") {
        let start = from + at;
        from = start + "storage::remote".len();
        let before = code[..start].chars().next_back();
        let after = code[from..].chars().next();
        let whole = !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
            && !after.is_some_and(|c| c.is_alphanumeric() || c == '_');
        // `crate::storage::remote` is a crate path, reported above.
        if whole && !code[..start].ends_with("crate::") {
            bad.push(format!(
                "{file} (formats) names storage::remote: use the storage traits"
            ));
        }
    }
    bad
}

#[test]
fn no_module_imports_a_layer_above_its_own() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    assert!(files.len() > 50, "found only {} source files", files.len());
    let mut bad = Vec::new();
    for path in &files {
        let rel = path.strip_prefix(root).unwrap().to_str().unwrap();
        bad.extend(violations(rel, &std::fs::read_to_string(path).unwrap()));
    }
    assert!(
        bad.is_empty(),
        "imports against the layers:\n{}",
        bad.join("\n")
    );
}

/// The checker itself finds what it must: upward imports (plain and in
/// groups), peer imports, formats out of order; and ignores comments and
/// strings.
#[test]
fn the_checker_sees_upward_imports() {
    let up = violations("src/storage/store.rs", "use crate::formats::nca::Options;");
    assert_eq!(up.len(), 1, "{up:?}");
    let grouped = violations(
        "src/error.rs",
        "use crate::{dtype::DataType, codec::{CodecError, x}};",
    );
    assert_eq!(grouped.len(), 2, "{grouped:?}");
    let peer = violations("src/codec/mod.rs", "fn f() { crate::engine::cache::x(); }");
    assert_eq!(peer.len(), 1, "{peer:?}");
    let sideways = violations("src/formats/netcdf3/mod.rs", "use crate::formats::packed;");
    assert_eq!(sideways.len(), 1, "{sideways:?}");
    let binary = violations("src/fs/mod.rs", "use slabfs::fs::x; use crate::cli::Cli;");
    assert_eq!(binary.len(), 1, "{binary:?}");
    let quiet = violations(
        "src/storage/files.rs",
        "//! see [`crate::fs::refresh`]\nlet t = \"slabfs::formats::nca\"; let q = '\"'; use crate::error::Error; /* crate::fs */",
    );
    assert!(quiet.is_empty(), "{quiet:?}");
    let fine = violations(
        "src/formats/dataset.rs",
        "use crate::formats::{Options, nca, zarr};",
    );
    assert!(fine.is_empty(), "{fine:?}");
}

/// Formats never name the network code: plain paths, grouped `use`
/// lists and a path through `use crate::storage` are caught; doc links,
/// strings, the layers allowed to wire it (fs) and a format's unit tests
/// are not.
#[test]
fn the_checker_sees_formats_naming_the_network() {
    let plain = violations(
        "src/formats/netcdf3/variable.rs",
        "use crate::storage::remote::COALESCE_GAP;",
    );
    assert_eq!(plain.len(), 1, "{plain:?}");
    let grouped = violations(
        "src/formats/dataset.rs",
        "use crate::storage::{files::Files, remote::{self, RemoteFiles}};",
    );
    assert_eq!(grouped.len(), 2, "{grouped:?}");
    let inline = violations(
        "src/formats/mod.rs",
        "fn f() { if crate::storage::remote::url_of(p).is_some() {} }",
    );
    assert_eq!(inline.len(), 1, "{inline:?}");
    let through = violations(
        "src/formats/kerchunk/store.rs",
        "use crate::storage;\nfn f() { storage::remote::latency(); }",
    );
    assert_eq!(through.len(), 1, "{through:?}");
    let quiet = violations(
        "src/formats/kerchunk/mod.rs",
        "//! [`crate::storage::remote::RemoteFiles`]\nlet s = \"storage::remote\";\n\
         use crate::storage::location::url_of;\n\
         #[cfg(test)]\nmod tests {\n    use crate::storage::remote::Remote;\n}",
    );
    assert!(quiet.is_empty(), "{quiet:?}");
    let wiring = violations(
        "src/fs/refresh.rs",
        "use crate::storage::remote::{self, Remote};",
    );
    assert!(wiring.is_empty(), "{wiring:?}");
}
