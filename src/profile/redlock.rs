//! The redlock part of a profile's validation: `lock = "redlock"`, its instances, URLs and
//! timeout, checked into a [`RedlockPlan`]; the quorum logic itself is `crate::quorum`'s.

use super::{Acquire, BackendChoice, LockKind, Plan, Profile};
use crate::model::release::ReleaseMethod;
use crate::model::variant::Fencing;
use crate::quorum::{MAX_INSTANCES, RedlockPlan, quorum};

/// The redlock part of a profile's validation: `None` for a single-instance lock. The error
/// is the field at fault and what would be valid.
pub(super) fn plan_of(
    p: &Profile,
    plan: &Plan,
) -> Result<Option<RedlockPlan>, (&'static str, String)> {
    if p.lock() == LockKind::Single {
        for (field, set) in [
            ("instances", p.instances.is_some()),
            ("redlock_urls", p.redlock_urls.is_some()),
            ("redlock_timeout", p.redlock_timeout.is_some()),
        ] {
            if set {
                return Err((
                    field,
                    format!(
                        "belongs to a redlock run: add lock = \"redlock\" (or remove `{field}`)"
                    ),
                ));
            }
        }
        return Ok(None);
    }
    let urls = p.redlock_urls.clone().unwrap_or_default();
    if !urls.is_empty() && p.instances.is_some_and(|n| n != urls.len()) {
        return Err((
            "instances",
            format!(
                "{} instances but {} redlock_urls: give the URLs alone (one instance each) or `instances` alone (spawned servers)",
                p.instances.unwrap_or(0),
                urls.len()
            ),
        ));
    }
    let n = if urls.is_empty() {
        p.instances()
    } else {
        urls.len()
    };
    if !(1..=MAX_INSTANCES).contains(&n) {
        return Err((
            "instances",
            format!("{n} is not valid: use 1 to {MAX_INSTANCES} (5 is the usual choice)"),
        ));
    }
    match plan.backend.kind {
        BackendChoice::Memory | BackendChoice::Sim => {
            return Err((
                "backend",
                "redlock needs real Redis servers: use backend = \"spawn\" (instances private servers) or redlock_urls (not memory or sim)".to_string(),
            ));
        }
        BackendChoice::Url => {
            return Err((
                "redis",
                "a redlock run does not use `redis`/--redis (one server): list its servers in redlock_urls (--redlock-url, repeated), or leave both out to spawn `instances` servers".to_string(),
            ));
        }
        BackendChoice::SpawnCluster => {
            return Err((
                "backend",
                "redlock runs on independent servers, not one Redis Cluster: drop backend = \"spawn-cluster\" (instances private servers are spawned) or give redlock_urls".to_string(),
            ));
        }
        BackendChoice::Auto | BackendChoice::Spawn => {}
    }
    if !urls.is_empty() && plan.backend.kind == BackendChoice::Spawn {
        return Err((
            "redlock_urls",
            "backend = \"spawn\" starts private instances: drop redlock_urls, or drop backend = \"spawn\" to use the URLs".to_string(),
        ));
    }
    // Independent instances: two URLs of one server (or two databases of it) are one instance.
    let mut servers: Vec<(String, &String)> = Vec::new();
    for u in &urls {
        let info = crate::target::check_url(u).map_err(|e| ("redlock_urls", format!("{e:#}")))?;
        let server = crate::target::server_of(&info);
        if let Some((_, first)) = servers.iter().find(|(s, _)| *s == server) {
            return Err((
                "redlock_urls",
                format!(
                    "{} and {} are one server ({server}): Redlock's instances must be independent \
                 servers (a database number does not make another one); give one URL per server",
                    crate::target::redact_url(first),
                    crate::target::redact_url(u)
                ),
            ));
        }
        servers.push((server, u));
    }
    if !plan.backend.redis_servers.is_empty() {
        return Err((
            "redis_server",
            "a redlock run spawns its instances from redis-server on PATH; one binary per compare column is not supported with lock = \"redlock\"".to_string(),
        ));
    }
    let variants = || std::iter::once(&plan.protection.release).chain(&plan.protection.releases);
    if let Some(v) = variants().find(|v| v.release != ReleaseMethod::Token) {
        return Err((
            if p.releases.is_some() {
                "releases"
            } else {
                "release"
            },
            format!(
                "redlock releases with the token script on every instance; `{}` is not supported with lock = \"redlock\": use token (or token+extend)",
                v.name()
            ),
        ));
    }
    if plan.protection.resource || variants().any(|v| v.fencing != Fencing::Off) {
        return Err((
            if p.fencing.is_some() { "fencing" } else { "resource" },
            "the protected resource and fencing live in one store, and redlock has N independent ones with no shared counter: use lock = \"single\" for resource/fencing runs, or drop them".to_string(),
        ));
    }
    if plan.protection.acquire == Acquire::SetnxExpire {
        return Err((
            "acquire",
            "redlock acquires with SET NX PX on every instance: use acquire = \"set-nx-px\""
                .to_string(),
        ));
    }
    let instance_timeout_us = match &p.redlock_timeout {
        None => None,
        Some(t) => {
            let us = t.us();
            if us < 1_000 || us >= plan.workload.ttl_ms * 1000 {
                return Err((
                    "redlock_timeout",
                    format!(
                        "{t} is not a per-instance timeout for a {} ms TTL: use 1ms to below the TTL (redsync's default, when unset, is 0.05 × TTL)",
                        plan.workload.ttl_ms
                    ),
                ));
            }
            Some(us)
        }
    };
    Ok(Some(RedlockPlan {
        instances: n,
        urls,
        quorum: quorum(n),
        instance_timeout_us,
    }))
}

/// Warnings about a valid but weak setup (an even count, too few instances).
pub(super) fn warnings(r: &RedlockPlan) -> Vec<String> {
    let n = r.instances;
    let tolerated = n - r.quorum;
    if n < 3 {
        vec![format!(
            "redlock over {n} instance{}: the quorum is {}, so it tolerates no failed instance (use 3 or more, usually 5)",
            if n == 1 { "" } else { "s" },
            r.quorum
        )]
    } else if n.is_multiple_of(2) {
        vec![format!(
            "redlock over an even number of instances ({n}): the quorum is {}, tolerating {tolerated} failed, as {} instances would",
            r.quorum,
            n - 1
        )]
    } else {
        Vec::new()
    }
}
