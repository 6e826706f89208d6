//! Out-of-band setup over TCP: handshake, parameter check, barriers, result exchange.
//!
//! The protocol is roceperf's own (perftest's wire protocol is a later addition; everything that speaks to
//! the peer lives in this module so another dialect can sit beside it). It is lock-step like perftest's:
//! in every exchange the client writes first and then reads, the server reads first and then writes, so
//! every exchange is also a barrier.
//!
//! On the wire: a 12-byte hello each way (`roceperf` magic, protocol version, reserved), then messages
//! framed as a 4-byte big-endian length and a JSON object `{"kind": ..., "body": ...}`.

mod channel;
pub(crate) mod dial;
mod error;
pub mod frame;
mod listener;
mod params;
pub mod perftest;

pub(crate) use channel::{Channel, DEFAULT_IO_TIMEOUT};
pub(crate) use dial::HostPort;
pub(crate) use error::Failure;
pub(crate) use error::{Error, Step};
pub(crate) use listener::Listener;
pub(crate) use params::TestParams;
pub(crate) use params::{Mismatch, RunLength, Said};

/// Result type of the out-of-band layer.
pub(crate) type Result<T> = std::result::Result<T, Error>;
