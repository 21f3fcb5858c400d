//! Throttling: what a mount does when a store says "slow down".
//!
//! # What the stores ask
//!
//! S3 answers `503 SlowDown` when a prefix gets more requests than it has
//! scaled for, and asks clients to back off exponentially and to ramp
//! their rate up gradually while it scales; GCS answers `429`, Azure
//! `503 ServerBusy` (sometimes with a `Retry-After`). `object_store`
//! already retries each throttled request after its own backoff, but only
//! that request: the other requests of the process (up to
//! `--max-requests`, 64) go on at full rate, and every retry lands in the
//! same overload. So on a throttling answer the whole process slows down,
//! here, for every store it reads.
//!
//! # Design
//!
//! Two mechanisms, both shared by everything one
//! [`Remote`](super::Remote) reads (a mount: its source and its
//! `--allow-outside` stores; two `Remote`s share nothing), both fed by the answers that
//! `metrics::Metered` sees (every HTTP attempt, retries
//! included):
//!
//! - **A gate (the backoff).** A throttling answer closes the gate for a
//!   backoff: no attempt of the process, from any thread, to any store,
//!   is sent before it opens (`Throttle::ready`, an async sleep before
//!   the attempt, so no runtime thread is blocked and a call cancelled by
//!   its deadline or by [`super::Remote::cancel_all`] ends at once). The backoff
//!   bound doubles with each backoff in a row ([`BASE`] 100 ms, then
//!   200 ms, 400 ms ... up to [`CAP`] 5 s) and returns to [`BASE`] once an
//!   attempt sent after a backoff is answered normally. The wait is drawn
//!   in `[bound/2, bound]` ("equal jitter"): the jitter spreads the
//!   processes that share one server, but one draw holds a whole process,
//!   so it must not come out near zero as full jitter (`[0, bound]`)
//!   often would. A `Retry-After` in the answer lengthens the wait to
//!   what the server asked, up to [`CAP`].
//! - **A limit (the rate).** The requests in flight are the permits of
//!   one semaphore (`Throttle::acquire`, held by each logical request,
//!   its retries included, see `super::bounded`). A backoff halves the
//!   limit: half of what was in flight, floor 1 (halving a limit of 64
//!   while 4 requests are in flight would change nothing). Available
//!   permits are taken away at once (`Semaphore::forget_permits`); the
//!   rest are owed and forgotten as the requests holding them end,
//!   instead of being returned. The limit grows back by one for every
//!   `limit` answers taken normally among attempts sent after the last
//!   backoff (about one more request in flight per round trip, as TCP
//!   grows its window), up to `--max-requests`, the ceiling. So a server
//!   under pressure sees the rate drop at once and climb back gradually,
//!   as S3 asks.
//!
//! **One overload, one backoff.** A burst of throttling answers from one
//! overload (the 64 requests in flight all answered `503` within a few
//! milliseconds) must not double the backoff 64 times or halve the limit
//! to 1. So a throttling answer starts a backoff only if its attempt was
//! sent after the last backoff started (a generation number each attempt
//! takes when it passes the gate, the rule TCP uses to react once per
//! window of losses) and the gate has opened again; the others are counted
//! (`throttles` in `.slabfs/stats`) and change nothing. One `WARN` line is
//! logged per backoff, not per answer.
//!
//! This is the adaptive retry mode of the AWS SDKs in spirit (the client
//! slows its first attempts too, not only its retries), with a
//! concurrency limit instead of their token-bucket rate: the semaphore
//! was already there, and a concurrency limit follows the server's
//! latency by itself (requests per second = in flight / latency). Like
//! theirs, it is shared by everything the client talks to: a throttling
//! store slows the others of the same process (a mount has one store, or
//! a few under `--allow-outside`).
//!
//! # Cost
//!
//! Passing the gate is two atomic loads. An answer is one atomic load
//! while nothing is throttled (the limit at its ceiling and no backoff in
//! a row); otherwise a short uncontended lock of the `Policy`, which is
//! plain arithmetic without clock or randomness (its tests drive it with
//! chosen times and jitters). Nothing grows: one gate and one semaphore
//! per [`Remote`](super::Remote).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The first backoff's bound: as `object_store`'s first retry waits.
pub const BASE: Duration = Duration::from_millis(100);

/// The longest backoff, and the longest `Retry-After` honoured: as
/// `object_store`'s retries (`Config::retry`); longer would hold every
/// read of the process for most of a `--request-timeout`.
pub const CAP: Duration = Duration::from_secs(5);

