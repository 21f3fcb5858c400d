//! Helpers shared by the integration tests.

pub mod mount;
pub mod python;
pub mod s3s;
pub mod servers;

/// The AWS key id of every test's environment (tests/it/main.rs).
#[allow(dead_code)]
pub const AWS_KEY_ID: &str = "AKIASLABFSTESTKEY";
/// The secret of every test's environment: it must never show anywhere
/// (logs, errors, sidecars, xattrs, `.slabfs/stats`).
#[allow(dead_code)]
pub const AWS_SECRET: &str = "Sup3rS3cretKeyThatMustNeverAppear-7f1d9a";

/// A deterministic pseudo-random sequence, so failures reproduce.
#[allow(dead_code)]
pub struct Lcg(pub u64);

#[allow(dead_code)]
impl Lcg {
    /// The next value in `0..bound` (0 when `bound` is 0).
    pub fn next(&mut self, bound: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        if bound == 0 {
            0
        } else {
            (self.0 >> 33) % bound
        }
    }
}

/// The Python with the project's pinned packages (NumPy, zarr-python,
/// netCDF4...) that tests use to compute expected values: `SLABFS_PYTHON`
/// if set, else the project venv, which is created on first use with
/// `scripts/venv.sh` (under a lock, as tests run in parallel), so
/// a plain `cargo test` works on a fresh clone.
#[allow(dead_code)]
pub fn python() -> std::path::PathBuf {
    if let Some(p) = std::env::var_os("SLABFS_PYTHON") {
        return p.into();
    }
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let venv = repo.join(".venv/bin/python");
    static READY: std::sync::Once = std::sync::Once::new();
    READY.call_once(|| {
        // venv.sh is idempotent and fast when everything is installed; it
        // also installs pins added since the venv was made.
        let status = std::process::Command::new("flock")
            .arg(repo.join(".venv.lock"))
            .arg(repo.join("scripts/venv.sh"))
            .stdout(std::process::Stdio::null())
            .status()
            .expect("running flock scripts/venv.sh");
        assert!(
            status.success(),
            "scripts/venv.sh failed: the tests need Python with the packages of \
             scripts/requirements.txt (or set SLABFS_PYTHON to one that has them)"
        );
    });
    venv
}

/// Read all of `a`, then `ranges` pseudo-random byte ranges (starts and
/// ends inside elements, ranges past the end) seeded by `seed`, and
/// compare each with `expected` (the little-endian flat file).
#[allow(dead_code)]
pub fn check_ranges(
    a: &dyn slabfs::ArraySource,
    expected: &[u8],
    seed: u64,
    ranges: usize,
) -> Result<(), String> {
    use slabfs::dtype::Endian;
    use slabfs::engine::read::read_at;
    let mut whole = vec![0u8; expected.len() + 8];
    let n = read_at(a, 0, &mut whole, Endian::Little).map_err(|e| e.to_string())?;
    if whole[..n] != *expected {
        return Err(format!("whole read of {n} bytes differs"));
    }
    let size = expected.len() as u64;
    let mut rng = Lcg(size ^ seed);
    for _ in 0..ranges {
        let offset = rng.next(size + 4);
        let len = rng.next(size / 2 + 9);
        let mut buf = vec![0u8; len as usize];
        let n = read_at(a, offset, &mut buf, Endian::Little).map_err(|e| e.to_string())?;
        let lo = offset.min(size) as usize;
        let hi = (offset + len).min(size) as usize;
        if n != hi - lo || buf[..n] != expected[lo..hi] {
            return Err(format!("bytes {offset}+{len} differ"));
        }
    }
    Ok(())
}

/// Run this binary's test `name` (an `#[ignore]`d one, which calls
/// [`child_only`]) in a child process with `env` added to the
/// environment; panics with its output if it fails. For what reads the
/// process environment: a test must not change it while others run.
#[allow(dead_code)]
pub fn in_child(name: &str, env: &[(&str, &str)]) {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            name,
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD, "1")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("1 passed"),
        "{name} in a child process: {}\n{text}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Set in the environment of a child of [`in_child`].
const CHILD: &str = "SLABFS_TEST_CHILD";

/// Panics unless this process is a child of [`in_child`]: the ignored test
/// that calls it needs the environment its parent gives it.
#[allow(dead_code)]
pub fn child_only() {
    assert!(
        std::env::var_os(CHILD).is_some(),
        "run by its parent test, in a child process (common::in_child)"
    );
}

/// Taken by the tests whose timing bounds (a second or two: stalls,
/// hedges) a starved CPU would overrun ([`alone`]) and, shared, by the
/// tests that must not run beside those ([`side_by_side`]): the remote
/// tests, which keep the cores busy (servers, decoding).
static TIMING: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// Run with no [`side_by_side`] test.
#[allow(dead_code)]
pub fn alone() -> std::sync::RwLockWriteGuard<'static, ()> {
    TIMING.write().unwrap_or_else(|p| p.into_inner())
}

/// Run beside any test but an [`alone`] one.
#[allow(dead_code)]
pub fn side_by_side() -> std::sync::RwLockReadGuard<'static, ()> {
    TIMING.read().unwrap_or_else(|p| p.into_inner())
}

/// Run the test venv's Python with `args` (a script, `-c CODE`...), its
/// warnings and the Rust crates' logs off; panics with its stderr if it
/// fails.
pub fn run_python(args: &[&std::ffi::OsStr]) {
    let out = python::Python::new()
        .args(["-W", "ignore"])
        .args(args)
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
