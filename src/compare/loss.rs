//! `roce_compare --loss-sweep 0,0.01%,0.1%,1%,5%`: every transport across the same lossy link.
//!
//! RoCE v2 with go-back-N, RoCE v2 with selective repeat, RoCE v1 (go-back-N) and TCP each run every
//! test at every loss rate, with `--validate`, across one veth pair between two network namespaces
//! (MTU 4200, so a TCP segment and a RoCE packet carry about the same 4 KiB, and no GSO/TSO on the
//! link, so every loss decision is about one packet). The loss is one Bernoulli process per packet in
//! each direction, made by `iptables -m statistic` on arrival in both namespaces for TCP and RoCE v2
//! (UDP 4791), and by roceperf's own impairer where iptables cannot see the packets (RoCE v1's
//! Ethertype 0x8915) or when asked (`--loss-via impairer`). Every run says which one it met.
//!
//! What each run cost comes from its own files (the soft transport's counters: retransmitted bytes,
//! NAKs, timeouts) and, for TCP, from the namespaces' kernel counters. [`super::loss_report`] renders
//! the sweep.

use super::error::{Error, Result};
use super::floor::FloorJob;
use super::leg::{LegSpec, TestSpec, TransportChoice};
use super::local::{self, NetnsPair, VETH_DEV, VETH_SERVER_IP};
use super::run::{ClientSide, Leg, LocalServer, Plan, ServerSide, run_plan};
use crate::params::{Recovery, RoceVersion, TransportKind};
use crate::report::progress::SweepProgress;
use crate::results::loss::rate_text;
use crate::results::read::{self, Document};
use crate::results::{CompareRun, CompareSet, LossPoint, Skipped};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Link MTU of the sweep's veth pair: room for a 4096-byte RoCE MTU in every encapsulation, and a
/// TCP MSS (4148) close to it.
const SWEEP_MTU: &str = "4200";

/// How the sweep makes its loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LossVia {
    /// iptables `statistic` on arrival for TCP and RoCE v2; roceperf's impairer for RoCE v1.
    Kernel,
    /// roceperf's impairer for every RoCE run (TCP still through iptables).
    Impairer,
}

/// What a loss sweep runs.
#[derive(Debug, Clone)]
pub(crate) struct Sweep {
    /// The tests, each at every rate over every transport.
    pub tests: Vec<TestSpec>,
    /// Loss rates, 0.0..1.0, in the order given.
    pub rates: Vec<f64>,
    /// How the loss is made.
    pub(crate) via: LossVia,
    /// Gilbert–Elliott bursts of this mean length (impairer only; TCP is then not run).
    pub burst: Option<f64>,
    /// Where the binaries are.
    pub(crate) bin_dir: PathBuf,
    /// Where the runs' logs and files go.
    pub work: PathBuf,
    /// Per-run timeout.
    pub timeout: Option<Duration>,
    /// The cores of the two sides, and what chose them.
    pub(crate) cores: local::Cores,
}

/// `1%`, `0.01%`, `0.05` or `0` as a probability.
pub(crate) fn parse_rate(s: &str) -> std::result::Result<f64, String> {
    let t = s.trim();
    let p = match t.strip_suffix('%') {
        Some(pct) => pct.trim().parse::<f64>().map(|v| v / 100.0),
        None => t.parse::<f64>(),
    }
    .map_err(|_| format!("'{s}' is not a loss rate such as 1% or 0.01"))?;
    if (0.0..1.0).contains(&p) {
        Ok(p)
    } else {
        Err(format!("'{s}' is not a loss rate below 100%"))
    }
}

/// One curve of the sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Series {
    V2Gbn,
    /// Go-back-N timed as rxe times it (`--recovery gbn-rxe`): what a NIC pair would do.
    V2GbnRxe,
    V2Sr,
    V1Gbn,
    Tcp,
}

impl Series {
    const ALL: [Series; 5] = [
        Series::V2Gbn,
        Series::V2GbnRxe,
        Series::V2Sr,
        Series::V1Gbn,
        Series::Tcp,
    ];

