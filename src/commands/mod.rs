//! One file per command, each with one entry function; `cli.rs` only parses and dispatches.
//!
//! - [`args`]: the workload flags and their fold with a profile into a plan.
//! - [`run`]: `run` and `compare` (one workload, one or several release methods).
//! - [`sweep`]: one workload over TTLs × release methods.
//! - [`demo`]: stories replayed step by step against a real server.
//! - [`report`]: `lockbench report DIR`.
//! - [`merge`]: `lockbench merge DIR...`, the agents of one run combined.
//! - [`observe`]: `lockbench observe`, the locks of the user's own program through a proxy.
//! - [`recommend`]: a TTL for measured durations (the computation is `crate::recommend`'s).
//! - [`crosscheck`]: a simulated run against the real one it models.

pub(crate) mod args;
pub(crate) mod crosscheck;
pub mod demo;
pub(crate) mod merge;
pub(crate) mod observe;
pub(crate) mod recommend;
pub(crate) mod report;
pub(crate) mod run;
pub(crate) mod sweep;

/// Runs a backend's start-up (`open`: servers spawned, a cluster created, Redlock's instances
/// started), counting Ctrl-C, SIGTERM and SIGHUP from its first moment: the first signal gives the
/// start-up up at once — the servers started so far are stopped as their handles drop — and
/// ends the command as an interrupted run (exit 130). Nothing ran, so nothing is written.
/// Without this a signal during a start-up of seconds met its default action (SIGTERM ended
/// the process with 143) or, inherited as ignored (SIGINT of a background job), was lost.
pub(crate) async fn opening<T>(
    open: impl std::future::Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<T> {
    let mut signals = crate::signals::subscribe();
    tokio::select! {
        r = open => r,
        _ = signals.wait_for(|n| *n > 0) => Err(anyhow::Error::new(crate::exit::Interrupted)
            .context("the servers' start-up given up: nothing ran, no file was written")),
    }
}

use crate::exit::{Classified, ExitKind};

/// The kind an error in a chain declares, if its type is one of the crate's.
type Lookup = fn(&(dyn std::error::Error + 'static)) -> Option<ExitKind>;

fn lookup<T: Classified>(e: &(dyn std::error::Error + 'static)) -> Option<ExitKind> {
    e.downcast_ref::<T>().map(Classified::exit_kind)
}

/// Every error type of the crate that declares a kind, by name (the test that checks every
/// `thiserror::Error` type in `src/` declares one reads the names).
macro_rules! classified {
    ($($name:ident: $t:ty),* $(,)?) => {
        /// The crate's error types, each with how to read its kind out of a `dyn Error`.
        pub(crate) const CLASSIFIED: &[(&str, Lookup)] = &[$((stringify!($name), lookup::<$t>)),*];
    };
}

classified! {
    BadInput: crate::exit::BadInput,
    Interrupted: crate::exit::Interrupted,
    ProfileError: crate::profile::ProfileError,
    OutDirError: crate::results::OutDirError,
    DistError: crate::dist::DistError,
    UnitError: crate::model::units::UnitError,
    OutOfRange: crate::model::units::OutOfRange,
    LoadError: crate::recommend::LoadError,
    FileError: crate::inputs::FileError,
    ParamError: crate::recommend::ParamError,
    ReportError: crate::report::run_dir::ReportError,
    RemoteRefused: crate::target::RemoteRefused,
    MetricsError: crate::metrics::MetricsError,
    CmdError: crate::model::error::CmdError,
    BadRow: crate::results::events::BadRow,
    BadLine: crate::results::hlog::BadLine,
    LineError: crate::lines::LineError,
    DriverError: crate::client::driver::DriverError,
    FaultRefused: crate::faults::FaultRefused,
    FaultError: crate::model::fault::FaultError,
    ArrivalsError: crate::model::arrivals::ArrivalsError,
    ExtendError: crate::model::plan::ExtendError,
    VariantError: crate::model::variant::VariantError,
    ThresholdError: crate::analysis::threshold::ThresholdError,
    Refusal: crate::store::Refusal,
    Unreachable: crate::store::Unreachable,
    BadCommand: crate::model::script::BadCommand,
    SignalError: crate::signals::SignalError,
}

/// The kind `e` declares, when its type is one of the crate's.
pub(crate) fn kind_of(e: &(dyn std::error::Error + 'static)) -> Option<ExitKind> {
    CLASSIFIED.iter().find_map(|(_, kind)| kind(e))
}

/// The exit code of a command that failed with `e`: the strongest kind declared anywhere in its
/// chain — 130 when it was interrupted, 2 for bad input (a profile or flag, a distribution or
/// data file, an output directory that would mix runs) — and 1 when none is declared.
pub fn code_of_error(e: &anyhow::Error) -> i32 {
    e.chain()
        .filter_map(kind_of)
        .max()
        .unwrap_or(ExitKind::Failed)
        .code()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exit::{BAD_INPUT, BadInput, FAILED, INTERRUPTED, Interrupted};

    /// An error of no kind that carries another (as a context-free wrapper would).
    #[derive(Debug, thiserror::Error)]
    #[error("wrapped")]
    struct Wrapper(#[source] Box<dyn std::error::Error + Send + Sync>);

    fn driver(refused: bool) -> anyhow::Error {
        let e = crate::client::driver::DriverError {
            who: "redis-py (holder 0, pid 1)".into(),
            what: "refused the settings".into(),
            stderr: Vec::new(),
            refused,
        };
        anyhow::Error::new(e).context("starting the clients")
    }

    /// An error of each kind, wherever it sits in the chain, gives its code; an error no type
    /// declares is a failure.
    #[test]
    fn each_kind_gives_its_code() {
        let bad = anyhow::Error::new(BadInput("--out D is not empty".into())).context("run");
        assert_eq!(code_of_error(&bad), BAD_INPUT);
        let remote = crate::target::check_loopback("10.1.2.3", false).unwrap_err();
        assert_eq!(code_of_error(&remote.context("connecting")), BAD_INPUT);
        assert_eq!(code_of_error(&driver(true)), BAD_INPUT);
        assert_eq!(code_of_error(&driver(false)), FAILED);
        let cmd = crate::model::error::CmdError {
            kind: crate::model::error::ErrorKind::Connection,
            detail: "connection refused".into(),
        };
        assert_eq!(code_of_error(&anyhow::Error::new(cmd)), FAILED);
        assert_eq!(code_of_error(&anyhow::Error::new(Interrupted)), INTERRUPTED);
        assert_eq!(
            code_of_error(&anyhow::anyhow!("connection refused")),
            FAILED
        );
        let io = std::io::Error::other("disk full");
        assert_eq!(
            code_of_error(&anyhow::Error::new(io).context("writing")),
            FAILED
        );
    }

    /// A kind declared deep in the chain, under contexts and a wrapper of no kind, decides; of
    /// several, the strongest does (`ExitKind`'s order). A threshold is
    /// no error: a run that crossed one returns `Ok(99)` from its verdict.
    #[test]
    fn the_strongest_kind_in_the_chain_decides() {
        let deep = |e: Box<dyn std::error::Error + Send + Sync>| {
            anyhow::Error::new(Wrapper(e))
                .context("sweep")
                .context("ttl 1s")
        };
        assert_eq!(
            code_of_error(&deep(Box::new(BadInput("x".into())))),
            BAD_INPUT
        );
        assert_eq!(code_of_error(&deep(Box::new(Interrupted))), INTERRUPTED);
    }

    /// Every error type in `src/` declares its kind in its own file, and the lookup knows
    /// exactly the types that declare one: a new error type cannot fall through to exit 1
    /// unnoticed.
    #[test]
    fn every_error_type_declares_its_kind() {
        let mut declared = Vec::new();
        let mut missing = Vec::new();
        let mut files = vec![std::path::PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/src"
        ))];
        while let Some(p) = files.pop() {
            if p.is_dir() {
                files.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
                continue;
            }
            if p.extension().is_none_or(|x| x != "rs") || p.ends_with("commands/mod.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            for (i, l) in lines.iter().enumerate() {
                if !(l.trim_start().starts_with("#[derive(") && l.contains("thiserror::Error")) {
                    continue;
                }
                let name = lines[i + 1..]
                    .iter()
                    .find_map(|l| {
                        let mut words = l.split_whitespace().skip_while(|w| w.starts_with("pub"));
                        matches!(words.next(), Some("struct" | "enum"))
                            .then(|| words.next())
                            .flatten()
                    })
                    .map(|n| {
                        n.split(['{', '(', '<', ';'])
                            .next()
                            .unwrap_or(n)
                            .to_string()
                    })
                    .unwrap();
                let cfg_test = text[..text.find(l).unwrap()].contains("#[cfg(test)]\nmod tests {");
                if text.contains(&format!("classify!({name} =>")) {
                    if !cfg_test {
                        declared.push(name);
                    }
                } else {
                    missing.push(format!("{}: {name}", p.display()));
                }
            }
        }
        assert!(missing.is_empty(), "no classify! beside {missing:?}");
        declared.sort();
        let mut known: Vec<String> = CLASSIFIED.iter().map(|(n, _)| n.to_string()).collect();
        known.sort();
        assert_eq!(
            declared, known,
            "exit::CLASSIFIED lists the types that declare a kind"
        );
    }
}
