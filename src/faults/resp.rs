//! The RESP streams of one watched connection ([`super::watch`]), as pure functions of the bytes
//! read: requests (arrays of bulk strings; inline commands pass through) and replies (every
//! RESP2 and RESP3 type), matched in order through a [`Queue`] of what each request expects.
//!
//! One rewrite, and only on keys of the run: a plain single-key `DEL k` or `UNLINK k` goes
//! out as `GETDEL k` (it deletes exactly what `DEL` deletes, a string lock) and its reply goes
//! back as `DEL`'s: `:1` when a value came back, `:0` for nil — so the library sees what it
//! would have seen, and the watch sees the value removed. A `SET k v … NX …` answered `+OK`
//! is noted (the holder set `v`). Inside `MULTI` nothing is rewritten (the replies come in
//! `EXEC`'s array). A subscribe, `MONITOR`, a replication stream, a RESP3 push frame or
//! anything unparsable stops attributing on the connection: from then on its bytes pass
//! untouched (replies to requests already rewritten are still translated, in order).
//!
//! Where a reply ends is read by the link's own frame reader ([`crate::store::frame`]); the
//! requests, which lockbench's link only writes, are read here.

use crate::store::frame::{MAX_LINE, frame_len};
use std::collections::VecDeque;

/// What a request forwarded upstream expects of its reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Expect {
    /// Forward the reply as it is.
    Pass,
    /// `SET key value … NX`: `+OK` means the holder set `value`.
    SetNx { key: String, value: Vec<u8> },
    /// A `DEL key` sent as `GETDEL key`: translate the reply and note the value removed.
    GetDel { key: String },
}

/// What a reply told the watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seen {
    /// The holder's `SET … NX` set `value` on `key`.
    Set { key: String, value: Vec<u8> },
    /// The holder's `DEL` removed `value` from `key` (`None`: there was no key).
    Removed { key: String, value: Option<Vec<u8>> },
}

/// The requests in flight on one connection, in order, and whether it still attributes.
/// Shared by its two directions: a request's expectation is queued before the request is
/// forwarded, so its reply always finds it.
#[derive(Debug, Default)]
pub(crate) struct Queue {
    expects: VecDeque<Expect>,
    stopped: bool,
}

/// What the watch of a connection rewrites and notes.
#[derive(Debug, Clone)]
pub(crate) struct Rules {
    /// Rewrite `DEL` to `GETDEL` (the server has it).
    pub(crate) getdel: bool,
    /// The run's key prefix: only keys containing it are rewritten or noted.
    pub(crate) prefix: String,
}

/// The client's side of a connection: bytes from the client to the server.
#[derive(Debug, Default)]
pub(crate) struct Requests {
    buf: Vec<u8>,
    in_multi: bool,
    raw: bool,
    /// The arguments' ranges of the request being read, one vector for all of them.
    args: Vec<std::ops::Range<usize>>,
    /// Complete requests read (what a batch on the shared line is owed in replies).
    pub(crate) commands: u64,
    /// A request was read that needs a server connection of the holder's own
    /// ([`super::share::shareable`]), or what is not a request array.
    pub(crate) needs_own: bool,
    /// The client asked for RESP3 (`HELLO 3`; `HELLO 2` back): its line is the RESP3 one.
    pub(crate) resp3: bool,
    /// The server refuses `CLIENT MAINT_NOTIFICATIONS` (before Redis 8.2): redis-py 8's
    /// request of it on every connection changes nothing and may go on the shared line.
    pub(crate) server_refuses_maint: bool,
}

/// The server's side of a connection: bytes from the server to the client.
#[derive(Debug, Default)]
pub(crate) struct Replies {
    buf: Vec<u8>,
    raw: bool,
}

/// Commands after which replies no longer answer requests one for one (the watch's and
/// observe's streams alike).
pub(crate) const STOPPERS: [&[u8]; 6] = [
    b"SUBSCRIBE",
    b"PSUBSCRIBE",
    b"SSUBSCRIBE",
    b"MONITOR",
    b"SYNC",
    b"PSYNC",
];

