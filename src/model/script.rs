//! The user's own lock scripts (the `script` release method): Lua files named by the profile's
//! `acquire_script`, `release_script` and `extend_script`, and the classification of their
//! replies under the documented convention.
//!
//! Every script is called with `KEYS[1]` = the lock key, `ARGV[1]` = the holder's token,
//! `ARGV[2]` = the TTL in ms. Its reply is read as:
//!
//! | script | acquired / deleted / re-armed | not | also |
//! |---|---|---|---|
//! | acquire | `1` or `OK` | `0` or nil | |
//! | release | `1` | `0` (nothing deleted: absent or not ours) | `-1` = held by another |
//! | extend | `1` | `0` (lost) | |
//!
//! Anything else is an error naming the script and the reply. The reply is never the last
//! word on safety: a release that answers `1` while a newer holder's section is open is a
//! wrongful delete, whatever the script meant (lockbench's own timeline decides).

use crate::model::release::ReleaseOutcome;
use serde::Serialize;
use std::sync::Arc;

/// Which of the lock's steps a script takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ScriptRole {
    /// Takes the lock.
    Acquire,
    /// Releases it.
    Release,
    /// Re-arms it while held.
    Extend,
}

impl ScriptRole {
    /// The profile key that names this script (`release_script`).
    pub fn field(self) -> &'static str {
        match self {
            Self::Acquire => "acquire_script",
            Self::Release => "release_script",
            Self::Extend => "extend_script",
        }
    }

    /// The profile key that gives this step as commands (`release_commands`).
    pub fn commands_field(self) -> &'static str {
        match self {
            Self::Acquire => "acquire_commands",
            Self::Release => "release_commands",
            Self::Extend => "extend_commands",
        }
    }
}

/// One command of a step given as commands (`release_commands = ["GET {key} == {token}",
/// "DEL {key}"]`): its words, with the placeholders `{key}`, `{token}`, `{ttl_ms}` and
/// `{ttl_s}` (whole seconds, rounded up), and what its reply must be for the next command to
/// be sent (` == VALUE` after the command). Each command is a round trip of its own, as in an
/// application's code: nothing makes the steps atomic — which is what such a template tests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CommandStep {
    /// The command and its arguments, placeholders unfilled.
    pub words: Vec<String>,
    /// The reply (placeholders unfilled) without which the steps stop here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expect: Option<String>,
}

/// The placeholders a command may hold.
const PLACEHOLDERS: [&str; 4] = ["{key}", "{token}", "{ttl_ms}", "{ttl_s}"];

/// Commands that run a script: its Lua can touch any key, which `COMMAND GETKEYS` cannot see
/// (it sees the keys the call names), so a step given as text may not send them — a script is
/// given as a file (`--release-script`), where lockbench knows it is the user's own code.
const SCRIPT_COMMANDS: [&str; 8] = [
    "EVAL",
    "EVALSHA",
    "EVAL_RO",
    "EVALSHA_RO",
    "FCALL",
    "FCALL_RO",
    "SCRIPT",
    "FUNCTION",
];

/// Where quotes open and close in `text`, as [`split_args`] reads them: `true` for each byte
/// inside quotes (quotes and escapes included).
fn quoted_bytes(text: &str) -> Vec<bool> {
    let b = text.as_bytes();
    let mut inside = vec![false; b.len()];
    let mut quote: Option<u8> = None;
    let mut i = 0;
    while i < b.len() {
        match quote {
            Some(q) => {
                inside[i] = true;
                if b[i] == b'\\' && i + 1 < b.len() {
                    inside[i + 1] = true;
                    i += 1;
                } else if b[i] == q {
                    quote = None;
                }
            }
            None if b[i] == b'"' || b[i] == b'\'' => {
                inside[i] = true;
                quote = Some(b[i]);
            }
            None => {}
        }
        i += 1;
    }
    inside
}

/// `text` cut at every `sep` outside quotes (`GET {key} == "a==b"` is cut once).
pub(crate) fn split_outside_quotes<'a>(text: &'a str, sep: &str) -> Vec<&'a str> {
    let inside = quoted_bytes(text);
    let mut parts = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < text.len() {
        if !inside[i] && text[i..].starts_with(sep) {
            parts.push(&text[start..i]);
            i += sep.len();
            start = i;
        } else {
            i += 1;
        }
    }
    parts.push(&text[start..]);
    parts
}

