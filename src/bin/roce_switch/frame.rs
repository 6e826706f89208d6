//! What the switch reads in a frame: where it goes, its priority, whether it is ECN-capable; and the
//! one rewrite it makes, the CE mark.

use roceperf::wire::pfc::frame_priority;
use roceperf::wire::set_ipv4_ecn;

/// `ETH_P_8021Q`: an 802.1Q tag follows the source address.
const VLAN: u16 = 0x8100;
const IPV4: u16 = 0x0800;
const IPV6: u16 = 0x86dd;
/// Destination, source, EtherType.
pub const ETH_HEADER: usize = 14;
/// An 802.1Q tag's bytes.
pub const VLAN_TAG: usize = 4;

/// A frame's ECN field, as a switch sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ecn {
    /// Not IP (ARP, MAC Control, RoCE v1): nothing to mark, and no RED drop.
    NotIp,
    /// IP, Not-ECT.
    NotEct,
    /// IP, ECT(0) or ECT(1).
    Ect,
    /// IP, already CE.
    Ce,
}

/// What the switch needs of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Class {
    /// Its ECN field.
    pub ecn: Ecn,
    /// Its priority: the 802.1Q PCP when tagged, else the DSCP's class selector (DSCP >> 3, "trust
    /// DSCP"), else 0.
    pub prio: u8,
    /// Where its IP header starts, and whether it is IPv6.
    ip: Option<(usize, bool)>,
}

