//! `--run_infinitely` end to end: a pair runs until a signal stops one side; both exit 0, the side
//! that measures printed a line per interval and the summary, and every file is whole: the JSON
//! document and the CSV match their schema and golden header, the JSON-lines stream is one valid
//! object a line (start, intervals, end), and perftest's --out_json is valid JSON.

use crate::common::schema::{assert_valid, assert_valid_file, result_csv};
use crate::common::{self, Done, Proc, rows};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

static ONE_PAIR_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The file arguments of one side, named `<role>.*` in `dir`.
fn files(dir: &Path, role: &str) -> Vec<String> {
    let f = |ext: &str| dir.join(format!("{role}.{ext}")).display().to_string();
    vec![
        "--csv".into(),
        f("csv"),
        "--json".into(),
        f("json"),
        "--json-stream".into(),
        f("jsonl"),
        "--out_json_file".into(),
        f("perftest.json"),
    ]
}

/// Starts a server and a client of `test` with `args` (plus files in `dir`) on 127.0.0.1.
fn start(test: &str, args: &[&str], dir: &Path) -> (Proc, Proc) {
    common::start_pair(test, args, |role| files(dir, role))
}

/// Waits until `p` has printed `n` result rows (interval lines); panics after 60 s.
fn await_rows(p: &Proc, n: usize, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while rows(&p.stdout_now()).len() < n {
        assert!(
            Instant::now() < deadline,
            "{what}: fewer than {n} interval lines after 60 s:\n{}",
            p.stdout_now()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn signal(p: &Proc, sig: libc::c_int) {
    // SAFETY: kill() on the pid of a child this test started and has not reaped yet.
    let rc = unsafe { libc::kill(p.pid() as libc::pid_t, sig) };
    assert_eq!(rc, 0, "kill failed");
}

/// How a test stops a run without end: which side it signals, with what, once that side has
/// printed how many interval lines.
struct Stop {
    side: &'static str,
    signal: libc::c_int,
    after_rows: usize,
}

impl Stop {
    fn client(signal: libc::c_int, after_rows: usize) -> Stop {
        Stop {
            side: "client",
            signal,
            after_rows,
        }
    }

    fn server(signal: libc::c_int, after_rows: usize) -> Stop {
        Stop {
            side: "server",
            signal,
            after_rows,
        }
    }
}

/// Runs a pair of `test` with `args` (files in `dir`) until `stop`, then checks what both sides
/// left: the signalled side stopped by the signal after 2 intervals or more, the other by its peer
/// after `peer_intervals` or more. Returns (client, server).
fn run_until_stopped(
    test: &str,
    args: &str,
    dir: &Path,
    stop: Stop,
    peer_intervals: usize,
) -> (Done, Done) {
    let _one = common::one_at_a_time(&ONE_PAIR_AT_A_TIME);
    let (server, client) = start(test, &common::argv(args), dir);
    let (signalled, peer, peer_side) = match stop.side {
        "client" => (client, server, "server"),
        "server" => (server, client, "client"),
        side => panic!("no side {side}"),
    };
    let signal_name = match stop.signal {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        sig => panic!("signal {sig} not expected"),
    };
    await_rows(
        &signalled,
        stop.after_rows,
        &format!("{test} {}", stop.side),
    );
    signal(&signalled, stop.signal);
    let signalled = signalled.wait(60, &format!("{test} {} after {signal_name}", stop.side));
    let peer = peer.wait(
        60,
        &format!("{test} {peer_side} after the {} stopped", stop.side),
    );
    check_side(&signalled, dir, stop.side, signal_name, 2);
    check_side(&peer, dir, peer_side, "peer", peer_intervals);
    match stop.side {
        "client" => (signalled, peer),
        _ => (peer, signalled),
    }
}

/// Checks what one side left: exit 0, its intervals, the summary, and every file whole.
fn check_side(d: &Done, dir: &Path, role: &str, stopped_by: &str, min_intervals: usize) {
    assert_eq!(d.code(), 0, "{role}:\n{}{}", d.stdout, d.stderr);
    let r = rows(&d.stdout);
    assert!(
        r.len() > min_intervals,
        "{role}: {} rows:\n{}",
        r.len(),
        d.stdout
    );
    assert!(
        d.stdout.contains(&format!("stopped by {stopped_by}")),
        "{role}:\n{}",
        d.stdout
    );
    let doc = assert_valid_file("result", &dir.join(format!("{role}.json")));
    let run = &doc["test"]["run_infinitely"];
    assert_eq!(run["stopped_by"], stopped_by, "{role}: {run}");
    assert!(
        run["intervals"].as_u64().unwrap() >= min_intervals as u64,
        "{run}"
    );
    assert_eq!(doc["results"].as_array().unwrap().len(), 1, "one summary");
    // CSV: the golden header, a row per interval (with its span), then the summary (without one).
    let (h, recs) = result_csv(&dir.join(format!("{role}.csv")));
    let at = |n: &str| h.iter().position(|c| c == n).unwrap();
    let (last, intervals) = recs.split_last().unwrap();
    assert!(
        intervals.len() >= min_intervals,
        "{role}: {} interval rows",
        intervals.len()
    );
    assert!(
        intervals
            .iter()
            .all(|r| !r[at("interval_end_s")].is_empty())
    );
    assert_eq!(
        &last[at("interval_end_s")],
        "",
        "the summary row has no span"
    );
    // The JSON lines: start, the intervals, end (holding the document the --json file holds).
    let text = std::fs::read_to_string(dir.join(format!("{role}.jsonl"))).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{role}: {e}: {l}")))
        .collect();
    assert!(text.ends_with('\n'));
    let (first, rest) = lines.split_first().unwrap();
    let (end, middle) = rest.split_last().unwrap();
    assert_valid("stream", first, "the start line");
    assert_valid("stream", end, "the end line");
    assert_eq!(
        (first["event"].as_str(), end["event"].as_str()),
        (Some("start"), Some("end"))
    );
    assert_eq!(
        end["document"], doc,
        "{role}: the end line holds the --json document"
    );
    let wrap = |test: &Value, results: Vec<Value>| {
        json!({"schema": "roceperf.result", "schema_version": 1,
               "tool": {"name": "roceperf", "version": doc["tool"]["version"]},
               "test": test, "results": results})
    };
    assert_valid(
        "result",
        &wrap(&first["test"], vec![]),
        "the start line's test",
    );
    assert_eq!(middle.len(), intervals.len(), "a line per interval row");
    for (i, line) in middle.iter().enumerate() {
        assert_valid("stream", line, "an interval line");
        assert_eq!(line["index"], i as u64);
        assert_valid(
            "result",
            &wrap(&doc["test"], vec![line["result"].clone()]),
            "an interval",
        );
    }
    // perftest's document: valid JSON, the whole run's figures.
    let pt = common::json_file(&dir.join(format!("{role}.perftest.json")));
    assert_eq!(
        pt["results"]["n_iterations"],
        doc["results"][0]["iterations"]
    );
}

#[test]
fn sigint_to_the_client_ends_a_tcp_write_bw_pair_cleanly_with_every_file_whole() {
    let dir = tempfile::tempdir().unwrap();
    // A WRITE server measures nothing itself: it prints the client's summary and stops with it.
    let (_, s) = run_until_stopped(
        "write_bw",
        "--transport tcp -s 16384 --run_infinitely --report-interval 0.3",
        dir.path(),
        Stop::client(libc::SIGINT, 3),
        0,
    );
    assert_eq!(rows(&s.stdout).len(), 1, "{}", s.stdout);
}

#[test]
fn sigterm_to_a_soft_send_bw_server_stops_both_sides_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    // The receiver counts arrivals per interval (perftest's -D spelling: a line a second).
    let (c, _) = run_until_stopped(
        "send_bw",
        "--transport soft -d lo -s 4096 --run_infinitely -D 1 --rate_limit 0.1",
        dir.path(),
        Stop::server(libc::SIGTERM, 2),
        1,
    );
    assert!(
        c.stdout.contains("Rate limit      : target 0.1 Gb/s"),
        "{}",
        c.stdout
    );
}

#[test]
fn a_run_without_end_is_refused_where_it_cannot_stop_cleanly() {
    for (test, args, words) in [
        (
            "write_lat",
            "--transport tcp --run_infinitely",
            &["--run_infinitely", "write_lat"][..],
        ),
        (
            "write_bw",
            "--transport tcp --run_infinitely -n 50",
            &["-n"],
        ),
        (
            "write_bw",
            "--transport soft -d lo --run_infinitely --oob perftest",
            &["--oob perftest"],
        ),
        (
            "send_bw",
            "--transport tcp --json-stream x.jsonl",
            &["--json-stream"],
        ),
    ] {
        common::assert_refused(test, &common::argv(args), words);
    }
}

/// The CSV cells of `column` in `role`'s file.
fn column(dir: &Path, role: &str, column: &str) -> Vec<String> {
    let mut rdr = ::csv::Reader::from_path(dir.join(format!("{role}.csv"))).unwrap();
    let at = rdr
        .headers()
        .unwrap()
        .iter()
        .position(|c| c == column)
        .unwrap();
    rdr.records().map(|r| r.unwrap()[at].to_string()).collect()
}

#[test]
fn an_atomic_run_and_a_ud_run_go_on_until_stopped() {
    // atomic_bw, paced and validated: the responder still checks every word after the signal.
    // send_bw over UD: the receiver reports what arrives each interval.
    for (test, args, stop, peer_intervals, (side, name, value)) in [
        (
            "atomic_bw",
            "--transport soft -d lo -A CMP_AND_SWAP --validate --rate_limit 2000 --rate_units p --run_infinitely --report-interval 0.3",
            Stop::client(libc::SIGINT, 3),
            0,
            ("client", "atomic_type", "CMP_AND_SWAP"),
        ),
        (
            "send_bw",
            "--transport soft -d lo -c UD -s 1024 --rate_limit 0.05 --run_infinitely --report-interval 0.3",
            Stop::server(libc::SIGTERM, 3),
            1,
            ("server", "connection", "UD"),
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        run_until_stopped(test, args, dir.path(), stop, peer_intervals);
        let cells = column(dir.path(), side, name);
        assert!(cells.iter().all(|c| c == value), "{test}: {name} {cells:?}");
    }
}
