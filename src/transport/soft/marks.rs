//! What the soft transport marks its packets with, decided once from `--tclass`, `-S` and the CNP
//! settings: the TOS / traffic class byte and the 802.1Q priority tag of data packets and of CNPs,
//! and the socket priority of the UDP backend. Pure.

use crate::params::RoceVersion;
use crate::params::marks::{ECT0, Marks, ecn_name, v2_tos};
use crate::wire::{Encapsulation, VlanTag};

/// One class of packets on the wire: its TOS / traffic class byte and its priority tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Class {
    /// RoCE v2: the IPv4 TOS / IPv6 traffic class; RoCE v1: the GRH traffic class.
    pub tclass: u8,
    /// The 802.1Q priority tag of frames the soft transport writes itself (AF_PACKET).
    pub vlan: Option<VlanTag>,
}

impl Class {
    /// The priority a switch classifies this class's frames to, and a pause frame for which
    /// holds them ([`crate::wire::pfc::frame_priority`]): the tag's PCP, else DSCP >> 3 (RoCE v2).
    pub(crate) fn priority(&self, encap: Encapsulation) -> u8 {
        let dscp = (encap != Encapsulation::V1).then_some(self.tclass >> 2);
        crate::wire::pfc::frame_priority(self.vlan.map(|t| t.pcp), dscp)
    }
}

/// The classes of a soft endpoint's packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Classes {
    /// Every packet but CNPs.
    pub data: Class,
    /// CNPs (BTH opcode 0x81): ConnectX's `np_cnp_dscp` with ECT(0), and `np_cnp_prio` when tagged.
    pub cnp: Class,
    /// `SO_PRIORITY` for the UDP backend's socket, whose frames are the kernel's (`-S` given).
    pub so_priority: Option<u8>,
}

/// A priority tag: VLAN 0, so no VLAN device is needed at either end (IEEE 802.1Q's priority tag).
fn priority_tag(pcp: u8) -> VlanTag {
    VlanTag {
        pcp: pcp & 7,
        dei: false,
        vid: 0,
    }
}

/// The classes for `marks` on RoCE `version`; `framed`: the AF_PACKET backend writes every frame.
///
/// RoCE v2 data leaves ECN-capable (ECT(0)) unless `--tclass` sets the ECN bits itself. RoCE v1 takes
/// `--tclass` as given: a GRH has no ECN field by IBTA, and ConnectX marks no v1 traffic. A priority
/// tag is written only for a non-zero `-S`: perftest's default 0 leaves today's frames untagged, and a
/// PCP-0 tag would add 4 bytes to say what an untagged frame already means on a port whose default
/// priority is 0. CNPs take `cnp_prio` in a tag only when data is tagged too.
pub(crate) fn classes(
    version: RoceVersion,
    marks: &Marks,
    cnp_dscp: u8,
    cnp_prio: u8,
    framed: bool,
) -> Classes {
    let tclass = marks.tclass_or_default();
    let (data, cnp) = match version {
        RoceVersion::V2 => (v2_tos(tclass), (cnp_dscp << 2) | ECT0),
        RoceVersion::V1 => (tclass, cnp_dscp << 2),
    };
    let tagged = framed && marks.sl_or_default() != 0;
    Classes {
        data: Class {
            tclass: data,
            vlan: tagged.then(|| priority_tag(marks.sl_or_default())),
        },
        cnp: Class {
            tclass: cnp,
            vlan: tagged.then(|| priority_tag(cnp_prio)),
        },
        so_priority: marks.sl.filter(|_| !framed),
    }
}

/// `0x6a (DSCP 26, ECT(0))`: a TOS / traffic class byte in words; RoCE v1's has no ECN field.
fn class_words(tclass: u8, encap: Encapsulation) -> String {
    match encap {
        Encapsulation::V1 => format!("{tclass:#04x}"),
        _ => format!("{tclass:#04x} (DSCP {}, {})", tclass >> 2, ecn_name(tclass)),
    }
}

