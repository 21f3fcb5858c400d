//! Log lines of dataset loads, once per hour rather than on every refresh.
//!
//! A mount re-opens its source every `--refresh` interval (5 s by
//! default) and the loaders log what they find wrong each time they load:
//! an aggregation variable skipped for a bad partition, a fragment file
//! that does not exist. Logged on every pass, one bad descriptor is
//! 17 000 identical lines a day in the journal, and the one line that is
//! new is lost among them.
//!
//! So loads run inside [`loading`], and [`Dedup`], the logger the binary
//! installs, passes on a line logged during a load only if the same line
//! (level, target and text) was not passed on in the last
//! [`REPEAT_INTERVAL`]: a persisting problem is reported when it first
//! appears and then once an hour, and a new or changed one at once. Lines
//! logged outside loads (reads, errors of requests) are never held back.
//! Memory is bounded: at most [`MAX_REMEMBERED`] lines are remembered.
//!
//! # Where lines go
//!
//! The binary's logger writes each formatted line, in one write, to
//! [`Sink`]: stderr, or the file given with `--log-file`
//! ([`log_to_file`]). A daemon that detaches (`--daemon`) gives its
//! caller's stderr back once the mount is live and points its own stderr
//! at that file or at the system log (`fs::mount::daemon`); with the
//! system log, lines carry a syslog header instead of a timestamp
//! ([`use_syslog_format`], [`syslog_format`]).
//!
//! Until then the caller's terminal should see only what went wrong: a
//! `--daemon` that mounts prints nothing. So between [`hold_quiet_lines`]
//! and [`release_held`] the lines below `warn` are held back (at most
//! [`MAX_HELD`]; a mount logs three or four) and then logged where the
//! daemon's log goes from then on; warnings and errors pass at once.

use std::cell::Cell;
use std::collections::HashMap;
use std::fs::File;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::Write;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use log::{Log, Metadata, Record};
use parking_lot::Mutex;

/// How long a line logged during a load is not logged again.
pub const REPEAT_INTERVAL: Duration = Duration::from_secs(3600);

/// Most distinct lines remembered; when full, the oldest half is dropped.
pub const MAX_REMEMBERED: usize = 4096;

thread_local! {
    static LOADING: Cell<bool> = const { Cell::new(false) };
}

/// Run `f` (a dataset load) with its log lines subject to [`Dedup`].
pub fn loading<T>(f: impl FnOnce() -> T) -> T {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            LOADING.with(|l| l.set(self.0));
        }
    }
    let _reset = Reset(LOADING.with(|l| l.replace(true)));
    f()
}

/// `n` and its noun, singular or plural: "1 directory", "2 directories".
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Most lines held back by [`hold_quiet_lines`]; later ones are dropped.
pub const MAX_HELD: usize = 64;

/// A line held back: level, target, text.
type Held = (log::Level, String, String);

/// The lines below `warn` held back while a daemon's stderr is still its
/// caller's; `None`: nothing is held.
static HELD: Mutex<Option<Vec<Held>>> = Mutex::new(None);

/// Whether [`HELD`] holds lines: checked first, so that a line logged
/// when nothing is held (every line of a live daemon) takes no lock.
static HOLDING: AtomicBool = AtomicBool::new(false);

/// Hold back lines below `warn` from now on, until [`release_held`].
pub fn hold_quiet_lines() {
    *HELD.lock() = Some(Vec::new());
    HOLDING.store(true, Ordering::SeqCst);
}

/// Stop holding lines back and log the held ones now (where the log goes
/// from now on). Returns how many.
pub fn release_held() -> usize {
    HOLDING.store(false, Ordering::SeqCst);
    let held = HELD.lock().take().unwrap_or_default();
    for (level, target, text) in &held {
        log::log!(target: target, *level, "{text}");
    }
    held.len()
}

/// Stop holding lines back and forget the held ones.
pub fn drop_held() {
    HOLDING.store(false, Ordering::SeqCst);
    HELD.lock().take();
}

/// Hold `record` back if lines are being held and it is below `warn`.
fn held(record: &Record) -> bool {
    if record.level() <= log::Level::Warn || !HOLDING.load(Ordering::Relaxed) {
        return false;
    }
    let mut guard = HELD.lock();
    let Some(lines) = guard.as_mut() else {
        return false;
    };
    if lines.len() < MAX_HELD {
        lines.push((
            record.level(),
            record.target().to_string(),
            record.args().to_string(),
        ));
    }
    true
}

