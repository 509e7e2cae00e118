//! A worker's independent seeded random streams: the n-th section of worker *w* draws the
//! same duration whatever the release method, busy replies or timing (what makes `compare`
//! paired).

use crate::dist::Sampler;
use rand::SeedableRng;
use rand::rngs::SmallRng;

/// Independent random streams of one worker, derived from the base seed and the worker id.
pub(crate) struct Streams {
    pub(crate) durations: SmallRng,
    pub(crate) think: SmallRng,
    pub(crate) keys: SmallRng,
    pub(crate) jitter: SmallRng,
    pub(crate) tokens: SmallRng,
    pub(crate) pauses: SmallRng,
    pub(crate) crashes: SmallRng,
}

impl Streams {
    pub(crate) fn new(seed: u64, worker: usize) -> Self {
        let s = |stream: u64| {
            // splitmix-style mixing so nearby seeds/workers give unrelated streams
            SmallRng::seed_from_u64(crate::math::mix64(
                seed ^ (worker as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
                    ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03),
            ))
        };
        Self {
            durations: s(1),
            think: s(2),
            keys: s(3),
            jitter: s(4),
            tokens: s(5),
            pauses: s(6),
            crashes: s(7),
        }
    }
}

/// The intended durations (µs) worker `worker` draws for its first `n` sections under `seed`.
/// Used to check that runs with the same seed are paired.
pub fn intended_sequence(dist: &Sampler, seed: u64, worker: usize, n: usize) -> Vec<u64> {
    let mut st = Streams::new(seed, worker);
    (0..n)
        .map(|_| crate::model::units::ms_to_us(dist.sample_ms(&mut st.durations)))
        .collect()
}
