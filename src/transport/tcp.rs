//! The TCP baseline transport: the verbs semantics emulated over one kernel TCP connection per queue pair.
//!
//! Every operation travels as a frame: a fixed [`HEADER_LEN`]-byte header (op, length, remote offset,
//! immediate) followed by the payload. WRITE lands in the peer's buffer at the offset when the peer's
//! `poll_cq` applies it; READ is a request answered by the peer's `poll_cq` with a response frame; SEND
//! consumes the oldest posted receive. As on an RC queue pair, a signaled SEND or WRITE completes when
//! the peer has applied it (the frame asks for an acknowledgement, which the peer sends with its next
//! transmission), and a READ when its response has been placed: a completion never just means that the
//! kernel took the bytes, so bandwidth is what reached the peer's memory.
//!
//! The sockets are non-blocking and busy-polled from `poll_cq`: no thread, no lock, no allocation per
//! message. Payloads move straight between the registered buffer and the socket (`writev` of many
//! header+payload pairs in one call; `readv` of the rest of a payload plus the next headers), so a large
//! message costs about one system call on each side, and a small one shares its call with its neighbours.
//! `post_send` only queues; `poll_cq` transmits, reads, and reports completions.
//!
//! Readiness comes from an edge-triggered epoll set polled with a zero timeout, not from reads and
//! writes that fail with EAGAIN: those take the socket lock that the kernel's loopback TCP processing
//! needs. After [`DEFAULT_SPIN_POLLS`] idle polls `poll_cq` sleeps in epoll (at most [`IDLE_SLEEP_MS`])
//! until a socket is ready, so a spinning side never starves the kernel work it is waiting for on a
//! busy machine; a ping-pong's reply arrives well within the spinning phase.

use super::{
    Completion, CompletionOp, CompletionStatus, ConnInfo, Endpoint, Error, QpInfo, RecvRequest,
    Result, SendOp, SendRequest,
};
use crate::params::{Role, TransportKind};
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

/// Size of the frame header that precedes every payload on a data connection.
pub const HEADER_LEN: usize = 24;

/// First bytes a client writes on each data connection, so a stray connection is recognised.
const DATA_MAGIC: &[u8; 8] = b"rpdata01";

/// Bytes of the data-connection preamble: magic, queue-pair index, the server QP's PSN as a token.
const PREAMBLE_LEN: usize = 16;

/// Frames gathered into one `writev` (two iovecs each).
const TX_BATCH: usize = 128;

/// Receive staging area: small frames are read many at a time into it, then copied out.
const STAGE_LEN: usize = 256 * 1024;

/// When a large payload is read straight into the buffer, how much of what follows is read with it.
const STAGE_TAIL: usize = 4096;

/// Frame opcodes on the data connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum FrameOp {
    Send = 1,
    SendImm = 2,
    Write = 3,
    WriteImm = 4,
    ReadReq = 5,
    ReadResp = 6,
    /// Acknowledges `offset` frames that asked for it (header only).
    Ack = 7,
}

impl FrameOp {
    fn from_u8(v: u8) -> Option<FrameOp> {
        Some(match v {
            1 => FrameOp::Send,
            2 => FrameOp::SendImm,
            3 => FrameOp::Write,
            4 => FrameOp::WriteImm,
            5 => FrameOp::ReadReq,
            6 => FrameOp::ReadResp,
            7 => FrameOp::Ack,
            _ => return None,
        })
    }
}

/// A frame header: op, payload length (or requested length for READ), remote offset, immediate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Header {
    op: FrameOp,
    /// [`FLAG_ACK_REQ`] or 0.
    flags: u8,
    len: u32,
    offset: u64,
    imm: u32,
}

/// Header flag: the sender completes this SEND or WRITE only when the peer acknowledges having applied it.
const FLAG_ACK_REQ: u8 = 1;

impl Header {
    /// Writes the 24-byte little-endian form: op, flags, 2 reserved, len, offset, imm, 4 reserved.
    fn emit(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0] = self.op as u8;
        b[1] = self.flags;
        b[4..8].copy_from_slice(&self.len.to_le_bytes());
        b[8..16].copy_from_slice(&self.offset.to_le_bytes());
        b[16..20].copy_from_slice(&self.imm.to_le_bytes());
        b
    }

    /// Parses a header; `None` when the opcode or reserved bytes are not ours (a corrupt stream).
    fn parse(b: &[u8]) -> Option<Header> {
        let op = FrameOp::from_u8(b[0])?;
        if b[1] & !FLAG_ACK_REQ != 0 || b[2..4] != [0, 0] || b[20..24] != [0, 0, 0, 0] {
            return None;
        }
        Some(Header {
            op,
            flags: b[1],
            len: u32::from_le_bytes(b[4..8].try_into().ok()?),
            offset: u64::from_le_bytes(b[8..16].try_into().ok()?),
            imm: u32::from_le_bytes(b[16..20].try_into().ok()?),
        })
    }

    /// Whether a payload follows the header on the wire.
    fn has_payload(&self) -> bool {
        !matches!(self.op, FrameOp::ReadReq | FrameOp::Ack)
    }
}

/// How to build a TCP endpoint.
#[derive(Debug, Clone)]
pub struct TcpConfig {
    /// Server accepts the data connections, client makes them (as on the out-of-band channel).
    pub role: Role,
    /// Number of queue pairs (one TCP connection each).
    pub qps: usize,
    /// Bytes of each queue pair's registered buffer.
    pub buf_len: usize,
    /// Send-queue depth: how many requests may be outstanding per queue pair.
    pub sq_depth: usize,
    /// Receive-queue depth: how many receives may be posted per queue pair.
    pub rq_depth: usize,
    /// Local address the server listens on for data connections (the out-of-band socket's address).
    pub bind: IpAddr,
    /// How long to wait for the data connections to be made.
    pub connect_timeout: Duration,
    /// SO_SNDBUF / SO_RCVBUF to ask for; `None` leaves the kernel's autotuning alone.
    pub socket_buffer: Option<usize>,
    /// Idle `poll_cq` calls before it sleeps until a socket is ready ([`DEFAULT_SPIN_POLLS`]; `u64::MAX`
    /// spins forever). Over loopback the kernel moves TCP data in the *sender's* and the receiver's
    /// system calls and softirqs, on the same cores as the datapath threads: a thread that spins on an
    /// empty socket takes that time away from the kernel work it is waiting for. Spinning first keeps
    /// the latency of a ping-pong; sleeping after a while lets a bandwidth stream run at full speed.
    pub spin_polls: u64,
}