/// A logger that holds back repeats of lines logged during loads (see the
/// module docs) and passes everything else to `inner`.
pub struct Dedup<L> {
    inner: L,
    interval: Duration,
    /// Hash of (level, target, text) → when it was last passed on.
    seen: Mutex<HashMap<u64, Instant>>,
}

impl<L: Log> Dedup<L> {
    pub fn new(inner: L) -> Self {
        Self::with_interval(inner, REPEAT_INTERVAL)
    }

    pub fn with_interval(inner: L, interval: Duration) -> Self {
        Dedup {
            inner,
            interval,
            seen: Mutex::new(HashMap::new()),
        }
    }

    /// The logger lines are passed to.
    pub fn inner(&self) -> &L {
        &self.inner
    }

    /// Whether a line logged during a load should be passed on now.
    fn fresh(&self, record: &Record) -> bool {
        let mut h = DefaultHasher::new();
        record.level().hash(&mut h);
        record.target().hash(&mut h);
        record.args().to_string().hash(&mut h);
        let key = h.finish();
        let now = Instant::now();
        let mut seen = self.seen.lock();
        if let Some(&at) = seen.get(&key)
            && now.duration_since(at) < self.interval
        {
            return false;
        }
        if seen.len() >= MAX_REMEMBERED {
            let mut times: Vec<Instant> = seen.values().copied().collect();
            times.sort_unstable();
            let cut = times[times.len() / 2];
            seen.retain(|_, at| *at > cut);
        }
        seen.insert(key, now);
        true
    }
}

impl<L: Log> Log for Dedup<L> {
    fn enabled(&self, metadata: &Metadata) -> bool {
        self.inner.enabled(metadata)
    }

    fn log(&self, record: &Record) {
        if !self.inner.enabled(record.metadata()) {
            return;
        }
        if LOADING.with(Cell::get) && !self.fresh(record) {
            return;
        }
        if held(record) {
            return;
        }
        self.inner.log(record);
    }

    fn flush(&self) {
        self.inner.flush();
    }
}

/// The file log lines go to instead of stderr (`--log-file`).
static LOG_FILE: OnceLock<File> = OnceLock::new();

/// Whether lines are formatted for the system log.
static SYSLOG: AtomicBool = AtomicBool::new(false);

/// Send every log line to `file` (opened for appending) from now on.
/// Once per process; a second call is an error.
pub fn log_to_file(file: File) -> Result<(), File> {
    LOG_FILE.set(file)
}

/// The descriptor of the log file, if there is one (a daemon keeps it
/// when it closes what it inherited).
pub fn log_file_fd() -> Option<RawFd> {
    LOG_FILE.get().map(AsRawFd::as_raw_fd)
}

/// Format lines for the system log from now on (stderr has become the
/// `/dev/log` socket).
pub fn use_syslog_format() {
    SYSLOG.store(true, Ordering::SeqCst);
}

/// Whether lines are to be formatted for the system log.
pub fn syslog_format() -> bool {
    SYSLOG.load(Ordering::SeqCst)
}

/// The syslog header of a line at `level` from this process:
/// `<PRIORITY>slabfs[PID]: ` with the `daemon` facility (RFC 3164 without
/// the timestamp, which syslog daemons and journald add on receipt).
pub fn syslog_header(level: log::Level) -> String {
    const LOG_DAEMON: u8 = 3 << 3;
    let severity = match level {
        log::Level::Error => 3,
        log::Level::Warn => 4,
        log::Level::Info => 6,
        log::Level::Debug | log::Level::Trace => 7,
    };
    format!(
        "<{}>slabfs[{}]: ",
        LOG_DAEMON | severity,
        std::process::id()
    )
}

