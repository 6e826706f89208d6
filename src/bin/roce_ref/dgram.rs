//! The datagram modes (UDP and AF_PACKET) over one [`Datagram`] link: the hello, the ping-pong and
//! stream loops of both sides, and the END/RESULT exchange that closes a run.

use std::io;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use crate::cli::Config;
use crate::error::{Error, Result};
use crate::figures::{Meter, RoundTrips};
use crate::mmsg::{MmsgRx, MmsgTx};
use crate::proto::{
    self, DATA, END, HELLO, HELLO_ACK, Hello, Measured, PING, PONG, RESULT, decode_ack, encode_ack,
};
use crate::sys::{Patience, SILENCE};
use crate::timing;

/// How often a client repeats its hello or END while no answer comes.
const RETRY: Duration = Duration::from_millis(50);
/// How many times a client sends END before giving up on the server's RESULT.
const END_TRIES: u32 = 40;
/// How long a server keeps answering repeated ENDs after its RESULT.
const LINGER: Duration = Duration::from_millis(200);

/// One non-blocking datagram socket with a peer.
pub trait Datagram {
    /// Sends one message to the peer.
    fn send(&mut self, msg: &[u8]) -> io::Result<()>;
    /// Receives one message without blocking: its payload length, or None when nothing waits.
    fn try_recv(&mut self) -> io::Result<Option<usize>>;
    /// The payload of the last message received.
    fn payload(&self) -> &[u8];
    /// From now on, send to whoever sent the last message received.
    fn answer_last_sender(&mut self) -> io::Result<()>;
    /// The peer, for messages.
    fn peer(&self) -> String;
    /// The socket, for batched calls.
    fn fd(&self) -> RawFd;
    /// What precedes the payload in every frame sent (an Ethernet header; nothing for UDP).
    fn header(&self) -> &[u8];
}

/// The hello a side with `cfg` sends or expects.
pub fn hello_of(cfg: &Config) -> Hello {
    Hello::new(cfg.mode, cfg.size, cfg.reply_size, cfg.warmup_ms)
}

/// Spins until a message whose type byte is `want` arrives or `until` passes; true when it arrived.
fn recv_type(link: &mut impl Datagram, want: u8, until: Instant) -> io::Result<bool> {
    let mut polls = 0u32;
    loop {
        match link.try_recv() {
            Ok(Some(_)) if link.payload().first() == Some(&want) => return Ok(true),
            Ok(Some(_)) => {}
            Ok(None) => {
                polls = polls.wrapping_add(1);
                if polls.is_multiple_of(256) && Instant::now() >= until {
                    return Ok(false);
                }
            }
            // A connected UDP socket reports the server's port unreachable: not up yet, or gone.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                if Instant::now() >= until {
                    return Ok(false);
                }
            }
            Err(e) => return Err(e),
        }
    }
}

/// The client's hello, repeated until the server answers or `cfg.connect_timeout` passes.
pub fn client_hello(link: &mut impl Datagram, cfg: &Config) -> Result<()> {
    let msg = hello_of(cfg).encode();
    let give_up = Instant::now() + cfg.connect_timeout;
    loop {
        match link.send(&msg) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
            Err(e) => {
                return Err(Error::setup(
                    format!("sending the hello to the server {}", link.peer()),
                    e,
                ));
            }
        }
        let until = (Instant::now() + RETRY).min(give_up);
        let answered = recv_type(link, HELLO_ACK, until)
            .map_err(|e| Error::setup(format!("waiting for the server {}", link.peer()), e))?;
        if answered {
            if let Some(Err(m)) = decode_ack(link.payload()) {
                return Err(Error::Usage(format!(
                    "server {}: {}",
                    link.peer(),
                    m.describe()
                )));
            }
            link.answer_last_sender().map_err(|e| {
                Error::setup(format!("connecting to the server {}", link.peer()), e)
            })?;
            return Ok(());
        }
        if Instant::now() >= give_up {
            return Err(Error::setup(
                format!(
                    "no answer from the server {} within --connect-timeout {} s",
                    link.peer(),
                    cfg.connect_timeout.as_secs_f64()
                ),
                io::Error::from(io::ErrorKind::TimedOut),
            ));
        }
    }
}

