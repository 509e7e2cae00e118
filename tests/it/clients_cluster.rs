//! Lock libraries on a Redis Cluster (issue 33, item 6): the libraries with a cluster client
//! (redis-py's `RedisCluster`, redis-semaphore on ioredis's `Cluster`, rslock's
//! `from_cluster_client`, in process) run on it with their
//! keys in the slot of lockbench's hash tag, leave nothing behind and go through a failover;
//! the others are refused at `hello`, naming the library, before anything runs.

use crate::cluster::keys_on;
use crate::common;

use lockbench::SpawnedCluster;
use std::path::Path;

/// The summary of variant `name` in run `dir`.
fn variant(dir: &Path, name: &str) -> serde_json::Value {
    common::summaries(dir)
        .into_iter()
        .find(|v| v["variant"] == name)
        .unwrap_or_else(|| panic!("no variant {name} in {}", dir.display()))
}

/// Rows of `events.csv` of variant `name`.
fn rows_of(dir: &Path, name: &str) -> u64 {
    common::events(dir)
        .iter()
        .filter(|r| &*r.variant == name)
        .count() as u64
}

/// `leftover_keys` of the run's manifest (absent: none).
fn leftover(dir: &Path) -> serde_json::Value {
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    m["leftover_keys"].clone()
}

/// redis-py, redis-semaphore and rslock on a cluster reached through one seed node, three holders
/// contending for each of three keys with sections far below the TTL, the protected resource
/// beside the locks: no overlap, no lost update, no error (the resource's scripts name the
/// library's key and the resource's in one slot, or they would fail with CROSSSLOT), a row per
/// section, and no key left on any node. Negative control: the same check on sections longer
/// than the TTL finds the overlap. A library without cluster support is refused with exit 2,
/// naming it, before anything runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn libraries_with_a_cluster_client_run_on_a_cluster_and_the_others_are_refused() {
    let cluster = SpawnedCluster::start(None, 3, 0)
        .await
        .expect("spawn a cluster");
    let urls = cluster.urls();
    let tmp = tempfile::tempdir().unwrap();
    let base = [
        "--redis",
        &urls[0],
        "--workers",
        "3",
        "--keys",
        "3",
        "--busy",
        "retry",
        "--resource",
        "--seed",
        "5",
    ];
    let calm = tmp.path().join("calm");
    let o = common::lockbench(&["compare", "--release", "redis-py,redis-semaphore,rslock"])
        .args(base)
        .args([
            "--ttl",
            "1s",
            "--dist",
            "constant(5ms)",
            "--duration",
            "1500ms",
        ])
        .out(&calm)
        .output();
    assert_eq!(o.status.code(), Some(0), "{}", common::text_of(&o));
    for lib in ["redis-py", "redis-semaphore", "rslock"] {
        let v = variant(&calm, lib);
        assert!(v["backend"].as_str().unwrap().contains("cluster"), "{v}");
        // A cluster client reaches the nodes past a watch: the timeline tells wrongful deletes.
        let source = v["wrongful_deletes_source"].as_str().unwrap();
        assert!(
            source.starts_with("timeline (a Redis Cluster"),
            "{lib}: {source}"
        );
        assert!(v["sections"].as_u64().unwrap() > 5, "{lib}: {v}");
        assert_eq!(v["overlap_ms"], 0.0, "{lib}: {v}");
        assert_eq!(v["released"], v["sections"], "{lib}: {v}");
        assert_eq!(v["writes_accepted"], v["sections"], "{lib}: {v}");
        assert_eq!(v["lost_updates"], 0, "{lib}: {v}");
        assert_eq!(v["errors"], 0, "{lib}: {v}");
        assert_eq!(rows_of(&calm, lib), v["sections"].as_u64().unwrap());
    }
    assert_eq!(leftover(&calm), serde_json::Value::Null);
    assert_eq!(keys_on(&urls), 0, "the run left keys on the cluster");
    common::report_agrees(&calm);

    let long = tmp.path().join("long");
    let o = common::lockbench(&["run", "--release", "redis-py"])
        .args(base)
        .args([
            "--ttl",
            "30ms",
            "--dist",
            "uniform(10ms,80ms)",
            "--duration",
            "1s",
        ])
        .out(&long)
        .output();
    assert_eq!(o.status.code(), Some(0), "{}", common::text_of(&o));
    let v = variant(&long, "redis-py");
    assert!(v["overlap_ms"].as_f64().unwrap() > 0.0, "{v}");
    assert_eq!(keys_on(&urls), 0, "the run left keys on the cluster");

    for (args, lib) in [
        (
            &["run", "--release", "python-redis-lock", "--sections", "3"][..],
            "python-redis-lock",
        ),
        (
            &[
                "compare",
                "--release",
                "token,redis-lock",
                "--sections",
                "3",
            ][..],
            "redis-lock",
        ),
    ] {
        let out = tmp.path().join(lib);
        let o = common::lockbench(args)
            .args(["--redis", &urls[0]])
            .out(&out)
            .output();
        let err = common::text_of(&o);
        assert_eq!(o.status.code(), Some(2), "{lib}: {err}");
        assert!(
            err.contains(&format!("{lib} does not connect to a Redis Cluster")),
            "{lib}: {err}"
        );
        assert!(!out.join("summary.json").exists(), "{lib}: nothing ran");
    }
    cluster.stop().await;
}

