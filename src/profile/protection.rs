//! The protection part of a profile's validation: the variants (release method, fencing,
//! extension, fail-open), the extension's interval and command, what a holder does when its
//! lock is gone, and how a lock is taken, checked into a [`Protection`].

use super::check::Check;
use super::{Profile, ProfileError};
use crate::model::plan::{Acquire, ExtendEvery, OnUnavailable, Protection};
use crate::model::release::ReleaseMethod;
use crate::model::variant::{Fencing, Variant};

impl Profile {
    /// The protection's fields, checked; `ttl_us` (the TTL sent, µs) sets the extension's
    /// interval.
    pub(super) fn plan_protection(
        &self,
        cx: &Check<'_>,
        ttl_us: u64,
    ) -> Result<Protection, ProfileError> {
        let fencing = self.fencing();
        let extend_all = match self.extend.as_deref().map(str::trim) {
            None | Some("off") => false,
            Some(_) => true,
        };
        let on_unavailable = self.on_unavailable();
        let default_variant = Variant {
            release: ReleaseMethod::Token,
            fencing,
            extend: extend_all,
            fail_open: on_unavailable == OnUnavailable::FailOpen,
            client: None,
        };
        let method = |field: &str, s: &str| {
            Variant::parse_with(s, default_variant).map_err(|e| cx.err(field, e.to_string()))
        };
        let release = method("release", &self.release())?;
        let releases = match &self.releases {
            Some(list) if list.is_empty() => {
                return Err(cx.err(
                    "releases",
                    "list at least one of del, token, delex, script".to_string(),
                ));
            }
            Some(list) => {
                let mut out = Vec::new();
                for s in list {
                    let m = method("releases", s)?;
                    if !out.contains(&m) {
                        out.push(m);
                    }
                }
                out
            }
            None => vec![
                Variant {
                    release: ReleaseMethod::Del,
                    ..default_variant
                },
                default_variant,
            ],
        };
        let extend_every = match self.extend.as_deref().map(str::trim) {
            None | Some("off") => ExtendEvery::TtlDiv(3),
            Some(t) => match t.strip_prefix("ttl/") {
                Some(n) => match n.parse::<u64>() {
                    Ok(n) if n >= 2 => ExtendEvery::TtlDiv(n),
                    _ => {
                        return Err(cx.err(
                            "extend",
                            format!(
                                "`{t}`: write ttl/N with N ≥ 2 (e.g. ttl/3, Redisson's default)"
                            ),
                        ));
                    }
                },
                None => ExtendEvery::Fixed(
                    crate::model::units::parse_ms(t)
                        .map(crate::model::units::ms_to_us)
                        .map_err(|e| cx.err("extend", e.to_string()))?,
                ),
            },
        };
        let extends = std::iter::once(&release).chain(&releases).any(|v| v.extend);
        let extend_us = extend_every
            .at(ttl_us, extends)
            .map_err(|e| cx.err("extend", e.to_string()))?;
        let extend_with = self.extend_with();
        let on_lost = self.on_lost();
        let resource = self.resource.unwrap_or(false)
            || std::iter::once(&release)
                .chain(&releases)
                .any(|v| v.fencing != Fencing::Off);
        let acquire = self.acquire();
        if acquire == Acquire::SetnxExpire
            && std::iter::once(&release)
                .chain(&releases)
                .any(|v| v.fencing != Fencing::Off)
        {
            return Err(cx.err(
                "acquire",
                "setnx-expire is the two-command anti-pattern; fenced variants acquire with one script (use set-nx-px, or variants without +fence)".to_string(),
            ));
        }
        Ok(Protection {
            release,
            releases,
            defaults: default_variant,
            resource,
            extend_us,
            extend_every,
            extend_with,
            on_lost,
            on_unavailable,
            acquire,
            // Read last, once every field is valid (`Profile::plan`).
            scripts: None,
        })
    }
}
