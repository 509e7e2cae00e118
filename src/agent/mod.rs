//! Many agents, one run: several lockbench processes, on one machine or many, run one profile
//! against one server as the agents of a single run, and `lockbench merge` combines their
//! result directories into one.
//!
//! - [`AgentSpec`]: who this process is — run id, index, count — from `--agent I/N` (or
//!   `--agent-index`/`--agents`, which default to `$JOB_COMPLETION_INDEX`, the index a
//!   Kubernetes Indexed Job gives each pod, and `$LOCKBENCH_AGENTS`), and what follows from it:
//!   the key prefix every agent shares (`lockbench:<run-id>`, so they contend on the same keys),
//!   its global worker ids, its share of a `--sections` count.
//! - [`barrier`]: the start barrier through the target itself (keys under the run prefix), the
//!   end barrier, and the clock readings; no other coordinator is needed.
//! - [`clock`]: where an agent's clock stands against the server's `TIME` (pure arithmetic).

pub(crate) mod barrier;
pub(crate) mod clock;

use crate::exit::BadInput;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The environment variable Kubernetes sets to a pod's index in an Indexed Job.
pub(crate) const INDEX_ENV: &str = "JOB_COMPLETION_INDEX";
/// The environment variable `--agents` defaults to.
pub(crate) const COUNT_ENV: &str = "LOCKBENCH_AGENTS";
/// How long an agent waits for its peers at a barrier by default.
pub(crate) const DEFAULT_BARRIER_TIMEOUT: Duration = Duration::from_secs(120);
/// Agents in one run at most (each polls the server while it waits).
pub(crate) const MAX_AGENTS: u32 = 1000;

/// One process's place in a multi-agent run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentSpec {
    /// The run's id, shared by every agent.
    pub run_id: String,
    /// This agent's index, `0 .. count`.
    pub index: u32,
    /// Agents in the run.
    pub count: u32,
    /// How long it waits for its peers at a barrier.
    pub barrier_timeout: Duration,
}

/// The agent flags of `lockbench run`, as given.
#[derive(Debug, Clone, Default)]
pub struct AgentFlags {
    /// `--agent I/N`.
    pub agent: Option<String>,
    /// `--agent-index I`.
    pub agent_index: Option<String>,
    /// `--agents N`.
    pub agents: Option<String>,
    /// `--run-id NAME`.
    pub run_id: Option<String>,
    /// `--barrier-timeout DURATION`.
    pub barrier_timeout: Option<String>,
}

fn bad(m: String) -> BadInput {
    BadInput(m)
}

/// A run id usable in a key prefix and a directory name: 1 to 64 of `A-Z a-z 0-9 . _ -`,
/// starting with a letter or digit.
pub(crate) fn check_run_id(id: &str) -> Result<(), BadInput> {
    let ok = !id.is_empty()
        && id.len() <= 64
        && id.starts_with(|c: char| c.is_ascii_alphanumeric())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(bad(format!(
            "--run-id `{id}`: use 1 to 64 letters, digits, `.`, `_` or `-`, starting with a letter \
             or digit (it becomes the key prefix lockbench:<run-id> and a directory name)"
        )))
    }
}

fn number(what: &str, text: &str) -> Result<u32, BadInput> {
    text.trim().parse::<u32>().map_err(|_| {
        bad(format!(
            "{what} `{text}` is not a whole number ≥ 0 (e.g. --agent 0/2, --agent-index 1, --agents 2)"
        ))
    })
}

