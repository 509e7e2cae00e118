//! A variant: one combination of release method, fencing and lease extension, written
//! `token`, `token+fence`, `token+fence-rw`, `token+extend`, `token+extend+fence-rw`, `del`…
//! `compare` runs several on the same workload and seed.

use crate::model::client::Client;
use crate::model::release::ReleaseMethod;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// What the protected resource checks on writes.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum Fencing {
    /// No fence: the resource accepts every write.
    #[default]
    Off,
    /// Writes carry the holder's fence; the resource refuses one below the highest it saw.
    Write,
    /// The read registers the fence too, so a holder that read before a newer one is refused.
    ReadWrite,
}

impl Fencing {
    /// The profile's spelling.
    pub fn name(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Write => "write",
            Self::ReadWrite => "read-write",
        }
    }
}

impl FromStr for Fencing {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "off" => Ok(Self::Off),
            "write" => Ok(Self::Write),
            "read-write" => Ok(Self::ReadWrite),
            other => Err(format!(
                "`{other}` is not a fencing mode: use \"off\", \"write\" or \"read-write\""
            )),
        }
    }
}

/// Why a variant's name was refused: the part, and what is valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VariantError {
    /// A lock library with parts of lockbench's own lock.
    #[error(
        "`{text}`: a lock library ({library}) runs as it is, with its own release and extension and no fence: write `{library}` alone"
    )]
    LibraryAlone {
        /// The whole name.
        text: String,
        /// The library.
        library: String,
    },
    /// Neither a release method nor a lock library (`ReleaseMethod`'s words).
    #[error("{0}, or a lock library: {libraries}", libraries = Client::names())]
    Release(String),
    /// `+fence` and `+fence-rw` both.
    #[error("`{0}` names two fencing modes: use one")]
    TwoFences(String),
    /// A part that is none of the variant's.
    #[error(
        "`{part}` in `{text}` is not a variant part: write METHOD[+extend][+fence|+fence-rw][+fail-open|+fail-closed], e.g. token+extend+fence-rw"
    )]
    Part {
        /// The part.
        part: String,
        /// The whole name.
        text: String,
    },
}

crate::exit::classify!(VariantError => BadInput);

/// One combination compared by `compare`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Variant {
    /// How the lock is released.
    pub release: ReleaseMethod,
    /// What the resource checks.
    pub fencing: Fencing,
    /// Whether a watchdog re-arms the lock while the section runs.
    pub extend: bool,
    /// When Redis does not answer, the section runs without a lock (fail-open) instead of
    /// being refused (fail-closed).
    pub fail_open: bool,
    /// A lock library that takes and releases the lock instead of lockbench's own commands
    /// (`release` is then not used).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client: Option<Client>,
}

impl From<ReleaseMethod> for Variant {
    fn from(release: ReleaseMethod) -> Self {
        Self {
            release,
            fencing: Fencing::Off,
            extend: false,
            fail_open: false,
            client: None,
        }
    }
}

impl Variant {
    /// Its name in every output: the release method, then `+extend`, then `+fence` or
    /// `+fence-rw`, then `+fail-open` (the same whatever order it was written in).
    pub fn name(&self) -> String {
        if let Some(c) = self.client {
            return c.name().to_string();
        }
        let mut n = self.release.name().to_string();
        if self.extend {
            n.push_str("+extend");
        }
        match self.fencing {
            Fencing::Off => {}
            Fencing::Write => n.push_str("+fence"),
            Fencing::ReadWrite => n.push_str("+fence-rw"),
        }
        if self.fail_open {
            n.push_str("+fail-open");
        }
        n
    }

    /// Parses `method[+extend][+fence|+fence-rw][+fail-open|+fail-closed]`; parts not written
    /// take `default`'s.
    pub fn parse_with(s: &str, default: Variant) -> Result<Variant, VariantError> {
        // A lock library: its own release and extension, no fence to hand the resource.
        if let Some(c) = Client::parse(s) {
            return Ok(Variant {
                client: Some(c),
                ..Variant::from(ReleaseMethod::Token)
            });
        }
        if let Some((head, _)) = s.trim().split_once('+')
            && Client::parse(head).is_some()
        {
            return Err(VariantError::LibraryAlone {
                text: s.to_string(),
                library: head.to_string(),
            });
        }
        let mut parts = s.trim().split('+');
        let release: ReleaseMethod = parts
            .next()
            .unwrap_or_default()
            .parse()
            .map_err(VariantError::Release)?;
        let mut v = Variant { release, ..default };
        let mut fenced = false;
        for part in parts {
            match part.trim() {
                "extend" => v.extend = true,
                "fence" | "fence-rw" if fenced => {
                    return Err(VariantError::TwoFences(s.to_string()));
                }
                "fence" => (v.fencing, fenced) = (Fencing::Write, true),
                "fence-rw" => (v.fencing, fenced) = (Fencing::ReadWrite, true),
                "fail-open" => v.fail_open = true,
                "fail-closed" => v.fail_open = false,
                other => {
                    return Err(VariantError::Part {
                        part: other.to_string(),
                        text: s.to_string(),
                    });
                }
            }
        }
        Ok(v)
    }
}

impl Variant {
    /// What releases its locks: the release method's name, or the lock library's.
    pub fn name_of_release(&self) -> &'static str {
        match self.client {
            Some(c) => c.name(),
            None => self.release.name(),
        }
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names are canonical whatever the order; defaults fill what is not written; bad parts
    /// say what is valid.
    #[test]
    fn parses_and_names_variants() {
        let d = Variant::from(ReleaseMethod::Token);
        let v = Variant::parse_with("token+fence-rw+extend", d).unwrap();
        assert_eq!(v.name(), "token+extend+fence-rw");
        assert_eq!(Variant::parse_with("del", d).unwrap().name(), "del");
        let fenced = Variant {
            fencing: Fencing::Write,
            ..d
        };
        assert_eq!(
            Variant::parse_with("token", fenced).unwrap().name(),
            "token+fence"
        );
        assert!(
            Variant::parse_with("token+fence+fence-rw", d)
                .unwrap_err()
                .to_string()
                .contains("two fencing")
        );
        assert!(
            Variant::parse_with("token+lease", d)
                .unwrap_err()
                .to_string()
                .contains("METHOD[+extend]")
        );
        assert!(
            Variant::parse_with("tokn", d)
                .unwrap_err()
                .to_string()
                .contains("del, token, delex or script")
        );
        assert_eq!("read-write".parse::<Fencing>(), Ok(Fencing::ReadWrite));
        let open = Variant::parse_with("token+fail-open", d).unwrap();
        assert!(open.fail_open);
        assert_eq!(open.name(), "token+fail-open");
        let closed = Variant::parse_with("token+fail-closed", open).unwrap();
        assert_eq!(closed.name(), "token");
    }
}
