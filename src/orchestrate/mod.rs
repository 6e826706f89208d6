//! What runs many runs: the one layer `roce_compare` and `roce_fabric` share to start the single-pair
//! binaries and to talk to the hosts that start them.
//!
//! - [`child`]: the one runner of a `roce_<test>` binary as a child process (logs, deadline, cancel,
//!   interrupt, `PR_SET_PDEATHSIG`, the tail of its error lines), and where the binaries are.
//! - [`signals`]: the one SIGINT/SIGTERM flag of the process (also what stops a run without end).
//! - [`control`]: the one control protocol, JSON lines between a driver (rank 0, the two-host
//!   `roce_compare` client) and its workers (the ranks, `roce_compare --server`).
//! - [`worker`]: the worker's side of it, the same loop for a rank and a compare server.
//!
//! A worker is reached, or reaches its driver, through `oob::dial`, the one connect-and-retry loop.
//! What a job runs (its command line) and how its failures read are each tool's ([`worker::Jobs`]).

pub(crate) mod child;
pub mod control;
pub(crate) mod signals;
pub(crate) mod worker;
