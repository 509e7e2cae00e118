//! The flags of `run`, `compare`, `sweep` and `demo`, and their fold with a profile into a
//! validated plan (`WorkloadArgs::plan`): a flag overrides the profile's field of the same name.

use crate::model::units;
use crate::profile::{BackendChoice, Plan, Profile, ProfileError};
use crate::runner::RunOptions;
use clap::Args;
use std::path::{Path, PathBuf};

/// Workload flags; each overrides the profile's field of the same name.
#[derive(Debug, Args, Default, Clone)]
pub struct WorkloadArgs {
    /// Profile (TOML). Without one, built-in defaults apply.
    pub profile: Option<PathBuf>,
    /// The workload: each flag sets the profile key of the same name (`--hot-key` sets
    /// `hot_key`) and overrides the profile file.
    #[command(flatten)]
    pub settings: Profile,
    /// A fault, KIND[@AT[+LENGTH]][,key=value…] (repeatable; replaces the profile's [[fault]]
    /// list): server-pause@1s+500ms, server-restart@1s+200ms (spawned server),
    /// latency@0s+2s,delay=20ms,jitter=5ms, partition@1s+1s,
    /// holder-crash,probability=0.05,restart=100ms. Times are from each variant's start.
    #[arg(long = "fault")]
    pub fault: Vec<String>,
    /// Allow a non-loopback Redis host, and a non-loopback --metrics address (never settable
    /// from a profile).
    #[arg(long)]
    pub allow_remote: bool,
    /// Fail the run with exit code 99 when this condition on a summary figure holds for a
    /// variant, e.g. 'overlap_ms > 0', 'lost_updates > 0', 'duration_ms.p99 >= 250'
    /// (repeatable; added to the profile's [thresholds] fail_if).
    #[arg(long = "fail-if")]
    pub fail_if: Vec<String>,
    /// Output directory [default: results/<run-id>]. A directory holding an earlier run is
    /// refused (exit 2) unless --force is given; one holding other files is always refused.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Delete the earlier run's files in --out (only files lockbench writes) before writing.
    #[arg(long)]
    pub force: bool,
    /// No progress bar, notices or table (files are still written).
    #[arg(long, short)]
    pub quiet: bool,
}

/// The verdict table for CI systems, written by `run` and `compare` after the run's own files,
/// also when a threshold is crossed (exit 99) or the run failed (exit 1).
#[derive(Debug, Args, Default, Clone)]
pub struct CiArgs {
    /// Write the verdict table as Markdown to FILE for a CI job summary page (e.g.
    /// "$GITHUB_STEP_SUMMARY"): per variant, overlap, lost updates, wrongful deletes, stuck
    /// locks, unsafe writes, errors, and each --fail-if threshold held or crossed.
    #[arg(long, value_name = "FILE")]
    pub summary_md: Option<PathBuf>,
    /// Write JUnit XML to FILE: one test case per variant × --fail-if threshold, failed where
    /// the threshold was crossed (without thresholds, one case `run` per variant); a failed
    /// variant or run is an error case.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
}

