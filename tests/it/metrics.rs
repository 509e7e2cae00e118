//! Live metrics (`--metrics`): a real Prometheus scrapes a run, and the last values it holds are
//! `summary.json`'s; a fault window reads 1 while open; the exposition passes `promtool check
//! metrics`; bad addresses are bad input; the Grafana dashboard and the Kubernetes manifest
//! name only what is served.

use crate::common::{self, Lockbench, lockbench};
use lockbench::table::{self, ERRORS};
use serde_json::Value;
use std::io::{BufRead, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The failure of a test that needs Prometheus on a machine without it.
const INSTALL_PROMETHEUS: &str = "this test needs prometheus and promtool on PATH: install them \
                                  with `apt-get install -y prometheus` (.ci/run does)";

/// A GET over HTTP/1.0 (no chunking, the server closes): the body, or `None` when nothing
/// listens. `accept` sets the Accept header.
fn get(addr: SocketAddr, path: &str, accept: Option<&str>) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let accept = accept
        .map(|a| format!("Accept: {a}\r\n"))
        .unwrap_or_default();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n{accept}\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.")
        .then(|| body.to_string())
        .filter(|_| head.contains(" 200 "))
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Percent-encodes a query parameter.
fn enc(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A private Prometheus (temp storage, free port, 1 s scrapes of the given targets), killed
/// when dropped.
struct Prometheus {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    /// Scrapes `targets` (static: service discovery would add a target only after up to 5 s).
    fn start(targets: &[SocketAddr]) -> Prometheus {
        for tool in ["prometheus", "promtool"] {
            let found = Command::new(tool).arg("--version").output().is_ok();
            assert!(found, "{INSTALL_PROMETHEUS}");
        }
        let dir = tempfile::tempdir().unwrap();
        let targets: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global: {{scrape_interval: 1s, scrape_timeout: 1s}}\nscrape_configs:\n  - \
                 job_name: lockbench\n    static_configs:\n      - targets: [{}]\n",
                targets.join(", ")
            ),
        )
        .unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start prometheus ({e}): {INSTALL_PROMETHEUS}"));
        let p = Prometheus {
            child,
            addr,
            _dir: dir,
        };
        common::wait_until("prometheus ready", Duration::from_secs(30), || {
            get(addr, "/-/ready", None).is_some()
        });
        p
    }

    /// The result vector of an instant query: (labels, value).
    fn query(&self, q: &str) -> Vec<(Value, f64)> {
        let body = get(self.addr, &format!("/api/v1/query?query={}", enc(q)), None)
            .unwrap_or_else(|| panic!("prometheus did not answer {q}"));
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["status"], "success", "{q}: {body}");
        v["data"]["result"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let value = r["value"][1].as_str().unwrap().parse::<f64>().unwrap();
                (r["metric"].clone(), value)
            })
            .collect()
    }
}

/// Starts `cmd` serving metrics at `addr`; its stderr keeps being read into the returned
/// channel.
fn start_served(cmd: Lockbench, addr: SocketAddr) -> (common::Running, mpsc::Receiver<String>) {
    let mut run = cmd
        .args(["--metrics", &addr.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn();
    let err = run.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(err).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let url = format!("metrics: http://{addr}/metrics");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = rx
            .recv_timeout(left)
            .expect("lockbench printed no `metrics:` line");
        if line == url {
            return (run, rx);
        }
    }
}

/// Waits for the run's end (exit 0) and returns its directory's summary.json variants.
fn finish(mut run: common::Running, rx: &mpsc::Receiver<String>, dir: &Path) -> Vec<Value> {
    let code = run.exit_code_within(Duration::from_secs(120));
    let rest: Vec<String> = rx.try_iter().collect();
    assert_eq!(code, Some(0), "stderr:\n{}", rest.join("\n"));
    common::summaries(dir)
}

/// The last value Prometheus scraped of every series of the run `run_id`, as (name, variant,
/// kind, value): a range selector, whose samples leave out the stale markers written once the
/// endpoint closed.
fn last_values(p: &Prometheus, run_id: &str) -> Vec<(String, String, String, f64)> {
    let q = format!("{{__name__=~\"lockbench_.+\",run_id=\"{run_id}\"}}[10m]");
    let body = get(p.addr, &format!("/api/v1/query?query={}", enc(&q)), None)
        .unwrap_or_else(|| panic!("prometheus did not answer {q}"));
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["status"], "success", "{q}: {body}");
    v["data"]["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let m = &r["metric"];
            let s = |k: &str| m[k].as_str().unwrap_or("").to_string();
            let last = r["values"].as_array().unwrap().last().unwrap();
            let value = last[1].as_str().unwrap().parse::<f64>().unwrap();
            (s("__name__"), s("variant"), s("kind"), value)
        })
        .collect()
}

fn run_id_of(dir: &Path) -> String {
    let m: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    m["run_id"].as_str().unwrap().to_string()
}

