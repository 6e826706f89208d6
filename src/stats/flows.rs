//! Each queue pair's own figures in a bandwidth test: its goodput ([`QpShare`]) and its completed
//! bytes over time ([`QpSeries`]), what a congestion study reads per flow.

use serde::{Deserialize, Serialize};

/// One queue pair's share of a size's bandwidth: what completed on it in the measured interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct QpShare {
    /// Index of the queue pair (0 .. `-q`), as the run's queue pairs are numbered.
    pub qp: u32,
    /// Payload bytes completed on it in the measured interval.
    pub bytes: u64,
    /// Messages completed on it in the measured interval.
    pub messages: u64,
    /// Its goodput over the size's elapsed time, 10^9 bit/s (the shares add up to the size's).
    pub goodput_gbps: f64,
}

impl QpShare {
    /// Shares of `msg_size`-byte messages, `messages[q]` on queue pair `q`, over `elapsed_ns`.
    pub fn from_counts(msg_size: u64, messages: &[u64], elapsed_ns: u64) -> Vec<QpShare> {
        messages
            .iter()
            .enumerate()
            .map(|(q, &m)| {
                let bytes = m * msg_size;
                QpShare {
                    qp: q as u32,
                    bytes,
                    messages: m,
                    goodput_gbps: gbps(bytes, elapsed_ns),
                }
            })
            .collect()
    }

    /// Both directions of a bidirectional queue pair: counts added, rates added (as the row's are).
    pub(crate) fn combined(a: &[QpShare], b: &[QpShare]) -> Vec<QpShare> {
        a.iter()
            .zip(b)
            .map(|(a, b)| QpShare {
                qp: a.qp,
                bytes: a.bytes + b.bytes,
                messages: a.messages + b.messages,
                goodput_gbps: a.goodput_gbps + b.goodput_gbps,
            })
            .collect()
    }
}

/// 10^9 bit/s of `bytes` in `ns` (0 for an empty interval).
fn gbps(bytes: u64, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        bytes as f64 * 8.0 / ns as f64
    }
}

/// `--qp-series MS`: each queue pair's completed payload bytes, cumulative from the start of the
/// measured interval, sampled about every `interval_ms` (at the loop's clock reads, so a sample may
/// be late by one turn of the loop; `t_ms` says when it was taken). The last sample is taken at the
/// interval's end and equals each queue pair's [`QpShare::bytes`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QpSeries {
    /// The interval asked for, milliseconds.
    pub interval_ms: u32,
    /// When each sample was taken, milliseconds from the start of the measured interval.
    pub t_ms: Vec<f64>,
    /// One row per sample: cumulative payload bytes completed per queue pair (index = queue pair).
    pub bytes: Vec<Vec<u64>>,
    /// The sample cap was reached: periodic samples stopped there; the last sample is still the end.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub capped: bool,
}
