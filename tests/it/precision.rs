//! `--timer precise` ends sections on time where tokio's millisecond timer is a tick late — on
//! both of its paths: rare section ends (woken ahead by the timer thread) and frequent ones
//! (tokio's timer, then yielding). tokio's timer is the negative control: the same comparison
//! on it must fail, so the check can.

use crate::common;

use common::{lockbench, summaries};

/// A 1 s run on the memory model with `workers` workers, one key each, sections of 5–10 ms
/// and 2 ms of think time: its median timer error (ms), and for the precise timer how many
/// section ends each path woke (timer thread, yield loop), from the run's footer.
fn run(workers: usize, timer: &str) -> (f64, Option<(u64, u64)>) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let workers = workers.to_string();
    let o = lockbench(&[
        "run",
        "--backend",
        "memory",
        "--workers",
        &workers,
        "--keys",
        &workers,
        "--ttl",
        "1s",
        "--dist",
        "uniform(5ms,10ms)",
        "--think",
        "constant(2ms)",
        "--duration",
        "1s",
        "--timer",
        timer,
        "--out",
        out.to_str().unwrap(),
    ])
    .ok();
    let stdout = String::from_utf8_lossy(&o.stdout).to_string();
    let paths = stdout.split_once("timer: precise (").map(|(_, rest)| {
        let n = |s: &str| s.trim().parse::<u64>().unwrap();
        let (thread, rest) = rest
            .split_once(" section ends woken by the timer thread, ")
            .unwrap();
        let (looped, _) = rest.split_once(" by the yield loop").unwrap();
        (n(thread), n(looped))
    });
    let s = summaries(&out);
    let t = &s[0]["timer_error_ms"];
    assert!(t["count"].as_u64().unwrap() > 100, "too few sections: {t}");
    (t["p50"].as_f64().unwrap(), paths)
}

fn median_timer_error_ms(workers: usize, timer: &str) -> f64 {
    run(workers, timer).0
}

/// `workers`: 2 gives ~200 section ends a second (the timer thread's path), 20 ~2,000 (the
/// yield loop's).
fn precise_beats_tokio(workers: usize) {
    // One comparison at a time, and nothing else running: the precise runs keep a core busy,
    // and two at once on a 2-core machine (or another test's runs) would measure each other.
    let _alone = common::alone();
    let tokio = median_timer_error_ms(workers, "tokio");
    let (precise, paths) = run(workers, "precise");
    // The path the rate of ends calls for took (nearly) all of them.
    let (thread, looped) = paths.expect("the footer names the precise timer's paths");
    let expected = if workers <= 2 { thread } else { looped };
    assert!(
        expected * 10 >= (thread + looped) * 9,
        "{workers} workers: {thread} ends by the timer thread, {looped} by the yield loop"
    );
    // tokio rounds a deadline up to its next millisecond tick: ~0.5–1 ms late at the median.
    // The precise timer: a few µs. A quarter leaves room for a loaded machine.
    assert!(
        precise < tokio / 4.0,
        "precise p50 {precise} ms is not well below tokio's {tokio} ms ({workers} workers)"
    );
    // The negative control: tokio's timer against itself fails the same check.
    let again = median_timer_error_ms(workers, "tokio");
    assert!(
        again >= tokio / 4.0,
        "tokio's timer passed the precision check ({again} vs {tokio} ms): it cannot tell"
    );
}

#[test]
fn the_precise_timer_ends_rare_sections_on_time() {
    precise_beats_tokio(2);
}

#[test]
fn the_precise_timer_ends_frequent_sections_on_time() {
    precise_beats_tokio(20);
}

