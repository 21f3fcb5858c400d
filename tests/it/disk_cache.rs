//! The persistent disk cache (`--disk-cache`, issue 28) through real
//! mounts of a netCDF-4 object in a local S3 server (s3s-fs): a remount
//! re-reads what was read before with no data request, two mounts share
//! one cache, an object replaced upstream gives its new bytes, a damaged
//! block is found and read again, the size bound holds, and a daemon
//! killed while writing leaves nothing that is served wrong.
//!
//! The object is written by netCDF4-python (random float32, zlib, chunked
//! 256 KiB) with its values as raw little-endian bytes beside it
//! (numpy's `tofile`): what every read is compared with.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common;
use crate::common::mount::Mount;
use crate::common::servers::S3Server;

const BUCKET: &str = "slabfs-disk-cache";

/// A netCDF-4 file of one float32 variable `v` (`n` values) and its raw
/// values, written into `dir`.
fn write_file(dir: &Path, n: usize, seed: u32) -> (PathBuf, Vec<u8>) {
    let nc = dir.join(format!("f{seed}.nc"));
    let raw = dir.join(format!("f{seed}.raw"));
    let script = format!(
        "import netCDF4, numpy as np\n\
         v = np.random.default_rng({seed}).random({n}, dtype='f4')\n\
         with netCDF4.Dataset({nc:?}, 'w') as d:\n\
         \x20   d.createDimension('x', {n})\n\
         \x20   x = d.createVariable('v', 'f4', ('x',), zlib=True, complevel=1, chunksizes=(65536,))\n\
         \x20   x[:] = v\n\
         v.astype('<f4').tofile({raw:?})\n",
        nc = nc.display().to_string(),
        raw = raw.display().to_string(),
    );
    common::run_python(&["-c".as_ref(), script.as_ref()]);
    (nc, std::fs::read(raw).unwrap())
}

fn stats(m: &Mount) -> Value {
    serde_json::from_slice(&std::fs::read(m.path(".slabfs/stats")).unwrap()).unwrap()
}

/// Data requests (GETs, ranged or whole) the mount made.
fn gets(m: &Mount) -> u64 {
    let doc = stats(m);
    let r = &doc["remote"][&format!("s3://{BUCKET}")]["requests"];
    r["GET"].as_u64().unwrap_or(0) + r["ranged_GET"].as_u64().unwrap_or(0)
}

/// Mount options: the S3 server at `endpoint`, the disk cache in `cache`,
/// no refresh.
fn cached<'a>(endpoint: &'a str, cache: &'a Path) -> [&'a str; 6] {
    [
        "--endpoint-url",
        endpoint,
        "--disk-cache",
        cache.to_str().unwrap(),
        "--refresh",
        "0",
    ]
}

/// A writer of the Zarr v3 array `name` (1024 x 1024 float32 of random
/// values; `layout`: zarr-python's `create_array` chunking arguments)
/// into `dir`, uploaded to the bucket as `name`: each call (a seed)
/// writes it anew and answers its values as raw little-endian bytes.
fn zarr_in_bucket<'a>(
    s3: &'a common::s3s::S3s,
    dir: &'a Path,
    name: &'a str,
    layout: &'a str,
) -> impl Fn(u32) -> Vec<u8> + 'a {
    move |seed| {
        let store = dir.join(name);
        let raw = dir.join(format!("{name}.raw"));
        let script = format!(
            "import zarr, numpy as np, shutil\n\
             shutil.rmtree({store:?}, ignore_errors=True)\n\
             v = np.random.default_rng({seed}).random((1024, 1024), dtype='f4')\n\
             a = zarr.create_array({store:?}, shape=v.shape, {layout}, dtype='f4')\n\
             a[:] = v\n\
             v.astype('<f4').tofile({raw:?})\n",
            store = store.display().to_string(),
            raw = raw.display().to_string(),
        );
        common::run_python(&["-c".as_ref(), script.as_ref()]);
        s3.upload_dir(BUCKET, &store, name);
        std::fs::read(raw).unwrap()
    }
}

/// Listings (LIST requests) the mount made.
fn lists(m: &Mount) -> u64 {
    stats(m)["remote"][&format!("s3://{BUCKET}")]["requests"]["LIST"]
        .as_u64()
        .unwrap_or(0)
}

/// The mount's stats once its disk cache has written everything it was
/// handed (blocks are written by a thread of their own, after the read).
fn settled(m: &Mount) -> Value {
    let written = || stats(m)["disk_cache"]["bytes_pending"] == 0;
    crate::mount_live::wait_for(m, "the blocks written", Duration::from_secs(20), written);
    stats(m)
}

struct Setup {
    s3: common::s3s::S3s,
    tmp: tempfile::TempDir,
    want: Vec<u8>,
}

impl Setup {
    /// A server holding one 8 MiB netCDF-4 object, `nc/f1.nc`.
    fn new() -> Setup {
        let s3 = common::s3s::S3s::start();
        s3.create_bucket(BUCKET);
        let tmp = tempfile::tempdir().unwrap();
        let (nc, want) = write_file(tmp.path(), 2 << 20, 1);
        s3.put_files(BUCKET, vec![("nc/f1.nc".into(), nc)]);
        Setup { s3, tmp, want }
    }

    fn cache_dir(&self) -> PathBuf {
        self.tmp.path().join("cache")
    }

