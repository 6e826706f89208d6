//! What the run prints and writes: description, header, rows, footer, result files, gate verdict.

use super::Error;
use super::endpoints::Described;
use super::notes::{self, Note};
use super::plan::Plan;
use crate::bench::affinity::Pinned;
use crate::params::{Metric, TransportKind};
use crate::report;
use crate::report::export::Document;
use crate::results::{self, AddressLine, RunInfo, SizeResult};
use crate::transport::ConnInfo;

/// perftest's banner while a server waits for its client.
const WAITING: &str = "\n************************************\n* Waiting for client to connect... *\n************************************\n";

/// A server's banner while it waits for the client, unless only one number is printed.
pub(crate) fn print_waiting(plan: &Plan) {
    if !plan.output.quiet() {
        print!("{WAITING}");
        use std::io::Write;
        let _ = std::io::stdout().flush();
    }
}

/// perftest's address lines of an RDMA run; none over TCP, whose connections have no QPN, PSN, rkey
/// or address to show.
fn address_lines(plan: &Plan, info: &ConnInfo) -> Vec<AddressLine> {
    if plan.transport == TransportKind::Tcp {
        return Vec::new();
    }
    let read = plan.test.verb.reads_back();
    let one_sided = plan.test.verb.is_one_sided();
    info.qps
        .iter()
        .map(|q| AddressLine {
            lid: 0,
            qpn: q.qpn,
            psn: q.psn,
            out_reads: read.then_some(q.max_rd_atomic),
            rkey: one_sided.then_some(q.rkey),
            vaddr: one_sided.then_some(q.vaddr),
            gid: Some(info.gid.octets()),
        })
        .collect()
}

/// The header's notes that follow from the plan, the core and the addresses.
fn run_notes(plan: &Plan, pinned: &Pinned, local: &ConnInfo, peer: &ConnInfo) -> Vec<Note> {
    let mut notes = marks_note(plan).into_iter().collect::<Vec<_>>();
    notes.splice(
        0..0,
        [
            Note::Transport {
                kind: plan.transport,
                reason: plan.transport_reason.clone(),
            },
            Note::Datapath {
                reason: pinned.reason.clone(),
            },
        ],
    );
    if plan.validate {
        notes.push(Note::Validate(crate::bench::validate::Checked::of(
            plan.test,
        )));
    }
    if let Some(l) = plan.rate_limit {
        notes.push(Note::Paced {
            rate: format!("{} {}", l.value, l.units),
            burst: l.burst_size,
        });
    }
    if plan.transport == TransportKind::Soft && plan.device.inline_size.is_some() {
        notes.push(Note::InlineIgnored);
    }
    if plan.transport == TransportKind::Tcp {
        notes.push(Note::TcpBaseline {
            addr: local
                .addr
                .as_deref()
                .or(peer.addr.as_deref())
                .unwrap_or("?")
                .to_string(),
        });
        if plan.test.metric == Metric::Bandwidth {
            notes.push(Note::TcpNoPeak);
        }
    }
    notes
}

/// What verbs and tcp do with `--tclass`, `-S` and `--flow_label`, when any was given (the soft
/// endpoint says it itself, with what it put on the wire).
fn marks_note(plan: &Plan) -> Option<Note> {
    let m = &plan.device.marks;
    if m.is_default() {
        return None;
    }
    let line = match plan.transport {
        TransportKind::Soft => return None,
        TransportKind::Verbs => format!(
            "marks: address handle SL {}, GRH traffic class {:#04x}, flow label {} (per queue pair, round-robin); the NIC maps the SL to its 802.1Q priority",
            m.sl_or_default(),
            m.tclass_or_default(),
            m.flow_labels_display()
        ),
        TransportKind::Tcp => {
            let mut parts = Vec::new();
            if let Some(t) = m.tclass {
                parts.push(format!(
                    "IP_TOS / IPV6_TCLASS {t:#04x} on the data connections (DSCP {}; the kernel keeps TCP's own ECN bits)",
                    t >> 2
                ));
            }
            if let Some(p) = m.sl {
                parts.push(format!(
                    "-S {p}: SO_PRIORITY {p} (an 802.1Q priority only through a VLAN device's egress-qos-map)"
                ));
            }
            format!("marks: {}", parts.join("; "))
        }
    };
    Some(Note::Setup(line))
}

