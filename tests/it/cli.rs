//! The real binary: help, exit codes, error messages, secrets.

use crate::common;

use std::process::{Command, Output};

use common::lockbench;

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `run --help` explains every option with its unit and default.
#[test]
fn help_explains_options_with_units_and_defaults() {
    let o = lockbench(&["run", "--help"]).output();
    assert!(o.status.success());
    let out = text(&o).0.split_whitespace().collect::<Vec<_>>().join(" ");
    for needle in [
        "--workers",
        "--ttl",
        "default 100ms",
        "--dist",
        "lognormal(median=20ms,p99=120ms)",
        "--connection",
        "per-worker",
        "--release",
        "--backend",
        "--sections",
        "--seed",
        "--out",
    ] {
        assert!(out.contains(needle), "help lacks {needle}:\n{out}");
    }
}

/// A run on the memory backend writes its files and exits 0.
#[test]
fn run_writes_results_and_exits_zero() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let o = lockbench(&[
        "run",
        "--backend",
        "memory",
        "--workers",
        "4",
        "--sections",
        "50",
        "--dist",
        "constant(1ms)",
        "--out",
        out.to_str().unwrap(),
    ])
    .output();
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stdout.contains("wrongful deletes") && stdout.contains("overlap time"),
        "{stdout}"
    );
    for f in [
        "manifest.json",
        "summary.json",
        "summary.csv",
        "events.csv",
        "durations.hgrm",
        "durations.hlog",
    ] {
        assert!(out.join(f).exists(), "{f} missing");
    }
}

/// A bad profile names the file, line and field and what would be valid; exit code 2 (bad
/// input).
#[test]
fn bad_profile_names_file_line_field() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.toml");
    std::fs::write(&p, "workers = 5\nttl = \"50\"\n").unwrap();
    let o = lockbench(&["run", p.to_str().unwrap(), "--backend", "memory"]).output();
    assert_eq!(o.status.code(), Some(2));
    let (_, err) = text(&o);
    assert!(
        err.contains("bad.toml:2") && err.contains("`ttl`") && err.contains("50ms"),
        "{err}"
    );

    std::fs::write(&p, "workers = 5\nrelase = \"del\"\n").unwrap();
    let (_, err) = text(&lockbench(&["run", p.to_str().unwrap()]).output());
    assert!(
        err.contains("bad.toml:2") && err.contains("relase") && err.contains("release"),
        "{err}"
    );

    let (_, err) =
        text(&lockbench(&["run", dir.path().join("missing.toml").to_str().unwrap()]).output());
    assert!(
        err.contains("missing.toml") && err.contains("cannot read"),
        "{err}"
    );
}

/// A malformed distribution flag points at the offending part and names the flag.
#[test]
fn bad_dist_flag_points_at_the_part() {
    let o = lockbench(&["run", "--backend", "memory", "--dist", "uniform(70ms,x)"]).output();
    assert_eq!(o.status.code(), Some(2));
    let (_, err) = text(&o);
    assert!(err.contains("--dist") && err.contains("column"), "{err}");
    let (_, err) =
        text(&lockbench(&["run", "--backend", "memory", "--dist", "gamma(2ms)"]).output());
    assert!(
        err.contains("lognormal") && err.contains("exponential"),
        "{err}"
    );
}

/// Redis unreachable: a clear message and a non-zero exit, no panic.
#[test]
fn unreachable_redis_is_a_clear_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("redis://:hunter2@127.0.0.1:{port}");
    let o = lockbench(&["run", "--redis", &url, "--sections", "5", "--quiet"]).output();
    assert_eq!(o.status.code(), Some(1));
    let (out, err) = text(&o);
    assert!(err.contains("cannot connect"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        !err.contains("hunter2") && !out.contains("hunter2"),
        "password printed: {err}"
    );
}

/// A remote host is refused without --allow-remote (and nothing is sent to it): bad input,
/// exit 2 naming the host (issue 32: it was 1, a failed run).
#[test]
fn remote_host_needs_allow_remote() {
    let o = lockbench(&[
        "run",
        "--redis",
        "redis://192.0.2.1:6379",
        "--sections",
        "5",
    ])
    .output();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o).1);
    assert!(text(&o).1.contains("--allow-remote") && text(&o).1.contains("192.0.2.1"));
}

/// With a password-protected server, the run authenticates and the password appears in no
/// output and no file of the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn password_never_printed_or_stored() {
    let server = common::redis().await;
    let mut c = common::sync_conn(&server);
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg("s3cr3t-pw")
        .query(&mut c)
        .unwrap();
    let url = format!("redis://:s3cr3t-pw@127.0.0.1:{}", server.port());
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("r");
    let o = lockbench(&[
        "run",
        "--redis",
        &url,
        "--workers",
        "3",
        "--sections",
        "30",
        "--dist",
        "constant(1ms)",
        "--out",
        out_dir.to_str().unwrap(),
    ])
    .output();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(!out.contains("s3cr3t") && !err.contains("s3cr3t"));
    for entry in std::fs::read_dir(&out_dir).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        assert!(
            !String::from_utf8_lossy(&bytes).contains("s3cr3t"),
            "password in {}",
            path.display()
        );
    }
    let manifest = std::fs::read_to_string(out_dir.join("manifest.json")).unwrap();
    assert!(manifest.contains("***@127.0.0.1"), "{manifest}");
}