impl CiArgs {
    /// Refuses, before anything runs (bad input), CI files that would overwrite each other,
    /// the profile, or a file of the run's own directory (`dirs`: `--out`, a merge's agents'
    /// and merged directories), and a path that cannot be written: each is opened for
    /// appending now (an absent one is created empty, with its directories, and written at
    /// the end).
    pub(crate) fn check(&self, dirs: &[&Path], profile: Option<&Path>) -> anyhow::Result<()> {
        let bad = |m: String| -> anyhow::Result<()> { Err(crate::exit::BadInput(m).into()) };
        let files: Vec<(&str, &PathBuf)> =
            [("--summary-md", &self.summary_md), ("--junit", &self.junit)]
                .into_iter()
                .filter_map(|(f, p)| p.as_ref().map(|p| (f, p)))
                .collect();
        if let [(_, a), (_, b)] = files[..]
            && same_file(a, b)
        {
            return bad(format!(
                "--summary-md and --junit name one file ({}): give each its own",
                a.display()
            ));
        }
        for (flag, path) in files {
            let at = resolve(path);
            if profile.is_some_and(|p| same_file(p, path)) {
                return bad(format!(
                    "{flag} {}: that is the profile this run reads; write the CI file elsewhere",
                    path.display()
                ));
            }
            if let Some(d) = dirs.iter().find(|d| at.starts_with(resolve(d))) {
                return bad(format!(
                    "{flag} {}: that is inside the run's directory {}, whose files are lockbench's own; write the CI file elsewhere",
                    path.display(),
                    d.display()
                ));
            }
            if at.is_dir() {
                return bad(format!(
                    "{flag} {}: is a directory; name a file",
                    path.display()
                ));
            }
            // An existing file is overwritten only if it is one a run wrote before (or empty,
            // as a CI system's summary file starts): never an input, a result, a device.
            if let Ok(meta) = std::fs::metadata(path) {
                if !meta.is_file() {
                    return bad(format!(
                        "{flag} {}: is not a regular file; name a file",
                        path.display()
                    ));
                }
                let mut head = [0u8; 256];
                let n = std::fs::File::open(path)
                    .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
                    .unwrap_or(0);
                let text = String::from_utf8_lossy(&head[..n]);
                let ours = if flag == "--junit" {
                    text.starts_with("<?xml") && text.contains("<testsuite")
                } else {
                    text.starts_with("### lockbench")
                };
                if n > 0 && !ours {
                    return bad(format!(
                        "{flag} {}: exists and is not a file lockbench wrote, which it would overwrite; remove it or name another file",
                        path.display()
                    ));
                }
                if let Err(e) = std::fs::OpenOptions::new().append(true).open(path) {
                    return bad(format!("{flag} {}: cannot be written: {e}", path.display()));
                }
                continue;
            }
            if path.symlink_metadata().is_ok() {
                return bad(format!(
                    "{flag} {}: is a link to nothing; name a file",
                    path.display()
                ));
            }
            // Absent: its directory is made, and a file can be created there (removed again:
            // a run refused later leaves nothing behind).
            let created = match path.parent().filter(|p| !p.as_os_str().is_empty()) {
                Some(parent) => std::fs::create_dir_all(parent),
                None => Ok(()),
            }
            .and_then(|()| {
                std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(path)
            })
            .and_then(|_| std::fs::remove_file(path));
            if let Err(e) = created {
                return bad(format!("{flag} {}: cannot be written: {e}", path.display()));
            }
        }
        Ok(())
    }

    /// Writes the files asked for; a file that cannot be written is an error naming the flag
    /// and the file, on stderr. Whether every file was written.
    pub(crate) fn write(
        &self,
        table: &crate::analysis::verdict_table::VerdictTable,
        timestamp: Option<&str>,
    ) -> bool {
        let mut files = Vec::new();
        if let Some(p) = &self.summary_md {
            files.push(("--summary-md", p, crate::report::ci::markdown(table)));
        }
        if let Some(p) = &self.junit {
            files.push(("--junit", p, crate::report::ci::junit(table, timestamp)));
        }
        let mut all = true;
        for (flag, path, text) in files {
            if let Err(e) = std::fs::write(path, text) {
                eprintln!(
                    "error: cannot write the {flag} file {}: {e}",
                    path.display()
                );
                all = false;
            }
        }
        all
    }
}

/// Where a path points: the file itself when it exists (links followed), else its directory
/// resolved and its name.
fn resolve(p: &Path) -> PathBuf {
    if let Ok(c) = std::fs::canonicalize(p) {
        return c;
    }
    let abs = std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    match (abs.parent().map(std::fs::canonicalize), abs.file_name()) {
        (Some(Ok(dir)), Some(name)) => dir.join(name),
        _ => abs,
    }
}

/// Whether two paths name one file: one resolved path, or one inode (a hard link).
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    if resolve(a) == resolve(b) {
        return true;
    }
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => (x.dev(), x.ino()) == (y.dev(), y.ino()),
        _ => false,
    }
}

