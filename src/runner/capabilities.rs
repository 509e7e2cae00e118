//! What a server can do, asked before a run: which lock commands it knows (recorded in the
//! manifest), whether a variant's release and extension can run on it, and the label its
//! variants carry when several servers run side by side.

use super::Target;
use crate::exit::BadInput;
use crate::model::release::{ExtendCommand, ReleaseMethod};
use crate::model::script::UserScripts;
use crate::model::server::{ServerInfo, SkippedCell};
use crate::model::variant::Variant;
use crate::profile::Plan;
use crate::store::{Connector, LockConn, ServerProbes};
use crate::target::redact_url;
use anyhow::bail;

/// The label of a server in variant names: `valkey-8.1.8`.
pub(crate) fn server_label(version: &str) -> String {
    version.trim().replace(' ', "-")
}

/// Lock commands a check ran on a server, by their `INFO commandstats` name, with counts
/// (recorded in the manifest as the server's `probes`).
pub(crate) type Probes = std::collections::BTreeMap<String, u64>;

/// Counts one probe command run on the server.
pub(super) fn ran(probes: &mut Probes, name: &str) {
    *probes.entry(name.to_string()).or_default() += 1;
}

/// Which lock commands a server knows, asked of its command table (`COMMAND INFO`; `SET …
/// IFEQ` from `COMMAND DOCS SET`), not guessed from its version; where `COMMAND` is not
/// permitted, `ACL DRYRUN` answers for the command table; otherwise `None`. No lock command
/// is run, so the server's counters stay the run's.
pub(super) async fn probe_capabilities<C: LockConn>(
    probe: &mut C,
    prefix: &str,
) -> std::collections::BTreeMap<String, Option<bool>> {
    let key = format!("{prefix}:probe");
    let mut out = std::collections::BTreeMap::new();
    for name in ["GETDEL", "DELEX", "DELIFEQ", "EVALSHA", "FUNCTION"] {
        let known = match probe.supports_command(name).await {
            Ok(k) => Some(k),
            Err(_) => match probe.dry_run(&probe_args(name, &key)).await {
                Ok(Ok(())) => Some(true),
                // Known but not permitted is still known.
                Ok(Err(why)) => Some(!why.unknown_command()),
                Err(_) => None,
            },
        };
        out.insert(name.to_string(), known);
    }
    // From the command table: a probing SET would count among the run's SETs.
    let ifeq = probe.knows_set_ifeq().await.ok();
    out.insert("SET IFEQ".to_string(), ifeq);
    out
}

/// The arguments a check asks `ACL DRYRUN` about for `command`, on the absent `key`.
fn probe_args<'a>(command: &'a str, key: &'a str) -> Vec<&'a str> {
    const SHA: &str = "0000000000000000000000000000000000000000";
    match command {
        "GETDEL" => vec!["GETDEL", key],
        "DELEX" => vec!["DELEX", key, "IFEQ", "probe"],
        "EVALSHA" => vec!["EVALSHA", SHA, "1", key, "probe"],
        "SCRIPT LOAD" => vec!["SCRIPT", "LOAD", "return 0"],
        other => vec![other],
    }
}

