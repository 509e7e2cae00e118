//! The profile's unit tests: parsing, validation and its messages.

use super::*;
use crate::model::release::ReleaseMethod;
use std::time::Duration;

fn plan(src: &str) -> Result<Plan, ProfileError> {
    Profile::parse(src, "p.toml")?.plan("p.toml", src, None)
}

/// --time-scale multiplies the TTL, the distributions and the backoff, not the run length;
/// values near the clock's resolution are warned about, impossible ones refused.
#[test]
fn time_scale_scales_every_duration_but_the_run_length() {
    let p = plan("ttl = \"30s\"\ndist = \"uniform(1s,3s)\"\nthink = \"constant(2s)\"\nduration = \"5s\"\ntime_scale = 0.01\n").unwrap();
    assert_eq!(p.workload.ttl_ms, 300);
    assert_eq!(p.workload.unscaled_ttl_ms, 30_000.0);
    assert_eq!(p.workload.dist.mean_ms(), Some(20.0));
    assert_eq!(p.workload.think.mean_ms(), Some(20.0));
    assert_eq!(p.run_time(), Some(Duration::from_secs(5)));
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    // Near the clock's resolution: warned; below what PX can express: refused.
    let p = plan("ttl = \"1s\"\ndist = \"constant(100ms)\"\ntime_scale = 0.0125\n").unwrap();
    assert_eq!(p.workload.ttl_ms, 13);
    assert!(
        p.warnings.iter().any(|w| w.contains("rounded")),
        "{:?}",
        p.warnings
    );
    assert!(
        p.warnings.iter().any(|w| w.contains("short")),
        "{:?}",
        p.warnings
    );
    assert!(
        p.warnings.iter().any(|w| w.contains("timer")),
        "{:?}",
        p.warnings
    );
    let e = plan("ttl = \"50ms\"\ntime_scale = 0.01\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("time_scale") && e.contains("1ms"), "{e}");
    let e = plan("time_scale = -1\n").unwrap_err().to_string();
    assert!(e.contains("from 1e-6 to 1000000"), "{e}");
}

/// An absurd time scale is refused with the valid range, and no message prints a number
/// hundreds of digits long (1e300 used to be written out in full).
#[test]
fn time_scale_is_bounded_and_printed_sanely() {
    for bad in ["1e300", "1e7", "1e-7", "0", "-1", "inf", "nan"] {
        let e = plan(&format!("time_scale = {bad}\n"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("time_scale") && e.contains("from 1e-6 to 1000000"),
            "{bad}: {e}"
        );
        assert!(e.len() < 200, "{bad}: {e}");
    }
    let e = plan("ttl = \"1000h\"\ntime_scale = 1000000\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("41d16h") && e.contains("at most") || e.contains("≤"),
        "{e}"
    );
    assert!(e.len() < 200, "{e}");
    let e = plan("ttl = \"3ms\"\ntime_scale = 0.1\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("≥ 0.333333"), "{e}");
    assert!(plan("time_scale = 1e6\nttl = \"1ms\"\n").is_ok());
    assert!(plan("time_scale = 1e-6\nttl = \"1000h\"\n").is_ok());
}

/// `ramp_up` is a closed loop's, and shorter than a time-limited run.
#[test]
fn a_ramp_up_fits_in_the_run_and_has_workers_to_start() {
    assert_eq!(
        plan("ramp_up = \"1s\"\n").unwrap().workload.ramp_up_us,
        1_000_000
    );
    assert_eq!(plan("").unwrap().workload.ramp_up_us, 0);
    assert!(plan("ramp_up = \"10s\"\nsections = 5\n").is_ok());
    let e = plan("ramp_up = \"5s\"\nduration = \"5s\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("ramp_up") && e.contains("not shorter"), "{e}");
    let e = plan("ramp_up = \"1s\"\narrivals = \"poisson(10/s)\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("ramp_up") && e.contains("ramp(FROM, TO)"), "{e}");
    let e = plan("ramp_up = \"soon\"\n").unwrap_err().to_string();
    assert!(e.contains("ramp_up"), "{e}");
}

/// Overlay carries every field across, and `is_set` sees every field set.
#[test]
fn overlay_and_is_set_cover_every_field() {
    let full = Profile::parse(
        "name = \"n\"\ndescription = \"d\"\nworkers = 2\nkeys = 3\nhot_key = 0.5\nttl = \"9ms\"\n\
         duration = \"1s\"\ndist = \"constant(1ms)\"\nthink = \"constant(1ms)\"\nramp_up = \"1ms\"\nbusy = \"retry\"\n\
         release = \"del\"\nreleases = [\"del\"]\nconnection = \"shared\"\nseed = 5\nbackend = \"memory\"\n\
         redis = \"redis://127.0.0.1:1\"\nmemory_rtt = \"1ms\"\ncommand_timeout = \"2s\"\n\
         connect_timeout = \"3s\"\ngive_up_after = \"2s\"\nresource = true\nresource_redis = \"shared\"\nfencing = \"write\"\nextend = \"ttl/3\"\nextend_with = \"script\"\non_lost = \"abort\"\nrelease_script = \"r.lua\"\nacquire_script = \"a.lua\"\nextend_script = \"e.lua\"\nrelease_commands = [\"DEL {key}\"]\nacquire_commands = [\"SET {key} {token} NX\"]\nextend_commands = [\"PEXPIRE {key} {ttl_ms}\"]\non_unavailable = \"fail-open\"\npause = \"constant(0ms)\"\npause_at = \"random\"\ntime_scale = 0.5\nacquire = \"set-nx-px\"\ncrash_between = 0.1\nredis_server = \"/bin/sh\"\narrivals = \"poisson(10/s)\"\nmax_in_flight = 4\nholders_per_process = 3\ntimer = \"precise\"\nevents = \"none\"\nsim_rtt = \"constant(1ms)\"\nsim_service = \"1us\"\nsim_timer = \"constant(1ms)\"\nsim_from = \"results/x\"\nsim_parallel = 2\ncluster = \"auto\"\ncluster_masters = 3\ncluster_replicas = 1\nlock = \"redlock\"\ninstances = 5\nredlock_urls = [\"redis://127.0.0.1:1\"]\nredlock_timeout = \"5ms\"\nmetrics = \"9464\"\n[retry]\nbase = \"1ms\"\n[thresholds]\nfail_if = [\"errors > 0\"]\n[[fault]]\nkind = \"holder-crash\"\nprobability = 0.1\n",
        "p.toml",
    )
    .unwrap();
    let json = |p: &Profile| serde_json::to_value(p).unwrap();
    assert_eq!(json(&Profile::default().overlay(full.clone())), json(&full));
    let fields = json(&full);
    for (name, value) in fields.as_object().unwrap() {
        if name == "sections" {
            continue; // set either it or duration
        }
        assert!(!value.is_null(), "test profile leaves `{name}` unset");
        assert!(full.is_set(name), "is_set misses `{name}`");
    }
}

/// Every field is validated before an `empirical(…)` file is read: with a bad field and a
/// missing file, the bad field is reported; with only the missing file, the file is, under
/// its field and line.
#[test]
fn fields_are_validated_before_files_are_read() {
    let missing = "dist = \"empirical(/nonexistent/lockbench/d.csv)\"\n";
    let e = plan(&format!("{missing}give_up_after = \"1ms\"\n"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("field `give_up_after`"), "{e}");
    let e = plan(missing).unwrap_err().to_string();
    assert!(
        e.starts_with("p.toml:1: field `dist`") && e.contains("/nonexistent/lockbench/d.csv"),
        "{e}"
    );
}

/// The parts of a run in parts (`sim_parallel`) draw streams of their own: a worker's start
/// from the seed XOR a multiple of its number (`engine::worker::Streams`), so no two
/// (part, worker) pairs may share one — as they did when a part's seed was the run's XOR a
/// multiple of its number.
#[test]
fn parts_have_seeds_of_their_own() {
    let p = plan("duration = \"1h\"\n").unwrap();
    let mut seen = std::collections::HashSet::new();
    for k in 0..16 {
        let part = p.part(16, k);
        assert_eq!(part.run_time(), Some(std::time::Duration::from_secs(225)));
        for w in 0..64u64 {
            let stream = part.seed ^ w.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            assert!(seen.insert(stream), "part {k}, worker {w}");
        }
    }
    assert_eq!(p.part(16, 0).seed, p.seed);
}

/// Defaults fill a minimal profile.
#[test]
fn minimal_profile_gets_defaults() {
    let p = plan("workers = 3\n").unwrap();
    assert_eq!(p.workload.workers, 3);
    assert_eq!(p.workload.ttl_ms, 100);
    assert_eq!(p.protection.release, ReleaseMethod::Token.into());
    assert_eq!(p.backend.connection, ConnectionMode::PerWorker);
}

/// A typo in a field name is reported with its line and the valid names.
#[test]
fn unknown_field_names_line_and_valid_fields() {
    let e = plan("workers = 3\nworkres = 4\n").unwrap_err();
    let s = e.to_string();
    assert!(s.starts_with("p.toml:2:"), "{s}");
    assert!(s.contains("workres") && s.contains("workers"), "{s}");
}

/// A bad value names the file, line and field, and what would be valid.
#[test]
fn bad_values_name_line_field_and_fix() {
    let e = plan("workers = 3\nttl = \"100\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("p.toml:2: field `ttl`"), "{e}");
    assert!(e.contains("100ms"), "{e}");
    let e = plan("\n\ndist = \"uniform(5ms)\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("p.toml:3: field `dist`"), "{e}");
    let e = plan("busy = \"wait\"\n").unwrap_err().to_string();
    assert!(e.contains("fail-fast") && e.contains("retry"), "{e}");
    let e = plan("workers = \"ten\"\n").unwrap_err().to_string();
    assert!(e.starts_with("p.toml:1: field `workers`"), "{e}");
    let e = plan("keys = 2\nworkers = -3\n").unwrap_err().to_string();
    assert!(e.starts_with("p.toml:2: field `workers`"), "{e}");
    let e = plan("busy = \"fail-fast\"\n[retry]\nbase = \"1\"\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("p.toml:3: field `retry.base`") && e.contains("1ms"),
        "{e}"
    );
    let e = plan("ttl = \"1500us\"\n").unwrap_err().to_string();
    assert!(e.contains("whole milliseconds"), "{e}");
    let e = plan("duration = \"1s\"\nsections = 5\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("not both"), "{e}");
}

/// Errors inside `[retry]` and `[[fault]]` point at the key's own line, found in the TOML's
/// syntax tree: a string that happens to hold `base = …` or `[[fault]]` on a line of its
/// own (where a text search would stop) is not taken for the key.
#[test]
fn errors_inside_tables_name_the_exact_line() {
    let text = "name = \"\"\"\nbase = 1\n[[fault]]\n\"\"\"\nbusy = \"retry\"\n\
                [retry]\nbase = \"fast\"\n";
    let e = plan(text).unwrap_err();
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(7), Some("retry.base")),
        "{e}"
    );
    let text = "name = \"\"\"\n[[fault]]\n\"\"\"\n[[fault]]\nkind = \"holder-crash\"\n\
                probability = 0.1\n\n[[fault]]\nkind = \"no-such-fault\"\n";
    let e = plan(text).unwrap_err();
    // An unknown kind is refused as the file is read (`FaultKind`'s `Deserialize`): the
    // error names the `kind` line of the second entry itself.
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(9), Some("fault[1].kind")),
        "{e}"
    );
    // A value of the wrong type inside a table names the key with its table.
    let text = "ttl = \"50ms\"\n[retry]\ncap = 5\n";
    let e = Profile::parse(text, "p.toml").unwrap_err();
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(3), Some("retry.cap")),
        "{e}"
    );
}

/// A `[retry]` ceiling below its start is refused, naming both (it used to be raised to the
/// start without a word); a larger start lifts the default ceiling as before.
#[test]
fn a_retry_cap_below_its_base_is_refused() {
    let text = "busy = \"retry\"\n[retry]\nbase = \"50ms\"\ncap = \"10ms\"\n";
    let e = plan(text).unwrap_err();
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(4), Some("retry.cap")),
        "{e}"
    );
    assert!(
        e.message.contains("10ms") && e.message.contains("50ms"),
        "{e}"
    );
    let text = "busy = \"retry\"\n[retry]\nbase = \"200ms\"\n";
    let p = plan(text).unwrap();
    assert!(matches!(
        p.workload.busy,
        BusyPolicy::Retry {
            base_us: 200_000,
            cap_us: 200_000,
            ..
        }
    ));
}

/// The script fields: a script no variant runs, `script` without its release script, an
/// in-process backend, a conflicting acquisition or extension, and a missing file are each
/// refused at their field and line, saying what is valid; a relative path starts at the
/// profile's directory, and the plan carries the text and its SHA1.
#[test]
fn user_scripts_are_checked_at_their_fields() {
    let err = |src: &str| plan(src).unwrap_err().to_string();
    let e = err("release_script = \"r.lua\"\n");
    assert!(
        e.contains(":1: field `release_script`") && e.contains("release = \"script\""),
        "{e}"
    );
    let e = err("ttl = \"1s\"\nrelease = \"script\"\n");
    assert!(
        e.contains(":2: field `release`") && e.contains("release_script ="),
        "{e}"
    );
    let e = err("releases = [\"token\", \"script\"]\n");
    assert!(e.contains("field `releases`"), "{e}");
    let e = err("release = \"script\"\nrelease_script = \"r.lua\"\nbackend = \"memory\"\n");
    assert!(e.contains("only on a Redis server"), "{e}");
    let s = "release = \"script\"\nrelease_script = \"r.lua\"\n";
    let e = err(&format!(
        "{s}acquire_script = \"a.lua\"\nacquire = \"setnx-expire\"\n"
    ));
    assert!(e.contains("field `acquire_script`"), "{e}");
    let e = err(&format!("{s}extend_script = \"e.lua\"\n"));
    assert!(e.contains("script+extend"), "{e}");
    let e = err(&format!(
        "{s}extend = \"ttl/3\"\nextend_script = \"e.lua\"\nextend_with = \"set-ifeq\"\n"
    ));
    assert!(
        e.contains("field `extend_script`") && e.contains("set-ifeq"),
        "{e}"
    );
    let e = err(s);
    assert!(
        e.contains(":2: field `release_script`") && e.contains("cannot read the Lua file r.lua"),
        "{e}"
    );
    // Relative to the profile's directory.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("r.lua"), "return 1\n").unwrap();
    let p = Profile::parse(s, "p.toml")
        .unwrap()
        .plan("p.toml", s, Some(dir.path()))
        .unwrap();
    let scripts = p.protection.scripts.expect("scripts");
    assert_eq!(
        scripts.release.path,
        dir.path().join("r.lua").display().to_string()
    );
    assert_eq!(
        scripts.release.sha1,
        "48df9b519ca145c867b895f740b37bd891e887af" // sha1("return 1\n")
    );
    assert_eq!(p.protection.release.release, ReleaseMethod::Script);
}
