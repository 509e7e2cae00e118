//! The same checks on three servers, each a private instance on a free port: Debian's Redis
//! 7.0 (`redis-server` on PATH), Redis 8.2 and Valkey 8.1 (installed by `scripts/servers.sh`).
//! One test per server and claim, so a failure names the server; the checks are shared.

use crate::common;

use common::{plan, run_redis_data, set_calls, sync_conn};
use lockbench::ReleaseMethod::{Del, Delex, Token};
use lockbench::SpawnedRedis;
use lockbench::Timeouts;
use lockbench::Variant;
use lockbench::run_with;
use lockbench::{RedisConnector, parse_server_version};
use std::time::{Duration, Instant};

/// The servers compared.
#[derive(Debug, Clone, Copy)]
enum Server {
    Redis70,
    Redis82,
    Valkey81,
}

impl Server {
    /// What `INFO server` says, as lockbench reads it (a prefix: Debian's 7.0 patch level
    /// varies).
    fn version(self) -> &'static str {
        match self {
            Server::Redis70 => "redis 7.0.",
            Server::Redis82 => "redis 8.2.3",
            Server::Valkey81 => "valkey 8.1.8",
        }
    }

    /// Starts a private instance and checks it is the server it claims to be, so a test can
    /// never pass on another server than the one it names.
    async fn start(self) -> common::Server {
        let server = match self {
            Server::Redis70 => common::redis().await,
            Server::Redis82 | Server::Valkey81 => {
                let name = match self {
                    Server::Redis82 => "redis-8.2",
                    _ => "valkey-8.1",
                };
                let exe = common::extra_server(name);
                common::Server::start(SpawnedRedis::start_exe(&exe)).await
            }
        };
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query(&mut sync_conn(&server))
            .unwrap();
        let version = parse_server_version(&info);
        assert!(
            version.starts_with(self.version()),
            "{self:?}: the server says it is {version}"
        );
        server
    }
}

/// Keys the server holds (`DBSIZE`) and those under lockbench's prefix (`KEYS lockbench:*`).
fn keys(conn: &mut redis::Connection) -> (u64, Vec<String>) {
    let n: u64 = redis::cmd("DBSIZE").query(conn).unwrap();
    let ours: Vec<String> = redis::cmd("KEYS").arg("lockbench:*").query(conn).unwrap();
    (n, ours)
}

/// The contended `del` vs `token` workload of `tests/it/harness.rs` (seed 17), once per method
/// on `server`, with the server's own counters read around each run.
async fn same_checks_hold(which: Server) {
    let server = which.start().await;
    let mut conn = sync_conn(&server);
    let p = plan(&format!("{}seed = 17\n", common::CONTENTION));
    let mut summaries = Vec::new();
    for method in [Del, Token] {
        let (sets, expired) = (set_calls(&mut conn), common::expired_keys(&mut conn));
        let dir = tempfile::tempdir().unwrap();
        let out = run_redis_data(&server, &p, &[method], dir.path()).await;
        let s = out.summaries.into_iter().next().unwrap();
        let c = &s.counts;
        let (sets, expired) = (
            set_calls(&mut conn) - sets,
            common::expired_keys(&mut conn) - expired,
        );
        let at = format!("{which:?} {method}");
        // Every attempt is exactly one SET the server answered, and nothing else SETs.
        assert_eq!(c.attempts, sets, "{at}: attempts vs the server's SET calls");
        // Every lock a SET created ends exactly once.
        assert_eq!(
            c.sections,
            c.released + c.wrongful_deletes + expired + out.manifest.cleanup_removed_locks,
            "{at}: lock conservation against expired_keys ({expired}): {s:?}"
        );
        if method == Token {
            // Under token a release is refused exactly when its key expired at the server.
            assert_eq!(
                c.stale_releases, expired,
                "{at}: stale releases vs expired_keys"
            );
        }
        assert_eq!(keys(&mut conn).1, Vec::<String>::new(), "{at}: keys left");
        summaries.push(s);
    }
    // The exact checks of harness.rs, `del`'s wrongful deletes > 0 (negative control) among them.
    common::check_contention(&summaries);
}

/// On Redis 7.0: attempts = the server's SET calls, every lock ends exactly once, stale
/// releases = `expired_keys` under `token`, and `del` makes wrongful deletes where `token`
/// makes none (the contention checks of harness.rs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_checks_hold_on_redis_7_0() {
    same_checks_hold(Server::Redis70).await;
}

/// As on Redis 7.0, on Redis 8.2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_checks_hold_on_redis_8_2() {
    same_checks_hold(Server::Redis82).await;
}

/// As on Redis 7.0, on Valkey 8.1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_checks_hold_on_valkey_8_1() {
    same_checks_hold(Server::Valkey81).await;
}