/// Answers a hello in the link's last message: go, or the first option that differs (an error here too).
fn answer_hello(link: &mut impl Datagram, ours: &Hello) -> Result<bool> {
    let Some(theirs) = Hello::decode(link.payload()) else {
        return Ok(false);
    };
    link.answer_last_sender()
        .map_err(|e| Error::setup("connecting to the client", e))?;
    let mismatch = Hello::first_difference(&theirs, ours);
    link.send(&encode_ack(mismatch))
        .map_err(|e| Error::io(format!("answering the hello of {}", link.peer()), e))?;
    match mismatch {
        Some(m) => Err(Error::Usage(format!(
            "client {}: {}",
            link.peer(),
            m.describe()
        ))),
        None => Ok(true),
    }
}

/// The server waits (without time limit, sleeping a little between polls) for a client's hello.
pub fn server_hello(link: &mut impl Datagram, cfg: &Config) -> Result<()> {
    let ours = hello_of(cfg);
    let mut polls = 0u32;
    loop {
        match link.try_recv() {
            Ok(Some(_)) if link.payload().first() == Some(&HELLO) => {
                if answer_hello(link, &ours)? {
                    return Ok(());
                }
            }
            Ok(Some(_)) => {}
            Ok(None) => {
                // Nothing is measured yet: no need to burn the core while nobody is there.
                polls = polls.wrapping_add(1);
                if polls.is_multiple_of(1024) {
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
            Err(e) => return Err(Error::io("waiting for a client's hello", e)),
        }
    }
}

/// Sends END until the server answers with its RESULT; None when it never does.
fn client_end(link: &mut impl Datagram) -> Result<Option<Measured>> {
    for _ in 0..END_TRIES {
        match link.send(&[END]) {
            Ok(()) => {}
            Err(e) if crate::sys::is_busy(&e) => {}
            Err(e) => return Err(Error::io(format!("sending END to {}", link.peer()), e)),
        }
        let got = recv_type(link, RESULT, Instant::now() + RETRY)
            .map_err(|e| Error::io(format!("waiting for the RESULT of {}", link.peer()), e))?;
        if got {
            return Ok(Measured::decode(link.payload()));
        }
    }
    Ok(None)
}

/// Answers END with `result`, then keeps answering repeated ENDs (a lost RESULT) for a while.
fn server_end(link: &mut impl Datagram, result: Measured) -> Result<()> {
    let msg = result.encode();
    link.send(&msg)
        .map_err(|e| Error::io(format!("sending the RESULT to {}", link.peer()), e))?;
    let mut until = Instant::now() + LINGER;
    while recv_type(link, END, until).unwrap_or(false) {
        let _ = link.send(&msg);
        until = Instant::now() + LINGER;
    }
    Ok(())
}

/// A ping-pong client: round trips of `cfg.size` bytes out, `cfg.reply_size` back.
pub fn pingpong_client(link: &mut impl Datagram, cfg: &Config) -> Result<RoundTrips> {
    client_hello(link, cfg)?;
    let mut ping = vec![0u8; cfg.size];
    ping[0] = PING;
    let trips = timing::round_trips(cfg, || {
        link.send(&ping)
            .map_err(|e| Error::io(format!("sending to {}", link.peer()), e))?;
        let mut patience = Patience::new(SILENCE);
        loop {
            match link.try_recv() {
                Ok(Some(_)) if link.payload()[0] == PONG => return Ok(()),
                Ok(Some(_)) => {}
                Ok(None) if patience.wait() => {}
                Ok(None) => {
                    return Err(Error::Peer(format!(
                        "no answer from {} for {} s (ping-pong does not retransmit a lost message)",
                        link.peer(),
                        SILENCE.as_secs()
                    )));
                }
                Err(e) => return Err(Error::io(format!("receiving from {}", link.peer()), e)),
            }
        }
    })?;
    client_end(link)?;
    Ok(trips)
}

/// A ping-pong server: answers every PING with a PONG until END; how many it answered.
pub fn pingpong_server(link: &mut impl Datagram, cfg: &Config) -> Result<u64> {
    server_hello(link, cfg)?;
    let ours = hello_of(cfg);
    let mut pong = vec![0u8; cfg.reply_size];
    pong[0] = PONG;
    let mut answered = 0u64;
    let mut patience = Patience::new(SILENCE);
    loop {
        match link.try_recv() {
            Ok(Some(_)) => {
                patience.reset();
                match link.payload()[0] {
                    PING => {
                        link.send(&pong)
                            .map_err(|e| Error::io(format!("answering {}", link.peer()), e))?;
                        answered += 1;
                    }
                    // The client repeats its hello when our answer was lost.
                    HELLO => {
                        answer_hello(link, &ours)?;
                    }
                    END => {
                        server_end(
                            link,
                            Measured {
                                messages: answered,
                                ..Measured::default()
                            },
                        )?;
                        return Ok(answered);
                    }
                    _ => {}
                }
            }
            Ok(None) if patience.wait() => {}
            Ok(None) => return Err(silent(link.peer())),
            Err(e) => return Err(Error::io(format!("receiving from {}", link.peer()), e)),
        }
    }
}

fn silent(peer: String) -> Error {
    Error::Peer(format!(
        "the client {peer} went silent for {} s",
        SILENCE.as_secs()
    ))
}

/// A stream client: sends batches of DATA for the warm-up and -D, then asks the server what arrived.
/// Returns the server's figures and (bytes, ns) this side sent.
pub fn stream_client(link: &mut impl Datagram, cfg: &Config) -> Result<(Measured, (u64, u64))> {
    client_hello(link, cfg)?;
    let mut tx = if link.header().is_empty() && cfg.gso {
        MmsgTx::gso(cfg.size)
    } else {
        MmsgTx::plain(link.header(), cfg.size, cfg.batch)
    };
    let fd = link.fd();
    let (sent, sent_ns) = timing::send_for_run(cfg, || {
        tx.send(fd).map_err(|e| {
            let hint = if cfg.gso && link.header().is_empty() {
                " (--no-gso sends without UDP GSO)"
            } else {
                ""
            };
            Error::io(format!("sendmmsg to {}{hint}", link.peer()), e)
        })
    })?;
    let result = client_end(link)?.ok_or_else(|| {
        Error::Peer(format!(
            "the server {} never answered END with what it received",
            link.peer()
        ))
    })?;
    Ok((result, (sent, sent_ns)))
}

/// A stream server: counts the DATA that arrives after the warm-up until END; returns its figures.
pub fn stream_server(link: &mut impl Datagram, cfg: &Config, udp_gro: bool) -> Result<Measured> {
    server_hello(link, cfg)?;
    let hdr = link.header().len();
    // GRO hands over up to 64 KiB at once; frames are at most header + size.
    let slot = if udp_gro { 65_536 } else { hdr + cfg.size + 64 };
    let mut rx = MmsgRx::new(cfg.batch, slot);
    let fd = link.fd();
    let base = Instant::now();
    let mut meter = Meter::new(cfg.warmup_ms);
    let mut patience = Patience::new(SILENCE);
    loop {
        let n = rx
            .recv(fd)
            .map_err(|e| Error::io(format!("recvmmsg from {}", link.peer()), e))?;
        if n == 0 {
            if !patience.wait() {
                return Err(silent(link.peer()));
            }
            continue;
        }
        patience.reset();
        let (mut bytes, mut messages, mut end, mut hello) = (0u64, 0u64, false, false);
        for i in 0..n {
            let m = rx.msg(i);
            let Some(m) = m.get(hdr..).filter(|m| !m.is_empty()) else {
                continue;
            };
            match m[0] {
                DATA => {
                    let tail = proto::last_segment(m.len(), cfg.size);
                    let data = if tail > 0 && m[tail] == END {
                        end = true;
                        tail
                    } else {
                        m.len()
                    };
                    bytes += data as u64;
                    messages += data.div_ceil(cfg.size) as u64;
                }
                END => end = true,
                HELLO => hello = true,
                _ => {}
            }
        }
        meter.observe(base.elapsed().as_nanos() as u64, bytes, messages);
        if hello {
            // The client repeats its hello when our answer was lost: its options were checked already.
            let _ = link.send(&encode_ack(None));
        }
        if end {
            let m = meter.measured();
            server_end(link, m)?;
            return Ok(m);
        }
    }
}
