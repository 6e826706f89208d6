//! roce_switch's errors, and the exit code each one maps to.

use std::io;

/// Everything that can stop the switch.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The options cannot work, an interface is missing, a privilege is lacking (exit 2).
    #[error("{0}")]
    Usage(String),
    /// Setting up failed: a socket option, an ioctl (exit 2).
    #[error("{context}: {source}")]
    Setup {
        /// What was being set up, naming the interface or flag.
        context: String,
        /// The system's reason.
        source: io::Error,
    },
    /// A socket call failed while switching, or the stats could not be written (exit 1).
    #[error("{context}: {source}")]
    Io {
        /// The call and the port.
        context: String,
        /// The system's reason.
        source: io::Error,
    },
}

impl Error {
    /// 2 usage or setup, 1 a failure while running.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Usage(_) | Error::Setup { .. } => 2,
            Error::Io { .. } => 1,
        }
    }

    /// A set-up failure with its context.
    pub fn setup(context: impl Into<String>, source: io::Error) -> Error {
        Error::Setup {
            context: context.into(),
            source,
        }
    }

    /// A failure while running.
    pub fn io(context: impl Into<String>, source: io::Error) -> Error {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}

/// roce_switch's result type.
pub type Result<T> = std::result::Result<T, Error>;