/// Idle polls before `poll_cq` sleeps (a few hundred microseconds of spinning).
pub const DEFAULT_SPIN_POLLS: u64 = 256;

/// Longest sleep of an idle `poll_cq`, so callers still get control back to check for the end of a test.
pub const IDLE_SLEEP_MS: i32 = 1;

/// One outgoing frame in the send queue: header, payload range in the local buffer, progress.
#[derive(Debug, Clone, Copy)]
struct TxFrame {
    hdr: [u8; HEADER_LEN],
    offset: usize,
    len: usize,
    /// Bytes of header+payload already written to the socket.
    sent: usize,
    wr_id: u64,
    /// The completion to report when the last byte is written (signaled SEND/WRITE only).
    complete_as: Option<CompletionOp>,
}

impl TxFrame {
    fn total(&self) -> usize {
        HEADER_LEN + self.len
    }
}

/// A READ whose response has not arrived yet.
#[derive(Debug, Clone, Copy)]
struct PendingRead {
    wr_id: u64,
    offset: usize,
    len: usize,
    signaled: bool,
}

/// Where the payload of the frame being received goes.
#[derive(Debug, Clone, Copy)]
struct RxFrame {
    hdr: Header,
    /// Destination offset in the local buffer.
    dest: usize,
    /// Payload bytes already placed.
    done: usize,
}

/// One queue pair: its buffer, its connection and the two directions' state.
struct Qp {
    buf: Box<[u8]>,
    stream: Option<TcpStream>,
    fd: RawFd,
    /// The socket may have bytes to read: set by an epoll edge, cleared when a read would block.
    readable: bool,
    /// The socket may take bytes: set by an epoll edge, cleared when a write would block.
    writable: bool,
    /// The peer's buffer as it described it: vaddr and length, for bounds checks and offsets.
    peer_vaddr: u64,
    peer_len: u64,
    peer_max_reads: usize,
    tx: VecDeque<TxFrame>,
    /// Requests posted and not yet retired (SEND/WRITE until written, READ until answered).
    outstanding: usize,
    reads: VecDeque<PendingRead>,
    /// Signaled SENDs and WRITEs written to the socket, waiting for the peer's acknowledgement.
    unacked: VecDeque<(u64, CompletionOp, u32)>,
    /// Frames received that asked for an acknowledgement not sent yet.
    acks_owed: u64,
    /// The peer closed its end while nothing was pending; new work is refused.
    peer_closed: bool,
    recvs: VecDeque<RecvRequest>,
    stage: Box<[u8]>,
    stage_start: usize,
    stage_end: usize,
    rx: Option<RxFrame>,
    psn: u32,
}

/// One side of a TCP baseline test.
pub struct TcpEndpoint {
    cfg: TcpConfig,
    listener: Option<TcpListener>,
    /// Where the server listens (kept after the listener is closed, for `local_info`).
    listen_addr: Option<SocketAddr>,
    qps: Vec<Qp>,
    cq: VecDeque<Completion>,
    /// Edge-triggered readiness of every data socket. Polling it (timeout 0) costs no socket lock,
    /// unlike a read or write that would block, which contends with the peer's packet processing.
    epoll: OwnedFd,
    events: Box<[libc::epoll_event]>,
    /// poll_cq calls in a row that found nothing to do.
    idle: u64,
    /// After this many idle calls, poll_cq sleeps in epoll_wait (at most [`IDLE_SLEEP_MS`]) until a
    /// socket is ready, instead of spinning.
    block_after: u64,
}

fn io_err(context: impl Into<String>) -> impl FnOnce(io::Error) -> Error {
    let context = context.into();
    move |source| Error::Io { context, source }
}

/// A PSN-like token: random enough to tell our data connections from a stranger's.
fn token(seed: usize) -> u32 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    (t ^ (std::process::id() << 8) ^ (seed as u32).wrapping_mul(0x9e37_79b9)) & 0x00ff_ffff
}

impl TcpEndpoint {
    /// Registers the buffers and, on the server, opens the listener the client will connect to.
    pub fn new(cfg: TcpConfig) -> Result<TcpEndpoint> {
        if cfg.qps == 0 || cfg.buf_len == 0 || cfg.sq_depth == 0 {
            return Err(Error::InvalidRequest(
                "a TCP endpoint needs at least one queue pair, a buffer and a send queue".into(),
            ));
        }
        let listener = match cfg.role {
            Role::Server => Some(TcpListener::bind(SocketAddr::new(cfg.bind, 0)).map_err(
                io_err(format!("listening for data connections on {}", cfg.bind)),
            )?),
            Role::Client => None,
        };
        let qps = (0..cfg.qps)
            .map(|i| Qp {
                buf: vec![0u8; cfg.buf_len].into_boxed_slice(),
                stream: None,
                fd: -1,
                readable: true,
                writable: true,
                peer_vaddr: 0,
                peer_len: 0,
                peer_max_reads: 0,
                tx: VecDeque::with_capacity(cfg.sq_depth + 16),
                outstanding: 0,
                reads: VecDeque::with_capacity(cfg.sq_depth),
                unacked: VecDeque::with_capacity(cfg.sq_depth),
                acks_owed: 0,
                peer_closed: false,
                recvs: VecDeque::with_capacity(cfg.rq_depth),
                stage: vec![0u8; STAGE_LEN].into_boxed_slice(),
                stage_start: 0,
                stage_end: 0,
                rx: None,
                psn: token(i),
            })
            .collect();
        let cq = VecDeque::with_capacity(cfg.qps * (cfg.sq_depth + cfg.rq_depth) + 16);
        let listen_addr = listener.as_ref().and_then(|l| l.local_addr().ok());
        // SAFETY: epoll_create1 returns a new descriptor (or -1, checked) that we then own.
        let epfd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if epfd < 0 {
            return Err(io_err("creating an epoll instance")(
                io::Error::last_os_error(),
            ));
        }
        // SAFETY: epfd is a fresh, valid descriptor owned by nobody else.
        let epoll = unsafe { OwnedFd::from_raw_fd(epfd) };
        let spin_polls = cfg.spin_polls;
        let events =
            vec![libc::epoll_event { events: 0, u64: 0 }; cfg.qps.min(1024)].into_boxed_slice();
        Ok(TcpEndpoint {
            cfg,
            listener,
            listen_addr,
            qps,
            cq,
            epoll,
            events,
            idle: 0,
            block_after: spin_polls,
        })
    }

