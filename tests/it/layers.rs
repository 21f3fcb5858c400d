//! The tree's layers, checked: no module imports a layer above its own.
//!
//! `src/` is grouped by layer (docs/ARCHITECTURE.md):
//!
//! ```text
//! cli      src/main.rs, src/cli/
//! fs       src/fs/
//! formats  src/formats/          (inside: dataset > registry > nca > netcdf > packed, kerchunk, icechunk > zarr, netcdf3, hdf5 > chunked, entry)
//! engine   src/engine/    codec  src/codec/    storage  src/storage/    (peers: none imports another)
//! base     src/error.rs, src/dtype.rs, src/logging.rs, src/histogram.rs,
//!          src/metrics/
//! ```
//!
//! It also fails on a circle of imports inside a folder: files of one
//! directory (a module and its children) that import one another round,
//! directly or through their parent (see [`circles`] for what counts and
//! why), naming the files and one way round with the import behind each
//! step.
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
//!
//! And the storage seam itself: no file under `src/formats/` opens,
//! creates or reads a file with `std::fs` ([`opens_files`] says what is
//! allowed and why).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

/// The layers, bottom first; a module may import its own layer and any
/// layer of a lower rank. Engine, codec and storage share a rank and are
/// peers: formats combine them.
fn layer_of(file: &str) -> Option<(&'static str, u32)> {
    let prefixes: [(&str, &str, u32); 9] = [
        ("src/metrics/", "base", 0),
        ("src/storage/", "storage", 2),
        ("src/engine/", "engine", 2),
        ("src/codec/", "codec", 2),
        ("src/formats/", "formats", 3),
        ("src/fs/", "fs", 4),
        ("src/cli/", "cli", 5),
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
        "error" | "dtype" | "logging" | "histogram" | "metrics" => ("base", 0),
        "storage" => ("storage", 2),
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
        // What a format is to discovery (its registry entry, the dataset
        // it opens into, the options it opens with): every format's
        // entry is one of these; it names no format.
        "entry" => 0,
        // The chunked array every chunked format reads through; it knows
        // no metadata dialect. netcdf3 reads remote files in blocks
        // through it, hdf5 datasets are chunked arrays over the file.
        "chunked" => 0,
        // Peers: none imports another.
        "zarr" | "netcdf3" | "hdf5" => 1,
        // kerchunk opens its references as a Zarr store, icechunk a
        // repository's snapshot (both are stores the Zarr reader opens).
        "packed" | "kerchunk" | "icechunk" => 2,
        "netcdf" => 3,
        "nca" => 4,
        // NcML members are datasets of any format (opened through the
        // entries); it takes NCA's fragment URI rules.
        "ncml" => 5,
        // The table of every format's entry.
        "registry" => 6,
        "dataset" => 7,
        // `slabfs aggregate`: members opened through the opener, written
        // out as NcML or NCA.
        "series" => 8,
        _ => return None,
    })
}

/// The number of `#`s of the raw string literal (`r"`, `r#"`, `br#"`...)
/// whose `r` is `b[i]`, if one starts there.
fn raw_start(b: &[u8], i: usize) -> Option<usize> {
    let ident = |j: usize| b[j].is_ascii_alphanumeric() || b[j] == b'_';
    // What comes before the literal (before its `b` prefix if it has one)
    // is not part of a name: `bar"` is not a raw string.
    let before = match i.checked_sub(1) {
        Some(j) if b[j] == b'b' => j.checked_sub(1),
        j => j,
    };
    if before.is_some_and(ident) {
        return None;
    }
    let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
    (b.get(i + 1 + hashes) == Some(&b'"')).then_some(hashes)
}

/// `text` with comments, string and char literals blanked out.
pub(crate) fn code_only(text: &str) -> String {
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
            // Raw strings (`r"..."`, `r#"..."#`, `br#"..."#`): no escapes,
            // and they may hold quotes and braces.
            b'r' if raw_start(b, i).is_some() => {
                let hashes = raw_start(b, i).unwrap_or(0);
                let close: Vec<u8> = std::iter::once(b'"')
                    .chain(std::iter::repeat_n(b'#', hashes))
                    .collect();
                i += 2 + hashes;
                while i < b.len() && !b[i..].starts_with(&close) {
                    i += 1;
                }
                i += close.len();
                out.push_str("\"\"");
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
        paths.extend(paths_from(code, root).into_iter().map(|(_, path)| path));
    }
    paths
}

