//! The threads that serve reads which may wait on the network, so that the
//! threads the kernel's requests arrive on never do.
//!
//! A mount serves FUSE requests on a few threads (`--threads`, one per core
//! by default). If each of them waited for its read's remote fetch, a
//! stalled server, a retry's back-off or a slow object would hold all of
//! them, and every other request would queue behind: a `stat`, a `readdir`,
//! a sidecar's 200 bytes, a read whose chunks are in memory. So a read
//! that may wait (a remote array's range whose chunks are not all decoded
//! in the cache: [`super::SlabFs::serve_read`]) is handed to this pool
//! with its reply, and the FUSE thread goes back to the kernel for the
//! next request. Everything else is answered on the FUSE thread, as
//! before: handing it over would only add a thread switch.
//!
//! # Bounds
//!
//! At most `max` threads (the mount sets `--max-requests`: a read waits
//! for at least one request, so more threads would only wait for a
//! request permit). They are started on demand, when a read arrives and no
//! thread is free, and each ends after [`IDLE`] without work, so an idle
//! mount, or one that never reads remotely, holds none. Reads beyond
//! `max` queue here in arrival order; the queue holds only what the kernel
//! has outstanding (its background requests, `max_background`, plus one
//! per reading thread), not a number that grows with the archive.
//!
//! Why not a crate: the pools of the ecosystem either start every thread
//! up front (`threadpool`), are an async runtime's blocking pool (tokio's:
//! a read here blocks on the storage layer's own runtime, which must not
//! be entered from its threads), or steal work for CPU-bound jobs (rayon:
//! its workers must never wait on I/O, and a job's own `par_iter` would
//! spread over the pool's many threads). What is needed is a queue, a
//! condition variable and a thread count: the code below.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

/// A thread with no work for this long ends.
pub const IDLE: Duration = Duration::from_secs(30);

type Job = Box<dyn FnOnce() + Send>;

/// Threads for jobs that may wait; see the module docs.
pub struct Waiting {
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    work: Condvar,
    max: usize,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Job>,
    /// Threads alive.
    threads: usize,
    /// Threads waiting for work.
    idle: usize,
}

impl Waiting {
    /// A pool of at most `max` threads (at least one), none started yet.
    pub fn new(max: usize) -> Waiting {
        Waiting {
            shared: Arc::new(Shared {
                state: Mutex::new(State::default()),
                work: Condvar::new(),
                max: max.max(1),
            }),
        }
    }

    /// Run `job` on a thread of the pool: a free one, a new one if none is
    /// free and fewer than `max` run, else the first to become free. If no
    /// thread can be started and none runs, `job` runs here, on the
    /// caller's thread, rather than never.
    pub fn run(&self, job: impl FnOnce() + Send + 'static) {
        let mut state = self.shared.state.lock();
        state.queue.push_back(Box::new(job));
        // Each idle thread takes one queued job; start another only for
        // the jobs beyond them.
        if state.queue.len() <= state.idle || state.threads >= self.shared.max {
            self.shared.work.notify_one();
            return;
        }
        state.threads += 1;
        drop(state);
        let shared = self.shared.clone();
        let started = std::thread::Builder::new()
            .name("slabfs-wait".into())
            .spawn(move || work(&shared));
        if let Err(e) = started {
            let mut state = self.shared.state.lock();
            state.threads -= 1;
            if state.threads > 0 {
                log::debug!("no new thread for a waiting read ({e}); it queues");
                return;
            }
            let job = state.queue.pop_back();
            drop(state);
            log::warn!("no thread for a waiting read ({e}); served on the request's thread");
            if let Some(job) = job {
                job();
            }
        }
    }

    /// Threads alive and jobs queued (not yet started), for the stats.
    pub fn load(&self) -> (usize, usize) {
        let state = self.shared.state.lock();
        (state.threads, state.queue.len())
    }
}

/// A pool thread: run jobs until none comes for [`IDLE`].
fn work(shared: &Shared) {
    let mut state = shared.state.lock();
    loop {
        if let Some(job) = state.queue.pop_front() {
            drop(state);
            // A job answers its request whatever happens (the FUSE
            // adapter contains panics); this keeps the thread alive and
            // counted should one escape anyway.
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)).is_err() {
                log::error!("a waiting read panicked (please report this bug)");
            }
            state = shared.state.lock();
            continue;
        }
        state.idle += 1;
        let timed_out = shared.work.wait_for(&mut state, IDLE).timed_out();
        state.idle -= 1;
        if timed_out && state.queue.is_empty() {
            state.threads -= 1;
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// Jobs that wait do not hold up the jobs behind them while fewer than
    /// `max` wait; beyond `max` they queue, and every job runs once.
    #[test]
    fn waiting_jobs_take_a_thread_each_up_to_max() {
        let pool = Waiting::new(3);
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let release_rx = Arc::new(std::sync::Mutex::new(release_rx));
        let (done_tx, done_rx) = mpsc::channel::<usize>();
        // Three jobs that wait until released: they take the three threads.
        for i in 0..3 {
            let (rx, done) = (release_rx.clone(), done_tx.clone());
            pool.run(move || {
                rx.lock().unwrap().recv().unwrap();
                done.send(i).unwrap();
            });
        }
        // A fourth queues: no thread is free and no more may start.
        let done = done_tx.clone();
        pool.run(move || done.send(3).unwrap());
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(pool.load(), (3, 1));
        assert!(done_rx.try_recv().is_err(), "nothing ran past the waiters");
        for _ in 0..3 {
            release_tx.send(()).unwrap();
        }
        let mut got: Vec<usize> = (0..4)
            .map(|_| done_rx.recv_timeout(Duration::from_secs(5)).unwrap())
            .collect();
        got.sort_unstable();
        assert_eq!(got, [0, 1, 2, 3]);
        assert_eq!(pool.load().0, 3, "threads stay for the next jobs");
    }

    /// A job that does not wait runs at once even while other threads of
    /// the pool wait (it gets a thread of its own).
    #[test]
    fn a_quick_job_is_not_held_behind_a_waiting_one() {
        let pool = Waiting::new(4);
        let (release_tx, release_rx) = mpsc::channel::<()>();
        pool.run(move || release_rx.recv().unwrap());
        let (tx, rx) = mpsc::channel();
        pool.run(move || tx.send(()).unwrap());
        rx.recv_timeout(Duration::from_secs(5))
            .expect("the second job ran while the first waited");
        release_tx.send(()).unwrap();
    }

    /// An idle thread is reused rather than a new one started.
    #[test]
    fn idle_threads_are_reused() {
        let pool = Waiting::new(8);
        for _ in 0..20 {
            let (tx, rx) = mpsc::channel();
            pool.run(move || tx.send(()).unwrap());
            rx.recv_timeout(Duration::from_secs(5)).unwrap();
            // The thread is back to waiting for work before the next job.
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while pool.shared.state.lock().idle == 0 && std::time::Instant::now() < deadline {
                std::thread::yield_now();
            }
        }
        assert_eq!(pool.load().0, 1);
    }

    /// A job that panics leaves its thread alive and counted.
    #[test]
    fn a_panicking_job_does_not_end_its_thread() {
        let pool = Waiting::new(1);
        pool.run(|| panic!("boom"));
        let (tx, rx) = mpsc::channel();
        pool.run(move || tx.send(()).unwrap());
        rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(pool.load().0, 1);
    }
}
