//! `lockbench observe` (issue 42): the locks of a program lockbench did not write, measured
//! through its proxy. Programs in Python (redis-py, from the drivers' venv) lock the way people
//! do; the same check that passes the token-checked release catches the naive one (negative
//! control). Traffic that is not a lock passes byte for byte; a bad frame closes only its own
//! connection; a copy that never connects is named.

use crate::common;
use std::io::{BufRead, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The drivers' Python, with redis-py.
fn python() -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(".drivers/python/bin/python");
    assert!(
        p.exists(),
        "these tests need the drivers' venv at {} (scripts/setup-drivers.sh)",
        p.display()
    );
    p
}

/// Three copies that take `lock:a` for 40 ms on a 20 ms TTL, for 1.5 s: with redis-py's
/// `Lock` (`token`) or `SET NX PX` + plain `DEL` (naive).
const NAIVE: &str = r#"
import os, time, uuid, redis
r = redis.Redis.from_url(os.environ["REDIS_URL"])
end = time.monotonic() + 1.5
while time.monotonic() < end:
    if r.set("lock:a", uuid.uuid4().hex, nx=True, px=20):
        time.sleep(0.04)
        r.delete("lock:a")
    else:
        time.sleep(0.002)
"#;

const TOKEN: &str = r#"
import os, time, redis
r = redis.Redis.from_url(os.environ["REDIS_URL"])
end = time.monotonic() + 1.5
while time.monotonic() < end:
    l = r.lock("lock:a", timeout=0.02)
    if l.acquire(blocking=False):
        time.sleep(0.04)
        try:
            l.release()
        except redis.exceptions.LockError:
            pass
    else:
        time.sleep(0.002)
"#;

fn summary(dir: &Path) -> serde_json::Value {
    common::summaries(dir).remove(0)
}

/// Runs `observe --copies 3 -- python -c SCRIPT` into `out`; returns its exit code.
fn observe_copies(script: &str, out: &Path) -> i32 {
    common::lockbench(&["observe", "--copies", "3", "--quiet"])
        .out(out)
        .arg("--")
        .arg(python())
        .args(["-c", script])
        .output()
        .status
        .code()
        .unwrap_or(-1)
}

/// The naive program's releases delete other copies' locks; redis-py's token release never
/// does (its stale releases are refused). Both overrun, so both had the chance.
#[test]
fn the_naive_release_deletes_others_locks_and_the_token_one_never() {
    common::need_redis_server();
    let tmp = tempfile::tempdir().unwrap();
    let (naive, token) = (tmp.path().join("naive"), tmp.path().join("token"));
    assert_eq!(observe_copies(NAIVE, &naive), 0);
    assert_eq!(observe_copies(TOKEN, &token), 0);
    let (n, t) = (summary(&naive), summary(&token));
    for s in [&n, &t] {
        assert!(s["sections"].as_u64().unwrap() > 10, "{s}");
        assert!(s["overruns"].as_u64().unwrap() > 5, "{s}");
    }
    let wrongful = |s: &serde_json::Value| s["wrongful_deletes"].as_u64().unwrap();
    assert!(wrongful(&n) > 0, "naive: {n}");
    assert_eq!(wrongful(&t), 0, "token: {t}");
    assert!(t["refused_releases"].as_u64().unwrap() > 0, "token: {t}");
    // Each wrongful delete names its deleter and a victim, both copies of the run.
    let attributed = n["watch"]["attributed"].as_array().unwrap();
    assert_eq!(attributed.len() as u64, wrongful(&n).min(1000));
    for a in attributed {
        let (d, v) = (a["deleter"].as_u64().unwrap(), a["victim"].as_u64());
        assert!(d < 3 && v.is_some_and(|v| v < 3 && v != d), "{a}");
    }
    // events.csv: one row per hold, and `recommend` reads the run.
    let rows = common::events(&naive);
    assert_eq!(rows.len() as u64, n["sections"].as_u64().unwrap());
    let rec = common::lockbench(&["recommend"]).arg(&naive).ok();
    let text = String::from_utf8_lossy(&rec.stdout);
    let rests_on = format!(
        "{} observed holds",
        rows.iter().filter(|r| !r.interrupted).count()
    );
    assert!(text.contains(&rests_on), "{text}");
    // The gate: the same figure crosses for the naive program only.
    let gate = ["--fail-if", "wrongful_deletes > 0"];
    let out = common::lockbench(&["observe", "--copies", "2", "--quiet"])
        .args(gate)
        .out(tmp.path().join("gate"))
        .arg("--")
        .arg(python())
        .args(["-c", NAIVE])
        .output();
    assert_eq!(out.status.code(), Some(99), "{out:?}");
}