    fn mount(&self, extra: &[&str]) -> Mount {
        let endpoint = self.s3.endpoint();
        let cache = self.cache_dir();
        let mut args = vec![
            "--endpoint-url",
            endpoint.as_str(),
            "--disk-cache",
            cache.to_str().unwrap(),
            "--refresh",
            "0",
        ];
        args.extend_from_slice(extra);
        Mount::start(Path::new(&format!("s3://{BUCKET}/nc/f1.nc")), &args)
    }
}

/// Block files under the cache directory, with their sizes.
fn blocks(dir: &Path) -> Vec<(PathBuf, u64)> {
    let mut out = Vec::new();
    for sub in std::fs::read_dir(dir.join("v1"))
        .into_iter()
        .flatten()
        .flatten()
    {
        for f in std::fs::read_dir(sub.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            out.push((f.path(), f.metadata().unwrap().len()));
        }
    }
    out
}

/// A remount re-reads with no data request; a second mount alive at the
/// same time shares the cache; the bytes are netCDF4-python's.
#[test]
fn a_remount_rereads_from_disk_with_no_data_request() {
    let s = Setup::new();
    let first = s.mount(&[]);
    assert_eq!(std::fs::read(first.path("v")).unwrap(), s.want);
    assert!(gets(&first) > 0);
    // Every byte of the object written once (concurrent reads of one
    // block fetch it once).
    let size = std::fs::metadata(s.tmp.path().join("f1.nc")).unwrap().len();
    let doc = settled(&first);
    assert_eq!(
        doc["disk_cache"]["bytes_written"].as_u64(),
        Some(size),
        "{doc}"
    );
    // A second mount while the first is alive: shares the blocks.
    let second = s.mount(&[]);
    assert_eq!(std::fs::read(second.path("v")).unwrap(), s.want);
    assert_eq!(gets(&second), 0, "{}", stats(&second));
    first.stop();
    second.stop();
    // After a restart: no data request either.
    let port = common::servers::free_port().to_string();
    let again = s.mount(&["--metrics", &port]);
    assert_eq!(std::fs::read(again.path("v")).unwrap(), s.want);
    assert_eq!(gets(&again), 0, "{}", stats(&again));
    let hits = stats(&again)["disk_cache"]["hits"].as_u64().unwrap();
    assert!(hits >= 8, "{hits}");
    // The same counter on the metrics endpoint.
    let mut conn =
        std::net::TcpStream::connect(("127.0.0.1", port.parse::<u16>().unwrap())).unwrap();
    std::io::Write::write_all(&mut conn, b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(&mut conn, &mut text).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("slabfs_disk_cache_hits_total "))
        .unwrap_or_else(|| panic!("{text}"));
    let scraped: u64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(scraped >= hits, "{line} vs {hits}");
    again.stop();
}

/// An object replaced upstream (another ETag) is read in its new version,
/// never from the old blocks; a block damaged on disk is found by its
/// checksum, removed and read again from the store.
#[test]
fn a_replaced_object_and_a_damaged_block_are_read_again() {
    let s = Setup::new();
    let m = s.mount(&[]);
    assert_eq!(std::fs::read(m.path("v")).unwrap(), s.want);
    settled(&m);
    m.stop();
    // One byte flipped in the middle of a block file.
    let (path, len) = blocks(&s.cache_dir())
        .into_iter()
        .max_by_key(|b| b.1)
        .unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[len as usize / 2] ^= 0x40;
    std::fs::write(&path, bytes).unwrap();
    let m = s.mount(&[]);
    assert_eq!(std::fs::read(m.path("v")).unwrap(), s.want);
    let doc = stats(&m);
    // Found damaged (by each read that met it before it was removed).
    assert!(doc["disk_cache"]["corrupt"].as_u64() >= Some(1), "{doc}");
    assert_eq!(gets(&m), 1, "the damaged block alone is fetched: {doc}");
    m.stop();
    // Replaced upstream by other values.
    let (nc, want) = write_file(s.tmp.path(), 2 << 20, 2);
    s.s3.put_files(BUCKET, vec![("nc/f1.nc".into(), nc)]);
    let m = s.mount(&[]);
    assert_eq!(std::fs::read(m.path("v")).unwrap(), want);
    assert!(gets(&m) > 0);
    m.stop();
}

/// The cache never holds much more than its size: the blocks used
/// longest ago go first.
#[test]
fn the_size_bound_holds() {
    let s = Setup::new();
    let m = s.mount(&["--disk-cache-size", "3MiB"]);
    assert_eq!(std::fs::read(m.path("v")).unwrap(), s.want);
    settled(&m);
    let held: u64 = blocks(&s.cache_dir()).iter().map(|b| b.1).sum();
    assert!(held <= 3 << 20, "{held} bytes held");
    let doc = stats(&m);
    assert!(
        doc["disk_cache"]["evictions"].as_u64().unwrap() > 0,
        "{doc}"
    );
    m.stop();
}

/// A daemon killed (SIGKILL) while it fills the cache leaves nothing that
/// is served wrong: the next mount reads the right bytes, and the partial
/// files the dead one left are removed.
#[test]
fn a_daemon_killed_while_writing_leaves_nothing_wrong() {
    let s = Setup::new();
    let m = s.mount(&[]);
    let path = m.path("v");
    let reader = std::thread::spawn(move || {
        let _ = std::fs::read(path);
    });
    // Kill it once blocks are being written.
    let deadline = Instant::now() + Duration::from_secs(20);
    while blocks(&s.cache_dir()).is_empty() {
        assert!(Instant::now() < deadline, "{}", m.log());
        std::thread::sleep(Duration::from_millis(5));
    }
    let dead = m.pid();
    m.signal(libc::SIGKILL);
    let _ = reader.join();
    drop(m);
    // What a kill in the middle of a write leaves: a partial file.
    let tmp = s.cache_dir().join("tmp");
    std::fs::write(tmp.join(format!("{dead}-999")), b"partial").unwrap();
    let m = s.mount(&[]);
    assert_eq!(std::fs::read(m.path("v")).unwrap(), s.want);
    let cleaned = || !tmp.join(format!("{dead}-999")).exists();
    crate::mount_live::wait_for(
        &m,
        "the partial file removed",
        Duration::from_secs(10),
        cleaned,
    );
    m.stop();
}

