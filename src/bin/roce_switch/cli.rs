//! Command line: the clap definitions, and [`Config`], their checked and resolved form.

use std::path::PathBuf;

use clap::Parser;
use roceperf::params::marks::MarkAt;
use roceperf::transport::soft::sim::BottleneckConfig;

use crate::error::{Error, Result};
use crate::port::Discipline;

const ABOUT: &str = "roce_switch: a learning L2 switch between this namespace's interfaces whose egress port is a \
                     rate-limited bottleneck: lossy, ECN (RED) or PFC";

const LONG_ABOUT: &str = concat!(
    "roce_switch: a learning L2 switch between this network namespace's interfaces, the congested link of \
     docs/congestion.md (a test fixture: this kernel has no netem, red or fq_codel). Frames are read \
     and written with AF_PACKET; broadcast and unknown destinations flood, so ARP works through it.\n\n",
    "Frames towards the egress port (--egress) wait in one FIFO drained at --rate: each occupies the \
     line for its wire bits (its bytes, at least 60, plus FCS 4, preamble 8 and inter-frame gap 12, as \
     a real port spends them) from max(arrival, end of the previous departure) and leaves when its \
     last bit has. The buffer holds --buffer bytes of frames. Every other direction (ACKs, CNPs, ARP \
     replies) is forwarded at once. Between departures the switch sleeps (ppoll, 1 ns timer slack); \
     it never busy-polls.\n\n",
    "Disciplines (--discipline):\n",
    "  lossy  tail drop when the buffer is full.\n",
    "  ecn    RED by the queue a frame finds: no mark below --kmin, probability rising linearly to \
     --pmax at --kmax, every frame above --kmax. ECN-capable IP frames (ECT(0)/ECT(1)) are marked CE \
     (the IPv4 checksum follows; RoCE's ICRC masks those bits); Not-ECT IP frames are dropped with \
     the same probability, as a WRED switch with ECN does; other frames (ARP) only tail-drop. \
     --ecn-prio N confines RED to priority N (a switch's ECN profile is per traffic class): the \
     others only tail-drop.\n",
    "  pfc    priority from the 802.1Q PCP, else DSCP >> 3 (trust DSCP); --pfc-prio is lossless: when \
     its bytes in the queue pass --xoff the switch sends an 802.1Qbb PFC pause (0xffff quanta) out of \
     every port that sent that priority, again before it expires while above --xon, and a resume \
     (0 quanta) at --xon. A lossless frame that still does not fit is a headroom drop; other \
     priorities tail-drop.\n",
    "  pfc-ecn  both: pauses as pfc and marks as ecn (DCQCN over a lossless priority); RED never \
     drops a lossless frame.\n\n",
    "Sizes take k/M (10^3, 10^6) or KiB/MiB. SIGINT or SIGTERM stops the switch and writes --stats \
     (JSON, results/schema/switch.schema.json). Exit codes: 0 stopped by a signal, stats written; \
     1 a failure while switching; 2 a usage or setup error (a missing interface, not root)."
);

/// `-h`'s page after its flags: one example, where the rest is.
const SHORT_HELP: &str = "\
Example (namespace rcw holds the switch's interfaces to-s, to-v and to-r):
  ip netns exec rcw roce_switch --port to-s --port to-v --egress to-r --rate 2 --stats sw.json
--help: the disciplines, every flag and more examples. Exit: 0 stopped, 1 failure, 2 usage/setup.";

