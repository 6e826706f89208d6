//! MAC Control pause frames (IEEE 802.3 Annex 31B and 31D): priority flow control (PFC, 802.1Qbb,
//! opcode 0x0101), which pauses chosen priorities, and the legacy global pause (opcode 0x0001). A
//! lossless RoCE fabric runs PFC on the priority its RoCE traffic takes; a switch whose queue for
//! that priority passes Xoff sends one upstream, and a zero time (or its expiry) resumes.
//!
//! Layout from the destination MAC on (64 bytes on the wire with the FCS, which the NIC adds):
//! destination 01:80:C2:00:00:01, source, EtherType 0x8808, opcode, then for PFC a class-enable
//! vector (2 bytes; bit i set: priority i's time is valid) and eight 2-byte times, for global pause
//! one time; zero padding to 60 bytes. Times are in quanta of 512 bit times at the link's speed.

use super::{Error, MacAddr, Result};

/// Where a MAC Control frame goes: a reserved multicast address no bridge forwards.
pub const PAUSE_DST: MacAddr = MacAddr([0x01, 0x80, 0xc2, 0x00, 0x00, 0x01]);
/// The MAC Control EtherType.
pub const MAC_CONTROL_ETHERTYPE: u16 = 0x8808;
/// Bytes of a pause frame without its FCS: the minimum Ethernet frame.
pub const PAUSE_FRAME_LEN: usize = 60;

mod field {
    use crate::wire::field::Field;
    pub(super) const DST: Field = 0..6;
    pub(super) const SRC: Field = 6..12;
    pub(super) const ETHERTYPE: Field = 12..14;
    pub(super) const OPCODE: Field = 14..16;
    /// PFC: the class-enable vector; global pause: the one time.
    pub(super) const ENABLE_OR_TIME: Field = 16..18;
    /// PFC: priority i's time at `TIMES.start + 2 i`.
    pub(super) const TIMES: usize = 18;
}

/// The MAC Control opcode of priority flow control.
const OPCODE_PFC: u16 = 0x0101;
/// The MAC Control opcode of the legacy global pause.
const OPCODE_PAUSE: u16 = 0x0001;

/// What a pause frame asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PauseKind {
    /// PFC: for each priority whose bit is set in the class-enable vector, its time in quanta
    /// (0 = resume); the times of priorities whose bit is clear are ignored.
    Priority {
        /// Bit i: priority i's time is valid.
        enable: u8,
        /// Priority i's pause time, quanta.
        quanta: [u16; 8],
    },
    /// Legacy 802.3x pause of every priority.
    Global {
        /// Pause time, quanta.
        quanta: u16,
    },
}

/// A pause frame, PFC or global.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PauseRepr {
    /// The port that sends it.
    pub src: MacAddr,
    /// What it pauses and for how long.
    pub kind: PauseKind,
}

impl PauseRepr {
    /// A PFC frame that pauses (`quanta` > 0) or resumes (`quanta` = 0) one priority.
    pub fn priority(src: MacAddr, priority: u8, quanta: u16) -> PauseRepr {
        let priority = priority & 7;
        let mut times = [0u16; 8];
        times[usize::from(priority)] = quanta;
        PauseRepr {
            src,
            kind: PauseKind::Priority {
                enable: 1 << priority,
                quanta: times,
            },
        }
    }

    /// The time this frame sets for `priority`, in quanta: `None` when it says nothing about it.
    pub fn quanta_for(&self, priority: u8) -> Option<u16> {
        match self.kind {
            PauseKind::Priority { enable, quanta } => {
                let p = priority & 7;
                (enable & (1 << p) != 0).then_some(quanta[usize::from(p)])
            }
            PauseKind::Global { quanta } => Some(quanta),
        }
    }

    /// Reads a pause frame from its Ethernet header on (FCS excluded). A frame that is not MAC
    /// Control is [`Error::UnknownEtherType`]; MAC Control with another opcode, a destination other
    /// than [`PAUSE_DST`], or a frame shorter than the 60-byte minimum is malformed.
    pub fn parse(frame: &[u8]) -> Result<PauseRepr> {
        if frame.len() < field::ETHERTYPE.end {
            return Err(Error::Truncated {
                what: "MAC Control frame",
                need: PAUSE_FRAME_LEN,
                have: frame.len(),
            });
        }
        let ethertype = super::field::get_u16(frame, field::ETHERTYPE);
        if ethertype != MAC_CONTROL_ETHERTYPE {
            return Err(Error::UnknownEtherType(ethertype));
        }
        if frame.len() < PAUSE_FRAME_LEN {
            return Err(Error::Truncated {
                what: "MAC Control frame",
                need: PAUSE_FRAME_LEN,
                have: frame.len(),
            });
        }
        if frame[field::DST] != PAUSE_DST.0 {
            return Err(Error::Malformed("a pause frame goes to 01:80:c2:00:00:01"));
        }
        let mut src = [0u8; 6];
        src.copy_from_slice(&frame[field::SRC]);
        let word = super::field::get_u16(frame, field::ENABLE_OR_TIME);
        let kind = match super::field::get_u16(frame, field::OPCODE) {
            OPCODE_PFC => {
                let mut quanta = [0u16; 8];
                for (i, q) in quanta.iter_mut().enumerate() {
                    let at = field::TIMES + 2 * i;
                    *q = super::field::get_u16(frame, at..at + 2);
                }
                // The vector's upper byte is reserved (802.1Qbb 36.1.3.2): ignored on receive.
                PauseKind::Priority {
                    enable: word as u8,
                    quanta,
                }
            }
            OPCODE_PAUSE => PauseKind::Global { quanta: word },
            _ => {
                return Err(Error::Malformed(
                    "MAC Control opcode is neither PFC (0x0101) nor pause (0x0001)",
                ));
            }
        };
        Ok(PauseRepr {
            src: MacAddr(src),
            kind,
        })
    }

