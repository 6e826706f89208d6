//! The Communication Manager of the soft transport, sans-IO: REQ / REP / RTU to connect, REJ with a
//! reason, DREQ / DREP to disconnect, as MADs on QP1, the way rdma_cm and Linux's `ib_cm` speak it.
//!
//! Like the RC engine it reads no socket and no clock: [`CmAgent::handle`] takes `(now, source,
//! MAD bytes)`, the commands ([`CmAgent::listen`], [`connect`](CmAgent::connect),
//! [`accept`](CmAgent::accept), [`reject`](CmAgent::reject), [`disconnect`](CmAgent::disconnect))
//! queue messages, and the caller drains [`CmAgent::poll_transmit`] (MADs to frame and send),
//! [`CmAgent::poll_event`] (what the application must know) and fires
//! [`CmAgent::handle_timeout`] at [`CmAgent::poll_timeout`]. A REQ, REP or DREQ that is not answered
//! within [`CmConfig::retransmit`] is sent again, up to [`CmConfig::max_retries`] times (an MRA buys
//! the time it asks for); then the connection times out and the peer gets a REJ "timeout", as
//! `ib_cm` does. Duplicates are answered as the spec says: a REQ again gets the REP again, a REP
//! the RTU, a DREQ the DREP, and a REQ for a service nobody listens on a REJ "invalid service ID".
//! UD services are resolved instead (SIDR_REQ → SIDR_REP, in [`sidr`]).

mod conn;
mod sidr;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use super::rc::Instant;
use crate::transport::RoceMtu;
use crate::transport::rng::SplitMix64;
use crate::wire::cm::{
    Answered, CmMessage, CmPath, CmaHeader, DrepRepr, RDMA_PS_TCP, RejRepr, RejectReason, ReqRepr,
    SidrStatus, service_id, service_port,
};
use conn::{Conn, State};

/// The CM response timeout we announce (4.096 µs × 2^20 ≈ 4.3 s, rdma_cm's `CMA_CM_RESPONSE_TIMEOUT`).
const CM_RESPONSE_TIMEOUT: u8 = 20;
/// How often we announce we resend (rdma_cm's `CMA_MAX_CM_RETRIES`).
const ANNOUNCED_CM_RETRIES: u8 = 15;
/// Payload of the CMA header's REQ private data that the application may use.
pub(crate) const CM_PRIVATE_DATA_LEN: usize = 92 - crate::wire::cm::CMA_HEADER_LEN;

/// How the agent identifies itself and how patient it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CmConfig {
    /// Our channel adapter GUID (the EUI-64 of our MAC, as rxe's node GUID).
    pub(crate) guid: u64,
    /// How long to wait for an answer before resending.
    pub retransmit: Duration,
    /// How often to resend before giving up.
    pub(crate) max_retries: u8,
    /// Seeds the communication IDs and transaction IDs (distinct per run, so a kernel peer's
    /// duplicate and stale-connection checks never mistake a new connection for an old one).
    pub seed: u64,
}

impl Default for CmConfig {
    fn default() -> Self {
        CmConfig {
            guid: 0,
            retransmit: Duration::from_millis(500),
            max_retries: 8,
            seed: 0,
        }
    }
}

/// A connection of the agent: our communication ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct ConnId(pub u32);

/// What one side's queue pair brings to a connection (sent in a REQ or REP, read from one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QpOffer {
    /// The queue pair's number.
    pub qpn: u32,
    /// The REQ's or REP's StartingPSN: the first PSN this queue pair *expects to receive*, which the
    /// other side then sends from (how Linux's `ib_cm` reads it: the active side's `rq_psn` and the
    /// passive side's `sq_psn` are the REQ's).
    pub psn: u32,
    /// Path MTU (a REQ proposes it; the REP side takes the REQ's).
    pub mtu: RoceMtu,
    /// RDMA READs / atomics it accepts at once as responder.
    pub responder_resources: u8,
    /// RDMA READs / atomics it issues at once.
    pub initiator_depth: u8,
    /// Transport retries the peer should use towards it (3 bits).
    pub retry_count: u8,
    /// RNR retries the peer should use towards it (3 bits; 7 = forever).
    pub rnr_retry_count: u8,
    /// Local ACK timeout (5 bits: 4.096 µs × 2^n).
    pub ack_timeout: u8,
}

