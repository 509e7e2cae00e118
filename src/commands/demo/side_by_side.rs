//! One story on several servers (`demo --redis-server A --redis-server B`): which steps got a
//! different reply. The article compared its redis-cli transcripts on two servers and found
//! only the version line different; this is that comparison, as plain functions over the
//! transcripts so that it is tested with hand-built steps.
//!
//! Two things differ between runs without the server having anything to do with it, and are
//! normalised before comparing: the run id inside every key (each server's run has its own,
//! so its keys never meet another run's), shown as `<run-id>`; and a positive `PTTL` reply,
//! the time left when it was asked, shown as `(integer) >0` (its sign is the server's answer,
//! its size is the clock's).

use super::playback::Step;
use std::io::Write;

/// What replaces a run id when transcripts are compared.
pub const RUN_ID: &str = "<run-id>";

/// One server's run of a story.
#[derive(Debug, Clone)]
pub struct Transcript {
    /// Where the server came from: the binary's path (empty for a demo without
    /// `--redis-server`, which is not compared).
    pub server: String,
    /// Its name and version from `INFO server` (`redis 7.0.15`, `valkey 8.1.8`).
    pub version: String,
    /// The run id inside every key this run wrote.
    pub run_id: String,
    /// The commands and replies, in order.
    pub steps: Vec<Step>,
}

/// A step (by position) that is not the same on every server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepDiff {
    /// 1-based position in the transcripts.
    pub number: usize,
    /// Per server, in transcript order: the step as compared (normalised), or `None` where
    /// that server's transcript ended earlier.
    pub per_server: Vec<Option<Step>>,
}

/// What differs between the transcripts of one story on several servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Differences {
    /// Every server's version, when they are not all the same (the version line).
    pub versions: Option<Vec<String>>,
    /// The steps that differ, in order.
    pub steps: Vec<StepDiff>,
    /// How many step positions were compared (the longest transcript's length).
    pub compared: usize,
}

impl Differences {
    /// Whether the servers answered every step alike (the version aside).
    pub fn no_reply_differs(&self) -> bool {
        self.steps.is_empty()
    }
}

/// `text` with `run_id` written as [`RUN_ID`].
pub fn normalise(text: &str, run_id: &str) -> String {
    if run_id.is_empty() {
        text.to_string()
    } else {
        text.replace(run_id, RUN_ID)
    }
}

/// The step as it is compared: run id normalised, a positive `PTTL` reply as `(integer) >0`.
fn comparable(s: &Step, run_id: &str) -> Step {
    let command = normalise(&s.command, run_id);
    let mut reply = normalise(&s.reply, run_id);
    let positive = reply
        .strip_prefix("(integer) ")
        .and_then(|n| n.parse::<i64>().ok())
        .is_some_and(|n| n > 0);
    if command.starts_with("PTTL ") && positive {
        reply = "(integer) >0".into();
    }
    Step {
        command,
        reply,
        ..s.clone()
    }
}

/// Compares the transcripts step by step (act, who, command and reply must all agree) and
/// their versions.
pub fn differences(ts: &[Transcript]) -> Differences {
    let compared = ts.iter().map(|t| t.steps.len()).max().unwrap_or(0);
    let steps = (0..compared)
        .filter_map(|i| {
            let row: Vec<Option<Step>> = ts
                .iter()
                .map(|t| t.steps.get(i).map(|s| comparable(s, &t.run_id)))
                .collect();
            row.iter().any(|s| *s != row[0]).then(|| StepDiff {
                number: i + 1,
                per_server: row,
            })
        })
        .collect();
    let versions = ts
        .iter()
        .any(|t| t.version != ts[0].version)
        .then(|| ts.iter().map(|t| t.version.clone()).collect());
    Differences {
        versions,
        steps,
        compared,
    }
}