    fn setup_stream(&self, s: &TcpStream) -> Result<()> {
        s.set_nodelay(true).map_err(io_err("setting TCP_NODELAY"))?;
        if let Some(bytes) = self.cfg.socket_buffer {
            let v = bytes as libc::c_int;
            for opt in [libc::SO_SNDBUF, libc::SO_RCVBUF] {
                // SAFETY: plain setsockopt on a socket we own, with a correctly sized int.
                let rc = unsafe {
                    libc::setsockopt(
                        s.as_raw_fd(),
                        libc::SOL_SOCKET,
                        opt,
                        (&v as *const libc::c_int).cast(),
                        std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                    )
                };
                if rc != 0 {
                    return Err(io_err("setting the socket buffer size")(
                        io::Error::last_os_error(),
                    ));
                }
            }
        }
        Ok(())
    }

    fn connect_client(&mut self, addr: SocketAddr, peer: &ConnInfo) -> Result<()> {
        let deadline = Instant::now() + self.cfg.connect_timeout;
        for i in 0..self.qps.len() {
            let left = deadline
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1));
            let mut s = TcpStream::connect_timeout(&addr, left)
                .map_err(io_err(format!("connecting data connection {i} to {addr}")))?;
            self.setup_stream(&s)?;
            let mut pre = [0u8; PREAMBLE_LEN];
            pre[..8].copy_from_slice(DATA_MAGIC);
            pre[8..12].copy_from_slice(&(i as u32).to_le_bytes());
            pre[12..16].copy_from_slice(&peer.qps[i].psn.to_le_bytes());
            s.write_all(&pre).map_err(io_err(format!(
                "greeting the data connection {i} at {addr}"
            )))?;
            self.attach(i, s)?;
        }
        Ok(())
    }

    fn accept_server(&mut self) -> Result<()> {
        let listener = self
            .listener
            .take()
            .expect("server endpoint has a listener");
        listener
            .set_nonblocking(true)
            .map_err(io_err("making the data listener non-blocking"))?;
        let deadline = Instant::now() + self.cfg.connect_timeout;
        let mut attached = 0;
        while attached < self.qps.len() {
            let (mut s, from) = match listener.accept() {
                Ok(v) => v,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        return Err(Error::Connection(format!(
                            "the client made {attached} of {} data connections within {:?}; check that nothing filters the data port {}",
                            self.qps.len(),
                            self.cfg.connect_timeout,
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
            s.set_read_timeout(Some(self.cfg.connect_timeout))
                .map_err(io_err("configuring a data connection"))?;
            let mut pre = [0u8; PREAMBLE_LEN];
            s.read_exact(&mut pre).map_err(io_err(format!(
                "reading the data-connection greeting from {from}"
            )))?;
            let idx = u32::from_le_bytes(pre[8..12].try_into().expect("4 bytes")) as usize;
            let tok = u32::from_le_bytes(pre[12..16].try_into().expect("4 bytes"));
            if &pre[..8] != DATA_MAGIC
                || idx >= self.qps.len()
                || tok != self.qps[idx].psn
                || self.qps[idx].stream.is_some()
            {
                return Err(Error::Connection(format!(
                    "{from} opened a data connection that is not from our roceperf peer (bad greeting)"
                )));
            }
            self.setup_stream(&s)?;
            self.attach(idx, s)?;
            attached += 1;
        }
        Ok(())
    }

    fn attach(&mut self, i: usize, s: TcpStream) -> Result<()> {
        s.set_read_timeout(None)
            .map_err(io_err("configuring a data connection"))?;
        s.set_nonblocking(true)
            .map_err(io_err("making a data connection non-blocking"))?;
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32,
            u64: i as u64,
        };
        // SAFETY: registering a socket we own with our epoll instance; `ev` outlives the call.
        let rc = unsafe {
            libc::epoll_ctl(
                self.epoll.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                s.as_raw_fd(),
                &mut ev,
            )
        };
        if rc != 0 {
            return Err(io_err("registering a data connection with epoll")(
                io::Error::last_os_error(),
            ));
        }
        self.qps[i].fd = s.as_raw_fd();
        self.qps[i].stream = Some(s);
        Ok(())
    }

    fn check_connected(&self, qp: usize) -> Result<()> {
        match self.qps.get(qp) {
            None => Err(Error::InvalidRequest(format!(
                "queue pair {qp} does not exist (this endpoint has {})",
                self.qps.len()
            ))),
            Some(q) if q.stream.is_none() => Err(Error::InvalidRequest(format!(
                "queue pair {qp} is not connected yet; call connect first"
            ))),
            Some(q) if q.peer_closed => Err(closed(qp)),
            Some(_) => Ok(()),
        }
    }
}

fn closed(qp: usize) -> Error {
    Error::Connection(format!(
        "the peer closed data connection {qp}; it stopped or failed, see its output"
    ))
}

/// The last OS error on data connection `qp`; a reset or broken pipe means the peer went away.
fn sys_err(qp: usize, what: &str) -> Error {
    let source = io::Error::last_os_error();
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

fn would_block() -> bool {
    let e = io::Error::last_os_error();
    matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EINTR))
}

impl Qp {
    /// Writes as much of the send queue as the socket takes; signaled frames then wait for their ack.
    fn flush(&mut self, idx: usize) -> Result<bool> {
        let mut wrote = false;
        while self.writable && !self.tx.is_empty() {
            let mut iov = [libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            }; TX_BATCH * 2];
            let mut n_iov = 0;
            for f in self.tx.iter().take(TX_BATCH) {
                if f.sent < HEADER_LEN {
                    iov[n_iov] = libc::iovec {
                        iov_base: f.hdr[f.sent..].as_ptr() as *mut libc::c_void,
                        iov_len: HEADER_LEN - f.sent,
                    };
                    n_iov += 1;
                }
                let done = f.sent.saturating_sub(HEADER_LEN);
                if f.len > done {
                    iov[n_iov] = libc::iovec {
                        iov_base: self.buf[f.offset + done..].as_ptr() as *mut libc::c_void,
                        iov_len: f.len - done,
                    };
                    n_iov += 1;
                }
            }
            // SAFETY: every iovec points into `self.tx` headers or `self.buf`, both alive and unmoved
            // for the duration of the call; the kernel only reads them.
            let n = unsafe { libc::writev(self.fd, iov.as_ptr(), n_iov as libc::c_int) };
            if n < 0 {
                if would_block() {
                    self.writable = false;
                    return Ok(wrote);
                }
                return Err(sys_err(idx, "writing"));
            }
            wrote = true;
            let mut n = n as usize;
            while n > 0 {
                let f = self
                    .tx
                    .front_mut()
                    .expect("bytes written belong to queued frames");
                let take = n.min(f.total() - f.sent);
                f.sent += take;
                n -= take;
                if f.sent == f.total() {
                    let f = self.tx.pop_front().expect("front exists");
                    if let Some(op) = f.complete_as {
                        // Completes when the peer says it has applied it, as on an RC queue pair.
                        self.unacked.push_back((f.wr_id, op, f.len as u32));
                    } else if f.hdr[0] != FrameOp::ReadReq as u8
                        && f.hdr[0] != FrameOp::ReadResp as u8
                        && f.hdr[0] != FrameOp::Ack as u8
                    {
                        // An unsignaled SEND/WRITE retires silently, as on a real send queue.
                        self.outstanding -= 1;
                    }
                }
            }
        }
        Ok(wrote)
    }

    /// Reads what the socket has and applies whole and partial frames; stops when the socket is empty,
    /// when a SEND waits for a receive to be posted, or after `budget` bytes so the caller can transmit.
    fn receive(
        &mut self,
        idx: usize,
        cq: &mut VecDeque<Completion>,
        mut budget: usize,
    ) -> Result<bool> {
        // An end of stream right after data is reported on the next call, so the data is seen first.
        let mut progressed = false;
        loop {
            if let Some(mut fr) = self.rx {
                // Payload of the current frame: first from the staging area, then straight from the socket.
                let want = fr.hdr.len as usize - fr.done;
                let have = (self.stage_end - self.stage_start).min(want);
                if have > 0 {
                    let dst = fr.dest + fr.done;
                    self.buf[dst..dst + have]
                        .copy_from_slice(&self.stage[self.stage_start..self.stage_start + have]);
                    self.stage_start += have;
                    fr.done += have;
                }
                if fr.done < fr.hdr.len as usize {
                    if budget == 0 || !self.readable {
                        self.rx = Some(fr);
                        return Ok(progressed);
                    }
                    // The staging area is empty here: read the rest of the payload plus a little of what follows.
                    self.stage_start = 0;
                    self.stage_end = 0;
                    let rem = fr.hdr.len as usize - fr.done;
                    let iov = [
                        libc::iovec {
                            iov_base: self.buf[fr.dest + fr.done..].as_mut_ptr().cast(),
                            iov_len: rem,
                        },
                        libc::iovec {
                            iov_base: self.stage.as_mut_ptr().cast(),
                            iov_len: STAGE_TAIL,
                        },
                    ];
                    // SAFETY: both iovecs point into buffers owned by self, in bounds (dest range was
                    // checked when the header was parsed), and nothing else touches them during the call.
                    let n = unsafe { libc::readv(self.fd, iov.as_ptr(), 2) };
                    if n < 0 {
                        self.rx = Some(fr);
                        if would_block() {
                            self.readable = false;
                            return Ok(progressed);
                        }
                        return Err(sys_err(idx, "reading"));
                    }
                    if n == 0 {
                        return self.end_of_stream(idx, progressed);
                    }
                    progressed = true;
                    let n = n as usize;
                    budget = budget.saturating_sub(n);
                    let into_payload = n.min(rem);
                    fr.done += into_payload;
                    self.stage_end = n - into_payload;
                    if fr.done < fr.hdr.len as usize {
                        self.rx = Some(fr);
                        continue;
                    }
                }
                self.rx = None;
                self.finish_frame(idx, fr, cq)?;
                progressed = true;
                continue;
            }
            if self.stage_end - self.stage_start >= HEADER_LEN {
                let h = &self.stage[self.stage_start..self.stage_start + HEADER_LEN];
                let Some(hdr) = Header::parse(h) else {
                    return Err(Error::Connection(format!(
                        "data connection {idx} carried a frame that is not roceperf's (bytes {h:02x?}); is the peer the same roceperf version?"
                    )));
                };
                let Some(dest) = self.place(idx, &hdr)? else {
                    // A SEND with no receive posted: leave it in the socket until one is (TCP flow control).
                    return Ok(progressed);
                };
                self.stage_start += HEADER_LEN;
                let fr = RxFrame { hdr, dest, done: 0 };
                if hdr.has_payload() {
                    self.rx = Some(fr);
                } else {
                    self.finish_frame(idx, fr, cq)?;
                    progressed = true;
                }
                continue;
            }
            if budget == 0 || !self.readable {
                return Ok(progressed);
            }
            // Need more bytes for a header: compact the staging area and fill it.
            if self.stage_start > 0 {
                self.stage.copy_within(self.stage_start..self.stage_end, 0);
                self.stage_end -= self.stage_start;
                self.stage_start = 0;
            }
            let room = &mut self.stage[self.stage_end..];
            // SAFETY: reading into our own staging buffer, within its bounds.
            let n = unsafe { libc::recv(self.fd, room.as_mut_ptr().cast(), room.len(), 0) };
            if n < 0 {
                if would_block() {
                    self.readable = false;
                    return Ok(progressed);
                }
                return Err(sys_err(idx, "reading"));
            }
            if n == 0 {
                return self.end_of_stream(idx, progressed);
            }
            progressed = true;
            self.stage_end += n as usize;
            budget = budget.saturating_sub(n as usize);
        }
    }

    /// The peer closed its end. Reported on a later call when this call moved data (so the data is
    /// seen first), and an error only while this side still waits for the peer (as a verbs QP errs
    /// only for work that cannot complete); otherwise the queue pair just goes quiet.
    fn end_of_stream(&mut self, idx: usize, progressed: bool) -> Result<bool> {
        if progressed {
            return Ok(true);
        }
        if self.outstanding > 0
            || !self.unacked.is_empty()
            || !self.reads.is_empty()
            || self.rx.is_some()
        {
            return Err(closed(idx));
        }
        self.peer_closed = true;
        self.readable = false;
        Ok(false)
    }

    /// Decides where an incoming frame's payload goes and checks it fits; `None` = wait for a receive.
    fn place(&mut self, idx: usize, h: &Header) -> Result<Option<usize>> {
        let len = h.len as usize;
        let bad = |what: &str| {
            Err(Error::Connection(format!(
                "data connection {idx}: the peer's {what} of {len} bytes at offset {} is outside this side's {}-byte buffer; give both sides the same -s",
                h.offset,
                self.buf.len()
            )))
        };
        match h.op {
            FrameOp::Send | FrameOp::SendImm => {
                let Some(r) = self.recvs.front() else {
                    return Ok(None);
                };
                if len > r.len as usize {
                    return Err(Error::Connection(format!(
                        "data connection {idx}: an incoming SEND of {len} bytes is larger than the posted receive of {} bytes; give both sides the same -s",
                        r.len
                    )));
                }
                Ok(Some(r.offset as usize))
            }
            FrameOp::Write | FrameOp::WriteImm | FrameOp::ReadReq => {
                let end = h.offset.checked_add(len as u64);
                if end.is_none_or(|e| e > self.buf.len() as u64) {
                    return bad(if h.op == FrameOp::ReadReq {
                        "READ"
                    } else {
                        "WRITE"
                    });
                }
                if h.op == FrameOp::WriteImm && self.recvs.is_empty() {
                    return Ok(None);
                }
                Ok(Some(h.offset as usize))
            }
            FrameOp::Ack => Ok(Some(0)),
            FrameOp::ReadResp => match self.reads.front() {
                Some(r) if r.len == len => Ok(Some(r.offset)),
                _ => Err(Error::Connection(format!(
                    "data connection {idx}: a READ response of {len} bytes arrived that matches no outstanding READ"
                ))),
            },
        }
    }

    /// A frame has been fully received: complete receives and reads, queue READ responses.
    fn finish_frame(
        &mut self,
        idx: usize,
        fr: RxFrame,
        cq: &mut VecDeque<Completion>,
    ) -> Result<()> {
        let h = fr.hdr;
        if h.flags & FLAG_ACK_REQ != 0 {
            self.acks_owed += 1;
        }
        let recv_done = |qp: &mut Qp, cq: &mut VecDeque<Completion>, op, imm| {
            let r = qp
                .recvs
                .pop_front()
                .expect("placement checked a receive is posted");
            cq.push_back(Completion {
                wr_id: r.wr_id,
                qp: idx as u32,
                status: CompletionStatus::Success,
                op,
                byte_len: h.len,
                imm,
            });
        };
        match h.op {
            FrameOp::Send => recv_done(self, cq, CompletionOp::Recv, None),
            FrameOp::SendImm => recv_done(self, cq, CompletionOp::Recv, Some(h.imm)),
            FrameOp::WriteImm => recv_done(self, cq, CompletionOp::RecvWithImm, Some(h.imm)),
            FrameOp::Write => {}
            FrameOp::ReadReq => {
                if self.tx.len() >= self.tx.capacity() {
                    // Rare: more READs in flight than the queue was sized for; growing once is cheaper
                    // than failing the test.
                    self.tx.reserve(self.tx.capacity());
                }
                self.tx.push_back(TxFrame {
                    hdr: Header {
                        op: FrameOp::ReadResp,
                        flags: 0,
                        len: h.len,
                        offset: 0,
                        imm: 0,
                    }
                    .emit(),
                    offset: fr.dest,
                    len: h.len as usize,
                    sent: 0,
                    wr_id: 0,
                    complete_as: None,
                });
            }
            FrameOp::Ack => {
                for _ in 0..h.offset {
                    let Some((wr_id, op, byte_len)) = self.unacked.pop_front() else {
                        return Err(Error::Connection(format!(
                            "data connection {idx}: the peer acknowledged more than this side sent"
                        )));
                    };
                    self.outstanding -= 1;
                    cq.push_back(Completion {
                        wr_id,
                        qp: idx as u32,
                        status: CompletionStatus::Success,
                        op,
                        byte_len,
                        imm: None,
                    });
                }
            }
            FrameOp::ReadResp => {
                let r = self
                    .reads
                    .pop_front()
                    .expect("placement matched a pending READ");
                self.outstanding -= 1;
                if r.signaled {
                    cq.push_back(Completion {
                        wr_id: r.wr_id,
                        qp: idx as u32,
                        status: CompletionStatus::Success,
                        op: CompletionOp::Read,
                        byte_len: h.len,
                        imm: None,
                    });
                }
            }
        }
        Ok(())
    }
}