/// The run header's line on what the packets carry, for `encap` (framed: AF_PACKET).
pub(crate) fn describe(c: &Classes, marks: &Marks, encap: Encapsulation, framed: bool) -> String {
    let field = match encap {
        Encapsulation::V1 => "GRH traffic class",
        Encapsulation::V2v4 => "IPv4 TOS",
        Encapsulation::V2v6 => "IPv6 traffic class",
    };
    let mut s = format!(
        "marks: {field} {} on data, {} on CNPs",
        class_words(c.data.tclass, encap),
        class_words(c.cnp.tclass, encap)
    );
    if encap == Encapsulation::V1 {
        s.push_str(" (a GRH has no ECN field: nothing ECN-capable, as ConnectX sends v1)");
    }
    match (c.data.vlan, c.cnp.vlan, c.so_priority, marks.sl) {
        (Some(d), Some(n), _, _) => s.push_str(&format!(
            "; -S {}: 802.1Q priority tag PCP {} VLAN 0 (CNPs PCP {})",
            marks.sl_or_default(),
            d.pcp,
            n.pcp
        )),
        (_, _, Some(p), _) => s.push_str(&format!(
            "; -S {p}: SO_PRIORITY {p} (the kernel's frames carry a tag only through a VLAN device's egress-qos-map)"
        )),
        (_, _, _, Some(0)) => s.push_str("; -S 0: untagged frames"),
        _ => {}
    }
    if !marks.flow_labels.is_empty() {
        let labels = marks.flow_labels_display();
        s.push_str(&match (encap, framed) {
            (Encapsulation::V2v4, true) => format!(
                "; --flow_label {labels}: IPv4 has no flow label, it chose each queue pair's UDP source port as rxe does"
            ),
            (Encapsulation::V2v4, false) => format!(
                "; --flow_label {labels}: not applied (IPv4 has no flow label, and the UDP socket's source port is fixed)"
            ),
            (Encapsulation::V2v6, false) => format!(
                "; --flow_label {labels}: not applied (the UDP socket's kernel writes the IPv6 header; --io packet writes it)"
            ),
            (Encapsulation::V2v6, true) => format!(
                "; --flow_label {labels}: IPv6 flow label per queue pair, round-robin, and rxe's UDP source port of it"
            ),
            (Encapsulation::V1, _) => {
                format!("; --flow_label {labels}: GRH flow label per queue pair, round-robin")
            }
        });
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marks(tclass: Option<u8>, sl: Option<u8>) -> Marks {
        Marks {
            tclass,
            sl,
            flow_labels: Vec::new(),
        }
    }

    #[test]
    fn v2_data_is_ect0_and_cnps_take_dscp_48() {
        let c = classes(RoceVersion::V2, &Marks::default(), 48, 6, true);
        assert_eq!((c.data.tclass, c.cnp.tclass), (0x02, 0xc2));
        assert_eq!((c.data.vlan, c.cnp.vlan, c.so_priority), (None, None, None));
        let c = classes(RoceVersion::V2, &marks(Some(104), None), 48, 6, false);
        assert_eq!(c.data.tclass, 106);
        let c = classes(RoceVersion::V2, &marks(Some(3), None), 48, 6, false);
        assert_eq!(c.data.tclass, 3, "CE as asked");
    }

    #[test]
    fn v1_takes_the_tclass_as_given() {
        let c = classes(RoceVersion::V1, &marks(Some(104), None), 48, 6, true);
        assert_eq!((c.data.tclass, c.cnp.tclass), (104, 0xc0));
    }

    #[test]
    fn a_nonzero_sl_tags_frames_and_sets_the_socket_priority_otherwise() {
        let tag = |pcp| {
            Some(VlanTag {
                pcp,
                dei: false,
                vid: 0,
            })
        };
        let c = classes(RoceVersion::V2, &marks(None, Some(11)), 48, 6, true);
        assert_eq!((c.data.vlan, c.cnp.vlan), (tag(3), tag(6)));
        assert_eq!(c.so_priority, None);
        let c = classes(RoceVersion::V2, &marks(None, Some(0)), 48, 6, true);
        assert_eq!((c.data.vlan, c.cnp.vlan), (None, None), "-S 0: untagged");
        let c = classes(RoceVersion::V2, &marks(None, Some(5)), 48, 6, false);
        assert_eq!((c.data.vlan, c.so_priority), (None, Some(5)));
    }

    #[test]
    fn the_priority_is_the_tag_else_the_dscp_over_8() {
        let c = classes(RoceVersion::V2, &marks(None, Some(3)), 48, 6, true);
        let v4 = Encapsulation::V2v4;
        assert_eq!((c.data.priority(v4), c.cnp.priority(v4)), (3, 6));
        // Untagged: --tclass 106 (DSCP 26) is priority 3, CNPs' DSCP 48 is 6.
        let c = classes(RoceVersion::V2, &marks(Some(106), None), 48, 6, true);
        assert_eq!((c.data.priority(v4), c.cnp.priority(v4)), (3, 6));
        let c = classes(RoceVersion::V2, &Marks::default(), 48, 5, true);
        assert_eq!((c.data.priority(v4), c.cnp.priority(v4)), (0, 6));
        // RoCE v1 untagged has no DSCP to trust.
        let c = classes(RoceVersion::V1, &marks(Some(106), None), 48, 6, true);
        assert_eq!(c.data.priority(Encapsulation::V1), 0);
    }

    #[test]
    fn the_header_line_says_what_each_packet_carries() {
        let m = Marks {
            tclass: Some(104),
            sl: Some(3),
            flow_labels: vec![5],
        };
        let c = classes(RoceVersion::V2, &m, 48, 6, true);
        assert_eq!(
            describe(&c, &m, Encapsulation::V2v6, true),
            "marks: IPv6 traffic class 0x6a (DSCP 26, ECT(0)) on data, 0xc2 (DSCP 48, ECT(0)) on CNPs; \
             -S 3: 802.1Q priority tag PCP 3 VLAN 0 (CNPs PCP 6); --flow_label 5: IPv6 flow label per \
             queue pair, round-robin, and rxe's UDP source port of it"
        );
        let c = classes(RoceVersion::V2, &m, 48, 6, false);
        let line = describe(&c, &m, Encapsulation::V2v4, false);
        assert!(line.contains("-S 3: SO_PRIORITY 3"), "{line}");
        assert!(line.contains("--flow_label 5: not applied"), "{line}");
    }
}