/// Whether an answer with `status` asks the client to slow down: `503`
/// (S3 SlowDown, Azure ServerBusy, any overloaded server) or `429` (GCS,
/// most HTTP APIs).
pub fn is_throttle(status: u16) -> bool {
    status == 503 || status == 429
}

/// Whether an answer with `status` shows the server took the request
/// (what lets the limit grow back): anything but a throttle or another
/// server error.
fn is_taken(status: u16) -> bool {
    status < 500 && status != 429
}

/// The delay a `Retry-After` header asks for, in seconds (its HTTP-date
/// form is not used by object stores and is ignored).
pub fn retry_after(headers: &http::HeaderMap) -> Option<Duration> {
    let v = headers.get(http::header::RETRY_AFTER)?.to_str().ok()?;
    v.trim().parse::<u64>().ok().map(Duration::from_secs)
}

/// A backoff that started: what to log.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// How long from now no attempt is sent.
    pub wait: Duration,
    /// The exponential bound `wait` was drawn under.
    pub bound: Duration,
    /// What the server asked for (`Retry-After`), if anything.
    pub asked: Option<Duration>,
    /// The limit of requests in flight from now on, and before.
    pub limit: usize,
    pub was: usize,
    /// The ceiling (`--max-requests`).
    pub max: usize,
}

/// The throttle's decisions, as arithmetic over times (durations since
/// the throttle's epoch), generations and a jitter: no clock, no
/// randomness, no semaphore (see the module docs for the rules).
#[derive(Debug, Clone)]
pub(crate) struct Policy {
    max: usize,
    limit: usize,
    /// Backoffs in a row: no attempt sent after the last one was taken.
    streak: u32,
    /// Incremented by each backoff; an attempt carries the one it was
    /// sent in.
    generation: u64,
    /// When attempts may be sent again.
    resume_at: Duration,
    /// Answers taken since the limit last grew or shrank, of attempts sent
    /// in the current generation.
    taken: usize,
    backoffs: u64,
}

impl Policy {
    pub(crate) fn new(max: usize) -> Policy {
        Policy {
            max: max.max(1),
            limit: max.max(1),
            streak: 0,
            generation: 0,
            resume_at: Duration::ZERO,
            taken: 0,
            backoffs: 0,
        }
    }

    /// The bound of the backoff after `streak` backoffs in a row:
    /// [`BASE`] doubled `streak` times, at most [`CAP`].
    pub(crate) fn bound(streak: u32) -> Duration {
        BASE.saturating_mul(1u32 << streak.min(16)).min(CAP)
    }

    /// A throttling answer at `now` to an attempt sent in generation
    /// `sent`, with `in_flight` requests holding permits, `asked` the
    /// server's `Retry-After`, and `jitter` in `[0, 1)`: the backoff it
    /// starts, or `None` when it belongs to an overload already backed
    /// off from.
    pub(crate) fn throttled(
        &mut self,
        now: Duration,
        sent: u64,
        in_flight: usize,
        asked: Option<Duration>,
        jitter: f64,
    ) -> Option<Backoff> {
        if sent != self.generation || now < self.resume_at {
            return None;
        }
        let bound = Policy::bound(self.streak);
        let mut wait = bound.mul_f64(0.5 + 0.5 * jitter.clamp(0.0, 1.0));
        if let Some(asked) = asked {
            wait = wait.max(asked.min(CAP));
        }
        let was = self.limit;
        self.limit = (in_flight.min(self.limit) / 2).max(1);
        self.streak = self.streak.saturating_add(1);
        self.generation += 1;
        self.resume_at = now + wait;
        self.taken = 0;
        self.backoffs += 1;
        Some(Backoff {
            wait,
            bound,
            asked,
            limit: self.limit,
            was,
            max: self.max,
        })
    }

    /// An answer taken normally, to an attempt sent in generation `sent`:
    /// the new limit if it grew.
    pub(crate) fn taken(&mut self, sent: u64) -> Option<usize> {
        if sent != self.generation {
            // Sent before the last backoff: says nothing of the rate since.
            return None;
        }
        self.streak = 0;
        if self.limit >= self.max {
            return None;
        }
        self.taken += 1;
        if self.taken < self.limit {
            return None;
        }
        self.taken = 0;
        self.limit += 1;
        Some(self.limit)
    }

    /// Nothing to do on a taken answer: the limit at its ceiling, no
    /// backoff in a row.
    fn calm(&self) -> bool {
        self.limit >= self.max && self.streak == 0
    }
}

