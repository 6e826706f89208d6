//! Carries out a congestion study: the topology up once; the victim alone through the idle switch
//! (its reference); then per discipline the switch started with it, the bulk flows (one
//! roce_write_bw of N queue pairs from the senders' namespace to the receiver's) and the victim
//! (roce_write_lat from its own namespace, started once the flows run) through it at once, and the
//! switch stopped for its stats. Every process starts through the comparison's runner
//! ([`run_sides`], `orchestrate::child`), each pair with its own server side.

use super::build::{Left, SwitchCounts, discipline_run};
use super::plan::{CONVERGE_BAND, PRIO, Study, VICTIM_DELAY_MS, VICTIM_FIFO, VictimCores};
use super::softirq::SoftirqFifo;
use super::topology::{HOST_DEV, Host, SwitchSpec, Topology, TopologySpec};
use super::wake_cost::{self, WakeCost};
use crate::compare::leg::{LegSpec, TestSpec, side_args};
use crate::compare::local::{Cores, effective_caps, missing_v1_privileges};
use crate::compare::run::{ClientSide, Leg, LocalServer, run_sides};
use crate::orchestrate::signals::stop_requested;
use crate::params::marks::MarkAt;
use crate::report::progress::SweepProgress;
use crate::results::congestion::{
    CONGESTION_SCHEMA, CONGESTION_SCHEMA_VERSION, CongestionDoc, ConvergenceRule, Discipline,
    DisciplineRun, Outcome, Placement, Setup, Tool, Victim,
};
use crate::results::read::{self, Document};
use crate::results::switch::SwitchStats;
use crate::results::{Measured, now_rfc3339};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where the binaries are, where the runs' logs go, and the cores of the two sides.
pub(crate) struct Env {
    /// The `roce_*` binaries' directory.
    pub(crate) bin_dir: PathBuf,
    /// Logs and result files of every run.
    pub(crate) work: PathBuf,
    /// The bulk flows' server (receiver) and client (senders) cores; the victim's follow from them
    /// ([`Env::victim`]).
    pub(crate) cores: Cores,
    /// `--timeout`: how long one run may take; None: from its duration.
    pub(crate) timeout: Option<Duration>,
}

/// The cores of one pair's sides; None: the binaries' default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sides {
    server: Option<usize>,
    client: Option<usize>,
}

impl Env {
    /// The bulk flows' cores.
    fn bulk(&self) -> Sides {
        Sides {
            server: self.cores.server,
            client: self.cores.client,
        }
    }

    /// The victim's cores: `--victim-cpu`'s, by default split (its client on the senders' core,
    /// its server on the receiver's). Both on one core, a ping-pong of two busy-polling processes
    /// waits for the scheduler at every turn (measured under load: 0-87 round trips in 5 s, against
    /// 28-660 split) and the receiver kept a third of its core (docs/congestion.md, "Where each
    /// process runs").
    fn victim(&self, study: &Study) -> Sides {
        match study.victim_cores {
            Some(VictimCores::Core(c)) => Sides {
                server: Some(c),
                client: Some(c),
            },
            Some(VictimCores::Split) | None => self.bulk(),
        }
    }
}

impl From<&SwitchStats> for SwitchCounts {
    fn from(s: &SwitchStats) -> SwitchCounts {
        SwitchCounts {
            offered_bytes: s.egress.offered_bytes,
            // The switch counts headroom drops among its drops; the document keeps them apart.
            dropped_packets: s.egress.dropped_packets
                - s.egress.headroom_drops.min(s.egress.dropped_packets),
            headroom_drops: s.egress.headroom_drops,
            marked_packets: s.egress.marked_packets,
            max_queue_bytes: s.egress.max_queue_bytes,
            pause_frames_sent: s.pfc.pause_frames_sent,
            paused_ns: s.pfc.paused_ns,
            queue_samples: s.queue_samples.clone(),
        }
    }
}