impl Endpoint for TcpEndpoint {
    fn local_info(&self) -> ConnInfo {
        ConnInfo {
            needs_single_datagrams: false,
            transport: TransportKind::Tcp,
            gid: crate::transport::Gid::ZERO,
            gid_index: None,
            mac: None,
            addr: self.listen_addr.map(|a| a.to_string()),
            mtu: 65536,
            qps: self
                .qps
                .iter()
                .enumerate()
                .map(|(i, q)| QpInfo {
                    qpn: i as u32 + 1,
                    psn: q.psn,
                    rkey: q.psn ^ 0x5a5a5a,
                    vaddr: q.buf.as_ptr() as u64,
                    len: q.buf.len() as u64,
                    max_rd_atomic: self.cfg.sq_depth as u32,
                })
                .collect(),
        }
    }

    fn connect(&mut self, peer: &ConnInfo) -> Result<()> {
        if peer.transport != TransportKind::Tcp {
            return Err(Error::InvalidRequest(format!(
                "the peer uses the {} transport; both sides need --transport tcp",
                peer.transport
            )));
        }
        if peer.qps.len() != self.qps.len() {
            return Err(Error::InvalidRequest(format!(
                "the peer has {} queue pairs and this side {}; give both sides the same -q",
                peer.qps.len(),
                self.qps.len()
            )));
        }
        for (q, p) in self.qps.iter_mut().zip(&peer.qps) {
            q.peer_vaddr = p.vaddr;
            q.peer_len = p.len;
            q.peer_max_reads = p.max_rd_atomic as usize;
        }
        match self.cfg.role {
            Role::Client => {
                let addr: SocketAddr = peer
                    .addr
                    .as_deref()
                    .and_then(|a| a.parse().ok())
                    .ok_or_else(|| {
                        Error::InvalidRequest(format!(
                            "the server gave no usable data address ({:?})",
                            peer.addr
                        ))
                    })?;
                self.connect_client(addr, peer)
            }
            Role::Server => self.accept_server(),
        }
    }

