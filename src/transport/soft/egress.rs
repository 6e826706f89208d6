//! The transmit framing: each engine packet as its path wants it on the wire. UDP leaves the headers
//! to the kernel and appends the ICRC; AF_PACKET writes every header around it. The device (the UDP
//! or AF_PACKET backend in [`super::io`]) then moves the ICRC of segment k of an IPv4 GSO
//! super-datagram to the IP ID the kernel gives it.

use super::engine::Engine;
use super::icrc_cache::HeaderIcrcs;
use super::path::Path;
use super::rc::{self, LoneAck};
use crate::wire::{BTH_HEAD_LEN, EthernetRepr, ICRC_LEN, NetRepr, Opcode};

/// What a queue pair's transmission fills packets with: the queue pair, its path, TX cache, clock
/// and ACK policy, gathered once, so that each packet's fill closure (built per packet, and moved
/// into the device's) carries one reference rather than five.
pub(crate) struct QpTx<'a, N> {
    pub qp: &'a mut Engine,
    pub path: &'a Path,
    pub cache: &'a mut TxCache,
    pub now: N,
    pub acks: LoneAck,
}

impl<'a, N: FnMut() -> rc::Instant> QpTx<'a, N> {
    /// What `qp` fills packets with along `path`, its TX `cache`, the clock `now` and `acks`.
    #[inline(always)]
    pub(crate) fn new(
        qp: &'a mut Engine,
        path: &'a Path,
        cache: &'a mut TxCache,
        now: N,
        acks: LoneAck,
    ) -> Self {
        QpTx {
            qp,
            path,
            cache,
            now,
            acks,
        }
    }

    /// Lets the queue pair write its next packet along its path into `buf`, finished for the wire
    /// (the ICRC valid for IPv4 ID 0); `None` when it has none (a lone ACK may be kept for the next
    /// call, as `acks` says).
    #[inline(always)]
    pub(crate) fn fill(&mut self, buf: &mut [u8]) -> Option<usize> {
        let (qp, now, acks) = (&mut *self.qp, &mut self.now, self.acks);
        frame(self.path, self.cache, buf, |ib| {
            qp.poll_transmit_with(now, ib, acks)
        })
    }
}

/// As [`QpTx::fill`], the CNP `qp` owes its peer only (a PFC pause holds every other packet).
pub(crate) fn fill_cnp(
    qp: &mut Engine,
    path: &Path,
    cache: &mut TxCache,
    buf: &mut [u8],
) -> Option<usize> {
    frame(path, cache, buf, |ib| qp.poll_cnp(ib))
}

/// What a queue pair's transmissions keep between packets, for its path (fixed at connect): the
/// ICRCs started over its header, and on AF_PACKET the headers themselves.
pub(crate) struct TxCache {
    /// ICRCs started over the path's header and fed a BTH head
    /// ([`Icrc::update_bth_head`](crate::wire::Icrc::update_bth_head)), by BTH-through-pad length
    /// and that head ([`bth_head`]): a queue pair's packets of one length and opcode hash only
    /// their PSN word and what follows it.
    icrcs: HeaderIcrcs<(usize, u64)>,
    /// AF_PACKET: the Ethernet and network headers in front of a packet, by BTH-through-pad
    /// length and whether it is a CNP (its own class): they depend on nothing else, so a frame
    /// copies them rather than writing each field (and the IPv4 checksum) again. Boxed: a queue
    /// pair's slot stays as small as it was for the receive path, which indexes the slots.
    headers: Box<HeaderIcrcs<(usize, bool), FrameHeader>>,
}

impl TxCache {
    /// Nothing kept yet.
    pub(crate) fn new() -> TxCache {
        TxCache {
            icrcs: HeaderIcrcs::new(),
            headers: Box::new(HeaderIcrcs::new()),
        }
    }
}

/// The longest Ethernet and network header a frame carries: a priority tag and IPv6 with UDP.
const MAX_FRAME_HEADER: usize = 18 + 40 + 8;

/// Ethernet and network headers as a frame carries them: the first `len` bytes.
#[derive(Clone, Copy)]
struct FrameHeader {
    bytes: [u8; MAX_FRAME_HEADER],
    len: usize,
}

/// The ICRC of `ib` (BTH through pad) under `net`, from the start `icrcs` keeps for its length and
/// BTH head (made and kept on a miss). Always inlined: a packet's hit is a few compares, less than
/// the call's frame.
#[inline(always)]
fn icrc_of(icrcs: &mut HeaderIcrcs<(usize, u64)>, net: &NetRepr, ib: &[u8]) -> u32 {
    let key = (ib.len(), bth_head(ib));
    icrcs
        .kept(key)
        .unwrap_or_else(|| start_of(icrcs, net, ib, key))
        .finish_after_bth_head(ib)
}

