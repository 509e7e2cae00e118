//! The example services of `examples/apps/` (issue 42): programs that lock the way people do,
//! in Python, Node and PHP, each writing its own log of holds (`LOCKBENCH_APP_LOG`).
//!
//! A program's log gives four times per hold on CLOCK_MONOTONIC: the winning acquisition sent,
//! its reply received, the release sent, its reply received. Whatever stands between the
//! program and Redis sees the hold begin inside the first pair and end inside the second, so
//! the log *bounds* the figures a proxy may report: the tolerance of each comparison is
//! computed from the log, never picked by hand. The same bounds decide, from the logs alone,
//! which releases certainly removed another holder's lock: the naive `SET NX PX` + `DEL`
//! program does, the token libraries never do (one check, its negative control beside it).

use crate::common;

use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// One example program: how to start it, and what its log calls it.
#[derive(Clone, Copy, Debug, PartialEq)]
enum App {
    /// redis-py's `Lock`.
    RedisPy,
    /// `SET k token NX PX ttl` and a plain `DEL k`: the article's bug.
    Naive,
    /// node-redlock 5.
    Redlock,
    /// Symfony Lock's `RedisStore` on phpredis.
    Symfony,
}

impl App {
    const ALL: [App; 4] = [App::RedisPy, App::Naive, App::Redlock, App::Symfony];

    /// Its `app` field in the log.
    fn name(self) -> &'static str {
        match self {
            App::RedisPy => "redis-py",
            App::Naive => "naive",
            App::Redlock => "redlock",
            App::Symfony => "symfony",
        }
    }

    /// The interpreter and script, as absolute paths.
    fn command(self) -> Vec<String> {
        let python = format!("{ROOT}/.drivers/python/bin/python");
        let (exe, script) = match self {
            App::RedisPy => (python, "python/redis_py_lock.py"),
            App::Naive => (python, "python/naive_set_del.py"),
            App::Redlock => ("node".to_string(), "node/redlock.js"),
            App::Symfony => ("php".to_string(), "php/symfony_lock.php"),
        };
        vec![exe, format!("{ROOT}/examples/apps/{script}")]
    }

    /// What it needs in its environment besides the server's address and the log.
    fn env(self) -> Vec<(&'static str, String)> {
        match self {
            App::Redlock => vec![("NODE_PATH", format!("{ROOT}/drivers/node/node_modules"))],
            _ => vec![],
        }
    }

    /// Whether its log's `release` says if the release removed the holder's key: the naive
    /// program logs `DEL`'s reply, redis-py and node-redlock whether their script deleted;
    /// Symfony's `release()` says nothing either way.
    fn release_tells(self) -> bool {
        self != App::Symfony
    }
}

/// One hold as the program logged it (nanoseconds of CLOCK_MONOTONIC).
#[derive(Clone, Debug)]
struct Hold {
    pid: u64,
    key: String,
    ttl_ns: u64,
    acquire_sent: u64,
    start: u64,
    end: u64,
    release_done: u64,
    /// The release removed a key (`DEL` answered 1, or the token script deleted), when the
    /// program can tell.
    removed: Option<bool>,
}

/// The holds of `app` in the log at `path`, checked for sense (the four times in order).
fn read_log(path: &Path, app: App) -> Vec<Hold> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: no log of holds ({e})", path.display()));
    let holds: Vec<Hold> = text
        .lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{}: not a JSON line ({e}): {line}", path.display()));
            assert_eq!(v["app"], app.name(), "{line}");
            let ns = |f: &str| {
                v[f].as_u64()
                    .unwrap_or_else(|| panic!("{f} is not a count of ns: {line}"))
            };
            let release = v["release"].as_str().unwrap_or_default();
            let removed = match release {
                "released" | "deleted" => Some(true),
                "refused" | "absent" => Some(false),
                "returned" => None,
                other => panic!("unknown release outcome {other}: {line}"),
            };
            let h = Hold {
                pid: ns("pid"),
                key: v["key"].as_str().unwrap().to_string(),
                ttl_ns: ns("ttl_ms") * 1_000_000,
                acquire_sent: ns("acquire_sent_ns"),
                start: ns("start_ns"),
                end: ns("end_ns"),
                release_done: ns("release_done_ns"),
                removed,
            };
            assert!(
                h.acquire_sent <= h.start && h.start <= h.end && h.end <= h.release_done,
                "times out of order: {line}"
            );
            h
        })
        .collect();
    assert_eq!(
        holds.iter().all(|h| h.removed.is_some()),
        app.release_tells(),
        "{app:?}: release outcomes"
    );
    holds
}

/// Per key, the time during which two or more of `spans` are open at once, summed over keys
/// (the overlap of DESIGN.md), in ns. It only grows when any span grows, so the overlap of
/// the logged inner spans and of the outer ones bound the overlap of any spans between them.
fn overlap_ns(holds: &[Hold], span: impl Fn(&Hold) -> (u64, u64)) -> u64 {
    let mut by_key: HashMap<&str, Vec<(u64, i32)>> = HashMap::new();
    for h in holds {
        let (a, b) = span(h);
        let edges = by_key.entry(&h.key).or_default();
        edges.push((a, 1));
        edges.push((b, -1));
    }
    let mut total = 0;
    for edges in by_key.values_mut() {
        // Ends before starts at the same instant: spans that only touch do not overlap.
        edges.sort();
        let (mut open, mut since) = (0, 0);
        for &(t, step) in edges.iter() {
            if open >= 2 {
                total += t - since;
            }
            open += step;
            since = t;
        }
    }
    total
}