/// A command line of `acquire_commands`/`release_commands`/`extend_commands` that cannot be
/// run: what is wrong with it and, where it helps, what to give instead. Bad input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadCommand(String);

crate::exit::classify!(BadCommand => BadInput);

/// Splits a command line into arguments as `redis-cli` does (its `sdssplitargs`): words apart
/// by white space; `"…"` with the escapes `\n \r \t \b \a \\ \" \xHH`; `'…'` with `\'` only; a
/// closing quote must end the word. So `EVAL "x y" 1 {key}` is four arguments, as the user
/// typed them into redis-cli.
pub(crate) fn split_args(text: &str) -> Result<Vec<String>, BadCommand> {
    let b = text.as_bytes();
    let mut words = Vec::new();
    // As redis-cli: a closing quote ends its word.
    let closed = |at: usize| match b.get(at + 1) {
        Some(n) if !n.is_ascii_whitespace() => Err(BadCommand(format!(
            "`{text}`: a closing quote must be followed by a space or nothing"
        ))),
        _ => Ok(()),
    };
    let mut i = 0;
    loop {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i == b.len() {
            return Ok(words);
        }
        let mut word: Vec<u8> = Vec::new();
        let mut quote: Option<u8> = None;
        loop {
            let Some(&c) = b.get(i) else {
                if quote.is_some() {
                    return Err(BadCommand(format!("`{text}`: a quote is not closed")));
                }
                break;
            };
            match quote {
                Some(b'"') => match c {
                    b'\\'
                        if i + 3 < b.len()
                            && b[i + 1] == b'x'
                            && b[i + 2].is_ascii_hexdigit()
                            && b[i + 3].is_ascii_hexdigit() =>
                    {
                        let hex = std::str::from_utf8(&b[i + 2..i + 4]).unwrap_or("0");
                        word.push(u8::from_str_radix(hex, 16).unwrap_or(0));
                        i += 3;
                    }
                    b'\\' if i + 1 < b.len() => {
                        i += 1;
                        word.push(match b[i] {
                            b'n' => b'\n',
                            b'r' => b'\r',
                            b't' => b'\t',
                            b'b' => 8,
                            b'a' => 7,
                            other => other,
                        });
                    }
                    b'"' => {
                        closed(i)?;
                        i += 1;
                        break;
                    }
                    _ => word.push(c),
                },
                Some(_) => match c {
                    b'\\' if b.get(i + 1) == Some(&b'\'') => {
                        word.push(b'\'');
                        i += 1;
                    }
                    b'\'' => {
                        closed(i)?;
                        i += 1;
                        break;
                    }
                    _ => word.push(c),
                },
                None => match c {
                    c if c.is_ascii_whitespace() => break,
                    b'"' | b'\'' => quote = Some(c),
                    _ => word.push(c),
                },
            }
            i += 1;
        }
        match String::from_utf8(word) {
            Ok(w) => words.push(w),
            Err(_) => {
                return Err(BadCommand(format!(
                    "`{text}`: an argument is not UTF-8 text"
                )));
            }
        }
    }
}

