//! What the soft transport marks its packets with, decided once from `--tclass`, `-S` and the CNP
//! settings: the TOS / traffic class byte and the 802.1Q priority tag of data packets and of CNPs,
//! and the socket priority of the UDP backend. Pure.

use crate::params::RoceVersion;
use crate::params::marks::{ECT0, Marks, v2_tos};
use crate::wire::VlanTag;

/// One class of packets on the wire: its TOS / traffic class byte and its priority tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Class {
    /// RoCE v2: the IPv4 TOS / IPv6 traffic class; RoCE v1: the GRH traffic class.
    pub tclass: u8,
    /// The 802.1Q priority tag of frames the soft transport writes itself (AF_PACKET).
    pub vlan: Option<VlanTag>,
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
}
