//! perftest-compatible command-line flags turned into validated options.
//!
//! [`args`] is the clap definition (hyperfine's `cli.rs`), [`Options`] the checked result (its
//! `options.rs`).
//!
//! Flags that mean the same thing as in perftest keep perftest's spelling (`-s 64K`, `-a`, `-n`, `-D`,
//! `--report_gbits`, ...). A flag that does not apply to the chosen test or transport is an error that
//! says so, never silently ignored.

pub mod args;
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

pub use args::{Args, OobArg, TransportArg};
pub use checks::{BUILT_TRANSPORTS, TransportReason};
pub(crate) use connection::too_big as ud_too_big;
pub use options::{DEFAULT_PERCENTILES, DeviceOptions, Error, Options, OutputOptions};
pub use reporting::DEFAULT_OUT_JSON;
pub use values::parse_size;
