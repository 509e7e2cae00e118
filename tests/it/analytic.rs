//! The harness checks itself: measured overrun fractions agree with theory for several
//! distributions, and the same check catches a deliberately wrong TTL.

use crate::common;

use common::*;
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use lockbench::ReleaseMethod::Token;
use lockbench::analytic;

fn timer_error_histogram(dir: &std::path::Path) -> hdrhistogram::Histogram<u64> {
    let bytes = std::fs::read(dir.join("timer-error.hlog")).unwrap();
    let mut total = lockbench::new_hist();
    let mut de = Deserializer::new();
    for entry in IntervalLogIterator::new(&bytes) {
        if let Ok(LogEntry::Interval(h)) = entry {
            let decoded = base64_decode(h.encoded_histogram());
            let hist: hdrhistogram::Histogram<u64> =
                de.deserialize(&mut decoded.as_slice()).unwrap();
            total.add(&hist).unwrap();
        }
    }
    total
}

fn base64_decode(s: &str) -> Vec<u8> {
    const T: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let (mut buf, mut bits) = (0u32, 0);
    for c in s.bytes().filter(|c| *c != b'=') {
        buf = (buf << 6) | T.iter().position(|x| *x == c).unwrap() as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buf >> bits) as u8);
        }
    }
    out
}

/// For exponential, lognormal, uniform and a mixture, the measured overrun fraction lies in
/// the 99 % interval around the theoretical one; fed a TTL 30 % off, the same check fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_check_passes_for_parametric_dists_and_catches_a_wrong_ttl() {
    let server = redis().await;
    let cases = [
        ("exponential(mean=40ms)", 60),
        ("lognormal(median=30ms,p99=150ms)", 50),
        ("uniform(10ms,90ms)", 70),
        ("mixture(0.8*constant(20ms),0.2*uniform(40ms,120ms))", 60),
    ];
    for (dist, ttl) in cases {
        let dir = tempfile::tempdir().unwrap();
        let p = plan(&format!(
            "workers = 200\nkeys = 100000\nttl = \"{ttl}ms\"\nduration = \"2500ms\"\ndist = \"{dist}\"\n\
             connection = \"shared\"\nseed = 3\n"
        ));
        let out = run_redis(&server, &p, &[Token], dir.path()).await;
        let s = &out.summaries[0];
        let a = s.analytic.expect("parametric distributions are checked");
        // Enough sections for the 99 % interval to be narrow (about 5,000 on a quiet machine,
        // 2,115 were seen with the load at 9 on 2 cores). Whether it is narrow enough is the
        // control's to show below: the same check fed a TTL 30 % off must fail.
        assert!(
            s.counts.sections > 1000,
            "{dist}: {} sections",
            s.counts.sections
        );
        assert!(
            a.agrees,
            "{dist}: theory {:.4} outside [{:.4}, {:.4}]",
            a.p_expected, a.ci99_low, a.ci99_high
        );
        assert!(
            a.p_expected > 0.02,
            "{dist}: the TTL makes the check trivial ({:.4})",
            a.p_expected
        );

        let timer = timer_error_histogram(dir.path());
        assert_eq!(
            timer.len(),
            s.timer_error_ms.count,
            "timer-error.hlog holds every section"
        );
        let wrong = analytic::check(
            &p.workload.dist,
            ttl as f64 * 1.3,
            &timer,
            s.counts.overruns,
            s.counts.sections,
        )
        .unwrap();
        assert!(
            !wrong.agrees,
            "{dist}: a TTL 30% off went unnoticed: {wrong:?}"
        );
    }
}
