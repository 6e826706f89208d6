//! What configures a soft endpoint ([`SoftConfig`]) and what can go wrong setting one up
//! ([`SoftError`]).

use std::net::IpAddr;

use super::io::impair::{ImpairConfig, ImpairParseError};
use super::io::kernel_rx::{KernelRx, KernelRxParseError};
use super::io::{IoError, ROCE_V2_PORT};
use super::netdev::{AddrFamily, NetdevError};
use super::rc::ConfigError;
use crate::params::{
    CcParams, CongestionControl, ConnType, DEFAULT_QKEY, IoKind, Marks, Recovery, RoceVersion,
    TransportKind,
};
use crate::transport::memory::OutOfMemory;
use crate::transport::{Error, Gid, Param};

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
    /// [`NetDev::gids_for`](super::netdev::NetDev::gids_for). Overrides `family`; must agree with
    /// `bind` when both are given.
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
    /// Deliberate impairment (`--impair`); `None` reads `ROCEPERF_IMPAIR`.
    pub impair: Option<ImpairConfig>,
    /// `--impair-seed`: overrides the seed of the impairment, whichever gave it.
    pub impair_seed: Option<u64>,
    /// `--recovery`: the loss recovery this side asks for; selective repeat runs only when the peer
    /// asks for it too ([`SoftEndpoint::agree_recovery`](super::SoftEndpoint::agree_recovery)).
    pub recovery: Recovery,
    /// `--cc`: congestion control of every RC queue pair (both sides agree out of band).
    pub cc: CongestionControl,
    /// `--cc-param`: DCQCN's parameters.
    pub cc_params: CcParams,
    /// Local ACK timeout code (4.096 µs × 2^t).
    pub timeout: u8,
    /// Retransmissions without progress before the QP fails (a dead peer becomes an error).
    pub retry_cnt: u8,
    /// Outstanding READs per QP, both directions.
    pub max_rd_atomic: u32,
    /// RoCE v2: send runs of equal packets as one UDP_SEGMENT super-datagram and receive with
    /// UDP_GRO (UDP backend), or as one `virtio_net_hdr` super-frame, splitting the ones received
    /// (AF_PACKET backend, which then receives without a ring); on by default. Several times
    /// faster; segment k of an IPv4 send carries IP ID k, and its ICRC is computed for it. Captures
    /// on the sending host (lo, veth) show super-datagrams: turn it off to see every packet.
    /// Impairment keeps it: it works on each RoCE packet inside.
    pub gso: bool,
    /// UDP with `gso`: the kernel also merges received datagrams (UDP_GRO), so a stream's receiver
    /// takes a super-datagram per receive. A ping-pong has nothing to merge, and a socket with
    /// UDP_GRO pays for it on every datagram it receives (0.1–0.15 µs a hop on lo, measured), so
    /// latency tests turn it off; the kernel then hands over a peer's super-datagrams segment by segment.
    pub gro: bool,
    /// AF_PACKET backend only: receive through a PACKET_MMAP ring of this many frames instead of
    /// `recvmmsg` (0: no ring). An idle poll then costs a memory load instead of a syscall. The
    /// queue pairs share it as their window of unacknowledged PSNs (a frame beyond the ring is
    /// lost), so the default matches `max_unacked_psns`: 4.3 MiB of slots at a 4096 MTU.
    pub packet_rx_ring: usize,
    /// AF_PACKET backend, RoCE v2: how the kernel's own IP/UDP receive is kept off the frames the
    /// packet socket took (a TCX ingress program, falling back to a sink socket); `None` reads
    /// `ROCEPERF_KERNEL_RX` ([`KernelRx::from_env`]).
    pub kernel_rx: Option<KernelRx>,
    /// Unacknowledged PSNs a requester lets out before it waits, and all the endpoint's requesters
    /// together. rxe uses 128 a queue pair; a userspace peer whose thread may be descheduled for
    /// milliseconds needs a deeper window to keep the link busy. The peer buffers what is out in
    /// one socket buffer or ring (8 MiB, 1024 frames), so thousands of queue pairs with a window
    /// each would overflow it, and every go-back-N resend of the loss overflow it again.
    pub max_unacked_psns: u32,
    /// `-c`: RC, UC or UD queue pairs.
    pub connection: ConnType,
    /// UD: the Q_Key our queue pairs accept (perftest's fixed 0x11111111 by default).
    pub qkey: u32,
    /// The last this many queue pairs are RC whatever `connection` says: perftest's `-R` message
    /// queue pair is RC even when the test's are UD (its `create_comm_struct`).
    pub rc_tail: usize,
    /// `--tclass`, `-S`, `--flow_label`: what every data packet is marked with ([`super::marks`]).
    pub marks: Marks,
    /// Read the ECN field of every RoCE v2 packet received, to count CE marks (and answer them with
    /// CNPs). AF_PACKET reads it from the header it has anyway; a UDP socket asks for IP_RECVTOS /
    /// IPV6_RECVTCLASS, so every receive is a `recvmsg` with a control message to read.
    pub read_ce: bool,
    /// `-e/--events`: a poll that finds nothing to do sleeps in `poll(2)` until a packet comes or
    /// a timer is due, instead of returning to spin (`endpoint::event`).
    pub events: bool,
}

