//! The fast S3 server of the remote tests: s3s-fs (crates.io, the file
//! system backend of the `s3s` S3 server framework) serving a temporary
//! directory on loopback, in the test process, on a runtime of its own.
//! A request costs it well under a millisecond, where moto spends about
//! 10 ms of Python, so the tests that need only S3's wire format use it and
//! run side by side; moto stays for what only it plays (STS, a server
//! process to stop with a signal, the conformance test's exact answers).
//!
//! s3s-fs is "experimental" and answers three things unlike S3; the thin
//! [`AsS3`] layer makes them S3's, so that slabfs's ordinary paths are the
//! ones tested, not its retries:
//! - a key that is a "directory" of objects (`HEAD nc3` when `nc3/x`
//!   exists): s3s-fs fails with 500, S3 answers 404;
//! - a suffix range longer than the object (`bytes=-N`, N > size): s3s-fs
//!   fails with 500 (it seeks before the start), S3 sends the whole object,
//!   or 416 if it is empty (where s3s-fs's thread panics);
//! - `If-Match` / `If-None-Match` on GET and HEAD: s3s-fs ignores them, S3
//!   answers 412 / 304.
//!
//! Every request's signature is checked against the key in the environment
//! when the server starts (`AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY`).
//!
//! A test may turn on [`Quirks`]: answers as other stores give them
//! (Azure's unquoted listed ETags, weak ETags, `If-Match` ignored), and
//! the server counts the listings it answers.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use s3s::dto::*;
use s3s::{S3, S3Request, S3Response, S3Result, s3_error};

use super::servers::S3Server;

/// s3s-fs on loopback; stopped on drop.
pub struct S3s {
    pub port: u16,
    /// How it answers unlike S3 (off unless a test turns them on), and
    /// what it counts.
    pub quirks: Arc<Quirks>,
    rt: Option<tokio::runtime::Runtime>,
    // Removed after the runtime stops (fields drop in order).
    root: tempfile::TempDir,
}

impl S3s {
    pub fn start() -> S3s {
        S3s::start_on(0)
    }

