//! A log-scale histogram of durations: fixed size, lock-free recording,
//! percentiles accurate to one bucket (12.5%).
//!
//! Shared by the mount's read latency (`fs::stats`) and the remote
//! requests' latency per source (`storage::remote::metrics`), which sit in
//! different layers; so it lives at the bottom, with no dependency of its
//! own.
//!
//! The same buckets give both views of a histogram: percentiles for
//! `.slabfs/stats` ([`Histogram::summary`]) and the cumulative counts of a
//! Prometheus histogram ([`Histogram::cumulative`], read by
//! [`crate::metrics`]). Prometheus wants counts at fixed bounds (`le`);
//! every power of two of nanoseconds from 2^3 up is where a bucket starts,
//! so the counts below the bounds [`BOUNDS_NS`] (powers of two from about
//! 1 µs to 34 s) are exact, not interpolated. (Exact for "below": `le`
//! also counts a value equal to its bound, which a duration hits to the
//! nanosecond once in a billion.)

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Sub-buckets per power of two, as a bit count: 2^3 = 8, so a bucket
/// spans at most 1/8 of its lower bound.
const SUB_BITS: u32 = 3;
const SUB: u64 = 1 << SUB_BITS;
/// Values below `SUB` get a bucket each; each power of two from `SUB` up to
/// 2^63 gets `SUB` buckets.
const BUCKETS: usize = (SUB + (64 - SUB_BITS as u64) * SUB) as usize;

/// The Prometheus bucket bounds, in nanoseconds: 2^10 (1.02 µs) to 2^35
/// (34.4 s), doubling. A FUSE `getattr` answered from memory takes a few
/// microseconds, a remote request tens of milliseconds, a refresh pass of
/// a large archive seconds; anything longer counts only in `+Inf`.
/// Doubling keeps `histogram_quantile`'s interpolation within a factor of
/// two at 26 buckets a series.
pub const BOUNDS_NS: [u64; 26] = {
    let mut b = [0u64; 26];
    let mut i = 0;
    while i < b.len() {
        b[i] = 1 << (10 + i);
        i += 1;
    }
    b
};

/// A log-scale histogram of durations in nanoseconds: fixed size (about
/// 4 KiB of atomics), lock-free recording, percentiles accurate to one
/// bucket (12.5%).
#[derive(Debug)]
pub struct Histogram {
    buckets: Box<[AtomicU64]>,
    max: AtomicU64,
    /// Every value recorded, added (nanoseconds; wraps after 584 years).
    sum: AtomicU64,
}

/// A [`Histogram`] as Prometheus shows one: how many values lay below
/// each of [`BOUNDS_NS`] (cumulative), how many in all, and their sum.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cumulative {
    /// `below[i]`: values `< BOUNDS_NS[i]`.
    pub below: [u64; BOUNDS_NS.len()],
    pub count: u64,
    /// Nanoseconds.
    pub sum: u64,
}

impl Cumulative {
    /// How many values lay in each bucket alone: below the first bound,
    /// then between each bound and the next, and last at or past the last
    /// bound ([`BOUNDS_NS`] and one more). Prometheus's encoder takes the
    /// first [`BOUNDS_NS`] of them and adds them up; OTLP sends them all.
    pub fn per_bucket(&self) -> impl Iterator<Item = u64> + '_ {
        let mut below = 0;
        self.below.iter().chain([&self.count]).map(move |&n| {
            let own = n - below;
            below = n;
            own
        })
    }
}

/// Percentiles of a [`Histogram`], in nanoseconds (0 when empty).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    pub count: u64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub max: u64,
}

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram::new()
    }
}

impl Histogram {
    pub fn new() -> Histogram {
        Histogram {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            max: AtomicU64::new(0),
            sum: AtomicU64::new(0),
        }
    }

    /// The bucket of value `v`.
    fn bucket(v: u64) -> usize {
        if v < SUB {
            return v as usize;
        }
        let e = 63 - v.leading_zeros(); // v's highest bit, >= SUB_BITS
        let sub = (v >> (e - SUB_BITS)) & (SUB - 1);
        (SUB * (e - SUB_BITS + 1) as u64 + sub) as usize
    }

    /// The largest value in bucket `b`.
    fn upper(b: usize) -> u64 {
        let b = b as u64;
        if b < SUB {
            return b;
        }
        let e = (b / SUB) as u32 + SUB_BITS - 1;
        let sub = b % SUB;
        // (SUB + sub + 1) << (e - SUB_BITS), minus one, without overflow.
        ((SUB + sub) << (e - SUB_BITS)) + ((1u64 << (e - SUB_BITS)) - 1)
    }

    pub fn record(&self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.buckets[Self::bucket(ns)].fetch_add(1, Ordering::Relaxed);
        self.max.fetch_max(ns, Ordering::Relaxed);
        self.sum.fetch_add(ns, Ordering::Relaxed);
    }

