//! The system calls that move a queue pair's bytes: `writev`, `readv`/`recv`, and the epoll set.
//!
//! Everything about what the bytes mean lives in [`QpState`]; this file only asks it where to write
//! from and read into, and tells it how many bytes moved.

use super::IDLE_SLEEP_MS;
use super::io_err;
use super::qp::{QpState, RecvInto, Stop, TX_BATCH, closed};
use crate::transport::{Completion, Error, Result};
use rustix::event::{Timespec, epoll};
use std::collections::VecDeque;
use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::net::TcpStream;
use std::os::fd::OwnedFd;

/// A queue pair's data connection and what epoll last said about it.
pub(super) struct Link {
    stream: TcpStream,
    /// The socket may have bytes to read: set by an epoll edge, cleared when a read would block.
    pub(crate) readable: bool,
    /// The socket may take bytes: set by an epoll edge, cleared when a write would block.
    pub writable: bool,
    /// Bytes the last read that returned data returned.
    last_read: usize,
}

/// Where the kernel's `struct tcp_info` (linux/tcp.h) holds `tcpi_total_retrans` (u32) and
/// `tcpi_bytes_retrans` (u64, Linux 4.19 and later); libc's struct ends before the latter.
const TCPI_TOTAL_RETRANS: usize = 100;
const TCPI_BYTES_RETRANS: usize = 208;

impl Link {
    /// The connection's retransmissions from `TCP_INFO`: segments and bytes sent again over its
    /// life; bytes `None` on a kernel too old to count them, both `None` if the call fails. One
    /// system call: read when the counters are, never per message.
    pub(super) fn retransmissions(&self) -> (Option<u64>, Option<u64>) {
        let mut info = [0u8; 256];
        let Some(len) = self.tcp_option(libc::TCP_INFO, &mut info) else {
            return (None, None);
        };
        let at = |o: usize, n: usize| (len >= o + n).then(|| &info[o..o + n]);
        let segments = at(TCPI_TOTAL_RETRANS, 4)
            .map(|b| u64::from(u32::from_ne_bytes([b[0], b[1], b[2], b[3]])));
        let bytes = at(TCPI_BYTES_RETRANS, 8).map(|b| {
            let mut w = [0u8; 8];
            w.copy_from_slice(b);
            u64::from_ne_bytes(w)
        });
        (segments, bytes)
    }

    /// The connection's congestion control (`TCP_CONGESTION`), `None` if the call fails.
    pub(super) fn congestion(&self) -> Option<String> {
        let mut name = [0u8; 16];
        let len = self.tcp_option(libc::TCP_CONGESTION, &mut name)?;
        let name = &name[..len];
        let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
        Some(String::from_utf8_lossy(&name[..end]).into_owned())
    }

    /// The `IPPROTO_TCP` option `name` read into `buf`: the bytes the kernel wrote, `None` if the
    /// call fails.
    fn tcp_option(&self, name: libc::c_int, buf: &mut [u8]) -> Option<usize> {
        let mut len = buf.len() as libc::socklen_t;
        // SAFETY: the stream's descriptor is open for the call; `buf` is a live buffer of `len`
        // bytes, which the kernel fills up to `len` and shortens `len` to what it wrote.
        let rc = unsafe {
            libc::getsockopt(
                std::os::fd::AsRawFd::as_raw_fd(&self.stream),
                libc::IPPROTO_TCP,
                name,
                buf.as_mut_ptr().cast(),
                &mut len,
            )
        };
        (rc >= 0).then(|| (len as usize).min(buf.len()))
    }

    /// A connected, non-blocking, registered socket; assumed ready until a call would block.
    pub(super) fn new(stream: TcpStream) -> Link {
        Link {
            stream,
            readable: true,
            writable: true,
            last_read: 0,
        }
    }

    /// Whether to read the socket on this turn without asking epoll: for a ping-pong (at most one
    /// request of ours outstanding, small reads), where asking first puts a second syscall on every
    /// message's path. A stream is better served by epoll's edges: a read that finds nothing takes
    /// the socket lock the kernel's receive processing needs.
    pub(crate) fn spin_on_socket(&self, qp: &QpState) -> bool {
        self.writable && self.last_read < SMALL_READ && qp.outstanding() <= 1
    }

