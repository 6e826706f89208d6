//! The out-of-band TCP connection: connect with retries, accept, hello, framed messages, barriers.

use super::dial::{self, DialError, HostPort, Retry};
use super::frame::{self, HELLO_LEN};
use super::listener::Listener;
use super::{Error, Failure, Mismatch, Result, Said, Step, TestParams};
use crate::params::Role;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// How long a blocking read waits for the peer before giving up, unless the caller sets another.
pub(crate) const DEFAULT_IO_TIMEOUT: Duration = Duration::from_secs(30);

/// The out-of-band connection to the peer.
pub(crate) struct Channel {
    stream: TcpStream,
    peer: SocketAddr,
    role: Role,
    timeout: Duration,
    /// Until [`Channel::end_handshake`]: when the whole handshake must be over, and how long it was given.
    handshake: Option<(Instant, Duration)>,
}

impl Channel {
    /// Server: listens on `port` (all IPv4 addresses), waits for one client and checks its hello.
    /// `on_listen` runs once the port is open (the binary prints perftest's "Waiting for client" banner).
    /// From the connection on, the whole handshake (hello to [`Channel::end_handshake`]) must be over
    /// within `handshake`, however the peer paces its bytes.
    pub(crate) fn accept(
        port: u16,
        io_timeout: Duration,
        handshake: Duration,
        on_listen: impl FnOnce(),
    ) -> Result<Channel> {
        let listener = TcpListener::bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port))
            .map_err(|source| Error::Listen { port, source })?;
        on_listen();
        let (stream, peer) = listener
            .accept()
            .map_err(|source| Error::Listen { port, source })?;
        Channel::serve(stream, peer, io_timeout, handshake)
    }

    /// Server of `--persist`: the next client of a listener that stays open across runs, as
    /// [`Channel::accept`] takes one; [`Error::Stopped`] when `stop` says so before one came.
    pub(crate) fn accept_on(
        listener: &Listener,
        io_timeout: Duration,
        handshake: Duration,
        stop: &dyn Fn() -> bool,
    ) -> Result<Channel> {
        let (stream, peer) = listener.next(stop)?;
        Channel::serve(stream, peer, io_timeout, handshake)
    }

    /// A client just accepted: its hello checked, ours sent.
    fn serve(
        stream: TcpStream,
        peer: SocketAddr,
        io_timeout: Duration,
        handshake: Duration,
    ) -> Result<Channel> {
        let mut ch = Channel::new(stream, peer, Role::Server, io_timeout, handshake)?;
        if let Err(e) = ch.read_hello() {
            if matches!(e, Error::Garbage { .. }) {
                // A client of another dialect (`--oob perftest`) reads our hello and names ours.
                ch.say_hello_and_drain();
            }
            return Err(e);
        }
        ch.write_all(&frame::hello(), Step::Hello)?;
        Ok(ch)
    }

    /// Client: connects to `host:port`, retrying a server that is not up yet until `connect_timeout`.
    /// `on_retry` runs once, at the first refused attempt (the binary says it is waiting). Connected,
    /// the whole handshake must be over within `handshake`, as in [`Channel::accept`], except the
    /// wait of a client a `--persist` server queued: `on_queued` says whom the server serves and the
    /// client's place, and the client then waits for its turn as long as it takes.
    pub(crate) fn connect(
        host: &str,
        port: u16,
        connect_timeout: Duration,
        io_timeout: Duration,
        handshake: Duration,
        on_retry: impl FnOnce(&str),
        on_queued: impl FnOnce(&str, u64),
    ) -> Result<Channel> {
        let server = HostPort::new(host, port);
        let target = server.to_string();
        let addrs = server.resolve().map_err(|e| Error::Resolve {
            addr: target.clone(),
            reason: e.to_string(),
        })?;
        let retry = Retry {
            wait: connect_timeout,
            pause: Duration::from_millis(100),
            attempt: None,
        };
        match dial::connect(&addrs, retry, |_| true, || on_retry(&target)) {
            Ok((stream, a)) => {
                let mut ch = Channel::new(stream, a, Role::Client, io_timeout, handshake)?;
                ch.write_all(&frame::hello(), Step::Hello)?;
                if ch.read_hello()? == frame::QUEUED {
                    let q: frame::Queued = ch.recv(Step::Queued)?;
                    on_queued(&q.serving, q.place);
                    // No deadline while the runs before this client's go on; its own handshake
                    // starts when the server takes it.
                    ch.handshake = None;
                    ch.stream
                        .set_read_timeout(None)
                        .map_err(|source| ch.io_error(Step::Setup, source))?;
                    ch.read_hello()?;
                    ch.handshake = Some((Instant::now() + handshake, handshake));
                    ch.set_timeout(io_timeout)?;
                }
                Ok(ch)
            }
            Err(DialError::Fatal(e) | DialError::GaveUp(Some(e))) => Err(Error::Unreachable {
                addr: target,
                secs: connect_timeout.as_secs(),
                reason: e.to_string(),
            }),
            Err(DialError::GaveUp(None)) => Err(Error::Unreachable {
                addr: target,
                secs: connect_timeout.as_secs(),
                reason: "no address".into(),
            }),
        }
    }

    fn new(
        stream: TcpStream,
        peer: SocketAddr,
        role: Role,
        timeout: Duration,
        handshake: Duration,
    ) -> Result<Channel> {
        let ch = Channel {
            stream,
            peer,
            role,
            timeout,
            handshake: Some((Instant::now() + handshake, handshake)),
        };
        ch.stream
            .set_nodelay(true)
            .and_then(|_| ch.stream.set_read_timeout(Some(timeout)))
            .and_then(|_| ch.stream.set_write_timeout(Some(timeout)))
            .map_err(|source| ch.io_error(Step::Setup, source))?;
        Ok(ch)
    }

    /// The peer's address.
    pub(crate) fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// This side's address on the channel; the data connections use the same interface.
    pub(crate) fn local_ip(&self) -> IpAddr {
        self.stream
            .local_addr()
            .map(|a| a.ip())
            .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST))
    }

    /// The handshake is over (the data path's connection details are swapped): from here each read
    /// waits up to the I/O timeout again, without the handshake's overall deadline.
    pub(crate) fn end_handshake(&mut self) -> Result<()> {
        self.handshake = None;
        self.set_timeout(self.timeout)
    }

    /// How long blocking reads wait for the peer (e.g. longer while it runs a timed test).
    pub(crate) fn set_timeout(&mut self, timeout: Duration) -> Result<()> {
        self.timeout = timeout;
        self.stream
            .set_read_timeout(Some(timeout))
            .map_err(|source| self.io_error(Step::Setup, source))
    }

    fn io_error(&self, during: Step, source: io::Error) -> Error {
        match source.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Error::Timeout {
                peer: self.peer.to_string(),
                during,
                timeout: self.timeout,
            },
            io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::ConnectionAborted => Error::Closed {
                peer: self.peer.to_string(),
                during,
                partial: None,
            },
            _ => Error::Io {
                peer: self.peer.to_string(),
                during,
                source,
            },
        }
    }

    /// The handshake's deadline has passed with `got` of the `want` bytes of a message in.
    fn handshake_over(&self, during: Step, got: usize, want: usize) -> Error {
        Error::Handshake {
            peer: self.peer.to_string(),
            during,
            got,
            want,
            secs: self.handshake.map_or(0, |(_, d)| d.as_secs()),
        }
    }

    /// During the handshake: the read timeout shortened to what is left of its deadline, or the
    /// error once nothing is left.
    fn within_handshake(&self, during: Step, got: usize, want: usize) -> Result<()> {
        let Some((deadline, _)) = self.handshake else {
            return Ok(());
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(self.handshake_over(during, got, want));
        }
        self.stream
            .set_read_timeout(Some(left.min(self.timeout)))
            .map_err(|source| self.io_error(Step::Setup, source))
    }

    fn read_exact(&mut self, buf: &mut [u8], during: Step) -> Result<()> {
        let mut got = 0;
        while got < buf.len() {
            self.within_handshake(during, got, buf.len())?;
            match self.stream.read(&mut buf[got..]) {
                Ok(0) => {
                    return Err(if got == 0 {
                        self.io_error(during, io::ErrorKind::UnexpectedEof.into())
                    } else {
                        Error::Closed {
                            peer: self.peer.to_string(),
                            during,
                            partial: Some((got, buf.len())),
                        }
                    });
                }
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e)
                    if self.handshake.is_some()
                        && matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                        ) =>
                {
                    // The next turn says whether the deadline or only this read's timeout passed.
                    if self.handshake.is_some_and(|(d, _)| Instant::now() >= d) {
                        return Err(self.handshake_over(during, got, buf.len()));
                    }
                    return Err(self.io_error(during, e));
                }
                Err(e) => return Err(self.io_error(during, e)),
            }
        }
        Ok(())
    }

    fn write_all(&mut self, buf: &[u8], during: Step) -> Result<()> {
        self.stream
            .write_all(buf)
            .map_err(|e| self.io_error(during, e))
    }

    /// Best effort, before closing on a client that did not say our hello: ours, and what the client
    /// sent beyond it read away (a few KiB at most), so that closing sends FIN rather than a reset that could drop our
    /// hello before the client reads it.
    fn say_hello_and_drain(&mut self) {
        let _ = self.write_all(&frame::hello(), Step::Hello);
        let _ = self
            .stream
            .set_read_timeout(Some(Duration::from_millis(100)));
        let mut rest = [0u8; 256];
        for _ in 0..16 {
            if !matches!(self.stream.read(&mut rest), Ok(n) if n > 0) {
                break;
            }
        }
    }

    /// Reads and checks the peer's hello; its flag byte ([`frame::QUEUED`] or 0).
    fn read_hello(&mut self) -> Result<u8> {
        let mut h = [0u8; HELLO_LEN];
        let peer = self.peer.to_string();
        match self.read_exact(&mut h, Step::Hello) {
            Ok(()) => {}
            Err(Error::Closed {
                during,
                partial: partial @ Some(_),
                ..
            }) => {
                return Err(Error::Garbage {
                    peer,
                    detail: format!(
                        "it sent a short hello and closed the connection ({during}{})",
                        super::error::cut_short(&partial)
                    ),
                });
            }
            Err(e) => return Err(e),
        }
        frame::check_hello(&h, &peer)?;
        Ok(h[frame::FLAGS])
    }

    /// Sends one message of `kind`.
    pub(crate) fn send<T: Serialize>(&mut self, kind: Step, body: &T) -> Result<()> {
        let frame = frame::encode(kind, body);
        self.write_all(&frame, kind)
    }

    /// Receives one message that must be of `kind`; an `abort` from the peer becomes [`Error::PeerAborted`].
    pub(crate) fn recv<T: DeserializeOwned>(&mut self, kind: Step) -> Result<T> {
        let mut len = [0u8; 4];
        self.read_exact(&mut len, kind)?;
        let len = frame::message_len(len, kind, &self.peer.to_string())?;
        let mut buf = vec![0u8; len];
        self.read_exact(&mut buf, kind).map_err(|e| match e {
            // Say what came of the whole message, its 4 length bytes included.
            Error::Handshake {
                peer,
                during,
                got,
                want,
                secs,
            } => Error::Handshake {
                peer,
                during,
                got: got + 4,
                want: want + 4,
                secs,
            },
            e => e,
        })?;
        frame::decode(&buf, kind, &self.peer.to_string())
    }

    /// Lock-step exchange: the client writes then reads, the server reads then writes.
    pub(crate) fn exchange<T: Serialize + DeserializeOwned>(
        &mut self,
        kind: Step,
        mine: &T,
    ) -> Result<T> {
        match self.role {
            Role::Client => {
                self.send(kind, mine)?;
                self.recv(kind)
            }
            Role::Server => {
                let theirs = self.recv(kind)?;
                self.send(kind, mine)?;
                Ok(theirs)
            }
        }
    }

    /// Swaps parameter sets and fails, on both sides, naming the first parameter that differs.
    pub(crate) fn check_params(&mut self, mine: &TestParams) -> Result<TestParams> {
        let theirs: TestParams = self.exchange(Step::Params, mine)?;
        match mine.first_mismatch(&theirs) {
            Some(m) => Err(Error::Mismatch(m)),
            None => Ok(theirs),
        }
    }

    /// Both sides reach the same point; `step` (e.g. the size index) must match, or the sides are out of step.
    pub(crate) fn barrier(&mut self, step: u64) -> Result<()> {
        let theirs: u64 = self.exchange(Step::Barrier, &step)?;
        if theirs != step {
            return Err(Error::Mismatch(Mismatch {
                name: "barrier step",
                ours: step.to_string(),
                theirs: theirs.to_string(),
                hint: "the two sides are out of step; run the same roceperf version with the same flags",
                said: Said::Values,
            }));
        }
        Ok(())
    }

    /// Tells the peer this side is stopping, why, and whether the test or its setup failed (best
    /// effort: the peer may already be gone).
    pub(crate) fn abort(&mut self, reason: &str, failure: Failure) {
        let _ = self.stream.set_write_timeout(Some(Duration::from_secs(1)));
        let body = frame::Abort {
            reason: reason.to_string(),
            failure,
        };
        let _ = self.send(Step::Abort, &body);
    }

    /// True when the peer has sent something (or closed): a passive side polls this to know the test is over.
    pub(crate) fn peer_has_data(&self) -> Result<bool> {
        let mut b = [0u8; 1];
        // SAFETY: a non-blocking peek of one byte into a local buffer.
        let n = unsafe {
            libc::recv(
                std::os::fd::AsRawFd::as_raw_fd(&self.stream),
                b.as_mut_ptr().cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        if n >= 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(false),
            _ => Err(self.io_error(Step::Test, e)),
        }
    }
}

#[cfg(test)]
mod tests;
