//! What a congestion study runs, decided once from its flags: the disciplines, the bulk flows' test
//! and transport legs, the victim's, and the switch's settings. Pure; `super::run` carries it out.

use crate::compare::leg::{LegSpec, Sizes, TestSpec, TransportChoice, Tuning};
use crate::params::marks::MarkAt;
use crate::params::{CcParams, Metric, RoceVersion, TestKind, Verb};
use crate::results::congestion::Discipline;

/// The 802.1Q priority the flows carry (`-S`) and PFC keeps lossless: RoCE's customary 3.
pub(crate) const PRIO: u8 = 3;
/// A flow is converged within ±10 % of its fair share (DCQCN's paper and issue 29's tests).
pub(crate) const CONVERGE_BAND: f64 = 0.1;
/// The victim starts this long after the bulk client, once the flows are running.
pub(crate) const VICTIM_DELAY_MS: u64 = 500;
/// The victim's SCHED_FIFO priority: under the switch's (10, `roce_switch --fifo`), which must
/// forward the victim's packets, above every normal process.
pub(crate) const VICTIM_FIFO: u8 = 5;
/// The softirq threads' SCHED_FIFO priority during a study (`--softirq-fifo`): above every normal
/// process, so that frames never wait for a busy-polling endpoint's time slice to end, and below the
/// victim's and the switch's.
pub(crate) const SOFTIRQ_FIFO: u8 = 1;

