//! The TLS of every HTTPS client slabfs builds: rustls with the `ring`
//! provider, installed as the process's default before a client is built.
//!
//! reqwest is built with `rustls-no-provider` and rustls with `ring`, not
//! with their default aws-lc-rs provider: aws-lc-sys is a C library of
//! about 40 s of CPU to compile, the dearest dependency of a fresh
//! `cargo test` after zstd (issue 41; docs/DEVELOPMENT.md, "Build and
//! test time"), and ring is what rustls was built on for years, with the
//! same protocol versions and cipher suites slabfs's servers need (TLS
//! 1.2 and 1.3, ECDHE with AES-GCM or ChaCha20-Poly1305). object_store
//! signs requests with `ring` too (its `ring` feature: HMAC-SHA256 for
//! AWS, RSA for a GCS service account).
//!
//! A reqwest built with no provider takes the process's default, and
//! panics building a client if there is none. So every place that builds
//! one calls [`install`] first: [`super::client::reqwest_client`] (the
//! client behind every store, its credential requests included, and the
//! STS client of [`super::role`]) and the OTLP pusher
//! (`fs::mount::push`). A program embedding slabfs that installed a
//! provider of its own before keeps it.

use std::sync::Once;

/// Make ring the process's default rustls provider, unless one is
/// already installed. Cheap after the first call.
pub fn install() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        // An error means another provider was installed first (by a
        // program embedding slabfs): its choice stands, and clients
        // build with it.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_provider_is_installed_and_speaks_tls_1_3() {
        install();
        let provider = rustls::crypto::CryptoProvider::get_default().expect("a default provider");
        assert!(
            provider
                .cipher_suites
                .iter()
                .any(|s| s.version() == &rustls::version::TLS13),
            "{:?}",
            provider.cipher_suites
        );
        // Twice is harmless.
        install();
    }

    #[test]
    fn an_https_client_builds() {
        // reqwest panics here when no provider is installed.
        let options = object_store::ClientOptions::new();
        super::super::client::reqwest_client(&options).unwrap();
    }
}