/// A short token workload: enough to write keys and send SETs.
const SHORT: &str = "workers = 4\nkeys = 2\nttl = \"1s\"\nsections = 40\nseed = 17\n";

/// `variants` of `plan` on `server` through the library, expected to be refused before the
/// run: returns the error, after checking that no key was written and no directory made.
async fn refused(
    which: Server,
    server: &SpawnedRedis,
    plan: &lockbench::Plan,
    variants: &[Variant],
) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let c = RedisConnector::new(&server.url(), Timeouts::default(), false).unwrap();
    let err = match run_with(&c, "spawn", plan, variants, &common::opts(&out)).await {
        Ok(o) => panic!("{which:?}: {variants:?} ran: {:?}", o.summaries),
        Err(e) => format!("{e:#}"),
    };
    let mut conn = sync_conn(server);
    assert_eq!(
        keys(&mut conn),
        (0, vec![]),
        "{which:?}: a refused run wrote keys"
    );
    assert!(
        !out.exists(),
        "{which:?}: a refused run made {}",
        out.display()
    );
    err
}

/// `--release delex` is refused before any key is written (no key, no SET call), naming the
/// server, its version and DELEX; `token` on the same server does send SETs (the checks can
/// fail).
async fn delex_is_refused(which: Server) {
    let server = which.start().await;
    let mut conn = sync_conn(&server);
    let err = refused(which, &server, &plan(SHORT), &[Delex.into()]).await;
    assert_eq!(
        set_calls(&mut conn),
        0,
        "{which:?}: SET calls before refusing"
    );
    let (name, version) = which.version().split_once(' ').unwrap();
    assert!(
        err.contains(name) && err.contains(version) && err.contains("DELEX"),
        "{which:?}: {err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    // Negative control: a supported method on the same server writes.
    let dir = tempfile::tempdir().unwrap();
    run_redis_data(&server, &plan(SHORT), &[Token], dir.path()).await;
    assert!(set_calls(&mut conn) >= 40, "{which:?}: token sent no SET");
}

/// Valkey 8.1 has no DELEX: refused before the run, naming valkey 8.1.8 and DELEX.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delex_is_refused_on_valkey_8_1() {
    delex_is_refused(Server::Valkey81).await;
}

/// Redis 8.2 has no DELEX either (8.4 added it): refused, naming redis 8.2.3 and DELEX.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delex_is_refused_on_redis_8_2() {
    delex_is_refused(Server::Redis82).await;
}

/// Sections three times the TTL, four holders, extended every ttl/3 by `extend_with`.
fn extending(with: &str) -> lockbench::Plan {
    plan(&format!(
        "workers = 4\nkeys = 1\nttl = \"30ms\"\ndist = \"constant(90ms)\"\n\
         think = \"constant(2ms)\"\nduration = \"1s\"\nseed = 17\nextend_with = \"{with}\"\n"
    ))
}

fn token_extend() -> Vec<Variant> {
    vec![Variant::parse_with("token+extend", Token.into()).unwrap()]
}

/// `extend_with = "set-ifeq"` runs on Valkey 8.1: sections that outlast ttl/3 are extended
/// without a server error, and the extensions are SETs (the server's SET calls exceed the
/// attempts by at least the extensions). With `extend_with = "script"` (negative control) the
/// same run's extensions send no SET, so the SET count tells which command ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_ifeq_extension_runs_on_valkey_8_1() {
    let server = Server::Valkey81.start().await;
    let mut conn = sync_conn(&server);
    for with in ["set-ifeq", "script"] {
        let before = set_calls(&mut conn);
        let dir = tempfile::tempdir().unwrap();
        let out = run_redis_data(&server, &extending(with), &token_extend(), dir.path()).await;
        let s = &out.summaries[0];
        let c = &s.counts;
        assert!(c.sections >= 3 && c.extensions > 0, "{with}: {s:?}");
        // No server error: Valkey understood every extension. (Not "no extension failure":
        // a watchdog 20 ms late on a loaded machine loses its lock, and that is a failure.)
        assert_eq!(s.errors, 0, "{with}: {:?}", s.first_errors);
        let sets = set_calls(&mut conn) - before;
        let by_set = sets >= c.attempts + c.extensions;
        assert_eq!(
            by_set,
            with == "set-ifeq",
            "{with}: {sets} SET calls, {} attempts, {} extensions",
            c.attempts,
            c.extensions
        );
    }
}

/// `extend_with = "set-ifeq"` is refused before the run on a server without `SET … IFEQ`,
/// writing nothing, with a message naming the server's version and SET … IFEQ.
async fn set_ifeq_is_refused(which: Server) {
    let server = which.start().await;
    let err = refused(which, &server, &extending("set-ifeq"), &token_extend()).await;
    assert!(
        err.contains(which.version()) && err.contains("SET … IFEQ"),
        "{which:?}: {err}"
    );
}