impl Requests {
    /// Takes `bytes` read from the client; appends what goes upstream to `out`, and queues
    /// each complete request's expectation in `queue` (`lock` gives it, once per call).
    pub(crate) fn feed(
        &mut self,
        bytes: &[u8],
        rules: &Rules,
        queue: &std::sync::Mutex<Queue>,
        out: &mut Vec<u8>,
    ) {
        if self.raw {
            out.extend_from_slice(bytes);
            return;
        }
        let Requests {
            buf,
            in_multi,
            raw,
            args,
            commands,
            needs_own,
            resp3,
            server_refuses_maint,
        } = self;
        let fed_from = *commands;
        // A read that holds whole requests (the usual case: a library writes each whole, and
        // waits for its reply) is parsed where it lies, not copied first.
        let held = !buf.is_empty();
        if held {
            buf.extend_from_slice(bytes);
        }
        let data: &[u8] = if held { buf } else { bytes };
        let mut q = queue.lock().unwrap_or_else(|p| p.into_inner());
        let mut at = 0;
        while at < data.len() {
            if q.stopped {
                *raw = true;
                break;
            }
            let rest = &data[at..];
            let parsed = if rest[0] == b'*' {
                command_into(rest, args)
            } else {
                inline(rest).map(|p| {
                    p.map(|(len, words)| {
                        *args = words;
                        len
                    })
                })
            };
            let len = match parsed {
                Ok(Some(len)) => len,
                Ok(None) => break,
                Err(_) => {
                    q.stopped = true;
                    *raw = true;
                    *needs_own = true;
                    break;
                }
            };
            let frame = &rest[..len];
            *commands += 1;
            let first_of_read = *commands - 1 == fed_from;
            let line =
                super::share::shares(frame, args, *server_refuses_maint, first_of_read, resp3);
            *needs_own |= !line;
            match expect(in_multi, frame, args, rules) {
                Some(Decision::Stop) => {
                    q.stopped = true;
                    out.extend_from_slice(frame);
                }
                Some(Decision::Rewrite(key)) => {
                    out.extend_from_slice(b"*2\r\n$6\r\nGETDEL\r\n");
                    out.extend_from_slice(format!("${}\r\n", key.len()).as_bytes());
                    out.extend_from_slice(key.as_bytes());
                    out.extend_from_slice(b"\r\n");
                    q.expects.push_back(Expect::GetDel { key });
                }
                Some(Decision::Expect(e)) => {
                    out.extend_from_slice(frame);
                    q.expects.push_back(e);
                }
                // An empty inline line: the server answers nothing.
                None => out.extend_from_slice(frame),
            }
            at += len;
        }
        if *raw {
            out.extend_from_slice(&data[at..]);
            *buf = Vec::new();
        } else if held {
            buf.drain(..at);
        } else {
            buf.extend_from_slice(&bytes[at..]);
        }
    }
}

/// What one request expects, and whether it is rewritten; `in_multi` follows `MULTI`.
fn expect(
    in_multi_now: &mut bool,
    frame: &[u8],
    args: &[std::ops::Range<usize>],
    rules: &Rules,
) -> Option<Decision> {
    let arg = |i: usize| args.get(i).map(|r| &frame[r.clone()]);
    // Compared without an uppercase copy: a request a cycle is worth no allocation.
    let name = arg(0)?;
    let is = |n: &[u8]| name.eq_ignore_ascii_case(n);
    if STOPPERS.iter().any(|s| is(s)) {
        return Some(Decision::Stop);
    }
    let of_run = |k: &[u8]| {
        std::str::from_utf8(k)
            .ok()
            .filter(|k| k.contains(&rules.prefix))
            .map(str::to_string)
    };
    let in_multi = *in_multi_now;
    if is(b"MULTI") {
        *in_multi_now = true;
    } else if is(b"EXEC") || is(b"DISCARD") {
        *in_multi_now = false;
    }
    if in_multi || args.is_empty() || frame[0] != b'*' {
        return Some(Decision::Expect(Expect::Pass));
    }
    let e = match () {
        () if (is(b"DEL") || is(b"UNLINK")) && rules.getdel && args.len() == 2 => {
            match arg(1).and_then(of_run) {
                Some(key) => return Some(Decision::Rewrite(key)),
                None => Expect::Pass,
            }
        }
        () if is(b"SET") && args.len() >= 4 => {
            let opts = || args[3..].iter().map(|r| &frame[r.clone()]);
            let nx = opts().any(|o| o.eq_ignore_ascii_case(b"NX"));
            let get = opts().any(|o| o.eq_ignore_ascii_case(b"GET"));
            match (nx && !get, arg(1).and_then(of_run), arg(2)) {
                (true, Some(key), Some(v)) => Expect::SetNx {
                    key,
                    value: v.to_vec(),
                },
                _ => Expect::Pass,
            }
        }
        _ => Expect::Pass,
    };
    Some(Decision::Expect(e))
}

