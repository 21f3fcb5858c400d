//! The dependency tree keeps the cuts of a fresh build (issue 41;
//! docs/DEVELOPMENT.md, "Build and test time"), checked in `Cargo.lock`:
//! a crate that comes back through a dependency's update, or a patch
//! that stops applying, fails here rather than silently adding its
//! compile time to every fresh `cargo test`.

use std::path::Path;

/// The packages of `Cargo.lock`, as `(name, source)`: the source is
/// empty for a path dependency.
fn locked() -> Vec<(String, String)> {
    let lock = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.lock"))
        .expect("reading Cargo.lock");
    let mut out = Vec::new();
    for package in lock.split("[[package]]").skip(1) {
        let field = |key: &str| {
            package
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .map(|v| v.trim().trim_matches('"').to_string())
                .unwrap_or_default()
        };
        out.push((field("name = "), field("source = ")));
    }
    out
}

/// rustls's provider is ring (storage::remote::tls): no aws-lc-rs, whose
/// aws-lc-sys compiles about 40 s of C. object_store's `aws`, `gcp`,
/// `azure` and `http` features bring it back, and so does icechunk's
/// icechunk-arrow-object-store if the vendored one (asking for the
/// `-base` features) is no longer the one in use.
#[test]
fn no_aws_lc_and_the_vendored_icechunk_object_store() {
    let packages = locked();
    assert!(packages.len() > 100, "{} packages read", packages.len());
    let aws_lc: Vec<_> = packages
        .iter()
        .filter(|(name, _)| name.starts_with("aws-lc"))
        .collect();
    assert!(aws_lc.is_empty(), "{aws_lc:?} in Cargo.lock");
    let ice: Vec<_> = packages
        .iter()
        .filter(|(name, _)| name == "icechunk-arrow-object-store")
        .collect();
    assert!(
        ice.len() == 1 && ice[0].1.is_empty(),
        "icechunk-arrow-object-store should be the vendored one alone: {ice:?} \
         (icechunk updated? update vendor/icechunk-arrow-object-store, VENDORED.md)"
    );
    assert!(packages.iter().any(|(name, _)| name == "ring"));
}