    fn qp_count(&self) -> usize {
        self.qps.len()
    }

    fn buffer(&self, qp: usize) -> &[u8] {
        &self.qps[qp].buf
    }

    fn buffer_mut(&mut self, qp: usize) -> &mut [u8] {
        &mut self.qps[qp].buf
    }

    fn peek(&self, qp: usize, offset: usize) -> u8 {
        // Only poll_cq on this thread writes the buffer, so a plain read is exact.
        self.qps[qp].buf[offset]
    }

    fn post_send(&mut self, qp: usize, wr: &SendRequest) -> Result<()> {
        self.check_connected(qp)?;
        let depth = self.cfg.sq_depth;
        let q = &mut self.qps[qp];
        if q.outstanding >= depth {
            return Err(Error::QueueFull);
        }
        let len = wr.len as usize;
        let offset = wr.offset as usize;
        if offset.checked_add(len).is_none_or(|e| e > q.buf.len()) {
            return Err(Error::InvalidRequest(format!(
                "local range {offset}+{len} is outside queue pair {qp}'s {}-byte buffer",
                q.buf.len()
            )));
        }
        let remote_offset = match wr.op {
            SendOp::FetchAdd(_) | SendOp::CompareSwap { .. } => {
                return Err(Error::InvalidRequest(
                    "atomics have no TCP equivalent; use --transport soft or verbs".into(),
                ));
            }
            SendOp::Send | SendOp::SendWithImm(_) => 0,
            SendOp::Write | SendOp::WriteWithImm(_) | SendOp::Read => {
                let r = wr.remote.ok_or_else(|| {
                    Error::InvalidRequest("WRITE and READ need a remote address".into())
                })?;
                let off = r.addr.wrapping_sub(q.peer_vaddr);
                if r.addr < q.peer_vaddr || off + len as u64 > q.peer_len {
                    return Err(Error::InvalidRequest(format!(
                        "remote range {:#x}+{len} is outside the peer's {}-byte buffer at {:#x}",
                        r.addr, q.peer_len, q.peer_vaddr
                    )));
                }
                off
            }
        };
        let (op, imm, complete_as) = match wr.op {
            SendOp::Send => (FrameOp::Send, 0, CompletionOp::Send),
            SendOp::SendWithImm(i) => (FrameOp::SendImm, i, CompletionOp::Send),
            SendOp::Write => (FrameOp::Write, 0, CompletionOp::Write),
            SendOp::WriteWithImm(i) => (FrameOp::WriteImm, i, CompletionOp::Write),
            SendOp::Read => (FrameOp::ReadReq, 0, CompletionOp::Read),
            SendOp::FetchAdd(_) | SendOp::CompareSwap { .. } => unreachable!("refused above"),
        };
        let ack = wr.signaled && op != FrameOp::ReadReq;
        let hdr = Header {
            op,
            flags: if ack { FLAG_ACK_REQ } else { 0 },
            len: wr.len,
            offset: remote_offset,
            imm,
        }
        .emit();
        if op == FrameOp::ReadReq {
            if q.reads.len() >= q.peer_max_reads.max(1) {
                return Err(Error::QueueFull);
            }
            q.reads.push_back(PendingRead {
                wr_id: wr.wr_id,
                offset,
                len,
                signaled: wr.signaled,
            });
            q.tx.push_back(TxFrame {
                hdr,
                offset: 0,
                len: 0,
                sent: 0,
                wr_id: wr.wr_id,
                complete_as: None,
            });
        } else {
            q.tx.push_back(TxFrame {
                hdr,
                offset,
                len,
                sent: 0,
                wr_id: wr.wr_id,
                complete_as: wr.signaled.then_some(complete_as),
            });
        }
        q.outstanding += 1;
        // No system call here: poll_cq writes everything posted since its last call in one writev.
        Ok(())
    }