/// `roce_compare --congestion`'s flags (flattened into roce_compare's command line).
#[derive(Debug, Clone, PartialEq, clap::Args)]
#[command(next_help_heading = "Congestion study (--congestion; as root)")]
pub(crate) struct CongestionArgs {
    /// Run N flows through one rate-limited switch port under each discipline, with a latency
    /// victim through the same port; write congestion.json, .csv and plots (docs/congestion.md).
    #[arg(long)]
    pub(crate) congestion: bool,
    /// Flows into the bottleneck: queue pairs of one roce_write_bw (TCP: connections).
    #[arg(long, value_name = "N", default_value_t = 4, requires = "congestion",
          value_parser = clap::value_parser!(u32).range(1..=64))]
    pub(crate) flows: u32,
    /// The bottleneck's rate, Gb/s of wire bits; the default is what the soft transport over single
    /// frames and the switch sustain on a two-core machine (docs/congestion.md).
    #[arg(long, value_name = "GBPS", default_value_t = 1.0, requires = "congestion",
          value_parser = parse_gbps)]
    pub(crate) bottleneck: f64,
    /// The switch's egress buffer, bytes (K, M: ×1024) [default: roce_switch's].
    #[arg(long, value_name = "BYTES", requires = "congestion", value_parser = crate::params::parse_size)]
    pub(crate) buffer: Option<u64>,
    /// ECN: no CE mark below this queue, bytes [default: roce_switch's, scaled to the rate].
    #[arg(long, value_name = "BYTES", requires = "congestion", value_parser = crate::params::parse_size)]
    pub(crate) kmin: Option<u64>,
    /// ECN: the marking probability reaches --pmax at this queue, bytes [default: roce_switch's].
    #[arg(long, value_name = "BYTES", requires = "congestion", value_parser = crate::params::parse_size)]
    pub(crate) kmax: Option<u64>,
    /// ECN: the marking probability at Kmax, 0..1 [default: roce_switch's].
    #[arg(long, value_name = "P", requires = "congestion", value_parser = parse_probability)]
    pub(crate) pmax: Option<f64>,
    /// ECN: when the switch decides a frame's mark: `enqueue` (by the queue it finds; the mark
    /// waits behind that queue) or `dequeue` (by the queue it leaves behind, reported at once)
    /// [default: enqueue].
    #[arg(
        long = "mark-at",
        value_name = "WHEN",
        value_enum,
        requires = "congestion"
    )]
    pub(crate) mark_at: Option<MarkAt>,
    /// PFC: pause the senders when the queue passes this, bytes [default: roce_switch's].
    #[arg(long, value_name = "BYTES", requires = "congestion", value_parser = crate::params::parse_size)]
    pub(crate) xoff: Option<u64>,
    /// PFC: resume them when it falls to this, bytes [default: roce_switch's].
    #[arg(long, value_name = "BYTES", requires = "congestion", value_parser = crate::params::parse_size)]
    pub(crate) xon: Option<u64>,
    /// Disciplines to run, comma-separated, in this order [default: all six: lossy-gbn, lossy-sr,
    /// ecn-dcqcn, pfc, pfc-dcqcn, tcp-cubic].
    #[arg(long, value_name = "LIST", value_delimiter = ',', requires = "congestion",
          value_parser = Discipline::parse)]
    pub(crate) disciplines: Vec<Discipline>,
    /// Run no victim (the latency probe through the bottleneck, and its idle reference).
    #[arg(long, requires = "congestion")]
    pub(crate) no_victim: bool,
    /// Core of both of the victim's sides, or `split`: its client on the senders' core and its server
    /// on the receiver's [default: split]. The victim sleeps on events (-e) under SCHED_FIFO (as
    /// root), so a packet for it preempts the busy-polling flow on its core at once.
    #[arg(long, value_name = "N|split", requires = "congestion", value_parser = parse_victim_cpu)]
    pub(crate) victim_cpu: Option<VictimCores>,
    /// Core the switch runs on [default: the scheduler's choice, which moves it between runs].
    /// Beside the senders it slows them (a lone flow then fills about 0.65 of a 1 Gb/s
    /// bottleneck), beside the receiver it delays the CNPs and the victim (docs/congestion.md)
    #[arg(long, value_name = "N", requires = "congestion")]
    pub(crate) switch_cpu: Option<usize>,
    /// The switch's --batch-us: while frames are queued it sleeps at least N µs between wake-ups
    /// and queues what arrived meanwhile at the kernel's arrival stamps. It takes less of a core
    /// where a timed sleep is costly (a nested virtual machine), and each frame leaves up to N µs
    /// late [default: 0, a wake-up per departure and per frame] (docs/congestion.md)
    #[arg(long, value_name = "N", requires = "congestion")]
    pub(crate) switch_batch_us: Option<u64>,
    /// Run the kernel's softirq threads (ksoftirqd/N, which carry the frames between the
    /// namespaces) under SCHED_FIFO at this priority for the study, and put them back afterwards;
    /// below the victim's and the switch's. Under the normal scheduler the busy-polling endpoints
    /// held frames 1-1.5 ms in a core's backlog, past PFC's headroom [0: leave them alone]
    /// (docs/congestion.md)
    #[arg(long, value_name = "N", default_value_t = SOFTIRQ_FIFO, requires = "congestion",
          value_parser = clap::value_parser!(u8).range(0..i64::from(VICTIM_FIFO)))]
    pub(crate) softirq_fifo: u8,
    /// The victim's message size, bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 64, requires = "congestion",
          value_parser = crate::params::parse_size)]
    pub(crate) victim_size: u64,
    /// DCQCN's parameters in ecn-dcqcn and pfc-dcqcn, NAME=VALUE as roce_write_bw's --cc-param
    /// takes them (repeatable); each replaces the study's default for the link, which is the
    /// paper's DCQCN with its timers at this link's round trip: F=5, g=1/256, R_T <- R_C on every
    /// cut, K = T = the CNP and cut intervals = 300 µs, R_AI 5 and R_HAI 25 Mb/s, a 10 MB byte
    /// counter, and the senders' line rate (rp_max_rate) = --bottleneck (docs/congestion.md).
    #[arg(long = "cc-param", value_name = "NAME=VALUE", requires = "congestion")]
    pub(crate) cc_params: Vec<String>,
    /// Interval of the per-flow goodput series (the clients' --qp-series), ms.
    #[arg(long, value_name = "MS", default_value_t = 10, requires = "congestion",
          value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub(crate) series_ms: u64,
    /// Window over which time to converge takes each flow's rate, ms.
    #[arg(long, value_name = "MS", default_value_t = 100, requires = "congestion",
          value_parser = clap::value_parser!(u64).range(1..=600_000))]
    pub(crate) converge_window_ms: u64,
}

