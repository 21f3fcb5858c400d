//! `slabfs` flags for remote sources (URLs), converted into the storage
//! layer's plain [`Config`]. See docs/CONFIGURATION.md, "Remote sources".

use std::time::Duration;

use clap::Args;

use slabfs::storage::remote::Config;

#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Remote sources (s3://, gs://, az://, http(s)://)")]
pub struct RemoteArgs {
    /// S3 endpoint of an S3-compatible server (MinIO, Ceph, moto...), e.g.
    /// http://127.0.0.1:9000; an http:// endpoint needs no further flag
    /// [default: AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, else AWS].
    #[arg(long, value_name = "URL")]
    pub endpoint_url: Option<String>,
    /// Send no credentials and sign no request (public buckets).
    #[arg(long)]
    pub no_sign_request: bool,
    /// Requests to the server in flight at once, across the process.
    #[arg(long, value_name = "N", default_value_t = 64,
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub max_requests: u32,
    /// Seconds one request, with its retries of timeouts, 5xx and
    /// throttling answers, may take before the read fails (EIO).
    #[arg(long, value_name = "SECONDS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub request_timeout: u64,
    /// Retries of one failed request (with exponential backoff and jitter).
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub retries: usize,
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
            timeout: Duration::from_secs(self.request_timeout),
            connect_timeout: default
                .connect_timeout
                .min(Duration::from_secs(self.request_timeout)),
            ..default
        }
    }
}
