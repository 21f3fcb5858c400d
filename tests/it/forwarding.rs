//! Wrappers forward every method of `ArraySource` (issue 41), checked as
//! text, as `layers.rs` checks imports.
//!
//! A source that shows another one implements `engine::array::Wrapper`,
//! whose methods default to the inner source's answers, and gets
//! `ArraySource` from one blanket impl (the module doc of
//! `src/engine/array.rs` says why). The compiler cannot see that a method
//! added to `ArraySource` with a default body was also added to `Wrapper`
//! and the blanket impl: it would then silently answer the default in
//! every wrapper, which is how `MaskAware`, `Extended` and `Reshaped` lost
//! `cached` and `fetch_latency`. So this test fails until someone decides:
//!
//! 1. `Wrapper` and the blanket impl name exactly the methods of
//!    `ArraySource`; each `Wrapper` default forwards to `self.inner()`'s
//!    method of its name, and each blanket method to `Wrapper`'s.
//! 2. A wrapper that changes `meta` shows another index space than its
//!    inner source: a region of the outer shape means something else
//!    inside, so it writes every method taking a `Region` itself.
//! 3. Every other `impl ArraySource for` in `src/` (outside test modules)
//!    is on [`DIRECT`], the sources that read their own data or combine
//!    several, with the reason; a new one fails until it is put there or
//!    made a `Wrapper`.
//!
//! Comments, doc comments and strings are blanked first
//! (`layers::code_only`), so prose naming the traits never counts.

use std::collections::BTreeSet;

use crate::layers::{code_only, source_files};

/// The sources that implement `ArraySource` themselves: none shows one
/// other source with some answers changed.
const DIRECT: &[(&str, &str, &str)] = &[
    (
        "src/formats/chunked/array.rs",
        "ChunkedArray",
        "reads its store's chunks",
    ),
    (
        "src/formats/netcdf3/variable.rs",
        "Netcdf3Array",
        "reads its file (a remote one's blocks through a ChunkedArray of the file's bytes, \
         not of the variable's index space)",
    ),
    (
        "src/formats/hdf5/vds.rs",
        "Vds",
        "combines the datasets its mappings name",
    ),
    (
        "src/formats/nca/aggregate.rs",
        "Aggregation",
        "combines its fragments",
    ),
    ("src/formats/nca/constant.rs", "Constant", "one value"),
    ("src/formats/nca/raw.rs", "RawArray", "reads its file"),
    (
        "src/formats/ncml/join.rs",
        "Joined",
        "combines its members' variables",
    ),
    (
        "src/formats/ncml/tiled.rs",
        "Mosaic",
        "combines its members' tiles",
    ),
    (
        "src/formats/ncml/values.rs",
        "InMemory",
        "values written in the NcML file",
    ),
];

/// Where the body of the block that opens at the first `{` after `at`
/// lies, braces excluded (its braces balanced; `code` is code only).
fn block_at(code: &str, at: usize) -> std::ops::Range<usize> {
    let open = at + code[at..].find('{').expect("a block");
    let mut depth = 0;
    for (i, c) in code[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return open + 1..open + i;
                }
            }
            _ => {}
        }
    }
    panic!("unbalanced braces after {at}")
}

fn block(code: &str, at: usize) -> &str {
    &code[block_at(code, at)]
}

/// `code` with its `#[cfg(test)]` modules blanked.
fn without_tests(code: &str) -> String {
    let mut out = code.to_string();
    let mut from = 0;
    while let Some(i) = out[from..].find("#[cfg(test)]") {
        let at = from + i;
        let rest = &out[at + "#[cfg(test)]".len()..];
        let head = &rest[..rest.find(['{', ';']).unwrap_or(rest.len())];
        // `mod tests`, `pub(crate) mod tests`; not a function or a field.
        if head.split_whitespace().any(|w| w == "mod") && !head.contains("fn ") {
            let end = block_at(&out, at).end + 1;
            out.replace_range(at..end, &" ".repeat(end - at));
        }
        from = at + 1;
    }
    out
}

/// The functions a block defines directly (not those of blocks inside
/// its functions), in order, with the text from each name to the next.
fn functions(body: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut depth = 0;
    let b = body.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'{' => depth += 1,
            b'}' => depth -= 1,
            b'f' if depth == 0
                && body[i..].starts_with("fn ")
                && (i == 0 || !b[i - 1].is_ascii_alphanumeric()) =>
            {
                let name: String = body[i + 3..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                found.push((name, i));
            }
            _ => {}
        }
        i += 1;
    }
    let ends: Vec<usize> = found
        .iter()
        .skip(1)
        .map(|(_, i)| *i)
        .chain([body.len()])
        .collect();
    found
        .into_iter()
        .zip(ends)
        .map(|((name, i), end)| (name, body[i..end].to_string()))
        .collect()
}