/// A Zarr store in a bucket (chunks read whole by key): a remount re-reads
/// with no GET (each directory's listing names the versions kept on
/// disk); the store rewritten upstream with other values is read anew.
#[test]
fn a_zarr_store_rereads_from_disk_and_follows_a_rewrite() {
    let s3 = common::s3s::S3s::start();
    s3.create_bucket(BUCKET);
    let tmp = tempfile::tempdir().unwrap();
    // Chunks of whole rows: a read inside one is served from that chunk
    // alone (`read_shared`).
    let write = zarr_in_bucket(&s3, tmp.path(), "z.zarr", "chunks=(128, 1024)");
    let want = write(1);
    let endpoint = s3.endpoint();
    let cache = tmp.path().join("cache");
    let args = cached(&endpoint, &cache);
    let source = format!("s3://{BUCKET}/z.zarr");
    // Without a cache, for the listings a first read costs.
    let m = Mount::start(Path::new(&source), &[&args[..2], &args[4..]].concat());
    assert_eq!(std::fs::read(m.path("z.zarr")).unwrap(), want);
    let plain = lists(&m);
    m.stop();
    // A first read with an empty cache lists nothing more: the versions
    // come from the GETs' answers.
    let m = Mount::start(Path::new(&source), &args);
    assert_eq!(std::fs::read(m.path("z.zarr")).unwrap(), want);
    assert_eq!(lists(&m), plain, "{}", stats(&m));
    // Each chunk a miss (one asked twice at once by a read and the
    // read-ahead counts twice).
    let dc = &stats(&m)["disk_cache"];
    assert!(dc["misses"].as_u64().unwrap() >= 8, "{dc}");
    assert_eq!(dc["hits"], 0, "{dc}");
    settled(&m);
    m.stop();
    // A remount: the open reads the metadata (never cached), the re-read
    // of the chunks no GET at all (their listing names the versions kept).
    let m = Mount::start(Path::new(&source), &args);
    std::fs::metadata(m.path("z.zarr")).unwrap();
    let opened = gets(&m);
    assert_eq!(std::fs::read(m.path("z.zarr")).unwrap(), want);
    assert_eq!(gets(&m), opened, "{}", stats(&m));
    assert_eq!(stats(&m)["disk_cache"]["hits"], 8);
    m.stop();
    // A read of one chunk alone (4 KiB in the middle) too.
    let m = Mount::start(Path::new(&source), &args);
    std::fs::metadata(m.path("z.zarr")).unwrap();
    let opened = gets(&m);
    let mut piece = vec![0u8; 4096];
    let at = want.len() / 2 + 12_345;
    std::os::unix::fs::FileExt::read_exact_at(
        &std::fs::File::open(m.path("z.zarr")).unwrap(),
        &mut piece,
        at as u64,
    )
    .unwrap();
    assert_eq!(piece, want[at..at + 4096]);
    assert_eq!(gets(&m), opened, "{}", stats(&m));
    m.stop();
    let want = write(2);
    let m = Mount::start(Path::new(&source), &args);
    assert_eq!(std::fs::read(m.path("z.zarr")).unwrap(), want);
    m.stop();
}

/// An object read from a warm disk cache reads like a local file: its
/// latency (what makes the engine fan its reads out over threads and read
/// far ahead) is none once its last blocks all came from the cache, and
/// the link's again as soon as one must be fetched.
#[test]
fn a_warm_object_reads_like_a_local_file_until_a_block_is_fetched() {
    use slabfs::storage::Network;
    use slabfs::storage::location::Location;
    use slabfs::storage::remote::{Config, Remote};
    let s3 = common::s3s::S3s::start();
    s3.create_bucket(BUCKET);
    let tmp = tempfile::tempdir().unwrap();
    // 20 blocks of 1 MiB, each its own byte value.
    let data: Vec<u8> = (0..20u8).flat_map(|b| vec![b; 1 << 20]).collect();
    let file = tmp.path().join("o.bin");
    std::fs::write(&file, &data).unwrap();
    s3.put_files(BUCKET, vec![("o.bin".into(), file)]);
    let url = format!("s3://{BUCKET}/o.bin");
    let open = || {
        let net = Remote::new(Config {
            endpoint_url: Some(s3.endpoint()),
            disk_cache: Some(slabfs::storage::disk_cache::DiskCacheConfig {
                dir: tmp.path().join("cache"),
                size: 1 << 30,
            }),
            ..Default::default()
        });
        let files = net.files(vec![Location::parse(&url).unwrap()]).unwrap();
        (net, files.open(Path::new(&url)).unwrap())
    };
    let read = |f: &dyn slabfs::storage::ReadAt, block: usize| {
        let mut buf = vec![0u8; 1 << 20];
        f.read_exact_at(&mut buf, (block << 20) as u64).unwrap();
        assert!(buf.iter().all(|&b| b == block as u8), "block {block}");
    };
    let (net, f) = open();
    for b in 0..12 {
        read(&*f, b);
        assert!(f.latency().is_some(), "fetched: the link's latency");
    }
    while net.disk_cache().unwrap().bytes_pending != 0 {
        std::thread::sleep(Duration::from_millis(10));
    }
    drop((net, f));
    // A remount: the blocks read before come from the disk cache.
    let (_net, f) = open();
    for b in 0..12 {
        read(&*f, b);
    }
    assert_eq!(f.latency(), None, "12 blocks in a row from the disk cache");
    read(&*f, 12);
    assert!(f.latency().is_some(), "a block fetched: the link's again");
}