/// Redis 7.0 has no `SET … IFEQ`: the set-ifeq extension is refused (Valkey 8.1 runs it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_ifeq_extension_is_refused_on_redis_7_0() {
    set_ifeq_is_refused(Server::Redis70).await;
}

/// Redis 8.2 has no `SET … IFEQ` either (8.4 added it): refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_ifeq_extension_is_refused_on_redis_8_2() {
    set_ifeq_is_refused(Server::Redis82).await;
}

/// `lockbench run --redis-server PATH -q`: exit code, stderr and how long it took.
fn run_cli(path: &std::path::Path, extra: &[&str]) -> (Option<i32>, String, Duration) {
    let dir = tempfile::tempdir().unwrap();
    // The time is the command's own: a share of the CPU taken before the clock starts, so a
    // test that has the CPU alone is waited for first (24 s of that wait was once counted).
    let _cpu = common::shared();
    let t0 = Instant::now();
    let o = common::Lockbench::new()
        .args(["run", "-q", "--redis-server"])
        .arg(path)
        .arg("--out")
        .arg(dir.path().join("run"))
        .args(extra)
        .output();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
        t0.elapsed(),
    )
}

/// A server binary that does not exist, is not executable, or runs but is no RESP server
/// (exits at once, silently or with a complaint) fails fast with one short line naming the
/// path — and the binary's own complaint when it made one. Negative control: the same command
/// with Valkey's binary runs and exits 0.
#[test]
fn a_bad_server_binary_is_one_line_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    use std::os::unix::fs::PermissionsExt;
    let plain = dir.path().join("not-executable");
    std::fs::write(&plain, "x\n").unwrap();
    std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
    let talker = dir.path().join("talker");
    std::fs::write(&talker, "#!/bin/sh\necho 'no RESP spoken here'\n").unwrap();
    std::fs::set_permissions(&talker, std::fs::Permissions::from_mode(0o755)).unwrap();
    let cases: [(&std::path::Path, Option<i32>, &str); 5] = [
        ("/nonexistent".as_ref(), Some(2), "No such file"),
        (&plain, Some(2), "not an executable file"),
        // Executable on some systems, not on others: either way it is refused.
        ("/etc/hostname".as_ref(), None, ""),
        // Bad input, exit 2, with what would be valid (issue 32: it was 1).
        ("/bin/true".as_ref(), Some(2), "printed nothing"),
        (&talker, Some(2), "give the path of a redis-server"),
    ];
    for (path, code, says) in cases {
        let (got, err, took) = run_cli(path, &["--duration", "300ms"]);
        let at = path.display();
        assert!(got.is_some_and(|c| c != 0), "{at}: exit {got:?}: {err}");
        if code.is_some() {
            assert_eq!(got, code, "{at}: {err}");
        }
        assert_eq!(
            err.trim_end().lines().count(),
            1,
            "{at}: not one line:\n{err}"
        );
        assert!(
            err.contains(&*at.to_string()),
            "{at}: path not named: {err}"
        );
        assert!(err.contains(says), "{at}: does not say `{says}`: {err}");
        assert!(err.len() < 300, "{at}: {} chars: {err}", err.len());
        assert!(took < Duration::from_secs(10), "{at}: took {took:?}");
    }
    let valkey = common::extra_server("valkey-8.1");
    let (got, err, _) = run_cli(&valkey, &["--sections", "20"]);
    assert_eq!(got, Some(0), "{}: {err}", valkey.display());
}

