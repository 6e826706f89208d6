//! Sans-IO Reliable Connection engine: requester, responder, completer, PSNs, memory regions.
//!
//! [`Qp`] is the state machine. It consumes and produces InfiniBand transport bytes (BTH to pad;
//! the I/O backends add Ethernet/IP/UDP or GRH and the ICRC with `crate::wire`), takes `now` as
//! an argument, and never touches a socket, a clock or the allocator on the packet path.

pub mod completer;
pub mod config;
pub mod counters;
pub mod ctx;
pub mod mr;
pub mod packet;
pub mod psn;
pub mod qp;
pub mod requester;
pub mod responder;
pub mod ring;
pub mod timer;

pub use config::{ConfigError, QpConfig};
pub use counters::{Counters, DropCounts, NakCounts};
pub use mr::{AccessViolation, BufferId, MemoryRegion, MemoryTable, MrError, MrKeys};
pub use psn::Psn;
pub use qp::{Qp, QpState};