/// `run`.
#[derive(Debug, Args, Clone)]
pub struct RunArgs {
    #[command(flatten)]
    /// Workload.
    pub workload: WorkloadArgs,
    #[command(flatten)]
    /// CI summaries.
    pub ci: CiArgs,
    /// Release method: del (unconditional, the bug), token (Lua compare-and-delete), delex
    /// (DELEX IFEQ, Redis ≥ 8.4), script (your own --release-script), or a lock library, by
    /// its driver: redis-py, python-redis-lock, python-redis-lock-renew, pottery, redlock5,
    /// redlock4, redis-semaphore, redis-lock, rslock (Rust, in process) [profile: release;
    /// default token].
    #[arg(long)]
    pub release: Option<String>,
    /// Many agents, one run: this process is agent INDEX of COUNT (`0/2`, `1/2`), each started
    /// with the same profile, --run-id and --redis URL; they meet at a start barrier on the
    /// server, agent i runs workers i·W .. (i+1)·W, --sections is shared among them, and each
    /// writes its own directory [default: results/<run-id>/agent-<i>] for `lockbench merge`.
    #[arg(long, value_name = "INDEX/COUNT", conflicts_with_all = ["agent_index", "agents"])]
    pub agent: Option<String>,
    /// This agent's index, from 0 [default: $JOB_COMPLETION_INDEX, the index a Kubernetes
    /// Indexed Job gives each pod].
    #[arg(long, value_name = "INDEX")]
    pub agent_index: Option<String>,
    /// How many agents the run has [default: $LOCKBENCH_AGENTS].
    #[arg(long, value_name = "COUNT")]
    pub agents: Option<String>,
    /// The run's id, the same for every agent (required with two or more): keys are
    /// lockbench:<run-id>:…, so the agents contend for the same locks. Letters, digits, . _ -.
    #[arg(long)]
    pub run_id: Option<String>,
    /// How long an agent waits at a barrier for the others (to arrive, to start, to finish),
    /// with unit [default: 2m].
    #[arg(long)]
    pub barrier_timeout: Option<String>,
}

impl RunArgs {
    /// The agent flags as given.
    pub fn agent_flags(&self) -> crate::agent::AgentFlags {
        crate::agent::AgentFlags {
            agent: self.agent.clone(),
            agent_index: self.agent_index.clone(),
            agents: self.agents.clone(),
            run_id: self.run_id.clone(),
            barrier_timeout: self.barrier_timeout.clone(),
        }
    }
}

/// `compare`.
#[derive(Debug, Args, Clone)]
pub struct CompareArgs {
    #[command(flatten)]
    /// Workload.
    pub workload: WorkloadArgs,
    #[command(flatten)]
    /// CI summaries.
    pub ci: CiArgs,
    /// Release methods to compare, comma-separated, e.g. del,token or token,script (your own
    /// --release-script), or token,redis-py (a lock library, as --client names them)
    /// (`--releases` is an alias) [profile: releases; default del,token].
    #[arg(long = "release", visible_alias = "releases", value_delimiter = ',')]
    pub release: Option<Vec<String>>,
    /// A lock library to measure beside them, by its driver (repeatable): redis-py,
    /// python-redis-lock, python-redis-lock-renew, pottery, redlock5, redlock4,
    /// redis-semaphore, redis-lock, rslock (Rust, in process). Adds it to the release methods
    /// (`--release` names it too).
    #[arg(long = "client")]
    pub client: Vec<String>,
}

/// `sweep`: the workload's flags, but its `--ttl` is a list of TTLs ([`TtlList`]), read by
/// clap as such (the workload's own `--ttl` is one duration).
#[derive(Debug, Clone)]
pub struct SweepArgs {
    /// The TTLs to sweep (`--ttl`); without it, the profile's `ttl` alone.
    pub ttls: Option<TtlList>,
    /// Workload (its `ttl` is never set by a flag: `--ttl` is the list).
    pub workload: WorkloadArgs,
    /// Release methods.
    pub release: Option<Vec<String>>,
}

