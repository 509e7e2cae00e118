//! Wrongful deletes of a lock library attributed at the server (issue 33): each holder's
//! driver reaches the server through a watch of lockbench's that sends a run key's `DEL` as
//! `GETDEL`, so the value removed names whose lock it was.

use crate::common;

/// What the server executed, from `MONITOR` (through `redis-cli`): each command's client
/// address and arguments, in order.
struct Monitor {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Monitor {
    /// Starts monitoring `port`; returns once the server has said `OK` (monitoring is on).
    fn start(port: u16) -> Monitor {
        use std::io::BufRead;
        let mut child = std::process::Command::new("redis-cli")
            .args(["-p", &port.to_string(), "monitor"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("redis-cli on PATH");
        let out = std::io::BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in out.lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    return;
                }
            }
        });
        let first = lines
            .recv_timeout(std::time::Duration::from_secs(10))
            .unwrap();
        assert_eq!(first, "OK");
        Monitor { child, lines }
    }

    /// Every command up to the `ECHO marker` sent through `admin` (so nothing is missed),
    /// as (client address, arguments).
    fn until(mut self, admin: &mut redis::Connection, marker: &str) -> Vec<(String, Vec<String>)> {
        let _: String = redis::cmd("ECHO").arg(marker).query(admin).unwrap();
        let mut out = Vec::new();
        loop {
            let l = self
                .lines
                .recv_timeout(std::time::Duration::from_secs(10))
                .expect("MONITOR ended before the marker");
            // `1733.123 [0 127.0.0.1:5555] "SET" "k" …`
            let Some((head, args)) = l.split_once("] ") else {
                continue;
            };
            let addr = head.rsplit(' ').next().unwrap_or("").to_string();
            let args: Vec<String> = args
                .split("\" \"")
                .map(|a| a.trim_matches('"').to_string())
                .collect();
            if args.first().map(String::as_str) == Some("ECHO")
                && args.get(1).map(String::as_str) == Some(marker)
            {
                break;
            }
            out.push((addr, args));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        out
    }
}

/// The GETDELs that removed a value another client had set, replayed from the server's
/// command stream: a `SET k v … NX` on an absent key sets it (no lock of these runs expires:
/// every section ends well inside the TTL), a `DEL`/`UNLINK` or `GETDEL` removes it.
/// Returns (GETDELs, of them those that removed another client's value).
fn replay(commands: &[(String, Vec<String>)]) -> (u64, u64) {
    let mut keys: std::collections::HashMap<&str, &str> = Default::default();
    let (mut getdels, mut others) = (0, 0);
    for (addr, args) in commands {
        let name = args[0].to_ascii_uppercase();
        match name.as_str() {
            "SET" if args.len() > 3 && args[3..].iter().any(|a| a.eq_ignore_ascii_case("NX")) => {
                keys.entry(args[1].as_str()).or_insert(addr.as_str());
            }
            "DEL" | "UNLINK" => {
                for k in &args[1..] {
                    keys.remove(k.as_str());
                }
            }
            "GETDEL" => {
                getdels += 1;
                if let Some(setter) = keys.remove(args[1].as_str())
                    && setter != addr
                {
                    others += 1;
                }
            }
            _ => {}
        }
    }
    (getdels, others)
}

/// Each holder's watch on a server connection of its own.
const PER_HOLDER: (&str, &str) = ("LOCKBENCH_WATCH", "per-holder");
/// The holders watched on the wire (a forwarder each), not by their drivers' taps.
const WIRE: (&str, &str) = ("LOCKBENCH_WATCH", "wire");
/// Where the watches' wrongful deletes come from.
const FROM_SERVER: &str = "server (GETDEL through lockbench's watch)";
/// Where the drivers' taps' wrongful deletes come from (the default for driver processes).
const FROM_TAP: &str = "server (GETDEL through the driver's tap)";

/// The source a run's summary must give, by how its holders were watched.
fn source_of(env: &[(&str, &str)]) -> &'static str {
    match env.iter().any(|(k, _)| *k == "LOCKBENCH_WATCH") {
        true => FROM_SERVER,
        false => FROM_TAP,
    }
}

