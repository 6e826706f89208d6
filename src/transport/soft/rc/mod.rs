//! Sans-IO Reliable Connection engine: requester (with its completer), responder, PSNs, memory
//! regions.
//!
//! [`Qp`] is the state machine. It consumes and produces InfiniBand transport bytes (BTH to pad;
//! the I/O backends add Ethernet/IP/UDP or GRH and the ICRC with `crate::wire`), takes `now` as
//! an argument, and never touches a socket, a clock or the allocator on the packet path.
//!
//! Driving it (an I/O backend does the same with sockets and a monotonic clock):
//!
//! ```
//! use roceperf::transport::soft::rc::{Instant, MemoryTable, Qp, QpConfig};
//! use roceperf::transport::{Access, CompletionStatus, RecvRequest, SendOp, SendRequest};
//!
//! let qp = |qpn, peer, psn, peer_psn| {
//!     let mut mem = MemoryTable::new(qpn);
//!     let keys = mem.add_registered(4096, Access::LOCAL_WRITE);
//!     Qp::new(QpConfig::new(qpn, peer, psn, peer_psn, keys.lkey), mem).unwrap()
//! };
//! let (mut a, mut b) = (qp(0x11, 0x12, 1, 2), qp(0x12, 0x11, 2, 1));
//! b.post_recv(&RecvRequest { wr_id: 7, offset: 0, len: 64 }).unwrap();
//! let send = SendRequest::new(1, SendOp::Send, 0, 5, None);
//! a.post_send(&send).unwrap();
//! let mut buf = vec![0u8; a.max_packet_len()];
//! let now = Instant::ZERO;
//! while let Some(n) = a.poll_transmit(now, &mut buf) { b.handle_packet(now, &buf[..n]); }
//! while let Some(n) = b.poll_transmit(now, &mut buf) { a.handle_packet(now, &buf[..n]); }
//! assert_eq!(b.poll_completion().unwrap().byte_len, 5);
//! assert_eq!(a.poll_completion().unwrap().status, CompletionStatus::Success);
//! assert_eq!(a.poll_timeout(), None, "everything acknowledged: no timer left");
//! ```

#![warn(missing_docs)]
#![warn(unreachable_pub)]

pub(crate) mod config;
pub(crate) mod counters;
mod ctx;
mod failure;
mod gbn;
pub(crate) mod mr;
pub(crate) mod packet;
pub(crate) mod psn;
pub(crate) mod qp;
mod recovery;
mod requester;
mod responder;
pub(crate) mod ring;
mod rto;
mod sack;
mod time;
mod timer;
mod wqe;

pub(crate) use config::ConfigError;
pub use config::QpConfig;
pub use counters::Counters;
pub(crate) use counters::NakCounts;
pub(crate) use counters::ProtocolDrops;
pub use failure::QpFailure;
pub use mr::{BufferId, MemoryTable, MrKeys};
pub use psn::Psn;
pub use qp::LoneAck;
pub use qp::{Qp, QpState};
pub use time::Instant;
pub(crate) use time::Now;