/// [`SweepArgs`] but the TTL list, as derived by clap; [`SweepArgs`]'s `clap::Args` turns the
/// workload's `--ttl` into the list.
#[derive(Debug, Args, Clone)]
struct SweepFlags {
    #[command(flatten)]
    workload: WorkloadArgs,
    /// Release methods, comma-separated, e.g. del,token (`--releases` is an alias)
    /// [profile: releases; default del,token].
    #[arg(long = "release", visible_alias = "releases", value_delimiter = ',')]
    release: Option<Vec<String>>,
}

/// The workload's `--ttl` (arg id `ttl`) made sweep's list of TTLs.
fn ttl_list_arg(arg: clap::Arg) -> clap::Arg {
    arg.value_parser(|text: &str| text.parse::<TtlList>())
        .value_name("TTLS")
        .help(
            "The TTLs to sweep, with unit: a list (100ms,200ms,1s) or a log-spaced range \
             (100ms..2s:10) [default: the profile's ttl]",
        )
}

impl clap::Args for SweepArgs {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        SweepFlags::augment_args(cmd).mut_arg("ttl", ttl_list_arg)
    }
    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        SweepFlags::augment_args_for_update(cmd).mut_arg("ttl", ttl_list_arg)
    }
}

impl clap::FromArgMatches for SweepArgs {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        Self::from_arg_matches_mut(&mut m.clone())
    }
    fn from_arg_matches_mut(m: &mut clap::ArgMatches) -> Result<Self, clap::Error> {
        // Taken first: the workload's `ttl` then finds none.
        let ttls = m.remove_one::<TtlList>("ttl");
        let SweepFlags { workload, release } = SweepFlags::from_arg_matches_mut(m)?;
        Ok(SweepArgs {
            ttls,
            workload,
            release,
        })
    }
    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        self.update_from_arg_matches_mut(&mut m.clone())
    }
    fn update_from_arg_matches_mut(&mut self, m: &mut clap::ArgMatches) -> Result<(), clap::Error> {
        if let Some(t) = m.remove_one::<TtlList>("ttl") {
            self.ttls = Some(t);
        }
        let mut flags = SweepFlags {
            workload: self.workload.clone(),
            release: self.release.clone(),
        };
        flags.update_from_arg_matches_mut(m)?;
        (self.workload, self.release) = (flags.workload, flags.release);
        Ok(())
    }
}

impl WorkloadArgs {
    /// The profile file overlaid with the flags, unvalidated (`None`: the file is unreadable;
    /// the command itself reports that).
    fn profile_as_given(&self) -> Option<Profile> {
        let file = match &self.profile {
            Some(path) => Profile::load(path).ok()?.0,
            None => Profile::default(),
        };
        Some(file.overlay(self.settings.clone()))
    }

    /// Whether the run's sections end by the precise timer (`--timer precise` or the profile's
    /// `timer`), read like [`Self::server_on_this_machine`]: unreadable counts as not.
    pub(crate) fn precise_timer(&self) -> bool {
        self.profile_as_given()
            .is_some_and(|p| p.timer() == crate::profile::Timer::Precise)
    }

    /// Whether the run measures a Redis server on this machine: spawned (`spawn`,
    /// `spawn-cluster`, `auto` with redis-server on PATH, spawned Redlock instances) or given by
    /// a loopback or Unix-socket URL. Read before the profile is validated (a bad profile is
    /// reported by the command itself): anything unreadable counts as not local.
    pub(crate) fn server_on_this_machine(&self) -> bool {
        let Some(p) = self.profile_as_given() else {
            return false;
        };
        let local_url = |u: &String| {
            crate::target::check_url(u).is_ok_and(|info| match info.addr() {
                redis::ConnectionAddr::Tcp(host, _)
                | redis::ConnectionAddr::TcpTls { host, .. } => {
                    crate::target::is_loopback_host(host)
                }
                redis::ConnectionAddr::Unix(_) => true,
                _ => false,
            })
        };
        let urls: Vec<&String> = p
            .redis
            .iter()
            .chain(p.redlock_urls.iter().flatten())
            .collect();
        match p.backend {
            Some(BackendChoice::Memory | BackendChoice::Sim) => false,
            Some(BackendChoice::Spawn | BackendChoice::SpawnCluster) => true,
            _ if p.redis_server.is_some() => true,
            _ if !urls.is_empty() => urls.into_iter().all(local_url),
            Some(BackendChoice::Url) => false,
            _ => crate::store::spawn::redis_server_available(),
        }
    }