/// Refuses `extend_with = "set-ifeq"` on a server without `SET … IFEQ`, before the run:
/// extending an absent key under the run's prefix answers `0`/nil where the server knows IFEQ
/// and an error where it does not (it writes nothing either way, but counts as a `SET`: it is
/// recorded in `probes`).
pub(super) async fn check_set_ifeq<C: LockConn>(
    probe: &mut C,
    server_version: &str,
    prefix: &str,
    probes: &mut Probes,
) -> anyhow::Result<()> {
    let key = format!("{prefix}:probe");
    // The command table first: no SET is sent, so the server's SET count stays the run's.
    match probe.knows_set_ifeq().await {
        Ok(true) => return Ok(()),
        Ok(false) => {
            return Err(BadInput(format!(
                "extend_with = \"set-ifeq\" needs SET … IFEQ (Valkey ≥ 8.1, Redis ≥ 8.4); this server is \
                 {server_version} and its command table (COMMAND DOCS SET) has no IFEQ. Use \
                 extend_with = \"script\" (compare-and-PEXPIRE works on every version)."
            ))
            .into());
        }
        // COMMAND DOCS not permitted (or too old): try the option on an absent key.
        Err(_) => {}
    }
    ran(probes, "set");
    match probe.extend(&key, "probe", 1_000, ExtendCommand::SetIfeq).await {
        Ok(_) => Ok(()),
        Err(e) if e.kind != crate::model::error::ErrorKind::Server => {
            Err(anyhow::anyhow!("cannot check SET … IFEQ on {server_version}: {e}"))
        }
        Err(e) => Err(BadInput(format!(
            "extend_with = \"set-ifeq\" needs SET … IFEQ (Valkey ≥ 8.1, Redis ≥ 8.4); this server is \
             {server_version} and answered `SET {key} probe IFEQ probe PX 1000` with: {}. Use \
             extend_with = \"script\" (compare-and-PEXPIRE works on every version).",
            e.detail
        ))
        .into()),
    }
}

/// Refuses a release method the server cannot run for this user, before the run: a command
/// the server lacks (naming the version that has it), or one the ACL forbids. `ACL DRYRUN`
/// answers without running anything; where it cannot (Redis < 7.0, or `ACL` not permitted),
/// the command is run on an absent key under `prefix` (the run's own, so nothing outside it
/// is touched) to tell "unknown" from "not permitted", and counted in `probes`.
pub(super) async fn check_support<C: LockConn>(
    probe: &mut C,
    method: ReleaseMethod,
    scripts: Option<&UserScripts>,
    server_version: &str,
    prefix: &str,
    probes: &mut Probes,
) -> anyhow::Result<()> {
    if method == ReleaseMethod::Script {
        return check_user_scripts(probe, scripts, prefix, probes).await;
    }
    let (command, since, instead) = match method {
        // Checked above.
        ReleaseMethod::Script => ("EVALSHA", "2.6", ""),
        ReleaseMethod::Del => (
            "GETDEL",
            "6.2",
            "Upgrade the server: `del` releases are attributed with GETDEL, which deletes exactly as DEL does and returns whose lock it removed.",
        ),
        ReleaseMethod::Delex => (
            "DELEX",
            "8.4",
            "Use `token` (the Lua compare-and-delete works on every version).",
        ),
        ReleaseMethod::Token => ("EVALSHA", "2.6", "Use `del` or `delex`."),
    };
    // Bad input (exit 2): the user asked for a method this server cannot run.
    let unknown = || -> anyhow::Error {
        BadInput(format!(
            "release method `{method}` needs {command}, which Redis added in {since}; this server is {server_version} \
             and does not know it (or it was renamed or disabled). {instead}"
        ))
        .into()
    };
    let mut note = "";
    // Scripts exist on every supported version; only their permission needs checking.
    if method != ReleaseMethod::Token {
        match probe.supports_command(command).await {
            Ok(true) => {}
            Ok(false) => return Err(unknown()),
            Err(e) if e.is_no_permission() => {
                note = " (COMMAND INFO, the usual support check, is not permitted for this user either)";
            }
            Err(e) => bail!(
                "cannot check whether the server supports {command}: COMMAND INFO failed: {e}"
            ),
        }
    }
    // redis-rs answers NOSCRIPT with SCRIPT LOAD, then EVALSHA again.
    let (needs, grant) = match method {
        ReleaseMethod::Token => (
            "EVALSHA and SCRIPT LOAD",
            "+evalsha +script|load".to_string(),
        ),
        _ => (command, format!("+{}", command.to_ascii_lowercase())),
    };
    let forbidden = |why: &dyn std::fmt::Display| -> anyhow::Error {
        BadInput(format!(
            "release method `{method}` needs {needs}, which this Redis user is not permitted to run on the run's keys ({prefix}:*){note}: {why}. \
             Grant it (e.g. ACL SETUSER <user> {grant} ~lockbench:*) or use another --release."
        ))
        .into()
    };
    let key = format!("{prefix}:probe");
    let asked: &[&str] = match method {
        ReleaseMethod::Token | ReleaseMethod::Script => &["EVALSHA", "SCRIPT LOAD"],
        _ => &[command],
    };
    let mut answered = true;
    for c in asked {
        match probe.dry_run(&probe_args(c, &key)).await {
            Ok(Ok(())) => {}
            Ok(Err(why)) if why.unknown_command() => return Err(unknown()),
            Ok(Err(why)) => return Err(forbidden(&why)),
            Err(_) => {
                answered = false;
                break;
            }
        }
    }
    if answered {
        return Ok(());
    }
    // Run on an absent key, each is harmless: nothing to delete, nothing to compare.
    let tried = match method {
        ReleaseMethod::Del => {
            ran(probes, "getdel");
            probe.getdel(&key).await.map(drop)
        }
        ReleaseMethod::Delex => {
            ran(probes, "delex");
            probe.delex(&key, "probe").await.map(drop)
        }
        // Loaded first, so the EVALSHA finds it: one call of each, whatever the cache held.
        ReleaseMethod::Token | ReleaseMethod::Script => {
            ran(probes, "script|load");
            match probe.load_release_script().await {
                Ok(()) => {
                    ran(probes, "evalsha");
                    probe.release_script(&key, "probe").await.map(drop)
                }
                Err(e) => Err(e),
            }
        }
    };
    match tried {
        Ok(()) => Ok(()),
        Err(e) if e.is_unknown_command() => Err(unknown()),
        Err(e) if e.is_no_permission() => Err(forbidden(&e)),
        Err(e) => {
            bail!("cannot check release method `{method}`: {command} on an absent key failed: {e}")
        }
    }
}

