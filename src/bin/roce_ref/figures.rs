//! The result math (one-way latency from round trips, a receiver's measured window, Gb/s) and the
//! report, as a summary or one line of JSON.

use hdrhistogram::Histogram;
use roceperf::stats::{LatencyStats, new_latency_histogram};
use serde::Serialize;

use crate::proto::Measured;

/// Round trips recorded as one-way nanoseconds, exactly as roceperf's latency tests record theirs.
pub struct RoundTrips {
    hist: Histogram<u64>,
}

impl RoundTrips {
    /// An empty record.
    pub fn new() -> RoundTrips {
        RoundTrips {
            hist: new_latency_histogram(),
        }
    }

    /// Records one round trip of `rtt_ns`: half of it, one way.
    pub fn record(&mut self, rtt_ns: u64) {
        self.hist.saturating_record(rtt_ns / 2);
    }

    /// The one-way figures, with roceperf's percentile arithmetic.
    pub fn figures(&self, reply_size: usize, warmup: u64) -> LatencyFigures {
        let s = LatencyStats::from_histogram(&self.hist, &[99.0, 99.9]);
        LatencyFigures {
            reply_size_bytes: reply_size,
            iterations: s.samples,
            warmup_iterations: warmup,
            latency: "one-way: half the round trip",
            min_us: s.min_us,
            median_us: s.median_us,
            mean_us: s.mean_us,
            p99_us: s.get(99.0),
            p99_9_us: s.get(99.9),
            max_us: s.max_us,
        }
    }
}

/// A stream receiver's window: it opens with the first batch received after the warm-up (whose bytes
/// arrived before the window, so are not counted) and closes with the last batch.
#[derive(Debug, Clone, Default)]
pub struct Meter {
    warmup_ns: u64,
    first: Option<u64>,
    start: Option<u64>,
    end: u64,
    bytes: u64,
    messages: u64,
}

impl Meter {
    /// A meter that leaves out the first `warmup_ms` after the first byte.
    pub fn new(warmup_ms: u32) -> Meter {
        Meter {
            warmup_ns: u64::from(warmup_ms) * 1_000_000,
            ..Meter::default()
        }
    }

    /// `bytes` in `messages` received at `now_ns` (any fixed origin).
    pub fn observe(&mut self, now_ns: u64, bytes: u64, messages: u64) {
        let first = *self.first.get_or_insert(now_ns);
        if now_ns < first.saturating_add(self.warmup_ns) {
            return;
        }
        if self.start.is_none() {
            self.start = Some(now_ns);
            return;
        }
        self.bytes += bytes;
        self.messages += messages;
        self.end = now_ns;
    }

    /// What the window holds (all zero when it never opened or closed).
    pub fn measured(&self) -> Measured {
        match self.start {
            Some(start) if self.end > start => Measured {
                bytes: self.bytes,
                ns: self.end - start,
                messages: self.messages,
            },
            _ => Measured::default(),
        }
    }
}

/// 10^9 bit/s of `bytes` in `ns` (0 for an empty interval).
pub fn gbps(bytes: u64, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        bytes as f64 * 8.0 / ns as f64
    }
}

/// One-way latency figures of a ping-pong client, µs.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LatencyFigures {
    /// Bytes of each answer.
    pub reply_size_bytes: usize,
    /// Round trips measured.
    pub iterations: u64,
    /// Round trips left out first.
    pub warmup_iterations: u64,
    /// What the figures are.
    pub latency: &'static str,
    /// Smallest one-way latency.
    pub min_us: f64,
    /// Median one-way latency.
    pub median_us: f64,
    /// Mean one-way latency.
    pub mean_us: f64,
    /// 99th percentile; None (null) when withheld: fewer than 1,000 round trips.
    pub p99_us: Option<f64>,
    /// 99.9th percentile; None (null) when withheld: fewer than 10,000 round trips.
    pub p99_9_us: Option<f64>,
    /// Largest.
    pub max_us: f64,
}

