//! The byte channel: exact, timed reads and one write per message over any stream, in perftest's order.
//!
//! perftest writes each message with one `write()` and reads it with one `read()` that must return the
//! whole message, so we never split or merge messages on the way out. On the way in we read exactly, and
//! time out in two ways: nothing at all for `idle` (the peer is gone or stuck), or part of a message and
//! then nothing for `stall` (the peer sent a message of another size: it is at another step).

use super::{PerftestError, Result};
use crate::oob::dial::{self, DialError, Retry};
use crate::oob::frame::MAGIC as ROCEPERF_MAGIC;
use std::fmt;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// A byte stream the channel can time out on. Implemented for TCP and Unix sockets.
pub trait OobStream: Read + Write {
    /// Sets the blocking-read timeout (`None`: block forever).
    fn set_read_timeout(&mut self, timeout: Option<Duration>) -> std::io::Result<()>;
    /// Switches non-blocking mode (used to poll for a barrier while the data path runs).
    fn set_nonblocking(&mut self, nonblocking: bool) -> std::io::Result<()>;
    /// Closes our sending direction (FIN), telling the peer we are done without closing its side.
    fn shutdown_write(&mut self) -> std::io::Result<()>;
}

/// TCP and Unix stream sockets have the same inherent methods; the trait forwards to them.
macro_rules! oob_stream {
    ($($stream:ty),*) => {$(
        impl OobStream for $stream {
            fn set_read_timeout(&mut self, timeout: Option<Duration>) -> std::io::Result<()> {
                <$stream>::set_read_timeout(self, timeout)
            }
            fn set_nonblocking(&mut self, nonblocking: bool) -> std::io::Result<()> {
                <$stream>::set_nonblocking(self, nonblocking)
            }
            fn shutdown_write(&mut self) -> std::io::Result<()> {
                <$stream>::shutdown(self, std::net::Shutdown::Write)
            }
        }
    )*};
}

oob_stream!(TcpStream, UnixStream);

/// Connects to a perftest server (the client side), retrying a refused or unreachable peer for up to `wait`
/// (perftest itself does not retry, so start order matters less with us). Sets TCP_NODELAY so that each
/// message leaves at once in its own segment. `addr` is e.g. `"10.0.0.2:18515"` or a [`HostPort`].
///
/// [`HostPort`]: crate::oob::HostPort
pub fn connect<A: ToSocketAddrs + fmt::Display>(addr: A, wait: Duration) -> Result<TcpStream> {
    let step = format!("connecting to the perftest server at {addr}");
    let fail = |source| PerftestError::Io {
        step: format!(
            "{step} (is the ib_* server running and listening on that port? -p must match)"
        ),
        source,
    };
    let addrs: Vec<SocketAddr> = addr.to_socket_addrs().map_err(fail)?.collect();
    let retry = Retry {
        wait,
        pause: Duration::from_millis(100),
        attempt: None,
    };
    // refused: not listening yet; unreachable: the peer's address is not up yet
    let retryable = |e: &std::io::Error| {
        matches!(
            e.kind(),
            ErrorKind::ConnectionRefused
                | ErrorKind::TimedOut
                | ErrorKind::HostUnreachable
                | ErrorKind::NetworkUnreachable
        )
    };
    match dial::connect(&addrs, retry, retryable, || {}) {
        Ok((s, _)) => {
            s.set_nodelay(true).map_err(|source| PerftestError::Io {
                step: step.clone(),
                source,
            })?;
            Ok(s)
        }
        Err(DialError::Fatal(e) | DialError::GaveUp(Some(e))) => Err(fail(e)),
        Err(DialError::GaveUp(None)) => Err(fail(std::io::Error::new(
            ErrorKind::InvalidInput,
            "could not resolve to any addresses",
        ))),
    }
}

/// Accepts one perftest client on `bind` (e.g. `0.0.0.0:18515`), as perftest's server does (a single
/// accept, then the listener is closed). Sets TCP_NODELAY.
pub fn accept<A: ToSocketAddrs + fmt::Display>(bind: A) -> Result<TcpStream> {
    let step = format!("waiting for a perftest client on {bind}");
    let io = |source| PerftestError::Io {
        step: step.clone(),
        source,
    };
    let listener = std::net::TcpListener::bind(bind).map_err(io)?;
    let (s, _) = listener.accept().map_err(io)?;
    s.set_nodelay(true).map_err(io)?;
    Ok(s)
}

/// How long the channel waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Longest silence during setup steps before we give up.
    pub idle: Duration,
    /// Longest silence in the middle of a message (a shorter message from a peer at another step).
    pub stall: Duration,
    /// Longest wait for a peer that is running a test (a barrier after a run); `None`: no limit.
    pub run: Option<Duration>,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            idle: Duration::from_secs(30),
            stall: Duration::from_secs(2),
            run: None,
        }
    }
}

