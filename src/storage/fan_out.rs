//! Fan-out threads: many blocking calls at once, for stores whose every
//! call is a round trip (a format's own store over a remote file). The
//! default [`crate::storage::Store::get_many`] and
//! [`crate::storage::Store::get_each`] use them when the store reports a
//! latency; an object store overlaps its requests on its own runtime
//! instead. A leaf of [`crate::storage`]: it knows nothing of stores.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Threads [`fan_out`] runs at once across the process (beyond them, the
/// calling threads do the work themselves).
pub const FAN_OUT_THREADS: usize = 64;

/// Threads one [`fan_out`] call uses, its caller included.
pub const FAN_OUT_PER_CALL: usize = 16;

static FANNED_OUT: AtomicUsize = AtomicUsize::new(0);

/// Helper threads reserved from [`FAN_OUT_THREADS`]; given back on drop,
/// even on a panic.
struct Helpers(usize);

impl Helpers {
    /// Up to `want` of them, as many as are free.
    fn take(want: usize) -> Helpers {
        let mut taken = Helpers(0);
        while taken.0 < want {
            if FANNED_OUT.fetch_add(1, Ordering::AcqRel) >= FAN_OUT_THREADS {
                FANNED_OUT.fetch_sub(1, Ordering::AcqRel);
                break;
            }
            taken.0 += 1;
        }
        taken
    }
}

impl Drop for Helpers {
    fn drop(&mut self) {
        FANNED_OUT.fetch_sub(self.0, Ordering::AcqRel);
    }
}

/// `get(i)` for every `i < n`, in that order, on up to
/// [`FAN_OUT_PER_CALL`] threads at once: for blocking calls whose cost is
/// a round trip (a range of an object read by a format's own store), so
/// that their waits overlap instead of adding up. The threads are scoped
/// to the call and bounded for the process ([`FAN_OUT_THREADS`]); when
/// none is free, or one cannot be started, the caller does the work
/// alone, as without this. A panic in `get` reaches the caller.
pub fn fan_out<T: Send>(n: usize, get: impl Fn(usize) -> T + Sync) -> Vec<T> {
    // The caller is one of the call's threads.
    let taken = Helpers::take(n.min(FAN_OUT_PER_CALL).saturating_sub(1));
    let next = AtomicUsize::new(0);
    let work = || {
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= n {
                return done;
            }
            done.push((i, get(i)));
        }
    };
    let mut all: Vec<(usize, T)> = std::thread::scope(|s| {
        let helpers: Vec<_> = (0..taken.0)
            .filter_map(|_| {
                std::thread::Builder::new()
                    .name("slabfs-fetch".into())
                    .spawn_scoped(s, work)
                    .ok()
            })
            .collect();
        let mut all = work();
        for h in helpers {
            match h.join() {
                Ok(done) => all.extend(done),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        all
    });
    drop(taken);
    all.sort_unstable_by_key(|(i, _)| *i);
    all.into_iter().map(|(_, t)| t).collect()
}

/// [`fan_out`], each result handed to `each` (on the calling thread) as
/// soon as its `get` returns, in the order they finish: the caller decodes
/// the first values while the rest are still on their way. When helper
/// threads could be taken the caller only hands results on (it is the one
/// that decodes, and must not be stuck in a get meanwhile); when none
/// could, it runs the gets itself, one after another. A panic in `get`
/// reaches the caller.
pub fn fan_out_each<T: Send>(
    n: usize,
    get: impl Fn(usize) -> T + Sync,
    each: &mut dyn FnMut(usize, T),
) {
    // The caller only hands results on: it may take a whole call's worth.
    let taken = Helpers::take(n.min(FAN_OUT_PER_CALL));
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::channel::<(usize, T)>();
        let mut helpers = Vec::with_capacity(taken.0);
        for _ in 0..taken.0 {
            let tx = tx.clone();
            let (next, get) = (&next, &get);
            let work = move || {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n || tx.send((i, get(i))).is_err() {
                        return;
                    }
                }
            };
            if let Ok(h) = std::thread::Builder::new()
                .name("slabfs-fetch".into())
                .spawn_scoped(s, work)
            {
                helpers.push(h);
            }
        }
        drop(tx);
        if helpers.is_empty() {
            // Alone: every get here, in order.
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                each(i, get(i));
            }
        }
        // Until every helper is done (they hold the senders).
        for (i, t) in rx {
            each(i, t);
        }
        for h in helpers {
            if let Err(panic) = h.join() {
                std::panic::resume_unwind(panic);
            }
        }
    });
    drop(taken);
}