/// What the application learns from the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CmEvent {
    /// A REQ for a service we listen on: [`CmAgent::accept`] or [`CmAgent::reject`] it.
    Request {
        /// The new connection.
        conn: ConnId,
        /// Where the REQ came from.
        from: IpAddr,
        /// The port (service ID) asked for.
        port: u16,
        /// rdma_cm's addressing, when the REQ carries a valid header.
        cma: Option<CmaHeader>,
        /// The peer's queue pair as its REQ describes it.
        peer: QpOffer,
        /// Private data after the CMA header.
        private_data: Vec<u8>,
    },
    /// The connection is up: active side, REP received and RTU sent; passive side, RTU received.
    Established {
        /// The connection.
        conn: ConnId,
        /// The peer's queue pair (from its REP, or its REQ).
        peer: QpOffer,
    },
    /// The peer rejected our REQ or REP.
    Rejected {
        /// The connection.
        conn: ConnId,
        /// Why.
        reason: RejectReason,
        /// The peer's private data (`rdma_reject`'s).
        private_data: Vec<u8>,
    },
    /// Nobody answered our REQ, REP or DREQ, however often we sent it.
    TimedOut {
        /// The connection.
        conn: ConnId,
        /// The message that went unanswered.
        unanswered: &'static str,
        /// How many times it was sent.
        sent: u32,
    },
    /// The connection is down (DREQ answered, or received).
    Disconnected {
        /// The connection.
        conn: ConnId,
    },
    /// A SIDR_REQ for a UD port we listen on: [`CmAgent::answer_sidr`] or
    /// [`CmAgent::refuse_sidr`] it.
    SidrRequest {
        /// The resolution.
        conn: ConnId,
        /// Where the SIDR_REQ came from.
        from: IpAddr,
        /// The port (service ID) asked for.
        port: u16,
        /// rdma_cm's addressing, when the SIDR_REQ carries a valid header.
        cma: Option<CmaHeader>,
        /// Private data after the CMA header.
        private_data: Vec<u8>,
    },
    /// Our SIDR_REQ was answered: the UD service's queue pair.
    Resolved {
        /// The resolution.
        conn: ConnId,
        /// The server's address.
        from: IpAddr,
        /// The server's QPN.
        qpn: u32,
        /// The Q_Key its datagrams must carry.
        qkey: u32,
        /// The SIDR_REP's private data.
        private_data: Vec<u8>,
    },
    /// Our SIDR_REQ was answered with a status other than success.
    Unresolved {
        /// The resolution.
        conn: ConnId,
        /// The SIDR_REP's status.
        status: SidrStatus,
    },
}

/// What the agent counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CmCounters {
    /// MADs received and parsed.
    pub rx: u64,
    /// MADs sent.
    pub tx: u64,
    /// Messages sent again on a timeout.
    pub(crate) retransmits: u64,
    /// MADs dropped: not a CM message, or for no connection of ours.
    pub dropped: u64,
}

/// The agent: every connection of one endpoint, and its listening ports.
#[derive(Debug)]
pub(crate) struct CmAgent {
    cfg: CmConfig,
    rng: SplitMix64,
    listening: Vec<u16>,
    conns: Vec<Conn>,
    outbox: VecDeque<(IpAddr, u64, CmMessage)>,
    events: VecDeque<CmEvent>,
    tid_hi: u64,
    counters: CmCounters,
    sidr: sidr::Sidr,
}

impl CmAgent {
    /// An agent with no connection and no listener.
    pub(crate) fn new(cfg: CmConfig) -> CmAgent {
        let mut rng = SplitMix64::new(cfg.seed);
        let tid_hi = (rng.next_u64() & 0xffff_ffff) << 32;
        CmAgent {
            cfg,
            rng,
            listening: Vec::new(),
            conns: Vec::new(),
            outbox: VecDeque::new(),
            events: VecDeque::new(),
            tid_hi,
            counters: CmCounters::default(),
            sidr: sidr::Sidr::default(),
        }
    }

    /// The peer of connection `conn`.
    pub(crate) fn peer_ip(&self, conn: ConnId) -> Option<IpAddr> {
        self.conns
            .iter()
            .find(|c| c.id == conn.0)
            .map(|c| c.peer_ip)
    }

    /// Accepts REQs for `port` from now on (rdma_cm's `rdma_listen` on a TCP port space ID).
    pub(crate) fn listen(&mut self, port: u16) {
        if !self.listening.contains(&port) {
            self.listening.push(port);
        }
    }