/// The run's description, once both sides' connection details are known.
pub(crate) fn run_info(
    plan: &Plan,
    fallback_device: String,
    pinned: &Pinned,
    local: &ConnInfo,
    peer: &ConnInfo,
) -> RunInfo {
    RunInfo {
        test: plan.test,
        atomic_type: plan.atomic_type,
        role: plan.role,
        transport: plan.transport,
        roce: plan.device.roce,
        device: plan
            .device
            .device
            .clone()
            .unwrap_or(fallback_device.clone()),
        peer: plan.host.clone(),
        qps: plan.qps,
        tx_depth: plan.tx_depth,
        rx_depth: plan.test.verb.consumes_receive().then_some(plan.depths.rx),
        cq_mod: plan.cq_mod_at(plan.max_size()),
        // TCP has no path MTU of its own (the kernel sizes its segments) and no inline data.
        mtu: (plan.transport != TransportKind::Tcp).then(|| local.mtu.min(peer.mtu)),
        link_type: RunInfo::link_type_of(plan.transport).into(),
        gid_index: local.gid_index,
        inline_size: match plan.transport {
            TransportKind::Verbs => Some(plan.device.inline_size.unwrap_or(0)),
            TransportKind::Soft => Some(0),
            TransportKind::Tcp => None,
        },
        out_reads: plan
            .test
            .verb
            .reads_back()
            .then(|| local.qps.first().map_or(1, |q| q.max_rd_atomic)),
        cpu: Some(pinned.core),
        local: address_lines(plan, local),
        remote: address_lines(plan, peer),
        report_gbits: plan.output.report_gbits,
        percentiles: plan.output.percentiles.clone(),
        iterations: plan.mode.iterations(),
        duration_s: plan.mode.duration_secs(),
        margin_s: plan.mode.margin_secs(),
        warmup: plan.warmup,
        bidirectional: plan.bidirectional,
        started_at: results::now_rfc3339(),
        notes: notes::lines(&run_notes(plan, pinned, local, peer)),
        version: env!("CARGO_PKG_VERSION").to_string(),
        counters: None,
        nic_counters: None,
        impair: None,
        recovery: None,
        rate_limit: plan.rate_limit,
        latency_gap_ns: (!plan.latency_gap.is_zero()).then_some(plan.latency_gap.as_nanos() as u64),
        run_infinitely: plan
            .output
            .report_interval
            .map(|every| results::EndlessRun {
                report_interval_s: every.as_secs_f64(),
                intervals: 0,
                stopped_by: None,
            }),
        connection: (plan.transport != TransportKind::Tcp).then_some(plan.connection),
        rdma_cm: plan.rdma_cm,
        events: plan.events,
        exchange_rdma_cm: super::endpoints::comm_qps(plan) > 0,
        error: None,
        interrupted: None,
        marks: given_marks(plan),
        provenance: Some(results::Provenance::of_this_process(nic_identity(
            plan,
            plan.device.device.as_deref().unwrap_or(&fallback_device),
        ))),
    }
}

/// The NIC the run used, for its provenance: verbs' RDMA device (its driver and firmware from
/// sysfs), soft's interface and tcp's (the one holding its local address `device`), their driver and
/// firmware through `ETHTOOL_GDRVINFO`.
fn nic_identity(plan: &Plan, device: &str) -> Option<results::NicIdentity> {
    use crate::transport::probe;
    let (device, info) = match plan.transport {
        TransportKind::Verbs => (device.to_owned(), Some(probe::rdma_driver(device))),
        TransportKind::Soft => (device.to_owned(), probe::interface_driver(device)),
        TransportKind::Tcp => {
            let ifname = probe::interface_with(device.parse().ok()?)?;
            let info = probe::interface_driver(&ifname);
            (ifname, info)
        }
    };
    Some(results::NicIdentity {
        device,
        driver: info
            .as_ref()
            .map(|i| i.driver.clone())
            .filter(|d| !d.is_empty()),
        firmware: info.and_then(|i| i.firmware),
    })
}

