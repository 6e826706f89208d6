//! The TCP baseline transport: the verbs semantics emulated over one kernel TCP connection per queue pair.
//!
//! Every operation travels as a frame: a fixed [`HEADER_LEN`]-byte header (op, length, remote offset,
//! immediate, acknowledgements) followed by the payload. WRITE lands in the peer's buffer at the offset
//! when the peer's `poll_cq` applies it; READ is a request answered by the peer's `poll_cq` with a
//! response frame; SEND consumes the oldest posted receive. An atomic (FETCH_AND_ADD, CMP_AND_SWAP) is a
//! READ-like request carrying its operands, executed on the 8-byte word by the peer's `poll_cq` and
//! answered with the original value, as an RPC server would run it: the software baseline of what a
//! RoCE NIC does in hardware. As on an RC queue pair, a signaled SEND or
//! WRITE completes when the peer has applied it (the frame asks for an acknowledgement, which the peer
//! counts in the header of its next frame, or in an ACK frame when it has nothing else to send), and a
//! READ when its response has been placed: a completion never just means that the kernel took the
//! bytes, so bandwidth is what reached the peer's memory. A 2-byte WRITE ping-pong thus moves one
//! 26-byte message each way, as the reference `roce_ref tcp-pingpong -s 26` does.
//!
//! The sockets are non-blocking and busy-polled from `poll_cq`: no thread, no lock, no allocation per
//! message. Payloads move straight between the registered buffer and the socket (`writev` of many
//! header+payload pairs in one call, or one `send` of a few small pieces gathered; `readv` of the rest
//! of a payload plus the next headers), so a large message costs about one system call on each side,
//! and a small one shares its call with its neighbours. `post_send` only queues; `poll_cq` transmits,
//! reads, and reports completions.
//!
//! Readiness: a read or write that moves less than it was offered ends the socket's readiness until
//! the kernel says otherwise, so no second call finds it empty or full. With several connections the
//! kernel says so through an edge-triggered epoll set polled with a zero timeout, not through reads
//! and writes that fail with EAGAIN: those take the socket lock that the kernel's loopback TCP
//! processing needs. A single connection has no epoll set (its registration would put a callback on
//! every segment the peer sends): in a ping-pong (one request outstanding, small reads) it spins on
//! its socket, as the busy-polling reference does, and in a stream it asks `poll(2)`. After
//! [`DEFAULT_SPIN_POLLS`] idle polls `poll_cq` sleeps in epoll or poll (at most [`IDLE_SLEEP_MS`])
//! until a socket is ready, so a spinning side never starves the kernel work it is waiting for on a
//! busy machine; a ping-pong's reply arrives well within the spinning phase.
//!
//! Rooms: [`frame`] is the byte format, [`setup`] makes the connections, [`qp`] is each queue pair's
//! byte-stream state machine with no socket in it (so it is tested by feeding it bytes), [`io`] is the
//! system calls that feed it, and [`endpoint`] ties them into the [`Endpoint`](super::Endpoint).

mod endpoint;
mod frame;
mod io;
mod qp;
mod setup;

pub(crate) use endpoint::TcpEndpoint;

use super::Error;
use crate::params::Role;
use std::io as stdio;
use std::net::IpAddr;
use std::time::Duration;

/// How to build a TCP endpoint.
#[derive(Debug, Clone)]
pub(crate) struct TcpConfig {
    /// Server accepts the data connections, client makes them (as on the out-of-band channel).
    pub role: Role,
    /// Number of queue pairs (one TCP connection each).
    pub qps: usize,
    /// Bytes of each queue pair's registered buffer.
    pub buf_len: usize,
    /// Send-queue depth: how many requests may be outstanding per queue pair.
    pub sq_depth: usize,
    /// Receive-queue depth: how many receives may be posted per queue pair.
    pub rq_depth: usize,
    /// Local address the server listens on for data connections (the out-of-band socket's address).
    pub bind: IpAddr,
    /// How long to wait for the data connections to be made.
    pub connect_timeout: Duration,
    /// SO_SNDBUF / SO_RCVBUF to ask for; `None` leaves the kernel's autotuning alone.
    pub socket_buffer: Option<usize>,
    /// `--tclass`: IP_TOS / IPV6_TCLASS of the data connections; `None` leaves the kernel's 0.
    pub tclass: Option<u8>,
    /// `-S`: SO_PRIORITY of the data connections.
    pub priority: Option<u8>,
    /// `--tcp-congestion`: TCP_CONGESTION of the data connections; `None` leaves the namespace's
    /// default.
    pub congestion: Option<String>,
    /// Idle `poll_cq` calls before it sleeps until a socket is ready ([`DEFAULT_SPIN_POLLS`]; `u64::MAX`
    /// spins forever). Over loopback the kernel moves TCP data in the *sender's* and the receiver's
    /// system calls and softirqs, on the same cores as the datapath threads: a thread that spins on an
    /// empty socket takes that time away from the kernel work it is waiting for. Spinning first keeps
    /// the latency of a ping-pong; sleeping after a while lets a bandwidth stream run at full speed.
    pub(crate) spin_polls: u64,
}

/// Idle polls before `poll_cq` sleeps (a few hundred microseconds of spinning).
pub(crate) const DEFAULT_SPIN_POLLS: u64 = 256;

/// Longest sleep of an idle `poll_cq`, so callers still get control back to check for the end of a test.
pub(crate) const IDLE_SLEEP_MS: i32 = 1;

/// Wraps an OS error with what was being done.
fn io_err(context: impl Into<String>) -> impl FnOnce(stdio::Error) -> Error {
    let context = context.into();
    move |source| Error::Io { context, source }
}

#[cfg(test)]
mod tests;