/// One side of perftest's TCP connection. Generic over the stream so tests can use a socket pair.
pub struct PerftestChannel<S: OobStream> {
    stream: S,
    client: bool,
    timeouts: Timeouts,
    /// Partial incoming message kept across non-blocking polls.
    pending: Vec<u8>,
    /// Until [`PerftestChannel::end_setup`]: when the setup must be over, and how long it was given.
    setup: Option<(Instant, Duration)>,
    /// Every message written and read, when recording (tests compare it with real traces).
    log: Option<Vec<(bool, Vec<u8>)>>,
    /// A whole message has been read: the first bytes, where roceperf's own hello would show, are past.
    greeted: bool,
}

impl<S: OobStream> PerftestChannel<S> {
    /// Wraps a connected stream. `client`: this side named a host, and writes first in every exchange.
    pub fn new(stream: S, client: bool, timeouts: Timeouts) -> Self {
        PerftestChannel {
            stream,
            client,
            timeouts,
            pending: Vec::new(),
            setup: None,
            log: None,
            greeted: false,
        }
    }

    /// From now, every read until [`end_setup`](Self::end_setup) must be done within `within` in all,
    /// however the peer paces its bytes (the idle and stall timeouts apply per read).
    pub(crate) fn limit_setup(&mut self, within: Duration) {
        self.setup = Some((Instant::now() + within, within));
    }

    /// The setup is over (the data path connects): reads wait by the idle, stall and run timeouts only.
    pub(crate) fn end_setup(&mut self) {
        self.setup = None;
    }

    fn setup_over(&self, step: &str, got: usize, want: usize) -> PerftestError {
        PerftestError::SetupDeadline {
            step: step.to_string(),
            got,
            want,
            secs: self.setup.map_or(0, |(_, d)| d.as_secs()),
        }
    }

    /// What is left of the setup's deadline (`None`: no deadline).
    fn setup_left(&self) -> Option<Duration> {
        self.setup
            .map(|(d, _)| d.saturating_duration_since(Instant::now()))
    }

    /// Starts keeping a copy of every message (`true` = written by us), for tests and `--oob-trace`.
    pub fn record(&mut self) {
        self.log = Some(Vec::new());
    }

    /// The messages recorded since [`record`](Self::record).
    pub fn recorded(&self) -> &[(bool, Vec<u8>)] {
        self.log.as_deref().unwrap_or(&[])
    }

    /// True on the side that writes first.
    pub(crate) fn is_client(&self) -> bool {
        self.client
    }

    /// The stream, e.g. to close it.
    pub fn into_inner(self) -> S {
        self.stream
    }

    /// One exchange: the client writes `mine` then reads `theirs.len()` bytes; the server the reverse.
    pub fn exchange(&mut self, step: &str, mine: &[u8], theirs: &mut [u8]) -> Result<()> {
        if self.client {
            self.send(step, mine)?;
            self.recv(step, theirs, self.timeouts.idle)
        } else {
            self.recv(step, theirs, self.timeouts.idle)?;
            self.send(step, mine)
        }
    }

    /// Writes one whole message with a single write call where the OS allows it.
    pub fn send(&mut self, step: &str, msg: &[u8]) -> Result<()> {
        let io = |source| PerftestError::Io {
            step: step.to_string(),
            source,
        };
        self.stream.set_nonblocking(false).map_err(io)?;
        match self.stream.write_all(msg).and_then(|_| self.stream.flush()) {
            Ok(()) => {}
            Err(e) if matches!(e.kind(), ErrorKind::BrokenPipe | ErrorKind::ConnectionReset) => {
                return Err(PerftestError::PeerClosed {
                    step: step.to_string(),
                    got: 0,
                    want: 0,
                });
            }
            Err(e) => return Err(io(e)),
        }
        if let Some(log) = &mut self.log {
            log.push((true, msg.to_vec()));
        }
        Ok(())
    }