/// Reads `frame` (from the destination MAC on); `tci` is the tag the kernel took off into the
/// packet's metadata (veth and lo do), if any.
pub fn classify(frame: &[u8], tci: Option<u16>) -> Class {
    let ethertype = |at: usize| {
        frame
            .get(at..at + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
    };
    let (tci, inner, ip_at) = match ethertype(12) {
        Some(VLAN) => {
            let tag = ethertype(14);
            (tag, ethertype(16), ETH_HEADER + VLAN_TAG)
        }
        other => (tci, other, ETH_HEADER),
    };
    let pcp = tci.map(|t| (t >> 13) as u8);
    let ip = match inner {
        Some(IPV4) if frame.len() >= ip_at + 20 => Some((ip_at, false)),
        Some(IPV6) if frame.len() >= ip_at + 40 => Some((ip_at, true)),
        _ => None,
    };
    let tos = ip.map(|(at, v6)| {
        if v6 {
            (frame[at] << 4) | (frame[at + 1] >> 4)
        } else {
            frame[at + 1]
        }
    });
    let ecn = match tos.map(|t| t & 3) {
        None => Ecn::NotIp,
        Some(0) => Ecn::NotEct,
        Some(3) => Ecn::Ce,
        Some(_) => Ecn::Ect,
    };
    Class {
        ecn,
        prio: frame_priority(pcp, tos.map(|t| t >> 2)),
        ip,
    }
}

/// Marks `frame` Congestion Experienced: ECN bits 11, and for IPv4 a new header checksum. RoCE's
/// ICRC masks the TOS / traffic class and the IPv4 checksum, so it stays valid.
pub fn mark_ce(frame: &mut [u8], class: &Class) {
    if let Some((at, v6)) = class.ip {
        mark_ce_header(&mut frame[at..], v6);
    }
}

/// Where a frame's IP header lies, to mark it later (`--mark-at dequeue`): its offset, its length
/// (IPv4: IHL × 4; IPv6: the two bytes holding the traffic class) and whether it is IPv6. None when
/// there is nothing to mark.
pub fn ip_span(frame: &[u8], class: &Class) -> Option<(usize, usize, bool)> {
    match class.ip {
        Some((at, false)) => {
            let len = usize::from(*frame.get(at)? & 0x0f) * 4;
            (len >= 20 && frame.len() >= at + len).then_some((at, len, false))
        }
        Some((at, true)) => (frame.len() >= at + 2).then_some((at, 2, true)),
        None => None,
    }
}

/// Marks the IP header `header` (of [`ip_span`]'s length) Congestion Experienced, as [`mark_ce`].
pub fn mark_ce_header(header: &mut [u8], v6: bool) {
    if v6 {
        header[1] |= 0x30;
    } else {
        set_ipv4_ecn(header, 3);
    }
}

/// The destination MAC.
pub fn dst(frame: &[u8]) -> [u8; 6] {
    let mut m = [0u8; 6];
    m.copy_from_slice(&frame[..6]);
    m
}

/// The source MAC.
pub fn src(frame: &[u8]) -> [u8; 6] {
    let mut m = [0u8; 6];
    m.copy_from_slice(&frame[6..12]);
    m
}

/// Link-local control frames (01:80:C2:00:00:0x: pause, LLDP, STP) that no bridge forwards.
pub fn is_link_local(dst: &[u8; 6]) -> bool {
    dst[..5] == [0x01, 0x80, 0xc2, 0x00, 0x00] && dst[5] & 0xf0 == 0
}

/// Broadcast or multicast: flooded.
pub fn is_group(dst: &[u8; 6]) -> bool {
    dst[0] & 1 == 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use roceperf::wire::{RoceFrame, ipv4_checksum_ok};

    /// A CNP a ConnectX-4 Lx sent (scapy's roce.uts): RoCE v2, TOS 0xC2 (DSCP 48, ECT(0)).
    fn connectx_cnp() -> Vec<u8> {
        let hex = include_str!("../../../tests/data/vectors/v2_cnp_connectx4lx.hex").trim();
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn a_marked_roce_v2_frame_keeps_a_valid_icrc_and_ipv4_checksum() {
        let mut f = connectx_cnp();
        RoceFrame::new_checked(f.as_slice())
            .unwrap()
            .verify_icrc()
            .unwrap();
        let c = classify(&f, None);
        assert_eq!(c.ecn, Ecn::Ect);
        assert_eq!(c.prio, 6, "DSCP 48 >> 3");
        mark_ce(&mut f, &c);
        assert_eq!(f[15], 0xc3, "DSCP kept, ECN 11");
        assert!(ipv4_checksum_ok(&f[14..]), "the IPv4 checksum follows");
        let marked = RoceFrame::new_checked(f.as_slice()).unwrap();
        marked.verify_icrc().unwrap();
        assert_eq!(classify(&f, None).ecn, Ecn::Ce);
    }

    #[test]
    fn priority_is_the_pcp_when_tagged_else_the_dscp_class() {
        let mut f = connectx_cnp();
        assert_eq!(
            classify(&f, Some(3 << 13)).prio,
            3,
            "a tag in the metadata wins"
        );
        // The tag in the frame itself.
        let mut tagged = f[..12].to_vec();
        tagged.extend_from_slice(&[0x81, 0x00, 0xa0, 0x00]);
        tagged.extend_from_slice(&f[12..]);
        let c = classify(&tagged, None);
        assert_eq!((c.prio, c.ecn), (5, Ecn::Ect));
        mark_ce(&mut tagged, &c);
        assert_eq!(tagged[19], 0xc3);
        // Not IP: no ECN, priority 0.
        f[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(classify(&f, None), classify(&f, None));
        assert_eq!(classify(&f, None).ecn, Ecn::NotIp);
        assert_eq!(classify(&f, None).prio, 0);
    }

    #[test]
    fn ipv6_traffic_class_is_read_and_marked() {
        let mut f = vec![0u8; 14 + 40];
        f[12..14].copy_from_slice(&IPV6.to_be_bytes());
        // Version 6, traffic class 0x62 (DSCP 24, ECT(0)).
        f[14] = 0x60 | 0x06;
        f[15] = 0x20;
        let c = classify(&f, None);
        assert_eq!((c.ecn, c.prio), (Ecn::Ect, 3));
        mark_ce(&mut f, &c);
        assert_eq!((f[14], f[15]), (0x66, 0x30));
        assert_eq!(classify(&f, None).ecn, Ecn::Ce);
    }

    #[test]
    fn pause_frames_are_link_local_and_broadcast_floods() {
        assert!(is_link_local(&[0x01, 0x80, 0xc2, 0, 0, 1]));
        assert!(!is_link_local(&[0x01, 0x80, 0xc2, 0, 0, 0x21]));
        assert!(is_group(&[0xff; 6]));
        assert!(!is_group(&[0x02, 0, 0, 0, 0, 1]));
    }
}
