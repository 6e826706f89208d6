//! roce_ref's errors, and the exit code each one maps to.

use std::io;

/// Everything that can stop a reference run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The options cannot work together, or the two sides were given different ones (exit 2).
    #[error("{0}")]
    Usage(String),
    /// Setting up failed: a socket, a bind, a missing capability, a server that never answered (exit 2).
    #[error("{context}: {source}")]
    Setup {
        /// What was being set up, naming the flag or peer involved.
        context: String,
        /// The system's reason.
        source: io::Error,
    },
    /// A peer that went quiet or away mid-run (exit 1).
    #[error("{0}")]
    Peer(String),
    /// A socket call failed mid-run (exit 1).
    #[error("{context}: {source}")]
    Io {
        /// The call and the peer or device it was for.
        context: String,
        /// The system's reason.
        source: io::Error,
    },
}

impl Error {
    /// Exit code, as roceperf's: 2 usage or setup, 1 a failure while running.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Usage(_) | Error::Setup { .. } => 2,
            Error::Peer(_) | Error::Io { .. } => 1,
        }
    }

    /// A set-up failure with its context.
    pub fn setup(context: impl Into<String>, source: io::Error) -> Error {
        Error::Setup {
            context: context.into(),
            source,
        }
    }

    /// A mid-run I/O failure with its context.
    pub fn io(context: impl Into<String>, source: io::Error) -> Error {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}

/// roce_ref's result type.
pub type Result<T> = std::result::Result<T, Error>;
