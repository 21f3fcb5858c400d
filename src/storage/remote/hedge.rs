//! Hedged GETs: a request that has made no progress for a while gets a
//! twin, and the first to finish answers.
//!
//! A stall is abandoned only after `--stall-timeout` (seconds: it must not
//! cut a healthy answer on a slow link), and a server that delays an
//! answer keeps its reader waiting as long. Yet on a misbehaving network
//! most of that wait is avoidable: the same request sent again usually
//! takes another path (another connection, another server behind the load
//! balancer) and answers in one round trip. So a GET that has received
//! nothing, neither its answer's head nor more of its body, for
//! [`delay`] (four times the link's measured time to first byte, at least
//! [`MIN_DELAY`], at most half the stall timeout) is sent a second time,
//! and whichever of the two finishes first with an answer is taken; the
//! other is dropped (its connection closed). This is AWS's advice for
//! latency-sensitive S3 readers ("retry requests that take longer than
//! expected") and Dean and Barroso's *hedged requests* ("The Tail at
//! Scale", 2013). The first attempt is never abandoned for it: it may
//! still win.
//!
//! # What it costs, and its bounds
//!
//! A healthy GET is never hedged: its head comes within a round trip and
//! its body keeps arriving (a large body on a slow link is progress, not
//! idleness). Hedges in flight are at most an eighth of the current
//! request limit (at least one; the limit shrinks while a server
//! throttles: [`super::throttle`]), and none is sent during a throttling
//! backoff. A hedge runs under its first attempt's request permit, so
//! hedges add at most that eighth to the requests in flight. (Hedging
//! only while the limit is back at `--max-requests` was tried: under a
//! mix of faults with a 503 among them the limit is rarely back, and the
//! mount then kept 24-28% of its fault-free reads instead of 57-61%.)
//! Counted in `.slabfs/stats` (`remote_throttle.hedges`, and
//! `hedges_won` where the twin answered first).
//!
//! Whole and ranged GETs are hedged: those of [`super::RemoteStore`] (the
//! chunks of Zarr arrays, shards, kerchunk and NCA fragments read through
//! a store) and the pinned ranged reads of a [`super::RemoteFile`]
//! (netCDF-3, netCDF-4/HDF5 objects, with or without the disk cache).
//! Listings and HEADs are not. `--no-hedge` (`Config::hedge`) turns it
//! off.

use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use futures::future::{Either, select};

use super::State;

/// The shortest idleness that earns a hedge: a loaded server's healthy
/// answers take tens of milliseconds.
pub const MIN_DELAY: Duration = Duration::from_millis(100);

/// A hedge is sent after this many times the link's time to first byte.
pub const LATENCY_FACTOR: u32 = 4;

/// The hedges of one [`Remote`](super::Remote): sent and won since it
/// was created, and in flight now.
#[derive(Debug, Default)]
pub(crate) struct Hedges {
    sent: AtomicU64,
    won: AtomicU64,
    in_flight: AtomicUsize,
}

impl Hedges {
    /// Hedges sent, and those that answered first.
    pub(crate) fn counts(&self) -> (u64, u64) {
        (
            self.sent.load(Ordering::Relaxed),
            self.won.load(Ordering::Relaxed),
        )
    }
}

/// When an attempt last received something: its head, or body bytes.
#[derive(Debug)]
pub(crate) struct Progress(AtomicU64);

/// The clock progress is told by: one monotonic origin for the process
/// (a static because it holds no state of any `Remote`: any fixed origin
/// would do, and one keeps `Progress` a single atomic).
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

impl Progress {
    fn new() -> Arc<Progress> {
        let p = Arc::new(Progress(AtomicU64::new(0)));
        p.touch();
        p
    }

    /// Something arrived now.
    pub(crate) fn touch(&self) {
        let now = epoch().elapsed().as_micros() as u64;
        self.0.store(now, Ordering::Relaxed);
    }

    fn idle(&self) -> Duration {
        let now = epoch().elapsed().as_micros() as u64;
        Duration::from_micros(now.saturating_sub(self.0.load(Ordering::Relaxed)))
    }
}

/// How long an attempt may go without progress before it is hedged:
/// [`LATENCY_FACTOR`] times the link's time to first byte, between
/// [`MIN_DELAY`] and half the stall timeout.
pub(crate) fn delay(state: &State) -> Duration {
    let cap = (state.config().stall_timeout / 2).max(MIN_DELAY);
    (state.latency() * LATENCY_FACTOR).clamp(MIN_DELAY, cap)
}

/// A hedge's place among the few allowed in flight; given back on drop.
struct Slot<'a>(&'a Hedges);

