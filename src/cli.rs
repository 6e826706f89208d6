//! perftest-compatible command-line flags turned into validated options.
//!
//! [`args`] is the clap definition (hyperfine's `cli.rs`), [`Options`] the checked result (its
//! `options.rs`).
//!
//! Flags that mean the same thing as in perftest keep perftest's spelling (`-s 64K`, `-a`, `-n`, `-D`,
//! `--report_gbits`, ...). A flag that does not apply to the chosen test or transport is an error that
//! says so, never silently ignored.
//!
//! The [`Error`] every check returns lives here, so that no check reaches another file for it.

pub(crate) mod args;
mod checks;
mod connection;
mod options;
#[cfg(test)]
mod pace_tests;
mod pacing;
mod reporting;
#[cfg(test)]
pub(crate) mod tests;
mod values;

pub(crate) use args::OobArg;
pub(crate) use checks::TransportReason;
pub(crate) use connection::too_big as ud_too_big;
pub use options::Options;
pub(crate) use options::OutputOptions;

use crate::params::{TestKind, TransportKind};

/// The command line of `roce_<test>` as its `--help` shows it, named after the binary: what the man
/// pages and shell completions are generated from (`examples/manual`).
pub fn command(test: TestKind) -> clap::Command {
    args::command_for(test).name(format!("roce_{}", test.name()))
}

/// Validation errors; the message names the flag and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A flag that does not apply to this test or transport was given.
    #[error("{flag} does not apply to {what}: {why}; drop it")]
    NotApplicable {
        /// The flag as typed.
        flag: &'static str,
        /// The test or transport it does not apply to.
        what: String,
        /// Why.
        why: &'static str,
    },
    /// Two flags that cannot be combined.
    #[error("{a} and {b} cannot be used together: {why}")]
    Conflict {
        /// First flag.
        a: &'static str,
        /// Second flag.
        b: &'static str,
        /// Why, and what to do.
        why: &'static str,
    },
    /// A value out of range or inconsistent with another.
    #[error("invalid value for {flag}: {why}")]
    Invalid {
        /// The flag.
        flag: &'static str,
        /// What is wrong and what is allowed.
        why: String,
    },
    /// A flag the run cannot do without was not given.
    #[error("no {flag}: {what}")]
    Missing {
        /// The flag.
        flag: &'static str,
        /// What it names, and how to give it.
        what: String,
    },
    /// The chosen transport exists in the design but not in this build yet.
    #[error(
        "--transport {transport} is not built yet in this roceperf{reason}; run the TCP baseline with --transport tcp"
    )]
    NotBuilt {
        /// The transport chosen.
        transport: TransportKind,
        /// Why auto chose it, when it did.
        reason: String,
    },
}