/// What is done with one request.
enum Decision {
    /// Forwarded, with this expectation.
    Expect(Expect),
    /// Sent as `GETDEL key`.
    Rewrite(String),
    /// Forwarded, and the connection stops attributing.
    Stop,
}

impl Replies {
    /// Takes `bytes` read from the server; appends what goes to the client to `out`, and
    /// calls `seen` for what a reply told (before its bytes are in `out`).
    pub(crate) fn feed(
        &mut self,
        bytes: &[u8],
        queue: &std::sync::Mutex<Queue>,
        out: &mut Vec<u8>,
        mut seen: impl FnMut(Seen),
    ) {
        if self.raw {
            out.extend_from_slice(bytes);
            return;
        }
        let Replies { buf, raw } = self;
        // Whole replies (the usual read) are parsed where they lie, not copied first.
        let held = !buf.is_empty();
        if held {
            buf.extend_from_slice(bytes);
        }
        let data: &[u8] = if held { buf } else { bytes };
        let mut q = queue.lock().unwrap_or_else(|p| p.into_inner());
        let mut at = 0;
        while at < data.len() {
            if q.stopped && q.expects.is_empty() {
                *raw = true;
                break;
            }
            let rest = &data[at..];
            let len = match frame_len(rest) {
                Ok(Some(n)) => n,
                Ok(None) => break,
                Err(_) => {
                    q.stopped = true;
                    *raw = true;
                    break;
                }
            };
            let frame = &rest[..len];
            at += len;
            match frame[0] {
                // Out of band: a push stops attributing, an attribute precedes its reply.
                b'>' => {
                    q.stopped = true;
                    out.extend_from_slice(frame);
                    continue;
                }
                b'|' => {
                    out.extend_from_slice(frame);
                    continue;
                }
                _ => {}
            }
            match q.expects.pop_front() {
                Some(Expect::SetNx { key, value }) if frame == b"+OK\r\n" => {
                    seen(Seen::Set { key, value });
                    out.extend_from_slice(frame);
                }
                Some(Expect::GetDel { key }) => match removed(frame) {
                    Some(value) => {
                        out.extend_from_slice(if value.is_some() {
                            b":1\r\n"
                        } else {
                            b":0\r\n"
                        });
                        seen(Seen::Removed { key, value });
                    }
                    // An error: as DEL's would be.
                    None => out.extend_from_slice(frame),
                },
                _ => out.extend_from_slice(frame),
            }
        }
        if *raw {
            out.extend_from_slice(&data[at..]);
            *buf = Vec::new();
        } else if held {
            buf.drain(..at);
        } else {
            buf.extend_from_slice(&bytes[at..]);
        }
    }
}

/// A `GETDEL` reply's value: `Some(None)` for nil, `None` for what is not a value (an error).
fn removed(frame: &[u8]) -> Option<Option<Vec<u8>>> {
    match frame {
        b"$-1\r\n" | b"_\r\n" => Some(None),
        [b'$', ..] => {
            let (n, head) = line(frame)?;
            let n: usize = n.parse().ok()?;
            Some(Some(frame.get(head..head + n)?.to_vec()))
        }
        _ => None,
    }
}

/// The first line of `buf` (without `\r\n`) and the offset after it; `None` when incomplete.
pub(crate) fn line(buf: &[u8]) -> Option<(&str, usize)> {
    let end = buf.windows(2).position(|w| w == b"\r\n")?;
    Some((std::str::from_utf8(&buf[1..end]).ok()?, end + 2))
}

/// The largest request or reply frame a connection may send: a bigger one closes it (memory
/// per connection stays bounded by it).
pub(crate) const MAX_FRAME: usize = 64 << 20;

/// The length of the line at the start of `buf` read as a number after its type byte.
fn header(buf: &[u8]) -> Result<Option<(i64, usize)>, ()> {
    match line(buf) {
        None if buf.len() > MAX_LINE => Err(()),
        None => Ok(None),
        Some((n, head)) if redis_number(n) => n.parse().map(|n| Some((n, head))).map_err(drop),
        Some(_) => Err(()),
    }
}

/// Whether `n` is a length as Redis reads one: an optional `-`, then digits without a leading
/// zero (Rust's parser would also take `+1` and `05`, which Redis refuses by closing the
/// connection).
fn redis_number(n: &str) -> bool {
    let digits = n.strip_prefix('-').unwrap_or(n);
    !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
}