/// An Icechunk repository in a bucket (the committed fixture written by
/// icechunk-python): its snapshots, manifests and chunks never change
/// once written, so a remount re-reads every array from the disk cache
/// with no GET (only the branch's ref, which moves, is asked again when
/// the repository opens), and nothing is listed to learn versions.
#[test]
fn an_icechunk_repository_rereads_from_disk() {
    use sha2::{Digest, Sha256};
    let s3 = common::s3s::S3s::start();
    s3.create_bucket(BUCKET);
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/icechunk");
    s3.upload_dir(BUCKET, &fixtures.join("native"), "ice");
    let doc: Value =
        serde_json::from_slice(&std::fs::read(fixtures.join("expected.json")).unwrap()).unwrap();
    let want: Vec<(String, String)> = doc["read"]["main"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(p, a)| {
            let p = p.trim_start_matches('/').to_string();
            (p, a["sha256"].as_str().unwrap().to_string())
        })
        .collect();
    assert!(want.len() >= 3);
    let read_all = |m: &Mount| {
        for (path, sha) in &want {
            let bytes = std::fs::read(m.path(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
            let got: String = Sha256::digest(&bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            assert_eq!(&got, sha, "{path}");
        }
    };
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let endpoint = s3.endpoint();
    let args = cached(&endpoint, &cache);
    let source = format!("s3://{BUCKET}/ice");
    let m = Mount::start(Path::new(&source), &args);
    read_all(&m);
    assert!(gets(&m) > 0);
    settled(&m);
    m.stop();
    let m = Mount::start(Path::new(&source), &args);
    std::fs::metadata(m.path(&want[0].0)).unwrap();
    let (opened, listed) = (gets(&m), lists(&m));
    read_all(&m);
    assert_eq!((gets(&m), lists(&m)), (opened, listed), "{}", stats(&m));
    assert!(stats(&m)["disk_cache"]["hits"].as_u64().unwrap() > 0);
    m.stop();
}

/// A sharded Zarr v3 array in a bucket (zarr-python; inner chunks read by
/// range): its shards are kept block by block, so a remount re-reads the
/// array with no GET, and the bytes are zarr-python's every time.
#[test]
fn a_sharded_array_rereads_from_disk() {
    let s3 = common::s3s::S3s::start();
    s3.create_bucket(BUCKET);
    let tmp = tempfile::tempdir().unwrap();
    let write = zarr_in_bucket(
        &s3,
        tmp.path(),
        "s.zarr",
        "chunks=(64, 256), shards=(512, 1024)",
    );
    let want = write(5);
    let endpoint = s3.endpoint();
    let cache = tmp.path().join("cache");
    let args = cached(&endpoint, &cache);
    let source = format!("s3://{BUCKET}/s.zarr");
    let m = Mount::start(Path::new(&source), &args);
    assert_eq!(std::fs::read(m.path("s.zarr")).unwrap(), want);
    assert!(gets(&m) > 0);
    // Unmounted at once: the unmount writes what is still pending.
    m.stop();
    let m = Mount::start(Path::new(&source), &args);
    std::fs::metadata(m.path("s.zarr")).unwrap();
    let opened = gets(&m);
    assert_eq!(std::fs::read(m.path("s.zarr")).unwrap(), want);
    assert_eq!(gets(&m), opened, "{}", stats(&m));
    m.stop();
    // Rewritten upstream: the new values, never the blocks kept.
    let want = write(6);
    let m = Mount::start(Path::new(&source), &args);
    assert_eq!(std::fs::read(m.path("s.zarr")).unwrap(), want);
    m.stop();
}

// Regressions found by a review of the disk cache (session 16).

fn review_net(
    s3: &common::s3s::S3s,
    cache: &Path,
) -> (
    slabfs::storage::remote::Remote,
    std::sync::Arc<dyn slabfs::storage::Store>,
) {
    use slabfs::storage::Network;
    use slabfs::storage::location::Location;
    use slabfs::storage::remote::{Config, Remote};
    let net = Remote::new(Config {
        endpoint_url: Some(s3.endpoint()),
        disk_cache: Some(slabfs::storage::disk_cache::DiskCacheConfig {
            dir: cache.to_path_buf(),
            size: 1 << 30,
        }),
        ..Default::default()
    });
    let url = format!("s3://{BUCKET}/arr");
    let loc = Location::parse(&url).unwrap();
    let files = net.files(vec![loc.clone()]).unwrap();
    let store = files.store_at(&loc).unwrap();
    (net, store)
}

fn review_put(s3: &common::s3s::S3s, dir: &Path, key: &str, data: &[u8]) {
    let f = dir.join(format!("up-{}", data.len()));
    std::fs::write(&f, data).unwrap();
    s3.put_files(BUCKET, vec![(key.to_string(), f)]);
}

fn review_count(net: &slabfs::storage::remote::Remote, kind: &str) -> u64 {
    let i = slabfs::storage::remote::metrics::KINDS
        .iter()
        .position(|k| *k == kind)
        .unwrap();
    net.metrics().iter().map(|s| s.requests[i]).sum()
}

/// A suffix read (a shard index at the end) of a chunk object whose
/// version the store learned, after the object was replaced upstream by
/// one of another size: the answer must be the last bytes of one version
/// or the other, never bytes from the middle of the new one.
#[test]
fn review_suffix_after_replace_reads_the_tail() {
    use slabfs::storage::ByteRange;
    let s3 = common::s3s::S3s::start();
    s3.create_bucket(BUCKET);
    let tmp = tempfile::tempdir().unwrap();
    let a: Vec<u8> = (0..3u32 << 20).map(|i| (i % 251) as u8).collect();
    let b: Vec<u8> = (0..4u32 << 20).map(|i| (i % 241) as u8 ^ 0x5a).collect();
    review_put(&s3, tmp.path(), "arr/c/0", &a);
    let (_net, store) = review_net(&s3, &tmp.path().join("cache"));
    // An inner chunk read: version A learned (block 0 only fetched).
    let got = store
        .get_range("c/0", ByteRange::At { offset: 0, len: 10 })
        .unwrap()
        .unwrap();
    assert_eq!(got, a[..10]);
    // Replaced upstream by a larger object.
    review_put(&s3, tmp.path(), "arr/c/0", &b);
    let tail = store
        .get_range("c/0", ByteRange::Suffix(10))
        .unwrap()
        .unwrap();
    assert!(
        tail == a[a.len() - 10..] || tail == b[b.len() - 10..],
        "the last 10 bytes of neither version: {tail:?} (B at 3 MiB - 10: {:?})",
        &b[a.len() - 10..a.len()]
    );
}

/// An Icechunk chunk read by range (get_immutable) on a miss goes through
/// the chunk-unit machinery: it notes `chunks/`, and a remount that
/// misses one chunk lists the whole `chunks/` directory.
#[test]
fn review_immutable_miss_lists_chunks_dir_on_remount() {
    use slabfs::storage::ByteRange;
    let s3 = common::s3s::S3s::start();
    s3.create_bucket(BUCKET);
    let tmp = tempfile::tempdir().unwrap();
    for i in 0..5 {
        review_put(
            &s3,
            tmp.path(),
            &format!("arr/chunks/X{i}"),
            &vec![i as u8; 1000 + i],
        );
    }
    let cache = tmp.path().join("cache");
    let first_100 = |store: &dyn slabfs::storage::Store, key: &str| {
        let range = ByteRange::At {
            offset: 0,
            len: 100,
        };
        store
            .get_immutable(key, Some(range), u64::MAX)
            .unwrap()
            .unwrap()
    };
    {
        let (net, store) = review_net(&s3, &cache);
        assert_eq!(first_100(store.as_ref(), "chunks/X0"), vec![0u8; 100]);
        net.flush_disk_cache(Duration::from_secs(10));
    }
    let (net, store) = review_net(&s3, &cache);
    let before = review_count(&net, "LIST");
    first_100(store.as_ref(), "chunks/X1");
    assert_eq!(
        review_count(&net, "LIST"),
        before,
        "an immutable read listed chunks/"
    );
}

/// A range at the far end of u64 (a corrupt manifest's offset): past the
/// end, an UnexpectedEof error, never a panic.
#[test]
fn review_range_near_u64_max_is_an_error() {
    use slabfs::storage::ByteRange;
    let s3 = common::s3s::S3s::start();
    s3.create_bucket(BUCKET);
    let tmp = tempfile::tempdir().unwrap();
    review_put(&s3, tmp.path(), "arr/c/0", &[1u8; 100]);
    let (_net, store) = review_net(&s3, &tmp.path().join("cache"));
    let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        store.get_range(
            "c/0",
            ByteRange::At {
                offset: u64::MAX - 10,
                len: 5,
            },
        )
    }));
    let got = got.expect("no panic");
    assert!(got.is_err(), "{got:?}");
}

