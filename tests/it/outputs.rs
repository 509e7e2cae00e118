//! Output files, pairing by seed, key hygiene, the demo and backend checks.

use crate::common;

use common::*;
use lockbench::RedisConnector;
use lockbench::ReleaseMethod::{Del, Delex, Token};
use lockbench::Timeouts;
use lockbench::intended_sequence;
use lockbench::{LockCommands, ServerProbes};
use redis::Commands;
use std::collections::BTreeMap;

fn schema() -> serde_json::Value {
    serde_json::from_str(include_str!("../../schema/summary.schema.json")).unwrap()
}

/// summary.json validates against the committed JSON Schema, and the schema rejects a summary
/// missing a figure or with a wrong type (the check can fail).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn summary_json_matches_committed_schema() {
    let dir = tempfile::tempdir().unwrap();
    let p = plan(
        "workers = 8\nkeys = 1\nttl = \"5ms\"\ndist = \"uniform(1ms,10ms)\"\nsections = 200\n",
    );
    let _ = run_memory(&p, &[Del, Token], dir.path()).await;
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("summary.json")).unwrap())
            .unwrap();
    let errors = common::schema::errors(&schema(), &json);
    assert!(errors.is_empty(), "{errors:#?}");

    // Every release a summary can name: the built-in methods, `script`, every library.
    let schema = schema();
    let names: Vec<&str> = schema["$defs"]["summary"]["properties"]["release"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for lib in lockbench::Client::ALL {
        assert!(
            names.contains(&lib.name()),
            "{} is not in the schema",
            lib.name()
        );
    }
    for m in ["del", "token", "delex", "script"] {
        assert!(names.contains(&m), "{m} is not in the schema");
    }

    let mut missing = json.clone();
    missing["variants"][0]
        .as_object_mut()
        .unwrap()
        .remove("wrongful_deletes");
    assert!(!common::schema::errors(&schema, &missing).is_empty());
    let mut wrong = json.clone();
    wrong["variants"][0]["overlap_ms"] = serde_json::json!("a lot");
    assert!(!common::schema::errors(&schema, &wrong).is_empty());

    // The other files of a run are there and consistent.
    for f in [
        "manifest.json",
        "summary.csv",
        "events.csv",
        "durations.hgrm",
        "durations.hlog",
        "acquire-latency.hlog",
    ] {
        assert!(
            dir.path().join(f).exists()
                || dir.path().join(f.replace(".hgrm", "-del.hgrm")).exists(),
            "{f} missing"
        );
    }
    let rows = events(dir.path());
    let sections: u64 = json["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["sections"].as_u64().unwrap())
        .sum();
    assert_eq!(
        rows.len() as u64,
        sections,
        "one events.csv row per section"
    );
    let csv = std::fs::read_to_string(dir.path().join("summary.csv")).unwrap();
    assert_eq!(csv.lines().count(), 3, "header + one row per variant");
    // The runtime the workers ran on is recorded: this test's own, two threads.
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("manifest.json")).unwrap())
            .unwrap();
    assert_eq!(manifest["runtime_threads"], 2);
    assert_eq!(manifest["runtime_threads_why"], "the caller's runtime");
}

