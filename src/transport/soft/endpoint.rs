//! [`SoftEndpoint`]: the soft transport's [`Endpoint`]. Real RoCE packets from userspace.
//!
//! One endpoint owns one I/O backend (a UDP socket for RoCE v2, or an AF_PACKET socket for v1 and
//! v2), one receive and one transmit batch, and per queue pair one sans-IO RC engine ([`Qp`]) with
//! its registered buffer. There are no threads: [`Endpoint::poll_cq`] is the NIC. Each call
//! receives a batch, verifies and demultiplexes it by BTH.DestQP into the engines, fires due
//! timers, lets every engine fill the transmit batch (framing each packet and computing its ICRC),
//! sends the batch with one syscall, and hands out completions. Work posted between two calls is
//! transmitted first, before the receive. Nothing on that path allocates.
//!
//! Two endpoints on one host: RoCE v2 lives on UDP port 4791, so each side needs its own address.
//! On `lo` that is automatic: a second endpoint finds 127.0.0.1:4791 taken and moves to the next
//! free 127.0.0.x (the peer learns the address from [`ConnInfo::addr`]); an explicit `bind` is
//! never moved. Otherwise use two network namespaces (`scripts/netns.sh up`), which is also what
//! AF_PACKET and RoCE v1 need, since frames must cross a real (virtual) link.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6};
use std::time::Instant;

use serde::Serialize;

use super::io::batch::{RxBatch, RxDatagram, RxFrame, TxBatch};
use super::io::gso::GsoTxBatch;
use super::io::impair::{ImpairConfig, ImpairParseError, ImpairStats, Impairer};
use super::io::packet::{PacketConfig, PacketSocket};
use super::io::udp::{UdpConfig, UdpSocket};
use super::io::{IoError, ROCE_V2_PORT};
use super::netdev::{
    AddrFamily, Encap, NetDev, NetdevError, RoceMtu, eui64_link_local, gid_of_ip, ip_of_gid,
    mac_of_eui64,
};
use super::rc::{ConfigError, MemoryTable, MrKeys, NakCounts, Qp, QpConfig};
use crate::params::{RoceVersion, TransportKind};
use crate::transport::{
    Access, Completion, ConnInfo, Endpoint, Error, QpInfo, RecvRequest, Result, SendRequest,
};
use crate::wire::{
    EthernetRepr, GrhRepr, ICRC_LEN, Icrc, Ipv4IdCache, Ipv4Repr, Ipv6Repr, NetRepr, RoceFrame,
    UdpRepr,
};

/// Which I/O backend carries the packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IoKind {
    /// A UDP socket on port 4791: RoCE v2 only, unprivileged.
    Udp,
    /// AF_PACKET raw frames: RoCE v1 and v2, needs CAP_NET_RAW.
    Packet,
}

impl IoKind {
    /// `udp` or `packet`, as on the command line.
    pub fn name(self) -> &'static str {
        match self {
            IoKind::Udp => "udp",
            IoKind::Packet => "packet",
        }
    }
}

/// Everything that configures a soft endpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct SoftConfig {
    /// Network interface (`-d`).
    pub device: String,
    /// RoCE version (`--roce`).
    pub version: RoceVersion,
    /// I/O backend.
    pub io: IoKind,
    /// Local address to use; default: the interface's first address of `family`.
    pub bind: Option<IpAddr>,
    /// Address family for RoCE v2 when `bind` is not given.
    pub family: AddrFamily,
    /// GID table index (`-x`): picks the GID, and for RoCE v2 the address, from
    /// [`NetDev::gids_for`]. Overrides `family`; must agree with `bind` when both are given.
    pub gid_index: Option<u32>,
    /// Requested path MTU (`-m`); the interface's active MTU caps it.
    pub mtu: Option<u32>,
    /// Queue pairs (`-q`).
    pub qps: usize,
    /// Bytes of registered buffer per queue pair.
    pub buffer_len: usize,
    /// Send-queue depth per QP.
    pub sq_depth: usize,
    /// Receive-queue depth per QP.
    pub rq_depth: usize,
    /// UDP port of both sides (4791; tests on one host may use another with the UDP backend).
    pub udp_port: u16,
    /// Packets per receive and transmit batch.
    pub batch: usize,
    /// Deliberate transmit impairment; `None` reads `ROCEPERF_IMPAIR`.
    pub impair: Option<ImpairConfig>,
    /// Local ACK timeout code (4.096 µs × 2^t).
    pub timeout: u8,
    /// Retransmissions without progress before the QP fails (a dead peer becomes an error).
    pub retry_cnt: u8,
    /// Outstanding READs per QP, both directions.
    pub max_rd_atomic: u32,
    /// UDP backend only: send runs of equal packets as one UDP_SEGMENT super-datagram and receive
    /// with UDP_GRO (on by default). Several times faster; segment k of an IPv4 send carries IP ID k,
    /// and its ICRC is computed for it. Captures on the sending host (lo, veth) show super-datagrams:
    /// turn it off to see every packet. Impairment turns it off by itself (it works on single packets).
    pub gso: bool,
    /// AF_PACKET backend only: receive through a PACKET_MMAP ring of this many frames instead of
    /// `recvmmsg` (0: no ring). An idle poll then costs a memory load instead of a syscall.
    pub packet_rx_ring: usize,
    /// Unacknowledged PSNs a requester lets out before it waits. rxe uses 128; a userspace peer
    /// whose thread may be descheduled for milliseconds needs a deeper window to keep the link busy.
    pub max_unacked_psns: u32,
}

impl SoftConfig {
    /// Defaults: UDP backend for v2 (AF_PACKET for v1), IPv4, one QP with a 64 KiB buffer.
    pub fn new(device: &str, version: RoceVersion) -> SoftConfig {
        SoftConfig {
            device: device.to_string(),
            version,
            io: match version {
                RoceVersion::V1 => IoKind::Packet,
                RoceVersion::V2 => IoKind::Udp,
            },
            bind: None,
            family: AddrFamily::Ipv4,
            gid_index: None,
            mtu: None,
            qps: 1,
            buffer_len: 65536,
            sq_depth: 512,
            rq_depth: 512,
            udp_port: ROCE_V2_PORT,
            batch: 64,
            impair: None,
            timeout: 14,
            retry_cnt: 7,
            max_rd_atomic: 16,
            max_unacked_psns: 1024,
            gso: true,
            packet_rx_ring: 512,
        }
    }
}