/// `demo stale-release` through the binary prints the real 1/0 replies.
#[test]
fn demo_binary_prints_replies() {
    let o = lockbench(&["demo", "stale-release", "--ttl", "50ms"]).output();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        out.contains("(integer) 1") && out.contains("(integer) 0") && out.contains("\"tokB\""),
        "{out}"
    );
}

/// `rediss://` works: a TLS-only private server (self-signed certificate made with openssl)
/// is load-tested through the binary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rediss_url_reaches_a_tls_server() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    let made = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
        ])
        .args([
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
            "-keyout",
        ])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("this test needs the openssl command (apt-get install -y openssl)");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let server = common::Server::start(lockbench::SpawnedRedis::start_tls(lockbench::TlsFiles {
        cert,
        key,
    }))
    .await;
    let out_dir = dir.path().join("r");
    let o = lockbench(&[
        "run",
        "--redis",
        &server.url(),
        "--workers",
        "3",
        "--sections",
        "30",
        "--dist",
        "constant(1ms)",
        "--quiet",
        "--out",
        out_dir.to_str().unwrap(),
    ])
    .output();
    assert!(o.status.success(), "{}", text(&o).1);
    let manifest = std::fs::read_to_string(out_dir.join("manifest.json")).unwrap();
    assert!(manifest.contains("(TLS)"), "{manifest}");
}

/// Ctrl-C (SIGINT) ends a run early but normally: exit code 130, every file written, the
/// summary consistent with events.csv, and the private redis-server stopped.
#[test]
fn ctrl_c_flushes_reports_and_stops_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("r");
    let mut child = common::Lockbench::new()
        .args([
            "run",
            "--backend",
            "spawn",
            "--workers",
            "10",
            "--keys",
            "2",
            "--dist",
            "constant(5ms)",
            "--ttl",
            "3ms",
            "--duration",
            "60s",
            "--quiet",
            "--out",
        ])
        .arg(&out_dir)
        .spawn();
    // The manifest is written once the server answered and the workers are about to start.
    let t0 = std::time::Instant::now();
    while !out_dir.join("manifest.json").exists() {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(30),
            "run did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Wait until sections are being recorded: events.csv gets its first buffered block.
    let events = out_dir.join("events.csv");
    while std::fs::metadata(&events).map(|m| m.len()).unwrap_or(0) == 0 {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(30),
            "no section recorded"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    common::signal("-INT", child.id());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(30),
        "did not stop promptly"
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("summary.json")).unwrap())
            .unwrap();
    let sections = summary["variants"][0]["sections"].as_u64().unwrap();
    assert!(sections > 0);
    let rows = csv::Reader::from_path(out_dir.join("events.csv"))
        .unwrap()
        .records()
        .count() as u64;
    assert_eq!(
        rows, sections,
        "every section recorded before Ctrl-C is in events.csv"
    );
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("manifest.json")).unwrap())
            .unwrap();
    assert_eq!(manifest["interrupted"], true);
    let addr = manifest["backend_detail"]
        .as_str()
        .unwrap()
        .trim_start_matches("redis at ")
        .to_string();
    assert!(
        std::net::TcpStream::connect(&addr).is_err(),
        "the private redis-server at {addr} is still running"
    );
}

/// Without redis-server on PATH the default backend falls back to the memory model with a
/// notice (so the README's first command works on a bare machine), and an explicit
/// `--backend spawn` fails naming the package to install.
#[test]
fn no_redis_server_falls_back_to_memory_or_names_the_package() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let o = common::Lockbench::new()
        .env("PATH", dir.path())
        .args([
            "run",
            "--workers",
            "3",
            "--sections",
            "20",
            "--dist",
            "constant(1ms)",
            "--out",
            out.to_str().unwrap(),
        ])
        .output();
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stderr.contains("notice") && stderr.contains("memory"),
        "{stderr}"
    );
    assert!(stdout.contains("memory model"), "{stdout}");
    let o = common::Lockbench::new()
        .env("PATH", dir.path())
        .args(["run", "--backend", "spawn", "--sections", "5"])
        .output();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o).1.contains("apt-get install -y redis-server"),
        "{}",
        text(&o).1
    );
}