/// What a log allows a proxy to report, each figure as the range [certain, possible].
#[derive(Debug)]
struct Bounds {
    overlap_ms: (f64, f64),
    overruns: (u64, u64),
    wrongful_deletes: (u64, u64),
}

impl Bounds {
    fn of(holds: &[Hold]) -> Self {
        let ms = |ns: u64| ns as f64 / 1e6;
        let overruns = (
            holds.iter().filter(|h| h.end - h.start > h.ttl_ns).count() as u64,
            holds
                .iter()
                .filter(|h| h.release_done - h.acquire_sent > h.ttl_ns)
                .count() as u64,
        );
        Bounds {
            overlap_ms: (
                ms(overlap_ns(holds, |h| (h.start, h.end))),
                ms(overlap_ns(holds, |h| (h.acquire_sent, h.release_done))),
            ),
            overruns,
            wrongful_deletes: wrongful_deletes(holds),
        }
    }
}

/// Releases that removed another holder's lock, as [certain, possible], from the logs alone.
///
/// Hold A's release removed a key. Had another hold B of the same key been acquired after A's
/// (B's acquisition sent after A's reply came back) and before A's release (B's reply came back
/// before A's release was sent), the key was B's or a later holder's when A's release ran, never
/// A's again (each acquisition writes a token of its own): certainly another's lock. It was
/// possibly another's whenever the two windows allow B's acquisition between A's and A's
/// release. With no such B the key A removed was its own.
fn wrongful_deletes(holds: &[Hold]) -> (u64, u64) {
    let removed: Vec<&Hold> = holds.iter().filter(|h| h.removed == Some(true)).collect();
    fn others<'a>(holds: &'a [Hold], a: &'a Hold) -> impl Iterator<Item = &'a Hold> {
        holds
            .iter()
            .filter(move |b| b.key == a.key && (b.pid, b.start) != (a.pid, a.start))
    }
    let certain = removed
        .iter()
        .filter(|a| others(holds, a).any(|b| b.acquire_sent > a.start && b.start < a.end))
        .count();
    let possible = removed
        .iter()
        .filter(|a| {
            others(holds, a).any(|b| b.start > a.acquire_sent && b.acquire_sent < a.release_done)
        })
        .count();
    (certain as u64, possible as u64)
}

/// Starts `copies` copies of `app` with `args` against the server at `url` (no proxy), all
/// logging into `log`.
fn start_direct(app: App, copies: usize, args: &[&str], url: &str, log: &Path) -> Vec<Child> {
    let cmd = app.command();
    (0..copies)
        .map(|_| {
            Command::new(&cmd[0])
                .args(&cmd[1..])
                .args(args)
                .env("REDIS_URL", url)
                .env("LOCKBENCH_APP_LOG", log)
                .envs(app.env())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| panic!("{app:?}: cannot start {} ({e})", cmd[0]))
        })
        .collect()
}

/// Waits for `app`'s copies; each must exit 0.
fn wait_all(app: App, children: Vec<Child>) {
    for c in children {
        let o = c.wait_with_output().unwrap();
        assert!(
            o.status.success(),
            "{app:?} failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

/// Sections of 10–50 ms on one key with a 30 ms TTL: about half outlive their lock, and
/// three copies contend for it.
const CONTENDED: [&str; 10] = [
    "--keys", "1", "--ttl-ms", "30", "--min-ms", "10", "--max-ms", "50", "--cycles", "8",
];

/// Each program, three copies on one contended key against a plain private server: a log line
/// per hold with its times in order, and the check of releases that certainly removed another
/// holder's lock finds them in the naive program's log and in no token library's (Symfony's
/// `release()` does not say what it removed: its log is read for the rest).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_app_logs_its_holds_and_only_the_naive_one_deletes_another_holders_lock() {
    let _cpu = common::shared();
    let server = common::redis().await;
    let tmp = tempfile::tempdir().unwrap();
    // The four programs at once, each on keys of its own.
    let log = |app: App| tmp.path().join(format!("{}.jsonl", app.name()));
    let running: Vec<(App, Vec<Child>)> = App::ALL
        .into_iter()
        .map(|app| {
            let prefix = format!("app:{}:", app.name());
            let args: Vec<&str> = [&CONTENDED[..], &["--prefix", &prefix]].concat();
            (app, start_direct(app, 3, &args, &server.url(), &log(app)))
        })
        .collect();
    for (app, children) in running {
        wait_all(app, children);
        let holds = read_log(&log(app), app);
        assert_eq!(holds.len(), 3 * 8, "{app:?}: a line per hold");
        let b = Bounds::of(&holds);
        assert!(
            b.overruns.0 > 0,
            "{app:?}: some sections outlive the TTL: {b:?}"
        );
        assert!(b.overruns.0 <= b.overruns.1 && b.overlap_ms.0 <= b.overlap_ms.1);
        match app {
            App::Naive => assert!(
                b.wrongful_deletes.0 > 0,
                "the naive DEL removes another holder's lock: {b:?}"
            ),
            App::RedisPy | App::Redlock => {
                assert_eq!(b.wrongful_deletes.0, 0, "{app:?}: {b:?}");
                let refused = holds.iter().filter(|h| h.removed == Some(false)).count();
                assert!(refused > 0, "{app:?}: stale releases are refused");
            }
            App::Symfony => {}
        }
        eprintln!("{app:?}: {b:?}");
    }
}
