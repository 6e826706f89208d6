//! roceperf: a RoCE performance benchmark suite, the equivalent of linux-rdma's perftest.
//!
//! The layers (see docs/ARCHITECTURE.md): `wire` knows packet formats and nothing of state;
//! `transport::soft::rc` is a sans-IO Reliable Connection engine that knows nothing of sockets or
//! clocks; transports know nothing of reports; reports know nothing of transports.

#![deny(clippy::undocumented_unsafe_blocks)]
#![warn(unreachable_pub)]

pub mod app;
pub mod bench;
pub mod cli;
pub mod compare;
pub mod fabric;
pub mod gate;
pub mod oob;
pub mod orchestrate;
pub mod params;
pub mod report;
pub mod results;
pub mod stats;
pub mod transport;
pub mod wire;