/// The client addresses whose `SET`s the server executed: the connections the holders' locks
/// came on.
fn setters(commands: &[(String, Vec<String>)]) -> std::collections::BTreeSet<&str> {
    commands
        .iter()
        .filter(|(_, a)| a[0].eq_ignore_ascii_case("SET") && a[1].starts_with("lock"))
        .map(|(addr, _)| addr.as_str())
        .collect()
}

/// The watch's figures of a run, checked against each other and the server's commands: every
/// wrongful delete attributed to a deleter and a victim that differ, the server saw exactly the
/// watch's GETDELs, and each section's release is its own lock's, another's, or nothing.
fn consistent(s: &serde_json::Value, commands: &[(String, Vec<String>)], source: &str) {
    assert_eq!(s["wrongful_deletes_source"], source, "{s}");
    let of = |f: &str| s[f].as_u64().unwrap();
    let watch = &s["watch"];
    let attributed = watch["attributed"].as_array().unwrap();
    assert_eq!(attributed.len() as u64, of("wrongful_deletes"), "{watch}");
    for a in attributed {
        let victim = a["victim"].as_u64().expect("a holder's lock");
        assert_ne!(a["deleter"].as_u64().unwrap(), victim, "{a}");
    }
    assert_eq!(
        watch["getdels"].as_u64().unwrap(),
        replay(commands).0,
        "{s}"
    );
    assert_eq!(
        of("released") + of("wrongful_deletes") + of("nothing_deleted"),
        of("sections"),
        "{s}"
    );
}

/// The holders' watches on the wire share one line to the server, and the figures are the
/// watch's as with a connection each — and as the drivers' taps give them, with no watch on
/// the wire (the default). Without faults, npm `redis-lock` (4 holders on one key, 40
/// sections) gives the same figures every way — every section released, one GETDEL each, no
/// wrongful delete — with every lock set on one server connection shared, on 4 per holder
/// (per-holder, and the taps: each holder's own connections). Under the evictions of the
/// negative control (same seed), its plain `DEL`s' wrongful deletes are still caught on the
/// shared line, attributed between different holders.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_lines_keep_the_watch_s_figures() {
    let _cpu = common::shared();
    let server = common::redis().await;
    let mut admin = common::sync_conn(&server);
    let tmp = tempfile::tempdir().unwrap();
    let mut figures = Vec::new();
    // The holders reach their watches by Unix socket (in a private directory under TMPDIR,
    // gone after the run); by loopback TCP when told to, or when TMPDIR's path is too long
    // for a socket's: the figures are the same every way.
    let long_tmp = tmp.path().join("t".repeat(100));
    std::fs::create_dir_all(&long_tmp).unwrap();
    let tcp = ("LOCKBENCH_WATCH_SOCKET", "tcp");
    for (name, env, by) in [
        ("tap", &[][..], "driver tap"),
        ("shared", &[WIRE][..], "unix socket"),
        ("per-holder", &[PER_HOLDER][..], "unix socket"),
        ("tcp", &[WIRE, tcp][..], "loopback tcp"),
        ("long-tmpdir", &[WIRE][..], "loopback tcp"),
    ] {
        let dir = tmp.path().join(name);
        let tmpdir = match name {
            "long-tmpdir" => long_tmp.clone(),
            _ => tmp.path().join(format!("{name}-tmp")),
        };
        std::fs::create_dir_all(&tmpdir).unwrap();
        let monitor = Monitor::start(server.port());
        let mut cmd = common::lockbench(&["run", "--release", "redis-lock"])
            .args(["--redis", &server.url(), "--workers", "4", "--keys", "1"])
            .args(["--busy", "retry", "--ttl", "2s", "--dist", "constant(5ms)"])
            .args(["--sections", "40", "--seed", "5"])
            .env("TMPDIR", tmpdir.to_str().unwrap())
            .out(&dir);
        for (k, v) in env {
            cmd = cmd.env(k, v);
        }
        let o = cmd.output();
        assert_eq!(o.status.code(), Some(0), "{name}: {}", common::text_of(&o));
        let commands = monitor.until(&mut admin, &format!("end of {name}"));
        let s = common::summaries(&dir)[0].clone();
        consistent(&s, &commands, source_of(env));
        assert_eq!(s["watch"]["reached_by"], by, "{name}: {s}");
        let left: Vec<_> = std::fs::read_dir(&tmpdir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n.to_string_lossy().starts_with("lockbench-watch-"))
            .collect();
        assert!(left.is_empty(), "{name}: left in TMPDIR: {left:?}");
        let of = |f: &str| s[f].as_u64().unwrap();
        let watch = |f: &str| s["watch"][f].as_u64().unwrap();
        figures.push((
            name,
            [
                of("sections"),
                of("released"),
                of("wrongful_deletes"),
                of("errors"),
                watch("getdels"),
                watch("removals_outside_releases"),
            ],
        ));
        let connections = setters(&commands).len();
        match name {
            "per-holder" | "tap" => assert!(connections >= 4, "{name}: {connections}: {s}"),
            _ => assert_eq!(connections, 1, "{name}: {s}"),
        }
    }
    // (sections, released, wrongful deletes, errors, GETDELs, removals outside releases)
    for (name, f) in &figures {
        assert_eq!(*f, [40, 40, 0, 0, 40, 0], "{name}: {figures:?}");
    }

    let (s, commands) = evicted(
        &server,
        &mut admin,
        "redis-lock",
        &tmp.path().join("ev"),
        &[WIRE],
    );
    consistent(&s, &commands, FROM_SERVER);
    assert!(s["wrongful_deletes"].as_u64().unwrap() > 0, "{s}");
    assert_eq!(setters(&commands).len(), 1, "{s}");
    server.stop().await;
}