    /// Reads the profile file, if one is given (once: [`WorkloadArgs::plan_of`] takes it).
    pub fn load(&self) -> Result<LoadedProfile, ProfileError> {
        Ok(match &self.profile {
            Some(path) => {
                let (profile, source) = Profile::load(path)?;
                LoadedProfile {
                    profile,
                    source,
                    file: path.display().to_string(),
                    base: path.parent().map(Path::to_path_buf),
                }
            }
            None => LoadedProfile {
                profile: Profile::default(),
                source: String::new(),
                file: "defaults".to_string(),
                base: None,
            },
        })
    }

    /// Loads the profile, applies the flags and validates. Errors in a flag name the flag.
    pub fn plan(&self, extra: Profile) -> Result<Plan, ProfileError> {
        self.plan_of(self.load()?, extra)
    }

    /// [`WorkloadArgs::plan`] of a profile already read.
    pub fn plan_of(&self, loaded: LoadedProfile, extra: Profile) -> Result<Plan, ProfileError> {
        let mut flags = self.settings.clone().overlay(extra);
        // A script named on the command line starts at the working directory; the profile's
        // own relative paths start at the profile's directory.
        for path in [
            &mut flags.acquire_script,
            &mut flags.release_script,
            &mut flags.extend_script,
        ]
        .into_iter()
        .flatten()
        {
            if let Ok(abs) = std::path::absolute(&*path) {
                *path = abs.display().to_string();
            }
        }
        if !self.fault.is_empty() {
            let mut list = Vec::new();
            for f in &self.fault {
                list.push(
                    f.parse::<crate::model::fault::Fault>()
                        .map_err(|e| ProfileError {
                            file: "command line".to_string(),
                            line: None,
                            message: format!("--fault `{f}`: {e}"),
                            field: Some("fault".to_string()),
                        })?,
                );
            }
            flags.fault = Some(list);
        }
        let LoadedProfile {
            profile,
            source,
            file,
            base,
        } = loaded;
        let merged = profile.overlay(flags.clone());
        let base = base.or_else(|| std::env::current_dir().ok());
        let mut plan = merged
            .plan(&file, &source, base.as_deref())
            .and_then(|mut plan| {
                crate::backend::check_plan_io(&mut plan, &merged, &file, &source, base.as_deref())?;
                Ok(plan)
            })
            .map_err(|e| {
                // A field that came from a flag is reported as that flag.
                match &e.field {
                    Some(f) if flag_was_set(&flags, f) => ProfileError {
                        file: "command line".to_string(),
                        line: None,
                        message: if f == "fault" && !e.message.starts_with("field `fault`") {
                            format!("--{}", e.message)
                        } else {
                            e.message.replacen(&format!("field `{f}`"), &flag_of(f), 1)
                        },
                        field: e.field.clone(),
                    },
                    _ => e,
                }
            })?;
        plan.backend.allow_remote = self.allow_remote;
        for expr in &self.fail_if {
            let t = expr
                .parse::<crate::analysis::threshold::Threshold>()
                .map_err(|m| ProfileError {
                    file: "command line".to_string(),
                    line: None,
                    message: format!("--fail-if {m}"),
                    field: Some("thresholds".to_string()),
                })?;
            plan.fail_if.push(t);
        }
        if !self.quiet {
            for w in &plan.warnings {
                eprintln!("warning: {w}");
            }
        }
        Ok(plan)
    }