    fn name(self) -> &'static str {
        match self {
            Series::V2Gbn => "RoCE v2 gbn",
            Series::V2GbnRxe => "RoCE v2 gbn-rxe",
            Series::V2Sr => "RoCE v2 sr",
            Series::V1Gbn => "RoCE v1 gbn",
            Series::Tcp => "TCP",
        }
    }

    fn recovery(self) -> Option<Recovery> {
        match self {
            Series::V2Sr => Some(Recovery::Sr),
            Series::V2GbnRxe => Some(Recovery::GbnRxe),
            Series::Tcp => None,
            _ => Some(Recovery::Gbn),
        }
    }

    /// How `via` makes this series' loss.
    fn impaired_by_us(self, via: LossVia, burst: bool) -> bool {
        match self {
            Series::Tcp => false,
            Series::V1Gbn => true,
            _ => via == LossVia::Impairer || burst,
        }
    }

    fn via_text(self, via: LossVia, burst: bool) -> &'static str {
        if self.impaired_by_us(via, burst) {
            if self == Series::V1Gbn && via == LossVia::Kernel && !burst {
                "roceperf impairer, both sides' transmit (iptables cannot see Ethertype 0x8915)"
            } else {
                "roceperf impairer, both sides' transmit"
            }
        } else {
            "iptables statistic on arrival, both namespaces"
        }
    }

    /// The leg of this series at `rate`.
    fn leg(self, rate: f64, sweep: &Sweep, pair: &NetnsPair, seed: u64) -> Leg {
        let mut spec = match self {
            Series::Tcp => LegSpec::tcp(),
            Series::V1Gbn => LegSpec::roce(TransportChoice::Soft, RoceVersion::V1, VETH_DEV),
            _ => LegSpec::roce(TransportChoice::Soft, RoceVersion::V2, VETH_DEV),
        };
        spec.extra.push("--validate".into());
        if let Some(r) = self.recovery().filter(|r| *r != Recovery::Gbn) {
            spec.extra.extend(["--recovery".into(), r.name().into()]);
        }
        if rate > 0.0 && self.impaired_by_us(sweep.via, sweep.burst.is_some()) {
            let mut impair = format!("loss={},seed={seed}", rate_text(rate));
            if let Some(b) = sweep.burst {
                impair.push_str(&format!(",burst={b}"));
            }
            spec.extra.extend(["--impair".into(), impair]);
        }
        Leg {
            spec,
            label: format!("{} @ {}", self.name(), rate_text(rate)),
            server_netns: Some(pair.server.clone()),
            client_netns: Some(pair.client.clone()),
            host: VETH_SERVER_IP.into(),
            link: Some(format!(
                "veth (netns {}<->{}, MTU {SWEEP_MTU}, no GSO)",
                pair.server, pair.client
            )),
            path: None,
        }
    }
}

