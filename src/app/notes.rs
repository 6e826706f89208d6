//! What a run says besides its figures: typed header notes and stderr warnings.
//!
//! The notes say what was chosen and why; both are values (hyperfine's `output/warnings.rs`), rendered
//! in one place.

use crate::cli::TransportReason;
use crate::params::TransportKind;
use std::fmt;

/// One line of the header's notes (and of the JSON's `notes`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Note {
    /// Which transport runs, and why that one.
    Transport {
        /// The transport.
        kind: TransportKind,
        /// Chosen explicitly, or what `--transport auto` saw.
        reason: TransportReason,
    },
    /// Where the datapath thread is pinned, and why there.
    Datapath {
        /// The core and the reason, as the pinning reports it.
        reason: String,
    },
    /// `--validate`: what this test checks, and at what cost.
    Validate(crate::bench::validate::Checked),
    /// `-I` on the soft transport changes nothing.
    InlineIgnored,
    /// How the TCP baseline moves the bytes, and to which address.
    TcpBaseline {
        /// The address of the data connections.
        addr: String,
    },
    /// Over TCP there is no meaningful peak bandwidth.
    TcpNoPeak,
    /// A perftest peer: its version, and why there is no warm-up.
    PerftestPeer {
        /// The version the peer announced.
        version: String,
    },
    /// A line of the transport's own account of its setup (device, GID, MTU, its notes).
    Setup(String),
    /// `--rate_limit`: how this side paces what it sends.
    Paced {
        /// The target with its units, e.g. `2.5 Gb/s`.
        rate: String,
        /// Messages per burst.
        burst: u32,
    },
    /// `-R`: the queue pairs were connected through the CM.
    RdmaCm {
        /// The port (service ID) the server listened on.
        port: u16,
        /// UD: the queue pairs were resolved (SIDR_REQ / SIDR_REP), not connected.
        resolved: bool,
        /// The peer's queue pairs as the CM agreed them, e.g. `QPN 0x12 PSN 0x3456`.
        peers: String,
    },
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Note::Transport { kind, reason } => write!(f, "transport {kind}: {reason}"),
            Note::Datapath { reason } => write!(f, "datapath on {reason}"),
            Note::Validate(checked) => checked.fmt(f),
            Note::InlineIgnored => f.write_str(
                "-I accepted and ignored: the soft transport copies every payload into its packets, so inline sends would change nothing",
            ),
            Note::TcpBaseline { addr } => write!(
                f,
                "TCP baseline: one connection per queue pair to {addr}, TCP_NODELAY, non-blocking sockets busy-polled"
            ),
            Note::TcpNoPeak => f.write_str(
                "BW peak not measured over TCP: a completion only means the kernel took the bytes",
            ),
            Note::PerftestPeer { version } => write!(
                f,
                "out of band: perftest's dialect, peer announced version {version}; no warm-up, as perftest"
            ),
            Note::Setup(line) => f.write_str(line),
            Note::Paced { rate, burst } => write!(
                f,
                "rate limit {rate}: roceperf's software pacer releases bursts of {burst} messages on a fixed schedule against the monotonic clock (perftest's default HW type falls back to SW on Ethernet)"
            ),
            Note::RdmaCm {
                port,
                resolved,
                peers,
            } => write!(
                f,
                "connection setup through the CM (-R): {} on QP1, service port {port}; peer {peers}",
                if *resolved {
                    "SIDR_REQ/SIDR_REP (UD queue pairs are resolved, not connected)"
                } else {
                    "REQ/REP/RTU"
                }
            ),
        }
    }
}

/// The notes as the report keeps them.
pub(crate) fn lines(notes: &[Note]) -> Vec<String> {
    notes.iter().map(Note::to_string).collect()
}