/// A copy that never connects is named, and the run fails: never counted as safe.
#[test]
fn a_copy_that_never_connects_is_named() {
    common::need_redis_server();
    let tmp = tempfile::tempdir().unwrap();
    let out = common::lockbench(&["observe", "--copies", "2", "--quiet"])
        .out(tmp.path())
        .args(["--", "sh", "-c", "echo hello; exit 3"])
        .output();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("copy 1: 0 commands seen"), "{err}");
    assert!(err.contains("copy 2: 0 commands seen"), "{err}");
    let kept = std::fs::read_to_string(tmp.path().join("copy-2.out")).unwrap();
    assert_eq!(kept, "hello\n");
}

/// An `observe` without a program, its shared door's address read from its first line.
struct Watching {
    run: common::Running,
    addr: String,
}

fn watching(out: &Path) -> Watching {
    let mut run = common::lockbench(&["observe", "--lock-keys", "lock:*"])
        .out(out)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let mut first = String::new();
    std::io::BufReader::new(run.stdout.as_mut().unwrap())
        .read_line(&mut first)
        .unwrap();
    let addr = first
        .split_whitespace()
        .find(|w| w.starts_with("127.0.0.1:"))
        .unwrap_or_else(|| panic!("no address in {first:?}"))
        .to_string();
    Watching { run, addr }
}

impl Watching {
    /// SIGTERM, as a service manager stops it: exit 130 with the files written.
    fn stop(mut self) -> std::process::Output {
        common::signal("-TERM", self.run.id());
        assert_eq!(
            self.run.exit_code_within(Duration::from_secs(20)),
            Some(130)
        );
        self.run.wait_with_output()
    }
}