/// Successful calls of `command` so far, from `INFO commandstats` (`calls` minus
/// `failed_calls`: a `NOSCRIPT` answer is a failed `EVALSHA`, the one after `SCRIPT LOAD` the
/// call that released).
fn successful_calls(conn: &mut redis::Connection, command: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(conn).unwrap();
    let Some(line) = info
        .lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{command}:")))
    else {
        return 0;
    };
    let field = |name: &str| -> u64 {
        line.split(',')
            .find_map(|f| f.strip_prefix(name))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    field("calls=") - field("failed_calls=")
}

/// The server's lock-command counters equal the run's figures plus exactly the probes the
/// manifest records, for `del`, `token` and `token+extend`: run as the default user, whose
/// checks `ACL DRYRUN` answers (no probe runs), and as a user without `ACL`, whose checks run
/// on an absent key and are recorded. The old probe ran the release once more than the run
/// (1,501 EVALSHA for 1,500 sections) and recorded nothing.
async fn counters_are_the_figures_plus_the_probes(which: Server) {
    let server = which.start().await;
    let mut conn = sync_conn(&server);
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("noacl")
        .arg("on")
        .arg(">pw")
        .arg("~lockbench:*")
        .arg("+@all")
        .arg("-acl")
        .query(&mut conn)
        .unwrap();
    let p = plan(
        "workers = 4\nkeys = 2\nttl = \"20ms\"\ndist = \"uniform(5ms, 40ms)\"\nsections = 60\nseed = 3\n",
    );
    let d = Variant::from(Token);
    let variants = [
        Variant::from(Del),
        d,
        Variant::parse_with("token+extend", d).unwrap(),
    ];
    let mut recorded_probes = 0;
    for user in ["", "noacl:pw@"] {
        let url = format!("redis://{user}127.0.0.1:{}", server.port());
        for v in variants {
            let names = ["set", "getdel", "evalsha"];
            let before = names.map(|n| successful_calls(&mut conn, n));
            let dir = tempfile::tempdir().unwrap();
            let c = RedisConnector::new(&url, Timeouts::default(), false).unwrap();
            let out = {
                let _cpu = common::shared();
                run_with(&c, "url", &p, &[v], &common::opts(dir.path()))
                    .await
                    .expect("run")
            };
            let after = names.map(|n| successful_calls(&mut conn, n));
            let server_says = |i: usize| after[i] - before[i];
            let probes = &out.manifest.servers[0].probes;
            let probe = |n: &str| probes.get(n).copied().unwrap_or(0);
            recorded_probes += probes.values().sum::<u64>();
            let c = &out.summaries[0].counts;
            let at = format!("{which:?} {} as `{user}`: probes {probes:?}", v.name());
            if user.is_empty() {
                assert!(probes.is_empty(), "{at}: ACL DRYRUN answers, nothing runs");
            }
            assert_eq!(server_says(0), c.attempts + probe("set"), "{at}: SET");
            let releases = c.released
                + c.wrongful_deletes
                + c.nothing_deleted
                + c.refused_expired
                + c.refused_held_by_other;
            let (getdel, evalsha) = match v.release {
                Del => (releases, 0),
                _ => (0, releases + c.extensions + c.extension_failures),
            };
            assert_eq!(server_says(1), getdel + probe("getdel"), "{at}: GETDEL");
            assert_eq!(server_says(2), evalsha + probe("evalsha"), "{at}: EVALSHA");
        }
    }
    // The user without ACL made the checks run: the identity above held with them counted.
    assert!(recorded_probes >= 3, "{which:?}: {recorded_probes} probes");
}

/// On Redis 7.0: INFO commandstats = the run's figures + the recorded probes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_are_the_figures_plus_the_probes_on_redis_7_0() {
    counters_are_the_figures_plus_the_probes(Server::Redis70).await;
}

/// As on Redis 7.0, on Redis 8.2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_are_the_figures_plus_the_probes_on_redis_8_2() {
    counters_are_the_figures_plus_the_probes(Server::Redis82).await;
}

/// As on Redis 7.0, on Valkey 8.1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_are_the_figures_plus_the_probes_on_valkey_8_1() {
    counters_are_the_figures_plus_the_probes(Server::Valkey81).await;
}

/// A `--redis-server` wrapper that never becomes ready (it starts a child and never listens)
/// is given up after the readiness limit, once — not five times over 50 s — with the real wait
/// in the message and the wrapper named; the wrapper's child dies with it (the server runs in
/// a process group of its own, killed as a whole). Before (issue 32) each of the five tries
/// left a `sleep` orphaned. Negative control: the child is alive while lockbench waits.
#[test]
fn a_wrapper_that_never_listens_is_stopped_with_its_children() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let tries = dir.path().join("tries");
    let wrapper = dir.path().join("wrapper");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nsleep 1000 &\necho $! >> {}\nwait\n",
            tries.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let t0 = Instant::now();
    let child = common::Lockbench::new()
        .args(["run", "-q", "--sections", "1", "--redis-server"])
        .arg(&wrapper)
        .arg("--out")
        .arg(dir.path().join("run"))
        .stderr(std::process::Stdio::piped())
        .spawn();
    let alive = |pid: &str| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| s.rfind(')').is_some_and(|c| !s[c + 2..].starts_with('Z')))
    };
    common::wait_until("the wrapper's child", Duration::from_secs(10), || {
        tries.exists()
    });
    std::thread::sleep(Duration::from_millis(100));
    let first = std::fs::read_to_string(&tries).unwrap();
    assert!(
        alive(first.trim()),
        "the child is not running while lockbench waits"
    );
    let o = child.wait_with_output();
    let took = t0.elapsed();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&wrapper.display().to_string())
            && err.contains("did not accept connections within 10 s"),
        "{err}"
    );
    assert!(took < Duration::from_secs(20), "took {took:?}: {err}");
    let children: Vec<String> = std::fs::read_to_string(&tries)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(children.len(), 1, "tried again: {children:?}");
    common::wait_until("the wrapper's child to die", Duration::from_secs(5), || {
        !alive(&children[0])
    });
}
