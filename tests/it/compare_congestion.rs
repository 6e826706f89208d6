//! `roce_compare --congestion`, CI-sized: two flows through a 0.1 Gb/s switch port (far below what
//! even debug binaries offer, so the queue always builds) under lossy go-back-N, ECN with DCQCN and
//! PFC, 2 s each, no victim. Asserted from the document, never from timing: marks only where the
//! queue passed Kmin and only under ECN; CNPs sent and handled under ECN with DCQCN; under PFC pause
//! frames sent by the switch and counted by the sender, and no drop; lossy drops and retransmits;
//! every run validated and exit 0; the JSON matches its schema and the CSV its golden header; and
//! `roce_gate` on it exits as its figures say. Usage errors exit 2. Needs root and ethtool.

use crate::common::schema::{assert_csv_header, assert_valid_file};
use crate::common::{self, assert_contains, the_only_dir};
use crate::soft_support::is_root;
use serde_json::Value;
use std::process::{Command, Output};
use std::sync::Mutex;

const BIN: &str = env!("CARGO_BIN_EXE_roce_compare");
/// One study at a time: each busy-polls both cores.
static ONE: Mutex<()> = Mutex::new(());

fn compare(args: &[&str]) -> Output {
    Command::new("timeout")
        .arg("240")
        .arg(BIN)
        .args(args)
        .output()
        .unwrap()
}

#[track_caller]
fn u(v: &Value) -> u64 {
    match v.as_u64() {
        Some(n) => n,
        None => panic!("not a count: {v}"),
    }
}