/// The same seed gives every worker the same sequence of intended durations — across runs and
/// across the variants of a compare — and another seed a different one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_seed_same_intended_durations_and_compare_is_paired() {
    let toml = "workers = 6\nkeys = 2\nttl = \"3ms\"\ndist = \"exponential(mean=2ms)\"\nsections = 300\nseed = 99\n";
    let p = plan(toml);
    let d1 = tempfile::tempdir().unwrap();
    let d2 = tempfile::tempdir().unwrap();
    let _ = run_memory(&p, &[Del, Token], d1.path()).await;
    let _ = run_memory(&p, &[Token], d2.path()).await;
    let seqs = |rows: &[lockbench::EventRow], variant: &str| {
        let mut m: BTreeMap<usize, Vec<(u64, u64)>> = BTreeMap::new();
        for r in rows.iter().filter(|r| *r.variant == *variant) {
            m.entry(r.worker).or_default().push((r.seq, r.intended_us));
        }
        m.into_iter()
            .map(|(w, mut v)| {
                v.sort();
                (w, v.into_iter().map(|x| x.1).collect::<Vec<_>>())
            })
            .collect::<BTreeMap<_, _>>()
    };
    let r1 = events(d1.path());
    let r2 = events(d2.path());
    let (del, token, again) = (seqs(&r1, "del"), seqs(&r1, "token"), seqs(&r2, "token"));
    let sampler = p.workload.dist.sampler();
    let mut compared = 0;
    for (w, a) in &del {
        let expected = intended_sequence(&sampler, 99, *w, a.len());
        assert_eq!(
            a, &expected,
            "worker {w}: recorded durations are the seeded stream"
        );
        for other in [&token, &again] {
            if let Some(b) = other.get(w) {
                let n = a.len().min(b.len());
                assert_eq!(a[..n], b[..n], "worker {w} drew different durations");
                compared += n;
            }
        }
    }
    assert!(compared > 100, "too little overlap to compare: {compared}");
    let other_seed = intended_sequence(&sampler, 100, 0, 20);
    assert_ne!(intended_sequence(&sampler, 99, 0, 20), other_seed);
}

/// Keys written before a run keep their value and TTL, no command of the run names a foreign
/// key or scans the keyspace (checked with MONITOR), a key of another lockbench run is
/// untouched, and no key of this run is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_keys_untouched_and_no_key_left_behind() {
    let server = redis().await;
    let mut c = sync_conn(&server);
    let _: () = c.set("app:session", "v1").unwrap();
    let _: () = redis::cmd("SET")
        .arg("app:cache")
        .arg("v2")
        .arg("PX")
        .arg(600_000)
        .query(&mut c)
        .unwrap();
    let _: () = c
        .set("lockbench:20000101T000000Z-0000:del:0", "other-run")
        .unwrap();
    let _: () = c.set("lockbenchx", "lookalike").unwrap();
    let before_pttl: i64 = c.pttl("app:cache").unwrap();

    // Every command the server runs during the run, as MONITOR reports it.
    let monitor = Monitor::start(server.port());
    let dir = tempfile::tempdir().unwrap();
    let p = plan(
        "workers = 20\nkeys = 3\nttl = \"10ms\"\ndist = \"constant(15ms)\"\nduration = \"1s\"\nthink = \"constant(1ms)\"\n",
    );
    let out = run_redis(&server, &p, &[Del, Token], dir.path()).await;
    assert!(out.summaries.iter().all(|s| s.counts.sections > 0));
    let seen = monitor.finish(&mut c);
    let prefix = &out.manifest.key_prefix;
    assert!(
        seen.iter().filter(|l| l.contains(prefix.as_str())).count() > 100,
        "MONITOR did not capture the run"
    );
    for line in &seen {
        for foreign in [
            "app:session",
            "app:cache",
            "lockbenchx",
            "20000101T000000Z-0000",
        ] {
            assert!(!line.contains(foreign), "the run touched {foreign}: {line}");
        }
        // The end-of-run sweep (issue 40) scans for the run's own keys only: a SCAN whose
        // MATCH is the run's prefix, never the keyspace at large.
        if line.to_ascii_uppercase().contains("\"SCAN\"") {
            let pattern = format!("\"MATCH\" \"*{}", prefix.trim_end_matches(':'));
            assert!(line.contains(&pattern), "a SCAN beyond the run: {line}");
            continue;
        }
        for cmd in ["\"KEYS\"", "\"FLUSHDB\"", "\"FLUSHALL\"", "\"RANDOMKEY\""] {
            assert!(
                !line.to_ascii_uppercase().contains(cmd),
                "the run sent {cmd}: {line}"
            );
        }
    }

    let get = |c: &mut redis::Connection, k: &str| -> Option<String> { c.get(k).unwrap() };
    assert_eq!(get(&mut c, "app:session").as_deref(), Some("v1"));
    assert_eq!(get(&mut c, "app:cache").as_deref(), Some("v2"));
    assert_eq!(
        get(&mut c, "lockbench:20000101T000000Z-0000:del:0").as_deref(),
        Some("other-run")
    );
    assert_eq!(get(&mut c, "lockbenchx").as_deref(), Some("lookalike"));
    assert_eq!(
        c.pttl::<_, i64>("app:session").unwrap(),
        -1,
        "persistent key got a TTL"
    );
    let after_pttl: i64 = c.pttl("app:cache").unwrap();
    assert!(
        after_pttl > 0 && after_pttl <= before_pttl,
        "TTL changed: {before_pttl} -> {after_pttl}"
    );
    let mut keys: Vec<String> = c.keys("*").unwrap();
    keys.sort();
    assert_eq!(
        keys,
        [
            "app:cache",
            "app:session",
            "lockbench:20000101T000000Z-0000:del:0",
            "lockbenchx"
        ]
    );
    assert!(out.manifest.key_prefix.starts_with("lockbench:2"));
}

