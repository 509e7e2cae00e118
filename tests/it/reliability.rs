//! A run in a world that breaks: a server out of memory, restarted, killed or stalled, and
//! lockbench itself signalled or killed. Every run must end, say why, keep what it measured
//! and leave neither keys nor processes behind.

use crate::common;

use lockbench::RedisConnector;
use lockbench::ReleaseMethod;
use lockbench::StopReason;
use lockbench::Timeouts;
use lockbench::run_with;
use std::io::BufRead;
use std::process::Stdio;
use std::time::{Duration, Instant};

fn dbsize(conn: &mut redis::Connection) -> u64 {
    redis::cmd("DBSIZE").query(conn).unwrap()
}

/// Process ids of every descendant of `pid` named `name` (from /proc), not counting a process
/// forked by one of them (a redis-server's child for a replica's sync is a `redis-server` too
/// until it renames itself: a cluster's count once read 7 of 6).
fn descendants_named(pid: u32, name: &str) -> Vec<u32> {
    let mut procs = Vec::new(); // (pid, ppid, comm)
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid …`; comm may contain spaces, so split at the last ')'.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = stat[open + 1..close].to_string();
        let ppid = stat[close + 2..]
            .split_whitespace()
            .nth(1)
            .and_then(|x| x.parse::<u32>().ok())
            .unwrap_or(0);
        procs.push((p, ppid, comm));
    }
    let mut family = vec![pid];
    let mut i = 0;
    while i < family.len() {
        let parent = family[i];
        family.extend(
            procs
                .iter()
                .filter(|(_, pp, _)| *pp == parent)
                .map(|(p, ..)| *p),
        );
        i += 1;
    }
    let named = |p: u32| procs.iter().any(|(q, _, comm)| *q == p && comm == name);
    procs
        .iter()
        .filter(|(p, pp, comm)| family[1..].contains(p) && comm == name && !named(*pp))
        .map(|(p, ..)| *p)
        .collect()
}

fn alive(pid: u32) -> bool {
    // A zombie still has /proc/PID; it is dead for our purpose.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.rfind(')').is_some_and(|c| !s[c + 2..].starts_with('Z')))
}

/// A count-limited run against a server that refuses every write (out of memory, noeviction)
/// ends by the give-up rule, exits 1 and names the server's error on the terminal, even with
/// --quiet; the same command against a healthy server makes its 10 sections and exits 0.
#[tokio::test]
async fn count_limited_run_against_a_full_server_gives_up_and_says_why() {
    let full = common::Server::start(lockbench::SpawnedRedis::start_with_args(&[
        "--maxmemory",
        "1",
        "--maxmemory-policy",
        "noeviction",
    ]))
    .await;
    let healthy = common::redis().await;
    for (server, expect_ok) in [(&full, false), (&healthy, true)] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("r");
        let o = common::lockbench(&[
            "run",
            "--redis",
            &server.url(),
            "--sections",
            "10",
            "--give-up-after",
            "300ms",
            "--quiet",
        ])
        .out(&out)
        .output();
        let stderr = String::from_utf8_lossy(&o.stderr);
        let summary = std::fs::read_to_string(out.join("summary.json")).unwrap();
        if expect_ok {
            assert_eq!(o.status.code(), Some(0), "{stderr}");
            assert!(summary.contains("\"stop_reason\": \"limit\""), "{summary}");
            assert!(summary.contains("\"sections\": 10,"), "{summary}");
        } else {
            assert_eq!(o.status.code(), Some(1), "{stderr}");
            assert!(stderr.contains("OOM"), "the cause is shown: {stderr}");
            assert!(stderr.contains("gave up"), "{stderr}");
            assert!(
                summary.contains("\"stop_reason\": \"gave_up\""),
                "{summary}"
            );
        }
    }
}

/// After the server restarts (empty, same port) the workers reconnect: the new server gets
/// lock commands, the outage is counted, the run ends by its length and leaves no key. Both
/// connection modes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_reconnect_after_a_restart() {
    for mode in ["per-worker", "shared"] {
        let mut server = common::redis().await;
        let plan = common::plan(&format!(
            "workers = 4\nkeys = 4\nduration = \"2500ms\"\nttl = \"1s\"\n\
             dist = \"constant(2ms)\"\nconnection = \"{mode}\"\n"
        ));
        let url = server.url();
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().to_path_buf();
        let run = tokio::spawn(async move {
            let c = RedisConnector::new(&url, Timeouts::default(), false).unwrap();
            run_with(
                &c,
                "url",
                &plan,
                &[ReleaseMethod::Token],
                &common::opts(&out),
            )
            .await
        });
        let mut conn = common::sync_conn(&server);
        tokio::task::block_in_place(|| {
            common::wait_until("lock commands", Duration::from_secs(20), || {
                common::set_calls(&mut conn) >= 50
            })
        });
        server.restart().await.unwrap();
        let outcome = run.await.unwrap().expect("the run goes on");
        let s = &outcome.summaries[0];
        let mut fresh = common::sync_conn(&server);
        assert!(
            common::set_calls(&mut fresh) > 0,
            "{mode}: the new server got no command"
        );
        assert!(
            s.errors > 0 && s.outages >= 1,
            "{mode}: outage not counted: {s:?}"
        );
        assert!(s.outage_ms > 0.0);
        assert_eq!(s.stop_reason, StopReason::Limit, "{mode}");
        assert_eq!(dbsize(&mut fresh), 0, "{mode}: keys left behind");
        assert_eq!(common::events(dir.path()).len() as u64, s.counts.sections);
    }
}

/// SIGTERM, and SIGHUP (the terminal closed), end a run exactly like Ctrl-C: exit 130,
/// summary.json and events.csv agree, and the run's keys (60 s TTL, so they would stay) are
/// removed. SIGHUP used to end lockbench at once (exit 129): no summary, keys left.
#[tokio::test]
async fn sigterm_and_sighup_end_a_run_like_ctrl_c() {
    for sig in ["-TERM", "-HUP"] {
        signal_ends_a_run_like_ctrl_c(sig).await;
    }
}

async fn signal_ends_a_run_like_ctrl_c(sig: &str) {
    let server = common::redis().await;
    let mut conn = common::sync_conn(&server);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let mut child = common::lockbench(&[
        "run",
        "--redis",
        &server.url(),
        "--ttl",
        "60s",
        "--keys",
        "20",
        "--dist",
        "constant(20ms)",
        "--duration",
        "60s",
        "--quiet",
    ])
    .out(&out)
    .spawn();
    common::wait_until("lock commands", Duration::from_secs(30), || {
        common::set_calls(&mut conn) >= 50
    });
    common::signal(sig, child.id());
    assert_eq!(
        child.exit_code_within(Duration::from_secs(30)),
        Some(130),
        "{sig}"
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let sections = summary["variants"][0]["sections"].as_u64().unwrap();
    assert!(sections > 0, "{sig}");
    assert_eq!(common::events(&out).len() as u64, sections, "{sig}");
    assert_eq!(
        summary["variants"][0]["stop_reason"], "interrupted",
        "{sig}"
    );
    assert_eq!(dbsize(&mut conn), 0, "{sig}: the run's keys stayed");
}

/// SIGKILL of lockbench does not orphan its private redis-server, nor a spawned cluster's
/// servers: the watchers see their pipes close, kill the servers and remove their directories,
/// the cluster's own directory (its nodes' `nodes-*.conf`) too. That one used to stay until
/// the next spawned server's start-up happened to sweep it.
#[test]
fn sigkill_does_not_orphan_the_spawned_server() {
    common::need_redis_server();
    for (backend, nodes) in [("spawn", 1), ("spawn-cluster", 6)] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("r");
        let mut child =
            common::lockbench(&["run", "--backend", backend, "--duration", "60s", "--quiet"])
                .out(&out)
                .spawn();
        let lb = child.id();
        common::wait_until("the run to start", Duration::from_secs(60), || {
            out.join("manifest.json").exists()
        });
        let servers = descendants_named(lb, "redis-server");
        assert_eq!(
            servers.len(),
            nodes,
            "{backend}: private servers: {servers:?}"
        );
        let temp_dirs = || {
            std::fs::read_dir(std::env::temp_dir())
                .unwrap()
                .flatten()
                .filter(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .starts_with(&format!("lockbench-redis-{lb}-"))
                })
                .count()
        };
        // One a server, and the cluster's own.
        let cluster_dir = usize::from(nodes > 1);
        assert_eq!(temp_dirs(), nodes + cluster_dir, "{backend}");
        common::signal("-KILL", lb);
        let _ = child.wait();
        common::wait_until("the servers to stop", Duration::from_secs(10), || {
            servers.iter().all(|&p| !alive(p))
        });
        common::wait_until(
            &format!("{backend}: its directories to go"),
            Duration::from_secs(10),
            || temp_dirs() == 0,
        );
    }
}

/// Process ids of every descendant of `pid` whose command line contains `needle`.
fn descendants_running(pid: u32, needle: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for name in ["node", "python", "python3", "python3.11"] {
        for p in descendants_named(pid, name) {
            let cmdline = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmdline).contains(needle) {
                found.push(p);
            }
        }
    }
    found
}

/// SIGKILL of lockbench during a run of a lock library leaves no driver process behind, Node
/// or Python: each sees its stdin close (or its parent change) and exits, whatever it was doing.
/// Before, a Node driver whose Redis went with lockbench wrote the client's error to its dead
/// stderr, whose EPIPE came back as an uncaught exception that wrote to stderr again: an orphan
/// at full CPU for ever.
#[test]
fn sigkill_leaves_no_driver_behind() {
    common::need_redis_server();
    // The runs' temporary directory, where a SIGKILL leaves their watch sockets' directories.
    let tmp = tempfile::tempdir().unwrap();
    let mut killed = Vec::new();
    for (lib, script) in [("redis-semaphore", "driver.js"), ("redis-py", "driver.py")] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("r");
        let mut child = common::lockbench(&["run", "--backend", "spawn", "--release", lib])
            // A process a holder: two processes that could each be orphaned.
            .args(["--workers", "2", "--holders-per-process", "1"])
            .args(["--duration", "60s", "--quiet"])
            .env("TMPDIR", tmp.path())
            // Watched on the wire: a SIGKILL leaves the watches' socket directories behind.
            .env("LOCKBENCH_WATCH", "wire")
            .out(&out)
            .stderr(Stdio::null())
            .spawn();
        let lb = child.id();
        // Sections under way: the drivers are connected to the private server.
        let mut conn = None;
        common::wait_until("the run to start", Duration::from_secs(60), || {
            let Ok(text) = std::fs::read_to_string(out.join("manifest.json")) else {
                return false;
            };
            let Ok(m) = serde_json::from_str::<serde_json::Value>(&text) else {
                return false;
            };
            let detail = m["servers"][0]["backend_detail"].as_str().unwrap_or("");
            let Some(addr) = detail.strip_prefix("redis at ") else {
                return false;
            };
            let c = conn.get_or_insert_with(|| {
                redis::Client::open(format!("redis://{addr}"))
                    .unwrap()
                    .get_connection()
                    .unwrap()
            });
            common::set_calls(c) >= 10
        });
        let drivers = descendants_running(lb, script);
        assert_eq!(drivers.len(), 2, "{lib}: one driver a worker: {drivers:?}");
        common::signal("-KILL", lb);
        let _ = child.wait();
        common::wait_until(
            &format!("{lib}'s drivers to exit after lockbench's SIGKILL"),
            Duration::from_secs(20),
            || drivers.iter().all(|&p| !alive(p)),
        );
        killed.push(format!("lockbench-watch-{lb}-"));
    }
    // Nothing ran their Drop: the sockets' directory of the last one killed is left (the
    // first one's was swept by the second run), and the next library run sweeps it (its
    // lockbench is gone).
    let watch_dirs = || -> Vec<String> {
        std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| killed.iter().any(|k| n.starts_with(k)))
            .collect()
    };
    assert_eq!(watch_dirs().len(), 1, "{:?}", watch_dirs());
    let out = tmp.path().join("next");
    let o = common::lockbench(&["run", "--backend", "spawn", "--release", "redis-py"])
        .args(["--workers", "1", "--sections", "2"])
        .env("TMPDIR", tmp.path())
        .out(&out)
        .output();
    assert_eq!(o.status.code(), Some(0), "{}", common::text_of(&o));
    assert_eq!(watch_dirs(), Vec::<String>::new(), "not swept");
}

/// Against a stalled server (SIGSTOP), the first Ctrl-C waits for replies; the second
/// abandons them and the key cleanup at once, says which keys may remain, and still writes
/// every file. Before, this took the 10 s reply timeout plus 10 s of cleanup.
#[tokio::test]
async fn second_ctrl_c_abandons_a_stalled_server() {
    let server = common::redis().await;
    let mut conn = common::sync_conn(&server);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let mut child = common::lockbench(&[
        "run",
        "--redis",
        &server.url(),
        "--ttl",
        "60s",
        "--dist",
        "constant(5ms)",
        "--duration",
        "60s",
    ])
    .out(&out)
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn();
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    common::wait_until("lock commands", Duration::from_secs(30), || {
        common::set_calls(&mut conn) >= 50
    });
    common::signal("-STOP", server.pid());
    common::signal("-INT", child.id());
    let mut seen = Vec::new();
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the first Ctrl-C is acknowledged");
        let ack = line.contains("Ctrl-C again");
        seen.push(line);
        if ack {
            break;
        }
    }
    common::signal("-INT", child.id());
    // What the second Ctrl-C abandons (replies from the stalled server, the key cleanup: 10 s
    // and 10 s before) ends at once: the warning naming the keys that may remain comes within
    // 8 s. The files and charts are written after it, away from the server; the charts take
    // seconds in a debug build on a loaded machine and are not what is measured here, so the
    // exit itself has a generous limit.
    let second = Instant::now();
    let warned = loop {
        let left = Duration::from_secs(8).saturating_sub(second.elapsed());
        match rx.recv_timeout(left) {
            Ok(line) => {
                let warning = line.contains("may remain");
                seen.push(line);
                if warning {
                    break true;
                }
            }
            Err(_) => break false,
        }
    };
    assert!(
        warned,
        "no `may remain` warning within 8 s of the second Ctrl-C; stderr so far: {seen:?}"
    );
    let code = child.exit_code_within(Duration::from_secs(120));
    common::signal("-CONT", server.pid());
    assert_eq!(code, Some(130), "stderr so far: {seen:?}");
    seen.extend(rx.try_iter());
    let all = seen.join("\n");
    assert!(all.contains("may remain"), "{all}");
    let leftover = std::fs::read_to_string(out.join("leftover-keys.txt")).unwrap();
    assert!(
        leftover.lines().all(|k| k.starts_with("lockbench:")),
        "{leftover}"
    );
    assert!(out.join("summary.json").exists());
    let summary = std::fs::read_to_string(out.join("summary.json")).unwrap();
    let s: serde_json::Value = serde_json::from_str(&summary).unwrap();
    assert_eq!(
        common::events(&out).len() as u64,
        s["variants"][0]["sections"].as_u64().unwrap()
    );
}

/// When the server dies during the first variant of a compare, the second cannot start: the
/// first variant's results are still written (summary.json agrees with events.csv), and the
/// failure names the real cause (nothing listens), not a client limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_keeps_a_finished_variant_when_the_server_dies() {
    let server = common::redis().await;
    let plan = common::plan(
        "workers = 4\nkeys = 4\nduration = \"1500ms\"\nttl = \"1s\"\ndist = \"constant(2ms)\"\n",
    );
    let url = server.url();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_path_buf();
    let run = tokio::spawn(async move {
        let c = RedisConnector::new(&url, Timeouts::default(), false).unwrap();
        let methods = [ReleaseMethod::Del, ReleaseMethod::Token];
        run_with(&c, "url", &plan, &methods, &common::opts(&out)).await
    });
    let mut conn = common::sync_conn(&server);
    tokio::task::block_in_place(|| {
        common::wait_until("lock commands", Duration::from_secs(20), || {
            common::set_calls(&mut conn) >= 50
        })
    });
    server.stop().await;
    let outcome = run.await.unwrap().expect("what was measured is returned");
    assert_eq!(outcome.summaries.len(), 1);
    assert_eq!(outcome.summaries[0].meta.variant, "del");
    let failure = outcome
        .manifest
        .failure
        .clone()
        .expect("the failure is recorded");
    assert!(
        failure.contains("token") && failure.contains("nothing listens"),
        "{failure}"
    );
    assert!(!failure.contains("maxclients"), "{failure}");
    let r = lockbench::render_and_verify(dir.path()).expect("report");
    assert_eq!(r.mismatches.as_deref().unwrap_or_default(), &[]);
    let summary = std::fs::read_to_string(dir.path().join("summary.json")).unwrap();
    assert!(summary.contains("\"variant\": \"del\""));
    let verdict = lockbench::verdict(&outcome.summaries, false, Some(&failure));
    assert_eq!(verdict.code, lockbench::exit::FAILED);
}

/// Setting up a million keys is not run time: a 100 ms run still makes sections (before,
/// the allocation ate the whole run and it reported 0 sections with exit 0).
#[test]
fn set_up_is_not_counted_as_run_time() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let o = common::lockbench(&[
        "run",
        "--backend",
        "memory",
        "--keys",
        "1000000",
        "--duration",
        "100ms",
        "--quiet",
    ])
    .out(&out)
    .output();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert!(s["variants"][0]["sections"].as_u64().unwrap() > 0, "{s}");
}

/// Ctrl-C or SIGTERM while the servers start (a spawned cluster being created, Redlock's
/// instances being started one by one) ends lockbench as an interrupted run at once: exit 130
/// saying nothing ran, no run directory, and every server started so far stopped with its
/// directory (issue 32). Before, the signal met its default action (SIGTERM: 143, SIGINT of a
/// background job: ignored, the run went on to exit 0).
#[test]
fn a_signal_during_start_up_ends_the_run_as_interrupted() {
    common::need_redis_server();
    let cases: [(&str, &[&str]); 2] = [
        ("-INT", &["--backend", "spawn-cluster"]),
        ("-TERM", &["--lock", "redlock", "--instances", "31"]),
    ];
    for (sig, backend) in cases {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("r");
        let child = common::Lockbench::new()
            .arg("run")
            .args(backend)
            .args(["--sections", "100000", "--quiet"])
            .out(&out)
            .stderr(Stdio::piped())
            .spawn();
        let lb = child.id();
        // Mid start-up: some servers run, the run has not begun.
        common::wait_until("two servers started", Duration::from_secs(30), || {
            descendants_named(lb, "redis-server").len() >= 2
        });
        assert!(!out.exists(), "{sig}: the run began before the signal");
        common::signal(sig, lb);
        let o = child.wait_with_output();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(130), "{sig} {backend:?}: {err}");
        assert!(err.contains("start-up given up"), "{sig}: {err}");
        assert!(!out.exists(), "{sig}: files written though nothing ran");
        common::wait_until("the servers to stop", Duration::from_secs(10), || {
            std::fs::read_dir(std::env::temp_dir())
                .unwrap()
                .flatten()
                .all(|e| {
                    !e.file_name()
                        .to_string_lossy()
                        .starts_with(&format!("lockbench-redis-{lb}-"))
                })
        });
    }
}