    /// The counts at [`BOUNDS_NS`], for Prometheus. Read without a lock
    /// while others record: the count is the sum of the buckets read, so
    /// the series is consistent with itself (`+Inf` equals `_count`); the
    /// sum may be a few records ahead or behind.
    pub fn cumulative(&self) -> Cumulative {
        let mut out = Cumulative {
            sum: self.sum.load(Ordering::Relaxed),
            ..Cumulative::default()
        };
        let mut bound = 0;
        for (b, n) in self.buckets.iter().enumerate() {
            // Bucket b holds values up to upper(b); a bound is the start
            // of a bucket, so every bucket lies wholly below it or wholly
            // at or above it.
            while bound < BOUNDS_NS.len() && Self::upper(b) >= BOUNDS_NS[bound] {
                out.below[bound] = out.count;
                bound += 1;
            }
            out.count += n.load(Ordering::Relaxed);
        }
        for slot in &mut out.below[bound..] {
            *slot = out.count;
        }
        out
    }

    pub fn summary(&self) -> Summary {
        let counts: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        let count: u64 = counts.iter().sum();
        let max = self.max.load(Ordering::Relaxed);
        let quantile = |q: f64| -> u64 {
            if count == 0 {
                return 0;
            }
            // The rank of the q-quantile, 1-based: the smallest value with
            // at least q of the samples at or below it.
            let rank = ((q * count as f64).ceil() as u64).clamp(1, count);
            let mut seen = 0;
            for (b, &n) in counts.iter().enumerate() {
                seen += n;
                if seen >= rank {
                    return Self::upper(b).min(max);
                }
            }
            max
        };
        Summary {
            count,
            p50: quantile(0.50),
            p90: quantile(0.90),
            p99: quantile(0.99),
            max,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_tile_the_u64_range_with_bounded_error() {
        // Every bucket starts right after the previous one ends.
        assert_eq!(Histogram::bucket(0), 0);
        for b in 0..BUCKETS - 1 {
            let end = Histogram::upper(b);
            assert_eq!(Histogram::bucket(end), b, "upper bound of {b}");
            assert_eq!(Histogram::bucket(end + 1), b + 1, "start of {}", b + 1);
        }
        assert_eq!(Histogram::upper(BUCKETS - 1), u64::MAX);
        assert_eq!(Histogram::bucket(u64::MAX), BUCKETS - 1);
        // A bucket's upper bound is within 1/8 of any value in it.
        for v in [9u64, 100, 1_000, 123_456, 10_000_000_007, u64::MAX / 3] {
            let up = Histogram::upper(Histogram::bucket(v));
            assert!(up >= v && (up - v) as f64 <= v as f64 / 8.0, "{v} -> {up}");
        }
    }

    #[test]
    fn cumulative_counts_are_exact_at_the_bounds() {
        let h = Histogram::new();
        assert_eq!(h.cumulative(), Cumulative::default());
        // Values on both sides of every bound, and beyond the last.
        let mut values = vec![0u64, 1, 7, 8, 1000, 1 << 40];
        for &b in &BOUNDS_NS {
            values.extend([b - 1, b, b + 1, b + b / 3]);
        }
        for &v in &values {
            h.record(Duration::from_nanos(v));
        }
        let c = h.cumulative();
        assert_eq!(c.count, values.len() as u64);
        assert_eq!(c.sum, values.iter().sum::<u64>());
        for (i, &b) in BOUNDS_NS.iter().enumerate() {
            let want = values.iter().filter(|&&v| v < b).count() as u64;
            assert_eq!(c.below[i], want, "below {b}");
        }
        // Each bucket alone: [0, b0), [b0, b1), ..., [last, inf).
        let mut lower = 0;
        let uppers = BOUNDS_NS.iter().copied().chain([u64::MAX]);
        for (upper, own) in uppers.zip(c.per_bucket()) {
            let want = values.iter().filter(|&&v| v >= lower && v < upper).count();
            assert_eq!(own, want as u64, "[{lower}, {upper})");
            lower = upper;
        }
        assert_eq!(c.per_bucket().count(), BOUNDS_NS.len() + 1);
        assert_eq!(BOUNDS_NS[0], 1024);
        assert_eq!(*BOUNDS_NS.last().unwrap(), 1 << 35);
    }

    #[test]
    fn percentiles() {
        let h = Histogram::new();
        assert_eq!(h.summary().count, 0);
        assert_eq!(h.summary().p99, 0);
        // 1..=1000 microseconds, once each.
        for us in 1..=1000u64 {
            h.record(Duration::from_micros(us));
        }
        let s = h.summary();
        assert_eq!(s.count, 1000);
        assert_eq!(s.max, 1_000_000);
        for (got, want) in [(s.p50, 500_000u64), (s.p90, 900_000), (s.p99, 990_000)] {
            assert!(
                got >= want && got as f64 <= want as f64 * 1.125,
                "{got} vs {want}"
            );
        }
        // A single huge outlier moves max, not p99.
        h.record(Duration::from_secs(100));
        let s = h.summary();
        assert_eq!(s.max, 100_000_000_000);
        assert!(s.p99 < 1_200_000);
    }
}