const AFTER_HELP: &str = "\
Examples (namespace rcw holds the switch's interfaces to-s, to-v and to-r):
  ip netns exec rcw roce_switch --port to-s --port to-v --egress to-r --rate 2 --stats sw.json
  ip netns exec rcw roce_switch --port to-s --port to-v --egress to-r --rate 2 --discipline ecn
  ip netns exec rcw roce_switch --port to-s --egress to-r --discipline ecn --kmin 250 --kmax 10k --pmax 0.01
      (DCQCN's paper: Kmin 5 KB, Kmax 200 KB, Pmax 1 % at 40 Gb/s, scaled to 2 Gb/s)
  ip netns exec rcw roce_switch --port to-s --port to-v --egress to-r --discipline pfc --xoff 300k --xon 150k";

/// `roce_switch [OPTIONS]`.
#[derive(Debug, Parser)]
#[command(name = "roce_switch", version, about = ABOUT, long_about = LONG_ABOUT, after_help = SHORT_HELP, after_long_help = AFTER_HELP)]
pub struct Cli {
    /// An ingress port (repeatable): an interface of this namespace whose frames may go to --egress
    #[arg(long = "port", value_name = "IFACE", required = true)]
    pub ports: Vec<String>,
    /// The egress (bottleneck) port: the interface towards the receiver
    #[arg(long, value_name = "IFACE")]
    pub egress: String,
    /// The egress port's rate, Gb/s of wire bits (preamble, IFG and FCS counted)
    #[arg(long, value_name = "GBPS", default_value_t = 2.0)]
    pub rate: f64,
    /// The egress buffer, bytes of frames [default: 1M, BottleneckConfig::dcqcn_25g's]
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    pub buffer: Option<u64>,
    /// What the egress port does as its queue grows
    #[arg(long, value_enum, default_value_t = Discipline::Lossy)]
    pub discipline: Discipline,
    /// ecn: no mark below this queue, bytes [default: 100 KB x rate/25 (HPCC's simulator: 100 KB at 25 Gb/s)]
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    pub kmin: Option<u64>,
    /// ecn: the marking probability reaches --pmax here, bytes [default: 400 KB x rate/25]
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    pub kmax: Option<u64>,
    /// ecn: the marking probability at --kmax [default: 0.2, HPCC's simulator]
    #[arg(long, value_name = "P", default_value_t = 0.2)]
    pub pmax: f64,
    /// pfc: pause when the lossless priority's queue passes this, bytes [default: buffer/2]
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    pub xoff: Option<u64>,
    /// pfc: resume when it falls to this, bytes [default: buffer/4]
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    pub xon: Option<u64>,
    /// pfc: the lossless priority (PCP, or DSCP >> 3)
    #[arg(long = "pfc-prio", value_name = "N", default_value_t = 3)]
    pub pfc_prio: u8,
    /// ecn, pfc-ecn: the one priority RED marks and drops (a switch's ECN profile is per traffic
    /// class); the others only tail-drop, so control traffic such as a TCP connect is not dropped
    /// by a queue the data holds above Kmax [default: every priority]
    #[arg(long = "ecn-prio", value_name = "N")]
    pub ecn_prio: Option<u8>,
    /// ecn, pfc-ecn: decide a frame's CE mark as it arrives (by the queue it finds; the mark then
    /// waits behind that queue) or as it departs (by the queue it leaves behind, reported at once)
    #[arg(long = "mark-at", value_enum, default_value_t = MarkAt::Enqueue)]
    pub mark_at: MarkAt,
    /// Write the stats here (JSON) when stopped
    #[arg(long, value_name = "FILE")]
    pub stats: Option<PathBuf>,
    /// Seed of RED's random marking
    #[arg(long, default_value_t = 1, hide_short_help = true)]
    pub seed: u64,
    /// Sample the queue's bytes every N microseconds into the stats' queue_samples
    #[arg(long = "sample-us", value_name = "N", hide_short_help = true)]
    pub sample_us: Option<u64>,
    /// While frames are queued, sleep at least N microseconds between wake-ups: departures due
    /// within it leave together at its end, and frames arriving meanwhile are read then and queued
    /// at the time the kernel stamped them on arrival, so the queue's arithmetic stays exact and
    /// the port keeps its rate. Frames from the egress side still wake the switch at once. Each
    /// wake-up costs a timer and a context switch (17 µs of CPU in a nested virtual machine): at
    /// 1 Gb/s of 4 KB frames, 0 wakes 30,000 times a second and more [default: 0, a wake-up per
    /// departure and per frame]
    #[arg(
        long = "batch-us",
        value_name = "N",
        default_value_t = 0,
        hide_short_help = true
    )]
    pub batch_us: u64,
    /// Run under SCHED_FIFO at this priority (1-99; 0: the normal scheduler). The switch sleeps
    /// between departures, so it cannot starve the endpoints, and it wakes on time for a departure
    /// while they busy-poll every core (measured: docs/congestion.md)
    #[arg(
        long,
        value_name = "PRIO",
        default_value_t = 10,
        hide_short_help = true
    )]
    pub fifo: i32,
}

