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
//! crate declares its [`ExitKind`] beside its definition with `classify!`, and
//! `commands::code_of_error` takes the strongest kind found in the error's chain. An error of no declared kind (an
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
/// its error's chain (`commands::code_of_error`), and an error of no declared kind is a failure.
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
/// The type must also be named in `commands::CLASSIFIED`'s list, which a test checks.
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

classify!(BadInput => BadInput);
classify!(Interrupted => Interrupted);

#[cfg(test)]
mod tests {
    use super::*;

    /// Each kind has its code, and a chain's strongest kind is the greatest.
    #[test]
    fn kinds_and_codes() {
        assert!(ExitKind::Interrupted > ExitKind::Threshold);
        assert!(ExitKind::Threshold > ExitKind::BadInput);
        assert!(ExitKind::BadInput > ExitKind::Failed);
        let kinds = [
            ExitKind::Failed,
            ExitKind::BadInput,
            ExitKind::Threshold,
            ExitKind::Interrupted,
        ];
        assert_eq!(
            kinds.map(ExitKind::code),
            [FAILED, BAD_INPUT, THRESHOLD, INTERRUPTED]
        );
    }
}
