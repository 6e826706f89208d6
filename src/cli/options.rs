//! Validated options: the command line checked, with perftest's defaults filled in.
//!
//! A flag that does not apply is an error that names it.

use super::args::{Args, OobArg};
use super::checks::{self, TransportReason};
use super::{Error, pacing, reporting};
use crate::gate::{GateArgs, GateOutputArgs};
use crate::params::CounterRequest;
use crate::params::{
    AtomicOp, CcParams, CongestionControl, ConnType, IoKind, Marks, OutputSelect, RateLimit,
    Recovery, RoceVersion, Role, RunMode, TestKind, TransportKind,
};
use crate::report::export::{ReportingFiles, RunFiles};
use crate::transport::ImpairConfig;
use clap::FromArgMatches;
use std::net::IpAddr;
use std::time::Duration;

/// Validated options: everything the run needs, with defaults filled in.
#[derive(Debug, Clone)]
pub struct Options {
    /// The test this binary runs.
    pub test: TestKind,
    /// `-A`, atomic tests only (with its default filled in).
    pub atomic_type: Option<AtomicOp>,
    /// Server (no host) or client.
    pub role: Role,
    /// The server's host, on the client.
    pub host: Option<String>,
    /// Out-of-band TCP port.
    pub port: u16,
    /// The transport.
    pub transport: TransportKind,
    /// Why this transport (printed with the results).
    pub transport_reason: TransportReason,
    /// What the transport is opened with.
    pub device: DeviceOptions,
    /// Message sizes to run, in order.
    pub sizes: Vec<u64>,
    /// `-a` was given.
    pub all_sizes: bool,
    /// Iterations or duration.
    pub mode: RunMode,
    /// Queue pairs.
    pub qps: u32,
    /// Operations in flight per queue pair (1 for latency tests).
    pub tx_depth: u32,
    /// `-Q` when given; otherwise the run plan chooses per size (perftest's rule).
    pub cq_mod: Option<u32>,
    /// `-b`.
    pub bidirectional: bool,
    /// `--cpu_util`.
    pub cpu_util: bool,
    /// `-e/--events`: sleep when a poll finds nothing to do instead of spinning.
    pub events: bool,
    /// `--cpu`.
    pub cpu: Option<usize>,
    /// Warm-up iterations.
    pub warmup: u64,
    /// `--connect-timeout`.
    pub connect_timeout: Duration,
    /// `--validate`.
    pub validate: bool,
    /// `--oob`.
    pub oob: OobArg,
    /// `--persist`: a server that serves clients one after another until stopped.
    pub persist: bool,
    /// `-R`: the queue pairs are connected through the CM.
    pub rdma_cm: bool,
    /// `--rate_limit` and its companions, with perftest's defaults filled in.
    pub rate_limit: Option<RateLimit>,
    /// `--latency_gap` (zero when not given).
    pub latency_gap: Duration,
    /// `-c`: the connection type.
    pub connection: ConnType,
    /// `-s` was given (a UD run caps the default size to the MTU but refuses a larger `-s`).
    pub size_given: bool,
    /// `-W` on verbs (its default set when absent): the NIC counters read around each size; `None`
    /// for the other transports.
    pub report_counters: Option<CounterRequest>,
    /// What is printed and written.
    pub output: OutputOptions,
}

/// What is printed and written, all local to this side (the peer never checks it).
#[derive(Debug, Clone)]
pub struct OutputOptions {
    /// `--output`: one number instead of the report.
    pub single: Option<OutputSelect>,
    /// `--report_gbits`.
    pub report_gbits: bool,
    /// Latency percentiles to report.
    pub percentiles: Vec<f64>,
    /// `--csv`, `--json`, `--results` and the formats every tool writes.
    pub files: RunFiles,
    /// `--run_infinitely`: a report line every this long (the run mode is then [`RunMode::endless`]).
    pub report_interval: Option<Duration>,
    /// `--json-stream`, `--out_json` and `--out_json_file` (checked against the run).
    pub reporting_files: ReportingFiles,
    /// `--report-both`: this side's and the peer's figures too (`-b`).
    pub report_both: bool,
    /// `--qp-series MS`: each queue pair's bytes sampled every MS ms into the JSON result.
    pub qp_series: Option<u32>,
    /// `-v` count.
    pub verbosity: u8,
    /// Gate thresholds.
    pub gate: GateArgs,
    /// Gate reports.
    pub gate_output: GateOutputArgs,
}

impl OutputOptions {
    /// With -v, says `msg` on stderr, its lines within 100 columns.
    pub(crate) fn verbose(&self, msg: impl FnOnce() -> String) {
        if self.verbosity > 0 {
            eprintln!(
                "{}",
                crate::report::wrap::wrap(&format!("roceperf: {}", msg()))
            );
        }
    }

    /// True when only one number is printed (no header, table or banner).
    pub(crate) fn quiet(&self) -> bool {
        self.single.is_some()
    }
}