/// `-v`: the run's provenance as its files record it, one ` Key : value` line each.
pub(crate) fn provenance_text(info: &RunInfo) -> Option<String> {
    let p = info.provenance.as_ref()?;
    let mut s = String::from("provenance (in every result file):");
    for (key, value) in p.lines() {
        s.push_str(&format!("\n {key:<16}: {value}"));
    }
    Some(s)
}

/// `--tclass`, `-S`, `--flow_label` as given, where any was (the soft endpoint adds what it put on
/// the wire: [`Described::wire_marks`]); tcp's `-S` is its sockets' SO_PRIORITY.
fn given_marks(plan: &Plan) -> Option<results::RunMarks> {
    let m = &plan.device.marks;
    (!m.is_default()).then(|| results::RunMarks {
        tclass: m.tclass,
        sl: m.sl,
        flow_labels: m.flow_labels.clone(),
        so_priority: m.sl.filter(|_| plan.transport == TransportKind::Tcp),
        ..results::RunMarks::default()
    })
}

/// perftest's header block, the address block and the table's header.
pub(crate) fn print_header(info: &RunInfo) {
    print!("{}", report::header_block(info));
    print!("{}", report::address_block(info));
    print!("{}", report::table_header(info));
}

/// One size's row: the table's, or the single number `--output` asks for.
pub(crate) fn row(plan: &Plan, info: &RunInfo, r: &SizeResult) -> String {
    match plan.output.single {
        Some(sel) => report::console::single_value_in(sel, r, plan.output.report_gbits),
        None => report::table_row(info, r),
    }
}

/// After the last size, in either dialect: the transport's counters into the run info, the table's
/// footer and extras (unless a single value was asked for; a sweep's only with `-v`), then the result files ([`gate`] follows,
/// after the dialect's last exchange). `both`: `--report-both`'s two sides of the last row;
/// `endless`: a run without end's outputs, whose stream ends with the run's document.
pub(crate) fn conclude<E: Described>(
    plan: &Plan,
    ep: &E,
    info: &mut RunInfo,
    results: &[SizeResult],
    both: Option<(&SizeResult, &SizeResult)>,
    endless: Option<super::endless::Outputs>,
) -> Result<(), Error> {
    info.counters = ep.counters().map(|(_, v)| v);
    if !plan.output.quiet() {
        let mut tail = report::table_footer();
        // A sweep (-a) is one table: its rows say what the size lines would repeat, and the files
        // hold every figure; -v adds the size lines under it.
        if results.len() == 1 || plan.output.verbosity > 0 {
            for r in results {
                tail.push_str(&report::extras(info, r));
            }
        }
        if let Some(run) = &info.run_infinitely {
            tail.push_str(&report::console::endless_line(run));
        }
        if let Some(i) = &info.interrupted {
            tail.push_str(&interrupted_line(i));
        }
        print!("{tail}");
    }
    write_files(plan, info, results, both, endless)?;
    Ok(())
}

/// The console's line under the table of a run a signal stopped early.
fn interrupted_line(i: &results::Interrupted) -> String {
    let who = match i.by.as_str() {
        results::BY_PEER => "Interrupted: peer interrupted (a signal stopped it)".to_string(),
        by => format!("Interrupted by {by}"),
    };
    let what = match (i.size_bytes, i.partial) {
        (Some(s), true) => {
            format!(" during size {s}; its row holds what completed before the stop")
        }
        (Some(s), false) => format!(" during size {s}, before any of it was measured (no row)"),
        (None, _) => " between sizes".to_string(),
    };
    format!(" {who}{what}\n")
}

