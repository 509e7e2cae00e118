//! Many agents, one run (issue 13 §3): agents meet at a barrier on the target, and
//! `lockbench merge` combines their directories into one run's.

use crate::common;

use common::*;
use common::{Lockbench, Running};
use lockbench::Counts;
use lockbench::SummaryFile;
use lockbench::{Quantiles, Summary};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// `lockbench` in `cwd`, without the agent variables of a Kubernetes job.
fn lockbench(cwd: &Path) -> Lockbench {
    Lockbench::new()
        .current_dir(cwd)
        .env_remove("JOB_COMPLETION_INDEX")
        .env_remove("LOCKBENCH_AGENTS")
}

/// Starts `lockbench run` as agent `agent` ("I/N") of `run_id` with `workload` flags.
fn agent(cwd: &Path, url: &str, run_id: &str, agent: &str, workload: &[&str]) -> Running {
    lockbench(cwd)
        .args([
            "run", "--redis", url, "--run-id", run_id, "--agent", agent, "--quiet",
        ])
        .args(workload)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
}

/// Waits for a process, asserting its exit code; returns its stderr.
fn finished(child: Running, code: i32, what: &str) -> String {
    let o = child.wait_with_output();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(code), "{what}: {err}");
    err
}

fn summary(dir: &Path) -> SummaryFile {
    serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap()
}

/// Keys of `run_id` still on the server.
fn keys_left(conn: &mut redis::Connection, run_id: &str) -> Vec<String> {
    redis::cmd("KEYS")
        .arg(format!("lockbench:{run_id}*"))
        .query(conn)
        .unwrap()
}