/// Runs `args` in network namespace `ns`, or says why not.
fn in_ns(ns: &str, args: &[&str]) -> Result<String> {
    let out = Command::new("ip")
        .args(["netns", "exec", ns])
        .args(args)
        .output()
        .map_err(|source| Error::Io {
            action: "cannot run ip netns exec",
            source,
        })?;
    if !out.status.success() {
        return Err(Error::LossSweep(format!(
            "`{}` in {ns} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The kernel's TCP counters of a namespace that a sweep reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct TcpStats {
    retrans_segs: u64,
    fast_retrans: u64,
    timeouts: u64,
}

/// `name` of a `/proc/net/snmp`-style file: header line, then values, per prefix.
fn proc_counter(text: &str, prefix: &str, name: &str) -> Option<u64> {
    let mut lines = text.lines().filter(|l| l.starts_with(prefix));
    let head = lines.next()?;
    let vals = lines.next()?;
    let at = head.split_whitespace().position(|h| h == name)?;
    vals.split_whitespace().nth(at)?.parse().ok()
}

impl TcpStats {
    fn read(ns: &str) -> TcpStats {
        let snmp = in_ns(ns, &["cat", "/proc/net/snmp"]).unwrap_or_default();
        let netstat = in_ns(ns, &["cat", "/proc/net/netstat"]).unwrap_or_default();
        TcpStats {
            retrans_segs: proc_counter(&snmp, "Tcp:", "RetransSegs").unwrap_or(0),
            fast_retrans: proc_counter(&netstat, "TcpExt:", "TCPFastRetrans").unwrap_or(0),
            timeouts: proc_counter(&netstat, "TcpExt:", "TCPTimeouts").unwrap_or(0),
        }
    }

    fn since(self, before: TcpStats) -> TcpStats {
        TcpStats {
            retrans_segs: self.retrans_segs.saturating_sub(before.retrans_segs),
            fast_retrans: self.fast_retrans.saturating_sub(before.fast_retrans),
            timeouts: self.timeouts.saturating_sub(before.timeouts),
        }
    }
}

/// The server side of a sweep's runs: a [`LocalServer`] that puts the rate's iptables loss on the
/// link for the run (sparing the run's out-of-band port) and reads TCP's counters around it.
struct LossServer<'a> {
    inner: LocalServer,
    pair: &'a NetnsPair,
    /// The iptables drop probability of this rate (0: no rule).
    kernel_rate: f64,
    /// TCP counters of both namespaces when the current run started, and which run it is.
    before: [TcpStats; 2],
    current: Option<(crate::params::TestKind, String)>,
    /// TCP counters each run added, by test and leg label.
    tcp: Vec<((crate::params::TestKind, String), TcpStats)>,
}

impl LossServer<'_> {
    fn namespaces(&self) -> [&str; 2] {
        [&self.pair.server, &self.pair.client]
    }

    fn flush(&self) {
        for ns in self.namespaces() {
            let _ = in_ns(ns, &["iptables", "-F", "INPUT"]);
        }
    }
}

impl ServerSide for LossServer<'_> {
    fn start(&mut self, test: &TestSpec, leg: &Leg, floor: Option<&FloorJob>) -> Result<u16> {
        self.flush();
        let port = self.inner.start(test, leg, floor)?;
        let kernel = leg.spec.transport == TransportChoice::Tcp
            || (leg.spec.roce == Some(RoceVersion::V2)
                && !leg.spec.extra.iter().any(|a| a == "--impair"));
        if kernel && self.kernel_rate > 0.0 {
            let p = format!("{:.6}", self.kernel_rate);
            let oob = port.to_string();
            for ns in self.namespaces() {
                let stat = ["-m", "statistic", "--mode", "random", "--probability", &p];
                let mut udp = vec!["iptables", "-A", "INPUT", "-p", "udp", "--dport", "4791"];
                udp.extend(stat);
                udp.extend(["-j", "DROP"]);
                in_ns(ns, &udp)?;
                let mut tcp = vec!["iptables", "-A", "INPUT", "-p", "tcp", "!", "--dport"];
                tcp.extend([oob.as_str(), "!", "--sport", oob.as_str()]);
                tcp.extend(stat);
                tcp.extend(["-j", "DROP"]);
                in_ns(ns, &tcp)?;
            }
        }
        self.before = self.namespaces().map(TcpStats::read);
        self.current = Some((test.test, leg.label.clone()));
        Ok(port)
    }

    fn finish(&mut self, kill: bool, deadline: Instant) -> Result<()> {
        let r = self.inner.finish(kill, deadline);
        let after = self.namespaces().map(TcpStats::read);
        let [s, c] = [0, 1].map(|i| after[i].since(self.before[i]));
        if let Some(key) = self.current.take() {
            let sum = TcpStats {
                retrans_segs: s.retrans_segs + c.retrans_segs,
                fast_retrans: s.fast_retrans + c.fast_retrans,
                timeouts: s.timeouts + c.timeouts,
            };
            self.tcp.push((key, sum));
        }
        self.flush();
        r
    }
}

/// The veth pair of the sweep: made as `--local` makes it, then MTU 4200 and no GSO/TSO.
fn link() -> Result<NetnsPair> {
    let caps = local::effective_caps().unwrap_or(0);
    if let Some(missing) = local::missing_v1_privileges(caps) {
        return Err(Error::Privileges { missing });
    }
    let pair = NetnsPair::up(&format!("rpl{}", std::process::id()))?;
    for ns in [&pair.server, &pair.client] {
        in_ns(ns, &["ip", "link", "set", VETH_DEV, "mtu", SWEEP_MTU])?;
        // No super-packets on the link: iptables then sees, and drops, one packet at a time (the
        // sender still hands the kernel GSO batches, which it cuts before the link).
        in_ns(ns, &["ip", "link", "set", VETH_DEV, "gso_max_segs", "1"])?;
        in_ns(ns, &["iptables", "-F", "INPUT"]).map_err(|e| {
            Error::LossSweep(format!(
                "{e}; the sweep needs iptables with the statistic match (apt-get install iptables)"
            ))
        })?;
    }
    Ok(pair)
}

/// Runs the sweep: every rate, every series, every test. Runs that fail are skipped with the reason.
pub(crate) fn run(sweep: &Sweep, progress: &SweepProgress) -> Result<CompareSet> {
    let pair = link()?;
    let mut all = CompareSet {
        started_at: crate::results::now_rfc3339(),
        version: env!("CARGO_PKG_VERSION").into(),
        provenance: Some(crate::results::Provenance::of_this_process(None)),
        runs: Vec::new(),
        ..CompareSet::default()
    };
    let burst = sweep.burst.is_some();
    for (i, &rate) in sweep.rates.iter().enumerate() {
        let work = sweep.work.join(format!("rate{i}"));
        std::fs::create_dir_all(&work).map_err(|source| Error::Io {
            action: "cannot create the sweep's work directory",
            source,
        })?;
        let series: Vec<Series> = Series::ALL
            .into_iter()
            .filter(|s| !(burst && *s == Series::Tcp && rate > 0.0))
            .collect();
        if burst && rate > 0.0 {
            all.skipped.push(Skipped {
                label: format!("TCP @ {}", rate_text(rate)),
                reason: "iptables has no burst loss; TCP runs with independent losses only".into(),
                failed: false,
            });
        }
        let seed = 0x5eed + i as u64;
        let plan = Plan {
            tests: sweep.tests.clone(),
            legs: series
                .iter()
                .map(|s| s.leg(rate, sweep, &pair, seed))
                .collect(),
            skipped: Vec::new(),
            repeat: 1,
            floors: false,
        };
        let mut server = LossServer {
            inner: LocalServer::new(sweep.bin_dir.clone(), work.clone(), sweep.cores.server),
            pair: &pair,
            kernel_rate: if sweep.via == LossVia::Kernel && !burst {
                rate
            } else {
                0.0
            },
            before: [TcpStats::default(); 2],
            current: None,
            tcp: Vec::new(),
        };
        let client = ClientSide {
            bin_dir: sweep.bin_dir.clone(),
            work: work.clone(),
            cpu: sweep.cores.client,
            cpu_note: Some(sweep.cores.client_note()),
            timeout: sweep.timeout,
        };
        let set = run_plan(&plan, &mut server, &client, progress);
        let files = run_files(&work);
        for run in set.runs {
            let s = series_of(&run);
            let label = format!("{} @ {}", s.name(), rate_text(rate));
            let tcp = server
                .tcp
                .iter()
                .find(|(k, _)| k.0 == run.test && k.1 == label)
                .map(|(_, t)| *t);
            all.runs
                .push(annotate(run, s, rate, sweep, &files, tcp, burst));
        }
        all.skipped.extend(set.skipped);
    }
    drop(pair);
    relative_goodput(&mut all);
    let tests: Vec<_> = sweep.tests.iter().map(|t| t.test).collect();
    all.runs.sort_by_key(|r| {
        let series = r
            .loss
            .as_ref()
            .map(|l| l.series.clone())
            .unwrap_or_default();
        (
            tests.iter().position(|t| *t == r.test),
            Series::ALL.iter().position(|s| s.name() == series),
        )
    });
    Ok(all)
}

/// The series a finished run belongs to: its transport and RoCE version, and for RoCE v2 the
/// recovery its header note names.
fn series_of(run: &CompareRun) -> Series {
    match (run.transport, run.roce) {
        (TransportKind::Tcp, _) => Series::Tcp,
        (_, Some(RoceVersion::V1)) => Series::V1Gbn,
        _ if run
            .notes
            .iter()
            .any(|n| n.contains("loss recovery: selective repeat")) =>
        {
            Series::V2Sr
        }
        _ if run
            .notes
            .iter()
            .any(|n| n.contains("loss recovery: go-back-N timed as rxe")) =>
        {
            Series::V2GbnRxe
        }
        _ => Series::V2Gbn,
    }
}

/// The result files of one rate's runs: (test, transport, roce, recovery, counters) of each side.
type RunFile = (
    crate::params::TestKind,
    TransportKind,
    Option<RoceVersion>,
    Option<Recovery>,
    serde_json::Value,
);

fn run_files(dir: &Path) -> Vec<RunFile> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter_map(|p| match read::read_json(&p) {
            Ok(Document::Run { info, .. }) => Some((
                info.test,
                info.transport,
                info.roce,
                info.recovery,
                info.counters.unwrap_or_default(),
            )),
            _ => None,
        })
        .collect()
}

