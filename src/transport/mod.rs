//! The contract every transport implements: verbs (RDMA NICs), soft (our userspace RoCE) and tcp.
//!
//! The shape follows libibverbs, reduced to what the six tests need. One [`Endpoint`] is one process's
//! side of a test: `n` queue pairs (perftest's `-q`) sharing one completion queue, each QP with its own
//! registered buffer. The test drivers are generic over `Endpoint`, so the hot loop has no dynamic
//! dispatch. `poll_cq` is also what drives a software transport: it receives, runs protocol state
//! machines, fires timers and transmits, so a passive side must keep calling it until the test is over.
//!
//! Next to the contract, the vocabulary the transports share without using each other: [`Gid`] and
//! [`MacAddr`] (from [`wire`](crate::wire)), [`RoceMtu`], [`Param`] (a run parameter that displays as
//! its flag, for messages) and [`rng::SplitMix64`].

pub mod cm;
pub mod ethtool;
pub(crate) mod memory;
pub(crate) mod mtu;
pub(crate) mod param;
pub(crate) mod probe;
pub mod qp_counters;
pub(crate) mod rng;
pub mod sockopt;
pub mod soft;
pub(crate) mod tcp;
pub mod verbs;

use serde::{Deserialize, Serialize};

pub(crate) use crate::wire::ROCE_V2_PORT;
pub(crate) use crate::wire::{Gid, MacAddr};
pub(crate) use mtu::RoceMtu;
pub(crate) use param::Param;
/// The soft transport's deliberate impairment (`--impair`), which the command line parses.
pub(crate) use soft::io::impair::ImpairConfig;

/// Access rights of a registered buffer, as in `ibv_access_flags`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Access(pub u32);

impl Access {
    /// The local side may write into the buffer (needed to receive).
    pub const LOCAL_WRITE: Access = Access(1);
    /// The peer may RDMA WRITE into the buffer.
    pub const REMOTE_WRITE: Access = Access(2);
    /// The peer may RDMA READ from the buffer.
    pub const REMOTE_READ: Access = Access(4);
    /// The peer may run atomics on the buffer.
    pub(crate) const REMOTE_ATOMIC: Access = Access(8);

    /// True when every right in `other` is granted here.
    pub fn contains(self, other: Access) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for Access {
    type Output = Access;
    fn bitor(self, rhs: Access) -> Access {
        Access(self.0 | rhs.0)
    }
}

/// What one queue pair tells its peer so the peer can address it (perftest's "key" record).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QpInfo {
    /// Queue pair number (24 bits on RoCE).
    pub qpn: u32,
    /// First packet sequence number this QP will send (24 bits).
    pub psn: u32,
    /// Remote key of this QP's buffer.
    pub rkey: u32,
    /// Address the peer puts in RETH/remote addresses to reach this QP's buffer.
    pub vaddr: u64,
    /// Length of the buffer the peer may address at `vaddr`.
    pub len: u64,
    /// Outstanding RDMA READ/atomic requests this QP accepts as a responder.
    pub max_rd_atomic: u32,
}

/// Everything a peer needs to connect to this endpoint, exchanged over the out-of-band channel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnInfo {
    /// Which transport produced this description.
    pub transport: crate::params::TransportKind,
    /// GID (RoCE v2: the IPv4-mapped or IPv6 address; v1: the GRH GID). All zero for TCP.
    pub gid: Gid,
    /// GID table index used (verbs), if any.
    pub gid_index: Option<u32>,
    /// Link-layer address (soft v1 and the packet backend need it; verbs resolves it itself).
    pub mac: Option<MacAddr>,
    /// Transport-level address, e.g. `10.0.0.1:4791` for soft v2 or the data connection for TCP.
    pub addr: Option<String>,
    /// Largest path MTU this side supports; both sides use the smaller.
    pub mtu: u32,
    /// One entry per queue pair.
    pub qps: Vec<QpInfo>,
    /// Soft transport: this side receives through AF_PACKET, which sees a UDP GSO super-datagram
    /// from a peer on the same host (lo, veth) whole, so the peer must send each packet on its own.
    #[serde(default)]
    pub(crate) needs_single_datagrams: bool,
    /// The queue pairs' connection type (`-c`); a description without one is RC.
    #[serde(default)]
    pub connection: crate::params::ConnType,
    /// UD: the Q_Key datagrams to these queue pairs must carry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qkey: Option<u32>,
}

/// A remote buffer location for WRITE and READ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteAddr {
    /// Address in the peer's buffer (its `QpInfo::vaddr` plus an offset).
    pub addr: u64,
    /// The peer's remote key.
    pub rkey: u32,
}

