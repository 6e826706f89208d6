//! Ethernet frames for the tests of what reads them in the kernel: the AF_PACKET socket's classic
//! filter (`packet`) and the TCX ingress program (`tcx`).

use std::net::Ipv6Addr;

/// An Ethernet frame of `ethertype` around `rest`.
pub(crate) fn eth(ethertype: u16, rest: &[u8]) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2];
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(rest);
    f
}

/// A UDP header for `dport` (length 24), then a BTH and ICRC's worth of zeros (16 bytes).
pub(crate) fn udp_datagram(dport: u16) -> Vec<u8> {
    let mut udp = vec![0xc0, 0x00, 0, 0, 0, 24, 0, 0];
    udp[2..4].copy_from_slice(&dport.to_be_bytes());
    udp.extend_from_slice(&[0u8; 16]);
    udp
}

/// An IPv4 frame from 10.77.0.2 to `dst` with a header of `ihl_words`, flags and fragment offset
/// `frag`, protocol `proto`, carrying [`udp_datagram`] to `dport`.
pub(crate) fn ipv4_udp(dst: [u8; 4], ihl_words: u8, frag: u16, proto: u8, dport: u16) -> Vec<u8> {
    let mut ip = vec![0u8; ihl_words as usize * 4];
    ip[0] = 0x40 | ihl_words;
    ip[6..8].copy_from_slice(&frag.to_be_bytes());
    ip[9] = proto;
    ip[12..16].copy_from_slice(&[10, 77, 0, 2]);
    ip[16..20].copy_from_slice(&dst);
    ip.extend_from_slice(&udp_datagram(dport));
    eth(0x0800, &ip)
}

/// An IPv6 frame to `dst` with next header `nh`, carrying [`udp_datagram`] to `dport`.
pub(crate) fn ipv6_udp(dst: &str, nh: u8, dport: u16) -> Vec<u8> {
    let dst: Ipv6Addr = dst.parse().expect("an IPv6 address");
    let mut ip = vec![0u8; 40];
    ip[0] = 0x60;
    ip[6] = nh;
    ip[24..40].copy_from_slice(&dst.octets());
    ip.extend_from_slice(&udp_datagram(dport));
    eth(0x86dd, &ip)
}
