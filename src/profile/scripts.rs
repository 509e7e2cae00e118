//! The user's own lock scripts (`acquire_script`, `release_script`, `extend_script`): checked
//! against the variants and the backend with the other fields, read last (after every field is
//! valid), each hashed as `SCRIPT LOAD` will name it.

use super::check::Check;
use super::{Acquire, BackendChoice, Plan, Profile, ProfileError};
use crate::model::release::{ExtendCommand, ReleaseMethod};
use crate::model::script::{ScriptRole, UserScript, UserScripts};
use crate::model::variant::Fencing;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The script files a plan will read, checked but not yet read.
pub(super) type ScriptFiles = Vec<(ScriptRole, PathBuf)>;

impl Profile {
    /// The script fields, checked against the plan's variants, acquisition, extension and
    /// backend: `None` when no variant runs the user's script.
    pub(super) fn plan_scripts(
        &self,
        cx: &Check<'_>,
        plan: &Plan,
    ) -> Result<Option<ScriptFiles>, ProfileError> {
        let given: ScriptFiles = [
            (ScriptRole::Acquire, &self.acquire_script),
            (ScriptRole::Release, &self.release_script),
            (ScriptRole::Extend, &self.extend_script),
        ]
        .into_iter()
        .filter_map(|(role, p)| p.as_deref().map(|p| (role, resolve(p, cx.base))))
        .collect();
        let p = &plan.protection;
        let scripted: Vec<_> = p
            .variants()
            .filter(|v| v.release == ReleaseMethod::Script && v.client.is_none())
            .collect();
        let variant_field = if self
            .releases
            .iter()
            .flatten()
            .any(|r| r.trim().starts_with("script"))
        {
            "releases"
        } else {
            "release"
        };
        if scripted.is_empty() {
            return match given.first() {
                None => Ok(None),
                Some((role, _)) => Err(cx.err(
                    role.field(),
                    "names your own script, but no variant runs it: add release = \"script\" \
                     (--release script), or list \"script\" in releases"
                        .to_string(),
                )),
            };
        }
        if self.release_script.is_none() {
            return Err(cx.err(
                variant_field,
                "`script` runs your own release script: give its Lua file with release_script = \
                 \"scripts/release.lua\" (--release-script FILE), or use del, token or delex"
                    .to_string(),
            ));
        }
        let model = match plan.backend.kind {
            BackendChoice::Memory => Some("memory"),
            BackendChoice::Sim => Some("sim"),
            _ => None,
        };
        if let Some(model) = model {
            return Err(cx.err(
                "release_script",
                format!(
                    "Lua scripts run only on a Redis server, and backend = \"{model}\" is \
                     lockbench's in-process model: use backend = \"spawn\" (redis-server on PATH) \
                     or --redis URL"
                ),
            ));
        }
        if self.acquire_script.is_some() {
            if p.acquire == Acquire::SetnxExpire {
                return Err(cx.err(
                    "acquire_script",
                    "takes the lock your way, and acquire = \"setnx-expire\" says lockbench's \
                     two-command way: drop one"
                        .to_string(),
                ));
            }
            if scripted.iter().any(|v| v.fencing != Fencing::Off) {
                return Err(cx.err(
                    "acquire_script",
                    "a fenced variant (+fence, +fence-rw) acquires with lockbench's fenced script \
                     (SET NX PX and the fence's INCR in one step): run `script` without fencing, \
                     or drop acquire_script"
                        .to_string(),
                ));
            }
        }
        if self.extend_script.is_some() {
            if !scripted.iter().any(|v| v.extend) {
                return Err(cx.err(
                    "extend_script",
                    "re-arms held locks, but the `script` variant does not extend: write \
                     release = \"script+extend\" (or set extend)"
                        .to_string(),
                ));
            }
            if p.extend_with == ExtendCommand::SetIfeq {
                return Err(cx.err(
                    "extend_script",
                    "re-arms your way, and extend_with = \"set-ifeq\" says lockbench's: drop one"
                        .to_string(),
                ));
            }
        }
        Ok(Some(given))
    }
}

/// A relative path starts at `base` (the profile's directory; a flag's path was made absolute
/// from the working directory before the fold).
fn resolve(path: &str, base: Option<&Path>) -> PathBuf {
    let p = Path::new(path);
    match base {
        Some(b) if p.is_relative() => b.join(p),
        _ => p.to_path_buf(),
    }
}

/// Reads the scripts `files` names: a file that cannot be read, or is empty, is an error at
/// its field.
pub(super) fn load(cx: &Check<'_>, files: ScriptFiles) -> Result<Arc<UserScripts>, ProfileError> {
    let (mut acquire, mut release, mut extend) = (None, None, None);
    for (role, path) in files {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(&path).map_err(|e| {
            cx.err(
                role.field(),
                format!("cannot read the Lua file {shown}: {e}"),
            )
        })?;
        if text.trim().is_empty() {
            return Err(cx.err(
                role.field(),
                format!("{shown} is empty: it should hold a Lua script"),
            ));
        }
        let s = UserScript {
            role,
            path: shown,
            sha1: redis::Script::new(&text).get_hash().to_string(),
            text: text.into(),
        };
        *match role {
            ScriptRole::Acquire => &mut acquire,
            ScriptRole::Release => &mut release,
            ScriptRole::Extend => &mut extend,
        } = Some(s);
    }
    let Some(release) = release else {
        return Err(cx.err(
            "release_script",
            "is required by the `script` variant".to_string(),
        ));
    };
    Ok(Arc::new(UserScripts {
        acquire,
        release,
        extend,
    }))
}
