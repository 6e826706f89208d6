//! Making the data connections: listener, connects, the greeting that pairs each with its queue pair.

use super::frame::{GREETING_LEN, greeting, other_framing, parse_greeting};
use super::io_err;
use crate::transport::{Error, QpInfo, Result};
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// What the connects and accepts need from the endpoint's configuration.
#[derive(Debug, Clone, Copy)]
pub(super) struct Dial<'a> {
    /// How long to wait for all the data connections.
    pub timeout: Duration,
    /// SO_SNDBUF / SO_RCVBUF to ask for; `None` leaves the kernel's autotuning alone.
    pub socket_buffer: Option<usize>,
    /// IP_TOS / IPV6_TCLASS (`--tclass`); `None` leaves the kernel's 0.
    pub tclass: Option<u8>,
    /// SO_PRIORITY (`-S`).
    pub priority: Option<u8>,
    /// TCP_CONGESTION (`--tcp-congestion`).
    pub congestion: Option<&'a str>,
}

/// The server's listener for the data connections, on an ephemeral port of `bind`.
pub(super) fn listen(bind: IpAddr) -> Result<TcpListener> {
    TcpListener::bind(SocketAddr::new(bind, 0))
        .map_err(io_err(format!("listening for data connections on {bind}")))
}

/// A PSN-like token: random enough to tell our data connections from a stranger's.
pub(super) fn token(seed: usize) -> u32 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    (t ^ (std::process::id() << 8) ^ (seed as u32).wrapping_mul(0x9e37_79b9)) & 0x00ff_ffff
}

/// Client: opens one connection per peer queue pair, greets it with that QP's token and hands it to
/// `attach` with its index.
pub(super) fn connect_all(
    addr: SocketAddr,
    peer: &[QpInfo],
    dial: Dial<'_>,
    mut attach: impl FnMut(usize, TcpStream) -> Result<()>,
) -> Result<()> {
    let deadline = Instant::now() + dial.timeout;
    for (i, p) in peer.iter().enumerate() {
        let left = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1));
        let mut s = TcpStream::connect_timeout(&addr, left)
            .map_err(io_err(format!("connecting data connection {i} to {addr}")))?;
        tune(&s, dial)?;
        s.write_all(&greeting(i as u32, p.psn))
            .map_err(io_err(format!(
                "greeting the data connection {i} at {addr}"
            )))?;
        attach(i, s)?;
    }
    Ok(())
}

/// Server: accepts one connection per queue pair, checks each greeting against `tokens` (ours, by
/// queue pair) and hands the connection to `attach` with the index it names.
pub(super) fn accept_all(
    listener: TcpListener,
    tokens: &[u32],
    dial: Dial<'_>,
    mut attach: impl FnMut(usize, TcpStream) -> Result<()>,
) -> Result<()> {
    listener
        .set_nonblocking(true)
        .map_err(io_err("making the data listener non-blocking"))?;
    let deadline = Instant::now() + dial.timeout;
    let mut taken = vec![false; tokens.len()];
    let mut attached = 0;
    while attached < tokens.len() {
        let (mut s, from) = match listener.accept() {
            Ok(v) => v,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    return Err(Error::Connection(format!(
                        "the client made {attached} of {} data connections within {:?}; check that nothing filters the data port {}",
                        tokens.len(),
                        dial.timeout,
                        listener.local_addr().map(|a| a.port()).unwrap_or(0)
                    )));
                }
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
            Err(e) => return Err(io_err("accepting a data connection")(e)),
        };
        s.set_nonblocking(false)
            .map_err(io_err("configuring a data connection"))?;
        s.set_read_timeout(Some(dial.timeout))
            .map_err(io_err("configuring a data connection"))?;
        let mut pre = [0u8; GREETING_LEN];
        s.read_exact(&mut pre).map_err(io_err(format!(
            "reading the data-connection greeting from {from}"
        )))?;
        let idx = match parse_greeting(&pre) {
            Some((idx, tok)) if idx < tokens.len() && tok == tokens[idx] && !taken[idx] => idx,
            _ if other_framing(&pre) => {
                return Err(Error::Connection(format!(
                    "{from} runs a roceperf whose TCP data framing differs from ours; run the same roceperf version on both sides"
                )));
            }
            _ => {
                return Err(Error::Connection(format!(
                    "{from} opened a data connection that is not from our roceperf peer (bad greeting)"
                )));
            }
        };
        tune(&s, dial)?;
        attach(idx, s)?;
        taken[idx] = true;
        attached += 1;
    }
    Ok(())
}