/// redis-py through a failover of its key's master (shard 2 holds the key's slot, `{0}`), the
/// replica lagging for 800 ms: the library meets the dead master and the moved slots and
/// goes on (sections are acquired after the failover), the fault's count of lost locks is of
/// the library's own keys, the summary agrees with events.csv and no key is left.
/// rslock too, in process, whose lock values are 20 random bytes, not text (the failover's
/// read of the locks took them as text and failed).
#[test]
fn redis_py_goes_through_a_failover_of_its_key_s_master() {
    for lib in ["redis-py", "rslock"] {
        failover_of_the_key_s_master(lib);
    }
}

fn failover_of_the_key_s_master(lib: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    let o = common::lockbench(&["run", "--backend", "spawn-cluster", "--release", lib])
        .args([
            "--workers",
            "8",
            "--keys",
            "1",
            "--busy",
            "retry",
            "--resource",
        ])
        .args([
            "--ttl",
            "1s",
            "--dist",
            "uniform(300ms,600ms)",
            "--duration",
            "4s",
        ])
        .args(["--fault", "failover@1s+800ms,shard=2"])
        .out(&out)
        .output();
    assert_eq!(o.status.code(), Some(0), "{}", common::text_of(&o));
    let v = variant(&out, lib);
    let w = &v["faults"][0];
    assert_eq!(w["kind"], "failover", "{v}");
    assert_eq!(w["error"], "", "{lib}: {w}");
    let f = &w["failover"];
    let (held, lost) = (
        f["locks_held"].as_u64().unwrap(),
        f["locks_lost"].as_u64().unwrap(),
    );
    assert!(lost <= held && held <= 1, "{f}");
    assert_ne!(f["old_master"], f["new_master"]);
    let shards = v["shards"].as_array().unwrap();
    assert_eq!(shards[2]["keys_used"], 1, "the key's slot: {shards:?}");
    assert_eq!(shards[2]["locks_lost"].as_u64(), Some(lost), "{shards:?}");
    let end_us = (w["end_ms"].as_f64().unwrap() * 1000.0) as u64;
    let after = common::events(&out)
        .iter()
        .filter(|r| r.acquired_us > end_us)
        .count();
    assert!(after > 0, "no section after the failover: {v}");
    assert_eq!(rows_of(&out, lib), v["sections"].as_u64().unwrap());
    common::report_agrees(&out);
    assert_eq!(leftover(&out), serde_json::Value::Null);
}