/// `--bottleneck`: a rate above 0 and at most 400 Gb/s.
fn parse_gbps(s: &str) -> Result<f64, String> {
    s.trim()
        .trim_end_matches("Gb/s")
        .trim_end_matches('G')
        .parse::<f64>()
        .ok()
        .filter(|g| *g > 0.0 && *g <= 400.0)
        .ok_or_else(|| format!("{s:?} is not a rate in Gb/s; give one such as 1 or 2.5"))
}

/// Where the victim's two sides run (`--victim-cpu`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum VictimCores {
    /// Both on this core.
    Core(usize),
    /// The client on the bulk client's core, the server on the bulk server's.
    Split,
}

/// `--victim-cpu`: a core number or `split`.
fn parse_victim_cpu(s: &str) -> Result<VictimCores, String> {
    match s.trim() {
        "split" => Ok(VictimCores::Split),
        n => n.parse().map(VictimCores::Core).map_err(|_| {
            format!("{s:?} is neither a core number nor split; give one such as 1, or split")
        }),
    }
}

/// `--pmax`: a probability in 0..=1.
fn parse_probability(s: &str) -> Result<f64, String> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|p| (0.0..=1.0).contains(p))
        .ok_or_else(|| format!("{s:?} is not a probability; give one such as 0.2"))
}

/// The switch's settings the user gave; None: roce_switch's default (its stats say what it took).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct Thresholds {
    /// `--buffer`.
    pub(crate) buffer: Option<u64>,
    /// `--kmin`, `--kmax`.
    pub(crate) kmin: Option<u64>,
    /// Likewise.
    pub(crate) kmax: Option<u64>,
    /// `--pmax`.
    pub(crate) pmax: Option<f64>,
    /// `--xoff`, `--xon`.
    pub(crate) xoff: Option<u64>,
    /// Likewise.
    pub(crate) xon: Option<u64>,
    /// `--mark-at`.
    pub(crate) mark_at: Option<MarkAt>,
}

/// A congestion study, decided.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Study {
    /// In the order run.
    pub(crate) disciplines: Vec<Discipline>,
    /// Flows.
    pub(crate) flows: u32,
    /// Gb/s.
    pub(crate) bottleneck_gbps: f64,
    /// The switch's thresholds as given.
    pub(crate) thresholds: Thresholds,
    /// The bulk flows' message size.
    pub(crate) size: u64,
    /// Seconds per discipline.
    pub(crate) duration_s: u64,
    /// The victim's message size; None without a victim.
    pub(crate) victim: Option<u64>,
    /// `--victim-cpu`; None: split.
    pub(crate) victim_cores: Option<VictimCores>,
    /// `--switch-cpu`; None: the scheduler's choice.
    pub(crate) switch_cpu: Option<usize>,
    /// `--switch-batch-us`; None: the switch's default.
    pub(crate) switch_batch_us: Option<u64>,
    /// `--softirq-fifo`: the softirq threads' SCHED_FIFO priority during the study; 0: untouched.
    pub(crate) softirq_fifo: u8,
    /// `--qp-series`, ms.
    pub(crate) series_ms: u64,
    /// Convergence window, ms.
    pub(crate) converge_window_ms: u64,
    /// DCQCN's parameters of the DCQCN disciplines: the link's defaults with `--cc-param` applied.
    pub(crate) cc: CcParams,
}

/// DCQCN as the study runs it on a link of `gbps`: [`CcParams::slow_link`] with the senders' line
/// rate at the bottleneck's, as in the simulated dumbbell (a NIC as fast as the switch port), so a
/// queue pair never paces above it. Timers shorter than this link's round trip (~300 µs: the idle
/// victim's ~150 µs through the switch, a 4 KB frame's 33 µs at 1 Gb/s, a queue at Kmax) cut and
/// raise again before a cut is seen: in virtual time at this link, ConnectX's 1-4 µs timers held
/// four flows to 57 % of the port with drops, the paper's 55 µs to 93 %, 300 µs to 99 %.
pub(crate) fn link_cc(gbps: f64) -> CcParams {
    CcParams::slow_link((gbps * 1000.0).round().max(1.0) as u32)
}

/// The bulk flows' message size when `-s` is not given: 64 KiB, write_bw's own.
const DEFAULT_SIZE: u64 = 65536;
/// Seconds per discipline when `-D` is not given.
pub(crate) const DEFAULT_DURATION_S: u64 = 10;

