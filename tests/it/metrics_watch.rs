//! `roce_fabric --watch 1 --metrics-listen`: a real Prometheus server (Debian's prometheus package,
//! started here on loopback with a 1 s scrape interval and its own storage) scrapes a watching local
//! TCP fabric, and its HTTP API returns the fabric's series; SIGTERM stops both, with exit 0, and the
//! last round's files are whole.

use crate::common::{self, free_port};
use crate::fabric_support::{Job, fabric_json, spawn_ranks, wait};
use crate::metrics::{have_promtool, parse, promtool_accepts};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A GET on 127.0.0.1:`port`: the status line and the body.
fn get(port: u16, path: &str) -> Option<(String, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.lines().next()?.to_owned();
    // Prometheus answers small bodies whole; a chunked one is joined here.
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        let mut out = String::new();
        let mut rest = body;
        while let Some((len, after)) = rest.split_once("\r\n") {
            let n = usize::from_str_radix(len.trim(), 16).ok()?;
            if n == 0 {
                break;
            }
            out.push_str(after.get(..n)?);
            rest = after.get(n + 2..)?;
        }
        out
    } else {
        body.to_owned()
    };
    Some((status, body))
}

/// Sends `sig` to `child`.
fn signal(child: &Child, sig: libc::c_int) {
    // SAFETY: kill(2) on a child this test started and has not reaped.
    unsafe { libc::kill(child.id() as libc::pid_t, sig) };
}

#[test]
fn prometheus_scrapes_a_watching_fabric_and_sigterm_stops_it_clean() {
    let have_server = Command::new("prometheus")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if common::skip_unless(
        have_server && have_promtool(),
        "needs Debian's prometheus package (scripts/deps.sh test)",
    ) {
        return;
    }
    let job = Job::new(2, "watch");
    let (listen, prom_port) = (free_port(), free_port());
    let metrics = job.dir.path().join("fabric.prom");
    let words = format!(
        "write_bw --transport tcp -n 200 --no-retest --watch 1 --metrics-listen 127.0.0.1:{listen} \
         --metrics {}",
        metrics.display()
    );
    let args = job.args(&words);
    let mut ranks = spawn_ranks(&job, 2, &args);
    let config = job.dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  \
             - job_name: roce_fabric\n    static_configs:\n      - targets: ['127.0.0.1:{listen}']\n"
        ),
    )
    .unwrap();
    let prom_log = job.dir.path().join("prometheus.log");
    let mut prometheus = Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            job.dir.path().join("tsdb").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{prom_port}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&prom_log).unwrap())
        .spawn()
        .unwrap();
    // Bounded: the fabric's first round (a second or two), then a scrape a second.
    let query = "/api/v1/query?query=roceperf_fabric_bandwidth_bytes_per_second";
    let deadline = Instant::now() + Duration::from_secs(90);
    let series = loop {
        let found = get(prom_port, query)
            .filter(|(status, _)| status.contains(" 200 "))
            .and_then(|(_, body)| serde_json::from_str::<Value>(&body).ok())
            .and_then(|v| v["data"]["result"].as_array().cloned())
            .filter(|r| !r.is_empty());
        if let Some(r) = found {
            break r;
        }
        if Instant::now() > deadline {
            let _ = prometheus.kill();
            for r in &mut ranks {
                let _ = r.kill();
            }
            panic!(
                "no roceperf series in Prometheus within 90 s\nrank 0:\n{}\nprometheus:\n{}",
                std::fs::read_to_string(job.log(0)).unwrap_or_default(),
                std::fs::read_to_string(&prom_log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    // Both directions of the one pair, each labelled with its ranks and the scrape's job.
    let mut pairs: Vec<(String, String)> = series
        .iter()
        .map(|s| {
            let m = &s["metric"];
            assert_eq!(m["job"], "roce_fabric", "{s}");
            assert_eq!(m["test"], "write_bw", "{s}");
            let v: f64 = s["value"][1].as_str().unwrap().parse().unwrap();
            assert!(v > 0.0, "{s}");
            (
                m["client"].as_str().unwrap().to_owned(),
                m["server"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    pairs.sort();
    assert_eq!(pairs, [("0".into(), "1".into()), ("1".into(), "0".into())]);
    // What the fabric serves is what promtool accepts; unknown paths are refused.
    let (status, body) = get(listen, "/metrics").unwrap();
    assert!(status.contains(" 200 "), "{status}");
    promtool_accepts(&body, "roce_fabric --metrics-listen");
    let rounds = parse(&body)
        .into_iter()
        .find(|s| s.name == "roceperf_fabric_watch_rounds_total")
        .unwrap();
    assert!(rounds.value >= 1.0, "{body}");
    assert!(get(listen, "/").unwrap().0.contains(" 404 "));

    signal(&ranks[0], libc::SIGTERM);
    signal(&prometheus, libc::SIGTERM);
    let (r1, r0) = (ranks.pop().unwrap(), ranks.pop().unwrap());
    let (code0, code1) = (wait(r0, 120), wait(r1, 60));
    let log0 = std::fs::read_to_string(job.log(0)).unwrap();
    assert_eq!((code0, code1), (0, 0), "rank 0:\n{log0}");
    assert!(log0.contains("watch stopped after "), "{log0}");
    assert_eq!(wait(prometheus, 60), 0, "prometheus");
    // The last complete round's files: a whole matrix, not interrupted, and its metrics file.
    let doc = fabric_json(&job.results);
    assert_eq!(doc["interrupted"], false);
    assert_eq!(doc["summary"]["ok"], 2, "{}", doc["summary"]);
    promtool_accepts(&std::fs::read_to_string(&metrics).unwrap(), "--metrics");
}

#[test]
fn sigterm_within_a_round_cancels_it_and_the_last_complete_round_stands() {
    let job = Job::new(2, "cancel");
    // Pairs of 3 s: the second round is under way 1 s after the first one's end.
    let args = job.args("write_bw --transport tcp -D 3 --no-retest --serial --watch 1");
    let mut ranks = spawn_ranks(&job, 2, &args);
    let deadline = Instant::now() + Duration::from_secs(120);
    while !std::fs::read_to_string(job.log(0)).is_ok_and(|l| l.contains("Round 1 done")) {
        if Instant::now() > deadline {
            for r in &mut ranks {
                let _ = r.kill();
            }
            panic!(
                "no round ended in 120 s:\n{}",
                std::fs::read_to_string(job.log(0)).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let first = fabric_json(&job.results);
    std::thread::sleep(Duration::from_millis(2500));
    signal(&ranks[0], libc::SIGTERM);
    let (r1, r0) = (ranks.pop().unwrap(), ranks.pop().unwrap());
    let (code0, code1) = (wait(r0, 60), wait(r1, 60));
    let log0 = std::fs::read_to_string(job.log(0)).unwrap();
    assert_eq!((code0, code1), (0, 0), "rank 0:\n{log0}");
    assert!(
        log0.contains("watch stopped after 1 round (the round under way was cancelled)"),
        "{log0}"
    );
    // The cancelled round wrote nothing over the first one's files.
    let last = fabric_json(&job.results);
    assert_eq!(last, first);
    assert_eq!(last["interrupted"], false);
    assert_eq!(last["summary"]["ok"], 2, "{}", last["summary"]);
}