/// The demo prints the server's real replies: DEL answers 1 and lets C in; the token release
/// answers 0, Redis 7.0 answers A's `DELEX` with its own unknown-command error, B keeps its
/// lock, C is refused, and B's own release answers 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_shows_real_replies_in_the_right_places() {
    let server = redis().await;
    let conn = RedisConnector::new(&server.url(), Timeouts::default(), false).unwrap();
    let mut c = lockbench::Connector::connect(&conn).await.unwrap();
    let mut out = Vec::new();
    let steps = lockbench::demo::stale_release(
        &mut c,
        "lockbench:test:demo",
        std::time::Duration::from_millis(50),
        &mut out,
    )
    .await
    .unwrap();
    let replies = |act: &str| -> Vec<(String, String)> {
        steps
            .iter()
            .filter(|s| s.act == act)
            .map(|s| {
                (
                    format!("{} {}", s.who, s.command.split_whitespace().next().unwrap()),
                    s.reply.clone(),
                )
            })
            .collect()
    };
    let pairs = |v: &[(&str, &str)]| {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        replies("del"),
        pairs(&[
            ("A SET", "OK"),
            ("observer EXISTS", "(integer) 0"),
            ("B SET", "OK"),
            ("A DEL", "(integer) 1"),
            ("observer EXISTS", "(integer) 0"),
            ("C SET", "OK"),
            ("cleanup DEL", "(integer) 1"),
        ])
    );
    assert_eq!(
        replies("token"),
        pairs(&[
            ("A SET", "OK"),
            ("observer EXISTS", "(integer) 0"),
            ("B SET", "OK"),
            ("A EVAL", "(integer) 0"),
            (
                "A DELEX",
                "(error) ERR unknown command 'DELEX', with args beginning with: \
                 'lockbench:test:demo' 'IFEQ' 'tokA' ",
            ),
            ("observer GET", "\"tokB\""),
            ("observer EXISTS", "(integer) 1"),
            ("C SET", "(nil)"),
            ("B EVAL", "(integer) 1"),
            ("observer EXISTS", "(integer) 0"),
        ])
    );
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("DEL lockbench:test:demo\n") && text.contains("(integer) 1"));
    assert_eq!(c.exists("lockbench:test:demo").await.unwrap(), 0);
}

/// `delex` is refused on Redis < 8.4 with a message naming the version it needs; on a store
/// that has DELEX (the model) it runs and classifies refusals as unclassified.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delex_needs_redis_8_4_and_works_where_supported() {
    let server = redis().await;
    let dir = tempfile::tempdir().unwrap();
    let p = plan(
        "workers = 10\nkeys = 1\nttl = \"10ms\"\ndist = \"constant(15ms)\"\nduration = \"600ms\"\nthink = \"constant(1ms)\"\n",
    );
    let conn = RedisConnector::new(&server.url(), Timeouts::default(), false).unwrap();
    let mut probe = lockbench::Connector::connect(&conn).await.unwrap();
    let version = probe.server_version().await.unwrap();
    let r = lockbench::run_with(&conn, "spawn", &p, &[Delex], &opts(dir.path())).await;
    if lockbench::version_tuple(&version).is_some_and(|v| v < (8, 4)) {
        let msg = r.unwrap_err().to_string();
        assert!(msg.contains("8.4") && msg.contains("token"), "{msg}");
    } else {
        assert!(
            r.is_ok(),
            "{version} has DELEX but the run failed: {:?}",
            r.err()
        );
    }
    let (out, _) = run_memory(&p, &[Delex], tempfile::tempdir().unwrap().path()).await;
    let s = &out.summaries[0];
    assert_eq!(s.counts.wrongful_deletes, 0);
    assert!(
        s.counts.refused_unclassified > 0 && s.refused_releases == s.counts.refused_unclassified
    );
}