    /// Writes the frame's [`PAUSE_FRAME_LEN`] bytes at the start of `buf` (padding zeroed);
    /// returns that length.
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        let buf = &mut buf[..PAUSE_FRAME_LEN];
        buf.fill(0);
        buf[field::DST].copy_from_slice(&PAUSE_DST.0);
        buf[field::SRC].copy_from_slice(&self.src.0);
        super::field::set_u16(buf, field::ETHERTYPE, MAC_CONTROL_ETHERTYPE);
        match self.kind {
            PauseKind::Priority { enable, quanta } => {
                super::field::set_u16(buf, field::OPCODE, OPCODE_PFC);
                super::field::set_u16(buf, field::ENABLE_OR_TIME, u16::from(enable));
                for (i, q) in quanta.iter().enumerate() {
                    let at = field::TIMES + 2 * i;
                    super::field::set_u16(buf, at..at + 2, *q);
                }
            }
            PauseKind::Global { quanta } => {
                super::field::set_u16(buf, field::OPCODE, OPCODE_PAUSE);
                super::field::set_u16(buf, field::ENABLE_OR_TIME, quanta);
            }
        }
        PAUSE_FRAME_LEN
    }
}

/// How long `quanta` pause quanta last on a link of `speed_mbps`: each quantum is 512 bit times.
pub fn quanta_to_ns(quanta: u16, speed_mbps: u64) -> u64 {
    // 512 bits at speed_mbps Mb/s = 512 000 / speed_mbps ns.
    (u64::from(quanta) * 512_000).div_ceil(speed_mbps.max(1))
}

/// How often a sender of pause frames refreshes a pause it wants to last: at half the longest pause
/// (0xFFFF quanta) at `speed_mbps`, so that the receiver never sees it expire.
pub fn refresh_ns(speed_mbps: u64) -> u64 {
    quanta_to_ns(u16::MAX, speed_mbps) / 2
}

/// The fewest quanta that cover `ns` on a link of `speed_mbps`, at most 0xFFFF.
pub fn ns_to_quanta(ns: u64, speed_mbps: u64) -> u16 {
    let q = (u128::from(ns) * u128::from(speed_mbps.max(1))).div_ceil(512_000);
    q.min(u128::from(u16::MAX)) as u16
}

/// The link speed pause quanta are timed at when the interface reports none: sysfs `speed` fails
/// (`lo`, a veth that is down, tun) or reads -1 or 0. 10 Gb/s is what a veth that is up reports, so
/// the switch fixture and the soft endpoints across veth pairs time a quantum alike (51.2 ns).
pub const ASSUMED_SPEED_MBPS: u64 = 10_000;

/// The speed (Mb/s) to time pause quanta at on a link whose sysfs `speed` reads `reported` (`None`
/// when it could not be read): a positive figure as it is, else [`ASSUMED_SPEED_MBPS`]. The switch
/// that sends pause frames and the endpoint that honours them both take this rule.
pub fn link_speed_mbps(reported: Option<i64>) -> u64 {
    match reported {
        Some(mbps) if mbps > 0 => mbps as u64,
        _ => ASSUMED_SPEED_MBPS,
    }
}