/// Operation of a send-queue work request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SendOp {
    /// Two-sided SEND, consumes a receive at the peer.
    Send,
    /// SEND with 32-bit immediate data.
    SendWithImm(u32),
    /// One-sided RDMA WRITE.
    Write,
    /// RDMA WRITE with immediate, consumes a receive at the peer.
    WriteWithImm(u32),
    /// One-sided RDMA READ into the local range.
    Read,
    /// 64-bit atomic fetch-and-add of the value at the (8-byte aligned) remote address; the original
    /// value lands in the 8 local bytes (`len` must be 8).
    FetchAdd(u64),
    /// 64-bit atomic compare-and-swap: if the remote value equals `compare` it becomes `swap`; the
    /// original value lands in the 8 local bytes (`len` must be 8).
    CompareSwap {
        /// Value the remote word must hold for the swap to happen.
        compare: u64,
        /// Value written when it does.
        swap: u64,
    },
}

/// A send-queue work request. The local data is `len` bytes at `offset` in the QP's own buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendRequest {
    /// Caller's identifier, returned in the completion.
    pub wr_id: u64,
    /// What to do.
    pub op: SendOp,
    /// Offset of the local data in this QP's buffer.
    pub offset: u64,
    /// Length in bytes.
    pub len: u32,
    /// Target for WRITE and READ; ignored for SEND.
    pub remote: Option<RemoteAddr>,
    /// Ask for a completion (perftest's CQ moderation signals one in N).
    pub signaled: bool,
    /// Send the data inline with the request (`-I`), where the transport supports it.
    pub inline: bool,
}

impl SendRequest {
    /// A signaled, not inline request: `op` of the `len` bytes at `offset`, to `remote` for WRITE,
    /// READ and atomics.
    pub fn new(wr_id: u64, op: SendOp, offset: u64, len: u32, remote: Option<RemoteAddr>) -> Self {
        SendRequest {
            wr_id,
            op,
            offset,
            len,
            remote,
            signaled: true,
            inline: false,
        }
    }
}

/// A receive-queue work request: where an incoming SEND lands in this QP's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvRequest {
    /// Caller's identifier, returned in the completion.
    pub wr_id: u64,
    /// Offset in this QP's buffer.
    pub offset: u64,
    /// Room in bytes.
    pub len: u32,
}

/// Status of a completion, named as libibverbs names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CompletionStatus {
    /// The operation succeeded.
    Success,
    /// Local length error: a receive buffer was too small.
    LocalLengthError,
    /// Local protection error: bad local key or range.
    LocalProtectionError,
    /// The QP was in the error state; the request was flushed.
    WrFlushError,
    /// The peer answered NAK remote access error (bad rkey, bounds or rights).
    RemoteAccessError,
    /// The peer answered NAK invalid request.
    RemoteInvalidRequestError,
    /// The peer answered NAK remote operational error.
    RemoteOperationalError,
    /// Retransmissions ran out without an acknowledgement.
    RetryExceeded,
    /// The peer kept answering RNR (no receive posted) until rnr_retry ran out.
    RnrRetryExceeded,
    /// The transport failed in a way that has no verbs status (e.g. the TCP connection broke).
    FatalError,
}

impl CompletionStatus {
    /// The libibverbs name plus what to check, for error messages.
    pub fn describe(&self) -> &'static str {
        match self {
            CompletionStatus::Success => "success",
            CompletionStatus::LocalLengthError => {
                "local length error: a posted receive is smaller than the incoming message; give both sides the same -s"
            }
            CompletionStatus::LocalProtectionError => {
                "local protection error: the work request addressed memory outside its registered buffer"
            }
            CompletionStatus::WrFlushError => {
                "work request flushed: the queue pair had already failed; see the first error above"
            }
            CompletionStatus::RemoteAccessError => {
                "remote access error: the peer rejected the rkey, address range or access rights; check that both sides run the same test and size"
            }
            CompletionStatus::RemoteInvalidRequestError => {
                "remote invalid request: the peer rejected the request (opcode, length or MTU mismatch); check -m and -s on both sides"
            }
            CompletionStatus::RemoteOperationalError => {
                "remote operational error: the peer could not carry out the request (rxe answers so a SEND longer than its posted receive); check that both sides run the same test and -s"
            }
            CompletionStatus::RetryExceeded => {
                "transport retry counter exceeded: no acknowledgement from the peer; check that it is still running, the GIDs and RoCE version on both sides, PFC and MTU"
            }
            CompletionStatus::RnrRetryExceeded => {
                "RNR retry counter exceeded: the peer had no receive posted; check that both sides run the same test"
            }
            CompletionStatus::FatalError => "fatal transport error",
        }
    }
}

