//! Exit codes, and the verdict on a finished run that picks one.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | all well |
//! | 1 | the run failed, gave up, completed no section, or errors dominated |
//! | 2 | bad input (profile, flag, file) or a report check mismatch |
//! | 99 | a threshold crossed (the run itself completed) |
//! | 130 | interrupted (Ctrl-C, SIGTERM or SIGHUP; files written) |
//!
//! A finished run's code comes from its verdict (`analysis::verdict`, the only source of 99). A
//! command that fails returns an error instead, and the error decides: every error type of the
//! crate declares its [`ExitKind`] beside its definition with `classify!`, and [`code_of`]
//! takes the strongest kind found in the error's chain. An error of no declared kind (an
//! `io::Error`, a bare `anyhow!`) is a failure, exit 1; `BadInput` is for bad input that has no
//! type of its own.

/// All well.
pub const OK: i32 = 0;
/// The run failed, gave up, completed no section, or errors dominated.
pub const FAILED: i32 = 1;
/// Bad input, or `lockbench report` found summary.json disagreeing with events.csv.
pub const BAD_INPUT: i32 = 2;
/// A `fail_if` threshold crossed; the run itself completed.
pub const THRESHOLD: i32 = 99;
/// Interrupted by Ctrl-C, SIGTERM or SIGHUP (files written).
pub const INTERRUPTED: i32 = 130;

/// The table above, for `--help` and error messages.
pub const TABLE: &str = "Exit codes: 0 all well · 1 run failed, gave up, completed no section or errors \
dominated · 2 bad input (profile, flag, file) or a report check mismatch · 99 a threshold crossed · \
130 interrupted (Ctrl-C, SIGTERM or SIGHUP; files written)";

/// An error in what the user gave (a flag, a file, a directory) that has no type of its own:
/// exit code 2, like the typed ones that declare [`ExitKind::BadInput`].
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadInput(pub String);

/// Ctrl-C, SIGTERM or SIGHUP before anything was measured: exit code 130, like any interrupted run.
#[derive(Debug, thiserror::Error)]
#[error("interrupted before any variant ran")]
pub struct Interrupted;

/// What a failure means for the exit code. Every error type of the crate declares its kind
/// beside its definition (`classify!`); the kind of a failed command is the strongest kind in
/// its error's chain ([`code_of`]), and an error of no declared kind is a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ExitKind {
    /// Exit code 1: the run failed (a server, a driver, the disk).
    Failed,
    /// Exit code 2: what the user gave is wrong, and the message says what would be valid.
    BadInput,
    /// Exit code 99: a `fail_if` threshold crossed.
    Threshold,
    /// Exit code 130: interrupted; outweighs everything else in a chain.
    Interrupted,
}

impl ExitKind {
    /// The process exit code of this kind.
    pub const fn code(self) -> i32 {
        match self {
            Self::Failed => FAILED,
            Self::BadInput => BAD_INPUT,
            Self::Threshold => THRESHOLD,
            Self::Interrupted => INTERRUPTED,
        }
    }
}

/// An error type that says which exit code it means. Implemented through `classify!`, one
/// line beside the type, by every error type of the crate (a test holds the crate to it).
pub trait Classified: std::error::Error + Send + Sync + 'static {
    /// This error's kind; most types have one kind, a few decide by value.
    fn exit_kind(&self) -> ExitKind;
}

