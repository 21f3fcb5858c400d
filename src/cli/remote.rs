//! `slabfs` flags for remote sources (URLs), converted into the storage
//! layer's plain [`Config`]. See docs/CONFIGURATION.md, "Remote sources".

use std::time::Duration;

use clap::Args;

use slabfs::storage::disk_cache::DiskCacheConfig;
use slabfs::storage::remote::Config;

/// `--stall-timeout` when neither it nor a short `--request-timeout`
/// says otherwise (docs/REMOTE.md, "Timeouts", has the measurement).
const DEFAULT_STALL_TIMEOUT: u64 = 10;

#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Remote (s3://, gs://, az://, http(s)://)")]
pub struct RemoteArgs {
    /// S3 endpoint of an S3-compatible server (MinIO, Ceph, moto...), e.g.
    /// http://127.0.0.1:9000; an http:// endpoint needs no further flag
    /// [default: AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, else AWS].
    #[arg(long, value_name = "URL")]
    pub endpoint_url: Option<String>,
    /// Send no credentials and sign no request (public buckets).
    #[arg(long)]
    pub no_sign_request: bool,
    /// Requests to the server in flight at once, across the process: the
    /// ceiling (a 503 SlowDown or 429 halves the limit for a while; it
    /// grows back to this as requests succeed).
    #[arg(long, value_name = "N", default_value_t = 64,
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub max_requests: u32,
    /// Seconds one request, with its retries of timeouts, 5xx and
    /// throttling answers, may take before the read fails (EIO).
    #[arg(long, value_name = "SECONDS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub request_timeout: u64,
    /// Seconds an attempt may go without receiving a byte before it is
    /// abandoned and retried on a new connection, resuming after the bytes
    /// received (at most --request-timeout) [default: 10, or a third of
    /// --request-timeout if that is less, so a read survives two stalls].
    #[arg(long, value_name = "SECONDS",
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub stall_timeout: Option<u64>,
    /// Never send a GET that has made no progress for a while a second
    /// time (hedging, docs/REMOTE.md "Hedged GETs"): a stalled request then
    /// waits for --stall-timeout. For servers that bill every request.
    #[arg(long)]
    pub no_hedge: bool,
    /// Retries of one failed request (with exponential backoff and jitter).
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub retries: usize,
    /// Threads of the runtime that moves the bytes of remote requests
    /// (decoding stays on the decode threads).
    #[arg(long, value_name = "N", default_value_t = 2,
          value_parser = clap::value_parser!(u16).range(1..=64))]
    pub remote_threads: u16,
    /// Keep the raw bytes of remote reads in DIR, checked on every read,
    /// across restarts and shared by every slabfs process naming the same
    /// DIR (docs/OPERATIONS.md, "The disk cache") [default: none].
    #[arg(long, value_name = "DIR")]
    pub disk_cache: Option<std::path::PathBuf>,
    /// The most bytes --disk-cache keeps (least recently used out first),
    /// e.g. 20GiB.
    #[arg(long, value_name = "SIZE", default_value = "10GiB",
          value_parser = super::parse_size, requires = "disk_cache")]
    pub disk_cache_size: u64,
}

impl RemoteArgs {
    /// The storage layer's configuration.
    pub fn config(&self) -> Config {
        let default = Config::default();
        Config {
            endpoint_url: self.endpoint_url.clone().filter(|s| !s.is_empty()),
            no_sign_request: self.no_sign_request,
            max_requests: self.max_requests as usize,
            retries: self.retries,
            threads: self.remote_threads as usize,
            timeout: Duration::from_secs(self.request_timeout),
            connect_timeout: default
                .connect_timeout
                .min(Duration::from_secs(self.request_timeout)),
            stall_timeout: Duration::from_secs(
                self.stall_timeout
                    .unwrap_or(DEFAULT_STALL_TIMEOUT.min(self.request_timeout / 3))
                    .clamp(1, self.request_timeout.max(1)),
            ),
            hedge: !self.no_hedge,
            disk_cache: self.disk_cache.clone().map(|dir| DiskCacheConfig {
                dir,
                size: self.disk_cache_size,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Cli, Command};
    use clap::Parser;
    use std::time::Duration;

    #[test]
    fn remote_flags_become_the_storage_config() {
        let cli = Cli::try_parse_from(["slabfs", "ls", "s3://b/p"]).unwrap();
        let Command::Ls { common, .. } = cli.command else {
            panic!("not ls")
        };
        assert_eq!(
            common.remote.config(),
            slabfs::storage::remote::Config::default()
        );
        let cli = Cli::try_parse_from([
            "slabfs",
            "mount",
            "--endpoint-url",
            "http://127.0.0.1:9000",
            "--no-sign-request",
            "--max-requests",
            "8",
            "--request-timeout",
            "3",
            "--retries",
            "1",
            "--stall-timeout",
            "7",
            "--remote-threads",
            "4",
            "s3://b/p",
            "mnt",
        ])
        .unwrap();
        let Command::Mount(args) = cli.command else {
            panic!("not a mount")
        };
        let c = args.common.remote.config();
        assert_eq!(c.endpoint_url.as_deref(), Some("http://127.0.0.1:9000"));
        assert!(c.no_sign_request);
        assert_eq!((c.max_requests, c.retries, c.threads), (8, 1, 4));
        assert_eq!(c.timeout, Duration::from_secs(3));
        assert_eq!(c.connect_timeout, Duration::from_secs(3));
        // The stall timeout is at most the request timeout.
        assert_eq!(c.stall_timeout, Duration::from_secs(3));
        // Unset, it is 10 s, or a third of a shorter request timeout.
        let stall = |argv: &[&str]| {
            let argv = ["slabfs", "ls"].iter().chain(argv).chain(&["s3://b"]);
            let Command::Ls { common, .. } = Cli::try_parse_from(argv).unwrap().command else {
                panic!("not ls")
            };
            common.remote.config().stall_timeout.as_secs()
        };
        assert_eq!(stall(&[]), 10);
        assert_eq!(stall(&["--request-timeout", "4"]), 1);
        assert_eq!(stall(&["--request-timeout", "2"]), 1);
        assert_eq!(stall(&["--request-timeout", "12"]), 4);
        assert_eq!(
            stall(&["--request-timeout", "12", "--stall-timeout", "6"]),
            6
        );
        for bad in [&["--max-requests", "0"][..], &["--remote-threads", "0"]] {
            let argv = ["slabfs", "ls"].iter().chain(bad).chain(&["s3://b"]);
            assert!(Cli::try_parse_from(argv).is_err(), "{bad:?}");
        }
    }
}