/// What kind of operation a completion reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CompletionOp {
    /// A SEND (with or without immediate) completed at the requester.
    Send,
    /// An RDMA WRITE completed at the requester.
    Write,
    /// An RDMA READ completed: the data is in the local buffer.
    Read,
    /// A receive consumed an incoming SEND.
    Recv,
    /// A receive consumed an incoming WRITE with immediate.
    RecvWithImm,
    /// An atomic fetch-and-add completed: the original value is in the local buffer.
    FetchAdd,
    /// An atomic compare-and-swap completed: the original value is in the local buffer.
    CompareSwap,
}

/// One work completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// The `wr_id` of the request it completes.
    pub wr_id: u64,
    /// Which queue pair of the endpoint.
    pub qp: u32,
    /// Success or the error.
    pub status: CompletionStatus,
    /// The operation.
    pub op: CompletionOp,
    /// Bytes received (receives) or transferred.
    pub byte_len: u32,
    /// Immediate data, when the message carried one.
    pub imm: Option<u32>,
}

impl Completion {
    /// A placeholder used to size completion arrays before polling.
    pub const EMPTY: Completion = Completion {
        wr_id: 0,
        qp: 0,
        status: CompletionStatus::Success,
        op: CompletionOp::Send,
        byte_len: 0,
        imm: None,
    };
}

/// Errors a transport reports through the contract (each transport may have finer enums of its own).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The transport is not available here (no device, no library, not built); the text says what to do.
    #[error("{0}")]
    Unavailable(String),
    /// The request is invalid for this transport or its current state.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// The send queue is full; poll completions and try again.
    #[error("send queue full")]
    QueueFull,
    /// The connection to the peer failed.
    #[error("connection to the peer failed: {0}")]
    Connection(String),
    /// The host could not give a queue pair its buffer.
    #[error(
        "{what}: {source}; lower {} or the message size ({}), or raise the memory this process may use (ulimit -v)",
        Param::Qps,
        "-s/-a"
    )]
    OutOfMemory {
        /// Whose buffer.
        what: String,
        /// The allocation that failed.
        #[source]
        source: memory::OutOfMemory,
    },
    /// An operating-system call failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Result type of the transport layer.
pub(crate) type Result<T> = std::result::Result<T, Error>;

/// One side of a test: `qp_count()` queue pairs, each with its own buffer, sharing one completion queue.
pub trait Endpoint {
    /// How this endpoint is reached; sent to the peer over the out-of-band channel.
    fn local_info(&self) -> ConnInfo;

    /// Connects every queue pair to the peer's queue pair of the same index.
    fn connect(&mut self, peer: &ConnInfo) -> Result<()>;

    /// Number of queue pairs.
    fn qp_count(&self) -> usize;

    /// This QP's registered buffer (read side; data that arrived by RECV, WRITE or READ is here).
    fn buffer(&self, qp: usize) -> &[u8];

    /// This QP's registered buffer, for filling the data to send.
    fn buffer_mut(&mut self, qp: usize) -> &mut [u8];

    /// Reads one byte of the buffer the way a NIC-written buffer must be read (volatile).
    /// write_lat polls the last byte of the message with this.
    fn peek(&self, qp: usize, offset: usize) -> u8 {
        let buf = self.buffer(qp);
        assert!(
            offset < buf.len(),
            "peek offset {offset} beyond buffer of {}",
            buf.len()
        );
        // SAFETY: in bounds (checked above); volatile because hardware may write the buffer behind our back.
        unsafe { std::ptr::read_volatile(buf.as_ptr().add(offset)) }
    }

    /// Posts a send-queue request (SEND, WRITE, READ) on queue pair `qp`.
    fn post_send(&mut self, qp: usize, wr: &SendRequest) -> Result<()>;

    /// Posts a receive on queue pair `qp`.
    fn post_recv(&mut self, qp: usize, wr: &RecvRequest) -> Result<()>;

    /// Drives the transport and moves up to `out.len()` completions into `out`; returns how many.
    fn poll_cq(&mut self, out: &mut [Completion]) -> Result<usize>;

    /// The first queue-pair failure this side saw that no completion of its own names (its
    /// responder refused a request with a fatal NAK; the peer NAKed a PSN this side never sent),
    /// said in full: which queue pair, what arrived from where, what was answered. `None` when
    /// there is none or the transport cannot tell (verbs reports these as asynchronous events).
    fn failure(&self) -> Option<String> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_flags_combine() {
        let a = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
        assert!(a.contains(Access::REMOTE_WRITE));
        assert!(!a.contains(Access::REMOTE_READ));
        assert!(a.contains(Access::LOCAL_WRITE | Access::REMOTE_WRITE));
    }
}