/// What the endpoint is opened with (each transport takes the part it understands).
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceOptions {
    /// `-d`.
    pub device: Option<String>,
    /// `--roce` (soft: always set, v2 unless given).
    pub roce: Option<RoceVersion>,
    /// `-m`.
    pub mtu: Option<u32>,
    /// `-i`.
    pub ib_port: Option<u8>,
    /// `-x`.
    pub gid_index: Option<u8>,
    /// `-I`.
    pub inline_size: Option<u32>,
    /// `--io` (soft), with its default filled in for the soft transport.
    pub io: Option<IoKind>,
    /// `--ipv6`.
    pub ipv6: bool,
    /// `--no-gso`.
    pub no_gso: bool,
    /// `--bind`.
    pub bind: Option<IpAddr>,
    /// `-u`.
    pub qp_timeout: Option<u8>,
    /// `--retry_count`.
    pub retry_count: Option<u8>,
    /// `--impair` (soft).
    pub impair: Option<ImpairConfig>,
    /// `--impair-seed` (soft).
    pub impair_seed: Option<u64>,
    /// `--recovery` (soft): what this side asks for; the peer must ask for `sr` too.
    pub recovery: Recovery,
    /// `--tclass`, `-S`, `--flow_label`: what every packet is marked with.
    pub marks: Marks,
    /// `--cc` (soft): congestion control.
    pub cc: CongestionControl,
    /// `--cc-param` (soft): DCQCN's parameters.
    pub cc_params: CcParams,
    /// `--tcp-congestion` (tcp): the kernel's congestion control of the data connections.
    pub tcp_congestion: Option<String>,
}

impl Options {
    /// Parses the process command line for `test`; clap errors (and --help/--version) exit as clap does (2/0).
    pub fn parse(test: TestKind) -> Result<Options, Error> {
        let matches = crate::params::argv::matches(crate::report::term::clap_colors(
            super::args::command_for(test),
        ));
        let a = Args::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
        Options::from_args(test, a)
    }

    /// Parses an explicit argument list (the first item is the program name).
    pub fn try_parse_from<I, T>(
        test: TestKind,
        args: I,
    ) -> Result<Result<Options, Error>, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let matches = super::args::command_for(test).try_get_matches_from(args)?;
        Ok(Options::from_args(test, Args::from_arg_matches(&matches)?))
    }

    /// Checks the combination of flags and fills in defaults. The checks run in a fixed order (transport
    /// first, then the test, then the run's shape), so the first error reported is always the same.
    pub(crate) fn from_args(test: TestKind, a: Args) -> Result<Options, Error> {
        let choice = checks::resolve_transport(&a);
        let transport = choice.kind;
        checks::built(&choice)?;
        checks::transport_flags(transport, &a)?;
        checks::oob(transport, &a)?;
        checks::persist(&a)?;
        checks::rdma_cm(transport, &a)?;
        checks::lossy_flags(transport, &a)?;
        let io = checks::soft_io(transport, &a)?;
        let connection = super::connection::connection(test, transport, &a)?;
        checks::test_flags(test, &a)?;
        let atomic_type = checks::atomic(test, &a)?;
        checks::run_shape(&a)?;
        let reporting = reporting::reporting(test, &a)?;
        let mode = match reporting.interval {
            Some(_) => RunMode::endless(),
            None => checks::run_mode(test, &a)?,
        };
        let sizes = match connection {
            ConnType::Ud if a.all => super::connection::ud_sweep(&a),
            _ => checks::sizes(test, &a),
        };
        let tx_depth = checks::tx_depth(test, &a, mode);
        checks::cq_mod(a.cq_mod, tx_depth)?;
        let rate_limit = pacing::rate_limit(test, transport, tx_depth, &a)?;
        let latency_gap = pacing::latency_gap(test, &a)?;
        let percentiles = checks::percentiles(a.percentiles.clone());
        checks::results_dir(&a)?;
        let report_counters = checks::report_counters(transport, &a)?;
        Ok(Options {
            test,
            atomic_type,
            role: if a.host.is_some() {
                Role::Client
            } else {
                Role::Server
            },
            host: a.host,
            port: a.port,
            transport,
            transport_reason: choice.reason,
            device: DeviceOptions {
                device: a.device,
                roce: match transport {
                    // Soft always runs some RoCE version; saying which lets the peers compare it.
                    TransportKind::Soft => Some(a.roce.unwrap_or(RoceVersion::V2)),
                    _ => a.roce,
                },
                mtu: a.mtu,
                ib_port: a.ib_port,
                gid_index: a.gid_index,
                inline_size: a.inline_size,
                io,
                ipv6: a.ipv6,
                no_gso: a.no_gso,
                bind: a.bind,
                qp_timeout: a.qp_timeout,
                retry_count: a.retry_count,
                impair: a.impair,
                impair_seed: a.impair_seed,
                recovery: a.recovery.unwrap_or_default(),
                marks: Marks {
                    tclass: a.tclass,
                    sl: a.sl,
                    flow_labels: a.flow_label.unwrap_or_default(),
                },
                cc: a.cc.unwrap_or_default(),
                cc_params: CcParams::parse(a.cc_param.iter().map(String::as_str))
                    .expect("each --cc-param was checked as it was parsed"),
                tcp_congestion: a.tcp_congestion.clone(),
            },
            sizes,
            all_sizes: a.all,
            mode,
            qps: a.qps.unwrap_or(1),
            tx_depth,
            cq_mod: a.cq_mod,
            bidirectional: a.bidirectional,
            cpu_util: a.cpu_util,
            events: a.events,
            cpu: a.cpu,
            warmup: a.warmup.unwrap_or(100),
            connect_timeout: Duration::from_secs(a.connect_timeout),
            validate: a.validate,
            oob: a.oob,
            persist: a.persist,
            rdma_cm: a.rdma_cm,
            rate_limit,
            latency_gap,
            connection,
            size_given: a.size.is_some(),
            report_counters,
            output: OutputOptions {
                single: a.output,
                report_gbits: a.report_gbits,
                percentiles,
                files: a.files,
                report_interval: reporting.interval,
                reporting_files: a.reporting_files,
                report_both: reporting.report_both,
                qp_series: reporting.qp_series,
                verbosity: a.verbose,
                gate: a.gate,
                gate_output: a.gate_output,
            },
        })
    }
}
