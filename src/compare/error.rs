//! Errors of a live comparison, each naming the binary, file, command or peer and what to do.
//!
//! A failed run's message becomes its note in the report.

use crate::orchestrate::child::SpawnError;
use std::path::PathBuf;

/// Errors of the live comparison (`--local`, `--server`, `HOST`).
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// A child's log file could not be created.
    #[error("cannot create the log {path}: {source}")]
    Log {
        /// The log file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A test binary could not be started.
    #[error(
        "cannot start {program}: {source}; build the six test binaries next to roce_compare (cargo build --release --bins)"
    )]
    Spawn {
        /// The binary.
        program: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The `ip` command (iproute2) is not installed.
    #[error("the ip command is missing; install iproute2 (bash scripts/deps.sh demo)")]
    IpMissing,
    /// An `ip` command failed.
    #[error("`ip {args}` failed: {stderr}")]
    Ip {
        /// Its arguments.
        args: String,
        /// What it printed.
        stderr: String,
    },
    /// This process lacks capabilities RoCE v1 across namespaces needs.
    #[error(
        "needs {missing}, which this process lacks; run roce_compare --local as root (sudo), or give it those capabilities (setcap cap_sys_admin,cap_net_admin,cap_net_raw+ep)"
    )]
    Privileges {
        /// The missing capabilities and what each is for.
        missing: String,
    },
    /// A server or client exited with a failure.
    #[error("{what} {status}{tail}")]
    Exited {
        /// `server roce_write_lat`.
        what: String,
        /// `exited with status 2`.
        status: String,
        /// `: <its error lines>`.
        tail: String,
    },
    /// A server did not finish by its deadline and was killed.
    #[error("{what} did not finish and was killed{tail}")]
    Killed {
        /// `server roce_write_lat`.
        what: String,
        /// `: <its last lines>`.
        tail: String,
    },
    /// A system call the orchestration needs failed.
    #[error("{action}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// A client succeeded but its result file cannot be used.
    #[error("the client succeeded but its results {path} cannot be used: {detail}")]
    Results {
        /// The `--json` file.
        path: PathBuf,
        /// What is wrong with it.
        detail: String,
    },
    /// The control connection to a `roce_compare --server` failed, or the server refused a request.
    #[error("{peer}: {detail}")]
    Control {
        /// `host:port`.
        peer: String,
        /// What happened.
        detail: String,
    },
    /// A device name a peer sent is not one.
    #[error("{0:?} is not a device or interface name")]
    BadDevice(String),
    /// A peer sent flags of its own for the command line (only a local loss sweep adds any).
    #[error("a two-host comparison takes no extra flags for its runs (got {0:?})")]
    ExtraFlags(Vec<String>),
    /// A loss sweep could not be set up; the text says what to do.
    #[error("loss sweep: {0}")]
    LossSweep(String),
    /// One side of a run failed; the text says which and how (an [`Error::Exited`] or
    /// [`Error::Killed`] as the side's job worded it).
    #[error("{0}")]
    Side(String),
}

impl From<SpawnError> for Error {
    fn from(e: SpawnError) -> Error {
        match e {
            SpawnError::Log { path, source } => Error::Log { path, source },
            SpawnError::IpMissing => Error::IpMissing,
            SpawnError::Spawn { program, source } => Error::Spawn { program, source },
        }
    }
}

/// Results of the live comparison.
pub(crate) type Result<T> = std::result::Result<T, Error>;
