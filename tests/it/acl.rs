//! Release methods checked against what the Redis user may run (issue 7, defect 9): a refused
//! probe is not mistaken for an old server, and a forbidden release command is refused before
//! the run instead of turning every release into an error.

use crate::common;

use common::*;
use lockbench::RedisConnector;
use lockbench::ReleaseMethod::{self, Del, Token};
use lockbench::SpawnedRedis;
use lockbench::Timeouts;
use lockbench::run_with;

/// Creates `user` with password `pw` and the given ACL rules.
fn acl_user(server: &SpawnedRedis, user: &str, rules: &[&str]) {
    let mut c = sync_conn(server);
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg(user)
        .arg("on")
        .arg(">pw")
        .arg(rules)
        .query(&mut c)
        .unwrap();
}

/// Runs a small plan as `user`; the error text on failure.
async fn run_as(
    server: &SpawnedRedis,
    user: &str,
    method: ReleaseMethod,
) -> Result<lockbench::RunOutcome, String> {
    let url = format!("redis://{user}:pw@127.0.0.1:{}", server.port());
    let c = RedisConnector::new(&url, Timeouts::default(), false).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let p = plan("workers = 2\nsections = 20\ndist = \"constant(1ms)\"\n");
    run_with(&c, "url", &p, &[method], &opts(dir.path()))
        .await
        .map_err(|e| format!("{e:#}"))
}

/// A user who may not run `COMMAND` (the version probe) but may run GETDEL gets a normal
/// `del` run — the old check read the refused probe as "this server does not know GETDEL".
/// The user's keys are limited to `lockbench:*`, so the fallback probe provably stays under
/// the run's prefix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_command_probe_is_not_taken_for_an_old_server() {
    let server = redis().await;
    acl_user(&server, "u2", &["~lockbench:*", "+@all", "-command"]);
    let out = run_as(&server, "u2", Del).await.expect("del run as u2");
    assert_eq!(out.summaries[0].counts.sections, 20);
    assert_eq!(
        out.summaries[0].errors, 0,
        "{:?}",
        out.summaries[0].first_errors
    );
}

/// Without COMMAND and without GETDEL, the message says the user is not permitted (and that
/// the usual probe was refused too), not that the server is too old.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forbidden_getdel_is_named_as_a_permission() {
    let server = redis().await;
    acl_user(&server, "u3", &["~*", "+@all", "-command", "-getdel"]);
    let msg = run_as(&server, "u3", Del).await.unwrap_err();
    assert!(
        msg.contains("not permitted") && msg.contains("GETDEL"),
        "{msg}"
    );
    assert!(msg.contains("COMMAND INFO"), "{msg}");
    assert!(!msg.contains("does not know"), "{msg}");
    // With COMMAND allowed, INFO says GETDEL exists; the permission is still checked.
    acl_user(&server, "u4", &["~*", "+@all", "-getdel"]);
    let msg = run_as(&server, "u4", Del).await.unwrap_err();
    assert!(
        msg.contains("not permitted") && msg.contains("+getdel"),
        "{msg}"
    );
}

/// Negative control: on a server that really lacks GETDEL, the fallback probe still says so
/// (an unknown command is told apart from a forbidden one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_getdel_is_still_reported_as_missing() {
    let server = common::Server::start(SpawnedRedis::start_with_args(&[
        "--rename-command",
        "GETDEL",
        "",
    ]))
    .await;
    acl_user(&server, "u2", &["~*", "+@all", "-command"]);
    let msg = run_as(&server, "u2", Del).await.unwrap_err();
    assert!(
        msg.contains("does not know it") && msg.contains("6.2"),
        "{msg}"
    );
}

/// A user without EVALSHA, or without SCRIPT LOAD (which redis-rs sends on NOSCRIPT), is
/// refused before a `token` run, with the grant to add; the old code ran and counted every
/// release as an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_release_without_scripts_is_refused_before_the_run() {
    let server = redis().await;
    acl_user(&server, "u5", &["~*", "+@all", "-evalsha", "-eval"]);
    let msg = run_as(&server, "u5", Token).await.unwrap_err();
    assert!(
        msg.contains("not permitted") && msg.contains("+evalsha +script|load"),
        "{msg}"
    );
    acl_user(&server, "u6", &["~*", "+@all", "-script"]);
    let msg = run_as(&server, "u6", Token).await.unwrap_err();
    assert!(msg.contains("not permitted"), "{msg}");
    // Negative control: EVAL itself is not needed, and with the two the same run works.
    acl_user(&server, "u7", &["~*", "+@all", "-eval"]);
    let out = run_as(&server, "u7", Token).await.expect("token run as u7");
    assert_eq!(out.summaries[0].errors, 0);
}