/// A `--redis` URL beside a backend that starts its own server (or none) is refused by name
/// (exit 2) instead of measuring another server than the one named; the URL alone passes
/// validation (it then fails to connect: exit 1, not 2), so the refusal is the combination's.
#[test]
fn a_url_beside_another_backend_is_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let url = "redis://127.0.0.1:1";
    let run = |extra: &[&str], name: &str| {
        let mut args = vec!["run", "--redis", url, "--duration", "200ms", "--quiet"];
        args.extend_from_slice(extra);
        lockbench(&args).out(tmp.path().join(name)).output()
    };
    for (extra, names) in [
        (&["--backend", "spawn"][..], "--backend"),
        (&["--backend", "memory"][..], "--backend"),
        (&["--backend", "sim"][..], "--backend"),
        (&["--redis-server", "redis-server"][..], "--redis-server"),
    ] {
        let o = run(extra, &extra.join("-"));
        let (_, stderr) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {stderr}");
        assert!(
            stderr.contains(names) && stderr.contains("redis"),
            "{extra:?}: {stderr}"
        );
    }
    let o = run(&[], "url-alone");
    assert_eq!(o.status.code(), Some(1), "{}", text(&o).1);
}

/// Bad input named on the command line exits 2, not 1: a TTL list that does not parse, a
/// directory that is not a run given to `report`.
#[test]
fn bad_ttls_and_non_run_directories_are_bad_input() {
    let tmp = tempfile::tempdir().unwrap();
    let o = lockbench(&["sweep", "--ttl", "abc", "--backend", "sim", "--quiet"])
        .out(tmp.path().join("s"))
        .output();
    let (_, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--ttl") && stderr.contains("abc"),
        "{stderr}"
    );
    let o = lockbench(&["report", tmp.path().to_str().unwrap()]).output();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o).1);
}

/// Two profile mistakes are named in the profile's words, not serde's (issue 32): a list field
/// written as one table (`[fault]` for `[[fault]]`, with or without fields: it said "invalid
/// type: map, expected a sequence"), and `redis_server` neither a path nor a list (it said
/// "untagged enum OneOrMany"). Negative control: the right forms parse.
#[test]
fn profile_mistakes_are_named_in_the_profiles_words() {
    use lockbench::Profile;
    for text in [
        "[fault]\n",
        "sections = 5\n\n[fault]\nkind = \"server-pause\"\nat = \"1s\"\n",
    ] {
        let e = Profile::parse(text, "p.toml").unwrap_err().to_string();
        assert!(
            e.contains("`[fault]` is one table") && e.contains("`[[fault]]`"),
            "{text}: {e}"
        );
        assert!(!e.contains("expected a sequence"), "{e}");
    }
    let e = Profile::parse("redis_server = 5\n", "p.toml")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("redis_server") && e.contains("a path or a list of paths"),
        "{e}"
    );
    assert!(!e.contains("OneOrMany"), "{e}");
    for ok in [
        "[[fault]]\nkind = \"server-pause\"\nat = \"1s\"\nlength = \"100ms\"\n",
        "redis_server = \"/usr/bin/redis-server\"\n",
        "redis_server = [\"/a\", \"/b\"]\n",
    ] {
        assert!(Profile::parse(ok, "p.toml").is_ok(), "{ok}");
    }
}

/// `run --help` lists every lock library `--release` accepts, and `compare --help` every one
/// `--client` accepts, by the names lockbench parses (issue 40: `run --help` listed none).
#[test]
fn help_lists_the_lock_libraries() {
    for (sub, flag) in [("run", "--release"), ("compare", "--client")] {
        let o = lockbench(&[sub, "--help"]).output();
        assert!(o.status.success());
        let out = text(&o).0;
        // The option's line and its description, up to the next option's line.
        let mut lines = out
            .lines()
            .skip_while(|l| !l.trim_start().starts_with(&format!("{flag} <")));
        let first = lines
            .next()
            .unwrap_or_else(|| panic!("{sub} --help has no {flag}:\n{out}"));
        let help: String = std::iter::once(first)
            .chain(lines.take_while(|l| !l.trim_start().starts_with('-')))
            .collect::<Vec<_>>()
            .join(" ");
        for c in lockbench::Client::ALL {
            assert!(
                help.contains(c.name()),
                "{sub} --help's {flag} lacks {}: {help}",
                c.name()
            );
        }
    }
}

/// The same library twice (`--client`, or `--client` beside `--release NAME`) is bad input
/// naming it, not dropped without a word (issue 40); two different libraries are not refused
/// for it (the control: they reach the backend's own check).
#[test]
fn the_same_client_twice_is_refused() {
    for args in [
        &["--client", "redis-py", "--client", "redis-py"][..],
        &["--release", "token,redis-py", "--client", "redis-py"][..],
    ] {
        let o = lockbench(&["compare", "--backend", "memory", "--sections", "5"])
            .args(args)
            .output();
        let err = text(&o).1;
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("--client redis-py") && err.contains("named twice"),
            "{args:?}: {err}"
        );
    }
    let o = lockbench(&["compare", "--backend", "memory", "--sections", "5"])
        .args(["--client", "redis-py", "--client", "redis-lock"])
        .output();
    let err = text(&o).1;
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(!err.contains("named twice"), "{err}");
}
