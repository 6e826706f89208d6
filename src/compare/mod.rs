//! Producing comparison sets: transports (RoCE v1, RoCE v2, TCP) running the same tests, side by side.
//!
//! A [`CompareSet`](crate::results::CompareSet) is filled either live, by the orchestrator in [`run`]
//! that starts each transport's `roce_<test>` server and client in turn (on this machine: [`local`];
//! between two hosts: [`remote`], a two-rank run of `crate::orchestrate`'s control protocol; their
//! command lines: [`leg`]; the child processes: `crate::orchestrate::child`), each run followed by the
//! floor of the host path it took ([`floor`]: `roce_ref` run the same way), or from result files made
//! elsewhere ([`files`], `roce_compare --from`). [`ceiling`] works out what the wire allows each
//! protocol, [`port`] at which port speed and MTU. [`loss`] sweeps every transport
//! across one lossy link (`--loss-sweep`), [`loss_report`] shows and writes what it found. `crate::report` renders the set and
//! writes its files; `crate::gate` judges it. [`cli`] is `roce_compare` itself.

pub(crate) mod ceiling;
pub mod cli;
pub mod congestion;
pub(crate) mod error;
pub(crate) mod files;
pub(crate) mod floor;
pub(crate) mod leg;
pub(crate) mod local;
pub(crate) mod loss;
pub(crate) mod loss_report;
pub(crate) mod port;
pub(crate) mod remote;
pub(crate) mod run;
