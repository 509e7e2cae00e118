//! A driver's stamps on lockbench's clock. A driver says when its library's acquire returned
//! (the `held` event's `t_ns`) in CLOCK_MONOTONIC nanoseconds — Python's `time.monotonic_ns()`,
//! Node's `process.hrtime.bigint()` — the clock Rust's `Instant` reads on Linux. A section then
//! opens when the lock was held, not when the `held` line reached lockbench: on a loaded
//! machine the line comes hundreds of milliseconds late, and a section timed on its arrival
//! missed time the lock was already held (overlaps without the overrun that explains them,
//! issue 43). Likewise a section ends when the driver read the `leave` (the reply's
//! `leave_ns`), right before the library's release was called.
//!
//! The mapping is one anchor pair, read together once: the clock's nanoseconds and an
//! `Instant`. A stamp `t` is the `Instant` `anchor.at + (t - anchor.mono_ns)`.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The environment variable that makes lockbench time a library's sections on the arrival of
/// the driver's lines (`off`), as before the drivers' stamps were read: the negative control
/// of the tests (`tests/it/clients.rs`), and for measuring what the stamps change.
pub(crate) const DRIVER_TIMES_ENV: &str = "LOCKBENCH_DRIVER_TIMES";

/// Whether the drivers' stamps are read ([`DRIVER_TIMES_ENV`] is not `off`), once a process.
pub(crate) fn driver_times() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var(DRIVER_TIMES_ENV).map_or(true, |v| v != "off"))
}

/// CLOCK_MONOTONIC now, ns.
fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (t.tv_sec as u64) * 1_000_000_000 + t.tv_nsec as u64
}

/// The anchor pair: CLOCK_MONOTONIC's reading and the `Instant` read right after it.
struct Anchor {
    mono_ns: u64,
    at: Instant,
}

fn anchor() -> &'static Anchor {
    static A: OnceLock<Anchor> = OnceLock::new();
    A.get_or_init(|| {
        let mono_ns = monotonic_ns();
        Anchor {
            mono_ns,
            at: Instant::now(),
        }
    })
}

/// The `Instant` of a driver's stamp `t_ns` (`None`: one no `Instant` can hold).
pub(crate) fn instant_of(t_ns: u64) -> Option<Instant> {
    let a = anchor();
    if t_ns >= a.mono_ns {
        a.at.checked_add(Duration::from_nanos(t_ns - a.mono_ns))
    } else {
        a.at.checked_sub(Duration::from_nanos(a.mono_ns - t_ns))
    }
}

/// How far a stamp may fall outside the moments it must lie between: the anchor's two reads
/// are nanoseconds apart on one clock, so a stamp off by more is on another clock (a
/// platform whose runtime's monotonic clock is not `Instant`'s) or made up.
pub(crate) const SLACK: Duration = Duration::from_millis(1);

/// Driver stamp `field` (`t_ns`, `leave_ns`) read as an `Instant` that lies between `asked` (before the
/// request was written) and `arrived` (after the line was read): `Ok(None)` when the line has
/// no stamp (an older driver) or the stamps are not read; `Err` says why it cannot be.
pub(crate) fn stamp_between(
    value: Option<&serde_json::Value>,
    field: &str,
    asked: Instant,
    arrived: Instant,
) -> Result<Option<Instant>, String> {
    if !driver_times() {
        return Ok(None);
    }
    let Some(v) = value.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let Some(t_ns) = v.as_u64() else {
        return Err(format!(
            "wrote `{field}` {v}: not CLOCK_MONOTONIC nanoseconds (an integer >= 0)"
        ));
    };
    let at = instant_of(t_ns);
    match at {
        Some(at) if at + SLACK >= asked && at <= arrived + SLACK => Ok(Some(at)),
        _ => {
            let off = |a: Instant, b: Instant| match a.checked_duration_since(b) {
                Some(d) => format!("{} µs after", d.as_micros()),
                None => format!("{} µs before", b.duration_since(a).as_micros()),
            };
            let place = match at {
                Some(at) if at < asked => format!("{} the request was written", off(at, asked)),
                Some(at) => format!("{} its line was read", off(at, arrived)),
                None => "outside any time lockbench can read".to_string(),
            };
            Err(format!(
                "wrote `{field}` {t_ns}, {place}: a stamp must lie between the request and its \
                 reply, on CLOCK_MONOTONIC (the clock of Rust's Instant on Linux)"
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stamp of now lies between a moment before and one after; one from before the request
    /// or after the reply is refused with the field named; a missing or `null` stamp is none.
    #[test]
    fn a_stamp_lies_between_the_request_and_its_reply_or_is_refused() {
        let asked = Instant::now();
        let t = monotonic_ns();
        let arrived = Instant::now();
        let v = serde_json::json!(t);
        let at = stamp_between(Some(&v), "t_ns", asked, arrived)
            .unwrap()
            .expect("a stamp");
        assert!(at + SLACK >= asked && at <= arrived + SLACK);
        let early = serde_json::json!(t - 50_000_000);
        let e = stamp_between(Some(&early), "t_ns", asked, arrived).unwrap_err();
        assert!(
            e.contains("`t_ns`") && e.contains("before the request"),
            "{e}"
        );
        let late = serde_json::json!(t + 50_000_000);
        let e = stamp_between(Some(&late), "t_ns", asked, arrived).unwrap_err();
        assert!(e.contains("after its line was read"), "{e}");
        let text = serde_json::json!("1");
        assert!(stamp_between(Some(&text), "t_ns", asked, arrived).is_err());
        assert_eq!(stamp_between(None, "t_ns", asked, arrived), Ok(None));
        let null = serde_json::Value::Null;
        assert_eq!(stamp_between(Some(&null), "t_ns", asked, arrived), Ok(None));
    }
}