/// The body of the item whose header is `header` (exact text), if any.
fn item<'a>(code: &'a str, header: &str) -> Option<&'a str> {
    code.find(header).map(|at| block(code, at))
}

/// What is wrong with the forwarding in `engine/array.rs`'s code.
fn forwarding_gaps(code: &str) -> Vec<String> {
    let mut gaps = Vec::new();
    let trait_fns = functions(item(code, "pub trait ArraySource").expect("trait ArraySource"));
    let wrapper_fns = functions(item(code, "pub trait Wrapper").expect("trait Wrapper"));
    let blanket_fns =
        functions(item(code, "impl<W: Wrapper> ArraySource for W").expect("the blanket impl"));
    let names = |fns: &[(String, String)]| -> BTreeSet<String> {
        fns.iter()
            .map(|(n, _)| n.clone())
            .filter(|n| n != "inner")
            .collect()
    };
    let methods = names(&trait_fns);
    for (what, fns) in [
        ("Wrapper", &wrapper_fns),
        ("the blanket impl", &blanket_fns),
    ] {
        let got = names(fns);
        for m in methods.difference(&got) {
            gaps.push(format!(
                "ArraySource::{m} is not in {what}: add it to Wrapper (forwarding to \
                 self.inner()) and to the blanket impl, or every wrapper answers its default"
            ));
        }
        for m in got.difference(&methods) {
            gaps.push(format!("{what} has {m}, which ArraySource does not"));
        }
    }
    for (name, text) in &wrapper_fns {
        if name != "inner" && !text.contains(&format!("self.inner().{name}(")) {
            gaps.push(format!(
                "Wrapper::{name} does not forward to self.inner().{name}"
            ));
        }
    }
    for (name, text) in &blanket_fns {
        if !text.contains(&format!("Wrapper::{name}(self")) {
            gaps.push(format!(
                "the blanket impl's {name} does not call Wrapper::{name}"
            ));
        }
    }
    gaps
}

/// The methods of `ArraySource` that take a region (their signature names
/// `Region`).
fn region_methods(array_rs: &str) -> BTreeSet<String> {
    let body = item(array_rs, "pub trait ArraySource").expect("trait ArraySource");
    functions(body)
        .into_iter()
        .filter(|(_, text)| text[..text.find(['{', ';']).unwrap_or(text.len())].contains("Region"))
        .map(|(n, _)| n)
        .collect()
}