    /// Sends a REQ for `offer`'s queue pair from `local` (our address; its port goes in the CMA
    /// header) to the listener at `peer`, with `private_data` after the CMA header (at most
    /// [`CM_PRIVATE_DATA_LEN`] bytes; more is cut).
    pub(crate) fn connect(
        &mut self,
        now: Instant,
        local: SocketAddr,
        peer: SocketAddr,
        offer: &QpOffer,
        private_data: &[u8],
    ) -> ConnId {
        let id = self.new_comm_id();
        let path = CmPath {
            local_lid: 0xffff,
            remote_lid: 0xffff,
            local_gid: crate::wire::Gid::from_ip(local.ip()),
            remote_gid: crate::wire::Gid::from_ip(peer.ip()),
            hop_limit: 64,
            local_ack_timeout: offer.ack_timeout,
            ..CmPath::default()
        };
        let mut req = ReqRepr {
            local_comm_id: id,
            service_id: service_id(RDMA_PS_TCP, peer.port()),
            local_ca_guid: self.cfg.guid,
            local_qkey: 0,
            local_qpn: offer.qpn,
            responder_resources: offer.responder_resources,
            local_eecn: 0,
            initiator_depth: offer.initiator_depth,
            remote_eecn: 0,
            remote_cm_response_timeout: CM_RESPONSE_TIMEOUT,
            transport_service_type: crate::wire::cm::service_type::RC,
            end_to_end_flow_control: false,
            starting_psn: offer.psn,
            local_cm_response_timeout: CM_RESPONSE_TIMEOUT,
            retry_count: offer.retry_count.min(7),
            partition_key: 0xffff,
            path_mtu: offer.mtu.ib_enum(),
            rdc_exists: false,
            rnr_retry_count: offer.rnr_retry_count.min(7),
            max_cm_retries: ANNOUNCED_CM_RETRIES,
            srq: false,
            extended_transport_type: 0,
            primary: path,
            alternate: CmPath::default(),
            sap_supported: false,
            private_data: [0; 92],
        };
        CmaHeader {
            src: local,
            dst: peer.ip(),
        }
        .emit(&mut req.private_data);
        let at = crate::wire::cm::CMA_HEADER_LEN;
        let n = private_data.len().min(CM_PRIVATE_DATA_LEN);
        req.private_data[at..at + n].copy_from_slice(&private_data[..n]);
        let tid = self.tid_hi | u64::from(id);
        let mut c = Conn::new(id, peer.ip(), tid, State::ReqSent);
        c.offer = Some(*offer);
        self.send_and_wait(now, &mut c, CmMessage::Req(Box::new(req)));
        self.conns.push(c);
        ConnId(id)
    }

    /// Accepts a [`CmEvent::Request`] with our queue pair: sends the REP (our responder resources
    /// and initiator depth capped by what the REQ asked). Established once the RTU arrives.
    pub(crate) fn accept(
        &mut self,
        now: Instant,
        conn: ConnId,
        offer: &QpOffer,
    ) -> Result<(), CmError> {
        let guid = self.cfg.guid;
        let i = self.index(conn, "accept", &[State::ReqRcvd])?;
        let mut c = self.conns.swap_remove(i);
        let rep = c.rep(offer, guid);
        c.offer = Some(*offer);
        c.state = State::RepSent;
        self.send_and_wait(now, &mut c, CmMessage::Rep(Box::new(rep)));
        self.conns.push(c);
        Ok(())
    }

    /// Rejects a [`CmEvent::Request`] with `reason` (rdma_cm's `rdma_reject` says "consumer reject").
    pub(crate) fn reject(&mut self, conn: ConnId, reason: RejectReason) -> Result<(), CmError> {
        let i = self.index(conn, "reject", &[State::ReqRcvd])?;
        let c = &mut self.conns[i];
        c.state = State::Closed;
        let rej = RejRepr::new(c.id, c.remote_id, Answered::Req, reason);
        let (ip, tid) = (c.peer_ip, c.tid);
        self.queue(ip, tid, CmMessage::Rej(Box::new(rej)));
        Ok(())
    }

    /// Sends a DREQ on an established connection; [`CmEvent::Disconnected`] follows the DREP (or
    /// the DREQ's last timeout).
    pub(crate) fn disconnect(&mut self, now: Instant, conn: ConnId) -> Result<(), CmError> {
        let i = self.index(conn, "disconnect", &[State::Established])?;
        let mut c = self.conns.swap_remove(i);
        c.state = State::DreqSent;
        c.tid = self.tid_hi | u64::from(self.rng.next_u64() as u32);
        let dreq = c.dreq();
        self.send_and_wait(now, &mut c, CmMessage::Dreq(dreq));
        self.conns.push(c);
        Ok(())
    }