/// The checked configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Ingress ports.
    pub ports: Vec<String>,
    /// The egress port.
    pub egress: String,
    /// Discipline.
    pub discipline: Discipline,
    /// Rate, buffer, RED thresholds.
    pub red: BottleneckConfig,
    /// PFC thresholds and priority.
    pub xoff: u64,
    /// Resume threshold.
    pub xon: u64,
    /// The lossless priority.
    pub pfc_prio: u8,
    /// `--ecn-prio`: RED's one priority; None: every one.
    pub ecn_prio: Option<u8>,
    /// `--mark-at`.
    pub mark_at: MarkAt,
    /// `--stats`.
    pub stats: Option<PathBuf>,
    /// `--seed`.
    pub seed: u64,
    /// `--sample-us`, ns.
    pub sample_ns: Option<u64>,
    /// `--batch-us`, ns (0: none).
    pub batch_ns: u64,
    /// `--fifo`.
    pub fifo: Option<i32>,
}

/// `1500`, `10k`, `1M`, `64KiB`, `1MiB`.
fn parse_bytes(s: &str) -> std::result::Result<u64, String> {
    let t = s.trim();
    let (num, mult) = [
        ("KiB", 1024),
        ("MiB", 1 << 20),
        ("k", 1_000),
        ("K", 1_000),
        ("M", 1_000_000),
    ]
    .iter()
    .find_map(|(suf, m)| t.strip_suffix(suf).map(|n| (n, *m)))
    .unwrap_or((t, 1));
    num.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v >= 0.0)
        .map(|v| (v * mult as f64).round() as u64)
        .ok_or_else(|| format!("{s:?} is not a byte count (1500, 10k, 1M, 64KiB)"))
}