/// Every recorded distribution of a summary.
fn quantiles(s: &Summary) -> [(&'static str, Quantiles); 9] {
    [
        ("duration_ms", s.duration_ms),
        ("intended_ms", s.intended_ms),
        ("timer_error_ms", s.timer_error_ms),
        ("excess_ms", s.excess_ms),
        ("acquire_latency_ms", s.acquire_latency_ms),
        ("set_latency_ms", s.set_latency_ms),
        ("release_latency_ms", s.release_latency_ms),
        ("crash_blocked_ms", s.crash_blocked_ms),
        ("request_latency_ms", s.request_latency_ms),
    ]
}

/// One key, sections far longer than the TTL, no think time, exactly one section per worker:
/// the first holder's lock expires after 20 ms and the next worker (retrying without pause)
/// takes it, then the next, so holders pile up on the key in a fixed order — 2N sections, the
/// second acquisition 20 ms after the first, each section ~300 ms. The overlap is then fixed by
/// the workload (from the second acquisition to the third-from-last release), not by a race,
/// and two executions can be compared.
const PILE_UP: &[&str] = &[
    "--keys",
    "1",
    "--ttl",
    "20ms",
    "--dist",
    "constant(300ms)",
    "--think",
    "constant(0ms)",
    "--sections",
    "4",
];

/// Two agents with 2 workers each against one server, merged, versus one process with 4
/// workers on the same profile and seed:
/// - the merged counts are the agents' counts added, every one, and every histogram's total
///   is the agents' totals added (also in the merged `.hlog`), with the max the larger max;
/// - the merged overlap agrees with the single process's: the same incidents and peak, and
///   overlap times within the stated clock error plus what makes two executions differ at
///   all — each run's worst timer error (a section ends late), a SET round trip for each of the
///   two acquisitions that bound the overlap (a retrying worker sees the expiry up to one
///   round trip late) and Redis's millisecond expiry clock for each. The clock error alone
///   (µs) could not cover two different executions; these terms are measured in the runs'
///   own summaries, not guessed;
/// - the negative control: adding the agents' own overlaps, as one would add counters, misses
///   the single process's figure by far more than that tolerance — the agents' holders
///   overlap each other, which neither agent saw;
/// - `lockbench report` recounts the merged directory and agrees; the summaries validate
///   against the schema; the agents' rows carry global worker ids; no key is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_agents_merge_like_one_process_of_twice_the_workers() {
    let server = redis().await;
    let url = server.url();
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    let mut w2 = vec!["--workers", "2"];
    w2.extend_from_slice(PILE_UP);
    let a0 = agent(cwd, &url, "pile", "0/2", &w2);
    let a1 = agent(cwd, &url, "pile", "1/2", &w2);
    finished(a0, 0, "agent 0");
    finished(a1, 0, "agent 1");
    let mut conn = sync_conn(&server);
    assert_eq!(keys_left(&mut conn, "pile"), Vec::<String>::new());

    let o = lockbench(cwd)
        .args([
            "run",
            "--redis",
            &url,
            "--workers",
            "4",
            "--quiet",
            "--out",
            "single",
        ])
        .args(PILE_UP)
        .output();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = lockbench(cwd)
        .args(["merge", "results/pile/agent-0", "results/pile/agent-1"])
        .output();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(stdout.contains("overlap across agents, token:"), "{stdout}");

    let dir = |d: &str| cwd.join(d);
    let parts = [
        summary(&dir("results/pile/agent-0")),
        summary(&dir("results/pile/agent-1")),
    ];
    let merged = summary(&dir("results/pile/merged"));
    let single = summary(&dir("single"));
    let (m, s) = (&merged.variants[0], &single.variants[0]);
    let (p0, p1) = (&parts[0].variants[0], &parts[1].variants[0]);

    // Counts: the agents' added, every one.
    for (name, _, _) in Counts::FIELDS {
        let sum = p0.counts.get(name).unwrap() + p1.counts.get(name).unwrap();
        assert_eq!(m.counts.get(name), Some(sum), "{name}");
    }
    assert_eq!(m.counts.sections, 4);
    assert_eq!(s.counts.sections, 4);
    assert_eq!(m.meta.workers, 4);
    // Histogram totals: added exactly, and the largest value is the larger of the two.
    for ((name, q), ((_, q0), (_, q1))) in quantiles(m)
        .into_iter()
        .zip(quantiles(p0).into_iter().zip(quantiles(p1)))
    {
        assert_eq!(q.count, q0.count + q1.count, "{name}");
        assert_eq!(q.max, q0.max.max(q1.max), "{name}");
    }
    let logged = lockbench::hlog::read_by_tag(&dir("results/pile/merged/durations.hlog")).unwrap();
    assert_eq!(logged[0].1.len(), 4);

    // Overlap: the same structure, and times within the stated bound.
    let record = merged.merged.as_ref().unwrap();
    assert_eq!(record.agents.len(), 2);
    assert!(
        record.clock_error_us > 0 && record.clock_error_us < 20_000,
        "{record:?}"
    );
    // One stretch of two or more holders, from the second acquisition to the third release:
    // its length may be off by the clock error (its two ends may come from two agents).
    assert_eq!(record.overlap[0].stretches, 1);
    let stated = record.overlap[0].overlap_error_ms;
    assert_eq!(stated, record.clock_error_us as f64 / 1000.0);
    assert_eq!((m.overlap_incidents, m.peak_holders), (3, 4), "merged");
    assert_eq!((s.overlap_incidents, s.peak_holders), (3, 4), "single");
    let noise = |x: &Summary| x.timer_error_ms.max + 2.0 * x.set_latency_ms.max + 2.0;
    let tolerance = stated + noise(m).max(noise(s));
    let diff = (m.overlap_ms - s.overlap_ms).abs();
    assert!(
        diff <= tolerance,
        "merged overlap {} ms vs single {} ms: {diff} > {tolerance}",
        m.overlap_ms,
        s.overlap_ms
    );
    // Structure alone: from the second acquisition (~TTL after the first) to the third release
    // (~300 ms after the third acquisition, ~2 TTL after the first): ~320 ms, and later
    // timers on a busy machine only lengthen it (365 ms seen beside a compile).
    assert!((300.0..420.0).contains(&m.overlap_ms), "{}", m.overlap_ms);
    // The negative control: the agents' own overlaps, added, fail the same check.
    let added = p0.overlap_ms + p1.overlap_ms;
    assert!(
        (added - s.overlap_ms).abs() > tolerance,
        "added {added} vs single {}, tolerance {tolerance}",
        s.overlap_ms
    );
    eprintln!(
        "overlap: merged {} ms, single {} ms, agents added {added} ms; tolerance {tolerance} ms \
         (clock {stated} ms)",
        m.overlap_ms, s.overlap_ms
    );

    // Global worker ids: agent i ran workers 2i and 2i+1.
    for (i, d) in ["results/pile/agent-0", "results/pile/agent-1"]
        .iter()
        .enumerate()
    {
        let mut ws: Vec<usize> = events(&dir(d)).iter().map(|r| r.worker).collect();
        ws.sort();
        assert_eq!(ws, vec![2 * i, 2 * i + 1], "{d}");
    }
    report_agrees(&dir("results/pile/merged"));
    report_agrees(&dir("results/pile/agent-0"));
    for d in ["results/pile/merged", "results/pile/agent-1"] {
        common::follows_schema(&dir(d));
    }
}