/// Prints `d`: the servers, the version line if it differs, each differing step with every
/// server's reply, and a closing verdict (`no reply differs`, or how many steps differ).
pub fn print<W: Write>(ts: &[Transcript], d: &Differences, mut out: W) -> std::io::Result<()> {
    writeln!(out, "\n=== side by side: {} servers ===", ts.len())?;
    for (i, t) in ts.iter().enumerate() {
        writeln!(out, "  [{}] {}: {}", i + 1, t.version, t.server)?;
    }
    if let Some(versions) = &d.versions {
        writeln!(out, "the version line differs:")?;
        for (i, v) in versions.iter().enumerate() {
            writeln!(out, "  [{}] {v}", i + 1)?;
        }
    }
    for diff in &d.steps {
        let present: Vec<&Step> = diff.per_server.iter().flatten().collect();
        let same_command = present.len() == diff.per_server.len()
            && present.iter().all(|s| {
                (s.act, s.who, &s.command) == (present[0].act, present[0].who, &present[0].command)
            });
        if same_command {
            let s = present[0];
            writeln!(
                out,
                "step {} ({}) {}> {}",
                diff.number, s.act, s.who, s.command
            )?;
        } else {
            writeln!(out, "step {}:", diff.number)?;
        }
        for (i, s) in diff.per_server.iter().enumerate() {
            let tag = format!("  [{}] ", i + 1);
            let text = match s {
                None => "(no such step: this server's transcript ended earlier)".to_string(),
                Some(s) if same_command => s.reply.clone(),
                Some(s) => format!("({}) {}> {}\n{}", s.act, s.who, s.command, s.reply),
            };
            for (j, line) in text.lines().enumerate() {
                let lead = if j == 0 { tag.as_str() } else { "" };
                writeln!(out, "{lead:<width$}{line}", width = tag.len())?;
            }
        }
    }
    let scope = format!(
        "{} steps compared, run ids as {RUN_ID}, positive PTTL replies as >0",
        d.compared
    );
    match (d.no_reply_differs(), d.versions.is_some()) {
        (true, true) => writeln!(
            out,
            "no reply differs ({scope}): the servers differ only in the version line."
        ),
        (true, false) => writeln!(
            out,
            "no reply differs ({scope}), and the versions are the same."
        ),
        (false, versions) => writeln!(
            out,
            "{} of {} steps differ{} ({scope}).",
            d.steps.len(),
            d.compared,
            if versions {
                ", and the version line"
            } else {
                ""
            }
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(act: &'static str, who: &'static str, command: &str, reply: &str) -> Step {
        Step {
            act,
            who,
            command: command.into(),
            reply: reply.into(),
        }
    }

    /// A transcript of the token act's stale release, with the DELEX step answered `delex`.
    fn transcript(version: &str, run_id: &str, delex: &str) -> Transcript {
        let key = format!("lockbench:{run_id}:demo:lock");
        Transcript {
            server: format!("/bin/{version}"),
            version: version.into(),
            run_id: run_id.into(),
            steps: vec![
                step("token", "A", &format!("SET {key} tokA NX PX 300"), "OK"),
                step("token", "observer", &format!("PTTL {key}"), "(integer) 287"),
                step("token", "A", &format!("DELEX {key} IFEQ tokA"), delex),
                step("token", "observer", &format!("GET {key}"), "\"tokB\""),
            ],
        }
    }

    fn unknown(run_id: &str) -> String {
        format!(
            "(error) ERR unknown command 'delex', with args beginning with: \
             'lockbench:{run_id}:demo:lock' 'IFEQ' 'tokA' "
        )
    }

    fn printed(ts: &[Transcript]) -> String {
        let mut out = Vec::new();
        print(ts, &differences(ts), &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// Two runs whose keys (and the error text that echoes them) carry different run ids, and
    /// whose PTTL replies differ by the clock, compare equal: only the versions differ, and
    /// the output says so.
    #[test]
    fn run_ids_and_remaining_ttls_do_not_count() {
        let a = transcript(
            "redis 7.0.15",
            "20260101T000000Z-0000aaaa",
            &unknown("20260101T000000Z-0000aaaa"),
        );
        let mut b = transcript(
            "redis 8.2.3",
            "20260101T000001Z-ffff0000",
            &unknown("20260101T000001Z-ffff0000"),
        );
        b.steps[1].reply = "(integer) 291".into();
        let d = differences(&[a.clone(), b.clone()]);
        assert_eq!(d.steps, vec![]);
        assert_eq!(
            d.versions,
            Some(vec!["redis 7.0.15".to_string(), "redis 8.2.3".to_string()])
        );
        assert_eq!(d.compared, 4);
        let text = printed(&[a, b]);
        assert!(
            text.contains("the version line differs:\n  [1] redis 7.0.15\n  [2] redis 8.2.3\n"),
            "{text}"
        );
        assert!(
            text.contains("no reply differs (4 steps compared")
                && text.contains("differ only in the version line"),
            "{text}"
        );
    }

    /// The negative control of the test above: a reply that really differs (DELEX unknown on
    /// one server, `0` on the other), a PTTL sign that differs (no expiry vs some), and a
    /// transcript that ends early are each listed with every server's reply.
    #[test]
    fn a_different_reply_is_listed_with_each_servers_answer() {
        let a = transcript("redis 7.0.15", "r1", &unknown("r1"));
        let mut b = transcript("redis 7.0.15", "r2", "(integer) 0");
        b.steps[1].reply = "(integer) -1".into();
        b.steps.pop();
        let d = differences(&[a.clone(), b.clone()]);
        assert_eq!(d.versions, None);
        assert_eq!(
            d.steps.iter().map(|s| s.number).collect::<Vec<_>>(),
            [2, 3, 4]
        );
        assert_eq!(
            d.steps[1].per_server[0].as_ref().unwrap().reply,
            unknown(RUN_ID),
            "compared with the run id normalised"
        );
        let text = printed(&[a, b]);
        let delex = format!(
            "step 3 (token) A> DELEX lockbench:{RUN_ID}:demo:lock IFEQ tokA\n  [1] {}\n  [2] (integer) 0\n",
            unknown(RUN_ID)
        );
        assert!(text.contains(&delex), "{text}");
        assert!(
            text.contains("  [1] (integer) >0\n  [2] (integer) -1\n"),
            "{text}"
        );
        assert!(
            text.contains("  [2] (no such step: this server's transcript ended earlier)"),
            "{text}"
        );
        assert!(text.contains("3 of 4 steps differ ("), "{text}");
        assert!(!text.contains("no reply differs"), "{text}");
        assert!(!text.contains("version line"), "{text}");
    }

    /// Steps at one position with different commands print each server's command, and a
    /// multi-line reply keeps its lines aligned under the server's tag.
    #[test]
    fn different_commands_and_multi_line_replies_are_shown_per_server() {
        let mut a = transcript("valkey 8.1.8", "r1", "(integer) 0");
        let mut b = transcript("redis 7.0.15", "r2", "(integer) 0");
        a.steps[3] = step(
            "fenced",
            "A",
            "EVALSHA f 1 k",
            "1) (integer) 0\n2) (integer) 2",
        );
        b.steps[3] = step("fenced", "B", "EVALSHA f 1 k", "OK");
        let text = printed(&[a, b]);
        assert!(
            text.contains(
                "step 4:\n  [1] (fenced) A> EVALSHA f 1 k\n      1) (integer) 0\n      2) (integer) 2\n  [2] (fenced) B> EVALSHA f 1 k\n      OK\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("1 of 4 steps differ, and the version line"),
            "{text}"
        );
    }

    /// The same version and the same replies: nothing differs, and the output says so.
    #[test]
    fn identical_transcripts_differ_in_nothing() {
        let a = transcript("redis 7.0.15", "r1", "(integer) 0");
        let b = transcript("redis 7.0.15", "r2", "(integer) 0");
        let d = differences(&[a.clone(), b.clone()]);
        assert!(d.no_reply_differs() && d.versions.is_none());
        let text = printed(&[a, b]);
        assert!(text.contains("and the versions are the same."), "{text}");
    }
}