/// Setup errors of the soft transport; each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum SoftError {
    /// The interface could not be used.
    #[error(transparent)]
    Netdev(#[from] NetdevError),
    /// The socket could not be opened.
    #[error(transparent)]
    Io(#[from] IoError),
    /// A queue-pair attribute is out of range.
    #[error(transparent)]
    Qp(#[from] ConfigError),
    /// `ROCEPERF_IMPAIR` is malformed.
    #[error(transparent)]
    Impair(#[from] ImpairParseError),
    /// The options do not fit together; the text says which and what to use instead.
    #[error("{0}")]
    Usage(String),
    /// The peer's description does not fit ours.
    #[error("peer mismatch: {0}")]
    Peer(String),
}

impl From<SoftError> for Error {
    fn from(e: SoftError) -> Error {
        match e {
            SoftError::Peer(m) => Error::Connection(m),
            other => Error::Unavailable(other.to_string()),
        }
    }
}

/// Received packets dropped, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DropSummary {
    /// The ICRC did not match.
    pub bad_icrc: u64,
    /// No queue pair of this endpoint has the BTH.DestQP.
    pub unknown_qpn: u64,
    /// Too short, cut (truncated), inconsistent lengths, or a header RoCE never sends.
    pub malformed: u64,
    /// Addressed to another host or GID, or of the other RoCE version.
    pub not_for_us: u64,
    /// Dropped by an engine, all reasons below together.
    pub protocol: u64,
    /// Requests beyond the expected PSN after the one PSN-sequence NAK was sent.
    pub out_of_sequence: u64,
    /// Duplicate requests with nothing to replay.
    pub duplicate_unmatched: u64,
    /// ACKs and responses for PSNs no work request waits for (stale, duplicated, out of order).
    pub stale_response: u64,
    /// Responses whose opcode, length or AETH do not fit the request they answer.
    pub bad_response: u64,
    /// Requests left for the peer to retransmit because the answer queue was full.
    pub response_queue_full: u64,
    /// Packets for a queue pair in the error state.
    pub qp_error: u64,
}

/// The counters `-v` prints and the JSON report carries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SoftCounters {
    /// Packets received from the backend.
    pub rx_packets: u64,
    /// Packets handed to the backend.
    pub tx_packets: u64,
    /// Receive syscalls that returned packets.
    pub rx_batches: u64,
    /// Transmit syscalls.
    pub tx_batches: u64,
    /// Request packets retransmitted (go-back-N).
    pub retransmitted_packets: u64,
    /// Retransmission timer expiries.
    pub timeouts: u64,
    /// Duplicate requests received.
    pub duplicate_requests: u64,
    /// ACKs (and atomic ACKs) the responders sent, re-ACKs of duplicates included.
    pub acks_sent: u64,
    /// ACKs (and atomic ACKs) the requesters accepted.
    pub acks_received: u64,
    /// NAKs sent, by kind.
    pub naks_sent: NakCounts,
    /// NAKs received, by kind.
    pub naks_received: NakCounts,
    /// Remote accesses refused for a bad rkey, bounds or rights (out-of-bounds access).
    pub remote_access_violations: u64,
    /// Receive drops, by reason.
    pub drops: DropSummary,
    /// What the deliberate impairment did.
    pub impair: ImpairStats,
}

impl std::fmt::Display for SoftCounters {
    /// The `-v` block: one line per family of counters.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = |k: &NakCounts| {
            format!(
                "psn-sequence {} rnr {} invalid-request {} remote-access {} remote-operational {}",
                k.psn_seq, k.rnr, k.invalid_request, k.remote_access, k.remote_operational
            )
        };
        let d = &self.drops;
        writeln!(
            f,
            " packets: sent {} in {} batches, received {} in {} batches",
            self.tx_packets, self.tx_batches, self.rx_packets, self.rx_batches
        )?;
        writeln!(
            f,
            " retransmitted packets {}, timeouts {}, duplicate requests {}, ACKs sent {} received {}",
            self.retransmitted_packets,
            self.timeouts,
            self.duplicate_requests,
            self.acks_sent,
            self.acks_received
        )?;
        writeln!(f, " NAKs sent: {}", n(&self.naks_sent))?;
        writeln!(f, " NAKs received: {}", n(&self.naks_received))?;
        writeln!(
            f,
            " drops: bad-icrc {} unknown-qpn {} malformed {} not-for-us {} protocol {} out-of-bounds-access {}",
            d.bad_icrc,
            d.unknown_qpn,
            d.malformed,
            d.not_for_us,
            d.protocol,
            self.remote_access_violations
        )?;
        writeln!(
            f,
            " protocol drops: out-of-sequence {} duplicate-unmatched {} stale-response {} bad-response {} response-queue-full {} qp-error {}",
            d.out_of_sequence,
            d.duplicate_unmatched,
            d.stale_response,
            d.bad_response,
            d.response_queue_full,
            d.qp_error
        )?;
        let i = &self.impair;
        if *i != ImpairStats::default() {
            writeln!(
                f,
                " deliberate impairment: dropped {} duplicated {} reordered {} corrupted {}",
                i.dropped, i.duplicated, i.reordered, i.corrupted
            )?;
        }
        Ok(())
    }
}

/// The I/O backend in use.
enum Backend {
    Udp(UdpSocket),
    Packet(PacketSocket),
}

/// How to frame packets to the peer, fixed at connect.
#[derive(Clone, Copy)]
enum Path {
    /// UDP socket: the kernel writes Ethernet/IP/UDP; we need the reprs for the ICRC only.
    Udp { dst: SocketAddr, net: NetRepr },
    /// AF_PACKET: every header ours.
    Frame { eth: EthernetRepr, net: NetRepr },
}

/// One queue pair: its keys and, until connect, its memory; after connect, its engine.
struct QpSlot {
    qpn: u32,
    psn: u32,
    keys: MrKeys,
    mem: Option<MemoryTable>,
    qp: Option<Qp>,
    /// The per-QP framing (UDP source port differs per QP on AF_PACKET).
    path: Option<Path>,
}

/// The soft transport's endpoint. See the module documentation.
pub struct SoftEndpoint {
    cfg: SoftConfig,
    dev: NetDev,
    encap: Encap,
    local_ip: Option<IpAddr>,
    gid: [u8; 16],
    mtu: RoceMtu,
    /// Setup decisions worth telling the user (MTU capped, address moved).
    notes: Vec<String>,
    backend: Backend,
    rx: RxBatch,
    /// What `transmit` queues for the next send.
    out: Outbox,
    /// How the IPv4 ID moves the ICRC, per packet length: UDP receive checks and GSO segment IDs.
    ipv4_ids: Ipv4IdCache,
    slots: Vec<QpSlot>,
    impairer: Option<Impairer>,
    epoch: Instant,
    counters: SoftCounters,
    /// Round-robin start for completions and transmission, so no QP starves.
    next_qp: usize,
}