/// Where the binary's logger writes: the log file if one was given, else
/// stderr. Each formatted line arrives in one `write_all` and leaves in
/// one `write` (a datagram, when stderr is the syslog socket).
#[derive(Debug, Default, Clone, Copy)]
pub struct Sink;

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match LOG_FILE.get() {
            Some(mut f) => f.write(buf),
            None => std::io::stderr().write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Records the text of every line it is given.
    #[derive(Default, Clone)]
    struct Recorder(Arc<Mutex<Vec<String>>>);

    impl Log for Recorder {
        fn enabled(&self, _: &Metadata) -> bool {
            true
        }
        fn log(&self, record: &Record) {
            self.0
                .lock()
                .push(format!("{} {}", record.level(), record.args()));
        }
        fn flush(&self) {}
    }

    fn emit(logger: &dyn Log, level: log::Level, text: &str) {
        logger.log(
            &Record::builder()
                .level(level)
                .target("slabfs::formats::nca")
                .args(format_args!("{text}"))
                .build(),
        );
    }

    #[test]
    fn repeats_during_loads_are_held_back_until_the_interval_passes() {
        let rec = Recorder::default();
        let logger = Dedup::with_interval(rec.clone(), Duration::from_millis(200));
        use log::Level::{Info, Warn};
        for _ in 0..3 {
            loading(|| {
                emit(&logger, Warn, "skipping a variable: a.nca.json: bad");
                emit(&logger, Info, "skipping a variable: a.nca.json: bad");
            });
        }
        loading(|| emit(&logger, Warn, "skipping a variable: b.nca.json: bad"));
        // Outside a load nothing is held back.
        emit(&logger, Warn, "skipping a variable: a.nca.json: bad");
        emit(&logger, Warn, "skipping a variable: a.nca.json: bad");
        std::thread::sleep(Duration::from_millis(250));
        loading(|| emit(&logger, Warn, "skipping a variable: a.nca.json: bad"));
        assert_eq!(
            *rec.0.lock(),
            [
                "WARN skipping a variable: a.nca.json: bad",
                "INFO skipping a variable: a.nca.json: bad",
                "WARN skipping a variable: b.nca.json: bad",
                "WARN skipping a variable: a.nca.json: bad",
                "WARN skipping a variable: a.nca.json: bad",
                "WARN skipping a variable: a.nca.json: bad",
            ]
        );
        assert!(!LOADING.with(Cell::get), "the flag is reset after a load");
    }

    #[test]
    fn quiet_lines_are_held_until_released_and_warnings_pass() {
        let rec = Recorder::default();
        let logger = Dedup::new(rec.clone());
        let emit = |level, text: &str| {
            logger.log(
                &Record::builder()
                    .level(level)
                    .target("slabfs::fs::mount")
                    .args(format_args!("{text}"))
                    .build(),
            )
        };
        hold_quiet_lines();
        emit(log::Level::Info, "mounted");
        emit(log::Level::Warn, "a warning");
        for _ in 0..2 * MAX_HELD {
            emit(log::Level::Debug, "chatter");
        }
        assert_eq!(*rec.0.lock(), ["WARN a warning"]);
        assert_eq!(HELD.lock().as_ref().map(Vec::len), Some(MAX_HELD));
        // Released through the global logger (none in unit tests): here
        // only that holding stops.
        assert_eq!(release_held(), MAX_HELD);
        emit(log::Level::Info, "after");
        assert_eq!(*rec.0.lock(), ["WARN a warning", "INFO after"]);
    }

    #[test]
    fn counts_say_one_thing_or_many() {
        assert_eq!(count(1, "directory", "directories"), "1 directory");
        assert_eq!(count(0, "array", "arrays"), "0 arrays");
        assert_eq!(count(7, "array", "arrays"), "7 arrays");
    }

    #[test]
    fn memory_stays_bounded() {
        let logger = Dedup::new(Recorder::default());
        loading(|| {
            for i in 0..3 * MAX_REMEMBERED {
                emit(&logger, log::Level::Warn, &format!("line {i}"));
            }
        });
        assert!(logger.seen.lock().len() <= MAX_REMEMBERED);
    }

    #[test]
    fn the_flag_is_reset_when_a_load_panics() {
        let r = std::panic::catch_unwind(|| loading(|| panic!("load failed")));
        assert!(r.is_err());
        assert!(!LOADING.with(Cell::get));
    }

    #[test]
    fn syslog_headers_carry_the_daemon_facility_and_severity() {
        let pid = std::process::id();
        assert_eq!(
            syslog_header(log::Level::Error),
            format!("<27>slabfs[{pid}]: ")
        );
        assert_eq!(
            syslog_header(log::Level::Info),
            format!("<30>slabfs[{pid}]: ")
        );
        assert_eq!(
            syslog_header(log::Level::Trace),
            format!("<31>slabfs[{pid}]: ")
        );
    }
}