    /// Takes one received MAD (the UD payload of a QP1 packet) from `from`.
    pub(crate) fn handle(&mut self, now: Instant, from: IpAddr, mad: &[u8]) {
        let Ok((tid, msg)) = CmMessage::parse(mad) else {
            self.counters.dropped += 1;
            return;
        };
        self.counters.rx += 1;
        match msg {
            CmMessage::Req(req) => self.on_req(from, tid, &req),
            CmMessage::Drep(d) => self.on_reply(now, from, d.remote_comm_id, CmMessage::Drep(d)),
            CmMessage::SidrReq(req) => self.on_sidr_req(from, tid, *req),
            CmMessage::SidrRep(rep) => self.on_sidr_rep(from, &rep),
            other => {
                let ours = match &other {
                    CmMessage::Rep(m) => m.remote_comm_id,
                    CmMessage::Rtu(m) => m.remote_comm_id,
                    CmMessage::Rej(m) => m.remote_comm_id,
                    CmMessage::Mra(m) => m.remote_comm_id,
                    CmMessage::Dreq(m) => m.remote_comm_id,
                    CmMessage::Req(_)
                    | CmMessage::Drep(_)
                    | CmMessage::SidrReq(_)
                    | CmMessage::SidrRep(_) => unreachable!("handled above"),
                };
                if let CmMessage::Dreq(d) = &other
                    && self.find(ours, from).is_none()
                {
                    // ib_cm answers a DREQ for a connection it no longer knows, so the peer stops.
                    let drep = DrepRepr::new(d.remote_comm_id, d.local_comm_id);
                    self.queue(from, tid, CmMessage::Drep(drep));
                    return;
                }
                self.on_reply(now, from, ours, other);
            }
        }
    }

    /// The next MAD to send: writes it into `buf` (256 bytes) and returns its destination.
    pub(crate) fn poll_transmit(&mut self, buf: &mut [u8]) -> Option<(IpAddr, usize)> {
        let (ip, tid, msg) = self.outbox.pop_front()?;
        self.counters.tx += 1;
        Some((ip, msg.emit(tid, buf)))
    }

    /// True when a MAD waits to be sent.
    pub(crate) fn wants_transmit(&self) -> bool {
        !self.outbox.is_empty()
    }

    /// The next thing the application must know.
    pub(crate) fn poll_event(&mut self) -> Option<CmEvent> {
        self.events.pop_front()
    }