impl AgentSpec {
    /// The agent this process is, from its flags and, for what they leave out, the
    /// environment (`env` reads a variable): `None` when neither names an agent count (an
    /// ordinary run). The count comes from `--agent I/N`, `--agents` or `$LOCKBENCH_AGENTS`;
    /// the index from `--agent I/N`, `--agent-index` or `$JOB_COMPLETION_INDEX`. A run id is
    /// required with more than one agent (every agent must name the same one); one agent
    /// alone gets a fresh one.
    pub fn resolve(
        flags: &AgentFlags,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<AgentSpec>, BadInput> {
        let (index, count) = match &flags.agent {
            Some(a) => {
                let Some((i, n)) = a.split_once('/') else {
                    return Err(bad(format!(
                        "--agent `{a}`: write INDEX/COUNT, e.g. --agent 0/2 for the first of two agents"
                    )));
                };
                (
                    Some((number("--agent index", i)?, "--agent")),
                    Some((number("--agent count", n)?, "--agent")),
                )
            }
            None => {
                let index = match &flags.agent_index {
                    Some(i) => Some((number("--agent-index", i)?, "--agent-index")),
                    None => match env(INDEX_ENV) {
                        Some(i) => Some((number(&format!("${INDEX_ENV}"), &i)?, INDEX_ENV)),
                        None => None,
                    },
                };
                let count = match &flags.agents {
                    Some(n) => Some((number("--agents", n)?, "--agents")),
                    None => match env(COUNT_ENV) {
                        Some(n) => Some((number(&format!("${COUNT_ENV}"), &n)?, COUNT_ENV)),
                        None => None,
                    },
                };
                // An index alone from the environment is a pod of some Indexed Job, not
                // necessarily lockbench's: only a count makes this process an agent.
                if count.is_none() && flags.agent_index.is_some() {
                    return Err(bad(format!(
                        "--agent-index needs the number of agents: give --agents N (or set ${COUNT_ENV})"
                    )));
                }
                (index, count)
            }
        };
        let Some((count, count_from)) = count else {
            if flags.run_id.is_some() || flags.barrier_timeout.is_some() {
                return Err(bad(
                    "--run-id and --barrier-timeout belong to a multi-agent run: give --agent I/N too"
                        .to_string(),
                ));
            }
            return Ok(None);
        };
        if count == 0 || count > MAX_AGENTS {
            return Err(bad(format!(
                "{count_from}: {count} agents; use 1 to {MAX_AGENTS}"
            )));
        }
        let Some((index, index_from)) = index else {
            return Err(bad(format!(
                "{count} agents ({count_from}), but which one is this? Give --agent I/{count} or \
                 --agent-index I (or set ${INDEX_ENV}, as a Kubernetes Indexed Job does)"
            )));
        };
        if index >= count {
            return Err(bad(format!(
                "{index_from}: index {index} of {count} agents; indexes run from 0 to {}",
                count - 1
            )));
        }
        let run_id = match &flags.run_id {
            Some(id) => {
                check_run_id(id)?;
                id.clone()
            }
            None if count > 1 => {
                return Err(bad(format!(
                    "{count} agents need one run id, the same for all: give --run-id NAME (their \
                     keys are lockbench:<run-id>:…, so they contend for the same locks)"
                )));
            }
            None => crate::results::run_id(std::time::SystemTime::now()),
        };
        let barrier_timeout = match &flags.barrier_timeout {
            Some(t) => {
                let d = crate::model::units::parse_duration(t)
                    .map_err(|e| bad(format!("--barrier-timeout {e}")))?;
                if d.is_zero() {
                    return Err(bad(format!(
                        "--barrier-timeout `{t}`: must be above 0, e.g. 30s"
                    )));
                }
                d
            }
            None => DEFAULT_BARRIER_TIMEOUT,
        };
        Ok(Some(AgentSpec {
            run_id,
            index,
            count,
            barrier_timeout,
        }))
    }

    /// The prefix of every key of the run, shared by all its agents.
    pub fn prefix(&self) -> String {
        format!("lockbench:{}", self.run_id)
    }

    /// The global id of this agent's first worker, of `workers` per agent.
    pub fn worker_base(&self, workers: usize) -> usize {
        self.index as usize * workers
    }

    /// This agent's share of a run of `total` sections: the shares of all agents add up to it,
    /// the first `total mod count` agents taking one more.
    pub fn sections_share(&self, total: u64) -> Result<u64, BadInput> {
        let n = u64::from(self.count);
        if total < n {
            return Err(bad(format!(
                "--sections {total} cannot be shared among {n} agents: give at least one section \
                 per agent"
            )));
        }
        Ok(total / n + u64::from(u64::from(self.index) < total % n))
    }

    /// Where the agent writes by default: `<root>/<run-id>/agent-<index>`, next to its peers'
    /// directories and the merged one.
    pub fn default_dir(&self, root: &Path) -> PathBuf {
        root.join(&self.run_id)
            .join(format!("agent-{}", self.index))
    }
}

/// The fields of a plan (as JSON) every agent of a run must share: everything that shapes the
/// workload. Left out: how each agent reaches the server and reacts to it (URL, timeouts,
/// remote permission, the backend), its warnings, the profile's name, and the run length
/// (`stop`), which `--sections` divides among the agents.
pub(crate) fn workload_fingerprint(plan: &serde_json::Value) -> serde_json::Value {
    let mut v = plan.clone();
    if let Some(m) = v.as_object_mut() {
        for f in [
            "name",
            "redis",
            "allow_remote",
            "metrics",
            "warnings",
            "backend",
            "redis_servers",
            "memory_rtt_us",
            "command_timeout_us",
            "connect_timeout_us",
            "give_up_after_us",
            "stop",
        ] {
            m.remove(f);
        }
    }
    v
}

/// The top-level fields in which two fingerprints differ, as `field (a vs b)`.
pub(crate) fn differences(a: &serde_json::Value, b: &serde_json::Value) -> Vec<String> {
    let empty = serde_json::Map::new();
    let (ma, mb) = (
        a.as_object().unwrap_or(&empty),
        b.as_object().unwrap_or(&empty),
    );
    let mut keys: Vec<&String> = ma.keys().chain(mb.keys()).collect();
    keys.sort();
    keys.dedup();
    let show = |v: Option<&serde_json::Value>| match v {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => "absent".to_string(),
    };
    keys.into_iter()
        .filter(|k| ma.get(*k) != mb.get(*k))
        .map(|k| format!("{k} ({} vs {})", show(ma.get(k)), show(mb.get(k))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    fn flags(agent: Option<&str>, run_id: Option<&str>) -> AgentFlags {
        AgentFlags {
            agent: agent.map(str::to_string),
            run_id: run_id.map(str::to_string),
            ..AgentFlags::default()
        }
    }

    /// `--agent I/N` and the environment of a Kubernetes Indexed Job give the same agent; the
    /// flags win over the environment; no count at all is an ordinary run.
    #[test]
    fn agent_from_flags_or_environment() {
        let none = env_of(&[]);
        let a = AgentSpec::resolve(&flags(Some("1/2"), Some("r1")), &none)
            .unwrap()
            .unwrap();
        assert_eq!((a.index, a.count, a.run_id.as_str()), (1, 2, "r1"));
        assert_eq!(a.prefix(), "lockbench:r1");
        let k8s = env_of(&[(INDEX_ENV, "1"), (COUNT_ENV, "2")]);
        let b = AgentSpec::resolve(&flags(None, Some("r1")), &k8s)
            .unwrap()
            .unwrap();
        assert_eq!(a, b);
        let c = AgentSpec::resolve(&flags(Some("0/3"), Some("r1")), &k8s)
            .unwrap()
            .unwrap();
        assert_eq!((c.index, c.count), (0, 3));
        // An Indexed Job's index alone does not make an agent.
        let idx = env_of(&[(INDEX_ENV, "4")]);
        assert_eq!(AgentSpec::resolve(&flags(None, None), &idx).unwrap(), None);
        // One agent alone gets a fresh run id.
        let one = AgentSpec::resolve(&flags(Some("0/1"), None), &none)
            .unwrap()
            .unwrap();
        assert!(check_run_id(&one.run_id).is_ok());
    }

    /// Each refusal names the flag (or variable) and what would be valid.
    #[test]
    fn bad_agent_flags_are_explained() {
        let none = env_of(&[]);
        let err = |f: AgentFlags, env: &dyn Fn(&str) -> Option<String>| {
            AgentSpec::resolve(&f, env).unwrap_err().0
        };
        assert!(err(flags(Some("2"), Some("r")), &none).contains("INDEX/COUNT"));
        assert!(err(flags(Some("2/2"), Some("r")), &none).contains("from 0 to 1"));
        assert!(err(flags(Some("0/0"), Some("r")), &none).contains("use 1 to"));
        assert!(err(flags(Some("x/2"), Some("r")), &none).contains("not a whole number"));
        assert!(err(flags(Some("0/2"), None), &none).contains("--run-id"));
        assert!(err(flags(Some("0/2"), Some("a b")), &none).contains("letters, digits"));
        assert!(err(flags(None, Some("r")), &none).contains("--agent I/N"));
        let count_only = env_of(&[(COUNT_ENV, "2")]);
        assert!(err(flags(None, Some("r")), &count_only).contains(INDEX_ENV));
        let bad_env = env_of(&[(INDEX_ENV, "one"), (COUNT_ENV, "2")]);
        assert!(err(flags(None, Some("r")), &bad_env).contains("$JOB_COMPLETION_INDEX"));
        let f = AgentFlags {
            agent: Some("0/2".into()),
            run_id: Some("r".into()),
            barrier_timeout: Some("0s".into()),
            ..AgentFlags::default()
        };
        assert!(err(f, &none).contains("above 0"));
        let f = AgentFlags {
            agent_index: Some("0".into()),
            run_id: Some("r".into()),
            ..AgentFlags::default()
        };
        assert!(err(f, &none).contains("--agents N"));
    }

    /// Shares of a section count add up to it, the first agents taking the remainder; global
    /// worker ids follow the index.
    #[test]
    fn sections_and_workers_are_divided() {
        let spec = |index| AgentSpec {
            run_id: "r".into(),
            index,
            count: 3,
            barrier_timeout: DEFAULT_BARRIER_TIMEOUT,
        };
        let shares: Vec<u64> = (0..3)
            .map(|i| spec(i).sections_share(10).unwrap())
            .collect();
        assert_eq!(shares, vec![4, 3, 3]);
        assert!(spec(0).sections_share(2).is_err());
        assert_eq!(spec(2).worker_base(5), 10);
        assert_eq!(
            spec(1).default_dir(Path::new("results")),
            Path::new("results/r/agent-1")
        );
    }

    /// The fingerprint ignores how an agent reaches the server and the run length, and the
    /// differences name the fields that differ.
    #[test]
    fn fingerprints_compare_the_workload_only() {
        let a = serde_json::json!({"workers": 2, "seed": 1, "redis": "redis://a", "stop": {"sections": {"sections": 3}}});
        let b = serde_json::json!({"workers": 2, "seed": 1, "redis": "redis://b", "stop": {"sections": {"sections": 2}}});
        assert_eq!(workload_fingerprint(&a), workload_fingerprint(&b));
        let c = serde_json::json!({"workers": 4, "seed": 1});
        assert_eq!(
            differences(&workload_fingerprint(&a), &c),
            vec!["workers (2 vs 4)"]
        );
    }
}
