//! What every `roce_*` binary does: parse, pin, set up out of band, run each size, report, exit.
//!
//! The six binaries are one line each: `roceperf::app::main(TestKind::new(verb, metric))`.
//! Exit codes: 0 ok, 1 the test failed while running, 2 usage or setup error.

use crate::bench::{self, Layout, bw, lat, validate};
use crate::cli::{IoArg, OobArg, Options, OutputArg, RunMode};
use crate::oob::{self, Channel, TestParams};
use crate::params::{Metric, RoceVersion, Role, TestKind, TransportKind, Verb};
use crate::report::{self, OutputSelect, progress::SweepProgress};
use crate::results::{self, AddressLine, Measured, RunInfo, SizeResult};
use crate::stats::{BandwidthStats, LatencyStats};
use crate::transport::soft::endpoint::{IoKind, SoftConfig, SoftEndpoint};
use crate::transport::soft::netdev::AddrFamily;
use crate::transport::tcp::{TcpConfig, TcpEndpoint};
use crate::transport::verbs::{VerbsConfig, VerbsEndpoint};
use crate::transport::{self, Access, ConnInfo, Endpoint};
use std::process::ExitCode;
use std::time::Duration;

/// Everything that can stop a run, with the exit code it maps to.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Out-of-band setup, parameter check or result exchange (exit 2).
    #[error("{0}")]
    Oob(#[from] oob::Error),
    /// The test itself (exit 1), or choosing the core (exit 2).
    #[error("{0}")]
    Bench(#[from] bench::Error),
    /// Creating or connecting the transport (exit 2).
    #[error("setting up the {transport} transport: {source}")]
    Setup {
        /// Which transport.
        transport: TransportKind,
        /// Its error.
        #[source]
        source: transport::Error,
    },
    /// Writing --csv / --json / --results (exit 2).
    #[error("{0}")]
    Report(#[from] results::WriteError),
    /// A gate threshold or baseline comparison failed (exit 1); the table above says which.
    #[error("{failed} gate check(s) failed (see the table above)")]
    GateFailed {
        /// Number of failed checks.
        failed: usize,
    },
    /// perftest's out-of-band dialect failed (exit 2).
    #[error("--oob perftest: {0}")]
    Perftest(#[from] crate::oob::perftest::PerftestError),
    /// A gate could not be evaluated: unreadable baseline, unwritable JUnit file (exit 2).
    #[error("gate: {0}")]
    GateInput(String),
}

impl Error {
    /// The process exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Bench(e) if !e.is_setup() => 1,
            Error::GateFailed { .. } => 1,
            // The peer vanished after the test began (per-size barriers, results): the test failed.
            Error::Oob(oob::Error::Closed { during, .. })
                if during.starts_with("barrier") || during.starts_with("results") =>
            {
                1
            }
            _ => 2,
        }
    }
}

/// Entry point of the six binaries.
pub fn main(test: TestKind) -> ExitCode {
    let opts = match Options::parse(test) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}\n\nFor more information, try '--help'.");
            return ExitCode::from(2);
        }
    };
    match run(&opts) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// How long a blocking out-of-band read waits for the peer.
pub(crate) fn io_timeout(opts: &Options) -> Duration {
    let run = match opts.mode {
        RunMode::Duration { secs, .. } => Duration::from_secs(secs),
        RunMode::Iterations(_) => Duration::ZERO,
    };
    oob::DEFAULT_IO_TIMEOUT + opts.connect_timeout + run
}

pub(crate) fn verbose(opts: &Options, msg: impl FnOnce() -> String) {
    if opts.verbose > 0 {
        eprintln!("roceperf: {}", msg());
    }
}