/// What is wrong with the implementations of the traits in one file.
fn implementation_gaps(file: &str, code: &str, region: &BTreeSet<String>) -> Vec<String> {
    let mut gaps = Vec::new();
    let code = without_tests(code);
    let mut from = 0;
    while let Some(i) = code[from..].find("impl") {
        let at = from + i;
        from = at + 4;
        let header = &code[at..at + code[at..].find('{').unwrap_or(0)];
        let words: Vec<&str> = header.split_whitespace().collect();
        let Some(for_at) = words.iter().position(|w| *w == "for") else {
            continue;
        };
        if !(words[0] == "impl" || words[0].starts_with("impl<")) || for_at == 0 {
            continue;
        }
        let tr = words[for_at - 1];
        let ty: String = words
            .get(for_at + 1)
            .unwrap_or(&"")
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        match tr {
            "ArraySource" if file == "src/engine/array.rs" && ty == "W" => {}
            "ArraySource" if !DIRECT.iter().any(|(f, t, _)| *f == file && *t == ty) => {
                gaps.push(format!(
                    "{file}: {ty} implements ArraySource itself: if it shows another \
                     source, implement engine::array::Wrapper instead (its methods forward \
                     to the inner source); if it reads its own data or combines several, \
                     add it to DIRECT in tests/it/forwarding.rs with the reason"
                ));
            }
            "Wrapper" => {
                let fns: BTreeSet<String> = functions(block(&code, at))
                    .into_iter()
                    .map(|(n, _)| n)
                    .collect();
                if fns.contains("meta") {
                    for m in region.difference(&fns) {
                        gaps.push(format!(
                            "{file}: {ty} shows another index space than its inner source (it \
                             changes meta) but forwards {m}, which takes a region of its own \
                             shape: write {m} for {ty}"
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    gaps
}

#[test]
fn wrappers_forward_every_method_of_array_source() {
    let files = source_files();
    let array_rs = code_only(
        &files
            .iter()
            .find(|(f, _)| f == "src/engine/array.rs")
            .expect("src/engine/array.rs")
            .1,
    );
    let mut gaps = forwarding_gaps(&array_rs);
    let region = region_methods(&array_rs);
    assert!(
        ["read_region", "cached", "prefetch"]
            .iter()
            .all(|m| region.contains(*m)),
        "{region:?}"
    );
    let mut wrappers = 0;
    let mut direct = BTreeSet::new();
    for (file, text) in &files {
        let code = code_only(text);
        gaps.extend(implementation_gaps(file, &code, &region));
        wrappers += without_tests(&code).matches(" Wrapper for ").count();
        for (f, t, _) in DIRECT {
            if f == file && without_tests(&code).contains(&format!("ArraySource for {t} ")) {
                direct.insert(*t);
            }
        }
    }
    assert!(gaps.is_empty(), "{}", gaps.join("\n"));
    // MaskAware, Extended, Reshaped; and every listed source still exists.
    assert!(wrappers >= 3, "found {wrappers} wrappers");
    assert_eq!(
        direct.len(),
        DIRECT.len(),
        "listed but not found: {direct:?}"
    );
}

#[test]
fn the_checker_sees_dropped_methods() {
    let good = "
        pub trait ArraySource: Send + Sync {
            fn meta(&self) -> &ArrayMeta;
            fn cached(&self, region: &Region) -> bool { let _ = region; false }
        }
        pub trait Wrapper: Send + Sync {
            fn inner(&self) -> &dyn ArraySource;
            fn meta(&self) -> &ArrayMeta { self.inner().meta() }
            fn cached(&self, region: &Region) -> bool { self.inner().cached(region) }
        }
        impl<W: Wrapper> ArraySource for W {
            fn meta(&self) -> &ArrayMeta { Wrapper::meta(self) }
            fn cached(&self, region: &Region) -> bool { Wrapper::cached(self, region) }
        }";
    assert_eq!(forwarding_gaps(good), Vec::<String>::new());
    assert_eq!(region_methods(good), BTreeSet::from(["cached".to_string()]));
    // A method added to the trait only.
    let added = good.replacen(
        "fn meta(&self) -> &ArrayMeta;",
        "fn meta(&self) -> &ArrayMeta;\n fn fetch_latency(&self) -> Option<Duration> { None }",
        1,
    );
    let gaps = forwarding_gaps(&added);
    assert_eq!(gaps.len(), 2, "{gaps:?}");
    assert!(
        gaps.iter()
            .all(|g| g.contains("ArraySource::fetch_latency"))
    );
    // A default that answers for itself, a blanket method that does.
    let local = good.replacen("{ self.inner().cached(region) }", "{ false }", 1);
    assert!(forwarding_gaps(&local)[0].contains("Wrapper::cached does not forward"));
    let local = good.replacen("{ Wrapper::cached(self, region) }", "{ false }", 1);
    assert!(forwarding_gaps(&local)[0].contains("blanket impl's cached"));

    let region = BTreeSet::from(["cached".to_string(), "read_region".to_string()]);
    let file = r##"
        struct Padded { inner: Arc<dyn ArraySource> }
        impl Wrapper for Padded {
            fn inner(&self) -> &dyn ArraySource { self.inner.as_ref() }
            fn meta(&self) -> &ArrayMeta { &self.meta }
            fn read_region(&self, region: &Region, out: &mut [u8]) -> Result<()> { todo!() }
        }
        impl ArraySource for Leaf {
            fn meta(&self) -> &ArrayMeta { &self.meta }
        }
        impl Wrapper for Same {
            fn inner(&self) -> &dyn ArraySource { &self.0 }
        }
        #[cfg(test)]
        pub(crate) mod tests {
            const JSON: &str = r#"{"a": "}"}"#;
            impl ArraySource for Fake { fn meta(&self) -> &ArrayMeta { &self.0 } }
        }
        impl ArraySource for AfterTests { fn meta(&self) -> &ArrayMeta { &self.0 } }"##;
    let gaps = implementation_gaps("src/formats/x.rs", &code_only(file), &region);
    assert_eq!(gaps.len(), 3, "{gaps:?}");
    assert!(gaps[0].contains("Padded") && gaps[0].contains("forwards cached"));
    assert!(gaps[1].contains("Leaf implements ArraySource itself"));
    assert!(gaps[2].contains("AfterTests implements ArraySource itself"));
    // A listed source is fine where it is listed, not elsewhere.
    let chunked = "impl ArraySource for ChunkedArray { fn meta(&self) -> &ArrayMeta { x } }";
    assert!(implementation_gaps("src/formats/chunked/array.rs", chunked, &region).is_empty());
    assert_eq!(
        implementation_gaps("src/formats/zarr/mod.rs", chunked, &region).len(),
        1
    );
}