/// Every path in `code` that starts with `root` (`"crate::"`, `"super::"`,
/// `"gzip::"`...) as a whole word, not as a later segment of another path:
/// where it starts and the segments after `root`, grouped lists expanded.
fn paths_from(code: &str, root: &str) -> Vec<(usize, Vec<String>)> {
    let mut paths = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find(root) {
        let start = from + at;
        from = start + root.len();
        let before = code[..start].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || "_$:.'".contains(c)) {
            continue;
        }
        let mut found = Vec::new();
        expand(&code[from..], Vec::new(), &mut found);
        paths.extend(found.into_iter().map(|path| (start, path)));
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

/// The module path of the source file `file` (relative to the crate
/// root): `src/codec/gzip.rs` is `codec::gzip`, `src/codec/mod.rs` is
/// `codec`, `src/lib.rs` is the empty path. The binary's files (`main.rs`,
/// `cli/`) sit under a root of their own, `<bin>`.
fn module_of(file: &str) -> Vec<String> {
    let rest = file.strip_prefix("src/").unwrap_or(file);
    let rest = rest.strip_suffix(".rs").unwrap_or(rest);
    let mut path: Vec<String> = rest.split('/').map(str::to_string).collect();
    if path
        .last()
        .is_some_and(|last| last == "mod" || last == "lib")
    {
        path.pop();
    }
    if path == ["main"] {
        path = vec![BIN.to_string()];
    } else if path.first().is_some_and(|first| first == "cli") {
        path.insert(0, BIN.to_string());
    }
    path
}

const BIN: &str = "<bin>";

/// A `mod name { ... }` written inside a file: where its body runs, its
/// name, and whether it is `#[cfg(test)]`.
struct Inline {
    body: std::ops::Range<usize>,
    name: String,
    test: bool,
}

/// The inline modules of `code` (comments and strings already blanked).
fn inline_modules(code: &str) -> Vec<Inline> {
    let mut found = Vec::new();
    for (start, _) in paths_from(code, "mod ") {
        let rest = &code[start + 4..];
        let name: String = rest
            .trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let after = rest.trim_start()[name.len()..].trim_start();
        if name.is_empty() || !after.starts_with('{') {
            continue; // `mod name;`: a file of its own
        }
        let open = code.len() - after.len();
        let mut depth = 0;
        let mut end = code.len();
        for (i, c) in code[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + i;
                        break;
                    }
                }
                _ => {}
            }
        }
        let head = &code[..start];
        let head = &head[head.rfind([';', '{', '}']).map_or(0, |i| i + 1)..];
        found.push(Inline {
            body: open..end,
            name,
            test: head.contains("cfg(test)"),
        });
    }
    found
}

/// The `use` statements of `code`: the bytes each covers (from `use` to
/// its `;`) and whether it re-exports (`pub use`, `pub(crate) use`...).
fn use_statements(code: &str) -> Vec<(std::ops::Range<usize>, bool)> {
    let mut starts: Vec<usize> = paths_from(code, "use ")
        .into_iter()
        .map(|(at, _)| at)
        .collect();
    starts.dedup();
    starts
        .into_iter()
        .map(|start| {
            let head = &code[..start];
            let head = &head[head.rfind([';', '{', '}', ']']).map_or(0, |i| i + 1)..];
            let end = start + code[start..].find(';').unwrap_or(code.len() - start);
            (start..end, head.trim_start().starts_with("pub"))
        })
        .collect()
}

/// One import: the file it is written in and the path as written.
type Import = (String, String);

/// Every path through the crate written in one file, resolved to the
/// module it starts from: (where, the absolute module path, as written,
/// inside a `#[cfg(test)]` module, inside a re-export).
type Found = Vec<(usize, Vec<String>, String, bool, bool)>;

