//! The HTTP client behind every remote store: the reqwest client
//! `object_store` would build, but following redirects only within the
//! origin (scheme, host and port) the request was sent to.
//!
//! `object_store` lets reqwest follow up to ten redirects to anywhere. For
//! slabfs that would be a hole in confinement ([`super::Location`] checks
//! which bucket, prefix and host a dataset may read): a server, or anyone
//! who can plant a redirect on it, could send the daemon's requests to
//! another host, a loopback service or a cloud's metadata endpoint among
//! them. So a redirect that leaves the origin is an error for that
//! request, naming only the origin it pointed to (never the rest of the
//! URL: a presigned query is a secret). Redirects within the origin (a
//! server moving a path) are still followed, up to ten.
//!
//! The client is built as `ClientOptions::client` builds it for the options
//! slabfs uses: whether plain `http` is allowed, the request, connect and
//! read (stall) timeouts (read back from the options, so the short connect timeout
//! `object_store` sets for instance-metadata requests is kept), no
//! compression (it would break `Content-Length`). slabfs sets no other
//! client option. Its TLS is rustls with ring ([`super::tls`]).

use object_store::{ClientConfigKey, ClientOptions};
use reqwest::redirect::{Attempt, Policy};

/// Redirects followed at most (as reqwest's default policy).
const MAX_REDIRECTS: usize = 10;

/// The client for `options`; see the module docs.
pub fn reqwest_client(options: &ClientOptions) -> object_store::Result<reqwest::Client> {
    super::tls::install();
    let duration = |key: ClientConfigKey| {
        options
            .get_config_value(&key)
            .and_then(|v| humantime::parse_duration(&v).ok())
    };
    let allow_http = options
        .get_config_value(&ClientConfigKey::AllowHttp)
        .is_some_and(|v| v == "true");
    let mut builder = reqwest::ClientBuilder::new()
        .user_agent(concat!("slabfs/", env!("CARGO_PKG_VERSION")))
        .redirect(Policy::custom(same_origin))
        .no_gzip()
        .no_brotli()
        .no_zstd()
        .no_deflate()
        .https_only(!allow_http);
    if let Some(t) = duration(ClientConfigKey::Timeout) {
        builder = builder.timeout(t);
    }
    if let Some(t) = duration(ClientConfigKey::ConnectTimeout) {
        builder = builder.connect_timeout(t);
    }
    // The stall timeout (`--stall-timeout`): reqwest's read timeout ends
    // an attempt that waits this long for its response's head, or for the
    // next bytes of its body (it restarts with every read).
    if let Some(t) = duration(ClientConfigKey::ReadTimeout) {
        builder = builder.read_timeout(t);
    }
    builder.build().map_err(|e| object_store::Error::Generic {
        store: "HTTP client",
        source: Box::new(e),
    })
}

/// `scheme://host:port` of `url`: what a message may show of it.
fn origin(url: &url::Url) -> String {
    format!(
        "{}://{}:{}",
        url.scheme(),
        url.host_str().unwrap_or(""),
        url.port_or_known_default().unwrap_or(0)
    )
}

/// Follow a redirect only to the origin of the first request.
fn same_origin(attempt: Attempt<'_>) -> reqwest::redirect::Action {
    let Some(first) = attempt.previous().first() else {
        return attempt.follow();
    };
    if attempt.previous().len() > MAX_REDIRECTS {
        return attempt.error(format!("more than {MAX_REDIRECTS} redirects"));
    }
    let (from, to) = (origin(first), origin(attempt.url()));
    if from != to {
        return attempt.error(format!(
            "a redirect from {from} to another origin, {to}, refused"
        ));
    }
    attempt.follow()
}
