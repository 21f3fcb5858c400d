//! Decodes counted by codec chain: how many chunks each chain decoded, the
//! bytes it produced and the time it took, for `.slabfs/stats`
//! (`decodes`) and the metrics endpoint (`slabfs_decode_*`).
//!
//! A chain is named by its codecs in encoding order joined by `+`
//! (`bytes+zstd`, `shuffle+zlib`, `bytes+blosc`): what an operator asks
//! ("how much time goes to zstd?") without a series per array. The
//! formats time the decode alone (not the fetch before it, not the copy
//! after), around the codec chain's call, and record it in their
//! [`Decoder`], taken once when the array opens ([`Decodes::of`]); so a
//! decode costs two clock reads and a few relaxed atomic adds more.
//!
//! One [`Decodes`] per chunk cache ([`super::cache::ChunkCache::decodes`]),
//! so per mount. At most [`MAX_CHAINS`] chains are counted apart; any
//! beyond share the [`OTHER`] counters (the totals stay right, the series
//! do not grow with whatever a source declares).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use crate::histogram::Histogram;

/// Chains counted apart: a mount reads a handful.
pub const MAX_CHAINS: usize = 64;

/// The name of the counters shared by chains beyond [`MAX_CHAINS`].
pub const OTHER: &str = "other";

/// The decodes of one codec chain.
#[derive(Debug)]
pub struct Decoder {
    name: String,
    bytes: AtomicU64,
    time: Histogram,
}

impl Decoder {
    fn new(name: &str) -> Decoder {
        Decoder {
            name: name.to_string(),
            bytes: AtomicU64::new(0),
            time: Histogram::new(),
        }
    }

    /// The chain's name (`bytes+zstd`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A chunk of `bytes` decoded in `took`.
    pub fn record(&self, bytes: usize, took: Duration) {
        self.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        self.time.record(took);
    }

    /// Decoded bytes so far.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// The decodes' durations (their count is the number of decodes).
    pub fn time(&self) -> &Histogram {
        &self.time
    }
}

/// Every chain's [`Decoder`], in the order first seen.
#[derive(Debug, Default)]
pub struct Decodes {
    chains: Mutex<Vec<Arc<Decoder>>>,
}

impl Decodes {
    /// The counters of the chain of `codecs` (names, in encoding order),
    /// created on first use.
    pub fn of<S: AsRef<str>>(&self, codecs: &[S]) -> Arc<Decoder> {
        let name = codecs
            .iter()
            .map(|c| c.as_ref())
            .collect::<Vec<_>>()
            .join("+");
        let mut chains = self.chains.lock();
        if let Some(d) = chains.iter().find(|d| d.name == name) {
            return d.clone();
        }
        let name = if chains.len() >= MAX_CHAINS {
            if let Some(d) = chains.iter().find(|d| d.name == OTHER) {
                return d.clone();
            }
            OTHER
        } else {
            &name
        };
        let d = Arc::new(Decoder::new(name));
        chains.push(d.clone());
        d
    }

    /// Every chain's counters, in the order first seen.
    pub fn all(&self) -> Vec<Arc<Decoder>> {
        self.chains.lock().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_decoder_per_chain_and_a_bound() {
        let d = Decodes::default();
        let a = d.of(&["bytes", "zstd"]);
        assert!(Arc::ptr_eq(
            &a,
            &d.of(&["bytes".to_string(), "zstd".to_string()])
        ));
        assert_eq!(a.name(), "bytes+zstd");
        a.record(100, Duration::from_micros(5));
        a.record(50, Duration::from_micros(7));
        assert_eq!((a.bytes(), a.time().summary().count), (150, 2));
        for i in 0..MAX_CHAINS + 3 {
            d.of(&[format!("c{i}")]);
        }
        let all = d.all();
        assert_eq!(all.len(), MAX_CHAINS + 1);
        assert_eq!(all.last().unwrap().name(), OTHER);
        assert!(Arc::ptr_eq(&d.of(&["x"]), &d.of(&["y"])));
    }
}
