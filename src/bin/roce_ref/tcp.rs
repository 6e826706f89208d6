//! The TCP modes: one connection, TCP_NODELAY, non-blocking, spinning on recv and send.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use crate::cli::Config;
use crate::dgram::hello_of;
use crate::error::{Error, Result};
use crate::figures::{Meter, RoundTrips};
use crate::proto::{ACK_LEN, HELLO_LEN, Hello, Measured, RESULT_LEN, decode_ack, encode_ack};
use crate::sys::{Patience, SILENCE, STREAM_SOCKET_BUFFER, grow_buffers};
use crate::timing;

/// A connected, checked TCP stream and its peer.
pub struct Conn {
    s: TcpStream,
    peer: SocketAddr,
}

/// How a spinning read ended.
#[derive(Debug, PartialEq, Eq)]
enum Filled {
    /// The buffer is full.
    Full,
    /// The peer closed before the first byte.
    Closed,
}

impl Conn {
    /// The server: listens on `cfg.bind`:`cfg.port`, accepts one client and checks its hello.
    pub fn accept(cfg: &Config) -> Result<Conn> {
        let at = SocketAddr::new(cfg.bind, cfg.port);
        let l = TcpListener::bind(at)
            .map_err(|e| Error::setup(format!("listening on TCP {at} (--bind, -p/--port)"), e))?;
        let (s, peer) = l
            .accept()
            .map_err(|e| Error::setup(format!("accepting on TCP {at}"), e))?;
        let mut c = Conn::new(s, peer, cfg)?;
        let mut hello = [0u8; HELLO_LEN];
        c.fill(&mut hello)?;
        let theirs = Hello::decode(&hello).ok_or_else(|| {
            Error::Usage(format!(
                "client {peer} did not say a roce_ref hello: is it another program?"
            ))
        })?;
        let mismatch = Hello::first_difference(&theirs, &hello_of(cfg));
        c.write_all(&encode_ack(mismatch))?;
        match mismatch {
            Some(m) => Err(Error::Usage(format!("client {peer}: {}", m.describe()))),
            None => Ok(c),
        }
    }

    /// The client: connects to `peer` (retrying a server not up yet) and says hello.
    pub fn connect(peer: SocketAddr, cfg: &Config) -> Result<Conn> {
        let give_up = Instant::now() + cfg.connect_timeout;
        let s = loop {
            let left = give_up
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(10));
            match TcpStream::connect_timeout(&peer, left) {
                Ok(s) => break s,
                Err(e)
                    if Instant::now() < give_up && e.kind() == io::ErrorKind::ConnectionRefused =>
                {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => {
                    return Err(Error::setup(
                        format!(
                            "connecting to the TCP server {peer} (PEER, -p/--port; --connect-timeout {} s)",
                            cfg.connect_timeout.as_secs_f64()
                        ),
                        e,
                    ));
                }
            }
        };
        let mut c = Conn::new(s, peer, cfg)?;
        c.write_all(&hello_of(cfg).encode())?;
        let mut ack = [0u8; ACK_LEN];
        if c.fill(&mut ack)? == Filled::Closed {
            return Err(Error::Peer(format!(
                "the server {peer} closed the connection after the hello"
            )));
        }
        match decode_ack(&ack) {
            Some(Ok(())) => Ok(c),
            Some(Err(m)) => Err(Error::Usage(format!("server {peer}: {}", m.describe()))),
            None => Err(Error::Usage(format!(
                "server {peer} did not answer like a roce_ref server"
            ))),
        }
    }

    fn new(s: TcpStream, peer: SocketAddr, cfg: &Config) -> Result<Conn> {
        let ctx = |what: &str| format!("{what} on the TCP connection with {peer}");
        s.set_nodelay(true)
            .map_err(|e| Error::setup(ctx("TCP_NODELAY"), e))?;
        s.set_nonblocking(true)
            .map_err(|e| Error::setup(ctx("O_NONBLOCK"), e))?;
        if cfg.mode.pattern == crate::cli::Pattern::Stream {
            grow_buffers(s.as_raw_fd(), STREAM_SOCKET_BUFFER)
                .map_err(|e| Error::setup(ctx("SO_RCVBUF/SO_SNDBUF"), e))?;
        }
        Ok(Conn { s, peer })
    }

    /// The peer's address.
    pub fn peer(&self) -> String {
        self.peer.to_string()
    }

    /// Reads one non-blocking send or recv (`what`: "send to", "recv from"): `Some(n)` when it moved
    /// n bytes (0: the peer closed), `None` when the socket would block and the peer still has time,
    /// the `stalled` error when it has had SILENCE, an I/O error when the call failed.
    #[inline]
    fn progress(
        &self,
        r: io::Result<usize>,
        patience: &mut Patience,
        what: &str,
        stalled: impl FnOnce() -> String,
    ) -> Result<Option<usize>> {
        match r {
            Ok(n) => {
                patience.reset();
                Ok(Some(n))
            }
            Err(e)
                if e.kind() == io::ErrorKind::WouldBlock
                    || e.kind() == io::ErrorKind::Interrupted =>
            {
                if patience.wait() {
                    Ok(None)
                } else {
                    Err(Error::Peer(stalled()))
                }
            }
            Err(e) => Err(Error::io(format!("{what} {}", self.peer), e)),
        }
    }