impl Study {
    /// The study `args` asks for, with roce_compare's `-s` and `-D`; Err: a usage error to print.
    pub(crate) fn new(
        args: &CongestionArgs,
        size: Option<u64>,
        duration: Option<u64>,
    ) -> Result<Study, String> {
        let mut disciplines: Vec<Discipline> = Vec::new();
        for d in &args.disciplines {
            if disciplines.contains(d) {
                return Err(format!("--disciplines names {d} twice; name each once"));
            }
            disciplines.push(*d);
        }
        if disciplines.is_empty() {
            disciplines = Discipline::ALL.to_vec();
        }
        if args.kmin.is_some() != args.kmax.is_some() {
            return Err(
                "give --kmin and --kmax together (or neither: the switch's defaults)".into(),
            );
        }
        if args.xoff.is_some() != args.xon.is_some() {
            return Err(
                "give --xoff and --xon together (or neither: the switch's defaults)".into(),
            );
        }
        if let (Some(lo), Some(hi)) = (args.kmin, args.kmax)
            && lo > hi
        {
            return Err(format!(
                "--kmin {lo} is above --kmax {hi}; Kmin must be at most Kmax"
            ));
        }
        if let (Some(off), Some(on)) = (args.xoff, args.xon)
            && on >= off
        {
            return Err(format!("--xon {on} must be below --xoff {off}"));
        }
        let mut cc = link_cc(args.bottleneck);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        if let Some(c) = args.switch_cpu.filter(|&c| c >= cores) {
            return Err(format!(
                "--switch-cpu {c}: this machine has {cores} cores, numbered 0 to {}",
                cores - 1
            ));
        }
        for spec in &args.cc_params {
            cc.set(spec).map_err(|e| e.to_string())?;
        }
        let duration_s = duration.unwrap_or(DEFAULT_DURATION_S);
        Ok(Study {
            disciplines,
            flows: args.flows,
            bottleneck_gbps: args.bottleneck,
            thresholds: Thresholds {
                buffer: args.buffer,
                kmin: args.kmin,
                kmax: args.kmax,
                pmax: args.pmax,
                xoff: args.xoff,
                xon: args.xon,
                mark_at: args.mark_at,
            },
            size: size.unwrap_or(DEFAULT_SIZE),
            duration_s,
            victim: (!args.no_victim).then_some(args.victim_size),
            victim_cores: args.victim_cpu,
            switch_cpu: args.switch_cpu,
            switch_batch_us: args.switch_batch_us,
            softirq_fifo: args.softirq_fifo,
            series_ms: args.series_ms,
            converge_window_ms: args.converge_window_ms,
            cc,
        })
    }

    /// The bulk flows: one roce_write_bw of N queue pairs for `-D` seconds.
    pub(crate) fn bulk_test(&self) -> TestSpec {
        TestSpec {
            test: TestKind::new(Verb::Write, Metric::Bandwidth),
            sizes: Sizes::One(self.size),
            iters: None,
            duration: Some(self.duration_s),
            tuning: Tuning {
                qps: Some(self.flows),
                ..Tuning::default()
            },
        }
    }

    /// The bulk flows' transport under `d`: soft RoCE v2 over AF_PACKET, one frame per packet (so
    /// the switch queues packets, not super-frames), priority 3, `--cc` and `--recovery` as `d`
    /// says; TCP for tcp-cubic, cubic set on each connection (`--tcp-congestion`: a namespace's
    /// default cannot be set to an algorithm outside tcp_allowed_congestion_control, and it is
    /// bbr on some hosts). Every run validated, every run with its per-flow series.
    pub(crate) fn bulk_leg(&self, d: Discipline, device: &str) -> LegSpec {
        let mut leg = match d.transport() {
            crate::params::TransportKind::Tcp => {
                let mut l = LegSpec::tcp();
                l.extra = vec!["--tcp-congestion".into(), d.cc().into()];
                l
            }
            _ => {
                let mut l = LegSpec::roce(TransportChoice::Soft, RoceVersion::V2, device);
                l.extra = soft_flags(d.cc());
                if d.cc() == "dcqcn" {
                    for p in self.cc.changed() {
                        l.extra.extend(["--cc-param".into(), p]);
                    }
                }
                if let Some(r) = d.recovery() {
                    l.extra.extend(["--recovery".into(), r.name().into()]);
                }
                l
            }
        };
        leg.extra.extend([
            "--validate".into(),
            "--qp-series".into(),
            self.series_ms.to_string(),
        ]);
        leg
    }

