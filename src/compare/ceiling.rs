//! What a message costs on an Ethernet link, per protocol: its packets, their bytes, and the goodput
//! ceiling they leave at a port speed and MTU.
//!
//! Pure arithmetic from the header lengths `crate::wire` declares (the IB transport headers of each
//! opcode, the GRH, IPv4 and UDP headers, the ICRC) and Ethernet's own cost per frame (header, FCS,
//! preamble and inter-frame gap, the 64-byte minimum frame). RoCE sends a message as packets of at
//! most the RoCE MTU, each with its headers and ICRC, and the responder answers with ACKs (one per
//! AckReq: the last packet of a message, and every 64 packets); TCP carries roceperf's frames (a
//! 24-byte header per message) as a byte stream cut into MSS-sized segments, ACKed every second
//! segment. ACKs travel the other way: on a full-duplex link they cost a one-way test nothing, and a
//! bidirectional one their bytes in each direction. The floors of `super::floor` take their frame
//! sizes from here too, so a floor moves the bytes its row's packets carry.

use crate::params::Verb;
use crate::wire::{
    Encapsulation, EthernetFrame, GrhPacket, ICRC_LEN, Ipv4Packet, Ipv6Packet, Opcode, UdpPacket,
    pad_len, stack_len,
};

/// Bytes of the preamble and start-of-frame delimiter before every Ethernet frame.
const PREAMBLE: u64 = 8;
/// Bytes of idle line (inter-frame gap) after every Ethernet frame.
const IFG: u64 = 12;
/// Bytes of the frame check sequence that ends every Ethernet frame.
const FCS: u64 = 4;
/// The shortest Ethernet frame, header to FCS: shorter payloads are padded.
const MIN_FRAME: u64 = 64;
/// Bytes of an untagged Ethernet header.
const ETH_HEADER: u64 = EthernetFrame::<&[u8]>::LEN as u64;
/// IPv4 (20) and TCP (20) headers with the timestamp option (12) Linux puts on every segment.
const TCP_IP_HEADERS: u64 = Ipv4Packet::<&[u8]>::LEN as u64 + 20 + 12;
/// Bytes of the header roceperf's TCP transport puts before every message (`transport::tcp::frame`).
pub(crate) const TCP_FRAME_HEADER: u64 = 24;
/// Bytes of the operand block after a TCP atomic request's header.
const TCP_ATOMIC_OPERANDS: u64 = 16;
/// Bytes an atomic operation moves: the 8-byte word perftest counts as its message.
const ATOMIC_BYTES: u64 = 8;
/// A requester asks for an ACK on the last packet of a message and after this many packets without one.
const ACK_EVERY: u64 = 64;
/// The RoCE MTUs, largest first.
const ROCE_MTUS: [u32; 5] = [4096, 2048, 1024, 512, 256];

/// What carries the messages: RoCE in one of its encapsulations, or roceperf's TCP transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Protocol {
    /// RoCE v1, v2/IPv4 or v2/IPv6.
    Roce(Encapsulation),
    /// The kernel's TCP over IPv4.
    Tcp,
}

impl Protocol {
    /// `RoCE v1`, `RoCE v2/IPv4`, `TCP/IPv4`.
    pub(crate) fn name(self) -> String {
        match self {
            Protocol::Roce(e) => e.to_string(),
            Protocol::Tcp => "TCP/IPv4".into(),
        }
    }

    /// The largest payload one packet carries on a link of `link_mtu`: the RoCE MTU (the largest of
    /// 4096 .. 256 whose worst packet fits the link MTU, as both RoCE transports pick it) or TCP's
    /// MSS. None when not even a 256-byte RoCE packet fits.
    pub(crate) fn payload_mtu(self, link_mtu: u32) -> Option<u32> {
        match self {
            Protocol::Roce(e) => ROCE_MTUS
                .into_iter()
                .find(|m| m + e.mtu_overhead() <= link_mtu),
            Protocol::Tcp => link_mtu.checked_sub(TCP_IP_HEADERS as u32),
        }
    }
}

/// Bytes a frame takes on the line, given what it carries after its Ethernet header: header, FCS,
/// padding up to the minimum frame, preamble and gap.
pub(crate) fn on_wire(after_ethernet: u64) -> u64 {
    (ETH_HEADER + after_ethernet + FCS).max(MIN_FRAME) + PREAMBLE + IFG
}

