//! One queue pair's (TCP: connection's) own counters, in one shape for every transport that keeps
//! them: the JSON result's `test.counters.per_qp`, `-v`'s lines and the CSV's per-queue-pair rows.
//! A field a transport cannot count is `None` (JSON null), never a zero it did not measure.

use serde::Serialize;

/// A queue pair's counters over the run (from its creation to when they are read, at the end).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct QpCounters {
    /// Index of the queue pair (0 .. `-q` − 1), as the results' `qps[].qp`.
    pub qp: u32,
    /// Its QP number (soft); `None` for a TCP connection.
    pub qpn: Option<u32>,
    /// Request packets (TCP: segments, `tcpi_total_retrans`) sent again.
    pub retransmitted_packets: u64,
    /// Payload bytes sent again (TCP: `tcpi_bytes_retrans`).
    pub retransmitted_bytes: u64,
    /// Packets received CE-marked (soft, RoCE v2); `None` on TCP (the kernel keeps ECN to itself).
    pub ce_marked_packets: Option<u64>,
    /// CNPs sent as notification point; `None` on TCP.
    pub cnps_sent: Option<u64>,
    /// CNPs handled as reaction point; `None` on TCP.
    pub cnps_handled: Option<u64>,
    /// CNPs that cut its rate; `None` on TCP.
    pub rate_cuts: Option<u64>,
    /// The rate it is paced at now, Gb/s; `None` when unpaced (and on TCP).
    pub rate_now_gbps: Option<f64>,
    /// The lowest rate a cut left, Gb/s; `None` when never cut (and on TCP).
    pub rate_lowest_gbps: Option<f64>,
}

impl QpCounters {
    /// `-v`'s line for it: what it counted, n/a where the transport cannot count.
    pub fn line(&self) -> String {
        let n = |v: Option<u64>| v.map_or("n/a".to_string(), |v| v.to_string());
        let rate =
            |v: Option<f64>, none: &str| v.map_or(none.to_string(), |r| format!("{r:.3} Gb/s"));
        let qpn = self
            .qpn
            .map_or(String::new(), |q| format!(" (QPN {q:#08x})"));
        format!(
            " QP {}{qpn}: retransmitted {} packets {} bytes, CE-marked {}, CNPs sent {} handled {}, rate cuts {}, rate now {}, lowest {}",
            self.qp,
            self.retransmitted_packets,
            self.retransmitted_bytes,
            n(self.ce_marked_packets),
            n(self.cnps_sent),
            n(self.cnps_handled),
            n(self.rate_cuts),
            rate(
                self.rate_now_gbps,
                if self.cnps_sent.is_some() {
                    "unpaced"
                } else {
                    "n/a"
                }
            ),
            rate(
                self.rate_lowest_gbps,
                if self.cnps_sent.is_some() {
                    "never cut"
                } else {
                    "n/a"
                }
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_says_na_where_the_transport_cannot_count() {
        let soft = QpCounters {
            qp: 1,
            qpn: Some(0x12),
            retransmitted_packets: 3,
            retransmitted_bytes: 12288,
            ce_marked_packets: Some(40),
            cnps_sent: Some(2),
            cnps_handled: Some(0),
            rate_cuts: Some(0),
            rate_now_gbps: None,
            rate_lowest_gbps: Some(1.5),
        };
        assert_eq!(
            soft.line(),
            " QP 1 (QPN 0x000012): retransmitted 3 packets 12288 bytes, CE-marked 40, CNPs sent 2 \
             handled 0, rate cuts 0, rate now unpaced, lowest 1.500 Gb/s"
        );
        let tcp = QpCounters {
            qp: 0,
            retransmitted_packets: 1,
            retransmitted_bytes: 1448,
            ..QpCounters::default()
        };
        assert!(
            tcp.line().ends_with(
                "CE-marked n/a, CNPs sent n/a handled n/a, rate cuts n/a, rate now n/a, lowest n/a"
            ),
            "{}",
            tcp.line()
        );
        let v = serde_json::to_value(tcp).unwrap();
        assert!(
            v["ce_marked_packets"].is_null() && v["qpn"].is_null(),
            "{v}"
        );
    }
}