    /// Reads exactly `buf.len()` bytes: errors on close, on `idle` silence before the first byte and on
    /// `stall` silence inside the message.
    pub fn recv(&mut self, step: &str, buf: &mut [u8], idle: Duration) -> Result<()> {
        let want = buf.len();
        let io = |source| PerftestError::Io {
            step: step.to_string(),
            source,
        };
        self.stream.set_nonblocking(false).map_err(io)?;
        // Bytes a non-blocking poll already collected count towards this message.
        let mut got = self.pending.len().min(want);
        buf[..got].copy_from_slice(&self.pending[..got]);
        self.pending.drain(..got);
        let mut since = Instant::now();
        while got < want {
            let limit = if got == 0 { idle } else { self.timeouts.stall };
            let mut left = limit.saturating_sub(since.elapsed());
            if let Some(rest) = self.setup_left() {
                if rest.is_zero() {
                    return Err(self.setup_over(step, got, want));
                }
                left = left.min(rest);
            }
            if left.is_zero() {
                return Err(self.silence(step, got, want, limit));
            }
            self.stream.set_read_timeout(Some(left)).map_err(io)?;
            match self.stream.read(&mut buf[got..]) {
                Ok(0) => {
                    return Err(PerftestError::PeerClosed {
                        step: step.to_string(),
                        got,
                        want,
                    });
                }
                Ok(n) => {
                    got += n;
                    since = Instant::now();
                    if !self.greeted && buf[..got].starts_with(ROCEPERF_MAGIC) {
                        return Err(PerftestError::RoceperfPeer);
                    }
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    if self.setup_left().is_some_and(|l| l.is_zero()) {
                        return Err(self.setup_over(step, got, want));
                    }
                    if since.elapsed() >= limit {
                        return Err(self.silence(step, got, want, limit));
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::ConnectionReset => {
                    return Err(PerftestError::PeerClosed {
                        step: step.to_string(),
                        got,
                        want,
                    });
                }
                Err(e) => return Err(io(e)),
            }
        }
        self.greeted = true;
        if let Some(log) = &mut self.log {
            log.push((false, buf.to_vec()));
        }
        Ok(())
    }

    /// Non-blocking: collects what has arrived of a `want`-byte message; true once it is complete (then
    /// [`recv`](Self::recv) returns it at once). For a passive side that keeps its data path running.
    pub(crate) fn poll_ready(&mut self, step: &str, want: usize) -> Result<bool> {
        let io = |source| PerftestError::Io {
            step: step.to_string(),
            source,
        };
        if self.pending.len() >= want {
            return Ok(true);
        }
        self.stream.set_nonblocking(true).map_err(io)?;
        let mut tmp = [0u8; 256];
        let result = loop {
            let room = (want - self.pending.len()).min(tmp.len());
            if room == 0 {
                break Ok(true);
            }
            match self.stream.read(&mut tmp[..room]) {
                Ok(0) => {
                    break Err(PerftestError::PeerClosed {
                        step: step.to_string(),
                        got: self.pending.len(),
                        want,
                    });
                }
                Ok(n) => self.pending.extend_from_slice(&tmp[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break Ok(false),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::ConnectionReset => {
                    break Err(PerftestError::PeerClosed {
                        step: step.to_string(),
                        got: self.pending.len(),
                        want,
                    });
                }
                Err(e) => break Err(io(e)),
            }
        };
        self.stream.set_nonblocking(false).map_err(io)?;
        result
    }

    /// Non-blocking: true once the peer has closed the connection (EOF), discarding anything it sent.
    pub(crate) fn poll_closed(&mut self, step: &str) -> Result<bool> {
        let io = |source| PerftestError::Io {
            step: step.to_string(),
            source,
        };
        self.stream.set_nonblocking(true).map_err(io)?;
        let mut tmp = [0u8; 256];
        let result = loop {
            match self.stream.read(&mut tmp) {
                Ok(0) => break Ok(true),
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => break Ok(false),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::ConnectionReset => break Ok(true),
                Err(e) => break Err(io(e)),
            }
        };
        self.stream.set_nonblocking(false).map_err(io)?;
        result
    }

    /// Reads and drops whatever the peer still sends (its `"done"`) until it closes or `limit` passes.
    pub fn drain(&mut self, limit: Duration) {
        let deadline = Instant::now() + limit;
        let mut tmp = [0u8; 64];
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            if left.is_zero() || self.stream.set_read_timeout(Some(left)).is_err() {
                return;
            }
            match self.stream.read(&mut tmp) {
                Ok(0) => return,
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    }

    /// Half-closes the connection: the peer reads EOF, we can still read what it sends.
    pub(crate) fn shutdown_write(&mut self, step: &str) -> Result<()> {
        match self.stream.shutdown_write() {
            Ok(()) => Ok(()),
            // Already closed by the peer: nothing left to tell it.
            Err(e) if e.kind() == ErrorKind::NotConnected => Ok(()),
            Err(source) => Err(PerftestError::Io {
                step: step.to_string(),
                source,
            }),
        }
    }

    /// The timeouts in force.
    pub fn timeouts(&self) -> Timeouts {
        self.timeouts
    }

    fn silence(&self, step: &str, got: usize, want: usize, limit: Duration) -> PerftestError {
        if got == 0 {
            PerftestError::Timeout {
                step: step.to_string(),
                secs: limit.as_secs().max(1),
            }
        } else {
            PerftestError::ShortMessage {
                step: step.to_string(),
                got,
                want,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (PerftestChannel<UnixStream>, PerftestChannel<UnixStream>) {
        let (a, b) = UnixStream::pair().unwrap();
        let t = Timeouts {
            idle: Duration::from_millis(300),
            stall: Duration::from_millis(100),
            run: None,
        };
        (
            PerftestChannel::new(a, true, t),
            PerftestChannel::new(b, false, t),
        )
    }

    #[test]
    fn client_writes_first_server_reads_first() {
        let (mut c, mut s) = pair();
        let h = std::thread::spawn(move || {
            let mut got = [0u8; 3];
            s.exchange("x", b"srv", &mut got).unwrap();
            got
        });
        let mut got = [0u8; 3];
        c.exchange("x", b"cli", &mut got).unwrap();
        assert_eq!(&got, b"srv");
        assert_eq!(&h.join().unwrap(), b"cli");
    }

    #[test]
    fn two_servers_time_out_rather_than_hang() {
        let (a, b) = UnixStream::pair().unwrap();
        let t = Timeouts {
            idle: Duration::from_millis(200),
            stall: Duration::from_millis(100),
            run: None,
        };
        let mut s = PerftestChannel::new(a, false, t);
        let _other = b;
        let mut got = [0u8; 16];
        let e = s.exchange("version exchange", b"x", &mut got).unwrap_err();
        assert!(
            matches!(&e, PerftestError::Timeout { step, .. } if step == "version exchange"),
            "{e}"
        );
    }

    #[test]
    fn short_message_is_named() {
        let (mut c, mut s) = pair();
        s.send("end-of-test barrier", &[0u8; 8]).unwrap();
        let mut got = [0u8; 108];
        let e = c.recv("end-of-test barrier", &mut got, Duration::from_millis(300));
        match e {
            Err(PerftestError::ShortMessage { got, want, step }) => {
                assert_eq!((got, want), (8, 108));
                assert_eq!(step, "end-of-test barrier");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn close_mid_step_is_named() {
        let (mut c, s) = pair();
        drop(s);
        let mut got = [0u8; 108];
        let e = c.exchange("post-RTR barrier", &[b'0'; 108], &mut got);
        let msg = e.unwrap_err().to_string();
        assert!(
            msg.contains("post-RTR barrier") && msg.contains("same test"),
            "{msg}"
        );
    }

    #[test]
    fn tcp_connect_retries_until_the_server_listens() {
        // Find a free port, then start listening on it only after the client began connecting.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = format!("127.0.0.1:{port}");
        let a2 = addr.clone();
        let server = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            accept(&a2).unwrap()
        });
        let c = connect(&addr, Duration::from_secs(5)).unwrap();
        assert!(c.nodelay().unwrap());
        let s = server.join().unwrap();
        assert!(s.nodelay().unwrap());
        let e = connect("127.0.0.1:1", Duration::from_millis(200)).unwrap_err();
        assert!(e.to_string().contains("-p must match"), "{e}");
    }

    #[test]
    fn a_dripping_peer_meets_the_setup_deadline_naming_what_it_sent() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let t = Timeouts {
            idle: Duration::from_secs(5),
            stall: Duration::from_secs(2),
            run: None,
        };
        let mut s = PerftestChannel::new(a, false, t);
        s.limit_setup(Duration::from_millis(600));
        let drip = std::thread::spawn(move || {
            for _ in 0..6 {
                if b.write_all(b"6").is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        });
        let t0 = Instant::now();
        let mut got = [0u8; 16];
        let e = s.recv("version exchange", &mut got, t.idle).unwrap_err();
        assert!(
            t0.elapsed() < Duration::from_millis(1200),
            "{:?}",
            t0.elapsed()
        );
        match &e {
            PerftestError::SetupDeadline { got, want, .. } => {
                assert!((2..=4).contains(got), "{e}");
                assert_eq!(*want, 16);
            }
            other => panic!("{other}"),
        }
        assert!(
            e.to_string()
                .contains("during the version exchange it sent"),
            "{e}"
        );
        drip.join().unwrap();
        s.end_setup();
    }

    #[test]
    fn poll_collects_a_message_in_pieces() {
        let (mut c, mut s) = pair();
        assert!(!c.poll_ready("b", 10).unwrap());
        s.send("b", b"01234").unwrap();
        assert!(!c.poll_ready("b", 10).unwrap());
        s.send("b", b"56789").unwrap();
        assert!(c.poll_ready("b", 10).unwrap());
        let mut got = [0u8; 10];
        c.recv("b", &mut got, Duration::from_millis(10)).unwrap();
        assert_eq!(&got, b"0123456789");
        assert!(!c.poll_closed("close").unwrap());
        drop(s);
        assert!(c.poll_closed("close").unwrap());
    }
}