impl Slot<'_> {
    /// A place, unless a throttling backoff runs or the hedges in flight
    /// are at their bound (an eighth of the request limit).
    fn take(state: &State) -> Option<Slot<'_>> {
        let t = state.throttle.snapshot();
        if !t.resume_in.is_zero() {
            return None;
        }
        let bound = (t.request_limit / 8).max(1);
        state
            .hedges
            .in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < bound).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot(&state.hedges))
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The answer of `attempt`, hedged: `attempt(progress)` is one GET that
/// calls `progress.touch()` whenever something arrives. If it goes
/// [`delay`] without progress, a second one is started (when [`Slot`]
/// allows; else it is looked at again after another delay), and the
/// first of the two to succeed answers. If one fails, the other's outcome
/// is the answer.
pub(crate) async fn hedged<T, F, Fut>(state: &State, attempt: F) -> std::io::Result<T>
where
    F: Fn(Arc<Progress>) -> Fut,
    Fut: Future<Output = std::io::Result<T>>,
{
    let progress = Progress::new();
    if !state.config().hedge {
        return attempt(progress).await;
    }
    let mut first = Box::pin(attempt(progress.clone()));
    let slot = loop {
        let wait = delay(state).saturating_sub(progress.idle());
        if wait.is_zero()
            && let Some(slot) = Slot::take(state)
        {
            break slot;
        }
        let wait = if wait.is_zero() { delay(state) } else { wait };
        match select(first.as_mut(), Box::pin(tokio::time::sleep(wait))).await {
            Either::Left((answer, _)) => return answer,
            Either::Right(_) => continue,
        }
    };
    state.hedges.sent.fetch_add(1, Ordering::Relaxed);
    log::debug!(
        "a GET made no progress for {:.0} ms; sent again, the first answer wins",
        progress.idle().as_secs_f64() * 1e3
    );
    let second = Box::pin(attempt(Progress::new()));
    let answer = match select(first, second).await {
        Either::Left((Ok(v), _)) => Ok(v),
        Either::Left((Err(e), second)) => second.await.or(Err(e)),
        Either::Right((Ok(v), _)) => {
            state.hedges.won.fetch_add(1, Ordering::Relaxed);
            Ok(v)
        }
        Either::Right((Err(_), first)) => first.await,
    };
    drop(slot);
    answer
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
    }

    /// An attempt that answers after `after`, touching its progress every
    /// `every` meanwhile (never, if `None`), counting its starts.
    async fn answer(
        n: usize,
        after: Duration,
        every: Option<Duration>,
        progress: Arc<Progress>,
    ) -> std::io::Result<usize> {
        let end = Instant::now() + after;
        while Instant::now() < end {
            let step = every.unwrap_or(after).min(end - Instant::now());
            tokio::time::sleep(step).await;
            if every.is_some() {
                progress.touch();
            }
        }
        Ok(n)
    }

    /// A first attempt that makes no progress is hedged, and the hedge's
    /// quicker answer is taken; one that keeps receiving bytes is never
    /// hedged however long it takes.
    #[test]
    fn an_idle_attempt_is_hedged_a_busy_one_is_not() {
        let rt = runtime();
        let remote = super::super::Remote::default();
        let state = remote.state();
        let delay = || delay(state);
        let starts = AtomicUsize::new(0);
        let (sent, won) = state.hedges.counts();
        let got = rt.block_on(hedged(state, |p| {
            let n = starts.fetch_add(1, Ordering::SeqCst);
            // The first never progresses for 5 s; the second answers.
            let after = if n == 0 {
                Duration::from_secs(5)
            } else {
                Duration::from_millis(10)
            };
            answer(n, after, None, p)
        }));
        assert_eq!(got.unwrap(), 1, "the hedge answered first");
        assert_eq!(starts.load(Ordering::SeqCst), 2);
        let (sent2, won2) = state.hedges.counts();
        assert!(sent2 > sent && won2 > won);

        let starts = AtomicUsize::new(0);
        let started = Instant::now();
        let got = rt.block_on(hedged(state, |p| {
            starts.fetch_add(1, Ordering::SeqCst);
            // 4 delays long, but progressing every tenth of one.
            answer(7, delay() * 4, Some(delay() / 10), p)
        }));
        assert_eq!(got.unwrap(), 7);
        assert_eq!(
            starts.load(Ordering::SeqCst),
            1,
            "a busy attempt was hedged"
        );
        assert!(started.elapsed() >= delay() * 4);
    }

    /// A failed attempt leaves the answer to the other.
    #[test]
    fn a_failure_leaves_the_answer_to_the_twin() {
        let rt = runtime();
        let remote = super::super::Remote::default();
        let state = remote.state();
        let delay = || delay(state);
        let starts = AtomicUsize::new(0);
        let got = rt.block_on(hedged(state, |_p| {
            let n = starts.fetch_add(1, Ordering::SeqCst);
            async move {
                if n == 0 {
                    tokio::time::sleep(delay() * 2).await;
                    Err(std::io::Error::other("reset"))
                } else {
                    tokio::time::sleep(delay() * 3).await;
                    Ok(n)
                }
            }
        }));
        assert_eq!(got.unwrap(), 1);
    }
}