    /// The readiness of a connection that has no epoll set (the only one of its endpoint), from
    /// `poll(2)`: readable when bytes (or a hang-up) wait, writable when the socket has room again
    /// after a write that filled it; waits up to [`IDLE_SLEEP_MS`] for either when `sleep`. True
    /// when something is ready. Unlike an epoll registration, a `poll` leaves nothing on the
    /// socket's wait queue once it returns, so the peer's every segment does not wake an epoll set
    /// on its way in (a spinning side never sleeps there anyway).
    pub(crate) fn wait_ready(&mut self, want_write: bool, sleep: bool) -> Result<bool> {
        use rustix::event::PollFlags as F;
        // Room to write is asked for only while it is missing and needed: a socket with room is
        // always ready, and asking would turn every sleep into a spin.
        let mut flags = F::IN | F::RDHUP;
        if want_write && !self.writable {
            flags |= F::OUT;
        }
        let mut fds = [rustix::event::PollFd::new(&self.stream, flags)];
        let timeout = if sleep { &IDLE_SLEEP } else { &NO_WAIT };
        match rustix::event::poll(&mut fds, Some(timeout)) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => return Ok(false),
            Err(e) => return Err(io_err("polling the data connection")(e.into())),
        }
        let got = fds[0].revents();
        let broken = F::ERR | F::HUP | F::RDHUP;
        self.readable |= got.intersects(F::IN | broken);
        self.writable |= got.intersects(F::OUT | broken);
        Ok(!got.is_empty())
    }

    /// Writes as much of the send queue as the socket takes; signaled frames then wait for their ack.
    pub(super) fn flush(&mut self, qp: &mut QpState, idx: usize) -> Result<bool> {
        let mut wrote = false;
        while self.writable && qp.has_tx() {
            // A ping-pong writes a frame or two: filling 256 slices for them would cost more than
            // the frames themselves.
            let written = if qp.tx_frames() <= FEW_FRAMES {
                self.write_frames::<{ 2 * FEW_FRAMES }>(qp)
            } else {
                self.write_frames::<{ 2 * TX_BATCH }>(qp)
            };
            match written {
                Ok((n, offered)) => {
                    wrote = true;
                    qp.sent(n);
                    // A short write means the socket buffer is full: the next edge says when it
                    // has room again, so do not pay for a write that would fail.
                    if n < offered {
                        self.writable = false;
                    }
                }
                Err(e) if would_block(&e) => {
                    self.writable = false;
                    return Ok(wrote);
                }
                Err(e) => return Err(sys_err(idx, "writing", e)),
            }
        }
        Ok(wrote)
    }

    /// One writev of the first `SLICES / 2` queued frames, straight from the registered buffer:
    /// the bytes written and the bytes offered.
    fn write_frames<const SLICES: usize>(&self, qp: &QpState) -> io::Result<(usize, usize)> {
        let mut iov = [IoSlice::new(&[]); SLICES];
        let n = qp.tx_slices(&mut iov);
        let offered: usize = iov[..n].iter().map(|s| s.len()).sum();
        if n > 1 && offered <= GATHER_BELOW {
            // A few small pieces (a ping-pong's header and payload): copying them is cheaper than
            // the kernel's walk over an iovec array, and one buffer is what the reference sends.
            let mut one = [0u8; GATHER_BELOW];
            let mut at = 0;
            for s in &iov[..n] {
                one[at..at + s.len()].copy_from_slice(s);
                at += s.len();
            }
            return (&self.stream).write(&one[..at]).map(|w| (w, offered));
        }
        (&self.stream)
            .write_vectored(&iov[..n])
            .map(|w| (w, offered))
    }

    /// Reads what the socket has and applies whole and partial frames; stops when the socket is empty,
    /// when a SEND waits for a receive to be posted, or after `budget` bytes so the caller can transmit.
    pub(super) fn receive(
        &mut self,
        qp: &mut QpState,
        idx: usize,
        cq: &mut VecDeque<Completion>,
        mut budget: usize,
    ) -> Result<bool> {
        let mut progressed = false;
        loop {
            if qp.process(cq, &mut progressed)? == Stop::Receive {
                return Ok(progressed);
            }
            if budget == 0 || !self.readable {
                return Ok(progressed);
            }
            let (read, offered) = match qp.recv_into() {
                // The rest of a payload plus a little of what follows, in one readv.
                RecvInto::Payload { rest, tail } => {
                    let offered = rest.len() + tail.len();
                    let r = (&self.stream)
                        .read_vectored(&mut [IoSliceMut::new(rest), IoSliceMut::new(tail)]);
                    (r, offered)
                }
                RecvInto::Stage(room) => {
                    let offered = room.len();
                    ((&self.stream).read(room), offered)
                }
            };
            let n = match read {
                Ok(0) => {
                    // An end of stream right after data is reported on the next call, so the data
                    // is seen first.
                    if progressed {
                        return Ok(true);
                    }
                    qp.close_by_peer()?;
                    self.readable = false;
                    return Ok(false);
                }
                Ok(n) => {
                    // A TCP read returns less than it was offered only when the socket had no
                    // more: the next edge says when more arrives, so do not pay for a read that
                    // would find it empty (a ping-pong would make one per message).
                    if n < offered {
                        self.readable = false;
                    }
                    self.last_read = n;
                    n
                }
                Err(e) if would_block(&e) => {
                    self.readable = false;
                    return Ok(progressed);
                }
                Err(e) => return Err(sys_err(idx, "reading", e)),
            };
            progressed = true;
            budget = budget.saturating_sub(n);
            qp.received(n);
        }
    }
}

