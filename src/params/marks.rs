//! What a run marks its packets with (`--tclass`, `-S/--sl`, `--flow_label`, perftest's flags), and
//! the ECN codepoints of the IP TOS / traffic class byte's low two bits (RFC 3168).

use serde::{Deserialize, Serialize};

/// The ECN field of a TOS or traffic class byte: its low two bits.
pub const ECN_MASK: u8 = 0b11;
/// ECN-capable transport, codepoint 0 (`10`): what RoCE v2 data leaves with unless `--tclass` says.
pub const ECT0: u8 = 0b10;
/// ECN-capable transport, codepoint 1 (`01`).
pub const ECT1: u8 = 0b01;
/// Congestion experienced (`11`): set by a switch (or `iptables -j ECN`) on an ECN-capable packet.
pub const CE: u8 = 0b11;
/// The largest flow label (20 bits).
pub const FLOW_LABEL_MAX: u32 = 0xf_ffff;
/// The largest service level `-S` takes (perftest's 0..15).
pub const SL_MAX: u8 = 15;

/// The name of an ECN codepoint (the low two bits of `tos`).
pub fn ecn_name(tos: u8) -> &'static str {
    match tos & ECN_MASK {
        0 => "Not-ECT",
        ECT1 => "ECT(1)",
        ECT0 => "ECT(0)",
        _ => "CE",
    }
}

/// When a switch decides a frame's CE mark (`roce_switch --mark-at`, `roce_compare --congestion
/// --mark-at`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum MarkAt {
    /// On arrival, by the queue the frame finds (the mark then waits behind that queue).
    #[default]
    Enqueue,
    /// On departure, by the queue the frame leaves behind: the mark reports the queue as it is
    /// when it leaves, without waiting behind it.
    Dequeue,
}

impl MarkAt {
    /// The flag's word: `enqueue`, `dequeue`.
    pub fn name(self) -> &'static str {
        match self {
            MarkAt::Enqueue => "enqueue",
            MarkAt::Dequeue => "dequeue",
        }
    }
}

/// `--tclass`, `-S` and `--flow_label` as given (`None`, empty: not given, perftest's 0).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Marks {
    /// `--tclass`: the IPv4 TOS / IPv6 traffic class of RoCE v2, the GRH traffic class of v1.
    pub tclass: Option<u8>,
    /// `-S/--sl`: the address handle's SL (verbs), the 802.1Q priority (soft over AF_PACKET) or
    /// `SO_PRIORITY` (soft over UDP, tcp).
    pub sl: Option<u8>,
    /// `--flow_label`: the IPv6 / GRH flow labels, queue pair `i` takes entry `i % len`.
    pub flow_labels: Vec<u32>,
}

impl Marks {
    /// The traffic class given, 0 by default (perftest's).
    pub fn tclass_or_default(&self) -> u8 {
        self.tclass.unwrap_or(0)
    }

    /// The service level given, 0 by default (perftest's).
    pub fn sl_or_default(&self) -> u8 {
        self.sl.unwrap_or(0)
    }

    /// Queue pair `qp`'s flow label: the list round-robin, as perftest assigns it; 0 without one.
    pub fn flow_label(&self, qp: usize) -> u32 {
        match self.flow_labels.len() {
            0 => 0,
            n => self.flow_labels[qp % n],
        }
    }

    /// True when none of the three flags was given.
    pub fn is_default(&self) -> bool {
        self.tclass.is_none() && self.sl.is_none() && self.flow_labels.is_empty()
    }

    /// `--flow_label`'s list as given: `1,2,3`, or `none`.
    pub fn flow_labels_display(&self) -> String {
        if self.flow_labels.is_empty() {
            return "none".into();
        }
        let labels: Vec<String> = self.flow_labels.iter().map(u32::to_string).collect();
        labels.join(",")
    }
}

/// The TOS / traffic class byte a RoCE v2 data packet leaves with for `--tclass` `tclass`: ECN-capable
/// (ECT(0)) unless the flag sets the ECN bits itself, which are then kept as given (`--tclass 3` sends
/// CE, `--tclass 1` ECT(1)).
pub const fn v2_tos(tclass: u8) -> u8 {
    if tclass & ECN_MASK == 0 {
        tclass | ECT0
    } else {
        tclass
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2_data_is_ect0_unless_the_tclass_says_otherwise() {
        assert_eq!(v2_tos(0), 0x02);
        assert_eq!(v2_tos(106), 106, "DSCP 26 with ECT(0) as given");
        assert_eq!(v2_tos(104), 106, "DSCP 26: ECT(0) added");
        assert_eq!(v2_tos(3), 3, "CE as given");
        assert_eq!(v2_tos(1), 1, "ECT(1) as given");
        assert_eq!(
            [0u8, 1, 2, 3].map(ecn_name),
            ["Not-ECT", "ECT(1)", "ECT(0)", "CE"]
        );
    }

    #[test]
    fn flow_labels_go_round_robin_per_queue_pair() {
        let m = Marks {
            flow_labels: vec![7, 8, 9],
            ..Marks::default()
        };
        assert_eq!(
            (0..5).map(|q| m.flow_label(q)).collect::<Vec<_>>(),
            [7, 8, 9, 7, 8]
        );
        assert_eq!(Marks::default().flow_label(3), 0);
        assert_eq!(m.flow_labels_display(), "7,8,9");
        assert!(Marks::default().is_default() && !m.is_default());
    }
}