/// The paths of the file `file` (module `own`) holding `code`, given the
/// crate's modules: `crate::`, `slabfs::`, `super::`, `self::`, and (in a
/// module with children) a child named bare.
fn paths_of(own: &[String], code: &str, modules: &BTreeMap<Vec<String>, String>) -> Found {
    let inline = inline_modules(code);
    let uses = use_statements(code);
    let crate_root: Vec<String> = own.iter().take(1).filter(|m| *m == BIN).cloned().collect();
    // The module a position is in: the file's, and inline modules around it.
    let here = |at: usize| -> Vec<String> {
        let mut inside: Vec<&Inline> = inline.iter().filter(|m| m.body.contains(&at)).collect();
        inside.sort_by_key(|m| m.body.start);
        [
            own.to_vec(),
            inside.iter().map(|m| m.name.clone()).collect(),
        ]
        .concat()
    };
    let mut found = Vec::new();
    for (root, base) in [("crate::", crate_root), ("slabfs::", Vec::new())] {
        for (at, path) in paths_from(code, root) {
            let shown = format!("{root}{}", path.join("::"));
            found.push((at, [base.clone(), path].concat(), shown));
        }
    }
    for (at, mut path) in paths_from(code, "super::") {
        let mut module = here(at);
        module.pop();
        let mut shown = "super::".to_string();
        while path.first().is_some_and(|s| s == "super") {
            path.remove(0);
            module.pop();
            shown.push_str("super::");
        }
        shown.push_str(&path.join("::"));
        found.push((at, [module, path].concat(), shown));
    }
    for (at, path) in paths_from(code, "self::") {
        let shown = format!("self::{}", path.join("::"));
        found.push((at, [here(at), path].concat(), shown));
    }
    // A child named bare, as a parent may: only in the file's own scope
    // (outside inline modules), and in a `use` only as its first segment
    // (`use zstd::X` and `zstd::f()`, not the `{zstd::X}` of
    // `use crate::other::{zstd::X}`).
    let children = modules
        .keys()
        .filter(|m| m.len() == own.len() + 1 && m.starts_with(own));
    for child in children {
        let name = child.last().unwrap();
        for (at, path) in paths_from(code, &format!("{name}::")) {
            let in_use = uses.iter().find(|(range, _)| range.contains(&at));
            let first = in_use.is_none_or(|(range, _)| code[range.start + 3..at].trim().is_empty());
            if first && !inline.iter().any(|m| m.body.contains(&at)) {
                let shown = format!("{name}::{}", path.join("::"));
                found.push((at, [child.clone(), path].concat(), shown));
            }
        }
    }
    found
        .into_iter()
        .map(|(at, path, shown)| {
            let test = inline.iter().any(|m| m.test && m.body.contains(&at));
            let reexport = uses
                .iter()
                .any(|(range, public)| *public && range.contains(&at));
            (at, path, shown, test, reexport)
        })
        .collect()
}

/// The file module that an absolute path starts in: the longest module
/// that begins it, followed through re-exports (`super::Format` where the
/// parent says `pub use header::Format` is `header`).
fn target_of(
    path: &[String],
    modules: &BTreeMap<Vec<String>, String>,
    exports: &BTreeMap<Vec<String>, Vec<String>>,
) -> Option<Vec<String>> {
    let mut path = path.to_vec();
    for _ in 0..8 {
        let module = (0..=path.len())
            .rev()
            .map(|n| &path[..n])
            .find(|m| modules.contains_key(*m))?;
        let Some(next) = path.get(module.len()) else {
            return Some(module.to_vec());
        };
        let mut name = module.to_vec();
        name.push(next.clone());
        match exports.get(&name) {
            Some(real) if !real.starts_with(&name) => {
                path = [real.clone(), path[module.len() + 1..].to_vec()].concat();
            }
            _ => return Some(module.to_vec()),
        }
    }
    None
}