/// [`icrc_of`]'s start on a miss: made over `net`'s header and `ib`'s BTH head, and kept.
#[cold]
#[inline(never)]
fn start_of(
    icrcs: &mut HeaderIcrcs<(usize, u64)>,
    net: &NetRepr,
    ib: &[u8],
    key: (usize, u64),
) -> crate::wire::Icrc {
    icrcs.get(key, || {
        let mut start = net.icrc_start(ib.len());
        start.update_bth_head(ib);
        start
    })
}

/// The first [`BTH_HEAD_LEN`] bytes of `ib`'s BTH as the ICRC sees them (byte 4, FECN and BECN,
/// masked to ones): the part of a kept start that a packet must match.
#[inline]
fn bth_head(ib: &[u8]) -> u64 {
    let mut head = [0u8; BTH_HEAD_LEN];
    head.copy_from_slice(&ib[..BTH_HEAD_LEN]);
    u64::from_le_bytes(head) | 0xff << 32
}

/// Lets `write_ib` write one packet's IB part (BTH..pad) where `path` wants it in `buf`, and
/// finishes it for the wire: UDP leaves the IP and UDP headers to the kernel and appends the ICRC
/// (which still covers them, through `net`'s reprs); AF_PACKET writes every header around it.
/// `cache` keeps the ICRC started over the path's header per length, so a packet hashes only its
/// own bytes, and the headers a frame copies in front of it.
#[inline]
pub(crate) fn frame(
    path: &Path,
    cache: &mut TxCache,
    buf: &mut [u8],
    write_ib: impl FnOnce(&mut [u8]) -> Option<usize>,
) -> Option<usize> {
    // One call of `write_ib`, wherever the path wants the IB part: the engine's transmission is
    // then inlined here rather than called through a closure of its own.
    let at = match path {
        Path::Udp { .. } => 0,
        Path::Frame { eth, net, .. } => eth.header_len() + net.header_len(),
    };
    let len = write_ib(&mut buf[at..])?;
    match path {
        Path::Udp { net, .. } => {
            // The packet and its ICRC checked against `buf` once, not each part apart.
            let (ib, icrc_at) = buf[..len + ICRC_LEN].split_at_mut(len);
            let icrc = icrc_of(&mut cache.icrcs, net, ib);
            icrc_at.copy_from_slice(&icrc.to_le_bytes());
            Some(len + ICRC_LEN)
        }
        Path::Frame { eth, net, cnp } => {
            let icrc = icrc_of(&mut cache.icrcs, net, &buf[at..at + len]);
            // A CNP leaves with its own class (DSCP and priority tag); the ICRC masks the class, so
            // the start kept for data is its start too. Data and CNPs are both tagged or both not,
            // so the headers have one length.
            let is_cnp = buf[at] == Opcode::CNP.0;
            let header = cache.headers.get((len, is_cnp), || {
                let mut h = FrameHeader {
                    bytes: [0; MAX_FRAME_HEADER],
                    len: at,
                };
                if is_cnp {
                    let eth = EthernetRepr {
                        vlan: cnp.vlan,
                        ..*eth
                    };
                    emit_headers(&mut h.bytes, &eth, &net.with_tclass(cnp.tclass), len);
                } else {
                    emit_headers(&mut h.bytes, eth, net, len);
                }
                h
            });
            buf[..at].copy_from_slice(&header.bytes[..header.len]);
            buf[at + len..at + len + ICRC_LEN].copy_from_slice(&icrc.to_le_bytes());
            Some(at + len + ICRC_LEN)
        }
    }
}

/// Writes Ethernet and network headers in front of the `ib_len` bytes the engine wrote at
/// `buf[header_len..]` and the ICRC after them; returns the frame length. `start` is the ICRC
/// started over the header `net` emits for `ib_len` bytes ([`NetRepr::icrc_start`]). The tests'
/// way to frame a packet by hand; the transmissions take their kept starts ([`frame`]).
#[cfg(test)]
pub(crate) fn frame_around(
    buf: &mut [u8],
    eth: &EthernetRepr,
    net: &NetRepr,
    ib_len: usize,
    start: crate::wire::Icrc,
) -> usize {
    let ib_at = emit_headers(buf, eth, net, ib_len);
    let icrc = start.finish_ib(&buf[ib_at..ib_at + ib_len]);
    buf[ib_at + ib_len..ib_at + ib_len + ICRC_LEN].copy_from_slice(&icrc.to_le_bytes());
    ib_at + ib_len + ICRC_LEN
}

