//! `--metrics ADDR`: the mount's Prometheus endpoint, `http://ADDR/metrics`.
//!
//! [`bind`] takes the address before anything is mounted, so a port in use
//! (another mount's) fails the mount with the reason rather than leaving
//! a daemon that cannot be monitored; [`serve`] then answers scrapes on a
//! thread of its own, `slabfs-metrics`, for the rest of the process's life.
//!
//! The thread runs a single-threaded tokio runtime and hyper's HTTP/1
//! server (both already in the daemon for the remote client): `GET` or
//! `HEAD /metrics` renders every collector ([`crate::metrics::Registry`])
//! into the Prometheus text format; any other path is `404`, any other
//! method `405`. A scrape reads the counters the requests update, with no
//! lock on the read path, so scraping never slows the mount beyond the
//! CPU of the rendering (a few hundred lines of text), and a stalled
//! network source never slows a scrape. At most [`MAX_CONNECTIONS`] are
//! served at once (a scraper needs one); a client that does not send its
//! request's head within [`HEAD_TIMEOUT`] is dropped.
//!
//! Loopback is the default ([`crate::metrics`] shows only counters, but
//! the store names say what the mount reads): the address is whatever the
//! operator gives, and a bare port means `127.0.0.1:PORT`
//! (`cli::parse_metrics_addr`). There is no authentication and no TLS: to
//! expose the endpoint beyond the machine, bind it to an interface the
//! scraper reaches through a trusted network, or put a proxy in front.

use std::convert::Infallible;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};

use crate::metrics::{CONTENT_TYPE, Registry};

/// Connections served at once; more are closed as they come.
pub const MAX_CONNECTIONS: usize = 16;

/// How long a client may take to send a request's head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// The path Prometheus scrapes by default.
pub const PATH: &str = "/metrics";

/// Listen on `addr` (not served until [`serve`]).
pub fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let listener = TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// Answer scrapes on `listener` with `registry`'s series, on a thread of
/// its own, for as long as the process lives. Returns the address served.
pub fn serve(listener: TcpListener, registry: Arc<Registry>) -> io::Result<SocketAddr> {
    let addr = listener.local_addr()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()?;
    std::thread::Builder::new()
        .name("slabfs-metrics".into())
        .spawn(move || rt.block_on(accept(listener, registry)))?;
    log::info!("serving metrics at http://{addr}{PATH}");
    Ok(addr)
}

/// The accept loop: each connection on a task of its own.
async fn accept(listener: TcpListener, registry: Arc<Registry>) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            log::error!("metrics endpoint: {e}; not serving metrics");
            return;
        }
    };
    let active = Arc::new(AtomicUsize::new(0));
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of descriptors, most likely: wait rather than spin.
                log::warn!("metrics endpoint: accepting a connection: {e}");
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
        };
        if active.load(Ordering::Relaxed) >= MAX_CONNECTIONS {
            log::debug!("metrics endpoint: {MAX_CONNECTIONS} connections open; closing a new one");
            continue;
        }
        active.fetch_add(1, Ordering::Relaxed);
        let (registry, active) = (registry.clone(), active.clone());
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let answer = answer(&registry, &req);
                async move { Ok::<_, Infallible>(answer) }
            });
            let served = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEAD_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service)
                .await;
            if let Err(e) = served {
                log::debug!("metrics endpoint: connection ended: {e}");
            }
            active.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

/// The answer to `req`.
fn answer<B>(registry: &Registry, req: &Request<B>) -> Response<Full<Bytes>> {
    let text = |status: StatusCode, body: String| {
        let mut r = Response::new(Full::new(Bytes::from(body)));
        *r.status_mut() = status;
        r.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        r
    };
    if req.uri().path() != PATH {
        return text(
            StatusCode::NOT_FOUND,
            format!("slabfs: the metrics are at {PATH}\n"),
        );
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = text(
            StatusCode::METHOD_NOT_ALLOWED,
            "slabfs: GET or HEAD only\n".into(),
        );
        r.headers_mut().insert(
            hyper::header::ALLOW,
            hyper::header::HeaderValue::from_static("GET, HEAD"),
        );
        return r;
    }
    match registry.render() {
        Ok(body) => {
            let mut r = text(StatusCode::OK, body);
            r.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static(CONTENT_TYPE),
            );
            r
        }
        Err(_) => {
            log::error!("metrics endpoint: a collector failed; answered 500");
            text(
                StatusCode::INTERNAL_SERVER_ERROR,
                "slabfs: the metrics could not be rendered (see the log)\n".into(),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// One HTTP/1.0 exchange with the endpoint at `addr`: status line and
    /// body.
    fn ask(addr: SocketAddr, request: &str) -> (String, String) {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        let (head, body) = out.split_once("\r\n\r\n").unwrap();
        (head.lines().next().unwrap().to_string(), body.to_string())
    }

    #[test]
    fn serves_the_registry_at_metrics_and_nothing_else() {
        let registry = Arc::new(Registry::new());
        registry.register(Arc::new(|out: &mut crate::metrics::Out<'_>| {
            out.counter("slabfs_test_scrapes", "Scrapes.", 7)
        }));
        let listener = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = serve(listener, registry).unwrap();
        let (status, body) = ask(addr, "GET /metrics HTTP/1.0\r\n\r\n");
        assert_eq!(status, "HTTP/1.0 200 OK");
        assert!(body.contains("slabfs_test_scrapes_total 7\n"), "{body}");
        let (status, body) = ask(addr, "HEAD /metrics HTTP/1.0\r\n\r\n");
        assert_eq!((status.as_str(), body.as_str()), ("HTTP/1.0 200 OK", ""));
        let (status, _) = ask(addr, "GET / HTTP/1.0\r\n\r\n");
        assert_eq!(status, "HTTP/1.0 404 Not Found");
        let (status, _) = ask(addr, "POST /metrics HTTP/1.0\r\n\r\n");
        assert_eq!(status, "HTTP/1.0 405 Method Not Allowed");
        // A port in use is an error at bind, before anything is served.
        assert!(bind(addr).is_err());
    }
}