/// Bytes of the network headers in front of the BTH: the GRH for RoCE v1, IPv4 or IPv6 and UDP for v2.
fn network_len(e: Encapsulation) -> u64 {
    let udp = UdpPacket::<&[u8]>::LEN;
    (match e {
        Encapsulation::V1 => GrhPacket::<&[u8]>::LEN,
        Encapsulation::V2v4 => Ipv4Packet::<&[u8]>::LEN + udp,
        Encapsulation::V2v6 => Ipv6Packet::<&[u8]>::LEN + udp,
    }) as u64
}

/// The bytes of a RoCE v2 datagram (a UDP socket's payload) of opcode `op` carrying `payload`
/// bytes: the BTH and the extension headers `op` prescribes, the payload padded to 4 bytes, the ICRC.
pub(crate) fn datagram_len(op: Opcode, payload: u64) -> u64 {
    let headers = stack_len(op).unwrap_or(0) as u64;
    headers + payload + pad_len(payload as usize) as u64 + ICRC_LEN as u64
}

/// The bytes of a RoCE packet after its Ethernet header (what an AF_PACKET socket sends): the
/// network headers of `e`, then [`datagram_len`].
pub(crate) fn packet_len(e: Encapsulation, op: Opcode, payload: u64) -> u64 {
    network_len(e) + datagram_len(op, payload)
}

/// Packets of one opcode and payload, `count` of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Packets {
    /// The opcode.
    pub(crate) op: Opcode,
    /// Payload bytes of each.
    pub(crate) payload: u64,
    /// How many.
    pub(crate) count: u64,
}

/// The three opcodes of a multi-packet message and the one of a single-packet one.
struct Sequence {
    only: Opcode,
    first: Opcode,
    middle: Opcode,
    last: Opcode,
}

/// The packets that carry the data of one `verb` message of `size` bytes at RoCE MTU `mtu`: the
/// requests of SEND and WRITE, the responses of READ, the one request of an atomic.
pub(crate) fn data_packets(verb: Verb, size: u64, mtu: u32) -> Vec<Packets> {
    let seq = match verb {
        Verb::Send => Sequence {
            only: Opcode::RC_SEND_ONLY,
            first: Opcode::RC_SEND_FIRST,
            middle: Opcode::RC_SEND_MIDDLE,
            last: Opcode::RC_SEND_LAST,
        },
        Verb::Write => Sequence {
            only: Opcode::RC_RDMA_WRITE_ONLY,
            first: Opcode::RC_RDMA_WRITE_FIRST,
            middle: Opcode::RC_RDMA_WRITE_MIDDLE,
            last: Opcode::RC_RDMA_WRITE_LAST,
        },
        Verb::Read => Sequence {
            only: Opcode::RC_RDMA_READ_RESPONSE_ONLY,
            first: Opcode::RC_RDMA_READ_RESPONSE_FIRST,
            middle: Opcode::RC_RDMA_READ_RESPONSE_MIDDLE,
            last: Opcode::RC_RDMA_READ_RESPONSE_LAST,
        },
        // The operand travels in the AtomicETH, not as payload.
        Verb::Atomic => return vec![one(Opcode::RC_FETCH_ADD, 0, 1)],
    };
    let mtu = u64::from(mtu);
    let n = size.div_ceil(mtu).max(1);
    if n == 1 {
        return vec![one(seq.only, size, 1)];
    }
    let mut out = vec![one(seq.first, mtu, 1)];
    if n > 2 {
        out.push(one(seq.middle, mtu, n - 2));
    }
    out.push(one(seq.last, size - (n - 1) * mtu, 1));
    out
}

fn one(op: Opcode, payload: u64, count: u64) -> Packets {
    Packets { op, payload, count }
}

/// The packets of one `verb` message that travel against its data: the ACKs of a SEND or WRITE of
/// `data` packets, the request of a READ, the response of an atomic.
pub(crate) fn reverse_packets(verb: Verb, data: u64) -> Packets {
    match verb {
        Verb::Send | Verb::Write => one(Opcode::RC_ACKNOWLEDGE, 0, data.div_ceil(ACK_EVERY)),
        Verb::Read => one(Opcode::RC_RDMA_READ_REQUEST, 0, 1),
        Verb::Atomic => one(Opcode::RC_ATOMIC_ACKNOWLEDGE, 0, 1),
    }
}