    /// When [`handle_timeout`](Self::handle_timeout) is next due.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        let conns = self.conns.iter().filter_map(|c| c.deadline).min();
        conns.into_iter().chain(self.sidr.deadline()).min()
    }

    /// Resends what went unanswered, or gives up on it.
    pub(crate) fn handle_timeout(&mut self, now: Instant) {
        self.sidr_timeout(now);
        for i in 0..self.conns.len() {
            let c = &mut self.conns[i];
            if c.deadline.is_none_or(|d| d > now) {
                continue;
            }
            if c.retries < self.cfg.max_retries
                && let Some(m) = c.pending.clone()
            {
                c.retries += 1;
                c.deadline = Some(now.saturating_add(self.cfg.retransmit));
                let (ip, tid) = (c.peer_ip, c.tid);
                self.counters.retransmits += 1;
                self.queue(ip, tid, m);
                continue;
            }
            let unanswered = c.pending.as_ref().map_or("message", CmMessage::name);
            let sent = u32::from(c.retries) + 1;
            let conn = ConnId(c.id);
            c.deadline = None;
            c.pending = None;
            let was = c.state;
            if was == State::DreqSent {
                c.state = State::TimeWait;
                self.events.push_back(CmEvent::Disconnected { conn });
                continue;
            }
            c.state = State::Closed;
            let rej = RejRepr::new(
                c.id,
                c.remote_id,
                if was == State::RepSent {
                    Answered::Rep
                } else {
                    Answered::Other
                },
                RejectReason::Timeout,
            );
            let (ip, tid) = (c.peer_ip, c.tid);
            self.queue(ip, tid, CmMessage::Rej(Box::new(rej)));
            self.events.push_back(CmEvent::TimedOut {
                conn,
                unanswered,
                sent,
            });
        }
    }

    fn on_req(&mut self, from: IpAddr, tid: u64, req: &ReqRepr) {
        if let Some(i) = self
            .conns
            .iter()
            .position(|c| c.remote_id == req.local_comm_id && c.peer_ip == from)
        {
            // A duplicate: our REP was lost (resend it), or we are still deciding (nothing).
            let c = &self.conns[i];
            if c.state == State::RepSent
                && let Some(m) = c.pending.clone()
            {
                let tid = c.tid;
                self.queue(from, tid, m);
            }
            return;
        }
        let refuse = |reason| RejRepr::new(0, req.local_comm_id, Answered::Req, reason);
        let port = service_port(RDMA_PS_TCP, req.service_id);
        let rej = match port {
            Some(p) if self.listening.contains(&p) => None,
            _ => Some(refuse(RejectReason::InvalidServiceId)),
        };
        let rej = rej.or_else(|| {
            (req.transport_service_type != crate::wire::cm::service_type::RC)
                .then(|| refuse(RejectReason::InvalidTransportType))
        });
        let mtu = RoceMtu::from_ib_enum(u32::from(req.path_mtu));
        let rej = rej.or_else(|| mtu.is_none().then(|| refuse(RejectReason::InvalidMtu)));
        if let Some(rej) = rej {
            self.queue(from, tid, CmMessage::Rej(Box::new(rej)));
            return;
        }
        let id = self.new_comm_id();
        let mut c = Conn::new(id, from, tid, State::ReqRcvd);
        c.remote_id = req.local_comm_id;
        let peer = QpOffer {
            qpn: req.local_qpn,
            psn: req.starting_psn,
            mtu: mtu.unwrap_or(RoceMtu::MIN),
            responder_resources: req.responder_resources,
            initiator_depth: req.initiator_depth,
            retry_count: req.retry_count,
            rnr_retry_count: req.rnr_retry_count,
            ack_timeout: req.primary.local_ack_timeout,
        };
        c.peer = Some(peer);
        let cma = CmaHeader::parse(&req.private_data).ok();
        let skip = if cma.is_some() {
            crate::wire::cm::CMA_HEADER_LEN
        } else {
            0
        };
        self.conns.push(c);
        self.events.push_back(CmEvent::Request {
            conn: ConnId(id),
            from,
            port: port.unwrap_or(0),
            cma,
            peer,
            private_data: req.private_data[skip..].to_vec(),
        });
    }

    /// A message for one of our connections (by our communication ID in it).
    fn on_reply(&mut self, now: Instant, from: IpAddr, ours: u32, msg: CmMessage) {
        let Some(i) = self.find(ours, from) else {
            self.counters.dropped += 1;
            return;
        };
        let retransmit = self.cfg.retransmit;
        let (out, event) = self.conns[i].on_message(now, msg, retransmit);
        let (ip, tid) = (self.conns[i].peer_ip, self.conns[i].tid);
        if let Some(m) = out {
            self.queue(ip, tid, m);
        }
        self.events.extend(event);
    }

    fn find(&self, ours: u32, from: IpAddr) -> Option<usize> {
        self.conns
            .iter()
            .position(|c| c.id == ours && c.peer_ip == from)
    }

    fn index(&self, conn: ConnId, what: &'static str, states: &[State]) -> Result<usize, CmError> {
        let i = self
            .conns
            .iter()
            .position(|c| c.id == conn.0)
            .ok_or(CmError::UnknownConnection(conn.0))?;
        let state = self.conns[i].state;
        if states.contains(&state) {
            Ok(i)
        } else {
            Err(CmError::WrongState {
                what,
                state: state.name(),
            })
        }
    }

    fn send_and_wait(&mut self, now: Instant, c: &mut Conn, m: CmMessage) {
        c.pending = Some(m.clone());
        c.retries = 0;
        c.deadline = Some(now.saturating_add(self.cfg.retransmit));
        self.queue(c.peer_ip, c.tid, m);
    }

    fn queue(&mut self, ip: IpAddr, tid: u64, m: CmMessage) {
        self.outbox.push_back((ip, tid, m));
    }

    /// A communication ID no connection of ours uses (never 0: a REJ's "none").
    fn new_comm_id(&mut self) -> u32 {
        loop {
            let id = self.rng.next_u64() as u32;
            if id != 0 && !self.conns.iter().any(|c| c.id == id) && !self.sidr.uses(id) {
                return id;
            }
        }
    }
}

/// A command the agent cannot carry out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CmError {
    /// No connection has this ID.
    #[error("no CM connection with ID {0:#x}")]
    UnknownConnection(u32),
    /// The connection is not in a state where the command applies.
    #[error("cannot {what} a CM connection in state {state}")]
    WrongState {
        /// The command.
        what: &'static str,
        /// The connection's state.
        state: &'static str,
    },
}