// Regressions found by the review of issue 28's disk cache.

/// Data requests (GETs, whole or ranged) `net` made.
fn data_requests(net: &slabfs::storage::remote::Remote) -> u64 {
    review_count(net, "GET") + review_count(net, "ranged_GET")
}

/// A chunk object's version as a listing says it and as a GET's answer
/// says it are one version, whatever form each gives the ETag in: Azure
/// lists it unquoted and quotes it in answers; a server may make it weak
/// in answers. A remount then re-reads the chunk whole and by range (a
/// shard's inner chunk) from the disk cache with no data request (the
/// remount missed every time, and the ranges fell back to plain reads).
#[test]
fn review28_a_listed_and_an_answered_e_tag_are_one_version() {
    use slabfs::storage::ByteRange;
    use std::sync::atomic::Ordering::Relaxed;
    for quirk in ["unquoted listed", "weak answered"] {
        let s3 = common::s3s::S3s::start();
        s3.create_bucket(BUCKET);
        match quirk {
            "unquoted listed" => s3.quirks.unquoted_listed_etags.store(true, Relaxed),
            _ => s3.quirks.weak_etags.store(true, Relaxed),
        }
        let tmp = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..3u32 << 20).map(|i| (i % 253) as u8).collect();
        review_put(&s3, tmp.path(), "arr/c/0", &data);
        let cache = tmp.path().join("cache");
        let inner = ByteRange::At {
            offset: (1 << 20) + 5,
            len: 100,
        };
        let want_inner = &data[(1 << 20) + 5..(1 << 20) + 105];
        let read = |store: &dyn slabfs::storage::Store| {
            let got = store.get_many(&[("c/0".to_string(), u64::MAX)]);
            assert_eq!(
                got[0].as_ref().unwrap().as_deref(),
                Some(&data[..]),
                "{quirk}"
            );
            let part = store.get_range("c/0", inner).unwrap().unwrap();
            assert_eq!(part, want_inner, "{quirk}");
        };
        {
            let (net, store) = review_net(&s3, &cache);
            read(&*store);
            net.flush_disk_cache(Duration::from_secs(10));
        }
        let (net, store) = review_net(&s3, &cache);
        read(&*store);
        assert_eq!(data_requests(&net), 0, "{quirk}: {:?}", net.disk_cache());
    }
}