    /// The victim's test: write_lat of its size, starting [`VICTIM_DELAY_MS`] into the bulk run
    /// and ending before it (`-D` one second shorter, at least one).
    pub(crate) fn victim_test(&self) -> Option<TestSpec> {
        Some(TestSpec {
            test: TestKind::new(Verb::Write, Metric::Latency),
            sizes: Sizes::One(self.victim?),
            iters: None,
            duration: Some(self.duration_s.saturating_sub(1).max(1)),
            tuning: Tuning::default(),
        })
    }

    /// The victim's transport: soft RoCE v2 on the data's priority (so PFC pauses it too), no rate
    /// control (one message in flight needs none), event-driven (`-e`: it sleeps until a packet
    /// comes) and, when `fifo` says so, under SCHED_FIFO at that priority: a packet for it then
    /// preempts the busy-polling bulk processes on its core at once, as a NIC serves its
    /// latency-sensitive queue, instead of waiting for their time slice to end.
    pub(crate) fn victim_leg(&self, device: &str, fifo: Option<u8>) -> LegSpec {
        let mut l = LegSpec::roce(TransportChoice::Soft, RoceVersion::V2, device);
        l.extra = soft_flags("none");
        l.extra.push("-e".into());
        l.fifo = fifo;
        l
    }
}