/// What one message costs a link, each way.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Cost {
    /// The payload the test counts: the message size (an atomic's 8-byte word).
    pub(crate) payload: u64,
    /// Packets in the direction of the data (TCP: segments, a fraction when messages share them).
    pub(crate) packets: f64,
    /// Bytes on the line in the direction of the data, every frame's overhead included.
    pub(crate) wire_bytes: f64,
    /// Bytes on the line the other way (ACKs, READ requests, atomic responses).
    pub(crate) reverse_bytes: f64,
    /// The largest payload of one packet: the RoCE MTU, or TCP's MSS.
    pub(crate) payload_mtu: u32,
}

impl Cost {
    /// The goodput ceiling at `gbps` on the line: payload ÷ line bytes. One way (`both_ways`
    /// false), the reverse traffic rides the other direction of a full-duplex link and costs
    /// nothing; a bidirectional test carries data and the peer's reverse traffic in each direction.
    pub(crate) fn goodput(&self, gbps: f64, both_ways: bool) -> f64 {
        let line = self.wire_bytes + if both_ways { self.reverse_bytes } else { 0.0 };
        gbps * self.payload as f64 / line
    }
}

/// What one `verb` message of `size` bytes costs `protocol` on a link of MTU `link_mtu`; None when the
/// link MTU is too small for the protocol.
pub(crate) fn cost(protocol: Protocol, verb: Verb, size: u64, link_mtu: u32) -> Option<Cost> {
    let payload_mtu = protocol.payload_mtu(link_mtu)?;
    let payload = if verb == Verb::Atomic {
        ATOMIC_BYTES
    } else {
        size
    };
    Some(match protocol {
        Protocol::Roce(e) => {
            let data = data_packets(verb, size, payload_mtu);
            let wire = |p: &Packets| p.count * on_wire(packet_len(e, p.op, p.payload));
            let packets: u64 = data.iter().map(|p| p.count).sum();
            Cost {
                payload,
                packets: packets as f64,
                wire_bytes: data.iter().map(wire).sum::<u64>() as f64,
                reverse_bytes: wire(&reverse_packets(verb, packets)) as f64,
                payload_mtu,
            }
        }
        Protocol::Tcp => {
            // The stream packs messages into full segments: bytes per message, and the share of a
            // segment's overhead each carries.
            let (forward, back) = match verb {
                Verb::Send | Verb::Write => (TCP_FRAME_HEADER + size, 0),
                Verb::Read => (TCP_FRAME_HEADER + size, TCP_FRAME_HEADER),
                Verb::Atomic => (TCP_FRAME_HEADER + TCP_ATOMIC_OPERANDS, TCP_FRAME_HEADER),
            };
            let segment_cost = on_wire(TCP_IP_HEADERS) as f64;
            let mss = f64::from(payload_mtu);
            let segments = forward as f64 / mss;
            let back_segments = back as f64 / mss;
            // Every second segment is acknowledged (delayed ACK), by a header-only segment.
            let acks = segments / 2.0;
            Cost {
                payload,
                packets: segments,
                wire_bytes: forward as f64 + segments * segment_cost,
                reverse_bytes: back as f64 + (back_segments + acks) * segment_cost,
                payload_mtu,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1: Protocol = Protocol::Roce(Encapsulation::V1);
    const V2: Protocol = Protocol::Roce(Encapsulation::V2v4);

    fn close(got: f64, want: f64) {
        assert!(
            (got - want).abs() < 1e-9 * want.abs().max(1.0),
            "{got} != {want}"
        );
    }

    #[test]
    fn the_roce_mtu_is_the_largest_whose_worst_packet_fits_the_link() {
        // v1's worst packet adds 76 bytes (GRH 40, BTH 12, RETH 16, ImmDt 4, ICRC 4), v2/IPv4's 64.
        assert_eq!(V1.payload_mtu(9000), Some(4096));
        assert_eq!(V1.payload_mtu(1500), Some(1024)); // 2048 + 76 > 1500
        assert_eq!(V1.payload_mtu(1100), Some(1024)); // 1024 + 76 = 1100 exactly
        assert_eq!(V1.payload_mtu(1099), Some(512));
        assert_eq!(V2.payload_mtu(1088), Some(1024)); // 1024 + 64
        assert_eq!(V2.payload_mtu(300), None); // 256 + 64 > 300
        // TCP's MSS: 1500 - IPv4 20 - TCP 20 - timestamps 12.
        assert_eq!(Protocol::Tcp.payload_mtu(1500), Some(1448));
    }

    #[test]
    fn packet_lengths_follow_the_headers_of_each_opcode() {
        // A 2-byte WRITE: BTH 12 + RETH 16 + 2 + 2 pad + ICRC 4 = 36 in UDP (roce_ref udp-pingpong's
        // default), + GRH 40 = 76 for v1 (packet-pingpong's default), + IPv4 20 + UDP 8 = 64 for v2.
        assert_eq!(datagram_len(Opcode::RC_RDMA_WRITE_ONLY, 2), 36);
        assert_eq!(
            packet_len(Encapsulation::V1, Opcode::RC_RDMA_WRITE_ONLY, 2),
            76
        );
        assert_eq!(
            packet_len(Encapsulation::V2v4, Opcode::RC_RDMA_WRITE_ONLY, 2),
            64
        );
        // A 2-byte READ: request BTH 12 + RETH 16 + ICRC 4 = 32; response BTH 12 + AETH 4 + 4 + 4 = 24.
        assert_eq!(datagram_len(Opcode::RC_RDMA_READ_REQUEST, 0), 32);
        assert_eq!(datagram_len(Opcode::RC_RDMA_READ_RESPONSE_ONLY, 2), 24);
        // A full middle packet over v1: GRH 40 + BTH 12 + 4096 + ICRC 4 = 4152 (bench.sh's packet-stream).
        assert_eq!(
            packet_len(Encapsulation::V1, Opcode::RC_RDMA_WRITE_MIDDLE, 4096),
            4152
        );
        // Frames: 14 header + 4 FCS + 8 preamble + 12 gap around what follows the header; a frame
        // shorter than 64 bytes is padded: 20 bytes after the header make 14 + 20 + 4 = 38 -> 64.
        assert_eq!(on_wire(4152), 4152 + 38);
        assert_eq!(on_wire(20), 64 + 20);
    }

    #[test]
    fn a_message_is_cut_at_the_mtu_with_its_extension_headers_where_they_belong() {
        // 10000 bytes at 4096: 4096 + 4096 + 1808.
        assert_eq!(
            data_packets(Verb::Write, 10_000, 4096),
            [
                one(Opcode::RC_RDMA_WRITE_FIRST, 4096, 1),
                one(Opcode::RC_RDMA_WRITE_MIDDLE, 4096, 1),
                one(Opcode::RC_RDMA_WRITE_LAST, 1808, 1)
            ]
        );
        assert_eq!(
            data_packets(Verb::Send, 4096, 4096),
            [one(Opcode::RC_SEND_ONLY, 4096, 1)]
        );
        assert_eq!(
            data_packets(Verb::Read, 8192, 4096),
            [
                one(Opcode::RC_RDMA_READ_RESPONSE_FIRST, 4096, 1),
                one(Opcode::RC_RDMA_READ_RESPONSE_LAST, 4096, 1)
            ]
        );
        // 130 packets ask for 3 ACKs: after 64, after 128, and on the last.
        assert_eq!(reverse_packets(Verb::Write, 130).count, 3);
        assert_eq!(reverse_packets(Verb::Write, 16).count, 1);
    }

    #[test]
    fn roce_v2_write_of_64_kib_at_100g_mtu_9000() {
        let c = cost(V2, Verb::Write, 65536, 9000).unwrap();
        // RoCE MTU 4096: 16 packets.
        // FIRST:  IPv4 20 + UDP 8 + BTH 12 + RETH 16 + 4096 + ICRC 4 = 4156, + 38 of Ethernet = 4194.
        // 15 more (14 MIDDLE, 1 LAST): 20 + 8 + 12 + 4096 + 4 = 4140, + 38 = 4178 each.
        // 4194 + 15 * 4178 = 66864 bytes on the line for 65536 of payload.
        assert_eq!(c.payload_mtu, 4096);
        close(c.packets, 16.0);
        close(c.wire_bytes, 66864.0);
        // One ACK back: 20 + 8 + BTH 12 + AETH 4 + ICRC 4 = 48, + 38 = 86.
        close(c.reverse_bytes, 86.0);
        // 100 * 65536 / 66864 = 98.0139... Gb/s.
        close(c.goodput(100.0, false), 100.0 * 65536.0 / 66864.0);
        assert!((c.goodput(100.0, false) - 98.014).abs() < 1e-3);
        // Both ways, each direction also carries the peer's ACK: 100 * 65536 / (66864 + 86).
        close(c.goodput(100.0, true), 100.0 * 65536.0 / 66950.0);
    }

    #[test]
    fn roce_v1_costs_twelve_bytes_a_packet_more_than_v2_over_ipv4() {
        let c = cost(V1, Verb::Write, 65536, 9000).unwrap();
        // GRH 40 instead of IPv4 20 + UDP 8: FIRST 4168 + 38 = 4206, 15 others 4152 + 38 = 4190.
        // 4206 + 15 * 4190 = 67056; 100 * 65536 / 67056 = 97.733 Gb/s.
        close(c.wire_bytes, 67056.0);
        assert!((c.goodput(100.0, false) - 97.733).abs() < 1e-3);
        // Its ACK: GRH 40 + 12 + 4 + 4 = 60, + 38 = 98.
        close(c.reverse_bytes, 98.0);
        let v2 = cost(V2, Verb::Write, 65536, 9000).unwrap();
        close(c.wire_bytes - v2.wire_bytes, 16.0 * 12.0);
    }

    #[test]
    fn tcp_write_of_64_kib_at_100g_mtu_9000() {
        let c = cost(Protocol::Tcp, Verb::Write, 65536, 9000).unwrap();
        // roceperf's 24-byte frame header: 65560 bytes of stream per message, in segments of MSS
        // 9000 - 52 = 8948: 65560 / 8948 = 7.3268 segments, each costing IPv4 20 + TCP 32 + Ethernet
        // 38 = 90 bytes beyond its payload.
        let segments = 65560.0 / 8948.0;
        assert_eq!(c.payload_mtu, 8948);
        close(c.packets, segments);
        close(c.wire_bytes, 65560.0 + segments * 90.0);
        // 100 * 65536 / 66219.4 = 98.968 Gb/s.
        assert!((c.goodput(100.0, false) - 98.968).abs() < 1e-3);
        // An ACK (a header-only segment, 90 bytes) every second segment.
        close(c.reverse_bytes, segments / 2.0 * 90.0);
    }

    #[test]
    fn small_messages_pay_a_whole_frame_each() {
        // A 2-byte WRITE over v2 at 10G, link MTU 1500: one packet of 64 bytes after the header,
        // 64 + 38 = 102 on the line: 10 * 2 / 102 = 0.196 Gb/s.
        let c = cost(V2, Verb::Write, 2, 1500).unwrap();
        assert_eq!(c.payload_mtu, 1024);
        close(c.wire_bytes, 102.0);
        close(c.goodput(10.0, false), 10.0 * 2.0 / 102.0);
        // An atomic moves its 8-byte word in a FETCH_ADD: BTH 12 + AtomicETH 28 + ICRC 4 + 28 = 72,
        // + 38 = 110; its response: 12 + AETH 4 + AtomicAckETH 8 + 4 + 28 = 56, + 38 = 94.
        let a = cost(V2, Verb::Atomic, 8, 1500).unwrap();
        assert_eq!(a.payload, 8);
        close(a.wire_bytes, 110.0);
        close(a.reverse_bytes, 94.0);
    }

    #[test]
    fn read_data_rides_the_responses_and_the_request_goes_back() {
        // 8 KiB READ over v2, MTU 9000: FIRST and LAST responses, each BTH 12 + AETH 4 + 4096 +
        // ICRC 4 + 28 = 4144, + 38 = 4182; the request: 12 + RETH 16 + 4 + 28 = 60, + 38 = 98.
        let c = cost(V2, Verb::Read, 8192, 9000).unwrap();
        close(c.wire_bytes, 2.0 * 4182.0);
        close(c.reverse_bytes, 98.0);
        assert!(cost(V2, Verb::Read, 8192, 200).is_none());
    }
}