impl CommandStep {
    /// Parses `GET {key} == {token}`, a command of `role`'s step: an error says what is wrong
    /// with the command.
    pub fn parse(text: &str, role: ScriptRole) -> Result<CommandStep, BadCommand> {
        let (cmd, expect) = match split_outside_quotes(text, "==").as_slice() {
            [c] => (*c, None),
            [c, e] => (*c, Some(e.trim())),
            _ => {
                return Err(BadCommand(format!(
                    "`{text}`: `==` appears twice: give one expected reply"
                )));
            }
        };
        let runs_script = |name: &str| {
            SCRIPT_COMMANDS
                .contains(&name.to_ascii_uppercase().as_str())
                .then(|| {
                    format!(
                        "`{text}` runs a script ({name}), which commands given as text may not \
                         (its code could touch any key, unseen by the key check): give the \
                         script as a Lua file with --{} ({})",
                        role.field().replace('_', "-"),
                        role.field()
                    )
                })
        };
        // A script is refused first, whatever its arguments (they need not split cleanly), its
        // name quoted or not (`'EVAL' …` is EVAL to redis-cli) …
        if let Some(raw) = cmd.split_whitespace().next()
            && let Some(e) = runs_script(raw.trim_matches(['"', '\'']))
        {
            return Err(BadCommand(e));
        }
        let words = split_args(cmd)?;
        let Some(name) = words.first() else {
            return Err(BadCommand(format!("`{text}` has no command")));
        };
        // … and once more as the server will read it (`"\x45VAL"` is EVAL too).
        if let Some(e) = runs_script(name) {
            return Err(BadCommand(e));
        }
        // The key check sees the lock's key in these, yet they carry it out of the run's reach:
        // to another database or another server (MIGRATE names any host), where the end of the
        // run cannot remove it.
        let upper = name.to_ascii_uppercase();
        let elsewhere = match upper.as_str() {
            "MOVE" | "MIGRATE" => true,
            "COPY" => words.iter().any(|w| w.eq_ignore_ascii_case("DB")),
            _ => false,
        };
        if elsewhere {
            return Err(BadCommand(format!(
                "`{text}` moves or copies a key to another database or server ({upper}), out of \
                 the run's reach: commands given as text act on the run's server and database"
            )));
        }
        if !name.chars().all(|c| c.is_ascii_alphabetic()) {
            return Err(BadCommand(format!(
                "`{text}`: `{name}` is not a Redis command name (letters only, e.g. GET, DEL, SET)"
            )));
        }
        if !words.iter().any(|w| w == "{key}") {
            return Err(BadCommand(format!(
                "`{text}` does not act on the lock: name it with {{key}} (e.g. DEL {{key}})"
            )));
        }
        let expect = match expect {
            Some("") => return Err(BadCommand(format!("`{text}`: nothing after `==`"))),
            Some(e) => match split_args(e)?.as_slice() {
                [one] => Some(one.clone()),
                _ => {
                    return Err(BadCommand(format!(
                        "`{text}`: `== {e}` must be one value, e.g. == {{token}}"
                    )));
                }
            },
            None => None,
        };
        for w in words.iter().chain(&expect) {
            let mut rest = w.as_str();
            while let Some(i) = rest.find('{') {
                let tail = &rest[i..];
                let known = PLACEHOLDERS.iter().find(|p| tail.starts_with(*p));
                match known {
                    Some(p) => rest = &tail[p.len()..],
                    None => {
                        return Err(BadCommand(format!(
                            "`{text}`: unknown placeholder in `{w}`: use {}",
                            PLACEHOLDERS.join(", ")
                        )));
                    }
                }
            }
        }
        Ok(CommandStep { words, expect })
    }

    /// The command's arguments for holder `token` of `key`.
    pub fn args(&self, key: &str, token: &str, ttl_ms: u64) -> Vec<String> {
        self.words
            .iter()
            .map(|w| fill(w, key, token, ttl_ms))
            .collect()
    }

    /// The reply that lets the steps go on, filled in.
    pub fn expected(&self, key: &str, token: &str, ttl_ms: u64) -> Option<String> {
        self.expect.as_deref().map(|e| fill(e, key, token, ttl_ms))
    }
}

fn fill(w: &str, key: &str, token: &str, ttl_ms: u64) -> String {
    if !w.contains('{') {
        return w.to_string();
    }
    w.replace("{key}", key)
        .replace("{token}", token)
        .replace("{ttl_ms}", &ttl_ms.to_string())
        .replace("{ttl_s}", &ttl_ms.div_ceil(1000).to_string())
}