/// A run of `client` on `server` into `dir` — four holders on one key, sections of 800 ms
/// under a TTL of 2 s — while the lock's key vanishes every 700 ms (deleted behind the
/// holders' backs, as an eviction or a failover would): its summary, and the server's
/// commands during it.
fn evicted(
    server: &common::Server,
    admin: &mut redis::Connection,
    client: &str,
    dir: &std::path::Path,
    env: &[(&str, &str)],
) -> (serde_json::Value, Vec<(String, Vec<String>)>) {
    let monitor = Monitor::start(server.port());
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let evictor = {
        let stop = stop.clone();
        let mut conn = common::sync_conn(server);
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                // The fault's own pace, not a wait for anything.
                std::thread::sleep(std::time::Duration::from_millis(700));
                let keys: Vec<String> = redis::cmd("KEYS").arg("lock*").query(&mut conn).unwrap();
                for k in keys {
                    let _: i64 = redis::cmd("DEL").arg(k).query(&mut conn).unwrap();
                }
            }
        })
    };
    let mut cmd = common::lockbench(&["run", "--release", client, "--redis", &server.url()])
        .args(["--workers", "4", "--keys", "1", "--busy", "retry"])
        .args(["--ttl", "2s", "--dist", "constant(800ms)"])
        .args(["--duration", "4s", "--seed", "5"])
        .out(dir);
    for (k, v) in env {
        cmd = cmd.env(k, v);
    }
    let o = cmd.output();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    evictor.join().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{client}: {}",
        common::text_of(&o)
    );
    let commands = monitor.until(admin, &format!("end of {client}"));
    (common::summaries(dir)[0].clone(), commands)
}