    fn post_recv(&mut self, qp: usize, wr: &RecvRequest) -> Result<()> {
        self.check_connected(qp)?;
        let depth = self.cfg.rq_depth;
        let q = &mut self.qps[qp];
        if wr
            .offset
            .checked_add(wr.len as u64)
            .is_none_or(|e| e > q.buf.len() as u64)
        {
            return Err(Error::InvalidRequest(format!(
                "receive range {}+{} is outside queue pair {qp}'s {}-byte buffer",
                wr.offset,
                wr.len,
                q.buf.len()
            )));
        }
        if q.recvs.len() >= depth {
            return Err(Error::QueueFull);
        }
        q.recvs.push_back(*wr);
        Ok(())
    }

    fn poll_cq(&mut self, out: &mut [Completion]) -> Result<usize> {
        if self.cq.len() < out.len() {
            // Transmit what was posted since the last call first: a ping-pong's request leaves at once,
            // and a burst of small posts goes out in one writev.
            let mut progress = false;
            for (i, q) in self.qps.iter_mut().enumerate() {
                if q.acks_owed > 0 {
                    // Acknowledgements go out with whatever the caller posted since (a ping-pong's
                    // reply), in the same writev.
                    if q.tx.len() >= q.tx.capacity() {
                        q.tx.reserve(q.tx.capacity());
                    }
                    q.tx.push_back(TxFrame {
                        hdr: Header {
                            op: FrameOp::Ack,
                            flags: 0,
                            len: 0,
                            offset: q.acks_owed,
                            imm: 0,
                        }
                        .emit(),
                        offset: 0,
                        len: 0,
                        sent: 0,
                        wr_id: 0,
                        complete_as: None,
                    });
                    q.acks_owed = 0;
                }
                if q.stream.is_some() && q.writable && !q.tx.is_empty() {
                    progress |= q.flush(i)?;
                }
            }
            // SAFETY: `events` is our own buffer of `events.len()` entries; the timeout is 0 or
            // IDLE_SLEEP_MS.
            let n = unsafe {
                libc::epoll_wait(
                    self.epoll.as_raw_fd(),
                    self.events.as_mut_ptr(),
                    self.events.len() as libc::c_int,
                    if self.idle > self.block_after {
                        IDLE_SLEEP_MS
                    } else {
                        0
                    },
                )
            };
            if n < 0 && !would_block() {
                return Err(io_err("polling the data connections")(
                    io::Error::last_os_error(),
                ));
            }
            for ev in &self.events[..n.max(0) as usize] {
                let q = &mut self.qps[ev.u64 as usize];
                let bits = ev.events as libc::c_int;
                let broken = libc::EPOLLERR | libc::EPOLLHUP | libc::EPOLLRDHUP;
                if bits & (libc::EPOLLIN | broken) != 0 {
                    q.readable = true;
                }
                if bits & (libc::EPOLLOUT | broken) != 0 {
                    q.writable = true;
                }
            }
            for (i, q) in self.qps.iter_mut().enumerate() {
                if q.stream.is_none() {
                    continue;
                }
                if q.readable {
                    progress |= q.receive(i, &mut self.cq, 4 * 1024 * 1024)?;
                }
                if q.writable && !q.tx.is_empty() {
                    progress |= q.flush(i)?;
                }
            }
            self.idle = if progress || n > 0 { 0 } else { self.idle + 1 };
        }
        let n = out.len().min(self.cq.len());
        for (slot, c) in out.iter_mut().zip(self.cq.drain(..n)) {
            *slot = c;
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::RemoteAddr;
    use std::net::Ipv4Addr;

    fn cfg(role: Role, buf_len: usize) -> TcpConfig {
        TcpConfig {
            role,
            qps: 1,
            buf_len,
            sq_depth: 64,
            rq_depth: 64,
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            connect_timeout: Duration::from_secs(5),
            socket_buffer: None,
            spin_polls: DEFAULT_SPIN_POLLS,
        }
    }

    /// A connected pair of endpoints in one process.
    fn pair(buf_len: usize) -> (TcpEndpoint, TcpEndpoint) {
        let mut server = TcpEndpoint::new(cfg(Role::Server, buf_len)).unwrap();
        let mut client = TcpEndpoint::new(cfg(Role::Client, buf_len)).unwrap();
        let (si, ci) = (server.local_info(), client.local_info());
        client.connect(&si).unwrap();
        server.connect(&ci).unwrap();
        (server, client)
    }

    /// Polls both endpoints until `a` yields `want` completions; returns them.
    fn drive(a: &mut TcpEndpoint, b: &mut TcpEndpoint, want: usize) -> Vec<Completion> {
        let mut got = Vec::new();
        let mut out = [Completion::EMPTY; 16];
        let deadline = Instant::now() + Duration::from_secs(10);
        while got.len() < want {
            let n = a.poll_cq(&mut out).unwrap();
            got.extend_from_slice(&out[..n]);
            let _ = b.poll_cq(&mut out).unwrap();
            assert!(
                Instant::now() < deadline,
                "timed out with {} of {want} completions",
                got.len()
            );
        }
        got
    }

    fn write_req(
        ep: &TcpEndpoint,
        peer: &TcpEndpoint,
        wr_id: u64,
        off: u64,
        len: u32,
        op: SendOp,
    ) -> SendRequest {
        let _ = ep;
        let p = &peer.local_info().qps[0];
        SendRequest {
            wr_id,
            op,
            offset: off,
            len,
            remote: Some(RemoteAddr {
                addr: p.vaddr + off,
                rkey: p.rkey,
            }),
            signaled: true,
            inline: false,
        }
    }

    #[test]
    fn header_round_trips_and_rejects_garbage() {
        let h = Header {
            op: FrameOp::WriteImm,
            flags: FLAG_ACK_REQ,
            len: 70000,
            offset: 0x1234_5678_9abc,
            imm: 0xdead_beef,
        };
        assert_eq!(Header::parse(&h.emit()), Some(h));
        let mut bad = h.emit();
        bad[0] = 9;
        assert_eq!(Header::parse(&bad), None);
        let mut bad = h.emit();
        bad[1] = 2;
        assert_eq!(Header::parse(&bad), None);
        let mut bad = h.emit();
        bad[2] = 1;
        assert_eq!(Header::parse(&bad), None);
    }

    #[test]
    fn write_lands_at_the_offset_in_the_peer_buffer() {
        let (mut server, mut client) = pair(1 << 20);
        let len = 300_000usize;
        for (i, b) in client.buffer_mut(0)[..len].iter_mut().enumerate() {
            *b = (i % 251) as u8;
        }
        // Move the data from client offset 0 to server offset 1000 (the remote offset names the target).
        let mut wr = write_req(&client, &server, 7, 0, len as u32, SendOp::Write);
        wr.remote.as_mut().unwrap().addr += 1000;
        client.post_send(0, &wr).unwrap();
        let c = drive(&mut client, &mut server, 1);
        assert_eq!(
            (c[0].wr_id, c[0].op, c[0].byte_len),
            (7, CompletionOp::Write, len as u32)
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        while server.peek(0, 1000 + len - 1) != ((len - 1) % 251) as u8 {
            server.poll_cq(&mut [Completion::EMPTY; 4]).unwrap();
            assert!(Instant::now() < deadline);
        }
        let buf = server.buffer(0);
        assert!(buf[..1000].iter().all(|&b| b == 0));
        assert!((0..len).all(|i| buf[1000 + i] == (i % 251) as u8));
    }

    #[test]
    fn send_consumes_posted_receives_in_order() {
        let (mut server, mut client) = pair(4096);
        server
            .post_recv(
                0,
                &RecvRequest {
                    wr_id: 1,
                    offset: 0,
                    len: 100,
                },
            )
            .unwrap();
        server
            .post_recv(
                0,
                &RecvRequest {
                    wr_id: 2,
                    offset: 200,
                    len: 100,
                },
            )
            .unwrap();
        client.buffer_mut(0)[..10].copy_from_slice(b"0123456789");
        for (id, op) in [(10, SendOp::Send), (11, SendOp::SendWithImm(42))] {
            let wr = SendRequest {
                wr_id: id,
                op,
                offset: 0,
                len: 10,
                remote: None,
                signaled: true,
                inline: false,
            };
            client.post_send(0, &wr).unwrap();
        }
        let rc = drive(&mut server, &mut client, 2);
        assert_eq!(
            (rc[0].wr_id, rc[0].op, rc[0].byte_len, rc[0].imm),
            (1, CompletionOp::Recv, 10, None)
        );
        assert_eq!((rc[1].wr_id, rc[1].imm), (2, Some(42)));
        assert_eq!(&server.buffer(0)[..10], b"0123456789");
        assert_eq!(&server.buffer(0)[200..210], b"0123456789");
    }

    #[test]
    fn write_with_immediate_places_data_and_consumes_a_receive() {
        let (mut server, mut client) = pair(8192);
        server
            .post_recv(
                0,
                &RecvRequest {
                    wr_id: 77,
                    offset: 0,
                    len: 0,
                },
            )
            .unwrap();
        client.buffer_mut(0)[..3].copy_from_slice(b"imm");
        let mut wr = write_req(&client, &server, 1, 0, 3, SendOp::WriteWithImm(0xabcd));
        wr.remote.as_mut().unwrap().addr += 4096;
        client.post_send(0, &wr).unwrap();
        let c = drive(&mut server, &mut client, 1);
        assert_eq!(
            (c[0].wr_id, c[0].op, c[0].byte_len, c[0].imm),
            (77, CompletionOp::RecvWithImm, 3, Some(0xabcd))
        );
        assert_eq!(&server.buffer(0)[4096..4099], b"imm");
    }

    #[test]
    fn send_waits_for_a_receive_to_be_posted() {
        let (mut server, mut client) = pair(4096);
        let wr = SendRequest {
            wr_id: 5,
            op: SendOp::Send,
            offset: 0,
            len: 64,
            remote: None,
            signaled: true,
            inline: false,
        };
        client.post_send(0, &wr).unwrap();
        let mut out = [Completion::EMPTY; 4];
        for _ in 0..100 {
            // Neither side completes: the SEND waits in the socket for a receive, unacknowledged.
            assert_eq!(server.poll_cq(&mut out).unwrap(), 0);
            assert_eq!(client.poll_cq(&mut out).unwrap(), 0);
        }
        server
            .post_recv(
                0,
                &RecvRequest {
                    wr_id: 9,
                    offset: 0,
                    len: 64,
                },
            )
            .unwrap();
        let c = drive(&mut server, &mut client, 1);
        assert_eq!((c[0].wr_id, c[0].byte_len), (9, 64));
        let c = drive(&mut client, &mut server, 1);
        assert_eq!(
            (c[0].wr_id, c[0].op),
            (5, CompletionOp::Send),
            "acknowledged once received"
        );
    }

    #[test]
    fn a_write_completes_only_once_the_peer_has_applied_it() {
        let (mut server, mut client) = pair(1 << 16);
        client.buffer_mut(0)[..100].fill(7);
        let wr = write_req(&client, &server, 1, 0, 100, SendOp::Write);
        client.post_send(0, &wr).unwrap();
        let mut out = [Completion::EMPTY; 4];
        for _ in 0..50 {
            assert_eq!(
                client.poll_cq(&mut out).unwrap(),
                0,
                "no ack while the peer does not poll"
            );
        }
        let c = drive(&mut client, &mut server, 1);
        assert_eq!((c[0].wr_id, c[0].op), (1, CompletionOp::Write));
        assert!(server.buffer(0)[..100].iter().all(|&b| b == 7));
    }

    #[test]
    fn read_fetches_the_peer_buffer() {
        let (mut server, mut client) = pair(1 << 20);
        for (i, b) in server.buffer_mut(0).iter_mut().enumerate() {
            *b = (i % 253) as u8;
        }
        let mut wr = write_req(&client, &server, 3, 4096, 500_000, SendOp::Read);
        wr.remote.as_mut().unwrap().addr -= 4096; // read from the peer's offset 0 into local offset 4096
        client.post_send(0, &wr).unwrap();
        let c = drive(&mut client, &mut server, 1);
        assert_eq!(
            (c[0].wr_id, c[0].op, c[0].byte_len),
            (3, CompletionOp::Read, 500_000)
        );
        let buf = client.buffer(0);
        assert!((0..500_000).all(|i| buf[4096 + i] == (i % 253) as u8));
    }

    #[test]
    fn many_small_writes_in_flight_all_complete() {
        let (mut server, mut client) = pair(4096);
        let mut done = 0;
        let mut posted = 0u64;
        let mut out = [Completion::EMPTY; 16];
        while done < 10_000 {
            while posted < 10_000 {
                let mut wr = write_req(&client, &server, posted, 0, 2, SendOp::Write);
                wr.signaled = posted % 8 == 7;
                match client.post_send(0, &wr) {
                    Ok(()) => posted += 1,
                    Err(Error::QueueFull) => break,
                    Err(e) => panic!("{e}"),
                }
            }
            done += 8 * client.poll_cq(&mut out).unwrap();
            server.poll_cq(&mut out).unwrap();
        }
        assert_eq!(done, 10_000);
    }

    #[test]
    fn out_of_bounds_requests_are_refused_locally() {
        let (server, mut client) = pair(4096);
        let wr = write_req(&client, &server, 1, 0, 4096, SendOp::Write);
        let mut far = wr;
        far.remote.as_mut().unwrap().addr += 1;
        assert!(matches!(
            client.post_send(0, &far),
            Err(Error::InvalidRequest(_))
        ));
        let mut big = wr;
        big.offset = 1;
        assert!(matches!(
            client.post_send(0, &big),
            Err(Error::InvalidRequest(_))
        ));
    }

    #[test]
    fn a_closed_peer_fails_pending_work_and_refuses_new_work() {
        // Pending: a WRITE waits for an acknowledgement that will never come.
        let (server, mut client) = pair(4096);
        let wr = write_req(&client, &server, 1, 0, 64, SendOp::Write);
        client.post_send(0, &wr).unwrap();
        drop(server);
        let mut out = [Completion::EMPTY; 4];
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match client.poll_cq(&mut out) {
                Err(Error::Connection(m)) => {
                    assert!(m.contains("closed"), "{m}");
                    break;
                }
                Err(e) => panic!("unexpected {e}"),
                Ok(_) => assert!(Instant::now() < deadline, "no error after the peer closed"),
            }
        }
        // Idle: the close is quiet until new work is posted.
        let (server, mut client) = pair(4096);
        let wr = write_req(&client, &server, 2, 0, 64, SendOp::Write);
        drop(server);
        let deadline = Instant::now() + Duration::from_millis(300);
        while Instant::now() < deadline {
            assert_eq!(client.poll_cq(&mut out).unwrap(), 0);
        }
        assert!(matches!(
            client.post_send(0, &wr),
            Err(Error::Connection(_))
        ));
    }

    #[test]
    fn a_stranger_on_the_data_port_is_rejected() {
        let mut server = TcpEndpoint::new(cfg(Role::Server, 4096)).unwrap();
        let addr: SocketAddr = server.local_info().addr.unwrap().parse().unwrap();
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(b"GET / HTTP/1.0\r\n").unwrap();
        let client = TcpEndpoint::new(cfg(Role::Client, 4096)).unwrap();
        match server.connect(&client.local_info()) {
            Err(Error::Connection(m)) => assert!(m.contains("not from our roceperf peer"), "{m}"),
            other => panic!("expected a rejection, got {:?}", other.err()),
        }
    }
}
