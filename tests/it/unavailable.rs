//! What the lock does when Redis does not answer: the same server pause (`CLIENT PAUSE … ALL`
//! on a private server) under fail-closed refuses requests and runs nothing unlocked; under
//! fail-open the article's service runs sections without a lock — and they overlap.

use crate::common;

use lockbench::RedisConnector;
use lockbench::Timeouts;
use lockbench::run_with;
use std::time::Duration;

async fn paused_run(policy: &str) -> lockbench::Summary {
    let server = common::redis().await;
    let plan = common::plan(&format!(
        "workers = 4\nkeys = 1\nttl = \"1s\"\ndist = \"constant(20ms)\"\nduration = \"2s\"\n\
         command_timeout = \"100ms\"\non_unavailable = \"{policy}\"\n"
    ));
    let url = server.url();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_path_buf();
    let run = tokio::spawn(async move {
        let t = Timeouts {
            connect: Duration::from_secs(5),
            response: Duration::from_micros(plan.timeouts.command_timeout_us),
        };
        let c = RedisConnector::new(&url, t, false).unwrap();
        // The plan's variant carries its policy (from on_unavailable).
        run_with(
            &c,
            "url",
            &plan,
            &[plan.protection.release],
            &common::opts(&out),
        )
        .await
    });
    let mut conn = common::sync_conn(&server);
    tokio::task::block_in_place(|| {
        common::wait_until("lock commands", Duration::from_secs(20), || {
            common::set_calls(&mut conn) > 0
        });
        let _: () = redis::cmd("CLIENT")
            .arg("PAUSE")
            .arg(700)
            .arg("ALL")
            .query(&mut conn)
            .unwrap();
    });
    let outcome = run
        .await
        .unwrap()
        .expect("the run goes on through the pause");
    outcome.summaries.into_iter().next().unwrap()
}

/// Fail-closed: requests refused during the pause, no section without a lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_closed_refuses_while_redis_is_paused() {
    let s = paused_run("fail-closed").await;
    assert!(s.counts.refused_unavailable > 0, "{s:?}");
    assert_eq!(s.counts.unlocked_sections, 0);
    assert!(s.errors_by_kind["timeout"] > 0);
}

/// Fail-open: sections run without a lock during the pause and overlap each other; nothing
/// is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_open_runs_sections_without_a_lock() {
    let s = paused_run("fail-open").await;
    assert!(s.counts.unlocked_sections > 0, "{s:?}");
    assert_eq!(s.counts.refused_unavailable, 0);
    assert!(s.overlap_incidents > 0, "unlocked sections overlap: {s:?}");
}