/// Labels `run` as its series at `rate` and records what the loss cost it.
fn annotate(
    mut run: CompareRun,
    s: Series,
    rate: f64,
    sweep: &Sweep,
    files: &[RunFile],
    tcp: Option<TcpStats>,
    burst: bool,
) -> CompareRun {
    let delivered = run
        .results
        .iter()
        .map(|r| match &r.measured {
            crate::results::Measured::Bandwidth(b) => b.messages * b.msg_size,
            crate::results::Measured::Latency { stats, .. } => stats.samples * r.size,
        })
        .sum();
    let (mut retx, mut naks, mut timeouts) = (None, None, None);
    if s == Series::Tcp {
        if let Some(t) = tcp {
            // Retransmitted segments at the MSS of the sweep's link: an upper bound per segment.
            let mss = SWEEP_MTU.parse::<u64>().unwrap_or(4200) - 52;
            retx = Some(t.retrans_segs * mss);
            naks = Some(t.fast_retrans);
            timeouts = Some(t.timeouts);
        }
    } else {
        let sides: Vec<&serde_json::Value> = files
            .iter()
            .filter(|f| {
                f.0 == run.test && f.1 == run.transport && f.2 == run.roce && f.3 == s.recovery()
            })
            .map(|f| &f.4)
            .collect();
        let sum = |get: &dyn Fn(&serde_json::Value) -> Option<u64>| -> Option<u64> {
            sides.iter().map(|c| get(c)).sum::<Option<u64>>()
        };
        if !sides.is_empty() {
            retx = sum(&|c| c["retransmitted_bytes"].as_u64());
            naks = sum(&|c| c["naks_received"]["psn_sequence"].as_u64());
            timeouts = sum(&|c| c["timeouts"].as_u64());
        }
    }
    run.label = format!("{} @ {}", s.name(), rate_text(rate));
    run.loss = Some(LossPoint {
        series: s.name().into(),
        rate,
        burst: sweep.burst.filter(|_| rate > 0.0 && s != Series::Tcp),
        recovery: s.recovery(),
        via: if rate > 0.0 {
            s.via_text(sweep.via, burst).into()
        } else {
            "none (loss-free)".into()
        },
        delivered_bytes: delivered,
        retransmitted_bytes: retx,
        naks,
        timeouts,
        relative: None,
    });
    run
}