/// The soft flags every RoCE run of a study takes.
fn soft_flags(cc: &str) -> Vec<String> {
    ["--io", "packet", "--no-gso", "-S", "3", "--cc", cc]
        .map(String::from)
        .to_vec()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct T {
        #[command(flatten)]
        a: CongestionArgs,
    }

    /// The study's flags parsed as roce_compare parses them (`super::run`'s tests use it too).
    pub(crate) fn args(v: &[&str]) -> Result<CongestionArgs, clap::Error> {
        T::try_parse_from(std::iter::once("t").chain(v.iter().copied())).map(|t| t.a)
    }

    #[test]
    fn the_defaults_run_every_discipline_with_four_flows_and_a_victim() {
        let a = args(&["--congestion"]).unwrap();
        let s = Study::new(&a, None, None).unwrap();
        assert_eq!(s.disciplines, Discipline::ALL);
        assert_eq!((s.flows, s.bottleneck_gbps, s.size), (4, 1.0, 65536));
        assert_eq!((s.duration_s, s.victim), (DEFAULT_DURATION_S, Some(64)));
        assert_eq!(s.thresholds, Thresholds::default());
    }

    #[test]
    fn mark_at_reaches_the_switchs_command_line() {
        let study = |v: &[&str]| Study::new(&args(v).unwrap(), None, None).unwrap();
        let dequeue = study(&["--congestion", "--mark-at", "dequeue"]);
        assert_eq!(dequeue.thresholds.mark_at, Some(MarkAt::Dequeue));
        let enqueue = study(&["--congestion", "--mark-at", "enqueue"]);
        assert_eq!(enqueue.thresholds.mark_at, Some(MarkAt::Enqueue));
        assert_eq!(study(&["--congestion"]).thresholds.mark_at, None);
        let e = args(&["--congestion", "--mark-at", "later"]).unwrap_err();
        assert!(
            e.to_string()
                .contains("[possible values: enqueue, dequeue]"),
            "{e}"
        );
        let mut spec = crate::compare::congestion::topology::SwitchSpec::new("ecn", 1.0);
        let line = |spec: &crate::compare::congestion::topology::SwitchSpec| {
            spec.args(std::path::Path::new("s.json")).join(" ")
        };
        assert!(!line(&spec).contains("--mark-at"), "the switch's default");
        spec.mark_at = Some(MarkAt::Dequeue);
        assert!(line(&spec).contains("--mark-at dequeue"), "{}", line(&spec));
    }

    #[test]
    fn switch_batch_us_reaches_the_switchs_command_line() {
        let s = Study::new(
            &args(&["--congestion", "--switch-batch-us", "50"]).unwrap(),
            None,
            None,
        )
        .unwrap();
        assert_eq!(s.switch_batch_us, Some(50));
        let mut spec = crate::compare::congestion::topology::SwitchSpec::new("ecn", 1.0);
        spec.batch_us = s.switch_batch_us;
        let line = spec.args(std::path::Path::new("s.json")).join(" ");
        assert!(line.contains("--batch-us 50"), "{line}");
        let default = Study::new(&args(&["--congestion"]).unwrap(), None, None).unwrap();
        assert_eq!(default.switch_batch_us, None);
        spec.batch_us = default.switch_batch_us;
        let line = spec.args(std::path::Path::new("s.json")).join(" ");
        assert!(!line.contains("--batch-us"), "the switch's default: {line}");
        assert!(
            args(&["--switch-batch-us", "50"]).is_err(),
            "only with --congestion"
        );
    }

    #[test]
    fn softirq_fifo_defaults_to_1_and_stays_below_the_victim() {
        let s = |a: &[&str]| Study::new(&args(a).unwrap(), None, None).unwrap();
        assert_eq!(s(&["--congestion"]).softirq_fifo, SOFTIRQ_FIFO);
        assert_eq!(s(&["--congestion", "--softirq-fifo", "0"]).softirq_fifo, 0);
        assert_eq!(s(&["--congestion", "--softirq-fifo", "4"]).softirq_fifo, 4);
        let e = args(&["--congestion", "--softirq-fifo", "5"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--softirq-fifo") && e.contains("0..5"), "{e}");
        assert!(
            args(&["--softirq-fifo", "1"]).is_err(),
            "needs --congestion"
        );
    }

    #[test]
    fn switch_cpu_pins_the_switch_and_names_a_core_this_machine_has() {
        let a = args(&["--congestion", "--switch-cpu", "0"]).unwrap();
        let s = Study::new(&a, None, None).unwrap();
        assert_eq!(s.switch_cpu, Some(0));
        assert_eq!(
            Study::new(&args(&["--congestion"]).unwrap(), None, None)
                .unwrap()
                .switch_cpu,
            None
        );
        let e = Study::new(
            &args(&["--congestion", "--switch-cpu", "4096"]).unwrap(),
            None,
            None,
        )
        .unwrap_err();
        assert!(e.starts_with("--switch-cpu 4096: this machine has"), "{e}");
    }

    #[test]
    fn each_discipline_runs_what_it_names() {
        let a = args(&["--congestion", "--flows", "2", "--series-ms", "20"]).unwrap();
        let s = Study::new(&a, Some(4096), Some(3)).unwrap();
        let t = s.bulk_test();
        assert_eq!(
            (t.test.name(), t.sizes, t.duration, t.tuning.qps),
            ("write_bw", Sizes::One(4096), Some(3), Some(2))
        );
        let ecn = s.bulk_leg(Discipline::EcnDcqcn, "veth0");
        assert_eq!(
            (ecn.transport, ecn.roce, ecn.device.as_deref()),
            (TransportChoice::Soft, Some(RoceVersion::V2), Some("veth0"))
        );
        assert_eq!(
            ecn.extra.join(" "),
            "--io packet --no-gso -S 3 --cc dcqcn --cc-param rp_clamp_tgt_rate=1 \
             --cc-param rp_byte_reset=10000000 \
             --cc-param rp_threshold=5 --cc-param rp_max_rate=1000 --cc-param rp_hai_rate=25 \
             --cc-param rp_dce_tcp_g=1020 --cc-param rp_dce_tcp_rtt=300 \
             --cc-param rp_rate_reduce_monitor_period=300 \
             --cc-param np_min_time_between_cnps=300 --validate --qp-series 20"
        );
        let sr = s.bulk_leg(Discipline::LossySr, "veth0").extra.join(" ");
        assert_eq!(
            sr,
            "--io packet --no-gso -S 3 --cc none --recovery sr --validate --qp-series 20"
        );
        let tcp = s.bulk_leg(Discipline::TcpCubic, "veth0");
        assert_eq!(tcp.transport, TransportChoice::Tcp);
        assert_eq!(
            tcp.extra.join(" "),
            "--tcp-congestion cubic --validate --qp-series 20"
        );
        let v = s.victim_test().unwrap();
        assert_eq!(
            (v.test.name(), v.sizes, v.duration),
            ("write_lat", Sizes::One(64), Some(2))
        );
        let victim = s.victim_leg("veth0", Some(VICTIM_FIFO));
        assert_eq!(
            (victim.extra.join(" "), victim.fifo),
            ("--io packet --no-gso -S 3 --cc none -e".into(), Some(5))
        );
        assert_eq!(s.victim_leg("veth0", None).fifo, None);
    }

    #[test]
    fn dcqcn_runs_at_the_links_defaults_and_a_cc_param_replaces_one() {
        let a = args(&[
            "--congestion",
            "--bottleneck",
            "2.5",
            "--cc-param",
            "rp_ai_rate=10",
            "--cc-param",
            "rp_time_reset=55",
        ])
        .unwrap();
        let s = Study::new(&a, None, None).unwrap();
        let want = CcParams {
            rp_ai_rate: 10,
            rp_time_reset: 55,
            ..link_cc(2.5)
        };
        assert_eq!(s.cc, want);
        assert_eq!(
            s.cc.rp_max_rate, 2500,
            "the senders' line is the bottleneck's"
        );
        let extra = s.bulk_leg(Discipline::PfcDcqcn, "veth0").extra.join(" ");
        assert!(extra.contains("--cc-param rp_ai_rate=10"), "{extra}");
        assert!(extra.contains("--cc-param rp_time_reset=55"), "{extra}");
        assert!(extra.contains("--cc-param rp_dce_tcp_rtt=300"), "{extra}");
        for d in [Discipline::Pfc, Discipline::LossyGbn, Discipline::TcpCubic] {
            let extra = s.bulk_leg(d, "veth0").extra.join(" ");
            assert!(!extra.contains("--cc-param"), "{d}: {extra}");
        }
        let a = args(&["--congestion", "--cc-param", "rp_ai=5"]).unwrap();
        let e = Study::new(&a, None, None).unwrap_err();
        assert!(e.contains("no such DCQCN parameter"), "{e}");
    }

    #[test]
    fn usage_errors_say_what_to_give() {
        let a = args(&["--congestion", "--disciplines", "pfc,pfc"]).unwrap();
        assert_eq!(
            Study::new(&a, None, None).unwrap_err(),
            "--disciplines names pfc twice; name each once"
        );
        let a = args(&["--congestion", "--kmin", "200k", "--kmax", "100k"]).unwrap();
        assert!(
            Study::new(&a, None, None)
                .unwrap_err()
                .contains("Kmin must be at most Kmax")
        );
        let a = args(&["--congestion", "--kmin", "10k"]).unwrap();
        assert!(
            Study::new(&a, None, None)
                .unwrap_err()
                .contains("--kmin and --kmax together")
        );
        let a = args(&["--congestion", "--xoff", "100k", "--xon", "200k"]).unwrap();
        assert!(
            Study::new(&a, None, None)
                .unwrap_err()
                .contains("below --xoff")
        );
        let e = args(&["--congestion", "--disciplines", "red"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("\"red\" is not a discipline; use lossy-gbn"),
            "{e}"
        );
        let e = args(&["--flows", "3"]).unwrap_err().to_string();
        assert!(e.contains("--congestion"), "{e}");
        let e = args(&["--congestion", "--bottleneck", "0"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a rate in Gb/s"), "{e}");
        let e = args(&["--congestion", "--victim-cpu", "any"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("neither a core number nor split"), "{e}");
        let a = args(&["--congestion", "--victim-cpu", "split"]).unwrap();
        assert_eq!(
            Study::new(&a, None, None).unwrap().victim_cores,
            Some(VictimCores::Split)
        );
        let a = args(&["--congestion", "--victim-cpu", "0"]).unwrap();
        assert_eq!(
            Study::new(&a, None, None).unwrap().victim_cores,
            Some(VictimCores::Core(0))
        );
        let a = args(&["--congestion", "--no-victim"]).unwrap();
        assert_eq!(Study::new(&a, None, None).unwrap().victim_test(), None);
    }
}