/// A request parsed at the start of a buffer: its length and its arguments' ranges;
/// `Ok(None)` while incomplete, `Err` for what is not a request.
type Parsed = Result<Option<(usize, Vec<std::ops::Range<usize>>)>, ()>;

/// A request array of bulk strings at the start of `buf`, its arguments' ranges into `args`
/// (cleared first, so a caller that parses many requests reuses one vector): the request's
/// length, `Ok(None)` while incomplete, `Err` for what is not one.
pub(crate) fn command_into(
    buf: &[u8],
    args: &mut Vec<std::ops::Range<usize>>,
) -> Result<Option<usize>, ()> {
    args.clear();
    let Some((n, mut at)) = header(buf)? else {
        return Ok(None);
    };
    let n = usize::try_from(n).unwrap_or(0);
    for _ in 0..n {
        let rest = &buf[at..];
        match rest.first() {
            None => return Ok(None),
            Some(b'$') => {}
            Some(_) => return Err(()),
        }
        let Some((len, head)) = header(rest)? else {
            return Ok(None);
        };
        let len = usize::try_from(len).map_err(drop)?;
        let start = at + head;
        if buf.len() < start + len + 2 {
            return Ok(None);
        }
        if &buf[start + len..start + len + 2] != b"\r\n" {
            return Err(());
        }
        args.push(start..start + len);
        at = start + len + 2;
    }
    Ok(Some(at))
}

