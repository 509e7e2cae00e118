//! Redis URLs through the real binary (issue 7, defects 6 and 11): a password with `/ # ?`
//! never reaches the terminal or a file, whatever the URL looks like; URLs redis-rs would
//! misread are refused with the form to use; loopback is recognised in every spelling.

use crate::common;

use lockbench::SpawnedRedis;
use std::path::Path;

const PASSWORD: &str = "alpha/bravo#charlie?delta";
const ENCODED: &str = "alpha%2Fbravo%23charlie%3Fdelta";

/// Parts of the password no output may contain (in any encoding).
const PARTS: [&str; 4] = ["alpha", "bravo", "charlie", "delta"];

struct Ran {
    ok: bool,
    stderr: String,
}

/// Runs `lockbench run --redis url` into a fresh directory and checks that no part of the
/// password appears in stdout, stderr or any file written.
fn run(url: &str) -> Ran {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let o = common::Lockbench::new()
        .args(["run", "--redis", url, "--workers", "2", "--sections", "20"])
        .args(["--dist", "constant(1ms)", "--out"])
        .arg(&out)
        .output();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{stderr}");
    for part in PARTS {
        assert!(
            !stdout.contains(part),
            "{url}: password in stdout:\n{stdout}"
        );
        assert!(
            !stderr.contains(part),
            "{url}: password in stderr:\n{stderr}"
        );
    }
    assert_no_password_in(&out, url);
    Ran {
        ok: o.status.success(),
        stderr,
    }
}

fn assert_no_password_in(dir: &Path, url: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            assert_no_password_in(&path, url);
            continue;
        }
        let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
        for part in PARTS {
            assert!(
                !text.contains(part),
                "{url}: password in {}",
                path.display()
            );
        }
    }
}

async fn protected_server() -> common::Server {
    common::need_redis_server();
    common::Server::start(SpawnedRedis::start_with_args(&["--requirepass", PASSWORD])).await
}

/// Every way of writing the password wrongly is refused without echoing it (the old redaction
/// printed `redis://:alpha/bravo…` and `redis//:…` whole, and stored a `#` fragment in
/// manifest.json and report.html); each message says what to write instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn misspelt_credentials_never_leak_and_say_how_to_write_them() {
    let server = protected_server().await;
    let p = server.port();
    let r = run(&format!("redis://:{PASSWORD}@127.0.0.1:{p}"));
    assert!(!r.ok && r.stderr.contains("%2F"), "{}", r.stderr);
    let r = run(&format!("redis//:{PASSWORD}@127.0.0.1:{p}"));
    assert!(!r.ok && r.stderr.contains("redis://"), "{}", r.stderr);
    let r = run(&format!("redis://:{ENCODED}@127.0.0.1:{p}/#charlie"));
    assert!(!r.ok && r.stderr.contains("fragment"), "{}", r.stderr);
    let r = run(&format!("redis://127.0.0.1:{p}/?password={ENCODED}"));
    assert!(
        !r.ok && r.stderr.contains("?password= is not read"),
        "{}",
        r.stderr
    );
}

/// A server that wants a password gets a hint about credentials when none or a wrong one is
/// given (before: a bare NOAUTH / "Password authentication failed").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_authentication_hints_at_the_url() {
    let server = protected_server().await;
    let p = server.port();
    let r = run(&format!("redis://127.0.0.1:{p}"));
    assert!(
        !r.ok && r.stderr.contains("requires a password"),
        "{}",
        r.stderr
    );
    let r = run(&format!("redis://:wrong@127.0.0.1:{p}"));
    assert!(
        !r.ok && r.stderr.contains("password in the Redis URL"),
        "{}",
        r.stderr
    );
}

/// The percent-encoded password works, on every spelling of loopback that used to be refused
/// (`127.1`, `LOCALHOST`, `::ffff:127.0.0.1`), and appears nowhere: terminal, manifest.json,
/// summary.json, report.html, any other file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn encoded_password_runs_on_every_loopback_spelling_and_is_never_shown() {
    let server = protected_server().await;
    let p = server.port();
    for host in ["127.1", "LOCALHOST", "[::ffff:127.0.0.1]"] {
        let r = run(&format!("redis://:{ENCODED}@{host}:{p}"));
        assert!(r.ok, "{host}: {}", r.stderr);
    }
}