/// How a step given as commands is written in messages: `GET {key} == {token}; DEL {key}`.
pub(crate) fn commands_text(steps: &[CommandStep]) -> String {
    steps
        .iter()
        .map(|s| match &s.expect {
            Some(e) => format!("{} == {e}", s.words.join(" ")),
            None => s.words.join(" "),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// One of the user's Lua scripts, read before the run — or a step given as commands, sent one
/// by one.
#[derive(Debug, Clone, Serialize)]
pub struct UserScript {
    /// What it does.
    #[serde(skip)]
    pub role: ScriptRole,
    /// The file as resolved (the profile's directory for a relative path in a profile); for
    /// commands, the commands as written in messages.
    pub path: String,
    /// SHA1 of its text, as `SCRIPT LOAD` answers it and `EVALSHA` names it (empty for
    /// commands).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub sha1: String,
    /// The step as commands instead of Lua: each sent on its own, in order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commands: Option<Arc<[CommandStep]>>,
    /// Its text (sent again with `SCRIPT LOAD` when a server answers `NOSCRIPT`).
    #[serde(skip)]
    pub text: Arc<str>,
}

impl UserScript {
    /// How messages name it: `release_script scripts/release.lua`.
    pub fn label(&self) -> String {
        match self.commands {
            Some(_) => format!("{} `{}`", self.role.commands_field(), self.path),
            None => format!("{} {}", self.role.field(), self.path),
        }
    }
}

/// The scripts of the `script` variant: the release always; acquisition and extension where
/// given (otherwise lockbench's `SET key token NX PX ttl` and compare-and-`PEXPIRE`).
#[derive(Debug, Clone, Serialize)]
pub struct UserScripts {
    /// Takes the lock.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acquire: Option<UserScript>,
    /// Releases it.
    pub release: UserScript,
    /// Re-arms it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extend: Option<UserScript>,
}

impl UserScripts {
    /// Every script given, acquire, release, extend.
    pub fn all(&self) -> impl Iterator<Item = &UserScript> {
        self.acquire
            .iter()
            .chain(std::iter::once(&self.release))
            .chain(&self.extend)
    }
}

/// A script's reply, in the shapes the convention reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScriptReply {
    /// An integer (a Lua number, or `true` as `1`).
    Int(i64),
    /// The status `OK` (a Lua `{ok = 'OK'}`, or the reply of `redis.call('SET', …)`).
    Ok,
    /// Nil (a Lua `false` or `nil`).
    Nil,
    /// A string (a `GET`'s value).
    Text(String),
    /// Anything else, as written for a message.
    Other(String),
}

impl std::fmt::Display for ScriptReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Int(n) => write!(f, "{n}"),
            Self::Ok => f.write_str("OK"),
            Self::Nil => f.write_str("nil"),
            Self::Text(s) => write!(f, "{s:?}"),
            Self::Other(s) => f.write_str(s),
        }
    }
}

impl ScriptReply {
    /// Whether the reply reads as `want` (a command's `== VALUE`): a string's text, an
    /// integer's digits, `OK`, `nil`.
    pub fn reads_as(&self, want: &str) -> bool {
        match self {
            Self::Text(s) => s == want,
            Self::Int(n) => n.to_string() == want,
            Self::Ok => want == "OK",
            Self::Nil => want == "nil",
            Self::Other(_) => false,
        }
    }
}

/// A reply outside the convention: what the script answered and what it should answer.
fn off_convention(s: &UserScript, reply: &ScriptReply, valid: &str) -> String {
    // A table is several lines, as redis-cli prints it: set apart, indented.
    let reply = reply.to_string();
    let reply = match reply.contains('\n') {
        true => format!(":\n    {}\n", reply.replace('\n', "\n    ")),
        false => format!(" {reply}, "),
    };
    format!(
        "{} answered{reply}which the convention does not know: return {valid}",
        s.label()
    )
}

/// An acquire script's reply: `Ok(true)` acquired, `Ok(false)` busy.
pub(crate) fn classify_acquire(s: &UserScript, reply: &ScriptReply) -> Result<bool, String> {
    match reply {
        ScriptReply::Int(1) | ScriptReply::Ok => Ok(true),
        ScriptReply::Int(0) | ScriptReply::Nil => Ok(false),
        other => Err(off_convention(
            s,
            other,
            "1 or OK (acquired), 0 or nil (busy)",
        )),
    }
}

/// A release script's reply, judged against lockbench's timeline: `newer_holder` = a section
/// of the key that opened after the releasing holder's was open as the release was sent, so
/// the releasing holder's lock was already gone and anything deleted was another's.
pub(crate) fn classify_release(
    s: &UserScript,
    reply: &ScriptReply,
    newer_holder: bool,
) -> Result<ReleaseOutcome, String> {
    match reply {
        ScriptReply::Int(1) if newer_holder => Ok(ReleaseOutcome::WrongfulDelete),
        ScriptReply::Int(1) => Ok(ReleaseOutcome::Released),
        ScriptReply::Int(0) => Ok(ReleaseOutcome::RefusedUnclassified),
        ScriptReply::Int(-1) => Ok(ReleaseOutcome::RefusedHeldByOther),
        other => Err(off_convention(
            s,
            other,
            "1 (deleted), 0 (nothing deleted) or -1 (held by another)",
        )),
    }
}