/// Each bandwidth run's goodput relative to its series' loss-free run of the same test and size.
fn relative_goodput(set: &mut CompareSet) {
    let base: Vec<(String, crate::params::TestKind, u64, f64)> = set
        .runs
        .iter()
        .filter(|r| r.loss.as_ref().is_some_and(|l| l.rate == 0.0))
        .flat_map(|r| {
            let series = r
                .loss
                .as_ref()
                .map(|l| l.series.clone())
                .unwrap_or_default();
            r.results.iter().filter_map(move |x| {
                let g = x.figures().bandwidth()?.gbps;
                Some((series.clone(), r.test, x.size, g))
            })
        })
        .collect();
    for r in &mut set.runs {
        let Some(l) = r.loss.as_mut() else { continue };
        let Some(x) = r.results.first() else { continue };
        let Some(g) = x.figures().bandwidth().map(|b| b.gbps) else {
            continue;
        };
        l.relative = base
            .iter()
            .find(|b| b.0 == l.series && b.1 == r.test && b.2 == x.size)
            .filter(|b| b.3 > 0.0)
            .map(|b| g / b.3);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_and_print() {
        let rates: Vec<f64> = "0,0.01%,0.1%,1%,5%"
            .split(',')
            .map(|r| parse_rate(r).unwrap())
            .collect();
        assert_eq!(rates, [0.0, 0.0001, 0.001, 0.01, 0.05]);
        let shown: Vec<String> = rates.iter().map(|&r| rate_text(r)).collect();
        assert_eq!(shown, ["0%", "0.01%", "0.1%", "1%", "5%"]);
        assert!(parse_rate("100%").is_err() && parse_rate("x").is_err());
        assert_eq!(parse_rate("0.02").unwrap(), 0.02);
    }

    #[test]
    fn kernel_counters_are_read_by_name() {
        let snmp =
            "Tcp: RtoAlgorithm OutSegs RetransSegs\nTcp: 1 100 7\nUdp: InDatagrams\nUdp: 3\n";
        assert_eq!(proc_counter(snmp, "Tcp:", "RetransSegs"), Some(7));
        assert_eq!(proc_counter(snmp, "Udp:", "InDatagrams"), Some(3));
        assert_eq!(proc_counter(snmp, "Tcp:", "Nope"), None);
    }
}