/// The switch's settings for `d`: the study's rate, the thresholds given (the switch's own
/// defaults otherwise), PFC and ECN on the data's priority, the queue sampled every 100 µs. ECN on
/// that priority alone, as a real switch's ECN profile is per traffic class: the runs' control
/// connections (TCP, Not-ECT, priority 0) cross the same FIFO, and with RED on every priority a
/// queue PFC holds above Kmax dropped every SYN and retry, so the victim's connect failed.
fn switch_spec(study: &Study, d: Discipline) -> SwitchSpec {
    let t = &study.thresholds;
    let mut s = SwitchSpec::new(d.switch(), study.bottleneck_gbps);
    s.buffer = t.buffer;
    if let (Some(lo), Some(hi)) = (t.kmin, t.kmax) {
        s.red = Some((lo, hi, t.pmax.unwrap_or(0.2)));
    }
    if let (Some(off), Some(on)) = (t.xoff, t.xon) {
        s.pfc = Some((off, on));
    }
    s.pfc_prio = Some(PRIO);
    s.ecn_prio = Some(PRIO);
    s.mark_at = t.mark_at;
    s.cpu = study.switch_cpu;
    s.sample_us = Some(100);
    s.batch_us = study.switch_batch_us;
    s
}

/// A transport leg from `from`'s namespace to the receiver's, across the switch.
fn leg(spec: LegSpec, topo: &Topology, from: &Host) -> Leg {
    let label = spec.label();
    Leg {
        spec,
        label,
        server_netns: Some(topo.receiver().netns),
        client_netns: Some(from.netns.clone()),
        host: topo.receiver().addr.into(),
        link: Some(topo.link()),
        path: None,
    }
}

/// One pair of sides run to the end through [`run_sides`] with a server side of its own in `work`:
/// the client's result JSON and the server's, or why it failed.
fn pair(
    env: &Env,
    cores: Sides,
    test: &TestSpec,
    leg: &Leg,
    work: &Path,
    name: &str,
) -> (Result<PathBuf, String>, PathBuf) {
    if let Err(e) = std::fs::create_dir_all(work) {
        return (
            Err(format!("cannot create {}: {e}", work.display())),
            PathBuf::new(),
        );
    }
    let mut server = LocalServer::new(env.bin_dir.clone(), work.to_owned(), cores.server);
    let client = ClientSide {
        bin_dir: env.bin_dir.clone(),
        work: work.to_owned(),
        cpu: cores.client,
        cpu_note: None,
        timeout: env.timeout,
    };
    let done = run_sides(
        test,
        leg,
        None,
        &mut server,
        &client,
        (1, name),
        &mut |_| {},
    );
    let server_json = server.server_json(test);
    let done = done.and_then(|(d, _)| match d.server_note {
        Some(note) => Err(format!("server: {note}")),
        None => Ok(d.path),
    });
    (done, server_json)
}

/// The latency histogram of a victim's result file.
fn victim_histogram(path: &Path) -> Result<hdrhistogram::Histogram<u64>, String> {
    match read::read_json(path).map_err(|e| e.to_string())? {
        Document::Run { results, .. } => match results.into_iter().next().map(|r| r.measured) {
            Some(Measured::Latency { histogram, .. }) => Ok(histogram),
            _ => Err(format!("{}: no latency result", path.display())),
        },
        _ => Err(format!("{}: not a run's result", path.display())),
    }
}

/// A JSON file, or None when it is missing or not JSON (its figures are then null).
fn json(path: &Path) -> Option<serde_json::Value> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

/// How the victim runs: event-driven always, under SCHED_FIFO at [`VICTIM_FIFO`] when this process
/// may raise a thread to it (root, or an RLIMIT_RTPRIO that allows it); else why not.
#[derive(Debug, Clone, PartialEq, Eq)]
struct VictimSched(Result<u8, String>);

