//! Lock libraries of other languages, driven as child processes that speak the driver
//! protocol (`lockbench-driver` 1, JSON lines on stdin and stdout; the book's reference page
//! "Driver protocol"). One process per holder, so a fault of a holder's process hits that
//! holder alone. lockbench keeps every measurement: it times the sections on its own clock,
//! does the resource's read-modify-write itself and reads the server; the driver only does
//! what the library does and says what the library said. rslock, the Rust library, runs in
//! lockbench's own process ([`holder::Holder`] hides the difference).

pub(crate) mod driver;
pub(crate) mod holder;
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