/// Writes the Ethernet header (its EtherType `net`'s) and `net` for `ib_len` bytes of BTH through
/// pad at the start of `buf`; returns where the BTH goes.
fn emit_headers(buf: &mut [u8], eth: &EthernetRepr, net: &NetRepr, ib_len: usize) -> usize {
    let mut eth = *eth;
    eth.ethertype = net.ethertype();
    eth.emit(buf);
    let net_at = eth.header_len();
    let ib_at = net_at + net.header_len();
    net.emit(&mut buf[net_at..ib_at], ib_len);
    ib_at
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;
    use crate::transport::soft::io::move_icrc_to_ipv4_id;
    use crate::transport::soft::path::{ipv4_repr, ipv6_repr};
    use crate::wire::{
        BthRepr, Gid, GrhRepr, IbRepr, Ipv4IdCache, MacAddr, Opcode, RoceFrameRepr, UdpRepr,
    };

    /// A SEND ONLY of 4 bytes, BTH..pad, as an engine would write it.
    fn ib() -> Vec<u8> {
        let net = NetRepr::V2v4(
            ipv4_repr(Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST),
            UdpRepr::roce(1),
        );
        let mut buf = vec![0u8; 64];
        let n = net.emit_transport(
            &IbRepr::new(BthRepr::new(Opcode::RC_SEND_ONLY, 0x12, 9)),
            &[1, 2, 3, 4],
            &mut buf,
        );
        buf.truncate(n - ICRC_LEN);
        buf
    }

    /// An untagged Ethernet header and a network header of each encapsulation, 10.0.0.1 to
    /// 10.0.0.2 (fd00::1 to fd00::2 over IPv6).
    fn eth_and_nets() -> (EthernetRepr, [NetRepr; 3]) {
        let eth = EthernetRepr {
            dst: MacAddr([2, 0, 0, 0, 0, 2]),
            src: MacAddr([2, 0, 0, 0, 0, 1]),
            vlan: None,
            ethertype: 0,
        };
        let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        let nets = [
            NetRepr::V1(GrhRepr {
                tclass: 0,
                flow_label: 0,
                hop_limit: 64,
                sgid: Gid::from(a.to_ipv6_mapped()),
                dgid: Gid::from(b.to_ipv6_mapped()),
            }),
            NetRepr::V2v4(ipv4_repr(a, b), UdpRepr::roce(0xc000)),
            NetRepr::V2v6(
                ipv6_repr("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap()),
                UdpRepr::roce(0xc000),
            ),
        ];
        (eth, nets)
    }

    #[test]
    fn framed_packets_parse_with_a_valid_icrc_in_every_encapsulation() {
        let (eth, nets) = eth_and_nets();
        let ib = ib();
        for net in nets {
            let mut buf = vec![0xa5u8; 256];
            let at = eth.header_len() + net.header_len();
            buf[at..at + ib.len()].copy_from_slice(&ib);
            let len = frame_around(&mut buf, &eth, &net, ib.len(), net.icrc_start(ib.len()));
            let (repr, payload) = RoceFrameRepr::parse(&buf[..len]).expect("valid frame");
            assert_eq!(repr.net, net);
            assert_eq!(repr.eth.ethertype, net.ethertype());
            assert_eq!(payload, [1, 2, 3, 4]);
        }
    }

    /// Kept starts (by length and BTH head) give every packet the ICRC a fresh start gives it:
    /// packets of one length that differ in opcode, pad, destination QP, AckReq, PSN, FECN/BECN or
    /// payload, through one cache, on both paths and in every encapsulation.
    #[test]
    fn kept_icrc_starts_give_the_bytes_of_fresh_ones() {
        let (eth, nets) = eth_and_nets();
        // (opcode, dest QP, PSN, AckReq, BECN, payload): lengths 16 and 32 come back with
        // another head, another PSN, AckReq or BECN, or other bytes.
        let packets: Vec<(u8, u32, u32, bool, bool, Vec<u8>)> = (0..40u32)
            .map(|i| {
                let opcode = [0x04, 0x0a, 0x04, 0x00, 0x11][i as usize % 5];
                let qp = if i % 7 == 0 { 0x33 } else { 0x12 };
                let payload = (0..[2usize, 4, 3, 16, 18][i as usize % 5])
                    .map(|j| (i * 31 + j as u32) as u8)
                    .collect();
                (opcode, qp, i * 977, i % 3 == 0, i % 4 == 1, payload)
            })
            .collect();
        for net in nets {
            let udp = Path::Udp {
                dst: "10.0.0.2:4791".parse().unwrap(),
                net,
            };
            let frame_path = Path::Frame {
                eth,
                net,
                cnp: crate::transport::soft::marks::Class {
                    tclass: 0xc2,
                    vlan: None,
                },
            };
            for path in [udp, frame_path] {
                let mut icrcs = TxCache::new();
                for (opcode, qp, psn, ack_req, becn, payload) in &packets {
                    let mut bth = BthRepr::new(Opcode(*opcode), *qp, *psn);
                    bth.ack_req = *ack_req;
                    bth.becn = *becn;
                    let mut repr = IbRepr::new(bth);
                    repr.bth.pad_count = crate::wire::pad_len(payload.len()) as u8;
                    let op = Opcode(*opcode);
                    repr.reth = op.has_reth().then_some(crate::wire::RethRepr {
                        va: u64::from(*psn) << 12,
                        rkey: 0x1234,
                        dma_len: payload.len() as u32,
                    });
                    repr.aeth = op.has_aeth().then_some(crate::wire::AethRepr {
                        syndrome: 0x1f,
                        msn: *psn,
                    });
                    let mut ib = vec![0u8; repr.header_len() + payload.len() + 3];
                    let n = crate::transport::soft::rc::packet::emit(&mut ib, &repr, payload);
                    ib.truncate(n);
                    // Every ninth a CNP of 28 bytes, as long as a SEND ONLY of 16: its own class.
                    let is_cnp = psn % 9 == 4;
                    if is_cnp {
                        let mut bth = BthRepr::new(Opcode::CNP, *qp, 0);
                        bth.becn = true;
                        ib = vec![0u8; 28];
                        bth.emit(&mut ib[..12]);
                    }
                    let n = ib.len();
                    let mut kept = vec![0u8; 256];
                    let len = frame(&path, &mut icrcs, &mut kept, |out| {
                        out[..ib.len()].copy_from_slice(&ib);
                        Some(ib.len())
                    })
                    .unwrap();
                    let fresh = match path {
                        Path::Udp { .. } => [&ib[..], &net.icrc(&ib).to_le_bytes()].concat(),
                        Path::Frame { cnp, .. } => {
                            let mut buf = vec![0u8; 256];
                            let at = eth.header_len() + net.header_len();
                            buf[at..at + ib.len()].copy_from_slice(&ib);
                            let (eth, class) = match is_cnp {
                                true => (
                                    EthernetRepr {
                                        vlan: cnp.vlan,
                                        ..eth
                                    },
                                    cnp.tclass,
                                ),
                                false => (eth, net.tclass()),
                            };
                            let net = net.with_tclass(class);
                            let len =
                                frame_around(&mut buf, &eth, &net, ib.len(), net.icrc_start(n));
                            buf.truncate(len);
                            buf
                        }
                    };
                    assert_eq!(
                        kept[..len],
                        fresh[..],
                        "{path:?}: opcode {opcode:#x} PSN {psn}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_moved_icrc_is_the_icrc_under_that_ip_id() {
        let ib = ib();
        let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        let mut ids = Ipv4IdCache::new();
        for id in [1u16, 2, 63] {
            let at_zero = NetRepr::V2v4(ipv4_repr(a, b), UdpRepr::roce(7));
            let mut pkt = [&ib[..], &at_zero.icrc(&ib).to_le_bytes()].concat();
            move_icrc_to_ipv4_id(&mut pkt, id, &mut ids);
            let at_id = NetRepr::V2v4(
                crate::wire::Ipv4Repr {
                    ident: id,
                    ..ipv4_repr(a, b)
                },
                UdpRepr::roce(7),
            );
            assert_eq!(pkt[ib.len()..], at_id.icrc(&ib).to_le_bytes(), "ID {id}");
        }
    }

    #[test]
    fn a_cnp_leaves_with_its_own_class_and_a_valid_icrc() {
        use crate::transport::soft::marks::Class;
        use crate::wire::VlanTag;
        let tag = |pcp| {
            Some(VlanTag {
                pcp,
                dei: false,
                vid: 0,
            })
        };
        let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        let path = Path::Frame {
            eth: EthernetRepr {
                dst: MacAddr([2, 0, 0, 0, 0, 2]),
                src: MacAddr([2, 0, 0, 0, 0, 1]),
                vlan: tag(3),
                ethertype: 0,
            },
            net: NetRepr::V2v4(ipv4_repr(a, b), UdpRepr::roce(0xc000)).with_tclass(0x6a),
            cnp: Class {
                tclass: 0xc2,
                vlan: tag(6),
            },
        };
        let mut icrcs = TxCache::new();
        // A hand-made CNP: BTH opcode 0x81 with BECN, PSN 0, 16 reserved zero bytes.
        let mut bth = BthRepr::new(Opcode::CNP, 0x12, 0);
        bth.becn = true;
        let mut cnp_ib = [0u8; 28];
        bth.emit(&mut cnp_ib[..12]);
        let data_ib = ib();
        for (ib, tclass, pcp) in [(&cnp_ib[..], 0xc2, 6), (&data_ib[..], 0x6a, 3)] {
            let mut buf = vec![0u8; 256];
            let len = frame(&path, &mut icrcs, &mut buf, |out| {
                out[..ib.len()].copy_from_slice(ib);
                Some(ib.len())
            })
            .unwrap();
            let (repr, _) = RoceFrameRepr::parse(&buf[..len]).expect("valid frame and ICRC");
            assert_eq!(repr.net.tclass(), tclass);
            assert_eq!(repr.eth.vlan.map(|t| t.pcp), Some(pcp));
            // The IPv4 header checksum follows the TOS.
            let sum: u32 = buf[18..38]
                .chunks(2)
                .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
                .sum();
            assert_eq!(
                (sum & 0xffff) + (sum >> 16),
                0xffff,
                "header checksum valid"
            );
        }
    }

    /// tshark (which the project's scripts install; without it this fails rather than passes)
    /// decodes a CNP the egress framed: RRoCE, 802.1Q priority 6, DSCP 48 with ECT(0), the
    /// opcode it names "Unknown OpCode" (0x81), destination QP and PSN 0.
    #[test]
    fn tshark_decodes_a_cnp_the_egress_wrote() {
        use crate::transport::soft::marks::classes;
        let c = classes(
            crate::params::RoceVersion::V2,
            &crate::params::Marks {
                sl: Some(3),
                ..Default::default()
            },
            48,
            6,
            true,
        );
        let path = Path::Frame {
            eth: EthernetRepr {
                dst: MacAddr([2, 0, 0, 0, 0, 2]),
                src: MacAddr([2, 0, 0, 0, 0, 1]),
                vlan: c.data.vlan,
                ethertype: 0,
            },
            net: NetRepr::V2v4(
                ipv4_repr(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2)),
                UdpRepr::roce(0xc000),
            )
            .with_tclass(c.data.tclass),
            cnp: c.cnp,
        };
        let mut bth = BthRepr::new(Opcode::CNP, 0x12_3456, 0);
        bth.becn = true;
        let mut buf = vec![0u8; 128];
        let len = frame(&path, &mut TxCache::new(), &mut buf, |out| {
            out[..28].fill(0);
            bth.emit(&mut out[..12]);
            Some(28)
        })
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let pcap = dir.path().join("cnp.pcap");
        let mut file = Vec::new();
        for w in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 65535, 1] {
            file.extend_from_slice(&w.to_le_bytes());
        }
        for w in [0u32, 0, len as u32, len as u32] {
            file.extend_from_slice(&w.to_le_bytes());
        }
        file.extend_from_slice(&buf[..len]);
        std::fs::write(&pcap, file).unwrap();
        let fields = [
            "_ws.col.Protocol",
            "vlan.priority",
            "vlan.id",
            "ip.dsfield.dscp",
            "ip.dsfield.ecn",
            "infiniband.bth.opcode",
            "infiniband.bth.destqp",
            "infiniband.bth.psn",
            "_ws.col.Info",
        ];
        let mut cmd = std::process::Command::new("tshark");
        cmd.arg("-r").arg(&pcap).args(["-T", "fields"]);
        for f in fields {
            cmd.args(["-e", f]);
        }
        let out = cmd
            .output()
            .expect("tshark runs (apt-get install -y tshark; scripts/deps.sh installs it)");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        let got: Vec<&str> = text.trim_end().split('\t').collect();
        assert_eq!(
            got[..8],
            ["RRoCE", "6", "0", "48", "2", "129", "0x123456", "0"],
            "{text}"
        );
        assert!(got[8].contains("Unknown OpCode"), "{text}");
    }
}