/// Runs one test as the options say, printing the report; the error says what failed.
///
/// RoCE endpoints (soft, verbs) are opened before the out-of-band channel, so a missing device or library
/// is reported at once rather than after a peer has connected; the TCP baseline binds its data sockets to
/// the channel's local address, so it is created after.
pub fn run(opts: &Options) -> Result<(), Error> {
    let pinned = bench::affinity::pin(opts.cpu, opts.role)?;
    verbose(opts, || format!("datapath pinned to {}", pinned.reason));
    let layout = Layout::for_size(opts.max_size());
    match opts.transport {
        TransportKind::Soft => {
            let ep = open_soft(opts, layout)?;
            verbose(opts, || ep.describe());
            if opts.oob == OobArg::Perftest {
                return perftest_oob::run(opts, &pinned, layout, ep);
            }
            let mut chan = open_channel(opts)?;
            guarded(&mut chan, |chan| serve(opts, chan, &pinned, layout, ep))
        }
        TransportKind::Verbs => {
            let ep = open_verbs(opts, layout)?;
            if opts.oob == OobArg::Perftest {
                return perftest_oob::run(opts, &pinned, layout, ep);
            }
            let mut chan = open_channel(opts)?;
            guarded(&mut chan, |chan| serve(opts, chan, &pinned, layout, ep))
        }
        TransportKind::Tcp => {
            let mut chan = open_channel(opts)?;
            guarded(&mut chan, |chan| {
                chan.check_params(&test_params(opts))?;
                let ep = TcpEndpoint::new(TcpConfig {
                    role: opts.role,
                    qps: opts.qps as usize,
                    buf_len: layout.buffer_len(),
                    sq_depth: opts.tx_depth as usize,
                    rq_depth: rx_depth(opts) as usize,
                    bind: chan.local_ip(),
                    connect_timeout: opts.connect_timeout,
                    socket_buffer: None,
                    spin_polls: crate::transport::tcp::DEFAULT_SPIN_POLLS,
                })
                .map_err(|source| setup_error(opts, source))?;
                run_sizes(opts, chan, &pinned, layout, ep)
            })
        }
    }
}

/// Connects (client) or accepts (server) the out-of-band channel.
fn open_channel(opts: &Options) -> Result<Channel, Error> {
    let chan = match (&opts.role, &opts.host) {
        (Role::Client, Some(host)) => Channel::connect(
            host,
            opts.port,
            opts.connect_timeout,
            io_timeout(opts),
            |t| {
                eprintln!(
                    "roceperf: no server at {t} yet; retrying for up to {} s (--connect-timeout)",
                    opts.connect_timeout.as_secs()
                )
            },
        )?,
        _ => Channel::accept(opts.port, io_timeout(opts), || {
            if opts.output.is_none() {
                print!(
                    "\n************************************\n* Waiting for client to connect... *\n************************************\n"
                );
            }
        })?,
    };
    verbose(opts, || {
        format!("out-of-band channel up with {}", chan.peer())
    });
    Ok(chan)
}

/// Runs `body`; on an error other than the channel's own, tells the peer why before returning it.
fn guarded(
    chan: &mut Channel,
    body: impl FnOnce(&mut Channel) -> Result<(), Error>,
) -> Result<(), Error> {
    match body(chan) {
        Ok(()) => Ok(()),
        Err(e) => {
            if !matches!(e, Error::Oob(_)) {
                chan.abort(&e.to_string());
            }
            Err(e)
        }
    }
}

/// Checks parameters with the peer, then runs every size on an opened RoCE endpoint.
fn serve<E: Described>(
    opts: &Options,
    chan: &mut Channel,
    pinned: &bench::affinity::Pinned,
    layout: Layout,
    ep: E,
) -> Result<(), Error> {
    chan.check_params(&test_params(opts))?;
    verbose(opts, || "parameters agree with the peer".into());
    run_sizes(opts, chan, pinned, layout, ep)
}