    /// On `port` (0: one the OS chooses).
    pub fn start_on(port: u16) -> S3s {
        let root = tempfile::tempdir().unwrap();
        let quirks = Arc::new(Quirks::default());
        let fs = AsS3 {
            inner: s3s_fs::FileSystem::new(root.path()).unwrap(),
            root: root.path().to_path_buf(),
            quirks: quirks.clone(),
        };
        let mut builder = s3s::service::S3ServiceBuilder::new(fs);
        if let (Ok(key), Ok(secret)) = (
            std::env::var("AWS_ACCESS_KEY_ID"),
            std::env::var("AWS_SECRET_ACCESS_KEY"),
        ) {
            builder.set_auth(s3s::auth::SimpleAuth::from_single(key, secret));
        }
        let service = builder.build();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("s3s-fs")
            .enable_all()
            .build()
            .unwrap();
        let listener = rt
            .block_on(tokio::net::TcpListener::bind(("127.0.0.1", port)))
            .unwrap_or_else(|e| panic!("s3s-fs: bind 127.0.0.1:{port}: {e}"));
        let port = listener.local_addr().unwrap().port();
        let q = quirks.clone();
        let serve = hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
            let (service, quirks) = (service.clone(), q.clone());
            async move {
                let listing = req.uri().query().is_some_and(|q| q.contains("list-type=2"));
                let answer = service.call(req.map(s3s::Body::from)).await?;
                if !(listing && quirks.unquoted_listed_etags.load(Relaxed)) {
                    return Ok::<_, s3s::HttpError>(answer);
                }
                let (mut head, mut body) = answer.into_parts();
                let xml = body.store_all_limited(64 << 20).await.unwrap_or_default();
                let xml = String::from_utf8_lossy(&xml)
                    .replace("<ETag>\"", "<ETag>")
                    .replace("\"</ETag>", "</ETag>")
                    .replace("<ETag>&quot;", "<ETag>")
                    .replace("&quot;</ETag>", "</ETag>");
                head.headers.remove(http::header::CONTENT_LENGTH);
                Ok(http::Response::from_parts(head, s3s::Body::from(xml)))
            }
        });
        rt.spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    continue;
                };
                let _ = socket.set_nodelay(true);
                let conn = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(socket), serve.clone());
                tokio::spawn(conn);
            }
        });
        S3s {
            port,
            quirks,
            rt: Some(rt),
            root,
        }
    }

    /// Listings (ListObjectsV2) answered so far.
    pub fn lists(&self) -> u64 {
        self.quirks.lists.load(Relaxed)
    }

    /// For a server kept in a static, never dropped: remove its directory
    /// when the process exits.
    pub fn remove_at_exit(&self) {
        static ROOTS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
        extern "C" fn remove() {
            for root in ROOTS.lock().unwrap_or_else(|p| p.into_inner()).iter() {
                let _ = std::fs::remove_dir_all(root);
            }
        }
        let mut roots = ROOTS.lock().unwrap();
        if roots.is_empty() {
            // SAFETY: `remove` is a plain function that touches only
            // ROOTS, a static alive until the process ends.
            assert_eq!(unsafe { libc::atexit(remove) }, 0);
        }
        roots.push(self.root.path().to_path_buf());
    }

    /// Stop the server (its listener and every connection); the port it
    /// listened on.
    pub fn stop(mut self) -> u16 {
        self.shut_down();
        self.port
    }

    fn shut_down(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

impl S3Server for S3s {
    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// s3s-fs keeps a bucket as a directory of its root.
    fn create_bucket(&self, bucket: &str) {
        std::fs::create_dir_all(self.root.path().join(bucket)).unwrap();
    }
}

impl Drop for S3s {
    fn drop(&mut self) {
        self.shut_down();
    }
}

/// Answers unlike S3's that a test turns on, as other object stores and
/// S3-compatible servers give them; and the listings answered.
#[derive(Debug, Default)]
pub struct Quirks {
    /// Listings give ETags unquoted, as Azure's do (`<Etag>0x8D…</Etag>`),
    /// while GETs and HEADs quote them.
    pub unquoted_listed_etags: AtomicBool,
    /// GETs and HEADs give weak ETags (`W/"…"`), as an HTTP server that
    /// compresses does; listings still give them strong.
    pub weak_etags: AtomicBool,
    /// `If-Match` is ignored (as s3s-fs itself and some S3-compatible
    /// servers do): a GET answers the version the server has.
    pub ignore_if_match: AtomicBool,
    /// `If-Match` compares strongly, as RFC 9110 says it must (s3s-fs
    /// compares the tags' values): a weak tag, asked or answered
    /// (`weak_etags`), never matches.
    pub strict_if_match: AtomicBool,
    /// ListObjectsV2 requests answered.
    pub lists: AtomicU64,
}

/// s3s-fs answering as S3 does where it does not (the module's list).
struct AsS3 {
    inner: s3s_fs::FileSystem,
    root: PathBuf,
    quirks: Arc<Quirks>,
}

impl AsS3 {
    /// What the file system holds at `bucket`/`key`.
    fn stat(&self, bucket: &str, key: &str) -> Option<std::fs::Metadata> {
        std::fs::metadata(self.root.join(bucket).join(key)).ok()
    }

    /// The `If-Match` condition to apply: none when it is ignored; one no
    /// tag meets when it is weak, or the tag answered is, and the server
    /// compares strongly.
    fn if_match(&self, asked: Option<ETagCondition>) -> Option<ETagCondition> {
        let strict = self.quirks.strict_if_match.load(Relaxed);
        let q = &self.quirks;
        asked
            .filter(|_| !q.ignore_if_match.load(Relaxed))
            .map(|c| match c {
                ETagCondition::ETag(t)
                    if strict && (matches!(t, ETag::Weak(_)) || q.weak_etags.load(Relaxed)) =>
                {
                    ETagCondition::ETag(ETag::Strong("never matches".into()))
                }
                c => c,
            })
    }

    /// A GET's or HEAD's ETag as the quirks turned on give it.
    fn answered_tag(&self, tag: Option<ETag>) -> Option<ETag> {
        match tag {
            Some(t) if self.quirks.weak_etags.load(Relaxed) => {
                Some(ETag::Weak(t.value().to_string()))
            }
            t => t,
        }
    }

    /// A key that names a directory of objects, not an object.
    fn is_prefix(&self, bucket: &str, key: &str) -> bool {
        key.is_empty() || key.ends_with('/') || self.stat(bucket, key).is_some_and(|m| m.is_dir())
    }
}

/// 412 unless `if_match` admits `etag`; 304 if `if_none_match` does.
fn preconditions(
    etag: Option<&ETag>,
    if_match: Option<&ETagCondition>,
    if_none_match: Option<&ETagCondition>,
) -> S3Result<()> {
    let admits = |c: &ETagCondition| match c {
        ETagCondition::Any => etag.is_some(),
        ETagCondition::ETag(want) => etag.is_some_and(|e| e.value() == want.value()),
    };
    if if_match.is_some_and(|c| !admits(c)) {
        return Err(s3_error!(PreconditionFailed));
    }
    if if_none_match.is_some_and(admits) {
        return Err(s3_error!(NotModified));
    }
    Ok(())
}

/// A request of `input` made as `req` was (its caller, URI, region).
fn like<T, U>(req: &S3Request<T>, input: U) -> S3Request<U> {
    S3Request {
        input,
        method: req.method.clone(),
        uri: req.uri.clone(),
        headers: Default::default(),
        extensions: Default::default(),
        credentials: req.credentials.clone(),
        region: req.region.clone(),
        service: req.service.clone(),
        trailing_headers: None,
    }
}

/// `impl S3 for AsS3`: the methods listed forwarded to s3s-fs, then the
/// ones written out (async_trait must see them all in one impl).
macro_rules! as_s3 {
    ($($name:ident($input:ty) -> $output:ty;)* { $($own:tt)* }) => {
        #[async_trait::async_trait]
        impl S3 for AsS3 {
            $(
                async fn $name(&self, req: S3Request<$input>) -> S3Result<S3Response<$output>> {
                    self.inner.$name(req).await
                }
            )*
            $($own)*
        }
    };
}

as_s3! {
    create_bucket(CreateBucketInput) -> CreateBucketOutput;
    copy_object(CopyObjectInput) -> CopyObjectOutput;
    delete_bucket(DeleteBucketInput) -> DeleteBucketOutput;
    delete_object(DeleteObjectInput) -> DeleteObjectOutput;
    delete_objects(DeleteObjectsInput) -> DeleteObjectsOutput;
    get_bucket_location(GetBucketLocationInput) -> GetBucketLocationOutput;
    head_bucket(HeadBucketInput) -> HeadBucketOutput;
    list_buckets(ListBucketsInput) -> ListBucketsOutput;
    list_objects(ListObjectsInput) -> ListObjectsOutput;
    put_object(PutObjectInput) -> PutObjectOutput;
    create_multipart_upload(CreateMultipartUploadInput) -> CreateMultipartUploadOutput;
    upload_part(UploadPartInput) -> UploadPartOutput;
    complete_multipart_upload(CompleteMultipartUploadInput) -> CompleteMultipartUploadOutput;
    abort_multipart_upload(AbortMultipartUploadInput) -> AbortMultipartUploadOutput;
    {
        /// s3s-fs lists objects without their ETags; S3 always gives
        /// them (a disk cache keys its blocks by them): each object's
        /// ETag as its HEAD says it.
        async fn list_objects_v2(
            &self,
            req: S3Request<ListObjectsV2Input>,
        ) -> S3Result<S3Response<ListObjectsV2Output>> {
            self.quirks.lists.fetch_add(1, Relaxed);
            let bucket = req.input.bucket.clone();
            let mut heads = Vec::new();
            let mut out = self
                .inner
                .list_objects_v2(like(&req, req.input.clone()))
                .await?;
            for o in out.output.contents.iter().flatten() {
                if o.e_tag.is_none()
                    && let Some(key) = &o.key
                {
                    let head = HeadObjectInput::builder()
                        .bucket(bucket.clone())
                        .key(key.clone())
                        .build()
                        .map_err(|e| s3_error!(InternalError, "{e}"))?;
                    heads.push(self.inner.head_object(like(&req, head)).await?.output.e_tag);
                } else {
                    heads.push(o.e_tag.clone());
                }
            }
            for (o, tag) in out.output.contents.iter_mut().flatten().zip(heads) {
                o.e_tag = tag;
            }
            Ok(out)
        }

        async fn head_object(
            &self,
            req: S3Request<HeadObjectInput>,
        ) -> S3Result<S3Response<HeadObjectOutput>> {
            if self.is_prefix(&req.input.bucket, &req.input.key) {
                return Err(s3_error!(NoSuchKey));
            }
            let (if_match, if_none_match) = (req.input.if_match.clone(), req.input.if_none_match.clone());
            let mut out = self.inner.head_object(req).await?;
            preconditions(out.output.e_tag.as_ref(), self.if_match(if_match).as_ref(), if_none_match.as_ref())?;
            out.output.e_tag = self.answered_tag(out.output.e_tag);
            Ok(out)
        }

        async fn get_object(
            &self,
            mut req: S3Request<GetObjectInput>,
        ) -> S3Result<S3Response<GetObjectOutput>> {
            let (bucket, key) = (req.input.bucket.clone(), req.input.key.clone());
            if self.is_prefix(&bucket, &key) {
                return Err(s3_error!(NoSuchKey));
            }
            if let (Some(Range::Suffix { length }), Some(size)) = (
                req.input.range,
                self.stat(&bucket, &key).map(|m| m.len()),
            )
                && length > size
            {
                if size == 0 {
                    return Err(s3_error!(InvalidRange));
                }
                req.input.range = Some(Range::Int {
                    first: 0,
                    last: None,
                });
            }
            let (if_match, if_none_match) = (req.input.if_match.clone(), req.input.if_none_match.clone());
            let mut out = self.inner.get_object(req).await?;
            preconditions(out.output.e_tag.as_ref(), self.if_match(if_match).as_ref(), if_none_match.as_ref())?;
            out.output.e_tag = self.answered_tag(out.output.e_tag);
            Ok(out)
        }
    }
}
