//! [`TcpEndpoint`]: the queue pairs, their connections and the shared completion queue, as an [`Endpoint`].

use super::io::{Link, Poller};
use super::qp::{QpState, closed};
use super::setup::{self, Dial};
use super::{TcpConfig, io_err};
use crate::params::{Role, TransportKind};
use crate::transport::qp_counters::QpCounters;
use crate::transport::{
    Completion, ConnInfo, Endpoint, Error, QpInfo, RecvRequest, Result, SendRequest,
};
use std::collections::VecDeque;
use std::net::{SocketAddr, TcpListener, TcpStream};

/// Bytes one `poll_cq` reads from a socket before it turns to transmitting.
const RX_BUDGET: usize = 4 * 1024 * 1024;

/// One queue pair: its stream state, its connection once made, and its token.
struct Qp {
    state: QpState,
    link: Option<Link>,
    /// Doubles as the PSN in `local_info`; the peer's client greets this connection with it.
    token: u32,
}

/// One side of a TCP baseline test.
pub(crate) struct TcpEndpoint {
    cfg: TcpConfig,
    listener: Option<TcpListener>,
    /// Where the server listens (kept after the listener is closed, for `local_info`).
    listen_addr: Option<SocketAddr>,
    qps: Vec<Qp>,
    cq: VecDeque<Completion>,
    /// Readiness of the connections, when there are several; one connection polls its own socket.
    poller: Option<Poller>,
    /// poll_cq calls in a row that found nothing to do.
    idle: u64,
    /// After this many idle calls, poll_cq sleeps in epoll_wait (at most
    /// [`IDLE_SLEEP_MS`](super::IDLE_SLEEP_MS)) until a socket is ready, instead of spinning.
    block_after: u64,
}

impl TcpEndpoint {
    /// Each connection's retransmissions from `TCP_INFO` (read now: one system call each), in the
    /// per-queue-pair shape the soft transport fills; what TCP cannot count (ECN marks it keeps to
    /// itself, CNPs, DCQCN's rate) is `None`. A connection not made, or a kernel that does not say,
    /// counts 0 (bytes: the segments' count is all an older kernel gives).
    pub(crate) fn qp_counters(&self) -> Vec<QpCounters> {
        self.qps
            .iter()
            .enumerate()
            .map(|(i, q)| {
                let (segments, bytes) = q.link.as_ref().map_or((None, None), Link::retransmissions);
                QpCounters {
                    qp: i as u32,
                    retransmitted_packets: segments.unwrap_or(0),
                    retransmitted_bytes: bytes.unwrap_or(0),
                    ..QpCounters::default()
                }
            })
            .collect()
    }

    /// The congestion control the kernel runs on the data connections (`TCP_CONGESTION` read back
    /// from each: one system call each, at the end of a run), their distinct names joined by `,`;
    /// `None` before any connection is made.
    pub(crate) fn congestion_control(&self) -> Option<String> {
        let mut names: Vec<String> = Vec::new();
        for name in self
            .qps
            .iter()
            .filter_map(|q| q.link.as_ref()?.congestion())
        {
            if !names.contains(&name) {
                names.push(name);
            }
        }
        (!names.is_empty()).then(|| names.join(","))
    }