/// An inline command at the start of `buf`: its line; its first word is its name.
pub(crate) fn inline(buf: &[u8]) -> Parsed {
    let Some(end) = buf.iter().position(|&b| b == b'\n') else {
        return if buf.len() > MAX_LINE {
            Err(())
        } else {
            Ok(None)
        };
    };
    let words: Vec<_> = buf[..end]
        .split(|b| b.is_ascii_whitespace())
        .filter(|w| !w.is_empty())
        .map(|w| {
            let start = w.as_ptr() as usize - buf.as_ptr() as usize;
            start..start + w.len()
        })
        .take(1)
        .collect();
    Ok(Some((end + 1, words)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lengths Redis refuses (it closes the connection) are not requests here either.
    #[test]
    fn lengths_are_read_as_redis_reads_them() {
        let mut args = Vec::new();
        assert_eq!(
            command_into(b"*1\r\n$4\r\nPING\r\n", &mut args),
            Ok(Some(14))
        );
        for bad in [
            &b"*+1\r\n$4\r\nPING\r\n"[..],
            b"*1\r\n$04\r\nPING\r\n",
            b"*01\r\n",
            b"*1\r\n$\r\n",
        ] {
            assert_eq!(
                command_into(bad, &mut args),
                Err(()),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
    use std::sync::Mutex;

    fn rules() -> Rules {
        Rules {
            getdel: true,
            prefix: "lb:".into(),
        }
    }

    /// Requests fed in two pieces split at `at`: what went upstream and the queue.
    fn requests(bytes: &[u8], at: usize, rules: &Rules) -> (Vec<u8>, Queue) {
        let queue = Mutex::new(Queue::default());
        let (mut r, mut out) = (Requests::default(), Vec::new());
        r.feed(&bytes[..at], rules, &queue, &mut out);
        r.feed(&bytes[at..], rules, &queue, &mut out);
        (out, queue.into_inner().unwrap())
    }

    /// Replies fed in two pieces split at `at` against `expects`: what went to the client and
    /// what was seen.
    fn replies(bytes: &[u8], at: usize, expects: &[Expect]) -> (Vec<u8>, Vec<Seen>, bool) {
        let queue = Mutex::new(Queue {
            expects: expects.iter().cloned().collect(),
            stopped: false,
        });
        let (mut r, mut out, mut seen) = (Replies::default(), Vec::new(), Vec::new());
        r.feed(&bytes[..at], &queue, &mut out, |s| seen.push(s));
        r.feed(&bytes[at..], &queue, &mut out, |s| seen.push(s));
        let stopped = queue.into_inner().unwrap().stopped;
        (out, seen, stopped)
    }

    fn cmd(args: &[&str]) -> Vec<u8> {
        let mut v = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            v.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
        v
    }

    /// Pipelined requests, split at every position: the single-key DEL of a run's key goes
    /// out as GETDEL, a DEL of two keys, a DEL of a key not of the run, an inline command and
    /// a DEL inside MULTI pass untouched; a SET NX of a run's key is expected.
    #[test]
    fn requests_split_anywhere_rewrite_only_a_single_key_del() {
        let parts = [
            cmd(&["SET", "lb:1", "tok", "NX", "PX", "100"]),
            cmd(&["del", "lb:1"]),
            cmd(&["DEL", "lb:1", "lb:2"]),
            cmd(&["DEL", "other"]),
            b"PING\r\n".to_vec(),
            cmd(&["MULTI"]),
            cmd(&["DEL", "lb:3"]),
            cmd(&["EXEC"]),
            cmd(&["UNLINK", "lb:4"]),
        ];
        let all: Vec<u8> = parts.concat();
        let mut want = all.clone();
        let del = cmd(&["del", "lb:1"]);
        let pos = want.windows(del.len()).position(|w| w == del).unwrap();
        want.splice(pos..pos + del.len(), cmd(&["GETDEL", "lb:1"]));
        let unlink = cmd(&["UNLINK", "lb:4"]);
        let pos = want
            .windows(unlink.len())
            .position(|w| w == unlink)
            .unwrap();
        want.splice(pos..pos + unlink.len(), cmd(&["GETDEL", "lb:4"]));
        for at in 0..=all.len() {
            let (out, q) = requests(&all, at, &rules());
            assert_eq!(out, want, "split at {at}");
            let expects: Vec<_> = q.expects.into_iter().collect();
            let set = Expect::SetNx {
                key: "lb:1".into(),
                value: b"tok".to_vec(),
            };
            let gd = |k: &str| Expect::GetDel { key: k.into() };
            let p = Expect::Pass;
            assert_eq!(
                expects,
                vec![
                    set,
                    gd("lb:1"),
                    p.clone(),
                    p.clone(),
                    p.clone(),
                    p.clone(),
                    p.clone(),
                    p,
                    gd("lb:4")
                ],
                "split at {at}"
            );
            assert!(!q.stopped);
        }
        // Without GETDEL on the server, nothing is rewritten.
        let no = Rules {
            getdel: false,
            ..rules()
        };
        assert_eq!(requests(&all, 3, &no).0, all);
    }

    /// A subscribe stops attributing: it and everything after it pass untouched.
    #[test]
    fn a_subscribe_stops_the_rewrites() {
        let all = [cmd(&["SUBSCRIBE", "ch"]), cmd(&["DEL", "lb:1"])].concat();
        for at in 0..=all.len() {
            let (out, q) = requests(&all, at, &rules());
            assert_eq!(out, all, "split at {at}");
            assert!(q.stopped && q.expects.is_empty());
        }
    }

    /// Replies split at every position: a GETDEL's value maps to `:1`, its nil (RESP2 and
    /// RESP3) to `:0`, an error passes; `+OK` to a SET NX is seen; other replies (a bulk, an
    /// array with a nested map, a verbatim string) pass untouched.
    #[test]
    fn replies_split_anywhere_translate_getdel() {
        let gd = |k: &str| Expect::GetDel { key: k.into() };
        let set = Expect::SetNx {
            key: "lb:1".into(),
            value: b"v".to_vec(),
        };
        let expects = [
            set,
            gd("lb:1"),
            gd("lb:2"),
            gd("lb:3"),
            gd("lb:4"),
            Expect::Pass,
            Expect::Pass,
            Expect::Pass,
        ];
        let all: &[u8] = b"+OK\r\n$5\r\nab\r\nc\r\n$-1\r\n_\r\n-WRONGTYPE x\r\n$3\r\nxyz\r\n*2\r\n%1\r\n+a\r\n:1\r\n$-1\r\n=7\r\ntxt:abc\r\n";
        let want: &[u8] =
            b"+OK\r\n:1\r\n:0\r\n:0\r\n-WRONGTYPE x\r\n$3\r\nxyz\r\n*2\r\n%1\r\n+a\r\n:1\r\n$-1\r\n=7\r\ntxt:abc\r\n";
        for at in 0..=all.len() {
            let (out, seen, stopped) = replies(all, at, &expects);
            assert_eq!(out, want, "split at {at}");
            assert_eq!(
                seen,
                vec![
                    Seen::Set {
                        key: "lb:1".into(),
                        value: b"v".to_vec()
                    },
                    Seen::Removed {
                        key: "lb:1".into(),
                        value: Some(b"ab\r\nc".to_vec())
                    },
                    Seen::Removed {
                        key: "lb:2".into(),
                        value: None
                    },
                    Seen::Removed {
                        key: "lb:3".into(),
                        value: None
                    },
                ],
                "split at {at}"
            );
            assert!(!stopped);
        }
    }

    /// A SET NX answered nil set nothing; a RESP3 push passes untouched, is not a reply, and
    /// stops attributing (the reply queued before it is still translated).
    #[test]
    fn a_push_passes_and_stops_attributing() {
        let set = Expect::SetNx {
            key: "lb:1".into(),
            value: b"v".to_vec(),
        };
        let all: &[u8] = b"$-1\r\n>2\r\n+invalidate\r\n*1\r\n$4\r\nlb:1\r\n$1\r\nv\r\n+PONG\r\n";
        let want: &[u8] = b"$-1\r\n>2\r\n+invalidate\r\n*1\r\n$4\r\nlb:1\r\n:1\r\n+PONG\r\n";
        for at in 0..=all.len() {
            let (out, seen, stopped) = replies(
                all,
                at,
                &[set.clone(), Expect::GetDel { key: "lb:1".into() }],
            );
            assert_eq!(out, want, "split at {at}");
            assert_eq!(seen.len(), 1, "split at {at}: {seen:?}");
            assert!(stopped);
        }
    }

    /// What one read of requests decides about the shared line: reads, writes and scripts
    /// share; `HELLO 3` opening a read switches the protocol and shares, inside a read it needs
    /// a connection of its own; so do `MULTI`, `AUTH`, an inline command, and redis-py 8's
    /// `CLIENT MAINT_NOTIFICATIONS` unless the server refuses it. Every request is counted.
    #[test]
    fn which_reads_may_go_on_the_shared_line() {
        let read = |parts: &[Vec<u8>], refuses_maint: bool| {
            let queue = Mutex::new(Queue::default());
            let mut r = Requests {
                server_refuses_maint: refuses_maint,
                ..Requests::default()
            };
            r.feed(&parts.concat(), &rules(), &queue, &mut Vec::new());
            (r.needs_own, r.resp3, r.commands)
        };
        let set = cmd(&["SET", "lb:1", "v", "NX", "PX", "100"]);
        let hello = cmd(&["HELLO", "3"]);
        let maint = cmd(&[
            "CLIENT",
            "MAINT_NOTIFICATIONS",
            "ON",
            "moving-endpoint-type",
            "ip",
        ]);
        let setinfo = cmd(&["CLIENT", "SETINFO", "LIB-NAME", "x"]);
        let evalsha = cmd(&["EVALSHA", "abc", "1", "lb:1", "v"]);
        let shared = [
            vec![set.clone(), cmd(&["del", "lb:1"]), evalsha, cmd(&["PING"])],
            vec![setinfo, cmd(&["INFO"]), cmd(&["SELECT", "0"])],
        ];
        for parts in &shared {
            assert_eq!(read(parts, false), (false, false, parts.len() as u64));
        }
        assert_eq!(
            read(&[hello.clone(), cmd(&["PING"])], false),
            (false, true, 2)
        );
        assert_eq!(
            read(&[hello.clone(), maint.clone()], true),
            (false, true, 2)
        );
        assert_eq!(read(&[hello.clone(), maint], false), (true, true, 2));
        assert_eq!(read(&[cmd(&["PING"]), hello], false), (true, true, 2));
        for own in [
            cmd(&["MULTI"]),
            cmd(&["AUTH", "pw"]),
            cmd(&["SELECT", "1"]),
            cmd(&["WATCH", "lb:1"]),
            cmd(&["SUBSCRIBE", "c"]),
            b"PING\r\n".to_vec(),
        ] {
            let (needs_own, ..) = read(&[set.clone(), own.clone()], false);
            assert!(needs_own, "{}", String::from_utf8_lossy(&own));
        }
    }

    /// What is not RESP passes untouched and stops attributing.
    #[test]
    fn garbage_passes_untouched() {
        let (out, seen, stopped) = replies(b"?what\r\n+OK\r\n", 3, &[Expect::Pass]);
        assert_eq!(out, b"?what\r\n+OK\r\n");
        assert!(seen.is_empty() && stopped);
        let bad = b"*1\r\n:1\r\n*1\r\n$3\r\nDEL\r\n";
        let (out, q) = requests(bad, 2, &rules());
        assert_eq!(out, bad);
        assert!(q.stopped);
    }
}
