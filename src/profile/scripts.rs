//! The user's own lock scripts (`acquire_script`, `release_script`, `extend_script`): checked
//! against the variants and the backend with the other fields, read last (after every field is
//! valid), each hashed as `SCRIPT LOAD` will name it.

use super::check::Check;
use super::{Acquire, BackendChoice, Plan, Profile, ProfileError};
use crate::model::release::{ExtendCommand, ReleaseMethod};
use crate::model::script::{
    CommandStep, ScriptRole, UserScript, UserScripts, commands_text, split_outside_quotes,
};
use crate::model::variant::Fencing;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where one of the user's steps comes from: a Lua file (checked, not yet read) or commands
/// (parsed).
pub(super) enum Source {
    /// A Lua file.
    File(PathBuf),
    /// Commands sent one by one.
    Commands(Vec<CommandStep>),
}

/// The user's steps a plan will run, checked; the files not yet read.
pub(super) type ScriptFiles = Vec<(ScriptRole, Source)>;

impl Profile {
    /// The script fields, checked against the plan's variants, acquisition, extension and
    /// backend: `None` when no variant runs the user's script.
    pub(super) fn plan_scripts(
        &self,
        cx: &Check<'_>,
        plan: &Plan,
    ) -> Result<Option<ScriptFiles>, ProfileError> {
        let mut given: ScriptFiles = Vec::new();
        for (role, file, commands) in [
            (
                ScriptRole::Acquire,
                &self.acquire_script,
                &self.acquire_commands,
            ),
            (
                ScriptRole::Release,
                &self.release_script,
                &self.release_commands,
            ),
            (
                ScriptRole::Extend,
                &self.extend_script,
                &self.extend_commands,
            ),
        ] {
            match (file, commands) {
                (Some(_), Some(_)) => {
                    return Err(cx.err(
                        role.commands_field(),
                        format!(
                            "both a Lua file ({}, --{}) and commands give this step: keep one",
                            role.field(),
                            role.field().replace('_', "-")
                        ),
                    ));
                }
                (Some(p), None) => given.push((role, Source::File(resolve(p, cx.base)))),
                (None, Some(list)) => {
                    given.push((role, Source::Commands(parse_commands(cx, role, list)?)));
                }
                (None, None) => {}
            }
        }
        let field = |role: ScriptRole| {
            given
                .iter()
                .find(|(r, _)| *r == role)
                .map(|(r, src)| match src {
                    Source::File(_) => r.field(),
                    Source::Commands(_) => r.commands_field(),
                })
                .unwrap_or(role.field())
        };
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
                    field(*role),
                    "names your own script, but no variant runs it: add release = \"script\" \
                     (--release script), or list \"script\" in releases"
                        .to_string(),
                )),
            };
        }
        if self.release_script.is_none() && self.release_commands.is_none() {
            return Err(cx.err(
                variant_field,
                "`script` runs your own release script: give its Lua file with release_script = \
                 \"scripts/release.lua\" (--release-script FILE), or its commands with \
                 release_commands = [\"GET {key} == {token}\", \"DEL {key}\"] \
                 (--release-commands 'GET {key} == {token}; DEL {key}'), or use del, token or delex"
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
                field(ScriptRole::Release),
                format!(
                    "your own scripts and commands run only on a Redis server, and backend = \"{model}\" is \
                     lockbench's in-process model: use backend = \"spawn\" (redis-server on PATH) \
                     or --redis URL"
                ),
            ));
        }
        if self.acquire_script.is_some() || self.acquire_commands.is_some() {
            if p.acquire == Acquire::SetnxExpire {
                return Err(cx.err(
                    field(ScriptRole::Acquire),
                    "takes the lock your way, and acquire = \"setnx-expire\" says lockbench's \
                     two-command way: drop one"
                        .to_string(),
                ));
            }
            if scripted.iter().any(|v| v.fencing != Fencing::Off) {
                return Err(cx.err(
                    field(ScriptRole::Acquire),
                    "a fenced variant (+fence, +fence-rw) acquires with lockbench's fenced script \
                     (SET NX PX and the fence's INCR in one step): run `script` without fencing, \
                     or drop acquire_script"
                        .to_string(),
                ));
            }
        }
        if self.extend_script.is_some() || self.extend_commands.is_some() {
            if !scripted.iter().any(|v| v.extend) {
                return Err(cx.err(
                    field(ScriptRole::Extend),
                    "re-arms held locks, but the `script` variant does not extend: write \
                     release = \"script+extend\" (or set extend)"
                        .to_string(),
                ));
            }
            if p.extend_with == ExtendCommand::SetIfeq {
                return Err(cx.err(
                    field(ScriptRole::Extend),
                    "re-arms your way, and extend_with = \"set-ifeq\" says lockbench's: drop one"
                        .to_string(),
                ));
            }
        }
        Ok(Some(given))
    }
}

/// A step's commands, each parsed: an error names the field and the command.
fn parse_commands(
    cx: &Check<'_>,
    role: ScriptRole,
    list: &[String],
) -> Result<Vec<CommandStep>, ProfileError> {
    if list.iter().all(|c| c.trim().is_empty()) {
        return Err(cx.err(
            role.commands_field(),
            "is empty: give the commands, e.g. [\"GET {key} == {token}\", \"DEL {key}\"]"
                .to_string(),
        ));
    }
    // A flag's value holds them all, `;` between them (outside quotes, as a `;` inside an
    // argument is the argument's).
    list.iter()
        .flat_map(|c| split_outside_quotes(c, ";"))
        .filter(|c| !c.trim().is_empty())
        .enumerate()
        .map(|(i, c)| {
            CommandStep::parse(c, role)
                .map_err(|e| cx.err(role.commands_field(), format!("command {}: {e}", i + 1)))
        })
        .collect()
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
    for (role, source) in files {
        let path = match source {
            Source::File(path) => path,
            Source::Commands(steps) => {
                let s = UserScript {
                    role,
                    path: commands_text(&steps),
                    sha1: String::new(),
                    commands: Some(steps.into()),
                    text: "".into(),
                };
                *match role {
                    ScriptRole::Acquire => &mut acquire,
                    ScriptRole::Release => &mut release,
                    ScriptRole::Extend => &mut extend,
                } = Some(s);
                continue;
            }
        };
        let shown = path.display().to_string();
        let text = crate::inputs::read_to_string(&path, crate::inputs::FileKind::Script)
            .map_err(|e| cx.err(role.field(), e.to_string()))?;
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
            commands: None,
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