#[test]
fn a_short_study_shows_each_discipline_behave_and_the_gate_reads_it() {
    let ethtool = Command::new("ethtool")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if common::skip_unless(is_root(), "needs root for network namespaces and AF_PACKET")
        || common::skip_unless(ethtool, "needs ethtool (bash scripts/deps.sh test)")
    {
        return;
    }
    let _one = common::one_at_a_time(&ONE);
    // This machine is a VM whose idle vCPUs halt: woken by an IPI, one comes back a host time slice
    // late, and the frames the switch should have read by then fill PFC's headroom (idle, 2 of 3
    // runs lost 25-551 frames; with every core kept busy by processes of the lowest priority, none
    // in 3). Spinners under SCHED_IDLE keep the cores awake and take nothing from the study.
    let _awake = KeepCoresAwake::start();
    let softirq_before = softirq_policies();
    assert!(!softirq_before.is_empty(), "no ksoftirqd thread in /proc");
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("res");
    let out = compare(&[
        "--congestion",
        "--flows",
        "2",
        "-D",
        "2",
        "--bottleneck",
        "0.1",
        "--no-victim",
        "--disciplines",
        "lossy-gbn,ecn-dcqcn,pfc",
        "--results",
        results.to_str().unwrap(),
    ]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert_contains(&stdout, "discipline");
    let dir = the_only_dir(&results);
    let doc = assert_valid_file("congestion", &dir.join("congestion.json"));
    assert_csv_header("congestion", &dir.join("congestion.csv"));
    assert!(dir.join("rate-ecn-dcqcn.svg").is_file());
    let setup = &doc["setup"];
    let kmin = u(&setup["kmin_bytes"]);
    let rate_bytes = setup["bottleneck_gbps"].as_f64().unwrap() * 1e9 / 8.0 * 2.0;
    let runs = doc["runs"].as_array().unwrap();
    let names: Vec<&str> = runs
        .iter()
        .map(|r| r["discipline"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["lossy-gbn", "ecn-dcqcn", "pfc"]);
    // The kernel's softirq threads ran under SCHED_FIFO 1 for the study and went back afterwards.
    let notes = doc["notes"].as_array().unwrap();
    assert!(
        notes.iter().any(|n| n
            .as_str()
            .is_some_and(|n| n.contains("ksoftirqd/0") && n.contains("SCHED_FIFO 1"))),
        "{notes:?}"
    );
    assert_eq!(softirq_policies(), softirq_before);
    let run = |d: &str| runs.iter().find(|r| r["discipline"] == d).unwrap();
    for r in runs {
        let d = r["discipline"].as_str().unwrap();
        assert_eq!(r["outcome"]["ok"], true, "{d}: {}", r["outcome"]);
        assert_eq!(r["ran"]["validate"], true, "{d}");
        assert_eq!(r["flows"].as_array().unwrap().len(), 2, "{d}");
        let t = &r["totals"];
        // A mark only where the queue passed Kmin, and only where the switch marks.
        if u(&t["marks"]) > 0 {
            assert!(u(&t["max_queue_bytes"]) > kmin, "{d}: {t}");
            assert_eq!(d, "ecn-dcqcn", "{t}");
        }
    }
    let lossy = &run("lossy-gbn")["totals"];
    assert!(u(&lossy["offered_bytes"]) as f64 > rate_bytes, "{lossy}");
    assert!(u(&lossy["drops"]) > 0, "{lossy}");
    assert!(u(&lossy["retransmitted_bytes"]) > 0, "{lossy}");
    let ecn = &run("ecn-dcqcn")["totals"];
    assert!(u(&ecn["marks"]) > 0, "{ecn}");
    assert!(u(&ecn["ce_marked_packets"]) > 0, "{ecn}");
    assert!(u(&ecn["cnps_sent"]) > 0, "{ecn}");
    assert!(u(&ecn["cnps_handled"]) > 0, "{ecn}");
    assert!(u(&ecn["rate_cuts"]) > 0, "{ecn}");
    let pfc = &run("pfc")["totals"];
    assert!(u(&pfc["pause_frames_sent"]) > 0, "{pfc}");
    assert!(u(&pfc["pause_frames_received"]) > 0, "{pfc}");
    // Every pause reached the senders, and nothing of the lossless priority was tail-dropped.
    assert_eq!(
        u(&pfc["pause_frames_received"]),
        u(&pfc["pause_frames_sent"]),
        "{pfc}"
    );
    // Lossless: no tail drop and no headroom drop. The senders tag their frames (-S 3), so each
    // checks for pauses from its first packet and stops within 16 frames of one; the switch judges
    // Xoff on every frame it queues (docs/congestion.md, "How faithful it is").
    assert_eq!(u(&pfc["drops"]), 0, "{pfc}");
    assert_eq!(u(&pfc["headroom_drops"]), 0, "{pfc}");
    assert_eq!(u(&pfc["marks"]), 0, "{pfc}");

    // roce_gate exits as the figures say: the targets on ECN (no victim: skipped) and PFC.
    let json = dir.join("congestion.json");
    let ecn_met = ecn["goodput_fraction"].as_f64().unwrap() >= 0.9
        && ecn["jain_steady"].as_f64().is_some_and(|j| j >= 0.95)
        && u(&ecn["drops"]) + u(&ecn["headroom_drops"]) == 0;
    let gate = common::gate(&[], &[&json]);
    let text = String::from_utf8_lossy(&gate.stdout);
    assert_eq!(
        gate.status.code(),
        Some(if ecn_met { 0 } else { 1 }),
        "{text}"
    );
    assert_contains(&text, "switch drops");
    // PFC's promise alone: no drop, so roce_gate --no-drop pfc passes, and JUnit is written.
    let junit = tmp.path().join("gate.xml");
    let gate = common::gate(
        &[
            "--no-defaults",
            "--no-drop",
            "pfc",
            "--junit",
            junit.to_str().unwrap(),
        ],
        &[&json],
    );
    let text = String::from_utf8_lossy(&gate.stdout);
    assert_eq!(gate.status.code(), Some(0), "{text}");
    assert_contains(&std::fs::read_to_string(&junit).unwrap(), "switch drops");
}

/// Threads under SCHED_IDLE that spin, one per core, while it lives: no core halts, and none takes a
/// core from a thread that wants it.
struct KeepCoresAwake {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl KeepCoresAwake {
    fn start() -> KeepCoresAwake {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = (0..cores)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let param = libc::sched_param { sched_priority: 0 };
                    // SAFETY: a plain system call on this thread; `param` is live.
                    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
                    assert_eq!(rc, 0, "SCHED_IDLE: {}", std::io::Error::last_os_error());
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        KeepCoresAwake { stop, threads }
    }
}

impl Drop for KeepCoresAwake {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Each softirq thread's pid and scheduling policy (`sched_getscheduler`), in pid order.
fn softirq_policies() -> Vec<(i32, i32)> {
    let mut v: Vec<(i32, i32)> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| {
            let e = e.ok()?;
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
            // SAFETY: a plain system call on a pid.
            let policy = unsafe { libc::sched_getscheduler(pid) };
            comm.starts_with("ksoftirqd/").then_some((pid, policy))
        })
        .collect();
    v.sort();
    v
}

#[test]
fn congestion_usage_errors_exit_2_and_say_what_to_do() {
    for (args, says) in [
        (
            &["--congestion", "write_lat"][..],
            "--congestion runs its own write_bw flows",
        ),
        (&["--congestion", "-q", "4"][..], "--flows N, not -q"),
        (
            &["--congestion", "--disciplines", "ecn,pfc"][..],
            "\"ecn\" is not a discipline; use lossy-gbn, lossy-sr, ecn-dcqcn, pfc, pfc-dcqcn, tcp-cubic",
        ),
        (&["--flows", "2"][..], "--congestion"),
        (
            &["--congestion", "--softirq-fifo", "5"][..],
            "--softirq-fifo",
        ),
        (
            &["--congestion", "--xoff", "100K", "--xon", "200K"][..],
            "--xon 204800 must be below --xoff 102400",
        ),
    ] {
        let out = compare(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_contains(&String::from_utf8_lossy(&out.stderr), says);
    }
}