/// A server that ignores `If-Match` answers a chunk object pinned to its
/// listed version with the version it has now: the answer is served (a
/// GET's value now, one version), and kept under its own ETag, never
/// under the one pinned. (It was kept under the pinned one: once the
/// object went back to that version, a remount served the other
/// version's bytes as it.)
#[test]
fn review28_an_answer_is_kept_under_its_own_version_when_if_match_is_ignored() {
    use std::sync::atomic::Ordering::Relaxed;
    let s3 = common::s3s::S3s::start();
    s3.create_bucket(BUCKET);
    s3.quirks.ignore_if_match.store(true, Relaxed);
    let tmp = tempfile::tempdir().unwrap();
    let a = vec![b'a'; 1_500_000];
    let b = vec![b'b'; 1_500_000];
    review_put(&s3, tmp.path(), "arr/c/0", &a);
    review_put(&s3, tmp.path(), "arr/c/1", b"other chunk");
    let cache = tmp.path().join("cache");
    let get = |store: &dyn slabfs::storage::Store, key: &str| {
        store.get_many(&[(key.to_string(), u64::MAX)])[0]
            .as_ref()
            .unwrap()
            .clone()
            .unwrap()
    };
    {
        // Leaves the note of `c/`, so that the next store lists it.
        let (net, store) = review_net(&s3, &cache);
        get(&*store, "c/1");
        net.flush_disk_cache(Duration::from_secs(10));
    }
    {
        // `c/` listed: c/0 at version A, none of whose blocks is kept.
        let (net, store) = review_net(&s3, &cache);
        get(&*store, "c/1");
        assert_eq!(s3.lists(), 1);
        // Replaced by B: the GET pinned to A answers B.
        review_put(&s3, tmp.path(), "arr/c/0", &b);
        assert_eq!(get(&*store, "c/0"), b, "the value a GET answers now");
        net.flush_disk_cache(Duration::from_secs(10));
    }
    // Back to A (the same bytes: the same ETag): a remount lists A.
    review_put(&s3, tmp.path(), "arr/c/0", &a);
    let (_net, store) = review_net(&s3, &cache);
    assert!(get(&*store, "c/0") == a, "B's bytes served as version A");
}

/// A server that ignores `If-Match` answers a range of a chunk object
/// pinned to its listed version with another version: the answer is read
/// again plainly, and the listing, out of date, is dropped, so the next
/// read lists again and asks once. (The listing stayed: every later read
/// of that object cost two requests, the pinned one and the plain one.)
#[test]
fn an_answer_of_another_version_drops_the_listing() {
    use slabfs::storage::ByteRange;
    use std::sync::atomic::Ordering::Relaxed;
    let s3 = common::s3s::S3s::start();
    s3.create_bucket(BUCKET);
    s3.quirks.ignore_if_match.store(true, Relaxed);
    let tmp = tempfile::tempdir().unwrap();
    review_put(&s3, tmp.path(), "arr/c/0", &vec![b'a'; 3 << 20]);
    review_put(&s3, tmp.path(), "arr/c/1", b"other chunk");
    let cache = tmp.path().join("cache");
    {
        // Leaves the note of `c/`, so that the next store lists it.
        let (net, store) = review_net(&s3, &cache);
        store.get_many(&[("c/1".to_string(), u64::MAX)])[0]
            .as_ref()
            .unwrap();
        net.flush_disk_cache(Duration::from_secs(10));
    }
    let (net, store) = review_net(&s3, &cache);
    let range = ByteRange::At {
        offset: (1 << 20) + 7,
        len: 100,
    };
    // `c/` listed (c/0 at version A, none of its blocks kept), then c/0
    // replaced by B.
    store.get_many(&[("c/1".to_string(), u64::MAX)])[0]
        .as_ref()
        .unwrap();
    assert_eq!(s3.lists(), 1);
    review_put(&s3, tmp.path(), "arr/c/0", &vec![b'b'; 3 << 20]);
    let read = || {
        let before = data_requests(&net);
        let got = store.get_range("c/0", range).unwrap().unwrap();
        assert_eq!(got, vec![b'b'; 100], "the bytes of the version now");
        data_requests(&net) - before
    };
    assert_eq!(read(), 2, "the pinned GET answered B, read again plainly");
    let lists = s3.lists();
    assert_eq!(read(), 1, "listed again: B's blocks by one pinned GET");
    assert_eq!(s3.lists(), lists + 1);
    assert_eq!(read(), 0, "B's blocks from disk");
}