/// 24-bit pseudo-random values for QPNs and PSNs, from the clock and the process id.
fn seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    splitmix(t ^ (u64::from(std::process::id()) << 32))
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// rxe's UDP source port for a QP pair (roce-wire.md §8.1): symmetric, in 0xC000..=0xFFFF.
pub fn rxe_udp_sport(lqpn: u32, rqpn: u32) -> u16 {
    let mut v = u64::from(lqpn) * u64::from(rqpn);
    v ^= v >> 20;
    v ^= v >> 40;
    let fl = (v & 0xf_ffff) as u32;
    (((fl & 0x3fff) ^ ((fl & 0xf_c000) >> 14)) | 0xc000) as u16
}

impl SoftEndpoint {
    /// Discovers the interface, opens the backend and registers one buffer per QP.
    pub fn open(cfg: SoftConfig) -> std::result::Result<SoftEndpoint, SoftError> {
        if cfg.version == RoceVersion::V1 && cfg.io == IoKind::Udp {
            return Err(SoftError::Usage(
                "RoCE v1 (Ethertype 0x8915) cannot travel over a UDP socket; use --io packet (needs CAP_NET_RAW) or --roce v2".into(),
            ));
        }
        if cfg.qps == 0 || cfg.qps > 0xffff {
            return Err(SoftError::Usage(format!(
                "-q {}: the soft transport supports 1..65535 queue pairs",
                cfg.qps
            )));
        }
        let dev = NetDev::by_name(&cfg.device)?;
        dev.require_up()?;
        let impair = match cfg.impair {
            Some(i) => Some(i),
            None => ImpairConfig::from_env()?,
        }
        .filter(|i| !i.is_none());
        let mut cfg = cfg;
        if let Some(x) = cfg.gid_index {
            let table = dev.gids_for(cfg.version);
            let Some(entry) = table.get(x as usize) else {
                let list: Vec<String> = table
                    .iter()
                    .enumerate()
                    .map(|(i, e)| format!("{i}: {e}"))
                    .collect();
                return Err(SoftError::Usage(format!(
                    "-x {x}: interface {} has {} RoCE {} GIDs ({}); pick one of them",
                    dev.name,
                    table.len(),
                    cfg.version,
                    if list.is_empty() {
                        "none".into()
                    } else {
                        list.join("; ")
                    }
                )));
            };
            match (cfg.version, entry.ip, cfg.bind) {
                (_, Some(ip), Some(b)) if ip != b => {
                    return Err(SoftError::Usage(format!(
                        "-x {x} selects GID {} of address {ip}, but the address {b} was also asked for; give one of them",
                        Ipv6Addr::from(entry.gid)
                    )));
                }
                (RoceVersion::V2, ip, _) => cfg.bind = ip,
                (RoceVersion::V1, _, _) => {}
            }
        }
        let v1_gid = cfg
            .gid_index
            .and_then(|x| dev.gids_for(RoceVersion::V1).get(x as usize).map(|e| e.gid));
        let (encap, mut local_ip, mut gid) = match cfg.version {
            RoceVersion::V2 => {
                let ip = match cfg.bind {
                    Some(ip) => ip,
                    None => dev.address(cfg.family)?,
                };
                let encap = if ip.is_ipv4() {
                    Encap::V2Ipv4
                } else {
                    Encap::V2Ipv6
                };
                (encap, Some(ip), gid_of_ip(ip))
            }
            RoceVersion::V1 => {
                // The default GID (EUI-64 from the MAC) unless an address was asked for.
                let gid = match (v1_gid, cfg.bind, dev.mac) {
                    (Some(g), _, _) => g,
                    (None, Some(ip), _) => gid_of_ip(ip),
                    (None, None, Some(mac)) => eui64_link_local(mac),
                    (None, None, None) => gid_of_ip(dev.address(cfg.family)?),
                };
                (Encap::V1, None, gid)
            }
        };
        if let Some(ip) = cfg.bind.or(local_ip)
            && !dev.has_address(ip)
        {
            return Err(IoError::AddrNotOnInterface {
                addr: ip,
                dev: dev.name.clone(),
                available: dev
                    .ipv4
                    .iter()
                    .map(|a| a.to_string())
                    .chain(dev.ipv6.iter().map(|a| a.to_string()))
                    .collect(),
            }
            .into());
        }
        let active = dev.active_mtu(encap)?;
        let mut notes = Vec::new();
        let mtu = match cfg.mtu {
            None => active,
            Some(m) => {
                let want = RoceMtu::from_bytes(m).ok_or(ConfigError::Pmtu(m))?;
                if want > active {
                    notes.push(format!(
                        "-m {m} exceeds the active MTU {active} of {} (link MTU {}); using {active}",
                        dev.name, dev.link_mtu
                    ));
                    active
                } else {
                    want
                }
            }
        };
        // Slots: a whole frame (Ethernet + VLAN room + network header) around the largest packet.
        let slot_len = 18 + 48 + 40 + mtu.bytes() as usize + 3 + ICRC_LEN;
        // GSO is a UDP-socket feature; impairment drops, duplicates and reorders single packets.
        if cfg.io != IoKind::Udp {
            cfg.gso = false;
        }
        if cfg.gso && impair.is_some() {
            cfg.gso = false;
            notes.push("UDP GSO/GRO off: ROCEPERF_IMPAIR works on single datagrams".into());
        }
        // GRO hands over up to 64 KiB of merged datagrams at once.
        let rx_slot = if cfg.gso { 65_536 } else { slot_len };
        let backend = match cfg.io {
            IoKind::Udp => {
                let ucfg = UdpConfig {
                    port: cfg.udp_port,
                    batch: cfg.batch,
                    slot_len: rx_slot,
                    gro: cfg.gso,
                    zero_checksum: !cfg.gso,
                    ..UdpConfig::default()
                };
                let ip = local_ip.expect("v2 has a local address");
                match UdpSocket::bind(&dev, ip, &ucfg) {
                    Ok(sock) => Backend::Udp(sock),
                    // Two roceperfs on one host's lo: the second takes the next free 127.0.0.x
                    // by itself (the peer learns it from ConnInfo), unless an address was asked for.
                    Err(IoError::PortInUse { .. })
                        if cfg.bind.is_none()
                            && cfg.gid_index.is_none()
                            && dev.loopback
                            && ip.is_ipv4() =>
                    {
                        let (sock, alt) = (2..=254u8)
                            .map(|x| IpAddr::V4(Ipv4Addr::new(127, 0, 0, x)))
                            .find_map(|alt| {
                                UdpSocket::bind(&dev, alt, &ucfg).ok().map(|s| (s, alt))
                            })
                            .ok_or(IoError::PortInUse {
                                addr: ip,
                                port: cfg.udp_port,
                            })?;
                        notes.push(format!(
                            "{ip}:{} is taken (another roceperf on this host?); using {alt} instead",
                            cfg.udp_port
                        ));
                        local_ip = Some(alt);
                        gid = gid_of_ip(alt);
                        Backend::Udp(sock)
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            IoKind::Packet => {
                if !dev.loopback {
                    dev.require_mac()?;
                }
                let pcfg = PacketConfig {
                    udp_port: cfg.udp_port,
                    batch: cfg.batch,
                    slot_len,
                    // netem (when present) must see our frames; bypassing the qdisc would skip it.
                    qdisc_bypass: false,
                    rx_ring_frames: cfg.packet_rx_ring,
                    ..PacketConfig::default()
                };
                Backend::Packet(PacketSocket::open(&dev, &pcfg)?)
            }
        };
        let r = seed();
        let qpn_base = ((r as u32) & 0x7f_ff00).max(0x100) | 0x11;
        let access = Access::LOCAL_WRITE
            | Access::REMOTE_WRITE
            | Access::REMOTE_READ
            | Access::REMOTE_ATOMIC;
        let slots = (0..cfg.qps)
            .map(|i| {
                let mut mem = MemoryTable::new((qpn_base + i as u32) & 0xff);
                let keys = mem.add_registered(cfg.buffer_len, access);
                QpSlot {
                    qpn: (qpn_base + i as u32) & 0xff_ffff,
                    psn: (splitmix(r ^ i as u64) & 0xff_ffff) as u32,
                    keys,
                    mem: Some(mem),
                    qp: None,
                    path: None,
                }
            })
            .collect();
        Ok(SoftEndpoint {
            rx: RxBatch::new(cfg.batch, rx_slot),
            out: Outbox {
                plain: TxBatch::new(cfg.batch, slot_len),
                gso: cfg
                    .gso
                    .then(|| GsoTxBatch::new(cfg.batch.min(32), slot_len)),
            },
            impairer: impair.as_ref().map(Impairer::new),
            ipv4_ids: Ipv4IdCache::new(),
            cfg,
            dev,
            encap,
            local_ip,
            gid,
            mtu,
            notes,
            backend,
            slots,
            epoch: Instant::now(),
            counters: SoftCounters::default(),
            next_qp: 0,
        })
    }

    /// The active path MTU (before connect: ours; after: the one both sides use).
    pub fn mtu(&self) -> u32 {
        self.mtu.bytes()
    }

    /// The GID this endpoint uses.
    pub fn gid(&self) -> [u8; 16] {
        self.gid
    }

    /// The interface it runs on.
    pub fn netdev(&self) -> &NetDev {
        &self.dev
    }

    /// Counters of the endpoint and all its engines.
    pub fn counters(&self) -> SoftCounters {
        let mut c = self.counters;
        for q in self.slots.iter().filter_map(|s| s.qp.as_ref()) {
            let k = q.counters();
            c.retransmitted_packets += k.retransmitted_packets;
            c.timeouts += k.timeouts;
            c.duplicate_requests += k.duplicate_requests;
            c.acks_sent += k.acks_sent;
            c.acks_received += k.acks_received;
            c.naks_sent.add(&k.naks_sent);
            c.naks_received.add(&k.naks_received);
            c.remote_access_violations += k.remote_access_violations;
            let d = k.drops;
            c.drops.unknown_qpn += d.unknown_qpn;
            c.drops.malformed += d.malformed;
            c.drops.protocol += d.out_of_sequence
                + d.duplicate_unmatched
                + d.stale_response
                + d.bad_response
                + d.response_queue_full
                + d.qp_error;
            c.drops.out_of_sequence += d.out_of_sequence;
            c.drops.duplicate_unmatched += d.duplicate_unmatched;
            c.drops.stale_response += d.stale_response;
            c.drops.bad_response += d.bad_response;
            c.drops.response_queue_full += d.response_queue_full;
            c.drops.qp_error += d.qp_error;
        }
        if let Some(i) = &self.impairer {
            c.impair = i.stats;
        }
        c
    }

    /// What this endpoint is and why, for `-v`: interface (with its MTU and GID tables), backend, GID,
    /// MTU, impairment.
    pub fn describe(&self) -> String {
        self.setup_lines(true).join("\n  ")
    }

    /// What the run header keeps of [`describe`](Self::describe): one line each for the backend, the
    /// interface (without its tables), the GID, the MTU, every note and the impairment.
    pub fn setup_notes(&self) -> Vec<String> {
        self.setup_lines(false)
    }

    fn setup_lines(&self, interface_tables: bool) -> Vec<String> {
        let backend = match &self.backend {
            Backend::Udp(s) if self.cfg.gso => format!(
                "UDP socket {}, GSO/GRO: {}",
                s.local_addr(),
                if self.out.gso.is_some() {
                    "up to 64 packets per send (a capture on this host may show them merged; --no-gso shows each)"
                } else {
                    "1 packet per send (the peer needs single datagrams)"
                },
            ),
            Backend::Udp(s) => format!("UDP socket {}", s.local_addr()),
            Backend::Packet(s) => format!("AF_PACKET on ifindex {}", s.ifindex()),
        };
        let interface = if interface_tables {
            self.dev.describe().replace('\n', "\n  ")
        } else {
            self.dev.summary()
        };
        let mut lines = vec![
            format!(
                "soft transport: {} over {backend} ({} I/O)",
                self.encap,
                self.cfg.io.name()
            ),
            format!("interface {interface}"),
            format!(
                "GID {} ({})",
                Ipv6Addr::from(self.gid),
                self.local_ip
                    .map(|ip| format!("address {ip}"))
                    .unwrap_or_else(|| "RoCE v1 GRH GID".into()),
            ),
            format!(
                "active MTU {} (link MTU {}, {} bytes of {} headers)",
                self.mtu,
                self.dev.link_mtu,
                self.encap.overhead(),
                self.encap,
            ),
        ];
        lines.extend(self.notes.iter().map(|n| format!("note: {n}")));
        if let Some(i) = &self
            .cfg
            .impair
            .or_else(|| ImpairConfig::from_env().ok().flatten())
            && self.impairer.is_some()
        {
            lines.push(format!("deliberate transmit impairment: {i}"));
        }
        lines
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// The framing for one QP towards the peer.
    fn path_to(
        &self,
        peer: &ConnInfo,
        lqpn: u32,
        rqpn: u32,
    ) -> std::result::Result<Path, SoftError> {
        let peer_gid = peer.gid;
        match (&self.backend, self.cfg.version) {
            (Backend::Udp(sock), _) => {
                let local = sock.local_addr();
                // The peer's socket address (its port too: two endpoints may share an address on
                // different ports in tests), else its GID and our port.
                let mut dst = match &peer.addr {
                    Some(a) => a.parse::<SocketAddr>().map_err(|_| {
                        SoftError::Peer(format!("peer address '{a}' is not IP:port"))
                    })?,
                    None => SocketAddr::new(ip_of_gid(peer_gid), self.cfg.udp_port),
                };
                let peer_ip = dst.ip();
                if let (SocketAddr::V6(d), IpAddr::V6(v6)) = (&mut dst, peer_ip)
                    && v6.is_unicast_link_local()
                {
                    *d = SocketAddrV6::new(v6, d.port(), 0, self.dev.index);
                }
                let udp = UdpRepr {
                    src_port: local.port(),
                    dst_port: dst.port(),
                    checksum: 0,
                };
                match (local.ip(), peer_ip) {
                    (IpAddr::V4(src), IpAddr::V4(dst4)) => Ok(Path::Udp {
                        dst,
                        net: NetRepr::V2v4(ipv4_repr(src, dst4), udp),
                    }),
                    (IpAddr::V6(src), IpAddr::V6(dst6)) => Ok(Path::Udp {
                        dst,
                        net: NetRepr::V2v6(ipv6_repr(src, dst6), udp),
                    }),
                    (l, p) => Err(SoftError::Peer(format!(
                        "this side uses {l} and the peer {p}: both must be IPv4 or both IPv6"
                    ))),
                }
            }
            (Backend::Packet(_), version) => {
                // A verbs or perftest peer sends only its GID: a link-local one holds the MAC, an
                // IP-based (v2) one is looked up in the kernel's neighbour table.
                let peer_mac = match (peer.mac, mac_of_eui64(peer_gid), self.local_ip) {
                    (Some(m), _, _) => m,
                    (None, _, _) if self.dev.loopback => [0; 6],
                    (None, Some(m), _) => m,
                    (None, None, Some(local)) if version == RoceVersion::V2 => {
                        super::neighbour::resolve(&self.dev, local, ip_of_gid(peer_gid))
                            .map_err(SoftError::Peer)?
                    }
                    (None, None, _) => {
                        return Err(SoftError::Peer(
                            "the peer sent no MAC address and its RoCE v1 GID is not a link-local EUI-64 one; run roceperf on both sides, or use RoCE v2".into(),
                        ));
                    }
                };
                let eth = EthernetRepr {
                    dst: peer_mac,
                    src: self.dev.mac.unwrap_or([0; 6]),
                    vlan: None,
                    ethertype: 0,
                };
                let net = match version {
                    RoceVersion::V1 => NetRepr::V1(GrhRepr {
                        tclass: 0,
                        flow_label: 0,
                        hop_limit: 64,
                        sgid: self.gid,
                        dgid: peer_gid,
                    }),
                    RoceVersion::V2 => {
                        let udp = UdpRepr::roce(rxe_udp_sport(lqpn, rqpn));
                        match (self.local_ip, ip_of_gid(peer_gid)) {
                            (Some(IpAddr::V4(s)), IpAddr::V4(d)) => NetRepr::V2v4(
                                ipv4_repr(s, d),
                                UdpRepr {
                                    dst_port: self.cfg.udp_port,
                                    ..udp
                                },
                            ),
                            (Some(IpAddr::V6(s)), IpAddr::V6(d)) => NetRepr::V2v6(
                                ipv6_repr(s, d),
                                UdpRepr {
                                    dst_port: self.cfg.udp_port,
                                    ..udp
                                },
                            ),
                            (l, p) => {
                                return Err(SoftError::Peer(format!(
                                    "this side uses {l:?} and the peer {p}: both must be IPv4 or both IPv6"
                                )));
                            }
                        }
                    }
                };
                Ok(Path::Frame { eth, net })
            }
        }
    }

    /// Receives one batch and feeds every valid packet to its queue pair.
    fn receive(&mut self, now: u64) -> Result<()> {
        if let Backend::Packet(sock) = &mut self.backend
            && let Some(ring) = sock.rx_ring()
        {
            let c = &mut self.counters;
            let mut got = 0;
            while got < self.cfg.batch {
                let Some(f) = ring.peek() else { break };
                got += 1;
                if let Some(ib) = check_frame(&f, self.encap, self.local_ip, self.gid, &mut c.drops)
                {
                    deliver(&mut self.slots, &mut c.drops, now, ib);
                }
                ring.release();
            }
            if got > 0 {
                c.rx_batches += 1;
                c.rx_packets += got as u64;
            }
            return Ok(());
        }
        let n = match &self.backend {
            Backend::Udp(s) => s.recv_batch(&mut self.rx),
            Backend::Packet(s) => s.recv_batch(&mut self.rx),
        }
        .map_err(io_error)?;
        if n == 0 {
            return Ok(());
        }
        self.counters.rx_batches += 1;
        let c = &mut self.counters;
        for i in 0..n {
            match &self.backend {
                Backend::Udp(sock) => {
                    let d = self.rx.datagram(i);
                    // With UDP_GRO one datagram may hold several packets of `seg` bytes each.
                    let seg = d.gro_segment.map(usize::from).filter(|&s| s > 0);
                    let seg = seg.unwrap_or(d.data.len()).max(1);
                    for part in d.data.chunks(seg) {
                        c.rx_packets += 1;
                        let one = RxDatagram { data: part, ..d };
                        if let Some(ib) =
                            check_udp(&one, sock.local_addr(), &mut self.ipv4_ids, &mut c.drops)
                        {
                            deliver(&mut self.slots, &mut c.drops, now, ib);
                        }
                    }
                }
                Backend::Packet(_) => {
                    c.rx_packets += 1;
                    let f = self.rx.frame(i);
                    if let Some(ib) =
                        check_frame(&f, self.encap, self.local_ip, self.gid, &mut c.drops)
                    {
                        deliver(&mut self.slots, &mut c.drops, now, ib);
                    }
                }
            }
        }
        Ok(())
    }

    /// Lets every engine fill the transmit batch, framing each packet, and sends it.
    fn transmit(&mut self, now: u64) -> Result<()> {
        let n = self.slots.len();
        let mut blocked = false;
        for k in 0..n {
            let slot = &mut self.slots[(self.next_qp + k) % n];
            let (Some(qp), Some(path)) = (slot.qp.as_mut(), slot.path) else {
                continue;
            };
            loop {
                if self.out.is_full() {
                    self.out.flush(&self.backend, &mut self.counters)?;
                    if self.out.is_full() {
                        blocked = true; // the kernel takes no more now; engines keep their packets
                        break;
                    }
                }
                let pushed = match (path, self.out.gso.as_mut()) {
                    (Path::Udp { dst, net }, Some(g)) => {
                        match g.try_push(dst, |buf| udp_packet(qp, now, &net, buf)) {
                            // The kernel gives segment k of an IPv4 super-datagram ID k (the first
                            // keeps the 0 every ICRC is computed for): move its ICRC there.
                            Some(k @ 1..) if matches!(net, NetRepr::V2v4(..)) => {
                                let pkt = g.last_packet_mut();
                                let ib_len = pkt.len() - ICRC_LEN;
                                let delta = self.ipv4_ids.get(ib_len).delta(k);
                                let icrc = pkt[ib_len..].as_mut();
                                let v = u32::from_le_bytes([icrc[0], icrc[1], icrc[2], icrc[3]]);
                                icrc.copy_from_slice(&(v ^ delta).to_le_bytes());
                                true
                            }
                            Some(_) => true,
                            None => false,
                        }
                    }
                    (Path::Udp { dst, net }, None) => self
                        .out
                        .plain
                        .try_push(dst, |buf| udp_packet(qp, now, &net, buf)),
                    (Path::Frame { eth, net }, _) => self.out.plain.try_push_frame(|buf| {
                        let at = eth.header_len() + net.header_len();
                        let len = qp.poll_transmit(now, &mut buf[at..])?;
                        Some(frame_around(buf, &eth, &net, len))
                    }),
                };
                if !pushed {
                    break;
                }
                self.counters.tx_packets += 1;
                if let Some(imp) = self.impairer.as_mut() {
                    imp.after_push(&mut self.out.plain);
                }
            }
            if blocked {
                break;
            }
        }
        self.next_qp = (self.next_qp + 1) % n.max(1);
        if self.out.pending() > 0 {
            self.out.flush(&self.backend, &mut self.counters)?;
        }
        Ok(())
    }
}

/// A backend failure on the datapath as the transport error.
fn io_error(e: IoError) -> Error {
    match e {
        IoError::Os { context, source } => Error::Io { context, source },
        other => Error::Unavailable(other.to_string()),
    }
}

fn ipv4_repr(src: Ipv4Addr, dst: Ipv4Addr) -> Ipv4Repr {
    // ID 0 and DF: what an unconnected PMTUDISC_DO UDP socket sends (roce-wire.md §9), and what we
    // write ourselves on AF_PACKET, so both backends produce identical ICRCs.
    Ipv4Repr {
        src,
        dst,
        tos: 0,
        ident: 0,
        dont_frag: true,
        ttl: 64,
    }
}

fn ipv6_repr(src: Ipv6Addr, dst: Ipv6Addr) -> Ipv6Repr {
    Ipv6Repr {
        src,
        dst,
        traffic_class: 0,
        flow_label: 0,
        hop_limit: 64,
    }
}

/// Lets `qp` write its next packet into `buf` and appends the ICRC: the UDP payload of one RoCE v2
/// packet. The kernel writes Ethernet/IP/UDP; the ICRC still covers them, through `net`'s reprs.
fn udp_packet(qp: &mut Qp, now: u64, net: &NetRepr, buf: &mut [u8]) -> Option<usize> {
    let len = qp.poll_transmit(now, buf)?;
    let icrc = net.icrc(&buf[..len]);
    buf[len..len + ICRC_LEN].copy_from_slice(&icrc.to_le_bytes());
    Some(len + ICRC_LEN)
}

/// Writes Ethernet and network headers in front of the `ib_len` bytes the engine wrote at
/// `buf[header_len..]` and the ICRC after them; returns the frame length.
fn frame_around(buf: &mut [u8], eth: &EthernetRepr, net: &NetRepr, ib_len: usize) -> usize {
    let mut eth = *eth;
    eth.ethertype = net.ethertype();
    eth.emit(buf);
    let net_at = eth.header_len();
    let ib_at = net_at + net.header_len();
    net.emit(&mut buf[net_at..ib_at], ib_len);
    let (head, ib) = buf.split_at_mut(ib_at);
    let hdr = &head[net_at..];
    let icrc = match net {
        NetRepr::V1(_) => Icrc::v1_header(hdr),
        NetRepr::V2v4(..) => Icrc::v2_ipv4_header(&hdr[..20], &hdr[20..]),
        NetRepr::V2v6(..) => Icrc::v2_ipv6_header(&hdr[..40], &hdr[40..]),
    }
    .finish_ib(&ib[..ib_len]);
    ib[ib_len..ib_len + ICRC_LEN].copy_from_slice(&icrc.to_le_bytes());
    ib_at + ib_len + ICRC_LEN
}

/// Hands one verified packet (BTH..pad) to the queue pair its BTH.DestQP names.
fn deliver(slots: &mut [QpSlot], drops: &mut DropSummary, now: u64, ib: &[u8]) {
    let dest_qp = u32::from_be_bytes([0, ib[5], ib[6], ib[7]]);
    // QPNs are consecutive from the first slot's, so the index is a subtraction.
    let index = dest_qp.wrapping_sub(slots.first().map_or(0, |s| s.qpn)) as usize;
    match slots.get_mut(index).and_then(|s| s.qp.as_mut()) {
        Some(qp) => qp.handle_packet(now, ib),
        None => drops.unknown_qpn += 1,
    }
}

/// The transmit side: one packet per datagram or frame, or (UDP with GSO) runs of packets per
/// super-datagram, in which case `plain` stays unused.
struct Outbox {
    plain: TxBatch,
    gso: Option<GsoTxBatch>,
}

impl Outbox {
    /// No packet can be queued before a send.
    fn is_full(&self) -> bool {
        self.gso
            .as_ref()
            .map_or(self.plain.is_full(), |g| g.is_full())
    }

    /// Datagrams (or super-datagrams) queued and not yet sent.
    fn pending(&self) -> usize {
        self.gso
            .as_ref()
            .map_or(self.plain.pending(), |g| g.pending())
    }

    /// Sends what is queued, mapping a socket failure to the transport error.
    fn flush(&mut self, backend: &Backend, counters: &mut SoftCounters) -> Result<()> {
        let r = match (backend, self.gso.as_mut()) {
            (Backend::Udp(s), Some(g)) => s.send_gso_batch(g),
            (Backend::Udp(s), None) => s.send_batch(&mut self.plain),
            (Backend::Packet(s), _) => s.send_batch(&mut self.plain),
        };
        counters.tx_batches += 1;
        r.map(|_| ()).map_err(io_error)
    }
}

/// Checks a UDP datagram (BTH..ICRC) and returns its IB part (BTH..pad), or counts the drop.
fn check_udp<'a>(
    d: &super::io::batch::RxDatagram<'a>,
    local: SocketAddr,
    ipv4_ids: &mut Ipv4IdCache,
    drops: &mut DropSummary,
) -> Option<&'a [u8]> {
    const MIN: usize = 12 + ICRC_LEN;
    // Longer than any RoCE packet: junk (a GRO receive slot holds 64 KiB, so nothing truncates it).
    const MAX: usize = super::io::udp::MAX_ROCE_UDP_PAYLOAD;
    let Some(src) = d
        .src
        .filter(|_| !d.truncated && (MIN..=MAX).contains(&d.data.len()))
    else {
        drops.malformed += 1;
        return None;
    };
    let (ib, icrc) = d.data.split_at(d.data.len() - ICRC_LEN);
    let udp = UdpRepr {
        src_port: src.port(),
        dst_port: local.port(),
        checksum: 0,
    };
    let net = match (src.ip(), d.dst.unwrap_or(local.ip())) {
        (IpAddr::V4(s), IpAddr::V4(l)) => NetRepr::V2v4(ipv4_repr(s, l), udp),
        (IpAddr::V6(s), IpAddr::V6(l)) => NetRepr::V2v6(ipv6_repr(s, l), udp),
        _ => {
            drops.malformed += 1;
            return None;
        }
    };
    let expected = net.icrc(ib);
    let found = u32::from_le_bytes([icrc[0], icrc[1], icrc[2], icrc[3]]);
    // The sender's IPv4 ID is covered by the ICRC but invisible to a UDP socket: computed under ID
    // 0, the ICRC must differ from the one found by what some ID makes (wire::Ipv4IdInfluence). ID 0
    // (a plain roceperf send), k (GSO segment k) and rxe's hashed IDs all pass; IPv6 has no ID.
    let ok = expected == found
        || (matches!(net, NetRepr::V2v4(..))
            && ipv4_ids.get(ib.len()).solve(expected, found).is_some());
    if !ok {
        drops.bad_icrc += 1;
        return None;
    }
    Some(ib)
}

/// Checks a whole received frame (from the ring or a batch): not cut, for this host, headers, ICRC
/// (over the real IP header) and destination; returns BTH..pad, or counts the drop.
fn check_frame<'a>(
    f: &RxFrame<'a>,
    encap: Encap,
    local_ip: Option<IpAddr>,
    gid: [u8; 16],
    drops: &mut DropSummary,
) -> Option<&'a [u8]> {
    if f.truncated {
        drops.malformed += 1;
        return None;
    }
    if f.pkttype == libc::PACKET_OTHERHOST {
        drops.not_for_us += 1;
        return None;
    }
    let Ok(view) = RoceFrame::new_checked(f.data) else {
        drops.malformed += 1;
        return None;
    };
    if view.verify_icrc().is_err() {
        drops.bad_icrc += 1;
        return None;
    }
    let net = view.net_header();
    let ours = match (encap, view.encapsulation()) {
        (Encap::V1, crate::wire::Encapsulation::V1) => net[24..40] == gid,
        (Encap::V2Ipv4, crate::wire::Encapsulation::V2v4) => {
            local_ip
                == Some(IpAddr::V4(Ipv4Addr::new(
                    net[16], net[17], net[18], net[19],
                )))
        }
        (Encap::V2Ipv6, crate::wire::Encapsulation::V2v6) => {
            let mut d = [0u8; 16];
            d.copy_from_slice(&net[24..40]);
            local_ip == Some(IpAddr::V6(Ipv6Addr::from(d)))
        }
        _ => false,
    };
    if !ours {
        drops.not_for_us += 1;
        return None;
    }
    Some(view.ib())
}