/// Something said on stderr while the run goes on or ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Warning {
    /// The client found no server yet and keeps trying.
    Retrying {
        /// The server, as `host:port`.
        server: String,
        /// `--connect-timeout`.
        secs: u64,
    },
    /// A `--persist` server serves another client: this one waits its turn.
    Queued {
        /// The server, as `host:port`.
        server: String,
        /// The client it serves.
        serving: String,
        /// This client's place in its queue (1: next).
        place: u64,
    },
    /// A `--persist` server queued a client behind another.
    QueuedClient {
        /// The client queued.
        client: String,
        /// The client served.
        serving: String,
        /// Its place (1: next).
        place: u64,
    },
    /// The transport's account of a failed completion.
    FailureDetail(String),
    /// A timed run's measurement took longer than `-D` asks by more than its margin: the process was
    /// stopped or starved, and the figures cover a longer window than asked.
    Overran {
        /// `-D`.
        secs: u64,
        /// `-f`.
        margin: u64,
        /// What was to take `expected` seconds (the whole run, or its measured window).
        expected: u64,
        /// How long it took.
        took: std::time::Duration,
    },
    /// A failed run's files could not be written either (the write error); the run's own error follows.
    FailedRunNotWritten(String),
    /// The NIC's counters could not be read after set-up (the error); the run goes on without them.
    NicCountersLost(String),
    /// `-v`: the transport's counters at the end (several lines, each ending in a newline).
    Counters {
        /// The transport.
        transport: TransportKind,
        /// The counters, as the transport renders them.
        text: String,
    },
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::Retrying { server, secs } => write!(
                f,
                "no server at {server} yet; retrying for up to {secs} s (--connect-timeout)"
            ),
            Warning::Queued {
                server,
                serving,
                place,
            } => write!(
                f,
                "the server at {server} is serving {serving}: this client waits for its turn (place {place} in the queue) and starts when the runs before it end"
            ),
            Warning::QueuedClient {
                client,
                serving,
                place,
            } => write!(
                f,
                "client {client} waits while {serving} is served (place {place} in the queue)"
            ),
            Warning::FailureDetail(d) => f.write_str(d),
            Warning::Overran {
                secs,
                margin,
                expected,
                took,
            } => {
                let by = match margin {
                    0 => "more than 1 s".to_string(),
                    m => format!("more than the {m} s margin (-f)"),
                };
                write!(
                    f,
                    "this -D {secs} run took {:.1} s to measure what takes {expected} s, {by} \
                     longer: the process was stopped or starved of CPU meanwhile, so its figures \
                     cover a longer window than asked; rerun it undisturbed",
                    took.as_secs_f64()
                )
            }
            Warning::FailedRunNotWritten(e) => write!(
                f,
                "the failed run's result files (its completed sizes, counters and error) were not \
                 written either: {e}"
            ),
            Warning::NicCountersLost(e) => write!(
                f,
                "the NIC's counters (-W) are no longer read, the rest of the run goes on: {e}"
            ),
            Warning::Counters { transport, text } => {
                write!(f, "{transport} transport counters:\n{text}")
            }
        }
    }
}

impl Warning {
    /// Prints the warning on stderr with the program's prefix, its lines within 100 columns.
    pub(crate) fn emit(&self) {
        let text = crate::report::wrap::wrap(&format!("roceperf: {self}"));
        match self {
            // The counters end in their own newline.
            Warning::Counters { .. } => eprint!("{text}"),
            _ => eprintln!("{text}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_render_as_the_header_shows_them() {
        let n = [
            Note::Transport {
                kind: TransportKind::Tcp,
                reason: TransportReason::Chosen(TransportKind::Tcp),
            },
            Note::TcpBaseline {
                addr: "127.0.0.1".into(),
            },
        ];
        assert_eq!(
            lines(&n),
            [
                "transport tcp: chosen with --transport tcp",
                "TCP baseline: one connection per queue pair to 127.0.0.1, TCP_NODELAY, non-blocking sockets busy-polled"
            ]
        );
        let w = Warning::Retrying {
            server: "[::1]:18515".into(),
            secs: 10,
        };
        assert_eq!(
            w.to_string(),
            "no server at [::1]:18515 yet; retrying for up to 10 s (--connect-timeout)"
        );
    }
}