/// The circles of imports inside folders among `files` (each a path
/// relative to the crate root and its text), one message per circle.
///
/// A folder is a module and its children: `codec/mod.rs` with every
/// `codec/*.rs`, `formats/dataset/mod.rs` with `formats/dataset/remote.rs`,
/// `storage/mod.rs` with its files and its `remote/` folder taken as one
/// member (an import into or out of `remote/` is an import of that
/// member). Each import joins two members of the one folder that holds
/// both files below it: `a.rs` writing `super::b::X`, `crate::codec::b::X`
/// or (in a `mod.rs`) `b::X`; an item the parent re-exports counts as its
/// child's (`super::Format` is `header.rs` when `mod.rs` says
/// `pub use header::Format`).
///
/// A circle is two or more children that reach one another: directly
/// (`a.rs` uses `b.rs`, which uses `a.rs`) or through the parent (`a.rs`
/// uses `super::Context` and `mod.rs` builds its `Context` from `b.rs`,
/// which uses `a.rs`). What does not count:
/// - a parent and one child using each other (`remote.rs` returns
///   `super::Dataset`, `dataset/mod.rs` calls `remote::open`). Rust makes the
///   parent the child's declarer and its privacy scope: `super::` is how a
///   part reaches its folder's shared words (its error, options, the trait
///   it implements) and the parent's call is why the part exists. The pair
///   reads as one unit; what makes a circle costly, parts that cannot be
///   read, tested or moved apart, takes two parts.
/// - the parent's re-exports (`pub use b::X;`): the folder's front door.
/// - imports inside `#[cfg(test)] mod ... { }`: a test may drive its
///   module through a sibling (a codec's test through the registry)
///   without the modules themselves depending on each other.
fn circles(files: &[(String, String)]) -> Vec<String> {
    let modules: BTreeMap<Vec<String>, String> = files
        .iter()
        .map(|(file, _)| (module_of(file), file.clone()))
        .collect();
    let found: Vec<(&String, Vec<String>, Found)> = files
        .iter()
        .map(|(file, text)| {
            let own = module_of(file);
            let paths = paths_of(&own, &code_only(text), &modules);
            (file, own, paths)
        })
        .collect();
    // Each name a file re-exports, and where it really lives.
    let mut exports = BTreeMap::new();
    for (_, own, paths) in &found {
        for (_, path, _, test, reexport) in paths {
            if *reexport && !test && path.len() > own.len() {
                let name = [own.clone(), vec![path.last().unwrap().clone()]].concat();
                exports.insert(name, path.clone());
            }
        }
    }
    // folder -> member -> member -> the imports that join them. A member
    // is the folder's own module (the parent) or a child (one longer).
    let mut folders: BTreeMap<Vec<String>, Graph> = BTreeMap::new();
    for (file, own, paths) in &found {
        for (_, path, shown, test, reexport) in paths {
            let Some(target) = target_of(path, &modules, &exports) else {
                continue;
            };
            if *test || target == *own {
                continue;
            }
            let common = own.iter().zip(&target).take_while(|(a, b)| a == b).count();
            let folder = own[..common].to_vec();
            let from = own[..(common + 1).min(own.len())].to_vec();
            let to = target[..(common + 1).min(target.len())].to_vec();
            if from == folder && *reexport {
                continue; // the parent's front door
            }
            let edges = folders.entry(folder).or_default();
            let import = ((*file).clone(), shown.clone());
            edges
                .entry(from)
                .or_default()
                .entry(to)
                .or_default()
                .push(import);
        }
    }
    let mut out = Vec::new();
    for (folder, graph) in &folders {
        // The children's own imports, without the parent.
        let mut children: Graph = graph.clone();
        children.remove(folder);
        for edges in children.values_mut() {
            edges.remove(folder);
        }
        for (way, rest) in rings(&children) {
            let steps: Vec<Import> = way
                .windows(2)
                .map(|w| graph[&w[0]][&w[1]][0].clone())
                .collect();
            out.push(describe(folder, &way, &rest, &steps, &modules));
        }
        // Through the parent: a child uses it, it uses another child, and
        // that one comes back to the first without it.
        let mut through: Vec<(Vec<Vec<String>>, Vec<Import>)> = Vec::new();
        for a in children.keys() {
            let Some(up) = graph[a].get(folder) else {
                continue;
            };
            for (b, down) in graph.get(folder).into_iter().flatten() {
                if b == a || b == folder {
                    continue;
                }
                if let Some(back) = shortest(&children, b, a) {
                    let ring = [vec![a.clone(), folder.clone()], back].concat();
                    let mut steps = vec![up[0].clone(), down[0].clone()];
                    steps.extend(ring[2..].windows(2).map(|w| graph[&w[0]][&w[1]][0].clone()));
                    through.push((ring, steps));
                }
            }
        }
        if let Some((way, steps)) = through.iter().min_by_key(|(way, _)| way.len()) {
            let all: BTreeSet<&Vec<String>> = through.iter().flat_map(|(w, _)| w).collect();
            let rest: Vec<Vec<String>> = all
                .into_iter()
                .filter(|m| !way.contains(m))
                .cloned()
                .collect();
            out.push(describe(folder, way, &rest, steps, &modules));
        }
    }
    out
}