impl VictimSched {
    /// Tries SCHED_FIFO on a thread of this process that ends at once: what the victim's sides,
    /// started from it, will be allowed.
    fn probe() -> VictimSched {
        let tried = std::thread::spawn(|| {
            let param = libc::sched_param {
                sched_priority: i32::from(VICTIM_FIFO),
            };
            // SAFETY: `param` is a live sched_param; pid 0 is this thread, which ends next.
            if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } == 0 {
                Ok(VICTIM_FIFO)
            } else {
                Err(std::io::Error::last_os_error().to_string())
            }
        })
        .join();
        VictimSched(tried.unwrap_or_else(|_| Err("the probe thread panicked".into())))
    }

    /// The priority the victim's sides get, if any.
    fn fifo(&self) -> Option<u8> {
        self.0.as_ref().ok().copied()
    }

    /// The table's note: how the victim ran, and why when not as asked.
    fn note(&self) -> String {
        let how = "the victim (and its idle reference, the same way) ran event-driven (-e: it \
                   sleeps in poll(2) until a packet comes; its socket's filter passes only its own \
                   queue pairs' frames, not the flows')";
        match &self.0 {
            Ok(p) => format!(
                "{how} under SCHED_FIFO priority {p}: a packet for it preempts the busy-polling \
                 bulk processes on its core at once, as a NIC serves a latency-sensitive queue"
            ),
            Err(e) => format!(
                "{how} under the normal scheduler: SCHED_FIFO was refused ({e}; it needs root or an \
                 RLIMIT_RTPRIO of {VICTIM_FIFO} or more), so a packet for it waits for the \
                 busy-polling bulk process on its core to be descheduled"
            ),
        }
    }
}

/// The victim alone through the idle switch (lossy, nothing else running): its reference.
fn idle_victim(
    study: &Study,
    topo: &Topology,
    env: &Env,
    sched: &VictimSched,
) -> Result<Victim, String> {
    let test = study.victim_test().ok_or("no victim")?;
    let work = env.work.join("idle");
    std::fs::create_dir_all(&work).map_err(|e| format!("cannot create {}: {e}", work.display()))?;
    let switch = topo
        .start_switch(&switch_spec(study, Discipline::LossyGbn), &work)
        .map_err(|e| e.to_string())?;
    let victim = leg(
        study.victim_leg(HOST_DEV, sched.fifo()),
        topo,
        &topo.victim(),
    );
    let (done, _) = pair(
        env,
        env.victim(study),
        &test,
        &victim,
        &work,
        "victim-client",
    );
    let stopped = switch.stop();
    let path = done.map_err(|e| format!("the idle victim failed: {e}"))?;
    stopped.map_err(|e| e.to_string())?;
    victim_histogram(&path).map(Victim::from_histogram)
}

/// The command line the bulk client ran (its port and result file left out).
fn client_args(spec: &LegSpec, test: &TestSpec, env: &Env, topo: &Topology) -> Vec<String> {
    let mut a = vec![crate::compare::leg::binary_name(test.test)];
    let host = topo.receiver().addr;
    let args = side_args(
        test,
        spec,
        0,
        env.cores.client,
        Path::new("client.json"),
        Some(host),
    );
    // `-p 0` and `--json client.json` are the runner's.
    let mut it = args.into_iter().skip(2).peekable();
    while let Some(x) = it.next() {
        if x == "--json" {
            it.next();
        } else {
            a.push(x);
        }
    }
    a
}

