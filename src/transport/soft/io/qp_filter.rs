//! The receive filter of one endpoint on AF_PACKET: the classic BPF program that replaces the
//! socket's RoCE filter (`packet::roce_filter`) once the endpoint's queue pairs exist, and passes
//! only the RoCE frames addressed to them (BTH.DestQP in their range, or QP1 for the CM), and the
//! MAC Control frames PFC needs. Two endpoints on one interface (a congestion study's bulk receiver
//! and victim server) then no longer read, and drop as "unknown QP", each other's frames: the
//! kernel drops them at the socket, before they cost a copy or a turn of the poll loop.

use cbpf::*;

/// Classic BPF as the socket filters write it: the opcodes they use and the two instruction
/// shapes, jumps given absolute targets (converted to the offsets from the next instruction).
pub(crate) mod cbpf {
    pub(crate) const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    pub(crate) const LD_H_ABS: u16 = 0x28; // BPF_LD | BPF_H | BPF_ABS
    pub(crate) const LD_B_ABS: u16 = 0x30; // BPF_LD | BPF_B | BPF_ABS
    pub(crate) const LD_W_IND: u16 = 0x40; // BPF_LD | BPF_W | BPF_IND
    pub(crate) const LD_H_IND: u16 = 0x48; // BPF_LD | BPF_H | BPF_IND
    pub(crate) const LDX_MSH: u16 = 0xb1; // BPF_LDX | BPF_B | BPF_MSH
    pub(crate) const AND_K: u16 = 0x54; // BPF_ALU | BPF_AND | BPF_K
    pub(crate) const JA: u16 = 0x05; // BPF_JMP | BPF_JA
    pub(crate) const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    pub(crate) const JGT_K: u16 = 0x25; // BPF_JMP | BPF_JGT | BPF_K
    pub(crate) const JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
    pub(crate) const JSET_K: u16 = 0x45; // BPF_JMP | BPF_JSET | BPF_K
    pub(crate) const RET_K: u16 = 0x06; // BPF_RET | BPF_K
    /// What an accepting `ret` keeps of a frame: all of it.
    pub(crate) const ACCEPT_ALL: u32 = 262_144;

    /// An instruction without a conditional jump.
    pub(crate) fn op(code: u16, k: u32) -> libc::sock_filter {
        libc::sock_filter {
            code,
            jt: 0,
            jf: 0,
            k,
        }
    }

    /// Instruction `idx`, a conditional jump to `t` when true and `f` when false.
    pub(crate) fn jmp(idx: usize, code: u16, k: u32, t: usize, f: usize) -> libc::sock_filter {
        libc::sock_filter {
            code,
            jt: (t - idx - 1) as u8,
            jf: (f - idx - 1) as u8,
            k,
        }
    }

    /// Instruction `idx`, an unconditional jump to `target`.
    pub(crate) fn ja(idx: usize, target: usize) -> libc::sock_filter {
        op(JA, (target - idx - 1) as u32)
    }

    /// Instructions `at..at + 9`, the Ethertype loaded: IPv4 carrying UDP to `port` (not a later
    /// fragment, which has no UDP header) jumps to `to` with X = the IPv4 header's length; IPv6
    /// jumps to `ipv6`; anything else to `drop`.
    pub(crate) fn ipv4_udp_to(
        at: usize,
        port: u32,
        to: usize,
        ipv6: usize,
        drop: usize,
    ) -> [libc::sock_filter; 9] {
        [
            jmp(at, JEQ_K, 0x0800, at + 2, at + 1),
            jmp(at + 1, JEQ_K, 0x86dd, ipv6, drop),
            op(LD_B_ABS, 23),
            jmp(at + 3, JEQ_K, 17, at + 4, drop),
            op(LD_H_ABS, 20),
            jmp(at + 5, JSET_K, 0x1fff, drop, at + 6),
            op(LDX_MSH, 14),
            op(LD_H_IND, 16),
            jmp(at + 8, JEQ_K, port, to, drop),
        ]
    }

    /// Instructions `at..at + 4`: IPv6 (RoCE sends no extension headers) carrying UDP to `port`
    /// jumps to `to`, anything else to `drop`.
    pub(crate) fn ipv6_udp_to(
        at: usize,
        port: u32,
        to: usize,
        drop: usize,
    ) -> [libc::sock_filter; 4] {
        [
            op(LD_B_ABS, 20),
            jmp(at + 1, JEQ_K, 17, at + 2, drop),
            op(LD_H_ABS, 56),
            jmp(at + 3, JEQ_K, port, to, drop),
        ]
    }
}