/// An object whose server gives weak ETags (`W/"…"`, as an HTTP server
/// or CDN that compresses does) and compares `If-Match` strongly, as RFC
/// 9110 says it must, read by ranges (a netCDF file), with and without the
/// disk cache: every range is read, still pinned to the version opened by
/// the answer's ETag and size. (Its ranges were sent `If-Match: W/"…"`,
/// which such a server never admits: every read failed with EIO.)
#[test]
fn an_object_with_a_weak_e_tag_is_read_by_ranges_from_a_strict_server() {
    use slabfs::storage::Network;
    use slabfs::storage::location::Location;
    use slabfs::storage::remote::{Config, Remote};
    use std::sync::atomic::Ordering::Relaxed;
    let s3 = common::s3s::S3s::start();
    s3.create_bucket(BUCKET);
    s3.quirks.weak_etags.store(true, Relaxed);
    s3.quirks.strict_if_match.store(true, Relaxed);
    let tmp = tempfile::tempdir().unwrap();
    let data: Vec<u8> = (0..3u32 << 20).map(|i| (i % 247) as u8).collect();
    review_put(&s3, tmp.path(), "f.nc", &data);
    for cached in [false, true] {
        let net = Remote::new(Config {
            endpoint_url: Some(s3.endpoint()),
            disk_cache: cached.then(|| slabfs::storage::disk_cache::DiskCacheConfig {
                dir: tmp.path().join("cache"),
                size: 1 << 30,
            }),
            ..Default::default()
        });
        let url = format!("s3://{BUCKET}/f.nc");
        let files = net.files(vec![Location::parse(&url).unwrap()]).unwrap();
        let f = files.open(Path::new(&url)).unwrap();
        let mut buf = vec![0u8; 100];
        let at = (1 << 20) + 3;
        f.read_exact_at(&mut buf, at as u64)
            .unwrap_or_else(|e| panic!("disk cache {cached}: {e}"));
        assert!(buf == data[at..at + 100], "disk cache {cached}");
    }
}

/// A range of 2^52 bytes of a chunk object (a corrupt shard index's
/// length), whether the object's version is known or not: an error
/// naming the object, with no memory spent on the length (the blocks it
/// spans were listed one by one, 2^32 of them, before the object's size
/// was looked at). In a child process whose address space is bounded.
#[test]
fn review28_a_huge_range_is_an_error_without_memory_spent_on_it() {
    common::in_child(
        "disk_cache::review28_a_huge_range_in_a_child",
        // One malloc arena per thread reserves 64 MiB of address space.
        &[("MALLOC_ARENA_MAX", "2")],
    );
}

#[test]
#[ignore = "run by review28_a_huge_range_is_an_error_without_memory_spent_on_it, in a child"]
fn review28_a_huge_range_in_a_child() {
    use slabfs::storage::ByteRange;
    common::child_only();
    let s3 = common::s3s::S3s::start();
    s3.create_bucket(BUCKET);
    let tmp = tempfile::tempdir().unwrap();
    let data: Vec<u8> = (0..3u32 << 20).map(|i| (i % 249) as u8).collect();
    review_put(&s3, tmp.path(), "arr/c/0", &data);
    review_put(&s3, tmp.path(), "arr/c/1", &data);
    let (_net, store) = review_net(&s3, &tmp.path().join("cache"));
    // At most 1 GiB more address space than the process has now.
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    let limit = libc::rlimit {
        rlim_cur: (kib << 10) + (1 << 30),
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: setrlimit reads the struct it is given, nothing else.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &limit) }, 0);
    let huge = |offset| ByteRange::At {
        offset,
        len: 1 << 52,
    };
    let small = ByteRange::At { offset: 7, len: 9 };
    for key in ["c/0", "c/1"] {
        // c/0: its size not known yet (a first read); c/1: known (learned
        // by a read of it first).
        if key == "c/1" {
            assert_eq!(store.get_range(key, small).unwrap().unwrap(), data[7..16]);
        }
        for offset in [5, 2 << 20] {
            let e = store.get_range(key, huge(offset)).unwrap_err().to_string();
            assert!(e.contains(&format!("arr/{key}")), "{e}");
        }
    }
    assert_eq!(store.get_range("c/0", small).unwrap().unwrap(), data[7..16]);
}

/// A batch of chunks in more listing units (here directories) than a
/// store keeps the listings of (64): a first read lists none of them (the
/// units pushed out of the 64 kept were listed one after another, for
/// each key, though nothing was noted), and a remount lists each at most
/// once, at most 64 of them. Counted at the server.
#[test]
fn review28_a_batch_over_more_units_than_are_kept_does_not_list_them_over() {
    let s3 = common::s3s::S3s::start();
    s3.create_bucket(BUCKET);
    let tmp = tempfile::tempdir().unwrap();
    let value = |i: usize| format!("chunk {i} ").repeat(100 + i).into_bytes();
    let mut files = Vec::new();
    for i in 0..100 {
        let f = tmp.path().join(format!("chunk-{i}"));
        std::fs::write(&f, value(i)).unwrap();
        files.push((format!("arr/d{i}/0"), f));
    }
    s3.put_files(BUCKET, files);
    let keys: Vec<(String, u64)> = (0..100).map(|i| (format!("d{i}/0"), u64::MAX)).collect();
    let cache = tmp.path().join("cache");
    let read_all = |store: &dyn slabfs::storage::Store| {
        for (i, got) in store.get_many(&keys).into_iter().enumerate() {
            assert_eq!(got.unwrap().unwrap(), value(i), "d{i}/0");
        }
    };
    {
        let (net, store) = review_net(&s3, &cache);
        let before = s3.lists();
        read_all(&*store);
        assert_eq!(s3.lists() - before, 0, "a first read lists nothing");
        net.flush_disk_cache(Duration::from_secs(10));
    }
    let (net, store) = review_net(&s3, &cache);
    let before = s3.lists();
    read_all(&*store);
    let listed = s3.lists() - before;
    assert!((1..=64).contains(&listed), "{listed} listings");
    // The units listed serve their chunks from disk.
    assert_eq!(data_requests(&net), 100 - listed, "{:?}", net.disk_cache());
}