/// One discipline: the switch, the bulk flows and the victim at once, the switch's stats; and a
/// note of what the switch cost the machine ([`SwitchStats::load_note`]).
fn discipline(
    study: &Study,
    topo: &Topology,
    env: &Env,
    d: Discipline,
    sched: &VictimSched,
) -> (DisciplineRun, Option<String>) {
    let work = env.work.join(d.name());
    let test = study.bulk_test();
    let spec = study.bulk_leg(d, HOST_DEV);
    let args = client_args(&spec, &test, env, topo);
    let failed = |error: String, left: Left| {
        let outcome = Outcome {
            ok: false,
            error: Some(error),
            client_exit: None,
            server_exit: None,
            victim_exit: None,
            switch_exit: None,
        };
        (discipline_run(study, d, args.clone(), outcome, left), None)
    };
    if let Err(e) = std::fs::create_dir_all(&work) {
        return failed(
            format!("cannot create {}: {e}", work.display()),
            Left::default(),
        );
    }
    let switch = match topo.start_switch(&switch_spec(study, d), &work) {
        Ok(s) => s,
        Err(e) => return failed(e.to_string(), Left::default()),
    };
    let bulk = leg(spec, topo, &topo.senders());
    let victim_test = study.victim_test();
    let victim_leg = leg(
        study.victim_leg(HOST_DEV, sched.fifo()),
        topo,
        &topo.victim(),
    );
    let ((bulk_done, server_json), victim_done) = std::thread::scope(|s| {
        let b = s.spawn(|| {
            let bulk_work = work.join("bulk");
            pair(env, env.bulk(), &test, &bulk, &bulk_work, "write_bw-client")
        });
        let v = victim_test.as_ref().map(|vt| {
            std::thread::sleep(Duration::from_millis(VICTIM_DELAY_MS));
            let victim_work = work.join("victim");
            let cores = env.victim(study);
            pair(env, cores, vt, &victim_leg, &victim_work, "victim-client").0
        });
        let b = b
            .join()
            .unwrap_or_else(|_| (Err("the bulk runner panicked".into()), PathBuf::new()));
        (b, v)
    });
    let stats = switch.stop();
    let mut errors = Vec::new();
    let client = bulk_done
        .as_ref()
        .map_err(|e| errors.push(format!("bulk flows: {e}")))
        .ok()
        .and_then(|p| json(p));
    let server = json(&server_json);
    let victim = match victim_done {
        None => None,
        Some(Ok(p)) => victim_histogram(&p)
            .map_err(|e| errors.push(format!("victim: {e}")))
            .ok(),
        Some(Err(e)) => {
            errors.push(format!("victim: {e}"));
            None
        }
    };
    let switch = match &stats {
        Ok(s) => Some(SwitchCounts::from(s)),
        Err(e) => {
            errors.push(format!("switch: {e}"));
            None
        }
    };
    let outcome = Outcome {
        ok: errors.is_empty(),
        error: (!errors.is_empty()).then(|| errors.join("; ")),
        client_exit: bulk_done.is_ok().then_some(0),
        server_exit: bulk_done.is_ok().then_some(0),
        victim_exit: victim.as_ref().map(|_| 0),
        switch_exit: stats.is_ok().then_some(0),
    };
    let load_note = stats.as_ref().ok().and_then(|s| s.load_note(d.name()));
    let left = Left {
        client: client.as_ref(),
        server: server.as_ref(),
        victim,
        switch,
    };
    let mut run = discipline_run(study, d, args.clone(), outcome, left);
    if let Ok(s) = &stats {
        run.ran.switch = s.discipline.clone();
    }
    (run, load_note)
}

/// Who runs where, and a note naming the busy-polling processes that share a core (the victim,
/// which sleeps on events, is not one of them).
fn placement(env: &Env, study: &Study, sched: &VictimSched) -> (Vec<Placement>, Option<String>) {
    let (b, v) = (env.bulk(), env.victim(study));
    let how = match sched.fifo() {
        Some(p) => format!("event-driven; SCHED_FIFO {p}"),
        None => "event-driven".into(),
    };
    let mut p = vec![
        Placement {
            role: "switch (sleeps between departures; SCHED_FIFO)".into(),
            core: study.switch_cpu,
        },
        Placement {
            role: "bulk client (senders)".into(),
            core: b.client,
        },
        Placement {
            role: "bulk server (receiver)".into(),
            core: b.server,
        },
    ];
    if study.victim.is_some() {
        p.push(Placement {
            role: format!("victim client ({how})"),
            core: v.client,
        });
        p.push(Placement {
            role: format!("victim server ({how})"),
            core: v.server,
        });
    }
    let shared = shared_cores(&p[1..3]);
    (p, shared)
}

