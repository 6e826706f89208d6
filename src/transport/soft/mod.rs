//! The userspace RoCE stack: a sans-IO RC engine, I/O backends, and a simulated link for tests.
//!
//! - [`endpoint`]: [`SoftEndpoint`], the transport's [`Endpoint`](crate::transport::Endpoint), and
//!   its datapath; [`config`] and [`counters`] are what it takes and what it counts.
//! - [`plan`]: every setup decision as a pure function of the configuration and the interface
//!   (each backend plans its own part); the endpoint then opens the backend it names as an `io`
//!   `Nic`; [`netdev`] tells what the interface is.
//! - [`path`]: how each queue pair frames packets to its peer, decided at connect ([`neighbour`]
//!   finds the peer's MAC when it sent none).
//! - `ingress` and `egress`: the receive checks and the transmit framing, per packet; the `Nic`:
//!   the backend in use (the UDP or AF_PACKET [`io::device::Device`], each with its own batches),
//!   which [`io::fault`] impairs.
//! - [`pfc`]: the pause state PFC frames set on the AF_PACKET backend, which holds the transmit
//!   path's frames of a paused priority, and its counters.
//! - [`cm`]: the Communication Manager (REQ / REP / RTU on QP1) behind `-R`, sans-IO.
//! - [`cc`]: congestion control (`--cc`): the CNPs a queue pair sends for CE-marked packets, and
//!   DCQCN's rate and the pacer that holds its requests to it.
//! - [`rc`]: the RC engine; [`unreliable`]: the UC and UD engines beside it (`-c`), one of the three
//!   behind each queue pair (`engine`); [`io`]: the sockets and batches; [`sim`]: a simulated link
//!   for tests.

mod bytes;
pub mod cc;
pub(crate) mod cm;
pub(crate) mod config;
pub(crate) mod counters;
mod egress;
pub mod endpoint;
mod engine;
mod icrc_cache;
mod ingress;
pub mod io;
pub(crate) mod marks;
pub(crate) mod neighbour;
pub mod netdev;
pub(crate) mod path;
pub(crate) mod pfc;
pub(crate) mod plan;
pub mod rc;
pub mod sim;
pub mod unreliable;