/// The soft endpoint the options describe.
fn open_soft(opts: &Options, layout: Layout) -> Result<SoftEndpoint, Error> {
    let device = opts.device.as_deref().unwrap_or("lo");
    let version = opts.roce.unwrap_or(RoceVersion::V2);
    let mut cfg = SoftConfig::new(device, version);
    cfg.io = match opts.io {
        Some(IoArg::Packet) => IoKind::Packet,
        Some(IoArg::Udp) => IoKind::Udp,
        None => cfg.io,
    };
    cfg.bind = opts.bind;
    cfg.family = if opts.ipv6 || opts.bind.is_some_and(|b| b.is_ipv6()) {
        AddrFamily::Ipv6
    } else {
        AddrFamily::Ipv4
    };
    cfg.gid_index = opts.gid_index.map(u32::from);
    cfg.mtu = opts.mtu;
    cfg.timeout = opts.qp_timeout.unwrap_or(cfg.timeout);
    cfg.gso = !opts.no_gso;
    cfg.retry_cnt = opts.retry_count.unwrap_or(cfg.retry_cnt);
    cfg.qps = opts.qps as usize;
    cfg.buffer_len = layout.buffer_len();
    // The drivers never have more than -t sends or rx_depth receives outstanding; keep the engine's
    // defaults as a floor so a sweep's finishing phase never finds a full queue.
    cfg.sq_depth = cfg.sq_depth.max(opts.tx_depth as usize);
    cfg.rq_depth = cfg.rq_depth.max(rx_depth(opts) as usize);
    SoftEndpoint::open(cfg).map_err(|e| {
        let mut source: transport::Error = e.into();
        if opts.transport_reason.starts_with("--transport auto")
            && let transport::Error::Unavailable(m) = &mut source
        {
            // The name may have been meant as an RDMA device: say why soft was tried, and what exists.
            let rdma: Vec<String> = std::fs::read_dir("/sys/class/infiniband")
                .map(|d| {
                    d.filter_map(|e| e.ok())
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
            m.push_str(&format!(
                " ({}; RDMA devices here: {})",
                opts.transport_reason,
                if rdma.is_empty() {
                    "none".to_string()
                } else {
                    rdma.join(", ")
                }
            ));
        }
        setup_error(opts, source)
    })
}

/// The verbs endpoint the options describe, with the access rights perftest gives each test.
fn open_verbs(opts: &Options, layout: Layout) -> Result<VerbsEndpoint, Error> {
    let access = match opts.test.verb {
        Verb::Send => Access::LOCAL_WRITE,
        Verb::Write => Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        Verb::Read => Access::LOCAL_WRITE | Access::REMOTE_READ,
    };
    let defaults = VerbsConfig::default();
    let cfg = VerbsConfig {
        device: opts.device.clone(),
        ib_port: opts.ib_port.unwrap_or(1),
        gid_index: opts.gid_index.map(u32::from),
        roce: opts.roce,
        ipv6: opts.ipv6,
        qps: opts.qps as usize,
        buf_size: layout.buffer_len(),
        tx_depth: opts.tx_depth.max(1),
        rx_depth: rx_depth(opts).max(1),
        inline_size: opts.inline_size.unwrap_or(0),
        mtu: opts.mtu,
        access,
        timeout: opts.qp_timeout.unwrap_or(defaults.timeout),
        retry_cnt: opts.retry_count.unwrap_or(defaults.retry_cnt),
        ..defaults
    };
    VerbsEndpoint::open(&cfg).map_err(|e| setup_error(opts, e.into()))
}

mod perftest_oob;

/// What the report needs from a transport beyond [`Endpoint`]: setup notes, counters, error detail.
pub(crate) trait Described: Endpoint {
    /// Lines for the header's notes (what was chosen and why).
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
    /// Counters for `-v` (text) and the JSON (value), when the transport keeps any.
    fn counters(&self) -> Option<(String, serde_json::Value)> {
        None
    }
    /// The first failed completion in words, when the transport knows more than the status.
    fn failure_detail(&self) -> Option<String> {
        None
    }
    /// Adjusts to a peer on the other RoCE transport (soft against verbs); returns notes for the header.
    fn adapt_to_peer(&mut self, _peer: &ConnInfo) -> Vec<String> {
        Vec::new()
    }
}

impl Described for TcpEndpoint {}

impl Described for SoftEndpoint {
    fn notes(&self) -> Vec<String> {
        // The interface's whole GID table (indented deeper) is for -v; the header keeps what was chosen.
        self.describe()
            .lines()
            .filter(|l| !l.starts_with("    ") && !l.trim().is_empty())
            .map(|l| l.trim().to_string())
            .collect()
    }
    fn counters(&self) -> Option<(String, serde_json::Value)> {
        let c = SoftEndpoint::counters(self);
        Some((c.to_string(), serde_json::to_value(c).ok()?))
    }
}

impl Described for VerbsEndpoint {
    fn notes(&self) -> Vec<String> {
        let s = self.setup();
        let mut v = vec![
            format!("verbs device {} port {}", s.device, s.port),
            s.gid_line(),
            format!(
                "active MTU {} bytes, path MTU offered {} bytes",
                s.active_mtu, s.mtu
            ),
        ];
        v.extend(s.notes.iter().cloned());
        v
    }
    fn failure_detail(&self) -> Option<String> {
        VerbsEndpoint::failure_detail(self).map(str::to_string)
    }
}

fn test_params(opts: &Options) -> TestParams {
    TestParams {
        test: opts.test,
        transport: opts.transport,
        roce: opts.roce,
        all_sizes: opts.all_sizes,
        size: opts.max_size(),
        iterations: opts.iterations(),
        duration: match opts.mode {
            RunMode::Duration { secs, .. } => Some(secs),
            RunMode::Iterations(_) => None,
        },
        margin: match opts.mode {
            RunMode::Duration { margin, .. } => Some(margin),
            RunMode::Iterations(_) => None,
        },
        qps: opts.qps,
        mtu: opts.mtu,
        bidirectional: opts.bidirectional,
        warmup: opts.warmup,
        report_gbits: opts.report_gbits,
        validate: opts.validate,
    }
}

/// Receives kept posted per queue pair by SEND tests (perftest's rx_depth 512, capped at the iterations).
pub(crate) fn rx_depth(opts: &Options) -> u32 {
    match (opts.test.verb, opts.test.metric) {
        (Verb::Send, Metric::Bandwidth) => {
            let n = match opts.mode {
                RunMode::Iterations(n) => n,
                RunMode::Duration { .. } => 512,
            };
            512.min(n.max(u64::from(opts.tx_depth))) as u32
        }
        (Verb::Send, Metric::Latency) => 1,
        _ => 1,
    }
}

pub(crate) fn setup_error(opts: &Options, source: transport::Error) -> Error {
    Error::Setup {
        transport: opts.transport,
        source,
    }
}

/// Connects the endpoint to the peer, prints the header and runs every size.
fn run_sizes<E: Described>(
    opts: &Options,
    chan: &mut Channel,
    pinned: &bench::affinity::Pinned,
    layout: Layout,
    mut ep: E,
) -> Result<(), Error> {
    let outcome = run_sizes_on(opts, chan, pinned, layout, &mut ep);
    explain_outcome(opts, &ep, outcome)
}

/// After a run in either dialect: the transport's account of a failed completion, and with -v its
/// counters, on stderr; the outcome passes through.
pub(crate) fn explain_outcome<E: Described>(
    opts: &Options,
    ep: &E,
    outcome: Result<(), Error>,
) -> Result<(), Error> {
    if let Err(Error::Bench(_)) = &outcome
        && let Some(d) = ep.failure_detail()
    {
        eprintln!("roceperf: {d}");
    }
    if opts.verbose > 0
        && let Some((text, _)) = ep.counters()
    {
        eprint!("roceperf: {} transport counters:\n{text}", opts.transport);
    }
    outcome
}

/// Receives a SEND test posts per queue pair before a size starts, as perftest does: a peer that sends
/// the moment the run begins must find them (else an RNR NAK and a wasted timeout). Bandwidth: the
/// receiving side keeps rx_depth posted, a sender none; latency: one, on both sides.
pub(crate) fn initial_receives(opts: &Options) -> u32 {
    match (opts.test.verb, opts.test.metric) {
        (Verb::Send, Metric::Bandwidth) if opts.role == Role::Server || opts.bidirectional => {
            rx_depth(opts)
        }
        (Verb::Send, Metric::Latency) => 1,
        _ => 0,
    }
}

fn run_sizes_on<E: Described>(
    opts: &Options,
    chan: &mut Channel,
    pinned: &bench::affinity::Pinned,
    layout: Layout,
    ep: &mut E,
) -> Result<(), Error> {
    let setup = |source| setup_error(opts, source);
    let mut peer_info: ConnInfo = chan.exchange("conn", &ep.local_info())?;
    let adapted = ep.adapt_to_peer(&peer_info);
    if peer_info.transport != opts.transport && opts.transport != TransportKind::Tcp {
        // soft and verbs put the same packets on the wire; the label only says who made the description.
        peer_info.transport = opts.transport;
    }
    ep.connect(&peer_info).map_err(setup)?;
    verbose(opts, || {
        format!("data connections up ({:?})", peer_info.addr)
    });
    let mut info = run_info(
        opts,
        chan.local_ip().to_string(),
        pinned,
        &ep.local_info(),
        &peer_info,
    );
    info.notes.extend(ep.notes());
    info.notes.extend(adapted);
    let quiet = opts.output.is_some();
    if !quiet {
        print!("{}", report::header_block(&info));
        print!("{}", report::address_block(&info));
        print!("{}", report::table_header(&info));
    }
    let remotes = layout.remotes(&peer_info);
    let progress = if opts.sizes.len() > 1 {
        SweepProgress::new(opts.sizes.len() as u64)
    } else {
        SweepProgress::hidden(1)
    };
    let mut recvs = bw::RecvState::default();
    let mut results = Vec::with_capacity(opts.sizes.len());
    for (step, &size) in opts.sizes.iter().enumerate() {
        progress.start_size(size);
        if opts.validate {
            prepare_validation(opts, ep, layout, size);
        }
        if opts.test == TestKind::new(Verb::Write, Metric::Latency) {
            lat::clear_marker(ep, &layout, size);
        }
        // Before the barrier, so the drivers' own fill then finds the queues full.
        recvs
            .fill(ep, &layout, initial_receives(opts))
            .map_err(Error::Bench)?;
        chan.barrier(step as u64)?;
        let mine = measure(
            opts,
            ep,
            &mut || chan.peer_has_data().unwrap_or(true),
            layout,
            &remotes,
            &mut recvs,
            size,
            opts.warmup,
        )?;
        let theirs = finish(opts.role, chan, ep, &mine, &mut recvs, layout)?;
        if opts.validate
            && opts.test == TestKind::new(Verb::Write, Metric::Bandwidth)
            && (opts.role == Role::Server || opts.bidirectional)
        {
            check_write_target(ep, layout, size)?;
        }
        let shown = match (mine, theirs) {
            (Some(m), Some(t)) if opts.bidirectional => Some(combine(
                m,
                &t,
                matches!(opts.mode, RunMode::Duration { .. }),
            )),
            (Some(m), _) => Some(m),
            (None, t) => t,
        };
        let Some(r) = shown else {
            return Err(Error::Oob(oob::Error::Garbage {
                peer: chan.peer().to_string(),
                detail: format!("it sent no results for size {size}"),
            }));
        };
        progress.finish_size();
        if quiet {
            let sel = match opts.output {
                Some(OutputArg::Bandwidth) => OutputSelect::Bandwidth,
                Some(OutputArg::MessageRate) => OutputSelect::MessageRate,
                _ => OutputSelect::Latency,
            };
            progress.print(&report::console::single_value_in(
                sel,
                &r,
                opts.report_gbits,
            ));
        } else {
            progress.print(&report::table_row(&info, &r));
        }
        results.push(r);
    }
    progress.finish();
    // Neither side closes its data connections before the other has its results.
    chan.barrier(u64::MAX)?;
    conclude(opts, ep, info, &results)
}

/// After the last size, in either dialect: the transport's counters into the run info, the table's
/// footer and extras (unless a single value was asked for), the result files, then the gate.
pub(crate) fn conclude<E: Described>(
    opts: &Options,
    ep: &E,
    mut info: RunInfo,
    results: &[SizeResult],
) -> Result<(), Error> {
    info.counters = ep.counters().map(|(_, v)| v);
    if opts.output.is_none() {
        let mut tail = report::table_footer();
        for r in results {
            tail.push_str(&report::extras(&info, r));
        }
        print!("{tail}");
    }
    write_files(opts, &info, results)?;
    gate(opts, &info, results)
}

/// Checks the gate thresholds given on the command line against this run (nothing when none was given).
pub(crate) fn gate(opts: &Options, info: &RunInfo, results: &[SizeResult]) -> Result<(), Error> {
    if !opts.gate.is_active() {
        return Ok(());
    }
    let source = opts
        .json
        .clone()
        .unwrap_or_else(|| std::path::PathBuf::from(format!("{} run", info.test)));
    let report = crate::gate::check_run(info, results, &source, &opts.gate).map_err(|errors| {
        Error::GateInput(
            errors
                .iter()
                .map(|e| format!("baseline: {e}"))
                .collect::<Vec<_>>()
                .join("; "),
        )
    })?;
    print!("{}", report.table());
    if opts.gate_output.github_enabled() {
        print!("{}", report.github_annotations());
    }
    if let Some(path) = &opts.gate_output.junit {
        std::fs::write(path, report.junit_xml()).map_err(|e| {
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

/// `--validate`, before a size starts: the source holds the size's pattern (bandwidth tests send it as is;
/// latency tests refill it per iteration), the target is cleared so that missing data cannot pass, and a
/// READ responder's target holds the pattern its peer reads.
fn prepare_validation<E: Endpoint>(opts: &Options, ep: &mut E, layout: Layout, size: u64) {
    let (n, half) = (size as usize, layout.half as usize);
    let seed = validate::seed(size, None);
    let read_responder = opts.test.verb == Verb::Read && opts.role == Role::Server;
    for q in 0..ep.qp_count() {
        let buf = ep.buffer_mut(q);
        validate::fill(&mut buf[..n], seed);
        if read_responder {
            validate::fill(&mut buf[half..half + n], seed);
        } else {
            buf[half..half + n].fill(0);
        }
    }
}

/// `--validate`, WRITE bandwidth: after the writer's last completion every target region holds the size's
/// pattern. Keeps the datapath polled for a moment, because over TCP a completed WRITE may still be in
/// the kernel's buffers.
fn check_write_target<E: Endpoint>(ep: &mut E, layout: Layout, size: u64) -> Result<(), Error> {
    let (n, half) = (size as usize, layout.half as usize);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut comps = [transport::Completion::EMPTY; 16];
    loop {
        let bad = (0..ep.qp_count()).find_map(|q| {
            validate::check(
                &ep.buffer(q)[half..half + n],
                size,
                None,
                None,
                "WRITE target",
            )
            .err()
        });
        match bad {
            None => return Ok(()),
            Some(e) if std::time::Instant::now() > deadline => return Err(e.into()),
            Some(_) => {
                ep.poll_cq(&mut comps)
                    .map_err(|source| bench::Error::Transport {
                        during: "waiting for the last WRITEs to land",
                        source,
                    })?;
            }
        }
    }
}

/// Measures one size on this side; `None` where this side only serves (the peer measures).
#[allow(clippy::too_many_arguments)]
pub(crate) fn measure<E: Endpoint>(
    opts: &Options,
    ep: &mut E,
    stop: &mut dyn FnMut() -> bool,
    layout: Layout,
    remotes: &[transport::RemoteAddr],
    recvs: &mut bw::RecvState,
    size: u64,
    warmup: u64,
) -> Result<Option<SizeResult>, Error> {
    let mut stop = stop;
    let client = opts.role == Role::Client;
    let test = opts.test;
    match test.metric {
        Metric::Bandwidth => {
            let spec = bw::BwSpec {
                verb: test.verb,
                size,
                mode: opts.mode,
                tx_depth: opts.tx_depth,
                cq_mod: opts.cq_mod_for(size),
                warmup,
                rx_depth: rx_depth(opts),
                // With TCP a completion means the kernel took the bytes, so the first socket buffer's
                // worth completes at memory speed and perftest's peak would be meaningless.
                peak: opts.transport != TransportKind::Tcp,
                cpu_util: opts.cpu_util,
                layout,
                validate: opts.validate,
            };
            let m = if opts.bidirectional {
                let duplex = (test.verb == Verb::Send).then_some(recvs);
                bw::active(ep, &spec, remotes, duplex)?
            } else if client {
                bw::active(ep, &spec, remotes, None)?
            } else if test.verb == Verb::Send {
                bw::receiver(ep, &spec, recvs, &mut stop)?
            } else {
                bw::passive(ep, &mut stop, None)?;
                return Ok(None);
            };
            let iterations = match opts.mode {
                RunMode::Iterations(n) => n,
                RunMode::Duration { .. } => m.messages,
            };
            Ok(Some(SizeResult {
                size,
                iterations,
                measured: Measured::Bandwidth(BandwidthStats::compute(
                    size,
                    m.messages,
                    m.elapsed_ns,
                    m.best_ns_per_msg,
                )),
                cpu_util: m.cpu_util,
            }))
        }
        Metric::Latency => {
            if test.verb == Verb::Read && !client {
                bw::passive(ep, &mut stop, None)?;
                return Ok(None);
            }
            let spec = lat::LatSpec {
                verb: test.verb,
                size,
                mode: opts.mode,
                warmup,
                rtt_factor: test.rtt_factor(),
                cpu_util: opts.cpu_util,
                layout,
                validate: opts.validate,
            };
            let m = lat::run(ep, &spec, opts.role, remotes[0], recvs, &mut stop)?;
            let stats = LatencyStats::from_histogram(&m.histogram, &opts.percentiles);
            Ok(Some(SizeResult {
                size,
                iterations: stats.samples,
                measured: Measured::Latency {
                    stats,
                    histogram: m.histogram,
                },
                cpu_util: m.cpu_util,
            }))
        }
    }
}

/// Swaps per-size results. The client sends first and keeps the datapath running until the server
/// answers; the server keeps it running until the client's results arrive (a passive side must keep
/// serving the peer's WRITEs and READs until then).
fn finish<E: Endpoint>(
    role: Role,
    chan: &mut Channel,
    ep: &mut E,
    mine: &Option<SizeResult>,
    recvs: &mut bw::RecvState,
    layout: Layout,
) -> Result<Option<SizeResult>, Error> {
    if role == Role::Client {
        chan.send("results", mine)?;
    }
    // SENDs still in flight need receives (TCP would otherwise hold them, and their sender with them).
    bw::passive(
        ep,
        &mut || chan.peer_has_data().unwrap_or(true),
        Some((recvs, layout)),
    )?;
    let theirs: Option<SizeResult> = chan.recv("results")?;
    if role == Role::Server {
        chan.send("results", mine)?;
    }
    Ok(theirs)
}

/// Bidirectional: the sum of what each side sent, as perftest prints it.
pub(crate) fn combine(mine: SizeResult, theirs: &SizeResult, duration: bool) -> SizeResult {
    match (&mine.measured, &theirs.measured) {
        (Measured::Bandwidth(a), Measured::Bandwidth(b)) => SizeResult {
            // Duration mode counts messages: the two directions together, like the rates.
            iterations: if duration {
                a.messages + b.messages
            } else {
                mine.iterations
            },
            measured: Measured::Bandwidth(a.combined(b)),
            ..mine
        },
        _ => mine,
    }
}

fn address_lines(opts: &Options, info: &ConnInfo) -> Vec<AddressLine> {
    let read = opts.test.verb == Verb::Read;
    let one_sided = opts.test.verb != Verb::Send;
    info.qps
        .iter()
        .map(|q| AddressLine {
            lid: 0,
            qpn: q.qpn,
            psn: q.psn,
            out_reads: read.then_some(q.max_rd_atomic),
            rkey: one_sided.then_some(q.rkey),
            vaddr: one_sided.then_some(q.vaddr),
            gid: (opts.transport != TransportKind::Tcp).then_some(info.gid.octets()),
        })
        .collect()
}

pub(crate) fn run_info(
    opts: &Options,
    fallback_device: String,
    pinned: &bench::affinity::Pinned,
    local: &ConnInfo,
    peer: &ConnInfo,
) -> RunInfo {
    let mut notes = vec![
        format!("transport {}: {}", opts.transport, opts.transport_reason),
        format!("datapath on {}", pinned.reason),
    ];
    if opts.validate {
        notes.push(
            "--validate: every message's payload is checked against the sender's pattern; the pattern work is inside the measurement, so figures are lower than without it".into(),
        );
    }
    if opts.transport == TransportKind::Soft && opts.inline_size.is_some() {
        notes.push(
            "-I accepted and ignored: the soft transport copies every payload into its packets, so inline sends would change nothing".into(),
        );
    }
    if opts.transport == TransportKind::Tcp {
        notes.push(format!(
            "TCP baseline: one connection per queue pair to {}, TCP_NODELAY, non-blocking sockets busy-polled",
            local.addr.as_deref().or(peer.addr.as_deref()).unwrap_or("?")
        ));
        if opts.test.metric == Metric::Bandwidth {
            notes.push(
                "BW peak not measured over TCP: a completion only means the kernel took the bytes"
                    .into(),
            );
        }
    }
    RunInfo {
        test: opts.test,
        role: opts.role,
        transport: opts.transport,
        roce: opts.roce,
        device: opts.device.clone().unwrap_or(fallback_device),
        peer: opts.host.clone(),
        qps: opts.qps,
        tx_depth: opts.tx_depth,
        rx_depth: (opts.test.verb == Verb::Send).then(|| rx_depth(opts)),
        cq_mod: opts.cq_mod_for(opts.max_size()),
        mtu: local.mtu.min(peer.mtu),
        link_type: match opts.transport {
            TransportKind::Tcp => "TCP".into(),
            _ => "Ethernet".into(),
        },
        gid_index: local.gid_index,
        inline_size: match opts.transport {
            TransportKind::Verbs => opts.inline_size.unwrap_or(0),
            _ => 0,
        },
        out_reads: (opts.test.verb == Verb::Read)
            .then(|| local.qps.first().map_or(1, |q| q.max_rd_atomic)),
        cpu: Some(pinned.core),
        local: address_lines(opts, local),
        remote: address_lines(opts, peer),
        report_gbits: opts.report_gbits,
        percentiles: opts.percentiles.clone(),
        iterations: opts.iterations(),
        duration_s: match opts.mode {
            RunMode::Duration { secs, .. } => Some(secs),
            RunMode::Iterations(_) => None,
        },
        margin_s: match opts.mode {
            RunMode::Duration { margin, .. } => Some(margin),
            RunMode::Iterations(_) => None,
        },
        warmup: opts.warmup,
        bidirectional: opts.bidirectional,
        started_at: results::now_rfc3339(),
        notes,
        version: env!("CARGO_PKG_VERSION").to_string(),
        counters: None,
    }
}

pub(crate) fn write_files(
    opts: &Options,
    info: &RunInfo,
    results: &[SizeResult],
) -> Result<(), Error> {
    if let Some(p) = &opts.csv {
        results::append_csv(p, info, results)?;
    }
    if let Some(p) = &opts.json {
        results::write_json(p, info, results)?;
    }
    if let Some(dir) = &opts.results {
        results::create_results_dir(dir)?;
        let (csv, json) = results::results_paths(dir, info);
        results::append_csv(&csv, info, results)?;
        results::write_json(&json, info, results)?;
        if opts.output.is_none() {
            println!(
                " Results written to {} and {}",
                csv.display(),
                json.display()
            );
        }
    }
    Ok(())
}
