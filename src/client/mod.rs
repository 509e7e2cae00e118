//! Lock libraries of other languages, driven as child processes that speak the driver
//! protocol (JSON lines on stdin and stdout; the book's reference page
//! "Driver protocol", `lockbench-driver` 2: every line names its holder). A process hosts one
//! holder, so that a fault of a holder's process (a pause, a crash) hits that holder alone, or
//! many (`holders_per_process`), each with its own connections and lock objects, where no
//! fault signals one. lockbench keeps every measurement: it times the sections on its own clock,
//! does the resource's read-modify-write itself and reads the server; the driver only does
//! what the library does and says what the library said. rslock, the Rust library, runs in
//! lockbench's own process ([`holder::Holder`] hides the difference).

pub(crate) mod clock;
pub(crate) mod driver;
pub(crate) mod holder;
mod inbox;
pub(crate) mod line;
mod outgoing;
pub(crate) mod rslock;

use crate::model::client::Client;

/// The environment variable naming the directory the drivers come from: a lockbench checkout,
/// holding `drivers/` and `scripts/drivers.sh`.
pub(crate) const DRIVERS_ROOT_ENV: &str = "LOCKBENCH_DRIVERS_ROOT";

/// The script, under a drivers root, that installs the drivers and prints their command lines.
const DRIVERS_SCRIPT: &str = "scripts/drivers.sh";

/// Where the drivers come from, and why there (for messages): the first of
/// `LOCKBENCH_DRIVERS_ROOT`; the checkout the running binary sits in (a directory above it
/// holding `scripts/drivers.sh`, as `target/release/lockbench` in a clone); the source tree the
/// binary was built from, while it is still there. Why not the build tree alone: a binary
/// copied into another checkout ran that tree's drivers, not its own, and one copied to another
/// machine looked for a path that did not exist there. None found: an error saying where it
/// looked and how to name one.
fn root() -> anyhow::Result<(std::path::PathBuf, String)> {
    use std::path::{Path, PathBuf};
    let has_script = |d: &Path| d.join(DRIVERS_SCRIPT).is_file();
    if let Some(r) = std::env::var_os(DRIVERS_ROOT_ENV) {
        let r = PathBuf::from(r);
        if !has_script(&r) {
            return Err(crate::exit::BadInput(format!(
                "{DRIVERS_ROOT_ENV}={} has no {DRIVERS_SCRIPT}: name a lockbench checkout (the directory holding drivers/ and {DRIVERS_SCRIPT}), or unset it",
                r.display()
            ))
            .into());
        }
        return Ok((r, DRIVERS_ROOT_ENV.to_string()));
    }
    let exe = std::env::current_exe().and_then(|e| e.canonicalize()).ok();
    if let Some(dir) = exe
        .as_deref()
        .and_then(|e| e.ancestors().skip(1).find(|d| has_script(d)))
    {
        return Ok((dir.to_path_buf(), "the checkout lockbench runs from".into()));
    }
    let built = Path::new(env!("CARGO_MANIFEST_DIR"));
    if has_script(built) {
        return Ok((
            built.to_path_buf(),
            "the source tree lockbench was built from".into(),
        ));
    }
    anyhow::bail!(
        "no lock-library drivers found: {DRIVERS_ROOT_ENV} is not set, no directory above {} \
         holds {DRIVERS_SCRIPT}, and the source tree lockbench was built from ({}) is not here. \
         Set {DRIVERS_ROOT_ENV} to a lockbench checkout (the directory holding drivers/ and \
         {DRIVERS_SCRIPT})",
        exe.as_deref()
            .map_or("the lockbench binary".into(), |e| e.display().to_string()),
        built.display()
    )
}

/// The command line that starts `client`'s driver, from `scripts/drivers.sh --command`
/// (which installs the pinned packages first when they are missing or changed). An error
/// says what is missing (Python 3.11, node, npm, the network for the first install).
pub(crate) fn command(client: Client) -> anyhow::Result<Vec<String>> {
    // Asked once per library and process: a compare greets each library before the run and
    // starts its drivers later (the script takes ~0.2 s).
    static KNOWN: std::sync::Mutex<Vec<(Client, Vec<String>)>> = std::sync::Mutex::new(Vec::new());
    let mut known = KNOWN.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, argv)) = known.iter().find(|(c, _)| *c == client) {
        return Ok(argv.clone());
    }
    let argv = ask_command(client)?;
    known.push((client, argv.clone()));
    Ok(argv)
}