/// Pipelines, transactions, pub/sub, a blocking pop, RESP3 and a script pass through with the
/// replies a server gives directly; a lock taken and released in between is one hold.
#[test]
fn other_traffic_passes_untouched() {
    common::need_redis_server();
    let tmp = tempfile::tempdir().unwrap();
    let w = watching(tmp.path());
    let client = redis::Client::open(format!("redis://{}", w.addr)).unwrap();
    let mut c = client.get_connection().unwrap();
    let mut p = redis::pipe();
    for i in 0..200 {
        p.cmd("SET").arg(format!("k{i}")).arg(i).ignore();
    }
    for i in 0..200 {
        p.cmd("GET").arg(format!("k{i}"));
    }
    let got: Vec<i64> = p.query(&mut c).unwrap();
    assert_eq!(got, (0..200).collect::<Vec<i64>>());
    let (a, b): (i64, i64) = redis::pipe()
        .atomic()
        .cmd("INCR")
        .arg("n")
        .cmd("INCRBY")
        .arg("n")
        .arg(5)
        .query(&mut c)
        .unwrap();
    assert_eq!((a, b), (1, 6));
    // A lock inside the proxy's view: acquired, then released by a token script.
    let ok: Option<String> = redis::cmd("SET")
        .arg("lock:x")
        .arg("me")
        .arg("NX")
        .arg("PX")
        .arg(10_000)
        .query(&mut c)
        .unwrap();
    assert_eq!(ok.as_deref(), Some("OK"));
    let script = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";
    let n: i64 = redis::cmd("EVAL")
        .arg(script)
        .arg(1)
        .arg("lock:x")
        .arg("me")
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 1);
    let e: redis::RedisResult<i64> = redis::cmd("EVALSHA")
        .arg("0000000000000000000000000000000000000000")
        .arg(1)
        .arg("lock:x")
        .query(&mut c);
    let e = e.unwrap_err();
    assert_eq!(e.code(), Some("NOSCRIPT"), "{e}");
    // A blocking pop served by another connection's push.
    let mut other = client.get_connection().unwrap();
    let pusher = std::thread::spawn(move || {
        let _: () = redis::cmd("RPUSH")
            .arg("q")
            .arg("job")
            .query(&mut other)
            .unwrap();
        other
    });
    let popped: (String, String) = redis::cmd("BLPOP").arg("q").arg(10).query(&mut c).unwrap();
    assert_eq!(popped.1, "job");
    let mut other = pusher.join().unwrap();
    // Pub/sub across two connections.
    let mut sub = client.get_connection().unwrap();
    let mut ps = sub.as_pubsub();
    ps.subscribe("ch").unwrap();
    let _: i64 = redis::cmd("PUBLISH")
        .arg("ch")
        .arg("hi")
        .query(&mut other)
        .unwrap();
    let msg = ps.get_message().unwrap();
    assert_eq!(msg.get_payload::<String>().unwrap(), "hi");
    drop(ps);
    // HELLO 3 on a raw connection: a RESP3 map back, then a command.
    let mut raw = TcpStream::connect(&w.addr).unwrap();
    raw.write_all(b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n*1\r\n$4\r\nPING\r\n")
        .unwrap();
    let mut seen = Vec::new();
    let mut buf = [0; 4096];
    while !seen.ends_with(b"+PONG\r\n") {
        let n = raw.read(&mut buf).unwrap();
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    assert_eq!(seen[0], b'%', "{}", String::from_utf8_lossy(&seen));
    let out = w.stop();
    let s = summary(tmp.path());
    assert_eq!(s["sections"], 1, "{s}");
    assert_eq!(s["released"], 1, "{s}");
    assert_eq!(s["wrongful_deletes"], 0, "{s}");
    assert!(out.stdout.ends_with(b"\n"));
}

/// A malformed request closes its own connection with an error reply; another connection
/// keeps working.
#[test]
fn a_bad_frame_closes_only_its_connection() {
    common::need_redis_server();
    let tmp = tempfile::tempdir().unwrap();
    let w = watching(tmp.path());
    let client = redis::Client::open(format!("redis://{}", w.addr)).unwrap();
    let mut good = client.get_connection().unwrap();
    let _: () = redis::cmd("SET").arg("a").arg(1).query(&mut good).unwrap();
    let mut bad = TcpStream::connect(&w.addr).unwrap();
    bad.write_all(b"*1\r\n:1\r\n").unwrap();
    let mut got = Vec::new();
    bad.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    bad.read_to_end(&mut got).unwrap();
    let got = String::from_utf8_lossy(&got);
    assert!(
        got.starts_with("-ERR lockbench observe: closing this connection: a malformed request"),
        "{got}"
    );
    let v: i64 = redis::cmd("GET").arg("a").query(&mut good).unwrap();
    assert_eq!(v, 1);
    let out = w.stop();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("connection closed: a malformed request"),
        "{out:?}"
    );
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tmp.path().join("observe.json")).unwrap()).unwrap();
    assert_eq!(record["connections_closed_for_bad_frames"], 1);
}

/// Faults on the real program, struck while a copy holds a lock: a pause stretches that
/// copy's hold past the pause's length; a crash ends its hold as a crash, blocks the key
/// until its expiry, and `--restart` starts the copy again.
#[test]
fn holder_faults_strike_a_copy_that_holds() {
    common::need_redis_server();
    let tmp = tempfile::tempdir().unwrap();
    let out = common::lockbench(&["observe", "--copies", "2", "--restart", "--quiet"])
        .args(["--duration", "8s"])
        .args([
            "--fault",
            "holder-pause@0.2s+400ms",
            "--fault",
            "holder-crash@1s",
        ])
        .out(tmp.path())
        .arg("--")
        .arg(python())
        .args(["-c", TOKEN])
        .output();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let s = summary(tmp.path());
    assert_eq!(s["crashes"], 1, "{s}");
    assert_eq!(s["crash_blocked_ms"]["count"], 1, "{s}");
    assert!(s["duration_ms"]["max"].as_f64().unwrap() >= 400.0, "{s}");
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tmp.path().join("observe.json")).unwrap()).unwrap();
    let faults = record["faults"].as_array().unwrap();
    assert_eq!(faults.len(), 2, "{record}");
    assert!(faults.iter().all(|f| f["problem"].is_null()), "{record}");
    let crashed = faults
        .iter()
        .find(|f| f["fault"] == "holder-crash")
        .unwrap()["copy"]
        .as_u64()
        .unwrap();
    let copy = &record["copies"][crashed as usize - 1];
    assert!(copy["starts"].as_u64().unwrap() >= 2, "{record}");
    assert!(
        copy["exits"][0][0].as_str().unwrap().contains("SIGKILL"),
        "{record}"
    );
}