/// The scheduling policy of this process's timer thread (`/proc`: 0 normal, 1 `SCHED_FIFO`) and
/// its timer slack in ns.
fn timer_thread_state() -> (u32, u64) {
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let dir = task.unwrap().path();
        if std::fs::read_to_string(dir.join("comm")).unwrap().trim() == "lockbench-timer" {
            let tid: u32 = dir.file_name().unwrap().to_str().unwrap().parse().unwrap();
            let policy = lockbench::thread_policy(tid).unwrap();
            let slack = std::fs::read_to_string(format!("/proc/{tid}/timerslack_ns"))
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            return (policy, slack);
        }
    }
    panic!("no timer thread");
}

/// Has the timer thread wake a task now and waits until it has: the thread has been through
/// its loop (where it sets its class) since.
fn through_the_timer_thread() {
    struct Signal(std::sync::mpsc::SyncSender<()>);
    impl std::task::Wake for Signal {
        fn wake(self: std::sync::Arc<Self>) {
            let _ = self.0.try_send(());
        }
    }
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let waker = std::task::Waker::from(std::sync::Arc::new(Signal(tx)));
    assert!(lockbench::precise::wake_at(
        std::time::Instant::now(),
        &waker
    ));
    rx.recv_timeout(std::time::Duration::from_secs(10))
        .expect("the timer thread woke the task");
}

/// The timer thread is in the real-time class while it wakes the section ends (rare ends), and
/// back in the normal class when the yield loop takes them (frequent ends); the run's footer
/// (`realtime()`) says what it had. Where real-time priority is not permitted, it stays normal
/// and says so. Back in the normal class its timer slack is still 1 ns (Linux restores the
/// default 50 µs to a thread leaving the real-time class).
#[test]
fn the_timer_thread_is_real_time_only_while_it_wakes_the_ends() {
    use lockbench::precise::{realtime, use_thread};
    const FIFO: u32 = 1;
    // One end: a rare one, the timer thread's.
    assert!(use_thread());
    through_the_timer_thread();
    let granted = realtime().expect("the timer thread asked for real-time priority");
    let (rare, _) = timer_thread_state();
    // Ten ends at once: well over 400 a second (counted over at least 10 ms), the yield loop's.
    for _ in 0..10 {
        use_thread();
    }
    assert!(!use_thread());
    through_the_timer_thread();
    let (frequent, slack) = timer_thread_state();
    assert_eq!(
        (rare, frequent),
        (if granted { FIFO } else { 0 }, 0),
        "policy with rare ends, with frequent ones (real-time priority granted: {granted})"
    );
    // Leaving the real-time class must not bring the default 50 µs slack back.
    assert_eq!(slack, 1, "the timer thread's slack (ns) with frequent ends");
}

/// A run's manifest: the runtime's thread count and why, for `timer` and the extra flags.
fn runtime_threads(timer: &str, extra: &[&str]) -> (u64, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let mut args = vec![
        "run",
        "--backend",
        "memory",
        "--workers",
        "4",
        "--keys",
        "4",
        "--ttl",
        "1s",
        "--dist",
        "constant(1ms)",
        "--sections",
        "40",
        "--timer",
        timer,
    ];
    args.extend_from_slice(extra);
    lockbench(&args).out(&out).ok();
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    let why = m["runtime_threads_why"].as_str().unwrap().to_string();
    (m["runtime_threads"].as_u64().unwrap(), why)
}

/// The precise timer runs on one runtime thread unless `--threads` says otherwise, and the
/// manifest says so and why; tokio's timer keeps one per core (the control: the choice
/// follows the timer, not the command).
#[test]
fn the_precise_timer_defaults_to_one_runtime_thread_and_the_manifest_says_why() {
    let (threads, why) = runtime_threads("precise", &[]);
    assert_eq!(threads, 1);
    assert_eq!(why, lockbench::cli::PRECISE_ON_ONE_THREAD);
    assert!(why.contains("--timer precise"), "{why}");
    let (threads, why) = runtime_threads("precise", &["--threads", "2"]);
    assert_eq!((threads, why.as_str()), (2, "--threads"));
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    let (threads, why) = runtime_threads("tokio", &[]);
    assert_eq!((threads, why.as_str()), (cores, "one per core"));
}