/// The queue pairs an endpoint owns: `count` consecutive QPNs from `first`, modulo 2^24 (the
/// planner's numbering, which may wrap).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QpRange {
    /// The first queue pair's number.
    pub(crate) first: u32,
    /// How many.
    pub(crate) count: u32,
}

impl QpRange {
    /// The last QPN of the range (24 bits).
    fn last(self) -> u32 {
        (self.first + self.count.max(1) - 1) & 0xff_ffff
    }
}

/// The program, written out by hand (jump offsets count from the next instruction):
///
/// ```text
///  0: ldh [12]                 ; Ethertype
///  1: jeq #0x8808, 25, 2       ; MAC Control (PFC, pause) -> ACCEPT
///  2: jeq #0x8915, 3, 5        ; RoCE v1
///  3: ld [58]                  ; BTH bytes 4..8 behind the GRH: reserved, DestQP
///  4: ja 21
///  5: jeq #0x0800, 7, 6        ; IPv4
///  6: jeq #0x86dd, 16, 26      ; IPv6, else DROP
///  7: ldb [23]                 ; IPv4 protocol
///  8: jeq #17, 9, 26           ; UDP, else DROP
///  9: ldh [20]                 ; flags + fragment offset
/// 10: jset #0x1fff, 26, 11     ; a non-first fragment has no UDP header: DROP
/// 11: ldxb 4*([14]&0xf)        ; X = IPv4 header length
/// 12: ldh [x+16]               ; UDP destination port
/// 13: jeq #port, 14, 26
/// 14: ld [x+26]                ; BTH bytes 4..8 at 14 + IHL + 8 + 4
/// 15: ja 21
/// 16: ldb [20]                 ; IPv6 next header
/// 17: jeq #17, 18, 26
/// 18: ldh [56]                 ; UDP destination port
/// 19: jeq #port, 20, 26
/// 20: ld [66]                  ; BTH bytes 4..8 at 14 + 40 + 8 + 4
/// 21: and #0xffffff            ; DestQP
/// 22: jeq #1, 25, 23           ; QP1: the CM's MADs (-R)
/// 23: jge #first, 24, 26       ; (a range that wraps past 2^24: jge #first, 25, 24)
/// 24: jgt #last, 26, 25
/// 25: ret #262144              ; ACCEPT
/// 26: ret #0                   ; DROP
/// ```
///
/// A frame too short for a load ends the program with 0 (dropped), as the RoCE filter's do.
pub(crate) fn qp_filter(udp_port: u16, qps: QpRange) -> Vec<libc::sock_filter> {
    const QPN: usize = 21;
    const ACCEPT: usize = 25;
    const DROP: usize = 26;
    let port = u32::from(udp_port);
    let (first, last) = (qps.first & 0xff_ffff, qps.last());
    // Wrapped, the range is [first, 2^24) and [0, last]: at or above first passes at once.
    let above_first = if last < first { ACCEPT } else { 24 };
    let below_first = if last < first { 24 } else { DROP };
    let mut prog = vec![
        op(LD_H_ABS, 12),
        jmp(
            1,
            JEQ_K,
            u32::from(crate::wire::pfc::MAC_CONTROL_ETHERTYPE),
            ACCEPT,
            2,
        ),
        jmp(
            2,
            JEQ_K,
            u32::from(crate::wire::ethernet::ethertype::ROCE_V1),
            3,
            5,
        ),
        op(LD_W_ABS, 58),
        ja(4, QPN),
    ];
    prog.extend(ipv4_udp_to(5, port, 14, 16, DROP));
    prog.extend([op(LD_W_IND, 26), ja(15, QPN)]);
    prog.extend(ipv6_udp_to(16, port, 20, DROP));
    prog.extend([
        op(LD_W_ABS, 66),
        op(AND_K, 0xff_ffff),
        jmp(22, JEQ_K, 1, ACCEPT, 23),
        jmp(23, JGE_K, first, above_first, below_first),
        jmp(24, JGT_K, last, DROP, ACCEPT),
        op(RET_K, ACCEPT_ALL),
        op(RET_K, 0),
    ]);
    debug_assert_eq!(prog.len(), DROP + 1);
    prog
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::soft::io::test_frames::{eth, ipv4_udp, ipv6_udp, run_bpf};

    /// `frame` with BTH.DestQP set to `qpn`, the BTH starting at `bth`.
    fn to_qp(mut frame: Vec<u8>, bth: usize, qpn: u32) -> Vec<u8> {
        frame[bth + 5..bth + 8].copy_from_slice(&qpn.to_be_bytes()[1..]);
        frame
    }

    /// A RoCE v1 frame (GRH, then a BTH and 16 bytes) to `qpn`.
    fn v1(qpn: u32) -> Vec<u8> {
        to_qp(eth(0x8915, &[0x60; 40 + 28]), 54, qpn)
    }

    #[test]
    fn only_this_endpoints_queue_pairs_and_mac_control_pass() {
        let prog = qp_filter(
            4791,
            QpRange {
                first: 0x10,
                count: 4,
            },
        );
        let pass = |f: &[u8]| run_bpf(&prog, f) != 0;
        let v4 = |ihl: u8, qpn: u32| {
            let f = ipv4_udp([10, 77, 0, 1], ihl, 0x4000, 17, 4791);
            let bth = 14 + usize::from(ihl) * 4 + 8;
            to_qp(f, bth, qpn)
        };
        let v6 = |qpn: u32| to_qp(ipv6_udp("fd77::1", 17, 4791), 62, qpn);
        for qpn in 0x10..0x14 {
            assert!(pass(&v1(qpn)), "v1 to {qpn:#x}");
            assert!(pass(&v4(5, qpn)), "v2/IPv4 to {qpn:#x}");
            assert!(pass(&v4(6, qpn)), "v2/IPv4 with options to {qpn:#x}");
            assert!(pass(&v6(qpn)), "v2/IPv6 to {qpn:#x}");
        }
        for qpn in [0x0f, 0x14, 0x0, 0x2, 0x10_0010, 0xff_ffff] {
            assert!(!pass(&v1(qpn)), "v1 to {qpn:#x}, a neighbour's");
            assert!(!pass(&v4(5, qpn)), "v2/IPv4 to {qpn:#x}");
            assert!(!pass(&v6(qpn)), "v2/IPv6 to {qpn:#x}");
        }
        // The reserved byte before DestQP is not part of it.
        let mut f = v4(5, 0x11);
        f[14 + 20 + 8 + 4] = 0xff;
        assert!(pass(&f), "BTH's reserved byte is masked off");
        // QP1's MADs (the CM under -R) pass whatever the range.
        assert!(pass(&v4(5, 1)) && pass(&v1(1)));
        let mut pause = [0u8; 60];
        crate::wire::pfc::PauseRepr::priority(crate::wire::MacAddr([2, 0, 0, 0, 0, 9]), 3, 9)
            .emit(&mut pause);
        assert!(pass(&pause), "PFC pause, which the endpoint honours");
        // What the RoCE filter refuses, this one refuses too.
        assert!(!pass(&to_qp(
            ipv4_udp([10, 77, 0, 1], 5, 0, 17, 4792),
            42,
            0x10
        )));
        assert!(!pass(&to_qp(
            ipv4_udp([10, 77, 0, 1], 5, 0, 6, 4791),
            42,
            0x10
        )));
        assert!(!pass(&ipv4_udp([10, 77, 0, 1], 5, 0x2000 | 0x10, 17, 4791)));
        assert!(!pass(&eth(0x0806, &[0; 28])), "ARP");
        assert!(
            !pass(&eth(0x8915, &[0x60; 44])),
            "a v1 frame cut before DestQP"
        );
        assert!(!pass(&[0u8; 10]), "runt frame");
    }

    #[test]
    fn a_range_that_wraps_past_2_to_the_24_passes_both_ends() {
        let prog = qp_filter(
            4791,
            QpRange {
                first: 0xff_fffe,
                count: 4,
            },
        );
        let pass = |qpn: u32| run_bpf(&prog, &v1(qpn)) != 0;
        assert!(pass(0xff_fffe) && pass(0xff_ffff) && pass(0) && pass(1));
        assert!(!pass(2) && !pass(0xff_fffd) && !pass(0x80_0000));
        let one = qp_filter(
            4791,
            QpRange {
                first: 0x42,
                count: 1,
            },
        );
        assert!(run_bpf(&one, &v1(0x42)) != 0 && run_bpf(&one, &v1(0x43)) == 0);
    }
}