    /// How a run of this command reports (output directory, quiet, progress).
    pub fn options(&self, command: &str) -> RunOptions {
        RunOptions {
            out_dir: self.out.clone(),
            quiet: self.quiet,
            progress: !self.quiet,
            command: command.to_string(),
            profile_file: self.profile.as_ref().map(|p| p.display().to_string()),
            force: self.force,
            ..RunOptions::default()
        }
    }
}

/// A profile file as read: the profile, its text (for line numbers), its name and directory.
#[derive(Debug, Clone)]
pub struct LoadedProfile {
    /// The fields as written.
    pub profile: Profile,
    /// The file's text.
    pub source: String,
    /// The file's name in errors (`defaults` without one).
    pub file: String,
    /// Where its relative paths start.
    pub base: Option<PathBuf>,
}

/// The flag that sets a profile field: its name with dashes, but for the fields a repeated
/// flag fills (`redlock_urls` ← `--redlock-url`, `releases` ← `--release`).
fn flag_of(field: &str) -> String {
    match field {
        "redlock_urls" => "--redlock-url".to_string(),
        "releases" => "--release".to_string(),
        f => format!("--{}", f.replace('_', "-")),
    }
}

fn flag_was_set(flags: &Profile, field: &str) -> bool {
    flags.is_set(field)
}

/// A sweep's TTLs, µs as written (before any time scale), sorted and unique: `--ttl`'s
/// `100ms,200ms,1s` or log-spaced `100ms..2s:10`, read once by clap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TtlList(pub Vec<u64>);

impl std::str::FromStr for TtlList {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        parse_ttls(text).map(TtlList)
    }
}

/// Parses `100ms,200ms,1s` or a log-spaced range `100ms..2s:10` into TTLs in µs (sorted, unique).
fn parse_ttls(text: &str) -> Result<Vec<u64>, String> {
    let mut out = if let Some((range, n)) = text.split_once(':').filter(|_| text.contains("..")) {
        let (a, b) = range
            .split_once("..")
            .ok_or_else(|| "expected `FROM..TO:N`".to_string())?;
        let a = units::parse_ms(a).map_err(|e| e.to_string())?;
        let b = units::parse_ms(b).map_err(|e| e.to_string())?;
        let n: usize = n
            .trim()
            .parse()
            .map_err(|_| format!("`{n}` is not a count: write e.g. `100ms..2s:10`"))?;
        if !(2..=100).contains(&n) || a <= 0.0 || b <= a {
            return Err("a range needs 0 < FROM < TO and 2 to 100 values".to_string());
        }
        // Log-spaced, rounded to whole milliseconds (Redis PX) when at least 1ms.
        (0..n)
            .map(|i| {
                let ms = a * (b / a).powf(i as f64 / (n - 1) as f64);
                units::ms_to_us(if ms >= 1.0 { ms.round() } else { ms })
            })
            .collect::<Vec<_>>()
    } else {
        text.split(',')
            .map(|t| {
                units::parse_ms(t)
                    .map(units::ms_to_us)
                    .map_err(|e| e.to_string())
            })
            .collect::<Result<Vec<_>, _>>()?
    };
    out.sort_unstable();
    out.dedup();
    if out.is_empty() {
        return Err("list at least one TTL".to_string());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lists and log-spaced ranges parse into sorted unique µs values; bad ones say why.
    #[test]
    fn parses_ttl_lists_and_ranges() {
        assert_eq!(
            parse_ttls("200ms,100ms,1s,100ms").unwrap(),
            vec![100_000, 200_000, 1_000_000]
        );
        let r = parse_ttls("100ms..2s:10").unwrap();
        assert_eq!(r.len(), 10);
        assert_eq!((r[0], r[9]), (100_000, 2_000_000));
        assert_eq!(r[1], 139_000, "log-spaced and rounded to whole ms: {r:?}");
        assert!(parse_ttls("100ms..2s:x").unwrap_err().contains("count"));
        assert!(parse_ttls("2s..100ms:5").unwrap_err().contains("FROM < TO"));
        assert!(parse_ttls("100").unwrap_err().contains("unit"));
    }
}