/// A stream's figures: the receiver's (always) and the sender's (on the client).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StreamFigures {
    /// Payload Gb/s the receiver measured.
    pub gbps: f64,
    /// Payload bytes in the receiver's window.
    pub received_bytes: u64,
    /// Messages in the receiver's window (datagrams, frames, or TCP reads).
    pub received_messages: u64,
    /// The receiver's window, seconds.
    pub measured_s: f64,
    /// Milliseconds the receiver left out first.
    pub warmup_ms: u32,
    /// Payload Gb/s the sender handed the kernel, warm-up included (client only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sent_gbps: Option<f64>,
    /// Payload bytes the sender handed the kernel (client only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sent_bytes: Option<u64>,
}

impl StreamFigures {
    /// The figures of a receiver's `m`, plus what the sender sent when this is the client.
    pub fn new(m: Measured, warmup_ms: u32, sent: Option<(u64, u64)>) -> StreamFigures {
        StreamFigures {
            gbps: gbps(m.bytes, m.ns),
            received_bytes: m.bytes,
            received_messages: m.messages,
            measured_s: m.ns as f64 / 1e9,
            warmup_ms,
            sent_gbps: sent.map(|(bytes, ns)| gbps(bytes, ns)),
            sent_bytes: sent.map(|(bytes, _)| bytes),
        }
    }
}

/// A percentile for people: `1.23`, or `n/a (needs 10,000 samples)` when withheld.
fn pct_text(v: Option<f64>, pct: f64) -> String {
    v.map_or_else(
        || format!("n/a ({})", roceperf::stats::withheld_reason(pct)),
        |v| format!("{v:.2}"),
    )
}

/// What a run found.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(untagged)]
pub enum Figures {
    /// A ping-pong client's latency.
    Latency(LatencyFigures),
    /// A stream's bandwidth.
    Stream(StreamFigures),
    /// A ping-pong server's count of answers.
    Served {
        /// Answers sent.
        answered: u64,
    },
}

/// One side's report.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Report {
    /// Always "roce_ref".
    pub tool: &'static str,
    /// The subcommand.
    pub mode: &'static str,
    /// "server", "client", or "local" (both sides; the client's figures).
    pub role: &'static str,
    /// The other side.
    pub peer: String,
    /// The core this side (the client, with --local) ran on.
    pub cpu: usize,
    /// --local's server core.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_cpu: Option<usize>,
    /// -s.
    pub size_bytes: usize,
    /// The figures.
    #[serde(flatten)]
    pub figures: Figures,
}