impl Endpoint for SoftEndpoint {
    fn local_info(&self) -> ConnInfo {
        ConnInfo {
            needs_single_datagrams: matches!(self.backend, Backend::Packet(_)),
            transport: TransportKind::Soft,
            gid: self.gid,
            gid_index: self
                .dev
                .gids_for(self.cfg.version)
                .iter()
                .position(|e| e.gid == self.gid)
                .map(|i| i as u32),
            mac: self.dev.mac,
            addr: match &self.backend {
                Backend::Udp(s) => Some(s.local_addr().to_string()),
                Backend::Packet(_) => self
                    .local_ip
                    .map(|ip| SocketAddr::new(ip, self.cfg.udp_port).to_string()),
            },
            mtu: self.mtu.bytes(),
            qps: self
                .slots
                .iter()
                .map(|s| QpInfo {
                    qpn: s.qpn,
                    psn: s.psn,
                    rkey: s.keys.rkey,
                    vaddr: s.keys.va,
                    len: s.keys.len,
                    max_rd_atomic: self.cfg.max_rd_atomic,
                })
                .collect(),
        }
    }

    fn connect(&mut self, peer: &ConnInfo) -> Result<()> {
        if peer.transport != TransportKind::Soft {
            return Err(SoftError::Peer(format!(
                "the peer runs --transport {}, this side soft",
                peer.transport
            ))
            .into());
        }
        if peer.qps.len() != self.slots.len() {
            return Err(SoftError::Peer(format!(
                "the peer has {} queue pairs and this side {}; give both the same -q",
                peer.qps.len(),
                self.slots.len()
            ))
            .into());
        }
        let mtu = RoceMtu::from_bytes(peer.mtu.min(self.mtu.bytes())).ok_or_else(|| {
            SoftError::Peer(format!("the peer's MTU {} is not a RoCE MTU", peer.mtu))
        })?;
        self.mtu = mtu;
        if peer.needs_single_datagrams && self.out.gso.take().is_some() {
            self.notes.push(
                "UDP GSO off for sending: the peer receives with AF_PACKET (--io packet), which would see super-datagrams whole".into(),
            );
        }
        for i in 0..self.slots.len() {
            let (qpn, psn, lkey) = {
                let s = &self.slots[i];
                (s.qpn, s.psn, s.keys.lkey)
            };
            let remote = &peer.qps[i];
            let path = self.path_to(peer, qpn, remote.qpn)?;
            let mut qcfg = QpConfig::new(qpn, remote.qpn, psn, remote.psn, lkey);
            qcfg.pmtu = mtu.bytes();
            qcfg.timeout = self.cfg.timeout;
            qcfg.retry_cnt = self.cfg.retry_cnt;
            // Both ends of a soft test are busy-polling processes that the scheduler can stall for
            // hundreds of milliseconds on a loaded machine; rxe's fixed 67 ms × 7 budget would call
            // such a peer dead. Back off up to 8× per retry: a lost packet is still resent after one
            // timeout, while a dead peer is declared after about 47 timeouts (3.2 s at -u 14).
            qcfg.retry_backoff_max_shift = 3;
            qcfg.max_rd_atomic = self.cfg.max_rd_atomic.min(remote.max_rd_atomic.max(1));
            qcfg.max_dest_rd_atomic = self.cfg.max_rd_atomic;
            qcfg.max_unacked_psns = self.cfg.max_unacked_psns;
            qcfg.sq_depth = self.cfg.sq_depth;
            qcfg.rq_depth = self.cfg.rq_depth;
            qcfg.cq_tag = i as u32;
            let slot = &mut self.slots[i];
            let Some(mem) = slot.mem.take() else {
                return Err(Error::InvalidRequest(format!(
                    "queue pair {i} is already connected; connect once per endpoint"
                )));
            };
            let qp = Qp::new(qcfg, mem).map_err(SoftError::from)?;
            slot.qp = Some(qp);
            slot.path = Some(path);
        }
        Ok(())
    }