/// `scripts/drivers.sh --command NAME`, run.
fn ask_command(client: Client) -> anyhow::Result<Vec<String>> {
    let (root, why) =
        root().map_err(|e| e.context(format!("client {}: its driver", client.name())))?;
    let script = root.join(DRIVERS_SCRIPT);
    let out = std::process::Command::new("bash")
        .arg(&script)
        .args(["--command", client.name()])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| anyhow::anyhow!("cannot run {}: {e}", script.display()))?;
    if !out.status.success() {
        anyhow::bail!(
            "client {}: its driver cannot be set up ({} --command {} failed: {}); drivers come \
             from {} ({why}; {DRIVERS_ROOT_ENV} names another)",
            client.name(),
            script.display(),
            client.name(),
            String::from_utf8_lossy(&out.stderr).trim(),
            root.display()
        );
    }
    let argv: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .filter(|l| !l.is_empty())
        .collect();
    anyhow::ensure!(
        !argv.is_empty(),
        "client {}: {} printed no command",
        client.name(),
        script.display()
    );
    Ok(argv)
}

/// A driver process's resident memory in MB: (the process itself, each holder it hosts), for
/// the estimate a run prints before it starts many. Measured with a probe that greets N holders
/// in one process and reads its `VmRSS` (issue 43): Python 3.11 with redis-py 33 MB, 42 MB with
/// 50 holders, 47 MB with 100; Node with ioredis (redis-semaphore) 62, 69, 74 MB. The other
/// libraries of a language load a little more or less of the same.
pub(crate) fn memory_mb(client: Client) -> (f64, f64) {
    match client {
        Client::RedisPy
        | Client::PythonRedisLock
        | Client::PythonRedisLockRenew
        | Client::Pottery => (33.0, 0.2),
        Client::Redlock5 | Client::Redlock4 | Client::RedisSemaphore | Client::RedisLock => {
            (62.0, 0.15)
        }
        Client::Rslock => (0.0, 0.0),
    }
}

/// Driver processes past which a run says what it will cost before starting them.
pub(crate) const MANY_PROCESSES: usize = 300;

/// What starting `holders` holders of `client`, `per_process` to a process, will cost, when
/// that is worth a word before it starts: more than [`MANY_PROCESSES`] processes, or an
/// estimate of their memory above half of what the machine has free (`available_mb`, from
/// `/proc/meminfo`'s `MemAvailable`; `None` where it cannot be read). `None`: nothing to say.
pub(crate) fn cost_warning(
    client: Client,
    holders: usize,
    per_process: usize,
    available_mb: Option<f64>,
) -> Option<String> {
    let processes = holders.div_ceil(per_process.max(1));
    let (process_mb, holder_mb) = memory_mb(client);
    let mb = processes as f64 * process_mb + holders as f64 * holder_mb;
    let too_much = available_mb.is_some_and(|free| mb > free / 2.0);
    if processes <= MANY_PROCESSES && !too_much {
        return None;
    }
    let free = available_mb.map_or(String::new(), |f| {
        format!(" of the {:.1} GB the machine has free", f / 1024.0)
    });
    let shared = holders.div_ceil(crate::profile::SHARED_HOLDERS_PER_PROCESS);
    let advice = match per_process {
        1 => format!(
            "; --holders-per-process {} would start {shared} processes (where no holder pauses or crashes)",
            crate::profile::SHARED_HOLDERS_PER_PROCESS
        ),
        _ => "; a larger --holders-per-process starts fewer".to_string(),
    };
    Some(format!(
        "warning: client {}: {holders} holders, {per_process} to a driver process, start {processes} processes, an estimated {:.1} GB{free} ({process_mb:.0} MB a process, {holder_mb} MB a holder){advice}",
        client.name(),
        mb / 1024.0
    ))
}

/// `MemAvailable` of `/proc/meminfo`, MB (`None` where it cannot be read: not Linux).
pub(crate) fn available_mb() -> Option<f64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The warning comes past a few hundred processes, or past half the free memory, and says
    /// the estimate; a shared start of the same holders within both says nothing.
    #[test]
    fn a_costly_start_is_announced_with_its_estimate() {
        let w = cost_warning(Client::RedisPy, 1000, 1, None).expect("1,000 processes");
        assert!(w.contains("1000 processes") && w.contains("32.4 GB"), "{w}");
        assert!(w.contains("--holders-per-process 100"), "{w}");
        assert_eq!(
            cost_warning(Client::RedisPy, 1000, 100, Some(24_000.0)),
            None
        );
        let tight = cost_warning(Client::RedisSemaphore, 100, 1, Some(8_000.0)).expect("6 GB of 8");
        assert!(
            tight.contains("of the 7.8 GB the machine has free"),
            "{tight}"
        );
        assert_eq!(
            cost_warning(Client::RedisSemaphore, 100, 1, Some(24_000.0)),
            None
        );
    }
}