impl Report {
    /// One line of JSON.
    pub fn json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// The summary for people.
    pub fn summary(&self) -> String {
        let cores = match self.server_cpu {
            Some(s) => format!("server on core {s}, client on core {}", self.cpu),
            None => format!("core {}", self.cpu),
        };
        let head = format!(
            "roce_ref {} {}: {cores}, peer {}, {} B",
            self.mode, self.role, self.peer, self.size_bytes
        );
        match &self.figures {
            Figures::Latency(l) => format!(
                "{head} out, {} B back, {} round trips after {} warm-up\n\
                 one-way latency (half the round trip), us: min {:.2}  median {:.2}  mean {:.2}  p99 {}  p99.9 {}  max {:.2}",
                l.reply_size_bytes,
                l.iterations,
                l.warmup_iterations,
                l.min_us,
                l.median_us,
                l.mean_us,
                pct_text(l.p99_us, 99.0),
                pct_text(l.p99_9_us, 99.9),
                l.max_us
            ),
            Figures::Stream(s) => {
                let sent = match (s.sent_gbps, s.sent_bytes) {
                    (Some(g), Some(b)) => format!("; sent {g:.2} Gb/s ({b} B, warm-up included)"),
                    _ => String::new(),
                };
                format!(
                    "{head} messages, {} ms warm-up left out\n\
                     received {:.2} Gb/s ({} B in {} messages over {:.3} s, measured by the receiver){sent}",
                    s.warmup_ms, s.gbps, s.received_bytes, s.received_messages, s.measured_s
                )
            }
            Figures::Served { answered } => format!("{head} messages, {answered} answered"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_way_is_half_the_round_trip() {
        let mut r = RoundTrips::new();
        for rtt in [8_000, 8_000, 8_000, 10_000, 40_000] {
            r.record(rtt);
        }
        let f = r.figures(36, 5);
        assert_eq!(f.iterations, 5);
        // Figures carry the histogram's 3 significant digits.
        assert!((f.median_us - 4.0).abs() < 0.005, "{}", f.median_us);
        assert!((f.min_us - 4.0).abs() < 0.005, "{}", f.min_us);
        assert!((f.max_us - 20.0).abs() < 0.02, "{}", f.max_us);
        assert!((f.mean_us - 7.4).abs() < 0.01, "{}", f.mean_us);
        // Five round trips hold no tail percentile: withheld, and said so.
        assert_eq!((f.p99_us, f.p99_9_us), (None, None));
        let mut r = RoundTrips::new();
        for i in 0..1000u64 {
            r.record(if i < 990 { 8_000 } else { 40_000 });
        }
        let f = r.figures(36, 5);
        assert!((f.p99_us.unwrap() - 4.0).abs() < 0.005, "{f:?}");
        assert_eq!(f.p99_9_us, None);
        let report = Report {
            tool: "roce_ref",
            mode: "udp-pingpong",
            role: "client",
            peer: "127.0.0.1".into(),
            cpu: 1,
            server_cpu: None,
            size_bytes: 36,
            figures: Figures::Latency(f),
        };
        assert!(
            report
                .summary()
                .contains("p99.9 n/a (needs 10,000 samples)"),
            "{}",
            report.summary()
        );
        assert!(
            report.json().contains("\"p99_9_us\":null"),
            "{}",
            report.json()
        );
    }

    #[test]
    fn meter_leaves_out_the_warm_up_and_the_batch_that_opens_the_window() {
        let mut m = Meter::new(1); // 1 ms
        m.observe(0, 1000, 1); // first byte: warm-up starts
        m.observe(500_000, 1000, 1); // still warm-up
        m.observe(1_000_000, 1000, 1); // opens the window, not counted
        m.observe(2_000_000, 1000, 2);
        m.observe(3_000_000, 3000, 3);
        let r = m.measured();
        assert_eq!(
            r,
            Measured {
                bytes: 4000,
                ns: 2_000_000,
                messages: 5
            }
        );
        assert_eq!(gbps(r.bytes, r.ns), 0.016);
    }

    #[test]
    fn meter_without_a_window_measures_nothing() {
        let mut m = Meter::new(1000);
        m.observe(5, 100, 1);
        assert_eq!(m.measured(), Measured::default());
        assert_eq!(gbps(100, 0), 0.0);
    }

    #[test]
    fn stream_figures_convert_units() {
        let m = Measured {
            bytes: 2_500_000_000,
            ns: 1_000_000_000,
            messages: 10,
        };
        let f = StreamFigures::new(m, 200, Some((5_000_000_000, 2_000_000_000)));
        assert_eq!(f.gbps, 20.0);
        assert_eq!(f.measured_s, 1.0);
        assert_eq!(f.sent_gbps, Some(20.0));
    }

    #[test]
    fn json_is_one_flat_line() {
        let rep = Report {
            tool: "roce_ref",
            mode: "tcp-stream",
            role: "client",
            peer: "127.0.0.1:18700".into(),
            cpu: 1,
            server_cpu: None,
            size_bytes: 65536,
            figures: Figures::Stream(StreamFigures::new(Measured::default(), 200, None)),
        };
        let j = rep.json();
        assert!(!j.contains('\n'));
        let v: serde_json::Value = serde_json::from_str(&j).unwrap();
        assert_eq!(v["mode"], "tcp-stream");
        assert_eq!(v["gbps"], 0.0);
        assert!(v.get("sent_gbps").is_none());
        assert!(v.get("server_cpu").is_none());
    }
}