/// The note on busy-polling `roles` that share a core (each gets a part of it while the others
/// run), or None when each has its own.
fn shared_cores(roles: &[Placement]) -> Option<String> {
    let mut cores: Vec<Option<usize>> = roles.iter().map(|r| r.core).collect();
    cores.sort();
    cores.dedup();
    let shared: Vec<String> = cores
        .into_iter()
        .filter_map(|c| {
            let on: Vec<&str> = roles
                .iter()
                .filter(|r| r.core == c)
                .map(|r| r.role.as_str())
                .collect();
            (on.len() > 1).then(|| {
                let core = c.map_or("the scheduler's cores".into(), |c| format!("core {c}"));
                format!("{core}: {}", on.join(", "))
            })
        })
        .collect();
    if shared.is_empty() {
        return None;
    }
    Some(format!(
        "busy-polling processes shared a core ({}): each ran only while the others were off it",
        shared.join("; ")
    ))
}

/// Runs the study: the document, or a setup error (not root, the topology, the idle victim).
pub(crate) fn run(
    study: &Study,
    env: &Env,
    progress: &SweepProgress,
) -> Result<CongestionDoc, String> {
    if let Some(missing) = effective_caps().and_then(missing_v1_privileges) {
        return Err(format!(
            "--congestion builds network namespaces and a switch on AF_PACKET, which needs root; \
             missing {missing}: run it with sudo"
        ));
    }
    let started_at = now_rfc3339();
    let prefix = format!("rcg{}", std::process::id() % 100_000);
    let topo = Topology::up(&prefix, &TopologySpec::default()).map_err(|e| e.to_string())?;
    let mut notes = Vec::new();
    // Held to the end of the study: dropping it puts the softirq threads back.
    let _softirq = match study.softirq_fifo {
        0 => None,
        p => match SoftirqFifo::raise(p) {
            Ok(g) => {
                notes.push(g.note());
                Some(g)
            }
            Err(e) => {
                notes.push(format!(
                    "the kernel's softirq threads ran under the normal scheduler: {e}; frames may                      wait in a core's backlog behind the busy-polling endpoints"
                ));
                None
            }
        },
    };
    let sched = VictimSched::probe();
    let (placement, shared) = placement(env, study, &sched);
    notes.extend(shared);
    if study.victim.is_some() {
        notes.push(sched.note());
    }
    notes.extend(WakeCost::measure(wake_cost::SLEEP_NS, wake_cost::SLEEPS).map(|c| c.note()));
    if let Some(b) = study.switch_batch_us.filter(|&b| b > 0) {
        notes.push(format!(
            "the switch slept at least {b} µs between wake-ups while frames were queued \
             (--switch-batch-us): frames left up to {b} µs late, queued at their arrival stamps"
        ));
    }
    if study.thresholds.mark_at == Some(MarkAt::Dequeue) {
        notes.push(
            "the switch decided ECN marks as frames left, by the queue behind them (--mark-at \
             dequeue), not as they arrived"
                .into(),
        );
    }
    let idle = match study.victim {
        Some(_) => {
            progress.start_step("the victim alone through the idle switch".into());
            let v = idle_victim(study, &topo, env, &sched)?;
            progress.finish_size();
            Some(v)
        }
        None => None,
    };
    let mut runs = Vec::new();
    for &d in &study.disciplines {
        if stop_requested() {
            notes.push(format!("{d}: not run: interrupted"));
            continue;
        }
        progress.start_step(format!(
            "{d}: {} flows for {} s",
            study.flows, study.duration_s
        ));
        let (run, load) = discipline(study, &topo, env, d, &sched);
        runs.push(run);
        notes.extend(load);
        progress.finish_size();
    }
    progress.finish();
    let stats = switch_settings(env, study);
    Ok(CongestionDoc {
        schema: CONGESTION_SCHEMA.into(),
        schema_version: CONGESTION_SCHEMA_VERSION,
        tool: Tool {
            name: "roce_compare".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        },
        started_at,
        finished_at: now_rfc3339(),
        provenance: Some(crate::results::Provenance::of_this_process(None)),
        setup: Setup {
            bottleneck_gbps: study.bottleneck_gbps,
            thresholds: stats.as_ref().map(|s| s.thresholds).unwrap_or_default(),
            pfc_prio: PRIO,
            flows: study.flows,
            size_bytes: study.size,
            duration_s: study.duration_s,
            series_interval_ms: study.series_ms,
            victim_size_bytes: study.victim,
            mtu_bytes: topo.mtu(),
            host_cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            placement,
            convergence: ConvergenceRule {
                band: CONVERGE_BAND,
                window_ms: study.converge_window_ms,
            },
        },
        idle_victim: idle,
        runs,
        notes,
    })
}