    fn qp_count(&self) -> usize {
        self.slots.len()
    }

    fn buffer(&self, qp: usize) -> &[u8] {
        let s = &self.slots[qp];
        let mem = s.qp.as_ref().map(|q| q.memory()).or(s.mem.as_ref());
        mem.and_then(|m| m.region_bytes(s.keys.lkey))
            .expect("every QP has its registered buffer")
    }

    fn buffer_mut(&mut self, qp: usize) -> &mut [u8] {
        let s = &mut self.slots[qp];
        let lkey = s.keys.lkey;
        let mem = match s.qp.as_mut() {
            Some(q) => q.memory_mut(),
            None => s.mem.as_mut().expect("unconnected QPs keep their memory"),
        };
        mem.region_bytes_mut(lkey)
            .expect("every QP has its registered buffer")
    }

    fn post_send(&mut self, qp: usize, wr: &SendRequest) -> Result<()> {
        self.connected(qp)?.post_send(wr)
    }

    fn post_recv(&mut self, qp: usize, wr: &RecvRequest) -> Result<()> {
        self.connected(qp)?.post_recv(wr)
    }

    fn poll_cq(&mut self, out: &mut [Completion]) -> Result<usize> {
        let now = self.now();
        // Work posted since the last call leaves first: a ping-pong's reply must not wait behind a
        // receive syscall (the doorbell of a real NIC rings at post time; ours at the next poll).
        self.transmit(now)?;
        self.receive(now)?;
        for q in self.slots.iter_mut().filter_map(|s| s.qp.as_mut()) {
            if q.poll_timeout().is_some_and(|t| t <= now) {
                q.handle_timeout(now);
            }
        }
        self.transmit(now)?;
        let mut n = 0;
        let count = self.slots.len();
        for k in 0..count {
            if n == out.len() {
                break;
            }
            if let Some(q) = self.slots[(self.next_qp + k) % count].qp.as_mut() {
                while n < out.len() {
                    match q.poll_completion() {
                        Some(c) => {
                            out[n] = c;
                            n += 1;
                        }
                        None => break,
                    }
                }
            }
        }
        Ok(n)
    }
}

