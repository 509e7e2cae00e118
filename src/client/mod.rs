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

/// The repository's `drivers/` and `scripts/drivers.sh`: `LOCKBENCH_DRIVERS_ROOT`, else the
/// source tree lockbench was built from.
fn root() -> std::path::PathBuf {
    std::env::var_os("LOCKBENCH_DRIVERS_ROOT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")))
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
    let script = root().join("scripts/drivers.sh");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .args(["--command", client.name()])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| anyhow::anyhow!("cannot run {}: {e}", script.display()))?;
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr);
        anyhow::bail!(
            "client {}: its driver cannot be set up ({} --command {} failed: {})",
            client.name(),
            script.display(),
            client.name(),
            why.trim()
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