/// Merging an agent twice, agents of different runs, agents of two executions that reused one
/// run id, an incomplete run or a directory that is not an agent's is refused with exit 2 and a message naming the directories, and writes
/// nothing; the whole run merges. With the agents' environment of a Kubernetes Indexed Job
/// (`JOB_COMPLETION_INDEX`, `LOCKBENCH_AGENTS`) instead of `--agent`, an agent is the same;
/// agent i's workers draw the intended durations of the same workers in one process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merging_twice_or_across_runs_is_refused() {
    let server = redis().await;
    let url = server.url();
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    let workload = [
        "--workers",
        "2",
        "--keys",
        "2",
        "--ttl",
        "100ms",
        "--dist",
        "uniform(1ms,3ms)",
        "--sections",
        "12",
        "--seed",
        "7",
    ];
    let mut children = Vec::new();
    for run in ["ra", "rb"] {
        children.push(agent(cwd, &url, run, "0/2", &workload));
        // The second agent from the environment, as a Kubernetes Indexed Job starts it.
        children.push(
            lockbench(cwd)
                .args(["run", "--redis", &url, "--run-id", run, "--quiet"])
                .args(workload)
                .env("JOB_COMPLETION_INDEX", "1")
                .env("LOCKBENCH_AGENTS", "2")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn(),
        );
    }
    for (i, c) in children.into_iter().enumerate() {
        finished(c, 0, &format!("agent process {i}"));
    }
    // Run `ra` again elsewhere, reusing its id (issue 32): a second execution, its own start.
    let again = cwd.join("again");
    std::fs::create_dir(&again).unwrap();
    let pair = [
        agent(&again, &url, "ra", "0/2", &workload),
        agent(&again, &url, "ra", "1/2", &workload),
    ];
    for (i, c) in pair.into_iter().enumerate() {
        finished(c, 0, &format!("agent {i} of the second execution of ra"));
    }
    let o = lockbench(cwd)
        .args([
            "run",
            "--redis",
            &url,
            "--sections",
            "5",
            "--quiet",
            "--out",
            "plain",
        ])
        .output();
    assert!(o.status.success());

    let refused = |dirs: &[&str], says: &[&str]| {
        let o = lockbench(cwd)
            .arg("merge")
            .args(dirs)
            .args(["-o", "merged"])
            .output();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{dirs:?}: {err}");
        for s in says {
            assert!(err.contains(s), "{dirs:?}: `{s}` not in: {err}");
        }
        assert!(!cwd.join("merged").exists(), "{dirs:?} wrote a directory");
    };
    refused(
        &["results/ra/agent-0", "results/ra/agent-0"],
        &["results/ra/agent-0 is given twice", "run ra"],
    );
    refused(
        &["results/ra/agent-0", "results/rb/agent-1"],
        &["results/ra/agent-0 and results/rb/agent-1 are agents of different runs (ra vs rb)"],
    );
    refused(
        &["results/ra/agent-0"],
        &["agent 1 is missing", "results/ra/agent-0"],
    );
    refused(
        &["results/ra/agent-0", "again/results/ra/agent-1"],
        &[
            "results/ra/agent-0 and again/results/ra/agent-1 are agents of two executions of run ra",
            "start_server_us",
        ],
    );
    refused(
        &["results/ra/agent-0", "plain"],
        &["plain is not an agent's directory"],
    );
    // An agent's events.csv cut in the middle of a row (issue 32: "cannot write
    // merged/events.csv", exit 1, a partial file left): the input named with its line.
    let cut = cwd.join("cut/agent-1");
    std::fs::create_dir_all(&cut).unwrap();
    for f in std::fs::read_dir(cwd.join("results/ra/agent-1"))
        .unwrap()
        .flatten()
    {
        std::fs::copy(f.path(), cut.join(f.file_name())).unwrap();
    }
    let rows = std::fs::read_to_string(cut.join("events.csv")).unwrap();
    let keep = rows.trim_end().rfind(',').unwrap();
    std::fs::write(cut.join("events.csv"), &rows[..keep]).unwrap();
    let last_line = rows[..keep].lines().count().to_string();
    refused(
        &["results/ra/agent-0", "cut/agent-1"],
        &[
            "cut/agent-1/events.csv line ",
            &last_line,
            "truncated",
            "nothing was merged",
        ],
    );
    refused(
        &["results/ra/agent-0", "nowhere"],
        &["nowhere is not a finished lockbench run"],
    );

    let o = lockbench(cwd)
        .args([
            "merge",
            "results/ra/agent-1",
            "results/ra/agent-0",
            "--quiet",
        ])
        .output();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let merged = summary(&cwd.join("results/ra/merged"));
    assert_eq!(merged.variants[0].counts.sections, 12);
    assert_eq!(merged.merged.unwrap().agents[1].dir, "results/ra/agent-1");
    // Paired with one process: worker w's n-th section has its intended duration.
    let dist = lockbench::Dist::parse("uniform(1ms,3ms)")
        .unwrap()
        .sampler();
    for r in events(&cwd.join("results/ra/merged")) {
        let want = lockbench::intended_sequence(&dist, 7, r.worker, r.seq as usize + 1);
        assert_eq!(
            r.intended_us, want[r.seq as usize],
            "worker {} seq {}",
            r.worker, r.seq
        );
    }
    let mut conn = sync_conn(&server);
    assert_eq!(keys_left(&mut conn, "r"), Vec::<String>::new());
}