impl SoftConfig {
    /// The DSCP CNPs leave with, with ECT(0): `--cc-param np_cnp_dscp` (ConnectX's 48: TOS 0xC2).
    pub(crate) fn cnp_dscp(&self) -> u8 {
        // The parser holds it to 0..=63.
        self.cc_params.np_cnp_dscp as u8
    }

    /// The 802.1Q priority of CNPs when frames are tagged: `--cc-param np_cnp_prio` (6).
    pub(crate) fn cnp_prio(&self) -> u8 {
        // The parser holds it to 0..=7.
        self.cc_params.np_cnp_prio as u8
    }

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
            impair_seed: None,
            recovery: Recovery::Gbn,
            cc: CongestionControl::default(),
            cc_params: CcParams::default(),
            timeout: 14,
            retry_cnt: 7,
            max_rd_atomic: 16,
            max_unacked_psns: 1024,
            gso: true,
            gro: true,
            packet_rx_ring: 1024,
            kernel_rx: None,
            connection: ConnType::Rc,
            qkey: DEFAULT_QKEY,
            rc_tail: 0,
            marks: Marks::default(),
            read_ce: true,
            events: false,
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
    /// `ROCEPERF_KERNEL_RX` is none of its words.
    #[error(transparent)]
    KernelRx(#[from] KernelRxParseError),
    /// Too few or too many queue pairs.
    #[error(
        "{} {qps}: the soft transport supports 1..65535 queue pairs",
        Param::Qps
    )]
    QpCount {
        /// The number asked for.
        qps: usize,
    },
    /// `-x` beyond the interface's GID table.
    #[error(
        "{} {index}: interface {dev} has {} GIDs ({}); pick a RoCE {version} one",
        Param::GidIndex,
        table.len(),
        if table.is_empty() { "none".to_string() } else { table.join("; ") }
    )]
    NoSuchGid {
        /// The index asked for.
        index: u32,
        /// The interface.
        dev: String,
        /// The RoCE version of the run.
        version: RoceVersion,
        /// The whole table, one `i: entry` per GID.
        table: Vec<String>,
    },
    /// `-x` names an entry the run's RoCE version cannot use.
    #[error(
        "{} {index} is GID {entry}, which RoCE {version} cannot use; {}",
        Param::GidIndex,
        if usable.is_empty() {
            format!("the interface has no RoCE {version} GID")
        } else {
            format!("pick a RoCE {version} entry: {}", usable.join("; "))
        }
    )]
    GidOfOtherKind {
        /// The index asked for.
        index: u32,
        /// The entry it names, printed.
        entry: String,
        /// The RoCE version of the run.
        version: RoceVersion,
        /// The entries it could use, one `i: entry` each.
        usable: Vec<String>,
    },
    /// `-x` and `--bind` name different addresses.
    #[error(
        "{} {index} selects GID {gid} of address {ip}, but the address {bind} was also asked for; give one of them",
        Param::GidIndex
    )]
    GidVersusBind {
        /// The GID index.
        index: u32,
        /// The GID it selects.
        gid: Gid,
        /// The address behind that GID.
        ip: IpAddr,
        /// The address given with `--bind`.
        bind: IpAddr,
    },
    /// The peer's description does not fit ours.
    #[error("peer mismatch: {0}")]
    Peer(#[from] PeerMismatch),
    /// A queue pair's buffer could not be allocated.
    #[error("queue pair {qp}'s buffer: {source}")]
    OutOfMemory {
        /// The queue pair.
        qp: usize,
        /// The failed allocation.
        #[source]
        source: OutOfMemory,
    },
}