/// The process's throttle: the gate, the limit and the semaphore.
pub(crate) struct Throttle {
    epoch: Instant,
    requests: Arc<Semaphore>,
    /// Permits to forget when they come back (the limit shrank below the
    /// permits in use). The semaphore's permits, available and held,
    /// always number `limit + debt`.
    debt: AtomicUsize,
    in_flight: AtomicUsize,
    /// Copies of the policy's state, for the paths that take no lock.
    generation: AtomicU64,
    resume_at_ns: AtomicU64,
    calm: AtomicBool,
    limit: AtomicUsize,
    max: AtomicUsize,
    backoffs: AtomicU64,
    policy: Mutex<Policy>,
}

/// One request's place among those in flight: returned to the semaphore
/// when dropped, or forgotten if the limit shrank meanwhile.
pub(crate) struct Permit<'a> {
    permit: Option<OwnedSemaphorePermit>,
    throttle: &'a Throttle,
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        self.throttle.in_flight.fetch_sub(1, Ordering::SeqCst);
        if let Some(p) = self.permit.take()
            && self.throttle.take_debt()
        {
            p.forget();
        }
    }
}

/// The semaphore was closed (never, in practice: it lives as long as the
/// process).
#[derive(Debug, thiserror::Error)]
#[error("the remote request limiter is closed")]
pub(crate) struct Closed;

/// A copy of the throttle's state, for `.slabfs/stats`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Snapshot {
    /// Requests that may be in flight now.
    pub request_limit: usize,
    /// The ceiling: `--max-requests`.
    pub max_requests: usize,
    /// Requests in flight now.
    pub in_flight: usize,
    /// Backoffs since the process started.
    pub backoffs: u64,
    /// Time until the gate opens (zero when open).
    pub resume_in: Duration,
}

/// A number in `[0, 1)`, different at each call: the jitter. (std's
/// randomly keyed hasher, as `store::retry_listing` draws its jitter; no
/// need for a random number crate.)
fn jitter() -> f64 {
    use std::hash::BuildHasher;
    static DRAWS: AtomicU64 = AtomicU64::new(0);
    let n = DRAWS.fetch_add(1, Ordering::Relaxed);
    let h = std::collections::hash_map::RandomState::new().hash_one(n);
    (h >> 11) as f64 / (1u64 << 53) as f64
}

impl Throttle {
    pub(crate) fn new(max: usize) -> Throttle {
        let policy = Policy::new(max);
        Throttle {
            epoch: Instant::now(),
            requests: Arc::new(Semaphore::new(policy.limit)),
            debt: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            generation: AtomicU64::new(0),
            resume_at_ns: AtomicU64::new(0),
            calm: AtomicBool::new(true),
            limit: AtomicUsize::new(policy.limit),
            max: AtomicUsize::new(policy.max),
            backoffs: AtomicU64::new(0),
            policy: Mutex::new(policy),
        }
    }

    fn now(&self) -> Duration {
        self.epoch.elapsed()
    }