    /// The error of a peer that has not read what we sent for SILENCE.
    fn not_reading(&self) -> String {
        format!("{} has not read for {} s", self.peer, SILENCE.as_secs())
    }

    /// Writes all of `buf`, spinning while the socket is full.
    #[inline]
    fn write_all(&mut self, buf: &[u8]) -> Result<()> {
        let mut off = 0;
        let mut patience = Patience::new(SILENCE);
        while off < buf.len() {
            let r = self.s.write(&buf[off..]);
            match self.progress(r, &mut patience, "send to", || self.not_reading())? {
                Some(0) => {
                    return Err(Error::Peer(format!(
                        "the connection with {} closed",
                        self.peer
                    )));
                }
                Some(n) => off += n,
                None => {}
            }
        }
        Ok(())
    }

    /// Fills `buf`, spinning on recv; Closed when the peer closed before its first byte.
    #[inline]
    fn fill(&mut self, buf: &mut [u8]) -> Result<Filled> {
        let mut off = 0;
        let mut patience = Patience::new(SILENCE);
        while off < buf.len() {
            let r = self.s.read(&mut buf[off..]);
            let stalled = || format!("{} went silent for {} s", self.peer, SILENCE.as_secs());
            match self.progress(r, &mut patience, "recv from", stalled)? {
                Some(0) if off == 0 => return Ok(Filled::Closed),
                Some(0) => {
                    return Err(Error::Peer(format!(
                        "{} closed the connection mid-message",
                        self.peer
                    )));
                }
                Some(n) => off += n,
                None => {}
            }
        }
        Ok(Filled::Full)
    }
}

/// A ping-pong client: `cfg.size` bytes out, `cfg.reply_size` back, timed.
pub fn pingpong_client(c: &mut Conn, cfg: &Config) -> Result<RoundTrips> {
    let ping = vec![0u8; cfg.size];
    let mut pong = vec![0u8; cfg.reply_size];
    let trips = timing::round_trips(cfg, || {
        c.write_all(&ping)?;
        if c.fill(&mut pong)? == Filled::Closed {
            return Err(Error::Peer(format!(
                "the server {} closed the connection",
                c.peer
            )));
        }
        Ok(())
    })?;
    // Closing is the END: the server sees EOF at a message boundary.
    let _ = c.s.shutdown(Shutdown::Write);
    Ok(trips)
}

/// A ping-pong server: answers every message until the client closes; how many it answered.
pub fn pingpong_server(c: &mut Conn, cfg: &Config) -> Result<u64> {
    let mut ping = vec![0u8; cfg.size];
    let pong = vec![0u8; cfg.reply_size];
    let mut answered = 0u64;
    while c.fill(&mut ping)? == Filled::Full {
        c.write_all(&pong)?;
        answered += 1;
    }
    Ok(answered)
}

/// A stream client: writes `cfg.size` bytes at a time for the warm-up and -D, closes its side, and
/// reads what the server measured. Returns that and (bytes, ns) this side wrote.
pub fn stream_client(c: &mut Conn, cfg: &Config) -> Result<(Measured, (u64, u64))> {
    let buf = vec![0u8; cfg.size];
    let mut patience = Patience::new(SILENCE);
    let (sent, sent_ns) = timing::send_for_run(cfg, || {
        let r = c.s.write(&buf);
        Ok(c.progress(r, &mut patience, "send to", || c.not_reading())?
            .unwrap_or(0) as u64)
    })?;
    c.s.shutdown(Shutdown::Write)
        .map_err(|e| Error::io(format!("closing the stream to {}", c.peer), e))?;
    let mut result = [0u8; RESULT_LEN];
    if c.fill(&mut result)? == Filled::Closed {
        return Err(Error::Peer(format!(
            "the server {} closed without saying what it received",
            c.peer
        )));
    }
    let m = Measured::decode(&result).ok_or_else(|| {
        Error::Peer(format!(
            "the server {} answered with something else than its result",
            c.peer
        ))
    })?;
    Ok((m, (sent, sent_ns)))
}

/// A stream server: reads `cfg.size` bytes at a time until EOF, measuring after the warm-up, and
/// sends the client its figures.
pub fn stream_server(c: &mut Conn, cfg: &Config) -> Result<Measured> {
    let mut buf = vec![0u8; cfg.size];
    let base = Instant::now();
    let mut meter = Meter::new(cfg.warmup_ms);
    let mut patience = Patience::new(SILENCE);
    loop {
        let r = c.s.read(&mut buf);
        let stalled = || {
            format!(
                "the client {} went silent for {} s",
                c.peer,
                SILENCE.as_secs()
            )
        };
        match c.progress(r, &mut patience, "recv from", stalled)? {
            Some(0) => break,
            Some(n) => meter.observe(base.elapsed().as_nanos() as u64, n as u64, 1),
            None => {}
        }
    }
    let m = meter.measured();
    c.write_all(&m.encode())?;
    Ok(m)
}
