//! Ethernet frames for the tests of what reads them in the kernel: the AF_PACKET socket's classic
//! filters (`packet`, `qp_filter`) and the TCX ingress program (`tcx`); and a classic BPF
//! interpreter for the filters.

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

/// Runs the subset of classic BPF that the socket filters use, as the kernel would: what it
/// returns (the bytes of the frame kept; 0 drops it).
pub(crate) fn run_bpf(prog: &[libc::sock_filter], pkt: &[u8]) -> u32 {
    let (mut a, mut x, mut pc) = (0u32, 0u32, 0usize);
    let byte = |o: usize| pkt.get(o).copied();
    let half = |o: usize| Some(u16::from_be_bytes([byte(o)?, byte(o + 1)?]) as u32);
    let word = |o: usize| Some(u32::from_be_bytes(pkt.get(o..o + 4)?.try_into().ok()?));
    loop {
        let i = prog[pc];
        pc += 1;
        // An out-of-bounds load ends the program with 0.
        let loaded = match i.code {
            0x20 => word(i.k as usize),
            0x28 => half(i.k as usize),
            0x30 => byte(i.k as usize).map(u32::from),
            0x40 => word(x as usize + i.k as usize),
            0x48 => half(x as usize + i.k as usize),
            _ => Some(a),
        };
        let Some(v) = loaded else { return 0 };
        a = v;
        match i.code {
            0x20 | 0x28 | 0x30 | 0x40 | 0x48 => {}
            0xb1 => match byte(i.k as usize) {
                Some(v) => x = 4 * (v as u32 & 0xf),
                None => return 0,
            },
            0x54 => a &= i.k,
            0x05 => pc += i.k as usize,
            0x15 => pc += if a == i.k { i.jt } else { i.jf } as usize,
            0x25 => pc += if a > i.k { i.jt } else { i.jf } as usize,
            0x35 => pc += if a >= i.k { i.jt } else { i.jf } as usize,
            0x45 => pc += if a & i.k != 0 { i.jt } else { i.jf } as usize,
            0x06 => return i.k,
            c => panic!("opcode {c:#x} not in the interpreter"),
        }
    }
}
