//! Helpers shared by the integration tests.

/// A deterministic pseudo-random sequence, so failures reproduce.
pub struct Lcg(pub u64);

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