/// `--fault server-pause@AT+LENGTH` stops the private server behind the proxy (the run
/// schedule's own fault): the window is in the summary as it happened, and a copy's
/// acquisition or release sent while the server was stopped waited for most of it (each copy
/// sends one at least every 40 ms). Without the pause none here waits anywhere near 200 ms
/// (tens of ms at worst on a loaded machine); a server given by URL is refused (exit 2).
#[test]
fn a_server_pause_stops_the_server_behind_the_proxy() {
    common::need_redis_server();
    let tmp = tempfile::tempdir().unwrap();
    // Copies started again as they end, so they run from their start-up (an interpreter's
    // import, up to a second on a loaded machine) through the pause.
    let out = common::lockbench(&["observe", "--copies", "2", "--restart", "--quiet"])
        .args(["--duration", "3s", "--fault", "server-pause@1.5s+300ms"])
        .out(tmp.path())
        .arg("--")
        .arg(python())
        .args(["-c", TOKEN])
        .output();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let s = summary(tmp.path());
    let faults = s["faults"].as_array().unwrap();
    assert_eq!(faults.len(), 1, "{s}");
    let w = &faults[0];
    assert_eq!(w["kind"], "server-pause", "{w}");
    assert_eq!(w["error"], "", "{w}");
    let (from, to) = (
        w["start_ms"].as_f64().unwrap(),
        w["end_ms"].as_f64().unwrap(),
    );
    // In effect from when the SIGSTOP went out (a `kill` process: milliseconds late).
    assert!(to - from >= 250.0, "{w}");
    let max = |f: &str| s[f]["max"].as_f64().unwrap();
    let waited = max("acquire_latency_ms").max(max("release_latency_ms"));
    assert!(
        waited >= 200.0,
        "longest acquisition or release {waited} ms: {s}"
    );
    let refused = common::lockbench(&["observe", "--redis", "redis://127.0.0.1:1"])
        .args(["--fault", "server-pause@1s+1s"])
        .out(tmp.path().join("refused"))
        .output();
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("private server"),
        "{refused:?}"
    );
}

/// A TLS-only server (`--redis rediss://`): the proxy connects over TLS, checking the
/// certificate against `SSL_CERT_FILE` and the URL's host name, and the program on its plain
/// loopback side has its holds counted. The negative controls: the same server without the
/// CA (an unknown certificate), and by a name the certificate does not carry, are each a
/// start-up error naming `--redis` (exit 1, as a server lockbench cannot connect to).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_server_is_observed_through_the_proxy() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    // Its own CA, for `localhost` only (not 127.0.0.1: the wrong name below).
    let made = std::process::Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args([
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("this test needs the openssl command (apt-get install -y openssl)");
    assert!(made.status.success(), "{made:?}");
    let server = common::Server::start(lockbench::SpawnedRedis::start_tls(lockbench::TlsFiles {
        cert: cert.clone(),
        key,
    }))
    .await;
    let app = r#"
import os, redis
r = redis.Redis.from_url(os.environ["REDIS_URL"])
for i in range(5):
    l = r.lock("lock:t", timeout=5)
    assert l.acquire(blocking=True)
    l.release()
"#;
    let observe = |url: String, ca: bool, out: &str| {
        let cmd = common::lockbench(&["observe", "--quiet", "--redis", &url])
            .out(dir.path().join(out))
            .arg("--")
            .arg(python())
            .args(["-c", app]);
        if ca {
            cmd.env("SSL_CERT_FILE", &cert)
        } else {
            cmd.env_remove("SSL_CERT_FILE")
        }
        .output()
    };
    let port = server.port();
    let ok = observe(format!("rediss://localhost:{port}"), true, "ok");
    assert_eq!(ok.status.code(), Some(0), "{ok:?}");
    let s = summary(&dir.path().join("ok"));
    assert_eq!(s["sections"].as_u64(), Some(5), "{s}");
    assert_eq!(s["wrongful_deletes"].as_u64(), Some(0), "{s}");
    for (url, out) in [
        (format!("rediss://localhost:{port}"), "unknown-ca"),
        (format!("rediss://127.0.0.1:{port}"), "wrong-name"),
    ] {
        let ca = out == "wrong-name";
        let o = observe(url, ca, out);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{out}: {err}");
        assert!(
            err.contains("--redis rediss://") && err.contains("TLS handshake failed"),
            "{out}: {err}"
        );
    }
}