/// member -> member -> the imports that join them.
type Graph = BTreeMap<Vec<String>, BTreeMap<Vec<String>, Vec<Import>>>;

/// A shortest way through `graph` from `from` to `to` (both included; a
/// way round and back when they are the same member), if there is one.
fn shortest(graph: &Graph, from: &Vec<String>, to: &Vec<String>) -> Option<Vec<Vec<String>>> {
    let mut back: BTreeMap<&Vec<String>, &Vec<String>> = BTreeMap::new();
    let mut queue = VecDeque::from([from]);
    while let Some(at) = queue.pop_front() {
        for next in graph.get(at).into_iter().flat_map(|e| e.keys()) {
            if back.contains_key(next) {
                continue;
            }
            back.insert(next, at);
            if next == to {
                let mut way = vec![to.clone()];
                let mut at = back[to];
                while at != from {
                    way.push(at.clone());
                    at = back[at];
                }
                way.push(from.clone());
                way.reverse();
                return Some(way);
            }
            queue.push_back(next);
        }
    }
    None
}

/// A circle: one way round it (members, the first again at the end) and
/// the members of it that way does not pass.
type Ring = (Vec<Vec<String>>, Vec<Vec<String>>);

/// The sets of two or more members of `graph` that all reach one another
/// (its strongly connected components), each as one shortest way round
/// from its first member (which ends it again) and the members left.
fn rings(graph: &Graph) -> Vec<Ring> {
    let mut done = BTreeSet::new();
    let mut rings = Vec::new();
    for m in graph.keys() {
        if done.contains(m) {
            continue;
        }
        let Some(way) = shortest(graph, m, m) else {
            continue;
        };
        let rest: Vec<Vec<String>> = graph
            .keys()
            .filter(|o| {
                !way.contains(o)
                    && shortest(graph, m, o).is_some()
                    && shortest(graph, o, m).is_some()
            })
            .cloned()
            .collect();
        done.extend(way.iter().chain(&rest).cloned());
        rings.push((way, rest));
    }
    rings
}

/// The message for one circle: the folder, every member (those on `way`,
/// a way round, and the `rest`), and the import behind each step of `way`.
fn describe(
    folder: &[String],
    way: &[Vec<String>],
    rest: &[Vec<String>],
    steps: &[Import],
    modules: &BTreeMap<Vec<String>, String>,
) -> String {
    // A member's name: its file, and its folder when it has files below.
    let name = |member: &[String]| -> String {
        let file = modules.get(member).map_or("?", String::as_str);
        let below = modules
            .keys()
            .any(|m| m.len() > member.len() && m.starts_with(member));
        match file.strip_suffix("mod.rs") {
            Some(dir) if member != folder => dir.to_string(),
            None if below && member != folder && file != "src/main.rs" => {
                format!("{file} (and {}/)", file.trim_end_matches(".rs"))
            }
            _ => file.to_string(),
        }
    };
    let mut members: Vec<&Vec<String>> = way.iter().skip(1).chain(rest).collect();
    members.sort();
    let members: Vec<String> = members.into_iter().map(|m| name(m)).collect();
    let steps: Vec<String> = steps
        .iter()
        .map(|(file, shown)| format!("    {file} uses {shown}"))
        .collect();
    format!(
        "circle in {} ({} files): {}\n  one way round:\n{}",
        name(folder).trim_end_matches("mod.rs"),
        members.len(),
        members.join(", "),
        steps.join("\n")
    )
}