/// npm `redis-lock` releases with a plain `DEL` while its own deadline lasts (the negative
/// control): when its lock vanishes before that deadline and another holder takes the key,
/// its release deletes that holder's lock. Every such wrongful delete is attributed at the
/// server to a deleter and a victim that are different holders, and their count is that of
/// the GETDELs that removed another client's value, replayed from the server's own command
/// stream (`MONITOR`); the server saw exactly the watches' GETDELs. redis-py's `Lock`
/// (compare-and-delete) under the same seed and faults: overlap, but no wrongful delete and
/// no GETDEL. With the watch off, the source is the timeline and the server sees no GETDEL.
/// redis-lock's are counted both ways: by its drivers' taps (the default) and on the wire,
/// each holder on server connections of its own (the taps' are, and `LOCKBENCH_WATCH=per-holder`),
/// so that the server's stream tells them apart by address. (redis-py on the wire's shared
/// line, which its HELLO 3 must not leave.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_del_s_wrongful_deletes_are_attributed_at_the_server() {
    let _cpu = common::shared();
    let server = common::redis().await;
    let mut admin = common::sync_conn(&server);
    let tmp = tempfile::tempdir().unwrap();

    // By the drivers' taps (the default), and on the wire.
    for (name, env) in [("tap", &[][..]), ("wire", &[PER_HOLDER][..])] {
        let (s, commands) = evicted(
            &server,
            &mut admin,
            "redis-lock",
            &tmp.path().join(format!("rl-{name}")),
            env,
        );
        assert_eq!(s["wrongful_deletes_source"], source_of(env), "{s}");
        let wrongful = s["wrongful_deletes"].as_u64().unwrap();
        assert!(
            wrongful > 0,
            "the negative control deletes others' locks: {s}"
        );
        let watch = &s["watch"];
        let attributed = watch["attributed"].as_array().unwrap();
        assert_eq!(attributed.len() as u64, wrongful, "{watch}");
        for a in attributed {
            let victim = a["victim"]
                .as_u64()
                .expect("every lock of the run is a holder's");
            assert_ne!(a["deleter"].as_u64().unwrap(), victim, "{a}");
            assert!(a["key"].as_str().unwrap().starts_with("lock."), "{a}");
        }
        let (getdels, of_others) = replay(&commands);
        assert_eq!(watch["getdels"].as_u64().unwrap(), getdels, "{watch}");
        assert_eq!(
            wrongful + watch["removals_outside_releases"].as_u64().unwrap(),
            of_others,
            "{s}"
        );
        // Each section's release is its own lock's, another's, or nothing: the vanished lock
        // lets the next holder in, whose lock the release then deletes, and so on.
        let of = |f: &str| s[f].as_u64().unwrap();
        assert_eq!(
            of("released") + wrongful + of("nothing_deleted"),
            of("sections"),
            "{s}"
        );
    }

    let (s, commands) = evicted(
        &server,
        &mut admin,
        "redis-py",
        &tmp.path().join("py"),
        &[WIRE],
    );
    assert_eq!(s["wrongful_deletes_source"], FROM_SERVER, "{s}");
    // redis-py 8 (HELLO 3, CLIENT MAINT_NOTIFICATIONS that Redis 7 refuses) stays on the line.
    assert_eq!(setters(&commands).len(), 1, "{s}");
    assert!(
        s["overlap_ms"].as_f64().unwrap() > 0.0,
        "locks vanished: {s}"
    );
    assert!(s["refused_unclassified"].as_u64().unwrap() > 0, "{s}");
    assert_eq!(s["wrongful_deletes"], 0, "{s}");
    assert_eq!(replay(&commands), (0, 0), "{s}");

    let off = [("LOCKBENCH_WATCH", "off")];
    let (s, commands) = evicted(
        &server,
        &mut admin,
        "redis-lock",
        &tmp.path().join("off"),
        &off,
    );
    let source = s["wrongful_deletes_source"].as_str().unwrap();
    assert!(source.starts_with("timeline"), "{s}");
    assert_eq!(s.get("watch"), None, "{s}");
    assert_eq!(replay(&commands).0, 0, "{s}");
    assert!(
        commands.iter().any(|(_, a)| a[0] == "DEL"),
        "redis-lock's own DELs"
    );
    server.stop().await;
}