/// The barrier: an agent whose peer never comes gives up after `--barrier-timeout` with a
/// message saying how many arrived and how to start the others (exit 1), leaving no key and
/// no directory; a second agent with a taken index, another agent count or another workload
/// is refused (exit 2) while the first waits; the right peer completes the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn barrier_refuses_strangers_and_times_out_clearly() {
    let server = redis().await;
    let url = server.url();
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    let work = [
        "--workers",
        "1",
        "--sections",
        "4",
        "--dist",
        "constant(1ms)",
    ];
    let mut conn = sync_conn(&server);

    let mut lonely = work.to_vec();
    lonely.extend(["--barrier-timeout", "300ms"]);
    let err = finished(
        agent(cwd, &url, "lonely", "0/2", &lonely),
        1,
        "lonely agent",
    );
    assert!(
        err.contains("1 of 2 agents arrived within 300ms")
            && err.contains("--agent I/2 --run-id lonely"),
        "{err}"
    );
    assert_eq!(keys_left(&mut conn, "lonely"), Vec::<String>::new());
    assert!(!cwd.join("results").exists(), "an empty directory was left");

    let first = agent(cwd, &url, "pair", "0/2", &work);
    // Observe the server, not the clock: the first agent has joined when its key exists.
    wait_until("agent 0 joined", Duration::from_secs(30), || {
        keys_left(&mut conn, "pair").contains(&"lockbench:pair:barrier:arrived".to_string())
    });
    let err = finished(agent(cwd, &url, "pair", "0/2", &work), 2, "same index");
    assert!(
        err.contains("agent 0 of run pair has already joined"),
        "{err}"
    );
    let err = finished(agent(cwd, &url, "pair", "1/3", &work), 2, "other count");
    assert!(err.contains("run pair has 2 agents"), "{err}");
    let mut other = work.to_vec();
    other[1] = "3";
    let err = finished(agent(cwd, &url, "pair", "1/2", &other), 2, "other workload");
    assert!(err.contains("workers (3 vs 1)"), "{err}");
    let second = agent(cwd, &url, "pair", "1/2", &work);
    finished(first, 0, "agent 0");
    finished(second, 0, "agent 1");
    assert_eq!(keys_left(&mut conn, "pair"), Vec::<String>::new());
    let a0 = summary(&cwd.join("results/pair/agent-0"));
    assert_eq!(a0.variants[0].counts.sections, 2, "half of --sections 4");
}

