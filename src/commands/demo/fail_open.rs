//! The `fail-open` story: a server paused with `CLIENT PAUSE` (sent on a connection of its
//! own) and clients of their own connections, which give up and proceed without a lock.

use super::cmd::{Cmd, Reply};
use super::playback::{Playback, Step, compact, ms};
use crate::model::error::{CmdResult, ErrorKind};
use crate::store::Connector;
use anyhow::Context;
use std::io::Write;
use std::time::Duration;

/// How long a fail-open client waits for a reply before it gives up.
pub const FAIL_OPEN_TIMEOUT: Duration = Duration::from_millis(100);
/// How long the fail-open demo pauses the server.
pub const FAIL_OPEN_PAUSE: Duration = Duration::from_millis(1000);

/// Sends `pause` (a [`Cmd::ClientPause`]) on a connection of its own, which is then closed.
async fn client_pause(url: &str, pause: &Cmd<'_>) -> anyhow::Result<Reply> {
    let info = crate::target::check_url(url)?;
    let client = redis::Client::open(info).context("cannot use the Redis URL")?;
    let mut c = client
        .get_multiplexed_async_connection()
        .await
        .context("cannot connect to pause the server")?;
    let r: String = pause
        .to_redis()
        .query_async(&mut c)
        .await
        .context("the server refused CLIENT PAUSE")?;
    Ok(Reply::Status(r))
}

/// The reply a client that gave up shows: none.
fn gave_up(r: &CmdResult<Reply>, timeout: Duration) -> String {
    match r {
        Ok(v) => v.cli(),
        Err(e) if e.kind == ErrorKind::Timeout => format!(
            "(no reply within {}: the client gave up)",
            compact(ms(timeout))
        ),
        Err(e) => format!("(error) {e}"),
    }
}

/// The article's fail-open service ("Lock acquire failed (Redis down?) - degrading to
/// lock-free") against a paused server, on `key` of the server at `url`. The demo pauses every
/// client with `CLIENT PAUSE <pause> ALL`; A and B, each on its own connection with a response
/// timeout of `timeout`, send `SET NX PX`, time out, and proceed without a lock. First with
/// clients that close a connection whose reply timed out (their `SET` never runs: after the
/// pause both see the key absent), then with one that keeps it (its `SET` waits at the server
/// and runs when the pause ends: a lock its owner thinks it does not hold). Returns the
/// transcript; the key is deleted.
pub async fn fail_open<W: Write>(
    url: &str,
    allow_remote: bool,
    key: &str,
    pause: Duration,
    timeout: Duration,
    out: W,
) -> anyhow::Result<Vec<Step>> {
    use crate::store::Timeouts;
    use crate::store::redis::RedisConnector;
    let short = RedisConnector::new(
        url,
        Timeouts {
            connect: Duration::from_secs(5),
            response: timeout,
        },
        allow_remote,
    )?;
    let patient = RedisConnector::new(url, Timeouts::default(), allow_remote)?;
    let mut observer = patient.connect().await?;
    let mut s = Playback::new(&mut observer, out, "close");
    let p = ms(pause);
    let set = |value| Cmd::SetNxPx {
        key,
        value,
        ttl_ms: 30_000,
    };

    for act in ["close", "keep"] {
        let close = act == "close";
        s.title(
            act,
            if close {
                "clients that close the connection when a reply times out"
            } else {
                "a client that keeps its connection (a pooled or multiplexed client)"
            },
        )?;
        // Connections opened before the pause (opening one sends commands too).
        let mut a = short.connect().await?;
        let mut b = if close {
            Some(short.connect().await?)
        } else {
            None
        };
        let pause_cmd = Cmd::ClientPause { ms: p };
        let r = client_pause(url, &pause_cmd).await?;
        s.show("admin", &pause_cmd, r.cli())?;
        s.say(&format!(
            "the server holds every client's commands for {}; {} after {}:",
            compact(p),
            if close {
                "A and B give up"
            } else {
                "A gives up"
            },
            compact(ms(timeout))
        ))?;
        let ra = set("tokA").send(&mut a).await;
        s.show("A", &set("tokA"), gave_up(&ra, timeout))?;
        if ra.is_err() {
            s.say("A: \"Lock acquire failed (Redis down?) - degrading to lock-free\": A enters its critical section without a lock.")?;
        }
        if let Some(mut b) = b.take() {
            drop(a);
            let rb = set("tokB").send(&mut b).await;
            s.show("B", &set("tokB"), gave_up(&rb, timeout))?;
            drop(b);
            if rb.is_err() {
                s.say("B does the same: A and B are both inside, and no lock exists to keep them apart.")?;
            }
            s.say("both closed their connections; once the server answers again, each looks:")?;
            // New connections: their commands wait at the server until the pause ends.
            for who in ["A", "B"] {
                let mut c = patient.connect().await?;
                s.send_on(&mut c, who, Cmd::Exists(key)).await?;
            }
            s.say("neither SET ever ran: the server dropped them with their connections. The lock was never taken; mutual exclusion was simply off while the server did not answer.")?;
        } else {
            s.say("A's client keeps the connection; A's SET is still waiting at the server. The observer's GET waits behind it:")?;
            let held = s.send("observer", Cmd::Get(key)).await? != Reply::Bulk(None);
            s.send("observer", Cmd::Pttl(key)).await?;
            if held {
                s.say("A's timed-out SET ran when the pause ended: a timed-out command is not a failed one. The lock is held for 30 s by a token whose owner believes it holds nothing; B is refused:")?;
            }
            s.send("B", set("tokB")).await?;
            s.say("the article's service still calls releaseLock with A's handle, and its token frees the key:")?;
            s.send("A", Cmd::CompareAndDelete { key, token: "tokA" })
                .await?;
            drop(a);
        }
    }
    Ok(s.steps)
}