/// Reads shorter than this are a ping-pong's (see [`Link::spin_on_socket`]).
const SMALL_READ: usize = 4096;

/// Bytes below which a write gathers its pieces into one buffer rather than passing an iovec array.
const GATHER_BELOW: usize = 256;

/// Queued frames up to which a write gathers them in a small slice array.
const FEW_FRAMES: usize = 4;

/// Edge-triggered readiness of every data socket of an endpoint with several. Polling it (timeout 0)
/// costs no socket lock, unlike a read or write that would block, which contends with the peer's
/// packet processing. An endpoint with one connection has none: see [`Link::wait_ready`].
pub(super) struct Poller {
    epoll: OwnedFd,
    events: Box<[epoll::Event]>,
}

// SAFETY: `epoll::Event` is not `Send` only because its data union can hold a pointer. Ours only
// ever holds the queue-pair index we registered (a u64), and the buffer is owned by this struct.
unsafe impl Send for Poller {}

/// A zero timeout: report what is ready now.
const NO_WAIT: Timespec = Timespec {
    tv_sec: 0,
    tv_nsec: 0,
};

/// The longest sleep of an idle poll.
const IDLE_SLEEP: Timespec = Timespec {
    tv_sec: 0,
    tv_nsec: IDLE_SLEEP_MS as i64 * 1_000_000,
};

impl Poller {
    /// An empty epoll set that reports up to `slots` events per wait.
    pub(super) fn new(slots: usize) -> Result<Poller> {
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)
            .map_err(|e| io_err("creating an epoll instance")(e.into()))?;
        let empty = epoll::Event {
            flags: epoll::EventFlags::empty(),
            data: epoll::EventData::new_u64(0),
        };
        Ok(Poller {
            epoll,
            events: vec![empty; slots].into_boxed_slice(),
        })
    }

    /// Watches `stream` (edge-triggered, both directions and hang-ups) as queue pair `idx`.
    pub(super) fn register(&self, stream: &TcpStream, idx: usize) -> Result<()> {
        use epoll::EventFlags as F;
        epoll::add(
            &self.epoll,
            stream,
            epoll::EventData::new_u64(idx as u64),
            F::IN | F::OUT | F::RDHUP | F::ET,
        )
        .map_err(|e| io_err("registering a data connection with epoll")(e.into()))
    }

    /// What became ready since the last call, waiting up to [`IDLE_SLEEP_MS`] for something when
    /// `sleep`: (queue pair, readable, writable) per event. An interrupted wait reports nothing.
    pub(super) fn wait(
        &mut self,
        sleep: bool,
    ) -> Result<impl ExactSizeIterator<Item = (usize, bool, bool)> + '_> {
        let timeout = if sleep { &IDLE_SLEEP } else { &NO_WAIT };
        let n = match epoll::wait(&self.epoll, &mut self.events[..], Some(timeout)) {
            Ok(n) => n,
            Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => 0,
            Err(e) => return Err(io_err("polling the data connections")(e.into())),
        };
        Ok(self.events[..n].iter().map(|ev| {
            use epoll::EventFlags as F;
            let broken = F::ERR | F::HUP | F::RDHUP;
            let flags = ev.flags;
            (
                ev.data.u64() as usize,
                flags.intersects(F::IN | broken),
                flags.intersects(F::OUT | broken),
            )
        }))
    }
}

/// A read or write found the socket empty or full (or was interrupted): wait for the next edge.
fn would_block(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    )
}

/// An OS error on data connection `qp`; a reset or broken pipe means the peer went away.
fn sys_err(qp: usize, what: &str, source: io::Error) -> Error {
    if matches!(
        source.raw_os_error(),
        Some(libc::EPIPE) | Some(libc::ECONNRESET) | Some(libc::ECONNABORTED)
    ) {
        return closed(qp);
    }
    Error::Io {
        context: format!("{what} on data connection {qp}"),
        source,
    }
}