/// A run that failed after connecting, in either dialect: its files all the same, with the sizes that
/// completed, the transport's counters now and `error`. Nothing is printed but where they went; a file
/// that cannot be written is a warning, as `error` is what the run exits with.
pub(crate) fn keep_failed<E: Described>(
    plan: &Plan,
    ep: &E,
    info: &mut RunInfo,
    results: &[SizeResult],
    endless: Option<super::endless::Outputs>,
    error: &Error,
) {
    info.counters = ep.counters().map(|(_, v)| v);
    info.error = Some(results::RunError {
        message: error.to_string(),
        failed: match error.failure() {
            crate::oob::Failure::Test => results::FailedPart::Test,
            crate::oob::Failure::Setup => results::FailedPart::Setup,
        },
        exit_code: error.exit_code(),
        detail: ep.failure_detail(),
    });
    if let Err(e) = write_files(plan, info, results, None, endless) {
        super::notes::Warning::FailedRunNotWritten(e.to_string()).emit();
    }
}

/// The run's document through its export manager (or a run without end's outputs, whose stream ends
/// with it); with `--results`, says where it went.
fn write_files(
    plan: &Plan,
    info: &RunInfo,
    results: &[SizeResult],
    both: Option<(&SizeResult, &SizeResult)>,
    endless: Option<super::endless::Outputs>,
) -> Result<(), results::WriteError> {
    let doc = Document::Run {
        info,
        results,
        both,
    };
    let written = match endless {
        Some(o) => o.finish(&doc),
        None => super::endless::exports(&plan.output).write(&doc),
    };
    if let Some(dir) = &plan.output.files.results
        && !plan.output.quiet()
    {
        let (csv, json) = results::results_paths(dir, info);
        if written.paths.contains(&csv) && written.paths.contains(&json) {
            println!(
                " Results written to {} and {}",
                csv.display(),
                json.display()
            );
        }
    }
    written.result().map(drop)
}

/// Tries every path the run will write (its export manager's, and the gate's `--junit`), leaving
/// nothing changed; the first that cannot be written, naming its flag. A file named `-` takes
/// standard output, and the console goes to standard error from here on.
pub(crate) fn probe_outputs(plan: &Plan) -> Result<(), Error> {
    let exports = super::endless::exports(&plan.output);
    match exports.stdout_flags()[..] {
        [] => {}
        [_] => results::claim_stdout().map_err(|e| {
            Error::Usage(crate::cli::Error::Invalid {
                flag: "-",
                why: format!("standard output cannot be kept for the file: {e}"),
            })
        })?,
        [a, b, ..] => {
            return Err(Error::Usage(crate::cli::Error::Invalid {
                flag: b,
                why: format!(
                    "{a} already writes to standard output (-); one file at most can go there, name a file for the other"
                ),
            }));
        }
    }
    exports.probe()?;
    if let Some(junit) = &plan.output.gate_output.junit {
        results::probe_file(junit, &results::Writes::Whole).map_err(|source| {
            results::Unusable {
                flag: "--junit",
                source,
            }
        })?;
    }
    Ok(())
}

/// Checks the gate thresholds given on the command line against this run (nothing when none was given).
pub(crate) fn gate(plan: &Plan, info: &RunInfo, results: &[SizeResult]) -> Result<(), Error> {
    let out = &plan.output;
    if !out.gate.is_active() {
        return Ok(());
    }
    let source = out
        .files
        .json
        .clone()
        .unwrap_or_else(|| std::path::PathBuf::from(format!("{} run", info.test)));
    let report = crate::gate::check_run(info, results, &source, &out.gate).map_err(|errors| {
        Error::GateInput(
            errors
                .iter()
                .map(|e| format!("baseline: {e}"))
                .collect::<Vec<_>>()
                .join("; "),
        )
    })?;
    print!("{}", report.table());
    if out.gate_output.github_enabled() {
        print!("{}", report.github_annotations());
    }
    if let Some(path) = &out.gate_output.junit {
        report.write_junit(path).map_err(|e| {
            Error::GateInput(format!(
                "cannot write the JUnit report {}: {e}; check that its directory exists and is writable",
                path.display()
            ))
        })?;
    }
    match report.count(crate::gate::Verdict::Fail) {
        0 => Ok(()),
        failed => Err(Error::GateFailed { failed }),
    }
}