pub(crate) fn source_files() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    assert!(files.len() > 50, "found only {} source files", files.len());
    files.sort();
    files
        .iter()
        .map(|path| {
            let rel = path.strip_prefix(root).unwrap().to_str().unwrap();
            (rel.to_string(), std::fs::read_to_string(path).unwrap())
        })
        .collect()
}

#[test]
fn no_circle_of_imports_inside_a_folder() {
    let found = circles(&source_files());
    assert!(
        found.is_empty(),
        "{} circles of imports inside folders (see circles() in tests/it/layers.rs for what counts):\n{}",
        found.len(),
        found.join("\n")
    );
}

/// The circle check finds what it must and only that, on made-up files.
#[test]
fn the_checker_sees_circles() {
    let files = |list: &[(&str, &str)]| -> Vec<(String, String)> {
        list.iter()
            .map(|(f, t)| (f.to_string(), t.to_string()))
            .collect()
    };
    // Two siblings, one through `super::`, one through `crate::`.
    let pair = circles(&files(&[
        ("src/x/mod.rs", "mod a; mod b;"),
        ("src/x/a.rs", "use super::b::B;"),
        ("src/x/b.rs", "fn f() { crate::x::a::g(); }"),
    ]));
    assert_eq!(pair.len(), 1, "{pair:?}");
    assert!(pair[0].contains("src/x/a.rs, src/x/b.rs"), "{pair:?}");
    assert!(
        pair[0].contains("src/x/b.rs uses crate::x::a::g"),
        "{pair:?}"
    );
    // Three siblings round, in a grouped `use`; a folder as a member.
    let three = circles(&files(&[
        ("src/x/mod.rs", ""),
        ("src/x/a.rs", "use super::{b::B, other};"),
        ("src/x/b.rs", "use super::c::deep::C;"),
        ("src/x/c/mod.rs", ""),
        ("src/x/c/deep.rs", "use crate::x::a::A;"),
    ]));
    assert_eq!(three.len(), 1, "{three:?}");
    assert!(
        three[0].contains("(3 files)") && three[0].contains("src/x/c/"),
        "{three:?}"
    );
    // A parent and one child: the child uses `super::Error`, the parent
    // re-exports and calls it. Not a circle, nor are tests, comments and
    // strings, nor a line (a uses b, b uses c).
    let fine = circles(&files(&[
        (
            "src/x/mod.rs",
            "pub use a::A; pub struct Error; fn f() { a::run(); }",
        ),
        ("src/x/a.rs", "use super::Error; use super::b::B;"),
        (
            "src/x/b.rs",
            "// super::a\nconst S: &str = \"super::a::A\"; use super::c::C;",
        ),
        (
            "src/x/c.rs",
            "#[cfg(test)]\nmod tests { use super::super::a::A; use super::*; }",
        ),
    ]));
    assert!(fine.is_empty(), "{fine:?}");
    // The parent's re-export of b is no use of b: a using the parent's
    // Error while b uses a is a line.
    let front = circles(&files(&[
        ("src/x/mod.rs", "pub struct Error; pub use b::B;"),
        ("src/x/a.rs", "use super::Error;"),
        ("src/x/b.rs", "use super::a::f;"),
    ]));
    assert!(front.is_empty(), "{front:?}");
    // The parent's re-export of b is no use of b: a using the parent's
    // Error while b uses a is a line.
    let front = circles(&files(&[
        ("src/x/mod.rs", "pub struct Error; pub use b::B;"),
        ("src/x/a.rs", "use super::Error;"),
        ("src/x/b.rs", "use super::a::f;"),
    ]));
    assert!(front.is_empty(), "{front:?}");
    // Through the parent: a uses the parent's Context, which the parent
    // builds from b, and b uses a.
    let via = circles(&files(&[
        ("src/x/mod.rs", "mod a; mod b; pub struct Context(b::B);"),
        ("src/x/a.rs", "use super::Context;"),
        ("src/x/b.rs", "use super::a::A;"),
    ]));
    assert_eq!(via.len(), 1, "{via:?}");
    assert!(via[0].contains("src/x/mod.rs uses b::B"), "{via:?}");
    // An item the parent re-exports is its child's: `super::B` is b.rs.
    let reexported = circles(&files(&[
        ("src/x/mod.rs", "pub use b::B;"),
        ("src/x/a.rs", "use super::B;"),
        ("src/x/b.rs", "use super::a::A;"),
    ]));
    assert_eq!(reexported.len(), 1, "{reexported:?}");
}