/// What a multi-agent run cannot do is refused before anything runs (exit 2), saying why:
/// a spawned server (each process would get its own), no run id for several agents.
#[test]
fn agents_need_a_shared_server_and_a_run_id() {
    let tmp = tempfile::tempdir().unwrap();
    let o = lockbench(tmp.path())
        .args([
            "run",
            "--backend",
            "spawn",
            "--agent",
            "0/2",
            "--run-id",
            "x",
        ])
        .output();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("give --redis URL"), "{err}");
    let o = lockbench(tmp.path())
        .args(["run", "--redis", "redis://127.0.0.1:1", "--agent", "0/2"])
        .output();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--run-id"), "{err}");
    let dirs: Vec<PathBuf> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(dirs.is_empty(), "{dirs:?}");
}

/// The Kubernetes example stays true: every flag it gives lockbench is one `run --help` or
/// `merge --help` lists, and its agent count is its number of completions and of pods at once.
#[test]
fn kubernetes_example_uses_real_flags() {
    let yaml = include_str!("../../deploy/k8s-agents.yaml");
    let tmp = tempfile::tempdir().unwrap();
    let help = |cmd: &str| {
        let o = lockbench(tmp.path()).args([cmd, "--help"]).output();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let (run, merge) = (help("run"), help("merge"));
    let code = yaml.lines().filter(|l| !l.trim_start().starts_with('#'));
    let flags: Vec<&str> = code
        .clone()
        .filter_map(|l| l.trim_start().strip_prefix("- --"))
        .map(|f| f.split(['=', ' ']).next().unwrap())
        .collect();
    assert!(flags.len() >= 4, "{flags:?}");
    for f in flags {
        let flag = format!("--{f}");
        assert!(
            run.contains(&flag) || merge.contains(&flag),
            "{flag} is not a flag"
        );
    }
    let number = |key: &str| -> Vec<String> {
        code.clone()
            .filter_map(|l| l.split_once(key).map(|(_, v)| v.trim().to_string()))
            .map(|v| v.trim_matches(|c: char| !c.is_ascii_digit()).to_string())
            .map(|v| {
                v.split(|c: char| !c.is_ascii_digit())
                    .next()
                    .unwrap()
                    .to_string()
            })
            .collect()
    };
    let n = number("completions:");
    assert_eq!(n.len(), 1);
    assert_eq!(number("parallelism:"), n);
    assert_eq!(number("name: LOCKBENCH_AGENTS, value:"), n);
}
