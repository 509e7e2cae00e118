//! `compare` across servers: every variant on every server, side by side in one run, with what
//! each server can do probed and recorded; a method a server lacks is a "not run" cell while the
//! others run.

use crate::common;

/// del, token and delex on Redis 7.0, Valkey 8.1 and Redis 8.2: six cells run (del and token
/// on each), the three delex cells are "not supported by <server>" (none of them knows
/// DELEX), the probed capabilities tell Valkey's SET … IFEQ apart from Redis's, and the
/// terminal, summary.json, manifest and report.html name each server.
#[test]
fn compare_runs_every_variant_on_every_server() {
    let redis7 = common::redis_server_path();
    let valkey = common::extra_server("valkey-8.1");
    let redis8 = common::extra_server("redis-8.2");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("r");
    let mut cmd = common::lockbench(&["compare", "--release", "del,token,delex"])
        .args([
            "--workers",
            "8",
            "--ttl",
            "10ms",
            "--dist",
            "exponential(mean=8ms)",
        ])
        .args(["--duration", "700ms", "--seed", "4"]);
    for s in [&redis7, &valkey, &redis8] {
        cmd = cmd.arg("--redis-server").arg(s);
    }
    let o = cmd.out(&dir).output();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    let names: Vec<&str> = summary["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["variant"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "del@redis-7.0.15",
            "token@redis-7.0.15",
            "del@valkey-8.1.8",
            "token@valkey-8.1.8",
            "del@redis-8.2.3",
            "token@redis-8.2.3"
        ]
    );
    for v in summary["variants"].as_array().unwrap() {
        let name = v["variant"].as_str().unwrap();
        let server = name.split('@').nth(1).unwrap().replace('-', " ");
        assert_eq!(v["server_version"], server.as_str());
        assert!(
            v["server_binary"].as_str().is_some_and(|b| !b.is_empty()),
            "{name}"
        );
        // The same workload on each: the naive release deletes others' locks everywhere.
        if name.starts_with("del@") {
            assert!(v["wrongful_deletes"].as_u64().unwrap() > 0, "{name}");
        } else {
            assert_eq!(v["wrongful_deletes"], 0, "{name}");
        }
    }
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    let servers = manifest["servers"].as_array().unwrap();
    assert_eq!(servers.len(), 3);
    let caps = |i: usize, c: &str| servers[i]["capabilities"][c].clone();
    for i in 0..3 {
        assert_eq!(caps(i, "DELEX"), false);
        assert_eq!(caps(i, "GETDEL"), true);
        assert_eq!(caps(i, "EVALSHA"), true);
    }
    assert_eq!(caps(0, "SET IFEQ"), false, "redis 7.0");
    assert_eq!(caps(1, "SET IFEQ"), true, "valkey 8.1");
    assert_eq!(caps(2, "SET IFEQ"), false, "redis 8.2");
    assert_eq!(
        servers[1]["binary"].as_str().unwrap(),
        valkey.to_str().unwrap()
    );
    let skipped = manifest["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 3);
    for (s, server) in skipped
        .iter()
        .zip(["redis 7.0.15", "valkey 8.1.8", "redis 8.2.3"])
    {
        assert!(s["variant"].as_str().unwrap().starts_with("delex@"));
        assert!(
            s["reason"]
                .as_str()
                .unwrap()
                .starts_with(&format!("not supported by {server}")),
            "{s}"
        );
    }
    assert!(stdout.contains("server: valkey 8.1.8"), "{stdout}");
    assert!(stdout.contains("not run: delex@valkey-8.1.8"), "{stdout}");
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("token@valkey-8.1.8") && html.contains("Not run"));
    // The run's summary agrees with its events on every server.
    common::report_agrees(&dir);
}

/// A sweep is one server's table: several --redis-server are refused as bad input.
#[test]
fn sweep_refuses_several_servers() {
    let s = common::redis_server_path();
    let o = common::Lockbench::new()
        .args(["sweep", "--ttl", "10ms,20ms", "--duration", "100ms"])
        .arg("--redis-server")
        .arg(&s)
        .arg("--redis-server")
        .arg(common::extra_server("valkey-8.1"))
        .output();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("sweep runs on one server"));
}