    /// Registers the buffers and, on the server, opens the listener the client will connect to.
    pub(crate) fn new(cfg: TcpConfig) -> Result<TcpEndpoint> {
        if cfg.qps == 0 || cfg.buf_len == 0 || cfg.sq_depth == 0 {
            return Err(Error::InvalidRequest(
                "a TCP endpoint needs at least one queue pair, a buffer and a send queue".into(),
            ));
        }
        let listener = match cfg.role {
            Role::Server => Some(setup::listen(cfg.bind)?),
            Role::Client => None,
        };
        let qps = (0..cfg.qps)
            .map(|i| {
                let state = QpState::try_new(i, cfg.buf_len, cfg.sq_depth, cfg.rq_depth).map_err(
                    |source| Error::OutOfMemory {
                        what: format!("queue pair {i}'s buffer"),
                        source,
                    },
                )?;
                Ok(Qp {
                    state,
                    link: None,
                    token: setup::token(i),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let cq = VecDeque::with_capacity(cfg.qps * (cfg.sq_depth + cfg.rq_depth) + 16);
        let listen_addr = listener.as_ref().and_then(|l| l.local_addr().ok());
        let poller = match cfg.qps {
            1 => None,
            n => Some(Poller::new(n.min(1024))?),
        };
        Ok(TcpEndpoint {
            block_after: cfg.spin_polls,
            cfg,
            listener,
            listen_addr,
            qps,
            cq,
            poller,
            idle: 0,
        })
    }

    fn dial(cfg: &TcpConfig) -> Dial<'_> {
        Dial {
            timeout: cfg.connect_timeout,
            socket_buffer: cfg.socket_buffer,
            tclass: cfg.tclass,
            priority: cfg.priority,
            congestion: cfg.congestion.as_deref(),
        }
    }

    /// Makes a greeted connection queue pair `i`'s: non-blocking and watched by the poller.
    fn attach(poller: Option<&Poller>, qps: &mut [Qp], i: usize, s: TcpStream) -> Result<()> {
        s.set_read_timeout(None)
            .map_err(io_err("configuring a data connection"))?;
        s.set_nonblocking(true)
            .map_err(io_err("making a data connection non-blocking"))?;
        if let Some(poller) = poller {
            poller.register(&s, i)?;
        }
        qps[i].link = Some(Link::new(s));
        Ok(())
    }

    fn check_connected(&self, qp: usize) -> Result<()> {
        match self.qps.get(qp) {
            None => Err(Error::InvalidRequest(format!(
                "queue pair {qp} does not exist (this endpoint has {})",
                self.qps.len()
            ))),
            Some(q) if q.link.is_none() => Err(Error::InvalidRequest(format!(
                "queue pair {qp} is not connected yet; call connect first"
            ))),
            Some(q) if q.state.peer_closed() => Err(closed(qp)),
            Some(_) => Ok(()),
        }
    }
}

impl Endpoint for TcpEndpoint {
    fn local_info(&self) -> ConnInfo {
        ConnInfo {
            needs_single_datagrams: false,
            connection: Default::default(),
            qkey: None,
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
                    psn: q.token,
                    rkey: q.token ^ 0x5a5a5a,
                    vaddr: q.state.buf().as_ptr() as u64,
                    len: q.state.buf().len() as u64,
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
            q.state.set_peer(p.vaddr, p.len, p.max_rd_atomic as usize);
        }
        // The dial borrows the configuration while the connections are attached to the queue pairs.
        let cfg = self.cfg.clone();
        let dial = Self::dial(&cfg);
        match cfg.role {
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
                let (poller, qps) = (self.poller.as_ref(), &mut self.qps);
                setup::connect_all(addr, &peer.qps, dial, |i, s| {
                    Self::attach(poller, qps, i, s)
                })
            }
            Role::Server => {
                let listener = self
                    .listener
                    .take()
                    .expect("server endpoint has a listener");
                let tokens: Vec<u32> = self.qps.iter().map(|q| q.token).collect();
                let (poller, qps) = (self.poller.as_ref(), &mut self.qps);
                setup::accept_all(listener, &tokens, dial, |i, s| {
                    Self::attach(poller, qps, i, s)
                })
            }
        }
    }

    fn qp_count(&self) -> usize {
        self.qps.len()
    }

    fn buffer(&self, qp: usize) -> &[u8] {
        self.qps[qp].state.buf()
    }

    fn buffer_mut(&mut self, qp: usize) -> &mut [u8] {
        self.qps[qp].state.buf_mut()
    }

    fn peek(&self, qp: usize, offset: usize) -> u8 {
        // Only poll_cq on this thread writes the buffer, so a plain read is exact.
        self.qps[qp].state.buf()[offset]
    }

    fn post_send(&mut self, qp: usize, wr: &SendRequest) -> Result<()> {
        self.check_connected(qp)?;
        // No system call here: poll_cq writes everything posted since its last call in one writev.
        self.qps[qp].state.post_send(wr)
    }

    fn post_recv(&mut self, qp: usize, wr: &RecvRequest) -> Result<()> {
        self.check_connected(qp)?;
        self.qps[qp].state.post_recv(wr)
    }

    fn poll_cq(&mut self, out: &mut [Completion]) -> Result<usize> {
        if self.cq.len() < out.len() {
            // Transmit what was posted since the last call first: a ping-pong's request leaves at once,
            // and a burst of small posts goes out in one writev.
            let mut progress = false;
            for (i, q) in self.qps.iter_mut().enumerate() {
                // Acknowledgements go out with whatever the caller posted since, in the same writev.
                q.state.queue_acks();
                if let Some(link) = &mut q.link
                    && link.writable
                    && q.state.has_tx()
                {
                    progress |= link.flush(&mut q.state, i)?;
                }
            }
            let sleep = self.idle > self.block_after;
            let n = match &mut self.poller {
                Some(poller) => {
                    let events = poller.wait(sleep)?;
                    let n = events.len();
                    for (i, readable, writable) in events {
                        if let Some(link) = &mut self.qps[i].link {
                            link.readable |= readable;
                            link.writable |= writable;
                        }
                    }
                    n
                }
                None => match &mut self.qps[0] {
                    // A ping-pong spins on its socket, as the busy-polling reference does, rather
                    // than ask first and read second (two syscalls on every message's path); a read
                    // that finds nothing costs what the question would.
                    Qp {
                        link: Some(link),
                        state,
                        ..
                    } if !sleep && link.spin_on_socket(state) => {
                        link.readable = true;
                        0
                    }
                    Qp {
                        link: Some(link),
                        state,
                        ..
                    } => usize::from(link.wait_ready(state.has_tx(), sleep)?),
                    _ => 0,
                },
            };
            for (i, q) in self.qps.iter_mut().enumerate() {
                let Some(link) = &mut q.link else {
                    continue;
                };
                if link.readable {
                    progress |= link.receive(&mut q.state, i, &mut self.cq, RX_BUDGET)?;
                }
                if link.writable && q.state.has_tx() {
                    progress |= link.flush(&mut q.state, i)?;
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