/// A real Prometheus scrapes a compare of two variants every second; after the run, the last
/// values it holds equal `summary.json` — every counter of the figure table, the errors by
/// kind, peak holders, the histograms' counts — and the exposition passes `promtool check
/// metrics`. A second run with a server pause shows its fault window's gauge at 1, and 0 once
/// the variant is over.
#[test]
fn prometheus_scrapes_what_summary_json_says() {
    common::need_redis_server();
    // Free ports found now (Prometheus is told its targets before the runs start).
    let at = |p: u16| -> SocketAddr { format!("127.0.0.1:{p}").parse().unwrap() };
    let (first, second) = (at(free_port()), at(free_port()));
    let prom = Prometheus::start(&[first, second]);
    let tmp = tempfile::tempdir().unwrap();

    let dir = tmp.path().join("compare");
    let addr = first;
    let (run, rx) = start_served(
        lockbench(&[
            "compare",
            "--backend=spawn",
            "--release=del,token",
            "--duration=3s",
            "--ttl=20ms",
            "--dist=uniform(5ms,40ms)",
            "--workers=4",
        ])
        .out(&dir),
        addr,
    );
    // The exposition as served, through promtool's linter.
    let body = get(addr, "/metrics", None).expect("the endpoint answers during the run");
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect(INSTALL_PROMETHEUS);
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let checked = promtool.wait_with_output().unwrap();
    assert!(
        checked.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
    let open = get(addr, "/metrics", Some("application/openmetrics-text")).unwrap();
    assert!(open.ends_with("# EOF\n"), "OpenMetrics when asked");
    let variants = finish(run, &rx, &dir);
    assert!(
        get(addr, "/metrics", None).is_none(),
        "closed after the run"
    );

    let run_id = run_id_of(&dir);
    let last = last_values(&prom, &run_id);
    let value = |name: &str, variant: &str| -> Vec<f64> {
        last.iter()
            .filter(|(n, v, _, _)| n == name && v == variant)
            .map(|x| x.3)
            .collect()
    };
    let mut compared = 0;
    for s in &variants {
        let variant = s["variant"].as_str().unwrap();
        for c in table::counters() {
            let want = match &s[c.figure] {
                Value::Number(n) => n.as_f64().unwrap() * c.scale,
                other => panic!("{}: {other} in summary.json", c.figure),
            };
            let got: f64 = value(&c.sample_name(), variant).iter().sum();
            if c.figure == ERRORS && want == 0.0 {
                assert_eq!(got, 0.0, "{variant}: errors");
                continue;
            }
            assert!(
                (got - want).abs() <= 1e-9 * want.abs().max(1.0),
                "{variant}: {} scraped {got}, summary.json {want}",
                c.sample_name()
            );
            compared += 1;
        }
        assert_eq!(
            value("lockbench_peak_holders", variant),
            vec![s["peak_holders"].as_f64().unwrap()]
        );
        assert_eq!(
            value("lockbench_section_duration_seconds_count", variant),
            vec![s["duration_ms"]["count"].as_f64().unwrap()]
        );
        assert_eq!(value("lockbench_running", variant), vec![0.0]);
    }
    assert!(compared >= 60, "only {compared} values compared");
    let sections = |v: &str| value("lockbench_sections_total", v)[0];
    assert!(sections("del") > 0.0 && sections("token") > 0.0);
    assert!(
        value("lockbench_wrongful_deletes_total", "del")[0] > 0.0,
        "the workload overruns: del deletes others' locks"
    );

    // A fault window: its gauge is 1 while it is open.
    let dir = tmp.path().join("pause");
    let addr = second;
    let (run, rx) = start_served(
        lockbench(&[
            "run",
            "--backend=spawn",
            "--duration=4s",
            "--ttl=100ms",
            "--fault=server-pause@1s+2s",
        ])
        .out(&dir),
        addr,
    );
    let variants = finish(run, &rx, &dir);
    let m: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(m["metrics_url"], format!("http://{addr}/metrics"));
    let run_id = m["run_id"].as_str().unwrap();
    let q = |f: &str| {
        prom.query(&format!(
            "{f}(lockbench_fault_window{{kind=\"server-pause\",run_id=\"{run_id}\"}}[10m])"
        ))
    };
    assert_eq!(q("max_over_time")[0].1, 1.0, "the window was seen open");
    assert_eq!(q("last_over_time")[0].1, 0.0, "and closed at the end");
    assert!(
        variants[0]["faults"]
            .as_array()
            .is_some_and(|f| !f.is_empty())
    );
}

/// Port 0 serves on a free port, printed on stderr and recorded in manifest.json.
#[test]
fn port_0_is_a_free_port_printed_and_recorded() {
    let tmp = tempfile::tempdir().unwrap();
    let o = lockbench(&[
        "run",
        "--backend=memory",
        "--duration=300ms",
        "--metrics",
        ":0",
    ])
    .out(tmp.path())
    .ok();
    let text = common::text_of(&o);
    let url = text
        .lines()
        .find_map(|l| l.strip_prefix("metrics: "))
        .unwrap_or_else(|| panic!("no metrics line: {text}"));
    let addr: SocketAddr = url
        .trim_start_matches("http://")
        .trim_end_matches("/metrics")
        .parse()
        .unwrap();
    assert!(addr.ip().is_loopback() && addr.port() != 0, "{url}");
    let m: Value =
        serde_json::from_str(&std::fs::read_to_string(tmp.path().join("manifest.json")).unwrap())
            .unwrap();
    assert_eq!(m["metrics_url"], url);
    assert_eq!(m["profile"]["metrics"], "127.0.0.1:0");
}

/// Bad `--metrics` addresses fail before the run starts, exit 2, naming the flag and what
/// would be valid: garbage, a non-loopback address without --allow-remote, a taken port; and
/// `sweep`, which does not serve them.
#[test]
fn bad_metrics_addresses_are_bad_input() {
    let tmp = tempfile::tempdir().unwrap();
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = taken.local_addr().unwrap().to_string();
    for (addr, says) in [
        ("nonsense", "port 0 picks"),
        ("0.0.0.0:0", "--allow-remote"),
        (taken.as_str(), "port 0 for any free one"),
    ] {
        let out = tmp.path().join("r");
        let o = lockbench(&[
            "run",
            "--backend=memory",
            "--duration=1s",
            "--metrics",
            addr,
        ])
        .out(&out)
        .output();
        let text = common::text_of(&o);
        assert_eq!(o.status.code(), Some(2), "{addr}: {text}");
        assert!(
            text.contains("--metrics") && text.contains(says),
            "{addr}: {text}"
        );
        assert!(!text.contains("panicked"), "{text}");
        assert!(!out.join("summary.json").exists(), "{addr}: nothing ran");
    }
    // sweep does not serve metrics: refused by name, not ignored.
    let o = lockbench(&[
        "sweep",
        "--backend=memory",
        "--ttl=1ms,2ms",
        "--metrics",
        "0",
    ])
    .out(tmp.path().join("s"))
    .output();
    let text = common::text_of(&o);
    assert_eq!(o.status.code(), Some(2), "{text}");
    assert!(
        text.contains("--metrics") && text.contains("sweep"),
        "{text}"
    );
    // A profile key is checked like the flag.
    let p = tmp.path().join("p.toml");
    std::fs::write(&p, "metrics = \"here\"\n").unwrap();
    let o = lockbench(&["run", "--backend=memory"]).arg(&p).output();
    let text = common::text_of(&o);
    assert_eq!(o.status.code(), Some(2), "{text}");
    assert!(
        text.contains("p.toml:1") && text.contains("metrics"),
        "{text}"
    );
}

/// The `lockbench_…` names in `text` (a name ends at the first character that cannot be in
/// one).
fn names_in(text: &str) -> Vec<String> {
    text.match_indices("lockbench_")
        .map(|(i, _)| {
            text[i..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect::<String>()
        })
        .collect()
}

/// Every metric the Grafana dashboard queries, and every one the guide names, is one
/// lockbench serves (so neither can drift), and the served text holds every name the table
/// lists.
#[test]
fn grafana_dashboard_queries_served_metrics() {
    let dash: Value =
        serde_json::from_str(include_str!("../../deploy/grafana-lockbench.json")).unwrap();
    let mut exprs = Vec::new();
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    match (k.as_str(), v) {
                        ("expr" | "query", Value::String(s)) => out.push(s.clone()),
                        _ => walk(v, out),
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    walk(&dash, &mut exprs);
    let names: Vec<String> = exprs.iter().flat_map(|e| names_in(e)).collect();
    assert!(names.len() >= 15, "{names:?}");
    let served = table::exposed_names();
    let board = std::sync::Arc::new(lockbench::Board::default());
    board.begin(
        &lockbench::Labels {
            variant: "token".into(),
            server: "redis 8".into(),
            run_id: "r".into(),
            agent: None,
        },
        100,
        &["server-pause"],
    );
    let text = lockbench::encode(&board, false);
    for n in &served {
        assert!(
            text.contains(&format!("\n{n}{{")),
            "{n} is not in the exposition"
        );
    }
    for n in &names {
        assert!(
            served.contains(n),
            "the dashboard queries {n}, which is not served"
        );
    }
    for panel in ["heatmap", "timeseries"] {
        assert!(dash.to_string().contains(panel));
    }
    let annotations = dash["annotations"]["list"].to_string();
    assert!(annotations.contains("lockbench_fault_window"));
}

/// The Kubernetes manifest's scrape annotations name the port and path the agents serve on.
#[test]
fn kubernetes_manifest_is_scraped_where_agents_serve() {
    let yaml = include_str!("../../deploy/k8s-agents.yaml");
    assert!(yaml.contains("prometheus.io/scrape: \"true\""));
    assert!(yaml.contains("prometheus.io/path: /metrics"));
    let port = yaml
        .split("prometheus.io/port: \"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap();
    assert!(yaml.contains(&format!("--metrics=0.0.0.0:{port}")));
    assert!(yaml.contains(&format!("containerPort: {port}")));
    assert!(yaml.contains("--allow-remote"));
}