/// Declares the exit kind of an error type beside its definition:
/// `classify!(ProfileError => BadInput);`, or with a closure for a kind that depends on the
/// value: `classify!(DriverError => |e| if e.refused { BadInput } else { Failed });`.
/// The type must also be named in [`CLASSIFIED`]'s list, which a test checks.
macro_rules! classify {
    ($t:ty => |$e:ident| $kind:expr) => {
        impl crate::exit::Classified for $t {
            fn exit_kind(&self) -> crate::exit::ExitKind {
                #[allow(unused_imports)]
                use crate::exit::ExitKind::*;
                let $e = self;
                $kind
            }
        }
    };
    ($t:ty => $kind:ident) => {
        impl crate::exit::Classified for $t {
            fn exit_kind(&self) -> crate::exit::ExitKind {
                crate::exit::ExitKind::$kind
            }
        }
    };
}
pub(crate) use classify;

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
    BadInput: BadInput,
    Interrupted: Interrupted,
    ProfileError: crate::profile::ProfileError,
    OutDirError: crate::results::OutDirError,
    DistError: crate::dist::DistError,
    UnitError: crate::model::units::UnitError,
    OutOfRange: crate::model::units::OutOfRange,
    LoadError: crate::recommend::LoadError,
    FileError: crate::inputs::FileError,
    ParamError: crate::recommend::ParamError,
    ReportError: crate::report::load::ReportError,
    RemoteRefused: crate::target::RemoteRefused,
    MetricsError: crate::metrics::MetricsError,
    CmdError: crate::model::error::CmdError,
    BadRow: crate::results::events::BadRow,
    BadLine: crate::results::hlog::BadLine,
    LineError: crate::lines::LineError,
    DriverError: crate::client::driver::DriverError,
    FaultRefused: crate::faults::FaultRefused,
    BadCommand: crate::model::script::BadCommand,
    SignalError: crate::signals::SignalError,
}

/// The kind `e` declares, when its type is one of the crate's.
pub fn kind_of(e: &(dyn std::error::Error + 'static)) -> Option<ExitKind> {
    CLASSIFIED.iter().find_map(|(_, kind)| kind(e))
}

/// The exit code of a command that failed with `e`: the strongest kind declared anywhere in its
/// chain (interrupted over bad input over failure), and 1 when none is declared.
pub fn code_of(e: &anyhow::Error) -> i32 {
    e.chain()
        .filter_map(kind_of)
        .max()
        .unwrap_or(ExitKind::Failed)
        .code()
}

classify!(BadInput => BadInput);
classify!(Interrupted => Interrupted);

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(code_of(&bad), BAD_INPUT);
        let remote = crate::target::check_loopback("10.1.2.3", false).unwrap_err();
        assert_eq!(code_of(&remote.context("connecting")), BAD_INPUT);
        assert_eq!(code_of(&driver(true)), BAD_INPUT);
        assert_eq!(code_of(&driver(false)), FAILED);
        let cmd = crate::model::error::CmdError {
            kind: crate::model::error::ErrorKind::Connection,
            detail: "connection refused".into(),
        };
        assert_eq!(code_of(&anyhow::Error::new(cmd)), FAILED);
        assert_eq!(code_of(&anyhow::Error::new(Interrupted)), INTERRUPTED);
        assert_eq!(code_of(&anyhow::anyhow!("connection refused")), FAILED);
        let io = std::io::Error::other("disk full");
        assert_eq!(code_of(&anyhow::Error::new(io).context("writing")), FAILED);
    }

    /// A kind declared deep in the chain, under contexts and a wrapper of no kind, decides; of
    /// several, the strongest does (interrupted over bad input over failure). A threshold is
    /// no error: a run that crossed one returns `Ok(99)` from its verdict.
    #[test]
    fn the_strongest_kind_in_the_chain_decides() {
        let deep = |e: Box<dyn std::error::Error + Send + Sync>| {
            anyhow::Error::new(Wrapper(e))
                .context("sweep")
                .context("ttl 1s")
        };
        assert_eq!(code_of(&deep(Box::new(BadInput("x".into())))), BAD_INPUT);
        assert_eq!(code_of(&deep(Box::new(Interrupted))), INTERRUPTED);
        assert!(ExitKind::Interrupted > ExitKind::BadInput);
        assert!(ExitKind::BadInput > ExitKind::Failed);
        let codes = [
            ExitKind::Failed,
            ExitKind::BadInput,
            ExitKind::Threshold,
            ExitKind::Interrupted,
        ];
        assert_eq!(
            codes.map(ExitKind::code),
            [FAILED, BAD_INPUT, THRESHOLD, INTERRUPTED]
        );
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
            if p.extension().is_none_or(|x| x != "rs") || p.ends_with("exit.rs") {
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
        let mut known: Vec<String> = CLASSIFIED
            .iter()
            .map(|(n, _)| n.to_string())
            .filter(|n| n != "BadInput" && n != "Interrupted")
            .collect();
        known.sort();
        assert_eq!(
            declared, known,
            "exit::CLASSIFIED lists the types that declare a kind"
        );
    }
}
