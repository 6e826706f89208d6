//! The rendezvous protocol between the ranks and rank 0: JSON lines over one TCP connection per rank.
//! A rank says hello (version, parameters, host, address), then runs the jobs rank 0 sends it and
//! answers each with its outcome; rank 0 pings idle ranks so that each side notices a lost peer.

use super::args::Leg;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{self, BufRead, Write};

/// Names this protocol in every hello, so that a stranger on the port is told apart from a rank.
pub const PROTOCOL: &str = "roceperf.fabric/1";

/// Longest line accepted (a result with every size's histogram is far smaller).
pub(crate) const MAX_LINE: u64 = 64 << 20;

/// A rank's first message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    /// [`PROTOCOL`].
    pub protocol: String,
    /// roceperf version of the rank.
    pub version: String,
    /// Its rank.
    pub rank: usize,
    /// The job size it was told.
    pub size: usize,
    /// Parameters every rank must share, by name.
    pub params: BTreeMap<String, String>,
    /// Its host name.
    pub host: String,
    /// The address peers reach it at, when it knows better than rank 0 (`--advertise`, soft on lo).
    pub addr: Option<String>,
    /// Its `-d` device.
    pub device: Option<String>,
    /// Its process id.
    pub pid: u32,
}

/// Which side of a pair test a job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// Starts the binary without a host and waits.
    Server,
    /// Starts the binary with the server's address.
    Client,
}

/// One side of one pair test, as rank 0 asks a rank to run it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// Job id, unique in the run.
    pub id: u64,
    /// `write_bw`, ...
    pub test: String,
    /// Which leg's flags.
    pub(crate) leg: Leg,
    /// Server or client.
    pub side: Side,
    /// The out-of-band port of the pair.
    pub port: u16,
    /// The peer's rank.
    pub peer: usize,
    /// The server's address (clients only).
    pub(crate) server_addr: Option<String>,
    /// `ROCEPERF_IMPAIR` for this side, when the lab asked for an impaired pair.
    pub impair: Option<String>,
    /// Longest the binary may run, in milliseconds.
    pub(crate) timeout_ms: u64,
}

/// What one side of a pair test gave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideOutcome {
    /// The binary's exit code (None: killed or not started).
    pub exit_code: Option<i32>,
    /// Why it failed, when it did (the binary's last error lines, a timeout, a cancel).
    pub error: Option<String>,
    /// The client's result JSON (`--json`), as the binary wrote it.
    pub result: Option<serde_json::Value>,
    /// Wall time of the binary, milliseconds.
    pub(crate) elapsed_ms: u64,
}

/// A rank's messages to rank 0.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToCoordinator {
    /// The first message.
    Hello(Hello),
    /// A job ended.
    Done {
        /// The job.
        job: u64,
        /// Its outcome.
        outcome: SideOutcome,
    },
}

/// Rank 0's messages to a rank.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToWorker {
    /// Every rank arrived and agrees: the run starts.
    Welcome {
        /// Ranks in the run (some may be missing).
        size: usize,
    },
    /// Run one side of a pair test.
    Job(Job),
    /// Stop a job (its peer was lost).
    Cancel {
        /// The job.
        job: u64,
    },
    /// Nothing to do yet; rank 0 is alive.
    Ping,
    /// The run is over; exit with `code`.
    Finish {
        /// Exit code for the rank.
        code: u8,
    },
    /// The run cannot go on; exit with `code` after printing `reason`.
    Abort {
        /// Exit code.
        code: u8,
        /// Why.
        reason: String,
    },
}

/// Writes one message as a JSON line.
pub fn send<T: Serialize>(w: &mut impl Write, msg: &T) -> io::Result<()> {
    let mut line = serde_json::to_vec(msg).map_err(io::Error::other)?;
    line.push(b'\n');
    w.write_all(&line)?;
    w.flush()
}

/// Reads one message; Ok(None) at a clean end of stream.
pub fn recv<T: for<'de> Deserialize<'de>, R: BufRead>(r: &mut R) -> io::Result<Option<T>> {
    let mut line = Vec::new();
    let n = io::Read::take(&mut *r, MAX_LINE).read_until(b'\n', &mut line)?;
    if n == 0 {
        return Ok(None);
    }
    if line.last() != Some(&b'\n') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            if n as u64 >= MAX_LINE {
                "message too long"
            } else {
                "connection closed mid-message"
            },
        ));
    }
    serde_json::from_slice(&line).map(Some).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("unreadable message: {e}"),
        )
    })
}