/// The watch never changes what a library can do (issue 40: for a user the ACL denies
/// `GETDEL`, it rewrote every `DEL` into one and every release failed). Such a user's run of
/// npm `redis-lock` (plain `DEL`s) releases every lock, with no error and no `GETDEL` at the
/// server; its wrongful deletes come from the timeline, which says why. The same run as a user
/// who may run `GETDEL` is watched (the control).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_who_may_not_run_getdel_keeps_its_library_s_dels() {
    let _cpu = common::shared();
    let server = common::redis().await;
    let mut admin = common::sync_conn(&server);
    for (user, getdel) in [("no-getdel", "-getdel"), ("all", "+getdel")] {
        let _: () = redis::cmd("ACL")
            .arg("SETUSER")
            .arg(user)
            .arg(&["reset", "on", ">pw", "~*", "+@all", getdel])
            .query(&mut admin)
            .unwrap();
    }
    let tmp = tempfile::tempdir().unwrap();
    let run = |user: &str| {
        let dir = tmp.path().join(user);
        let url = format!("redis://{user}:pw@127.0.0.1:{}", server.port());
        let monitor = Monitor::start(server.port());
        let o = common::lockbench(&["run", "--release", "redis-lock", "--redis", &url])
            .args(["--workers", "2", "--keys", "1", "--busy", "retry"])
            .args(["--ttl", "2s", "--dist", "constant(5ms)", "--sections", "40"])
            .out(&dir)
            .output();
        assert_eq!(o.status.code(), Some(0), "{user}: {}", common::text_of(&o));
        let mut admin = common::sync_conn(&server);
        let commands = monitor.until(&mut admin, &format!("end of {user}"));
        (common::summaries(&dir)[0].clone(), commands)
    };
    let (s, commands) = run("no-getdel");
    assert_eq!(s["errors"], 0, "{s}");
    assert_eq!(s["released"], s["sections"], "{s}");
    let source = s["wrongful_deletes_source"].as_str().unwrap();
    assert!(
        source.starts_with("timeline") && source.contains("may not run GETDEL"),
        "{s}"
    );
    assert_eq!(s.get("watch"), None, "{s}");
    assert_eq!(replay(&commands).0, 0, "no GETDEL: {s}");
    assert!(
        commands.iter().any(|(_, a)| a[0] == "DEL"),
        "redis-lock's own DELs"
    );

    let (s, commands) = run("all");
    assert_eq!(s["errors"], 0, "{s}");
    assert_eq!(s["wrongful_deletes_source"], FROM_TAP, "{s}");
    assert!(replay(&commands).0 > 0, "the watch's GETDELs: {s}");
    server.stop().await;
}

/// A server given as a Unix socket (`--redis unix://…?db=N&pass=…`, redis-rs's form) reaches a
/// Python and a Node library in the drivers' form (`password=`): the run works, its wrongful
/// deletes come from the server through the drivers' taps (a watch on the wire would forward
/// to TCP addresses only), and the
/// password is printed and written nowhere (that each driver honours `db=` is
/// drivers/conformance.py's `unix` check).
#[tokio::test]
async fn a_library_reaches_a_server_given_as_a_unix_socket() {
    let _cpu = common::shared();
    let tmp = tempfile::tempdir().unwrap();
    let sock = tmp.path().join("redis.sock");
    let password = "s&cret pw";
    let server = common::Server::start(lockbench::SpawnedRedis::start_with_args(&[
        "--unixsocket",
        sock.to_str().unwrap(),
        "--unixsocketperm",
        "700",
        "--requirepass",
        password,
    ]))
    .await;
    let url = format!("unix://{}?db=2&pass=s%26cret%20pw", sock.display());
    for lib in ["redis-py", "redis-semaphore"] {
        let dir = tmp.path().join(lib);
        let o = common::lockbench(&["run", "--release", lib, "--redis", &url])
            .args(["--workers", "2", "--keys", "1", "--sections", "20"])
            .args(["--ttl", "1s", "--dist", "constant(2ms)", "--busy", "retry"])
            .out(&dir)
            .output();
        let text = common::text_of(&o);
        assert_eq!(o.status.code(), Some(0), "{lib}: {text}");
        assert!(
            !text.contains("cret"),
            "{lib}: the password printed: {text}"
        );
        let s = common::summaries(&dir)[0].clone();
        assert_eq!(s["sections"], 20, "{lib}: {s}");
        assert_eq!(s["errors"], 0, "{lib}: {s}");
        // The drivers' taps need no address to forward to: the server's own word.
        assert_eq!(s["wrongful_deletes_source"], FROM_TAP, "{lib}: {s}");
        for f in std::fs::read_dir(&dir).unwrap() {
            let f = f.unwrap().path();
            if f.is_file() {
                let bytes = std::fs::read(&f).unwrap();
                assert!(
                    !String::from_utf8_lossy(&bytes).contains("cret"),
                    "{lib}: the password in {}",
                    f.display()
                );
            }
        }
    }
    server.stop().await;
}
