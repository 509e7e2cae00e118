//! Reading the agents' directories and checking they are one run's full set.

use super::*;

/// One agent's directory, loaded.
pub(super) struct Source {
    pub(super) dir: PathBuf,
    pub(super) run: RunFiles,
    pub(super) agent: AgentRecord,
    pub(super) placement: Placement,
}

/// Loads an agent's directory, or says why it is not one.
pub(super) fn load(dir: &Path) -> anyhow::Result<Source> {
    let run = RunFiles::open(dir).map_err(|e| bad(format!("{e:#}")))?;
    if run.summary.merged.is_some() {
        return Err(bad(format!(
            "{} is already a merged run: give the agents' own directories",
            show(dir)
        )));
    }
    let Some(agent) = run.summary.agent.clone() else {
        return Err(bad(format!(
            "{} is not an agent's directory: its summary.json has no `agent` block (merge \
             combines the directories of `lockbench run --agent I/N`)",
            show(dir)
        )));
    };
    let Some(placement) = agent
        .clock_start
        .as_ref()
        .map(|start| placement(start, agent.clock_end.as_ref()))
    else {
        return Err(bad(format!(
            "{}: agent {} of run {} has no clock reading: it never started",
            show(dir),
            agent.index,
            agent.run_id
        )));
    };
    Ok(Source {
        dir: dir.to_path_buf(),
        run,
        agent,
        placement,
    })
}

/// Refuses a set of agents that is not one whole run, naming the directories: different
/// runs, different agent counts, an agent (or a directory) given twice, a missing agent.
pub(crate) fn check_set(agents: &[(String, AgentRecord)]) -> Result<(), BadInput> {
    let Some((d0, a0)) = agents.first() else {
        return Err(BadInput("no directory to merge".into()));
    };
    for (d, a) in agents {
        if a.run_id != a0.run_id {
            return Err(BadInput(format!(
                "{d0} and {d} are agents of different runs ({} vs {}): merge the agents of one run",
                a0.run_id, a.run_id
            )));
        }
        if a.count != a0.count {
            return Err(BadInput(format!(
                "{d0} is an agent of {} and {d} of {} agents: they cannot be one run",
                a0.count, a.count
            )));
        }
    }
    // One `--run-id` used for two executions: the same run id, but each execution's agents
    // agreed on their own start. Their clocks cannot be placed on one run's.
    for (d, a) in agents {
        if a.start_server_us != a0.start_server_us {
            let at = |s: Option<u64>| s.map_or("never".to_string(), |us| format!("{us} µs"));
            return Err(BadInput(format!(
                "{d0} and {d} are agents of two executions of run {} (they agreed on different \
                 starts, `start_server_us` {} vs {} in their summary.json): the run id was \
                 reused. Merge the agents of one execution",
                a0.run_id,
                at(a0.start_server_us),
                at(a.start_server_us)
            )));
        }
    }
    for (i, (d, a)) in agents.iter().enumerate() {
        if let Some((e, _)) = agents[..i].iter().find(|(_, b)| b.index == a.index) {
            let what = if e == d {
                format!("{d} is given twice")
            } else {
                format!("{e} and {d} are both agent {}", a.index)
            };
            return Err(BadInput(format!(
                "{what} of run {}: give each agent's directory once",
                a.run_id
            )));
        }
    }
    let missing: Vec<String> = (0..a0.count)
        .filter(|i| !agents.iter().any(|(_, a)| a.index == *i))
        .map(|i| i.to_string())
        .collect();
    if !missing.is_empty() {
        return Err(BadInput(format!(
            "run {} has {} agents, but agent {} {} missing (given: {}): without its sections the \
             run is not whole. Give every agent's directory",
            a0.run_id,
            a0.count,
            missing.join(", "),
            if missing.len() == 1 { "is" } else { "are" },
            agents
                .iter()
                .map(|(d, _)| d.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    Ok(())
}

/// Refuses agents whose workloads differ (their manifests' profiles, as the barrier compares
/// them) or whose variants differ.
pub(super) fn check_workloads(sources: &[Source]) -> anyhow::Result<()> {
    let first = &sources[0];
    let fp = |s: &Source| {
        crate::agent::workload_fingerprint(s.run.manifest.get("profile").unwrap_or_default())
    };
    let f0 = fp(first);
    for s in &sources[1..] {
        let diff = crate::agent::differences(&fp(s), &f0);
        if !diff.is_empty() {
            return Err(bad(format!(
                "{} and {} ran different workloads, in: {}",
                show(&s.dir),
                show(&first.dir),
                diff.join(", ")
            )));
        }
        if s.run.variants() != first.run.variants() {
            return Err(bad(format!(
                "{} ran the variants {:?} but {} ran {:?}",
                show(&s.dir),
                s.run.variants(),
                show(&first.dir),
                first.run.variants()
            )));
        }
    }
    Ok(())
}

/// Refuses counts no agent of this lockbench writes (a summary edited by hand), so the sums
/// cannot overflow.
pub(super) fn check_counts(s: &Source) -> anyhow::Result<()> {
    for v in &s.run.summary.variants {
        for (name, _, _) in Counts::FIELDS {
            let n = v.counts.get(name).unwrap_or(0);
            if n == NOT_RECORDED || n > u64::MAX / 4096 {
                return Err(bad(format!(
                    "{}: summary.json's `{name}` of variant `{}` is {n}, which no agent writes \
                     (edited by hand?)",
                    show(&s.dir),
                    v.meta.variant
                )));
            }
        }
    }
    Ok(())
}

/// Reads the agents' directories and checks they are one run's full set, in agent order.
pub(super) fn load_sources(dirs: &[PathBuf]) -> anyhow::Result<Vec<Source>> {
    let mut sources = Vec::new();
    for d in dirs {
        sources.push(load(d)?);
    }
    let listed: Vec<(String, AgentRecord)> = sources
        .iter()
        .map(|s| (show(&s.dir), s.agent.clone()))
        .collect();
    check_set(&listed)?;
    check_workloads(&sources)?;
    for s in &sources {
        check_counts(s)?;
    }
    sources.sort_by_key(|s| s.agent.index);
    Ok(sources)
}