/// TCP_NODELAY (a frame leaves at once) and, when asked, the congestion control, fixed socket
/// buffer sizes, the traffic class and the priority. Set on the connected socket, they mark every
/// data segment (not the handshake); the kernel keeps TCP's own ECN bits, so only `--tclass`'s
/// DSCP applies. The congestion control takes over from the handshake's (the connection's first
/// segments are the namespace default's, as with iperf3 -C after connect).
fn tune(s: &TcpStream, dial: Dial<'_>) -> Result<()> {
    s.set_nodelay(true).map_err(io_err("setting TCP_NODELAY"))?;
    if let Some(name) = dial.congestion {
        set_congestion(s, name)?;
    }
    if let Some(tclass) = dial.tclass {
        let (level, name, what) = match s.local_addr().map(|a| a.is_ipv4()) {
            Ok(false) => (
                libc::IPPROTO_IPV6,
                libc::IPV6_TCLASS,
                "setting IPV6_TCLASS (--tclass)",
            ),
            _ => (libc::IPPROTO_IP, libc::IP_TOS, "setting IP_TOS (--tclass)"),
        };
        crate::transport::sockopt::set_int(s, level, name, tclass.into()).map_err(io_err(what))?;
    }
    if let Some(prio) = dial.priority {
        crate::transport::sockopt::set_int(s, libc::SOL_SOCKET, libc::SO_PRIORITY, prio.into()).map_err(io_err(
            if prio > 6 {
                "setting SO_PRIORITY (-S; above 6 it needs CAP_NET_ADMIN: run as root or give -S 0..6)"
            } else {
                "setting SO_PRIORITY (-S)"
            },
        ))?;
    }
    if let Some(bytes) = dial.socket_buffer {
        // The kernel caps both at its [rw]mem_max anyway; an int is what setsockopt takes.
        let bytes = bytes.min(i32::MAX as usize);
        rustix::net::sockopt::set_socket_send_buffer_size(s, bytes)
            .and_then(|()| rustix::net::sockopt::set_socket_recv_buffer_size(s, bytes))
            .map_err(|e| io_err("setting the socket buffer size")(e.into()))?;
    }
    Ok(())
}

/// What `/proc/sys/net/ipv4/<file>` lists, for an error message.
fn sysctl_list(file: &str) -> String {
    std::fs::read_to_string(format!("/proc/sys/net/ipv4/{file}"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unreadable".into())
}

/// TCP_CONGESTION on `s`: the kernel's algorithm `name`, with an error that says what to do.
fn set_congestion(s: &TcpStream, name: &str) -> Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: the stream's descriptor is open for the call; `name` is a live buffer of the length
    // passed (TCP_CONGESTION takes the bytes without a NUL).
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let source = io::Error::last_os_error();
    let context = match source.raw_os_error() {
        Some(libc::ENOENT) => format!(
            "setting TCP_CONGESTION to {name} (--tcp-congestion): the kernel has no {name}; it \
             offers {} (net.ipv4.tcp_available_congestion_control), or load it: modprobe tcp_{name}",
            sysctl_list("tcp_available_congestion_control")
        ),
        Some(libc::EPERM) => format!(
            "setting TCP_CONGESTION to {name} (--tcp-congestion): {name} is not in \
             net.ipv4.tcp_allowed_congestion_control ({}); run as root (CAP_NET_ADMIN) or add it there",
            sysctl_list("tcp_allowed_congestion_control")
        ),
        _ => format!("setting TCP_CONGESTION to {name} (--tcp-congestion)"),
    };
    Err(Error::Io { context, source })
}