/// An extend script's reply: `Ok(true)` re-armed, `Ok(false)` lost.
pub(crate) fn classify_extend(s: &UserScript, reply: &ScriptReply) -> Result<bool, String> {
    match reply {
        ScriptReply::Int(1) => Ok(true),
        ScriptReply::Int(0) => Ok(false),
        other => Err(off_convention(s, other, "1 (re-armed) or 0 (lost)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(role: ScriptRole) -> UserScript {
        UserScript {
            role,
            path: "x.lua".into(),
            sha1: String::new(),
            commands: None,
            text: "return 1".into(),
        }
    }

    /// A release's `1` is the holder's own delete only when no newer holder was in: with one
    /// in, it deleted that holder's lock, whatever the script thinks it did.
    #[test]
    fn release_replies_are_judged_by_the_timeline() {
        let s = script(ScriptRole::Release);
        let r = |reply, newer| classify_release(&s, &reply, newer);
        assert_eq!(r(ScriptReply::Int(1), false), Ok(ReleaseOutcome::Released));
        assert_eq!(
            r(ScriptReply::Int(1), true),
            Ok(ReleaseOutcome::WrongfulDelete)
        );
        assert_eq!(
            r(ScriptReply::Int(0), true),
            Ok(ReleaseOutcome::RefusedUnclassified)
        );
        assert_eq!(
            r(ScriptReply::Int(-1), false),
            Ok(ReleaseOutcome::RefusedHeldByOther)
        );
        // A table, as redis-cli prints it, is set apart on lines of its own.
        let e = r(ScriptReply::Other("1) (integer) 1\n2) \"a\"".into()), false).unwrap_err();
        assert!(
            e.contains("answered:\n    1) (integer) 1\n    2) \"a\"\nwhich the convention"),
            "{e}"
        );
        let e = r(ScriptReply::Other("\"yes\"".into()), false).unwrap_err();
        assert!(
            e.contains("release_script x.lua answered \"yes\"") && e.contains("-1 (held by"),
            "{e}"
        );
        assert!(r(ScriptReply::Nil, false).is_err());
        assert!(r(ScriptReply::Int(2), false).is_err());
    }

    /// Acquire takes 1/OK and 0/nil; extend takes 1 and 0; the rest is an error that names
    /// the script.
    #[test]
    fn acquire_and_extend_replies() {
        let a = script(ScriptRole::Acquire);
        assert_eq!(classify_acquire(&a, &ScriptReply::Ok), Ok(true));
        assert_eq!(classify_acquire(&a, &ScriptReply::Int(1)), Ok(true));
        assert_eq!(classify_acquire(&a, &ScriptReply::Nil), Ok(false));
        assert_eq!(classify_acquire(&a, &ScriptReply::Int(0)), Ok(false));
        assert!(
            classify_acquire(&a, &ScriptReply::Int(7))
                .unwrap_err()
                .starts_with("acquire_script x.lua answered 7")
        );
        let e = script(ScriptRole::Extend);
        assert_eq!(classify_extend(&e, &ScriptReply::Int(1)), Ok(true));
        assert_eq!(classify_extend(&e, &ScriptReply::Int(0)), Ok(false));
        assert!(classify_extend(&e, &ScriptReply::Ok).is_err());
    }

    /// A command template: placeholders filled, `== VALUE` kept apart; a command that does not
    /// name the lock, an unknown placeholder or a second value after `==` is refused, saying why.
    #[test]
    fn commands_are_parsed_and_filled() {
        let get = CommandStep::parse("GET {key} == {token}", ScriptRole::Release).unwrap();
        assert_eq!(get.args("k", "t", 1500), ["GET", "k"]);
        assert_eq!(get.expected("k", "t", 1500).as_deref(), Some("t"));
        let set =
            CommandStep::parse("SET {key} {token} NX EX {ttl_s}", ScriptRole::Acquire).unwrap();
        assert_eq!(set.args("k", "t", 1500), ["SET", "k", "t", "NX", "EX", "2"]);
        assert_eq!(set.expected("k", "t", 1500), None);
        assert_eq!(
            commands_text(&[get, set]),
            "GET {key} == {token}; SET {key} {token} NX EX {ttl_s}"
        );
        for (bad, says) in [
            ("", "no command"),
            ("DEL other", "does not act on the lock"),
            ("GET {key} == {token} x", "must be one value"),
            ("GET {key} ==", "nothing after"),
            ("DEL {key} {user}", "unknown placeholder"),
            ("1DEL {key}", "not a Redis command name"),
        ] {
            let e = CommandStep::parse(bad, ScriptRole::Release)
                .unwrap_err()
                .to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    /// Issue 40, item 6: a command that runs a script is refused at the door, pointing to the
    /// step's Lua file flag — the key check sees only the keys a script call names, so
    /// `EVAL redis.call('FLUSHALL') … 1 {key}` used to pass it and flush the server.
    #[test]
    fn commands_that_run_scripts_are_refused() {
        for text in [
            "EVAL redis.call('FLUSHALL')return(1) 1 {key}",
            "EVAL \"x y\" 1 {key}",
            "evalsha abc 1 {key}",
            "EVAL_RO \"return 1\" 1 {key}",
            "EVALSHA_RO abc 1 {key}",
            "FCALL f 1 {key}",
            "FCALL_RO f 1 {key}",
            "\"EVAL\" 'return 1' 1 {key}",
            "'EVAL' \"redis.call('FLUSHALL') return 1\" 1 {key}",
            "\"\\x45VAL\" 'return 1' 1 {key}",
            "SCRIPT FLUSH {key}",
            "FUNCTION FLUSH {key}",
        ] {
            let e = CommandStep::parse(text, ScriptRole::Release)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("runs a script") && e.contains("--release-script"),
                "{text}: {e}"
            );
        }
        let e = CommandStep::parse("EVAL x 1 {key}", ScriptRole::Acquire)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--acquire-script"), "{e}");
    }

    /// A hostile pass after issue 40: the key check sees the lock's key in `MOVE {key} 1`,
    /// `MIGRATE … {key} …` and `COPY {key} {key} DB 1`, which left a run key in another
    /// database or on another server. Refused; a `COPY` within the database is not (control).
    #[test]
    fn commands_that_carry_the_key_elsewhere_are_refused() {
        for text in [
            "MOVE {key} 1",
            "move {key} 1",
            "MIGRATE ::1 6380 {key} 0 1000 COPY REPLACE",
            "COPY {key} {key} DB 1",
            "COPY {key} {key} db 1 REPLACE",
        ] {
            let e = CommandStep::parse(text, ScriptRole::Release)
                .unwrap_err()
                .to_string();
            assert!(e.contains("out of the run's reach"), "{text}: {e}");
        }
        assert!(CommandStep::parse("COPY {key} {key} REPLACE", ScriptRole::Release).is_ok());
    }

    /// Issue 40, item 6: arguments are split as redis-cli's `sdssplitargs` splits them — the
    /// words a user tried in redis-cli are the words sent.
    #[test]
    fn arguments_are_split_as_redis_cli_splits_them() {
        let ok = |t: &str| split_args(t).unwrap_or_else(|e| panic!("{t}: {e}"));
        assert_eq!(ok("SET {key} \"a b\""), ["SET", "{key}", "a b"]);
        assert_eq!(ok("  SET   {key}\tv  "), ["SET", "{key}", "v"]);
        assert_eq!(ok("SET k 'it\\'s'"), ["SET", "k", "it's"]);
        assert_eq!(ok("SET k 'a\\nb'"), ["SET", "k", "a\\nb"]);
        assert_eq!(ok("SET k \"\\x41\\n\\\"q\\\"\""), ["SET", "k", "A\n\"q\""]);
        assert_eq!(ok("SET k a\"b c\""), ["SET", "k", "ab c"]);
        assert_eq!(ok("SET k \"\""), ["SET", "k", ""]);
        for bad in ["SET k \"abc", "SET k 'abc", "SET k \"a\"b", "SET k 'a'b"] {
            assert!(split_args(bad).is_err(), "{bad}");
        }
        // `==` and `;` inside quotes belong to the argument.
        let step = CommandStep::parse("GET {key} == \"x == y\"", ScriptRole::Release).unwrap();
        assert_eq!(step.expected("k", "t", 1000).as_deref(), Some("x == y"));
        let step = CommandStep::parse("SET {key} \"a b\" NX", ScriptRole::Acquire).unwrap();
        assert_eq!(step.args("k", "t", 1000), ["SET", "k", "a b", "NX"]);
        assert_eq!(
            split_outside_quotes("SET {key} \"a;b\"; DEL {key}", ";"),
            ["SET {key} \"a;b\"", " DEL {key}"]
        );
        let e = CommandStep::parse("SET {key} \"v", ScriptRole::Acquire)
            .unwrap_err()
            .to_string();
        assert!(e.contains("quote is not closed"), "{e}");
    }
}