/// The disk cache's counters through one realistic sequence: every block
/// a read needs counts once, as a hit (from disk, from the blocks read
/// last, or waiting to be written) or a miss (fetched), whatever the path
/// (a chunk whole, a shard's range, an Icechunk object, an object read by
/// ranges); a block found there already is not written or counted again,
/// and the bytes held are the directory's. (A value whose version was not
/// known counted one miss however many blocks it had; a value found in
/// part counted hits for blocks it did not use; a block looked at twice
/// by two reads counted twice; a block written again counted its bytes
/// held twice.)
#[test]
fn review28_the_counters_add_up() {
    use slabfs::storage::ByteRange;
    use slabfs::storage::Network;
    use slabfs::storage::disk_cache::Snapshot;
    use slabfs::storage::location::Location;
    const MIB: u64 = 1 << 20;
    let s3 = common::s3s::S3s::start();
    s3.create_bucket(BUCKET);
    let tmp = tempfile::tempdir().unwrap();
    let c0: Vec<u8> = (0..5 * MIB / 2).map(|i| (i % 241) as u8).collect();
    let c1 = vec![7u8; 1000];
    let x = vec![9u8; 3000];
    let o: Vec<u8> = (0..2 * MIB + 5).map(|i| (i % 239) as u8).collect();
    for (key, data) in [
        ("arr/c/0", &c0),
        ("arr/c/1", &c1),
        ("arr/chunks/X", &x),
        ("arr/o.bin", &o),
    ] {
        review_put(&s3, tmp.path(), key, data);
    }
    let cache = tmp.path().join("cache");
    let held = || -> u64 { blocks(&cache).iter().map(|b| b.1).sum() };
    let count = |net: &slabfs::storage::remote::Remote| {
        let s = net.disk_cache().unwrap();
        (s.hits, s.misses, s.bytes_read)
    };
    let settle = |net: &slabfs::storage::remote::Remote| -> Snapshot {
        net.flush_disk_cache(Duration::from_secs(10));
        net.disk_cache().unwrap()
    };
    let keys = [("c/0".to_string(), u64::MAX), ("c/1".to_string(), u64::MAX)];
    let read_chunks = |store: &dyn slabfs::storage::Store| {
        let got = store.get_many(&keys);
        assert_eq!(got[0].as_ref().unwrap().as_deref(), Some(&c0[..]));
        assert_eq!(got[1].as_ref().unwrap().as_deref(), Some(&c1[..]));
    };
    let (chunks, small) = (3 + 1, 5 * MIB / 2 + 1000);
    {
        let (net, store) = review_net(&s3, &cache);
        // A first read: every block fetched.
        read_chunks(&*store);
        assert_eq!(count(&net), (0, chunks, 0));
        // Again at once (blocks waiting to be written, or on disk).
        read_chunks(&*store);
        assert_eq!(count(&net), (chunks, chunks, small));
        let s = settle(&net);
        assert_eq!(s.bytes_written, small);
        assert_eq!(s.bytes_held, held());
        // A shard's inner chunk across blocks 0 and 1 of c/0.
        let part = ByteRange::At {
            offset: MIB - 10,
            len: 20,
        };
        let got = store.get_range("c/0", part).unwrap().unwrap();
        assert_eq!(got, c0[MIB as usize - 10..MIB as usize + 10]);
        assert_eq!(count(&net), (chunks + 2, chunks, small + 2 * MIB));
        // An Icechunk chunk object: a whole value is one block.
        for _ in 0..2 {
            let got = store.get_immutable("chunks/X", None, u64::MAX).unwrap();
            assert_eq!(got.as_deref(), Some(&x[..]));
        }
        assert_eq!(
            count(&net),
            (chunks + 3, chunks + 1, small + 2 * MIB + 3000)
        );
        let s = settle(&net);
        assert_eq!(s.bytes_written, small + 3000);
        assert_eq!(s.bytes_held, held());
    }
    // Another process evicted a block of c/0: a remount finds the rest of
    // c/0 but fetches it whole, and keeps only the block it lacked.
    let (path, _) = blocks(&cache)
        .into_iter()
        .find(|(_, len)| *len > MIB)
        .unwrap();
    std::fs::remove_file(path).unwrap();
    let (net, store) = review_net(&s3, &cache);
    read_chunks(&*store);
    assert_eq!(count(&net), (1, 3, 1000));
    let s = settle(&net);
    assert_eq!(s.bytes_written, MIB);
    assert_eq!(s.bytes_held, held());
    // An object read by ranges (a netCDF file): 3 blocks, fetched, then
    // found; two reads of one block at once count it once each.
    let url = format!("s3://{BUCKET}/arr/o.bin");
    let files = net.files(vec![Location::parse(&url).unwrap()]).unwrap();
    let f = files.open(std::path::Path::new(&url)).unwrap();
    let mut buf = vec![0u8; o.len()];
    f.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(buf, o);
    assert_eq!(count(&net), (1, 6, 1000));
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let mut buf = vec![0u8; o.len()];
                f.read_exact_at(&mut buf, 0).unwrap();
                assert_eq!(buf, o);
            });
        }
    });
    assert_eq!(count(&net), (7, 6, 1000 + 2 * o.len() as u64));
    let s = settle(&net);
    assert_eq!(s.bytes_written, MIB + o.len() as u64);
    assert_eq!(s.bytes_held, held());
}