    /// Wait for a place among the requests in flight.
    pub(crate) async fn acquire(&self) -> Result<Permit<'_>, Closed> {
        let permit = self
            .requests
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| Closed)?;
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        Ok(Permit {
            permit: Some(permit),
            throttle: self,
        })
    }

    /// Wait until the gate is open (asynchronously: a sleep of the
    /// runtime), then return the generation the attempt is sent in, for
    /// [`Throttle::answered`].
    pub(crate) async fn ready(&self) -> u64 {
        loop {
            // The generation first: a backoff stores its gate before its
            // generation, so an attempt that sees the new generation sees
            // the closed gate too, and one that passes the open gate with
            // the old generation has its answer counted to that overload.
            let generation = self.generation.load(Ordering::Acquire);
            let resume = Duration::from_nanos(self.resume_at_ns.load(Ordering::Acquire));
            let now = self.now();
            if now >= resume {
                return generation;
            }
            tokio::time::sleep(resume - now).await;
        }
    }

    /// An answer with `status` (and `headers`) to an attempt sent in
    /// generation `sent`: the backoff it starts, if it is a throttle of a
    /// new overload (for the caller to log: it knows the store).
    pub(crate) fn answered(
        &self,
        status: u16,
        headers: &http::HeaderMap,
        sent: u64,
    ) -> Option<Backoff> {
        if is_throttle(status) {
            let mut policy = self.policy.lock();
            let in_flight = self.in_flight.load(Ordering::SeqCst);
            let backoff =
                policy.throttled(self.now(), sent, in_flight, retry_after(headers), jitter())?;
            self.resize(backoff.was, backoff.limit);
            self.publish(&policy);
            Some(backoff)
        } else {
            if is_taken(status) && !self.calm.load(Ordering::Acquire) {
                let mut policy = self.policy.lock();
                let was = policy.limit;
                if let Some(limit) = policy.taken(sent) {
                    self.resize(was, limit);
                    if limit == policy.max {
                        log::info!(
                            "remote requests: the limit is back to --max-requests ({limit})"
                        );
                    }
                }
                self.publish(&policy);
            }
            None
        }
    }

    /// Copy the policy's state where the lock-free paths read it.
    fn publish(&self, policy: &Policy) {
        let ns = policy.resume_at.as_nanos().min(u64::MAX as u128) as u64;
        self.resume_at_ns.store(ns, Ordering::Release);
        self.generation.store(policy.generation, Ordering::Release);
        self.calm.store(policy.calm(), Ordering::Release);
        self.limit.store(policy.limit, Ordering::Relaxed);
        self.max.store(policy.max, Ordering::Relaxed);
        self.backoffs.store(policy.backoffs, Ordering::Relaxed);
    }

    /// Take one permit owed, if any.
    fn take_debt(&self) -> bool {
        self.debt
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |d| d.checked_sub(1))
            .is_ok()
    }

    /// Change the semaphore's permits from `from` to `to` (under the
    /// policy's lock, so resizes never interleave).
    fn resize(&self, from: usize, to: usize) {
        if to < from {
            let owed = from - to;
            // Available permits go at once; those in use when they return.
            let forgotten = self.requests.forget_permits(owed);
            self.debt.fetch_add(owed - forgotten, Ordering::SeqCst);
            // A permit returned between the two steps (it saw no debt yet)
            // is taken now rather than at the next return.
            let owed = self.debt.swap(0, Ordering::SeqCst);
            let forgotten = self.requests.forget_permits(owed);
            self.debt.fetch_add(owed - forgotten, Ordering::SeqCst);
        } else {
            let mut added = 0;
            for _ in from..to {
                // A permit still owed is simply no longer owed.
                if !self.take_debt() {
                    added += 1;
                }
            }
            self.requests.add_permits(added);
        }
    }

    /// The whole limit restored, the gate open, the ceiling `max`: a
    /// fresh start. (A new configuration is a new `Remote`, with a throttle
    /// of its own, so only the test of the permit arithmetic resets one.)
    #[cfg(test)]
    fn reset(&self, max: usize) {
        let mut policy = self.policy.lock();
        let was = policy.limit;
        let mut fresh = Policy::new(max);
        // Attempts sent before the reset must not count after it.
        fresh.generation = policy.generation + 1;
        fresh.backoffs = policy.backoffs;
        self.resize(was, fresh.limit);
        *policy = fresh;
        self.publish(&policy);
    }

    pub(crate) fn snapshot(&self) -> Snapshot {
        let resume = Duration::from_nanos(self.resume_at_ns.load(Ordering::Acquire));
        Snapshot {
            request_limit: self.limit.load(Ordering::Relaxed),
            max_requests: self.max.load(Ordering::Relaxed),
            in_flight: self.in_flight.load(Ordering::SeqCst),
            backoffs: self.backoffs.load(Ordering::Relaxed),
            resume_in: resume.saturating_sub(self.now()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_burst_from_one_overload_backs_off_once() {
        let mut p = Policy::new(64);
        // 40 requests in flight, all answered 503 within milliseconds.
        let b = p.throttled(10 * MS, 0, 40, None, 0.0).expect("a backoff");
        assert_eq!(b.bound, BASE);
        assert_eq!(b.wait, BASE / 2);
        assert_eq!((b.limit, b.was, b.max), (20, 64, 64));
        for i in 1..40 {
            assert_eq!(p.throttled(10 * MS + i * MS / 10, 0, 40, None, 0.9), None);
        }
        // A straggler of the same overload answered after the gate opened:
        // sent before the backoff, still the same overload.
        assert_eq!(p.throttled(500 * MS, 0, 40, None, 0.0), None);
        assert_eq!((p.limit, p.backoffs, p.streak), (20, 1, 1));
    }

    #[test]
    fn backoffs_in_a_row_double_up_to_the_cap_and_jitter_stays_in_the_upper_half() {
        let mut p = Policy::new(64);
        let mut now = Duration::ZERO;
        let mut bounds = Vec::new();
        for i in 0..10 {
            let jitter = if i % 2 == 0 { 0.0 } else { 0.999_999 };
            // Each attempt sent after the last backoff, answered 503 once
            // the gate is open: the overload goes on.
            let b = p
                .throttled(now, p.generation, 64, None, jitter)
                .expect("a new backoff");
            assert!(b.wait >= b.bound / 2 && b.wait <= b.bound, "{b:?}");
            bounds.push(b.bound.as_millis());
            now += b.wait;
        }
        assert_eq!(
            bounds,
            [100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000, 5000]
        );
        // An attempt sent after the last backoff is taken: the next
        // backoff starts from the base again.
        assert_eq!(p.taken(p.generation - 1), None);
        assert_eq!(p.streak, 10, "an attempt sent before says nothing");
        p.taken(p.generation);
        assert_eq!(p.streak, 0);
        let b = p.throttled(now, p.generation, 64, None, 0.5).unwrap();
        assert_eq!(b.bound, BASE);
        assert_eq!(b.wait, BASE * 3 / 4);
    }

    #[test]
    fn an_answer_before_the_gate_opens_starts_no_backoff() {
        let mut p = Policy::new(8);
        let b = p.throttled(Duration::ZERO, 0, 8, None, 0.0).unwrap();
        // An attempt that passed the gate in the new generation just
        // before it closed (a race): answered while the gate is shut.
        assert_eq!(p.throttled(b.wait - MS, 1, 8, None, 0.0), None);
        assert!(p.throttled(b.wait, 1, 8, None, 0.0).is_some());
    }

    #[test]
    fn retry_after_lengthens_the_wait_up_to_the_cap() {
        let mut p = Policy::new(8);
        let b = p.throttled(Duration::ZERO, 0, 8, Some(Duration::from_secs(2)), 0.0);
        assert_eq!(b.unwrap().wait, Duration::from_secs(2));
        let mut p = Policy::new(8);
        let b = p.throttled(Duration::ZERO, 0, 8, Some(Duration::from_secs(600)), 0.0);
        assert_eq!(b.unwrap().wait, CAP);
        // A shorter ask does not shorten the backoff.
        let mut p = Policy::new(8);
        let b = p.throttled(Duration::ZERO, 0, 8, Some(Duration::ZERO), 1.0);
        assert_eq!(b.unwrap().wait, BASE);
    }

    #[test]
    fn the_limit_halves_what_was_in_flight_and_grows_by_one_per_limit_answers() {
        let mut p = Policy::new(8);
        // A limit far above what is in flight: halving it would not slow
        // anything; what was in flight is halved.
        let b = p.throttled(Duration::ZERO, 0, 3, None, 0.0).unwrap();
        assert_eq!(b.limit, 1);
        // Floor 1, even with nothing counted in flight.
        let b = p
            .throttled(Duration::from_secs(9), 1, 0, None, 0.0)
            .unwrap();
        assert_eq!(b.limit, 1);
        let sent = p.generation;
        // Answers to attempts sent before the last backoff do not count.
        for _ in 0..100 {
            assert_eq!(p.taken(sent - 1), None);
        }
        // 1 -> 2 after 1 answer, 2 -> 3 after 2 more ... up to the ceiling.
        let mut grew = Vec::new();
        for n in 1..=100 {
            if let Some(limit) = p.taken(sent) {
                grew.push((n, limit));
            }
        }
        assert_eq!(
            grew,
            [(1, 2), (3, 3), (6, 4), (10, 5), (15, 6), (21, 7), (28, 8)]
        );
        assert!(p.calm());
    }

    #[test]
    fn retry_after_is_read_in_seconds() {
        let mut h = http::HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert("retry-after", " 3 ".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(3)));
        h.insert(
            "retry-after",
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&h), None);
        assert!(is_throttle(503) && is_throttle(429) && !is_throttle(500));
        assert!(is_taken(404) && is_taken(206) && !is_taken(502) && !is_taken(429));
    }

    #[test]
    fn jitter_is_in_the_unit_interval_and_varies() {
        let draws: Vec<f64> = (0..1000).map(|_| jitter()).collect();
        assert!(draws.iter().all(|j| (0.0..1.0).contains(j)));
        assert!(draws.iter().any(|&j| j < 0.5) && draws.iter().any(|&j| j >= 0.5));
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
    }

    fn throttle_answer(t: &Throttle, sent: u64) -> Option<Backoff> {
        t.answered(503, &http::HeaderMap::new(), sent)
    }

    #[test]
    fn permits_in_use_are_forgotten_as_they_return_and_regrown() {
        let rt = rt();
        let t = Throttle::new(8);
        rt.block_on(async {
            let mut held = Vec::new();
            for _ in 0..6 {
                held.push(t.acquire().await.unwrap());
            }
            assert_eq!(t.requests.available_permits(), 2);
            // 6 in flight: the limit becomes 3. The 2 available permits
            // go at once, 3 of those in use are owed.
            let b = throttle_answer(&t, 0).unwrap();
            assert_eq!((b.was, b.limit), (8, 3));
            assert_eq!(t.requests.available_permits(), 0);
            assert_eq!(t.debt.load(Ordering::SeqCst), 3);
            assert_eq!(t.snapshot().in_flight, 6);
            for _ in 0..3 {
                held.pop();
            }
            assert_eq!(t.requests.available_permits(), 0, "forgotten, not returned");
            assert_eq!(t.debt.load(Ordering::SeqCst), 0);
            held.pop();
            assert_eq!(t.requests.available_permits(), 1, "returned");
            // 3 in flight at most: 2 held + 1 available.
            assert_eq!(t.snapshot().request_limit, 3);
            // Growing back: 3 answers taken of attempts sent after the
            // backoff grow the limit by one.
            let sent = t.generation.load(Ordering::SeqCst);
            for _ in 0..3 {
                assert_eq!(t.answered(200, &http::HeaderMap::new(), sent), None);
            }
            assert_eq!(t.snapshot().request_limit, 4);
            assert_eq!(t.requests.available_permits(), 2);
            drop(held);
            assert_eq!(t.requests.available_permits(), 4);
        });
    }

    #[test]
    fn growing_while_permits_are_owed_cancels_the_debt() {
        let rt = rt();
        let t = Throttle::new(4);
        rt.block_on(async {
            let held: Vec<_> = futures::future::join_all((0..4).map(|_| t.acquire()))
                .await
                .into_iter()
                .map(Result::unwrap)
                .collect();
            throttle_answer(&t, 0).unwrap();
            assert_eq!(t.debt.load(Ordering::SeqCst), 2);
            // Two answers taken at limit 2: it grows to 3, and one of the
            // permits owed is no longer owed.
            let sent = t.generation.load(Ordering::SeqCst);
            for _ in 0..2 {
                t.answered(206, &http::HeaderMap::new(), sent);
            }
            assert_eq!(t.snapshot().request_limit, 3);
            assert_eq!(t.debt.load(Ordering::SeqCst), 1);
            assert_eq!(t.requests.available_permits(), 0);
            drop(held);
            // limit + debt: 3 permits, all available.
            assert_eq!(t.requests.available_permits(), 3);
            // A reset restores the ceiling, and may set another.
            t.reset(6);
            assert_eq!(t.requests.available_permits(), 6);
            assert_eq!(t.snapshot().request_limit, 6);
            assert_eq!(t.snapshot().backoffs, 1, "counted for the process");
        });
    }

    #[test]
    fn attempts_wait_at_the_closed_gate_and_can_be_cancelled() {
        let rt = rt();
        let t = Throttle::new(4);
        // A server asking for 2 s: the gate stays closed that long.
        let mut h = http::HeaderMap::new();
        h.insert("retry-after", "2".parse().unwrap());
        let b = t.answered(429, &h, 0).unwrap();
        assert_eq!(b.wait, Duration::from_secs(2));
        assert!(t.snapshot().resume_in > Duration::from_secs(1));
        rt.block_on(async {
            // Still waiting after 100 ms, and the wait ends when dropped
            // (a cancelled call), not at the gate's opening.
            let started = Instant::now();
            let waited = tokio::time::timeout(100 * MS, t.ready()).await;
            assert!(waited.is_err(), "passed a closed gate");
            assert!(started.elapsed() < Duration::from_secs(1));
        });
        // Once open, an attempt passes in the new generation, whose
        // answers count.
        let t = Throttle::new(4);
        let before = Instant::now();
        let b = t.answered(503, &http::HeaderMap::new(), 0).unwrap();
        rt.block_on(async {
            let sent = t.ready().await;
            assert!(before.elapsed() >= b.wait);
            assert_eq!(sent, 1);
        });
        // The throttled answers of that overload: counted by the caller,
        // nothing more here.
        assert_eq!(throttle_answer(&t, 0), None);
        assert_eq!(t.snapshot().backoffs, 1);
    }
}