/// The settings the switch reported (its stats of the first discipline that wrote them).
fn switch_settings(env: &Env, study: &Study) -> Option<SwitchStats> {
    study.disciplines.iter().find_map(|d| {
        let dir = env.work.join(d.name());
        std::fs::read_dir(&dir).ok()?.find_map(|e| {
            let p = e.ok()?.path();
            let name = p.file_name()?.to_string_lossy().into_owned();
            (name.contains("-switch-") && name.ends_with(".json"))
                .then(|| SwitchStats::read(&p).ok())
                .flatten()
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::congestion::plan::tests::args;

    fn study(v: &[&str]) -> Study {
        let a = args(&[&["--congestion"], v].concat()).unwrap();
        Study::new(&a, None, None).unwrap()
    }

    fn env() -> Env {
        Env {
            bin_dir: PathBuf::new(),
            work: PathBuf::new(),
            cores: Cores::choose(Some(1), Some(0)),
            timeout: None,
        }
    }

    fn cores(p: &[Placement]) -> Vec<(&str, Option<usize>)> {
        p.iter().map(|p| (p.role.as_str(), p.core)).collect()
    }

    #[test]
    fn the_victim_is_split_by_default_and_the_note_names_who_shared() {
        let fifo = VictimSched(Ok(VICTIM_FIFO));
        let (p, note) = placement(&env(), &study(&[]), &fifo);
        assert_eq!(
            cores(&p)[1..],
            [
                ("bulk client (senders)", Some(0)),
                ("bulk server (receiver)", Some(1)),
                ("victim client (event-driven; SCHED_FIFO 5)", Some(0)),
                ("victim server (event-driven; SCHED_FIFO 5)", Some(1)),
            ]
        );
        // The victim sleeps on events: split, no busy-polling process shares a core.
        assert_eq!(note, None);
        assert_eq!(
            placement(&env(), &study(&["--victim-cpu", "split"]), &fifo).0,
            p
        );
        let (p, note) = placement(&env(), &study(&["--victim-cpu", "0"]), &fifo);
        assert_eq!(
            cores(&p)[3..],
            [
                ("victim client (event-driven; SCHED_FIFO 5)", Some(0)),
                ("victim server (event-driven; SCHED_FIFO 5)", Some(0))
            ]
        );
        assert_eq!(
            note, None,
            "the victim is not counted among the busy pollers"
        );
        // Both bulk sides on one core: they shared it.
        let one = Env {
            cores: Cores::choose(Some(1), Some(1)),
            ..env()
        };
        let (_, note) = placement(&one, &study(&[]), &fifo);
        assert_eq!(
            note.as_deref(),
            Some(
                "busy-polling processes shared a core (core 1: bulk client (senders), bulk \
                 server (receiver)): each ran only while the others were off it"
            )
        );
        // Without a victim: three roles.
        let (p, note) = placement(&env(), &study(&["--no-victim"]), &fifo);
        assert_eq!((p.len(), note), (3, None));
        // Refused SCHED_FIFO: the placement and the note say so.
        let refused = VictimSched(Err("Operation not permitted (os error 1)".into()));
        let (p, _) = placement(&env(), &study(&[]), &refused);
        assert_eq!(p[3].role, "victim client (event-driven)");
        let note = refused.note();
        assert!(
            note.contains("under the normal scheduler: SCHED_FIFO was refused (Operation not permitted (os error 1); it needs root or an RLIMIT_RTPRIO of 5 or more)"),
            "{note}"
        );
        let note = fifo.note();
        for says in ["ran event-driven (-e", "under SCHED_FIFO priority 5"] {
            assert!(note.contains(says), "{says:?} in {note}");
        }
    }
}