/// What is wrong with the imports of the source file `file` (a path
/// relative to the crate root) holding `text`.
fn violations(file: &str, text: &str) -> Vec<String> {
    let Some((own, rank)) = layer_of(file) else {
        return vec![format!(
            "{file}: in no layer (add it to tests/it/layers.rs)"
        )];
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
    let storage = violations(
        "src/engine/read.rs",
        "use crate::storage::Store; fn f() { crate::engine::cache::x(); }",
    );
    assert_eq!(storage.len(), 1, "{storage:?}");
    let down = violations(
        "src/storage/remote/metrics.rs",
        "use crate::histogram::Histogram;",
    );
    assert!(down.is_empty(), "{down:?}");
    let sideways = violations("src/formats/netcdf3/mod.rs", "use crate::formats::packed;");
    assert_eq!(sideways.len(), 1, "{sideways:?}");
    // The chunked array knows no metadata dialect; HDF5 reads its chunks
    // through it, not through Zarr.
    let dialect = violations(
        "src/formats/chunked/array.rs",
        "use crate::formats::zarr::v3;",
    );
    assert_eq!(dialect.len(), 1, "{dialect:?}");
    let peer_format = violations(
        "src/formats/hdf5/array.rs",
        "use crate::formats::zarr::fill;",
    );
    assert_eq!(peer_format.len(), 1, "{peer_format:?}");
    let binary = violations("src/fs/mod.rs", "use slabfs::fs::x; use crate::cli::Cli;");
    assert_eq!(binary.len(), 1, "{binary:?}");
    let quiet = violations(
        "src/storage/files.rs",
        "//! see [`crate::fs::refresh`]\nlet t = \"slabfs::formats::nca\"; let q = '\"'; use crate::error::Error; /* crate::fs */",
    );
    assert!(quiet.is_empty(), "{quiet:?}");
    let fine = violations(
        "src/formats/dataset/mod.rs",
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
        "src/formats/dataset/mod.rs",
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

/// Where the code of a file under `src/formats/` (comments and strings
/// blanked, its unit tests left out) opens, creates or reads a file itself
/// instead of through the storage seam (`storage::Files`, `storage::Store`,
/// `storage::local`): `std::fs::File::open`/`create`/`create_new`/
/// `options`, `OpenOptions`, `std::fs::read`, `read_to_string`, `write`,
/// `copy`, and `File::open`... in a file that imports `std::fs::File`.
/// Every byte a format reads must pass the seam, so confinement, fault
/// injection and remote stores apply to it (docs/ARCHITECTURE.md, "Why
/// this shape").
///
/// Allowed, because they read no file's bytes: `std::fs::metadata`,
/// `symlink_metadata`, `read_dir` and `canonicalize` (discovery walks
/// directories and classifies what it finds by type and name, and stamps
/// files by identity and times: `formats/dataset*.rs`, `kerchunk/store.rs`,
/// `icechunk/mod.rs`), and naming `std::fs::File` or `std::fs::Metadata`
/// as a type (Icechunk keeps the descriptors `storage::local` opened and
/// reads them through `storage::local::read_open_verified`). A format's
/// unit tests may write and read fixtures as they like.
fn opens_files(file: &str, code: &str) -> Vec<String> {
    let code = code
        .find("#[cfg(test)]\nmod tests")
        .map_or(code, |at| &code[..at]);
    let mut calls: Vec<String> = [
        "File::open",
        "File::create",
        "File::create_new",
        "File::options",
    ]
    .iter()
    .map(|c| format!("fs::{c}"))
    .chain(["fs::read(", "fs::read_to_string", "fs::write", "fs::copy"].map(String::from))
    .chain(["OpenOptions".to_string()])
    .collect();
    // `File` imported from `std::fs` (alone or in a group): its opens
    // under the short name too. (A `File` of slabfs's own, as
    // `netcdf3::File`, opens through the seam.)
    let imports_file = use_statements(code).iter().any(|(r, _)| {
        let stmt: String = code[r.clone()].split_whitespace().collect();
        stmt.contains("std::fs::File")
            || stmt.split_once("std::fs::{").is_some_and(|(_, group)| {
                group
                    .split(['}', ','])
                    .any(|name| name == "File" || name.starts_with("File as"))
            })
    });
    if imports_file {
        calls.extend(["open", "create", "create_new", "options"].map(|c| format!("File::{c}")));
    }
    let mut bad = Vec::new();
    for call in &calls {
        let mut from = 0;
        while let Some(at) = code[from..].find(call.as_str()) {
            let start = from + at;
            from = start + call.len();
            let before = code[..start].chars().next_back();
            let after = code[from..].chars().next();
            let starts_word =
                !before.is_some_and(|c| c.is_alphanumeric() || c == '_') || before == Some(':');
            let ends_word =
                call.ends_with('(') || !after.is_some_and(|c| c.is_alphanumeric() || c == '_');
            // `File::open` of a path through `fs::`: reported as that.
            let short = call.starts_with("File::");
            let short_of_long = short && code[..start].ends_with("fs::");
            // `netcdf3::File::open` and the like: slabfs's own `File`.
            let own_file =
                short && code[..start].ends_with("::") && !code[..start].ends_with("fs::");
            if starts_word && ends_word && !short_of_long && !own_file {
                let line = code[..start].matches('\n').count() + 1;
                bad.push(format!(
                    "{file}:{line} (formats) calls {}: read through the storage seam",
                    call.trim_end_matches('(')
                ));
            }
        }
    }
    bad
}

#[test]
fn no_format_opens_a_file_past_the_storage_seam() {
    let mut bad = Vec::new();
    for (file, text) in source_files() {
        if file.starts_with("src/formats/") {
            bad.extend(opens_files(&file, &code_only(&text)));
        }
    }
    assert!(
        bad.is_empty(),
        "files opened past the storage seam:\n{}",
        bad.join("\n")
    );
}

/// The checker finds opens and reads past the seam (full paths, `File`
/// imported alone or in a group, `OpenOptions`, `std::fs::read`), and
/// passes what reads no bytes (metadata, directory walks, `File` as a
/// type), slabfs's own `File`s, comments, strings and unit tests.
#[test]
fn the_checker_sees_formats_opening_files() {
    let check = |text: &str| opens_files("src/formats/x.rs", &code_only(text));
    assert_eq!(
        check("fn f() { let t = std::fs::File::open(p).ok(); }").len(),
        1
    );
    assert_eq!(
        check("use std::fs::File;\nfn f() { File::open(p); }").len(),
        1
    );
    assert_eq!(
        check("use std::fs::{self, File};\nfn f() { File::create(p); fs::read(q); }").len(),
        2
    );
    assert_eq!(check("fn f() { std::fs::read_to_string(p); }").len(), 1);
    assert_eq!(
        check("use std::fs::OpenOptions;\nfn f() { OpenOptions::new().open(p); }").len(),
        2
    );
    let quiet = check(
        "//! std::fs::File::open\nuse std::fs;\n\
         fn f(d: &std::fs::File) { let s = \"fs::read(x)\"; fs::metadata(p); \
         std::fs::read_dir(d); netcdf3::File::open(p); File::open(p); }\n\
         #[cfg(test)]\nmod tests {\n    fn g() { std::fs::read(p).unwrap(); }\n}",
    );
    assert!(quiet.is_empty(), "{quiet:?}");
}