/// `hot_key = 1` sends every attempt to key 0; without it attempts spread over all keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_key_concentrates_attempts() {
    let base = "workers = 4\nkeys = 8\nttl = \"50ms\"\ndist = \"constant(0ms)\"\nsections = 400\nseed = 11\n";
    let d1 = tempfile::tempdir().unwrap();
    let _ = run_memory(
        &plan(&format!("{base}hot_key = 1.0\n")),
        &[Token],
        d1.path(),
    )
    .await;
    assert!(events(d1.path()).iter().all(|r| r.key == 0));
    let d2 = tempfile::tempdir().unwrap();
    let _ = run_memory(&plan(base), &[Token], d2.path()).await;
    let used: std::collections::BTreeSet<usize> = events(d2.path()).iter().map(|r| r.key).collect();
    assert_eq!(used.len(), 8, "uniform choice left keys unused: {used:?}");
}

/// `del` is attributed with GETDEL (Redis ≥ 6.2): on a server without it the run refuses to
/// start with a message naming the version, instead of counting every release as an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn del_needs_getdel_and_says_so() {
    let server = common::Server::start(lockbench::SpawnedRedis::start_with_args(&[
        "--rename-command",
        "GETDEL",
        "",
    ]))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let p = plan("workers = 2\nsections = 10\ndist = \"constant(1ms)\"\n");
    let conn = RedisConnector::new(&server.url(), Timeouts::default(), false).unwrap();
    let msg = lockbench::run_with(&conn, "spawn", &p, &[Del], &opts(dir.path()))
        .await
        .unwrap_err()
        .to_string();
    assert!(msg.contains("GETDEL") && msg.contains("6.2"), "{msg}");
    // The token method does not need it.
    let dir2 = tempfile::tempdir().unwrap();
    assert!(
        lockbench::run_with(&conn, "spawn", &p, &[Token], &opts(dir2.path()))
            .await
            .is_ok()
    );
}

/// `redis-cli MONITOR` in the background, collecting every command the server runs.
struct Monitor {
    child: std::process::Child,
    lines: std::thread::JoinHandle<Vec<String>>,
}

impl Monitor {
    const END: &'static str = "lockbench-test-monitor-end";

    fn start(port: u16) -> Monitor {
        use std::io::BufRead;
        let mut child = std::process::Command::new("redis-cli")
            .args(["-p", &port.to_string(), "monitor"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("redis-cli (apt-get install -y redis-tools)");
        let mut reader = std::io::BufReader::new(child.stdout.take().unwrap());
        // MONITOR answers OK once it is subscribed: from then on nothing is missed.
        let mut first = String::new();
        reader.read_line(&mut first).unwrap();
        assert_eq!(first.trim(), "OK", "MONITOR did not start");
        let lines = std::thread::spawn(move || {
            let mut out = Vec::new();
            for line in reader.lines() {
                let line = line.unwrap_or_default();
                if line.contains(Self::END) {
                    break;
                }
                out.push(line);
            }
            out
        });
        Monitor { child, lines }
    }

    /// Sends an end marker through `c`, waits until MONITOR has printed it, and returns what
    /// came before it.
    fn finish(mut self, c: &mut redis::Connection) -> Vec<String> {
        let _: String = redis::cmd("ECHO").arg(Self::END).query(c).unwrap();
        let lines = self.lines.join().unwrap();
        let _ = self.child.kill();
        let _ = self.child.wait();
        lines
    }
}