impl SoftEndpoint {
    fn connected(&mut self, qp: usize) -> Result<&mut Qp> {
        let count = self.slots.len();
        self.slots
            .get_mut(qp)
            .ok_or_else(|| Error::InvalidRequest(format!("queue pair {qp} of {count}")))?
            .qp
            .as_mut()
            .ok_or_else(|| {
                Error::InvalidRequest(format!(
                    "queue pair {qp} is not connected yet; call connect with the peer's description first"
                ))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rxe_sport_matches_the_documented_example() {
        // roce-wire.md §8.1: QPNs 0x11/0x12 -> flow label 0x132 -> sport 0xC132, symmetric.
        assert_eq!(rxe_udp_sport(0x11, 0x12), 0xc132);
        assert_eq!(rxe_udp_sport(0x12, 0x11), 0xc132);
    }

    #[test]
    fn gid_index_picks_the_address_and_names_the_table_when_out_of_range() {
        let lo = NetDev::by_name("lo").unwrap();
        let table = lo.gids_for(RoceVersion::V2);
        let Some(x) = table
            .iter()
            .position(|e| e.ip == Some("127.0.0.1".parse().unwrap()))
        else {
            return; // lo without 127.0.0.1: nothing to pick
        };
        let mut cfg = SoftConfig::new("lo", RoceVersion::V2);
        cfg.gid_index = Some(x as u32);
        cfg.udp_port = std::net::UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let ep = SoftEndpoint::open(cfg.clone()).unwrap();
        assert_eq!(ep.gid(), gid_of_ip("127.0.0.1".parse().unwrap()));
        assert_eq!(ep.local_info().gid_index, Some(x as u32));
        drop(ep);
        cfg.gid_index = Some(99);
        let e = SoftEndpoint::open(cfg).err().unwrap().to_string();
        assert!(e.contains("-x 99") && e.contains("127.0.0.1"), "{e}");
    }

    #[test]
    fn counters_print_every_drop_reason() {
        let mut c = SoftCounters::default();
        c.drops.bad_icrc = 3;
        c.drops.stale_response = 4;
        c.drops.qp_error = 5;
        c.acks_sent = 6;
        c.naks_received.psn_seq = 2;
        // The JSON report keeps its field names.
        let json = serde_json::to_value(c).unwrap();
        assert_eq!(json["naks_received"]["psn_sequence"], 2, "{json}");
        let text = c.to_string();
        for needle in [
            "bad-icrc 3",
            "stale-response 4",
            "qp-error 5",
            "out-of-sequence 0",
            "duplicate-unmatched 0",
            "bad-response 0",
            "response-queue-full 0",
            "ACKs sent 6",
            "duplicate requests 0",
            "unknown-qpn 0",
            "malformed 0",
            "out-of-bounds-access 0",
            "psn-sequence 2",
        ] {
            assert!(text.contains(needle), "{needle}: {text}");
        }
        assert!(!text.contains("impairment"));
    }

    #[test]
    fn a_second_endpoint_on_lo_moves_to_the_next_free_address() {
        let port = std::net::UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut cfg = SoftConfig::new("lo", RoceVersion::V2);
        cfg.udp_port = port;
        let Ok(first) = SoftEndpoint::open(cfg.clone()) else {
            return; // 127.0.0.1 is not on lo here
        };
        let second = SoftEndpoint::open(cfg.clone()).unwrap();
        assert_eq!(first.local_info().addr, Some(format!("127.0.0.1:{port}")));
        let moved = second.local_info().addr.unwrap();
        assert_ne!(moved, format!("127.0.0.1:{port}"));
        assert!(
            second.describe().contains("is taken"),
            "{}",
            second.describe()
        );
        // An explicit address is never moved: the user gets the error that explains why.
        cfg.bind = Some("127.0.0.1".parse().unwrap());
        let e = SoftEndpoint::open(cfg).err().unwrap().to_string();
        assert!(e.contains("is taken") && e.contains("netns.sh"), "{e}");
    }

    #[test]
    fn v1_over_udp_is_a_usage_error() {
        let mut cfg = SoftConfig::new("lo", RoceVersion::V1);
        cfg.io = IoKind::Udp;
        let e = SoftEndpoint::open(cfg).err().unwrap().to_string();
        assert!(e.contains("--io packet") && e.contains("--roce v2"), "{e}");
    }
}