/// Loads the user's scripts (`SCRIPT LOAD`: compiled, not run, so no key is touched; each
/// counted in `probes`), once per server, after asking `ACL DRYRUN` whether this user may run
/// them. A script the server cannot compile, a store that cannot run Lua, or a user who may not
/// is bad input that names the script.
async fn check_user_scripts<C: LockConn>(
    probe: &mut C,
    scripts: Option<&UserScripts>,
    prefix: &str,
    probes: &mut Probes,
) -> anyhow::Result<()> {
    let Some(scripts) = scripts else {
        return Err(BadInput(
            "release method `script` runs your own release script: give it with release_script = \"FILE\" (--release-script FILE)".to_string(),
        )
        .into());
    };
    let key = format!("{prefix}:probe");
    let forbidden = |why: &dyn std::fmt::Display| -> anyhow::Error {
        BadInput(format!(
            "release method `script` needs EVALSHA and SCRIPT LOAD, which this Redis user is not permitted to run on the run's keys ({prefix}:*): {why}. \
             Grant them (e.g. ACL SETUSER <user> +evalsha +script|load ~lockbench:*) or use another --release."
        ))
        .into()
    };
    let lua = scripts.all().any(|s| s.commands.is_none());
    for c in ["EVALSHA", "SCRIPT LOAD"].into_iter().filter(|_| lua) {
        if let Ok(Err(why)) = probe.dry_run(&probe_args(c, &key)).await
            && !why.unknown_command()
        {
            return Err(forbidden(&why));
        }
    }
    for s in scripts.all() {
        if let Some(steps) = &s.commands {
            check_commands(probe, s, steps, &key).await?;
            continue;
        }
        ran(probes, "script|load");
        match probe.load_user_script(&s.text).await {
            Ok(sha) if sha.eq_ignore_ascii_case(&s.sha1) => {}
            Ok(sha) => bail!(
                "{}: the server named it {sha}, lockbench hashed it {}: is a proxy rewriting scripts?",
                s.label(),
                s.sha1
            ),
            Err(e) if e.is_no_permission() => return Err(forbidden(&e)),
            Err(e) if e.kind == crate::model::error::ErrorKind::Server => {
                return Err(BadInput(format!(
                    "{}: the server cannot load it (SCRIPT LOAD answered: {}). Fix the Lua; \
                     `redis-cli SCRIPT LOAD \"$(cat {})\"` shows the same",
                    s.label(),
                    e.detail,
                    s.path
                ))
                .into());
            }
            // The in-process model (`auto` without redis-server installed).
            Err(e) if e.kind == crate::model::error::ErrorKind::Other => {
                return Err(BadInput(format!(
                    "{}: {}; install redis-server (backend = \"spawn\") or give --redis URL",
                    s.label(),
                    e.detail
                ))
                .into());
            }
            Err(e) => bail!("cannot load {}: {e}", s.label()),
        }
    }
    Ok(())
}