impl From<SoftError> for Error {
    fn from(e: SoftError) -> Error {
        match e {
            SoftError::Peer(m) => Error::Connection(m.to_string()),
            SoftError::OutOfMemory { qp, source } => Error::OutOfMemory {
                what: format!("queue pair {qp}'s buffer"),
                source,
            },
            other => Error::Unavailable(other.to_string()),
        }
    }
}

/// Why this side cannot talk to the peer it was given; each says what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PeerMismatch {
    /// The peer runs another transport.
    #[error("the peer runs {} {}, this side soft", Param::Transport, .0)]
    Transport(TransportKind),
    /// The two sides have different numbers of queue pairs.
    #[error(
        "the peer has {peer} queue pairs and this side {ours}; give both the same {}",
        Param::Qps
    )]
    QpCount {
        /// The peer's.
        peer: usize,
        /// Ours.
        ours: usize,
    },
    /// The peer offered an MTU that is none of the five RoCE MTUs.
    #[error("the peer's MTU {0} is not a RoCE MTU")]
    Mtu(u32),
    /// The peer's socket address does not parse.
    #[error("peer address '{0}' is not IP:port")]
    Address(String),
    /// One side uses IPv4, the other IPv6 (UDP backend: both addresses known).
    #[error("this side uses {local} and the peer {peer}: both must be IPv4 or both IPv6")]
    Family {
        /// Our address.
        local: IpAddr,
        /// The peer's.
        peer: IpAddr,
    },
    /// One side uses IPv4, the other IPv6 (AF_PACKET backend).
    #[error("this side uses {local:?} and the peer {peer}: both must be IPv4 or both IPv6")]
    FramedFamily {
        /// Our address, if any.
        local: Option<IpAddr>,
        /// The peer's.
        peer: IpAddr,
    },
    /// A RoCE v1 peer gave no MAC and none can be derived from its GID.
    #[error(
        "the peer sent no MAC address and its RoCE v1 GID is not a link-local EUI-64 one; run roceperf on both sides, or use RoCE v2"
    )]
    NoMac,
    /// The kernel's neighbour table could not give the peer's MAC (the text says why).
    #[error("{0}")]
    Neighbour(String),
    /// The peer's queue pairs are of another connection type.
    #[error(
        "the peer's queue pairs are {peer} and this side's {ours}; give both sides the same -c"
    )]
    Connection {
        /// The peer's.
        peer: ConnType,
        /// Ours.
        ours: ConnType,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_mismatches_name_the_flags_as_typed() {
        let e = |m: PeerMismatch| Error::from(SoftError::from(m)).to_string();
        assert_eq!(
            e(PeerMismatch::Transport(TransportKind::Tcp)),
            "connection to the peer failed: the peer runs --transport tcp, this side soft"
        );
        assert_eq!(
            e(PeerMismatch::QpCount { peer: 2, ours: 1 }),
            "connection to the peer failed: the peer has 2 queue pairs and this side 1; give both the same -q"
        );
        assert_eq!(
            e(PeerMismatch::Mtu(1500)),
            "connection to the peer failed: the peer's MTU 1500 is not a RoCE MTU"
        );
        assert_eq!(
            Error::from(SoftError::from(IoError::V1OverUdp)).to_string(),
            "RoCE v1 (Ethertype 0x8915) cannot travel over a UDP socket; use --io packet (needs CAP_NET_RAW) or --roce v2"
        );
    }
}
