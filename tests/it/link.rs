//! lockbench's own pipelined link (`src/store/pipe.rs`), on a private redis-server: every reply
//! reaches its own command when many tasks share one connection, a reply that comes after its
//! command timed out is dropped without shifting the others, a lost connection is made again by
//! the next command, and the URL's database is selected.

use crate::common;

use common::{redis, sync_conn};
use lockbench::Connector;
use lockbench::Timeouts;
use lockbench::{CmdError, ErrorKind};
use lockbench::{RedisConn, RedisConnector};
use std::time::{Duration, Instant};

async fn connect(url: &str, timeouts: Timeouts) -> RedisConn {
    RedisConnector::new(url, timeouts, false)
        .unwrap()
        .connect()
        .await
        .unwrap()
}

/// Closes every other client's connection at the server; returns how many.
fn kill_clients(admin: &mut redis::Connection) -> i64 {
    redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .arg("SKIPME")
        .arg("yes")
        .query(admin)
        .unwrap()
}

async fn get(c: &mut RedisConn, key: &str) -> Result<Option<String>, CmdError> {
    c.query(redis::cmd("GET").arg(key)).await
}

/// 64 tasks on one connection (two runtime threads), each writing and reading back its own
/// values: a reply handed to the wrong command shows as another task's value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_link_hands_every_reply_to_its_command() {
    let server = redis().await;
    let shared = connect(&server.url(), Timeouts::default()).await;
    let mut tasks = Vec::new();
    for t in 0..64 {
        let mut c = shared.clone();
        tasks.push(tokio::spawn(async move {
            let key = format!("lockbench:test:link:{t}");
            for n in 0..300 {
                let value = format!("{t}-{n}");
                let ok: String = c
                    .query(redis::cmd("SET").arg(&key).arg(&value))
                    .await
                    .unwrap();
                assert_eq!(ok, "OK");
                assert_eq!(get(&mut c, &key).await.unwrap(), Some(value));
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let mut admin = sync_conn(&server);
    let clients: String = redis::cmd("CLIENT").arg("LIST").query(&mut admin).unwrap();
    assert_eq!(
        clients.lines().count(),
        2,
        "one connection for the 64 tasks, one for this check: {clients}"
    );
}

/// A paused server: the command times out; its reply, when it comes, is read and dropped, and
/// the next command gets its own (`two`, never the late `one`).
#[tokio::test(flavor = "current_thread")]
async fn a_late_reply_is_dropped_without_shifting_the_next() {
    let server = redis().await;
    let mut admin = sync_conn(&server);
    for (k, v) in [("lockbench:test:one", "one"), ("lockbench:test:two", "two")] {
        let _: () = redis::cmd("SET").arg(k).arg(v).query(&mut admin).unwrap();
    }
    let timeouts = Timeouts {
        response: Duration::from_millis(100),
        ..Timeouts::default()
    };
    let mut c = connect(&server.url(), timeouts).await;
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(400)
        .arg("ALL")
        .query(&mut admin)
        .unwrap();
    let e = get(&mut c, "lockbench:test:one").await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Timeout, "{e:?}");
    // Until the pause ends these time out too; then the reply is `two`'s own.
    let t0 = Instant::now();
    let got = loop {
        match get(&mut c, "lockbench:test:two").await {
            Ok(v) => break v,
            Err(e) => assert_eq!(e.kind, ErrorKind::Timeout, "{e:?}"),
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the pause never ended"
        );
    };
    assert_eq!(got.as_deref(), Some("two"));
    assert_eq!(
        get(&mut c, "lockbench:test:one").await.unwrap().as_deref(),
        Some("one")
    );
}

/// The server closes the connection (`CLIENT KILL`): at most the first command after it fails,
/// as a connection error, and the next one connects again and succeeds.
#[tokio::test(flavor = "current_thread")]
async fn a_lost_connection_is_made_again_by_the_next_command() {
    let server = redis().await;
    let mut admin = sync_conn(&server);
    let mut c = connect(&server.url(), Timeouts::default()).await;
    assert_eq!(get(&mut c, "lockbench:test:k").await.unwrap(), None);
    let killed = kill_clients(&mut admin);
    assert_eq!(killed, 1);
    if let Err(e) = get(&mut c, "lockbench:test:k").await {
        assert_eq!(e.kind, ErrorKind::Connection, "{e:?}");
    }
    assert_eq!(get(&mut c, "lockbench:test:k").await.unwrap(), None);
    let info: String = redis::cmd("INFO").arg("stats").query(&mut admin).unwrap();
    let received = lockbench::info_field(&info, "total_connections_received:")
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap();
    assert_eq!(received, 3, "admin, the link, the link again: {info}");
}

/// `redis://…/3`: the link selects database 3 on connecting.
#[tokio::test(flavor = "current_thread")]
async fn the_urls_database_is_selected() {
    let server = redis().await;
    let mut c = connect(&format!("{}/3", server.url()), Timeouts::default()).await;
    let _: String = c
        .query(redis::cmd("SET").arg("lockbench:test:db").arg("x"))
        .await
        .unwrap();
    let mut admin = sync_conn(&server);
    let in_0: Option<String> = redis::cmd("GET")
        .arg("lockbench:test:db")
        .query(&mut admin)
        .unwrap();
    assert_eq!(in_0, None);
    let _: () = redis::cmd("SELECT").arg(3).query(&mut admin).unwrap();
    let in_3: Option<String> = redis::cmd("GET")
        .arg("lockbench:test:db")
        .query(&mut admin)
        .unwrap();
    assert_eq!(in_3.as_deref(), Some("x"));
}

/// A server that refuses the client on accepting it (`maxclients`): the connect fails and says
/// why, instead of the refusal turning up later as some command's reply.
#[tokio::test(flavor = "current_thread")]
async fn a_refused_client_fails_its_connect() {
    let server = common::Server::start(lockbench::SpawnedRedis::start_with_args(&[
        "--maxclients",
        "1",
    ]))
    .await;
    let connector = RedisConnector::new(&server.url(), Timeouts::default(), false).unwrap();
    let first = connector.connect().await.unwrap();
    let e = connector
        .connect()
        .await
        .err()
        .expect("the second is refused");
    let e = format!("{e:#}");
    assert!(e.contains("max number of clients"), "{e}");
    drop(first);
}

/// A command given up while it is connecting (a Redlock instance's timeout drops it) does not
/// abandon the connect: the attempt runs on and the link is connected again without another
/// command.
#[tokio::test(flavor = "current_thread")]
async fn a_connect_outlives_the_command_that_started_it() {
    use std::future::Future;
    let server = redis().await;
    let mut admin = sync_conn(&server);
    let mut c = connect(&server.url(), Timeouts::default()).await;
    let clients = |admin: &mut redis::Connection| -> usize {
        let list: String = redis::cmd("CLIENT").arg("LIST").query(admin).unwrap();
        list.lines().count()
    };
    kill_clients(&mut admin);
    // The link notices the lost connection (this command fails) or has already connected again.
    if get(&mut c, "lockbench:test:k").await.is_ok() {
        panic!("the first command after the kill found the link connected: nothing to test");
    }
    assert_eq!(clients(&mut admin), 1, "only this check's connection");
    {
        // Polled once — the connect attempt starts — then dropped, as a timeout would.
        let mut cmd = Box::pin(get(&mut c, "lockbench:test:k"));
        std::future::poll_fn(|cx| {
            assert!(cmd.as_mut().poll(cx).is_pending());
            std::task::Poll::Ready(())
        })
        .await;
    }
    let t0 = Instant::now();
    while clients(&mut admin) < 2 {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "the connect was abandoned with its command"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