/// A step given as commands, checked without running it: the server must know each command
/// (`COMMAND GETKEYS`), each must touch the lock's key and no other (lockbench never touches a
/// key outside its run's prefix), and this user must be permitted to run it (`ACL DRYRUN`).
async fn check_commands<C: LockConn>(
    probe: &mut C,
    s: &crate::model::script::UserScript,
    steps: &[crate::model::script::CommandStep],
    key: &str,
) -> anyhow::Result<()> {
    for (i, step) in steps.iter().enumerate() {
        let args = step.args(key, "probe-token", 1000);
        let at = |why: String| -> anyhow::Error {
            BadInput(format!(
                "{}, command {} (`{}`): {why}",
                s.label(),
                i + 1,
                step.words.join(" ")
            ))
            .into()
        };
        match probe.command_keys(&args).await {
            Ok(Ok(keys)) if keys.iter().all(|k| k == key) => {}
            Ok(Ok(keys)) => {
                return Err(at(format!(
                    "it would touch {} besides the lock's key; lockbench touches only its run's keys: name no other key",
                    keys.len() - keys.iter().filter(|k| *k == key).count()
                )));
            }
            Ok(Err(why)) => return Err(at(format!("the server refuses it ({why})"))),
            Err(e) if e.kind == crate::model::error::ErrorKind::Other => {
                return Err(at(format!(
                    "{}; install redis-server (backend = \"spawn\") or give --redis URL",
                    e.detail
                )));
            }
            Err(e) => bail!("cannot check {}: {e}", s.label()),
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        if let Ok(Err(why)) = probe.dry_run(&refs).await {
            return Err(at(format!("this Redis user may not run it: {why}")));
        }
    }
    Ok(())
}

/// Refuses, before the run, a resource whose store does not let this user run the resource's
/// scripts on the run's keys (asked with `ACL DRYRUN`, which runs nothing; a server that
/// cannot be asked is not checked): its writes would all fail, and the run would show 0 lost
/// updates for a resource nobody wrote.
async fn check_resource<C: LockConn>(
    probe: &mut C,
    prefix: &str,
    store: Option<String>,
) -> anyhow::Result<()> {
    let key = format!("{prefix}:probe:res");
    for c in ["EVALSHA", "SCRIPT LOAD"] {
        if let Ok(Err(why)) = probe.resource_dry_run(&probe_args(c, &key)).await {
            let at = store
                .as_deref()
                .map_or("the lock's server".to_string(), |s| {
                    format!("the protected resource's store ({})", redact_url(s))
                });
            return Err(BadInput(format!(
                "the protected resource needs EVALSHA and SCRIPT LOAD on the run's keys ({prefix}:*), which {at} does not permit this Redis user: {why}. \
                 Grant them (e.g. ACL SETUSER <user> +evalsha +script|load ~lockbench:*)"
            ))
            .into());
        }
    }
    Ok(())
}

/// What asking every target before a run gave.
pub(crate) struct Probed<C> {
    /// A connection to each target, for the probes, the read-backs and the cleanup.
    pub(crate) probes: Vec<C>,
    /// Each target as the manifest records it.
    pub(crate) servers: Vec<ServerInfo>,
    /// (target index, variant, name) of every cell that will run.
    pub(crate) cells: Vec<(usize, Variant, String)>,
    /// The cells a server cannot run, and why (with several servers; with one it is an error).
    pub(crate) skipped: Vec<SkippedCell>,
}

/// Connects to every target, asks what it can do, and decides which variant runs where. A
/// method a server lacks is bad input with one server, a skipped cell with several; with no
/// cell left the run is refused before anything runs. Probes touch only keys under `prefix`.
pub(crate) async fn probe_targets<K: Connector>(
    targets: &[Target<'_, K>],
    variants: &[Variant],
    plan: &Plan,
    prefix: &str,
) -> anyhow::Result<Probed<K::Conn>> {
    let several = targets.len() > 1;
    let mut probes = Vec::new();
    let mut servers = Vec::new();
    let mut cells: Vec<(usize, Variant, String)> = Vec::new();
    let mut skipped = Vec::new();
    for (ti, t) in targets.iter().enumerate() {
        let mut probe = t.connector.connect().await?;
        let server_version = probe.server_version().await.map_err(|e| {
            anyhow::anyhow!("{} did not answer INFO server: {e}", t.connector.describe())
        })?;
        let capabilities = probe_capabilities(&mut probe, prefix).await;
        if plan.protection.resource {
            check_resource(&mut probe, prefix, t.connector.resource_store()).await?;
        }
        let mut probes_run = Probes::new();
        // Two servers of the same version still get distinct names (`redis-7.0.15#2`).
        let mut label = server_label(&server_version);
        let same = servers
            .iter()
            .filter(|s: &&ServerInfo| server_label(&s.version) == label)
            .count();
        if same > 0 {
            label = format!("{label}#{}", same + 1);
        }
        // The user's scripts are loaded once per server, whatever the variants running them.
        let mut scripts_loaded = false;
        for v in variants {
            let name = if several {
                format!("{}@{label}", v.name())
            } else {
                v.name()
            };
            let script = v.release == ReleaseMethod::Script;
            let mut supported = if script && scripts_loaded {
                Ok(())
            } else {
                check_support(
                    &mut probe,
                    v.release,
                    plan.protection.scripts.as_deref(),
                    &server_version,
                    prefix,
                    &mut probes_run,
                )
                .await
            };
            scripts_loaded |= script && supported.is_ok();
            if supported.is_ok()
                && plan.protection.extend_with == ExtendCommand::SetIfeq
                && v.extend
            {
                supported =
                    check_set_ifeq(&mut probe, &server_version, prefix, &mut probes_run).await;
            }
            match supported {
                Ok(()) => cells.push((ti, *v, name)),
                Err(e) if several => skipped.push(SkippedCell {
                    variant: name,
                    reason: format!("not supported by {server_version}: {e:#}"),
                }),
                Err(e) => return Err(e),
            }
        }
        servers.push(ServerInfo {
            version: server_version,
            backend_detail: redact_url(&t.connector.describe()),
            binary: t.binary.as_ref().map(|b| b.display().to_string()),
            capabilities,
            probes: probes_run,
            canary: None,
        });
        probes.push(probe);
    }
    if cells.is_empty() {
        return Err(BadInput(format!(
            "no variant can run on these servers: {}",
            skipped
                .iter()
                .map(|s| format!("{} ({})", s.variant, s.reason))
                .collect::<Vec<_>>()
                .join("; ")
        ))
        .into());
    }

    Ok(Probed {
        probes,
        servers,
        cells,
        skipped,
    })
}