/// The priority (0..=7) a frame is classified to, as a switch that trusts the priority tag and
/// then DSCP does: the 802.1Q PCP of a tagged frame, else DSCP >> 3 (DSCP 26 → 3, CNPs' 48 → 6),
/// else 0 (RoCE v1 untagged: no IP header to read). The endpoint pauses its own frames by the
/// same rule, so a pause for the priority a switch put them in stops them.
pub fn frame_priority(pcp: Option<u8>, dscp: Option<u8>) -> u8 {
    match (pcp, dscp) {
        (Some(pcp), _) => pcp & 7,
        (None, Some(dscp)) => (dscp >> 3) & 7,
        (None, None) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x0a]);

    #[test]
    fn a_pfc_frame_for_priority_3_has_802_1qbb_bytes() {
        let mut buf = [0xeeu8; 64];
        let n = PauseRepr::priority(SRC, 3, 0xffff).emit(&mut buf);
        assert_eq!(n, 60);
        let want: [u8; 34] = [
            0x01, 0x80, 0xc2, 0x00, 0x00, 0x01, // destination
            0x02, 0, 0, 0, 0, 0x0a, // source
            0x88, 0x08, // MAC Control
            0x01, 0x01, // PFC
            0x00, 0x08, // class-enable vector: priority 3
            0, 0, 0, 0, 0, 0, 0xff, 0xff, // times of priorities 0..3
            0, 0, 0, 0, 0, 0, 0, 0, // 4..7
        ];
        assert_eq!(&buf[..34], &want);
        assert!(buf[34..60].iter().all(|&b| b == 0), "zero padding");
        assert_eq!(buf[60], 0xee, "nothing written past 60 bytes");
        let back = PauseRepr::parse(&buf[..60]).unwrap();
        assert_eq!(back, PauseRepr::priority(SRC, 3, 0xffff));
        assert_eq!(back.quanta_for(3), Some(0xffff));
        assert_eq!(back.quanta_for(4), None, "priority 4's bit is clear");
    }

    #[test]
    fn global_pause_and_resume_round_trip() {
        let mut buf = [0u8; 60];
        let pause = PauseRepr {
            src: SRC,
            kind: PauseKind::Global { quanta: 0x1234 },
        };
        pause.emit(&mut buf);
        assert_eq!(&buf[14..18], &[0x00, 0x01, 0x12, 0x34]);
        let back = PauseRepr::parse(&buf).unwrap();
        assert_eq!(back, pause);
        assert_eq!(
            back.quanta_for(6),
            Some(0x1234),
            "global pause stops every priority"
        );
        PauseRepr::priority(SRC, 5, 0).emit(&mut buf);
        assert_eq!(PauseRepr::parse(&buf).unwrap().quanta_for(5), Some(0));
    }

    #[test]
    fn what_is_not_a_pause_frame_is_named() {
        let mut buf = [0u8; 60];
        PauseRepr::priority(SRC, 3, 10).emit(&mut buf);
        assert!(matches!(
            PauseRepr::parse(&buf[..40]),
            Err(Error::Truncated {
                need: 60,
                have: 40,
                ..
            })
        ));
        let mut ip = buf;
        ip[12..14].copy_from_slice(&[0x08, 0x00]);
        assert_eq!(PauseRepr::parse(&ip), Err(Error::UnknownEtherType(0x0800)));
        let mut other_op = buf;
        other_op[15] = 0x02;
        assert!(matches!(
            PauseRepr::parse(&other_op),
            Err(Error::Malformed(_))
        ));
        let mut unicast = buf;
        unicast[0] = 0x02;
        assert!(matches!(
            PauseRepr::parse(&unicast),
            Err(Error::Malformed(_))
        ));
    }

    #[test]
    fn quanta_are_512_bit_times_at_the_link_speed() {
        // 10 Gb/s: one quantum is 51.2 ns; 0xffff quanta are 3.355 ms.
        assert_eq!(quanta_to_ns(1, 10_000), 52, "rounded up");
        assert_eq!(quanta_to_ns(0xffff, 10_000), 3_355_392);
        assert_eq!(quanta_to_ns(0xffff, 100_000), 335_540);
        assert_eq!(ns_to_quanta(3_355_392, 10_000), 0xffff);
        assert_eq!(ns_to_quanta(1, 10_000), 1);
        assert_eq!(ns_to_quanta(u64::MAX, 10_000), 0xffff, "capped");
        assert_eq!(ns_to_quanta(0, 10_000), 0);
        assert_eq!(refresh_ns(ASSUMED_SPEED_MBPS), 1_677_696);
    }

    #[test]
    fn a_link_without_a_speed_counts_as_10_gbps() {
        assert_eq!(link_speed_mbps(Some(25_000)), 25_000);
        for none in [None, Some(-1), Some(0)] {
            assert_eq!(link_speed_mbps(none), ASSUMED_SPEED_MBPS, "{none:?}");
        }
        assert_eq!(quanta_to_ns(0xffff, link_speed_mbps(None)), 3_355_392);
    }

    #[test]
    fn the_priority_is_the_tag_else_dscp_over_8() {
        assert_eq!(frame_priority(Some(3), Some(48)), 3, "the tag wins");
        assert_eq!(frame_priority(Some(11), None), 3, "three bits");
        assert_eq!(frame_priority(None, Some(26)), 3, "DSCP 26 (AF31)");
        assert_eq!(frame_priority(None, Some(48)), 6, "CNPs' DSCP 48");
        assert_eq!(frame_priority(None, Some(0)), 0);
        assert_eq!(frame_priority(None, None), 0, "untagged RoCE v1");
    }
}