impl Cli {
    /// Resolves the defaults and checks the values together.
    pub fn config(self) -> Result<Config> {
        if !(self.rate > 0.0 && self.rate <= 400.0) {
            return Err(Error::Usage(format!(
                "--rate {}: give the egress rate in Gb/s, above 0 and at most 400",
                self.rate
            )));
        }
        let buffer = self.buffer.unwrap_or(1_000_000);
        let scale = self.rate / 25.0;
        let kmin = self.kmin.unwrap_or((100_000.0 * scale) as u64);
        let kmax = self.kmax.unwrap_or((400_000.0 * scale) as u64);
        if kmin > kmax {
            return Err(Error::Usage(format!(
                "--kmin {kmin} is above --kmax {kmax}: RED marks between them"
            )));
        }
        if !(0.0..=1.0).contains(&self.pmax) {
            return Err(Error::Usage(format!(
                "--pmax {}: a probability, 0 to 1",
                self.pmax
            )));
        }
        let xoff = self.xoff.unwrap_or(buffer / 2);
        let xon = self.xon.unwrap_or(xoff.min(buffer / 4));
        if xon > xoff || xoff > buffer {
            return Err(Error::Usage(format!(
                "--xon {xon} <= --xoff {xoff} <= --buffer {buffer} is needed: pause above Xoff, resume at Xon, \
                 and the buffer above Xoff is the headroom for what arrives before the senders stop"
            )));
        }
        if self.pfc_prio > 7 {
            return Err(Error::Usage(format!(
                "--pfc-prio {}: a priority, 0 to 7",
                self.pfc_prio
            )));
        }
        if let Some(p) = self.ecn_prio.filter(|p| *p > 7) {
            return Err(Error::Usage(format!("--ecn-prio {p}: a priority, 0 to 7")));
        }
        if self.ports.contains(&self.egress) {
            return Err(Error::Usage(format!(
                "{} is both --port and --egress: the egress port is the bottleneck towards the receiver, \
                 the ports are where senders come in",
                self.egress
            )));
        }
        let mut seen = self.ports.clone();
        seen.sort();
        seen.dedup();
        if seen.len() != self.ports.len() {
            return Err(Error::Usage("a --port is given twice".into()));
        }
        if !(0..=99).contains(&self.fifo) {
            return Err(Error::Usage(format!(
                "--fifo {}: a SCHED_FIFO priority, 1 to 99 (0: off)",
                self.fifo
            )));
        }
        if self.sample_us == Some(0) {
            return Err(Error::Usage(
                "--sample-us 0: give a period of at least 1 µs".into(),
            ));
        }
        Ok(Config {
            ports: self.ports,
            egress: self.egress,
            discipline: self.discipline,
            red: BottleneckConfig {
                rate_gbps: self.rate,
                buffer_bytes: buffer,
                kmin_bytes: kmin,
                kmax_bytes: kmax,
                pmax: self.pmax,
                delay_ns: 0,
            },
            xoff,
            xon,
            pfc_prio: self.pfc_prio,
            ecn_prio: self.ecn_prio,
            mark_at: self.mark_at,
            stats: self.stats,
            seed: self.seed,
            sample_ns: self.sample_us.map(|u| u * 1_000),
            batch_ns: self.batch_us.saturating_mul(1_000),
            fifo: (self.fifo != 0).then_some(self.fifo),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli(args: &str) -> Cli {
        Cli::try_parse_from(["roce_switch"].into_iter().chain(args.split_whitespace())).unwrap()
    }

    #[test]
    fn defaults_scale_red_to_the_rate_and_pfc_to_the_buffer() {
        let c = cli("--port a --egress b --rate 2.5").config().unwrap();
        assert_eq!((c.red.kmin_bytes, c.red.kmax_bytes), (10_000, 40_000));
        assert_eq!(c.red.buffer_bytes, 1_000_000);
        assert_eq!((c.xoff, c.xon), (500_000, 250_000));
        assert_eq!(c.discipline, Discipline::Lossy);
        let c = cli("--port a --egress b --buffer 64KiB --kmin 5k --kmax 0.2M --discipline ecn")
            .config()
            .unwrap();
        assert_eq!(c.red.buffer_bytes, 65_536);
        assert_eq!((c.red.kmin_bytes, c.red.kmax_bytes), (5_000, 200_000));
    }

    #[test]
    fn contradictions_are_usage_errors_that_name_the_flags() {
        for (args, says) in [
            ("--port a --egress a", "is both --port and --egress"),
            (
                "--port a --egress b --kmin 10k --kmax 5k",
                "--kmin 10000 is above --kmax 5000",
            ),
            (
                "--port a --egress b --xoff 10k --xon 20k",
                "--xon 20000 <= --xoff 10000",
            ),
            ("--port a --egress b --rate 0", "--rate 0"),
            ("--port a --egress b --pfc-prio 9", "--pfc-prio 9"),
            ("--port a --egress b --ecn-prio 8", "--ecn-prio 8"),
            ("--port a --port a --egress b", "given twice"),
        ] {
            let e = cli(args).config().unwrap_err();
            assert_eq!(e.exit_code(), 2);
            assert!(e.to_string().contains(says), "{args}: {e}");
        }
        assert!(parse_bytes("12x").is_err());
    }
}
