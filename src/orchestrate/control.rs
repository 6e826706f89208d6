//! The control protocol between a driver and its workers: JSON lines over one TCP connection, each at
//! most [`MAX_LINE`] long.
//!
//! `roce_fabric`'s rank 0 drives every rank; `roce_compare HOST` drives the `roce_compare --server`
//! it reached. Whoever connected, the worker speaks first: its [`Hello`] (protocol, version, rank,
//! parameters, host), which the driver checks and answers with [`ToWorker::Welcome`] or
//! [`ToWorker::Abort`]. Then the driver sends [`Job`]s, each one side of one pair test, and the worker
//! answers each with [`ToDriver::Done`] (and first [`ToDriver::Started`] when the job asked it to pick
//! the port). `Cancel` stops a job, `Ping` shows an idle worker that its driver lives, `Finish` ends
//! the session. A job is a structured request (its `run` is the tool's: which test, which flags): the
//! worker builds the command line itself, so a peer can never make it run anything else.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{self, BufRead, Write};

/// Names this protocol in every hello, so that a stranger on the port is told apart from a worker.
pub const PROTOCOL: &str = "roceperf.control/1";

/// Longest line accepted (a result with every size's histogram is far smaller).
pub(crate) const MAX_LINE: u64 = 64 << 20;

/// A worker's first message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    /// [`PROTOCOL`].
    pub protocol: String,
    /// roceperf version of the worker.
    pub version: String,
    /// Its rank.
    pub rank: usize,
    /// The job size it was told.
    pub size: usize,
    /// Parameters every rank must share, by name.
    pub params: BTreeMap<String, String>,
    /// Its host name.
    pub host: String,
    /// The address peers reach it at, when it knows better than the driver (`--advertise`, soft on lo).
    pub addr: Option<String>,
    /// Its `-d` device.
    pub device: Option<String>,
    /// Its process id.
    pub pid: u32,
    /// The cores it may run on (its affinity mask and cgroup), to tell a host whose pairs want more
    /// busy-polling cores than it has; None from a worker that did not say.
    #[serde(default)]
    pub cores: Option<usize>,
}

impl Hello {
    /// This process's hello as rank `rank` of `size`.
    pub(crate) fn new(
        rank: usize,
        size: usize,
        params: BTreeMap<String, String>,
        addr: Option<String>,
        device: Option<String>,
    ) -> Hello {
        Hello {
            protocol: PROTOCOL.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            rank,
            size,
            params,
            host: hostname(),
            addr,
            device,
            pid: std::process::id(),
            cores: std::thread::available_parallelism().ok().map(usize::from),
        }
    }
}

/// This machine's host name (for naming workers in messages).
pub(crate) fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown-host".into())
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

impl Side {
    /// `server` or `client`.
    pub fn name(self) -> &'static str {
        match self {
            Side::Server => "server",
            Side::Client => "client",
        }
    }
}

/// One side of one pair test, as a driver asks a worker to run it. `R` is what the tool says about
/// the test and its flags (`roce_fabric`: the test and which leg of the rank's own flags;
/// `roce_compare`: the test, its sizes and the transport).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job<R> {
    /// Job id, unique in the session.
    pub id: u64,
    /// The test and its flags, in the tool's terms.
    #[serde(flatten)]
    pub run: R,
    /// Server or client.
    pub side: Side,
    /// The out-of-band port of the pair; None: the worker picks a free one and says which
    /// ([`ToDriver::Started`]), since a driver on another host cannot know one.
    pub port: Option<u16>,
    /// The peer's rank.
    pub peer: usize,
    /// The server's address (clients only).
    pub server_addr: Option<String>,
    /// `ROCEPERF_IMPAIR` for this side, when the lab asked for an impaired pair.
    pub impair: Option<String>,
    /// Longest the binary may run, in milliseconds.
    pub timeout_ms: u64,
}

/// What one side of a pair test gave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// The binary's exit code (None: killed or not started).
    pub exit_code: Option<i32>,
    /// Why it failed, when it did (the binary's error lines, a timeout, a cancel).
    pub error: Option<String>,
    /// The client's result JSON (`--json`), as the binary wrote it.
    pub result: Option<serde_json::Value>,
    /// Wall time of the binary, milliseconds.
    pub elapsed_ms: u64,
}

impl Outcome {
    /// A side that did not run or give an answer, and why.
    pub(crate) fn failed(error: String) -> Outcome {
        Outcome {
            exit_code: None,
            error: Some(error),
            result: None,
            elapsed_ms: 0,
        }
    }
}

/// A worker's messages to its driver.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToDriver {
    /// The first message.
    Hello(Hello),
    /// A job whose port the worker picked is running.
    Started {
        /// The job.
        job: u64,
        /// Its out-of-band port.
        port: u16,
    },
    /// A job ended.
    Done {
        /// The job.
        job: u64,
        /// Its outcome.
        outcome: Outcome,
    },
}

/// A driver's messages to a worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToWorker<R> {
    /// Its hello was accepted (every rank arrived and agrees): jobs may follow.
    Welcome {
        /// Workers in the run (some may be missing).
        size: usize,
    },
    /// Run one side of a pair test.
    Job(Job<R>),
    /// Stop a job (its peer was lost, or it outlived its peer).
    Cancel {
        /// The job.
        job: u64,
    },
    /// Nothing to do yet; the driver is alive.
    Ping,
    /// The session is over; exit with `code`.
    Finish {
        /// Exit code for the worker.
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
pub fn recv<T: DeserializeOwned, R: BufRead>(r: &mut R) -> io::Result<Option<T>> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Run {
        test: String,
    }

    #[test]
    fn a_job_is_one_json_line_with_its_run_beside_its_fields() {
        let job = ToWorker::Job(Job {
            id: 3,
            run: Run {
                test: "write_bw".into(),
            },
            side: Side::Client,
            port: None,
            peer: 1,
            server_addr: Some("10.0.0.1".into()),
            impair: None,
            timeout_ms: 1000,
        });
        let mut buf = Vec::new();
        send(&mut buf, &job).unwrap();
        let text = String::from_utf8(buf.clone()).unwrap();
        assert!(
            text.starts_with(
                r#"{"type":"job","id":3,"test":"write_bw","side":"client","port":null"#
            ),
            "{text}"
        );
        assert_eq!(text.matches('\n').count(), 1);
        let back: ToWorker<Run> = recv(&mut buf.as_slice()).unwrap().unwrap();
        assert_eq!(back, job);
        let none: Option<ToWorker<Run>> = recv(&mut &b""[..]).unwrap();
        assert_eq!(none, None);
    }

    #[test]
    fn strangers_and_cut_lines_are_errors() {
        let err = recv::<ToDriver, _>(&mut &b"GET / HTTP/1.0\n"[..]).unwrap_err();
        assert!(err.to_string().starts_with("unreadable message"), "{err}");
        let err = recv::<ToDriver, _>(&mut &br#"{"type":"ping""#[..]).unwrap_err();
        assert_eq!(err.to_string(), "connection closed mid-message");
        let started: ToDriver = recv(&mut &b"{\"type\":\"started\",\"job\":2,\"port\":4791}\n"[..])
            .unwrap()
            .unwrap();
        assert_eq!(started, ToDriver::Started { job: 2, port: 4791 });
    }
}
