//! `-R` on the soft transport: the CM agent on QP1 (UD SEND ONLY packets with a DETH holding the GSI
//! Q_Key, as rxe sends and expects them), its framing, and queue pairs connected from what the CM
//! agreed ([`CmEndpoint`]). UD queue pairs resolve the peer's instead ([`ud`]).

mod ud;

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};

use super::SoftEndpoint;
use crate::params::{ConnType, TransportKind};
use crate::transport::cm::{CmEndpoint, CmEvent, CmPeer, CmQpParams};
use crate::transport::soft::cm::{self as agent, CmAgent, CmConfig, ConnId, QpOffer};
use crate::transport::soft::config::SoftError;
use crate::transport::soft::egress::{self, TxCache};
use crate::transport::soft::io::device::Device;
use crate::transport::soft::io::io_error;
use crate::transport::soft::path::{Path, path_to};
use crate::transport::soft::rc::Instant;
use crate::transport::{ConnInfo, Error, QpInfo, Result, RoceMtu, rng};
use crate::wire::cm::RejectReason;
use crate::wire::mad::MAD_LEN;
use crate::wire::{BthRepr, DethRepr, IbRepr, Opcode};

/// QP1: the General Services Interface, where CM MADs go.
pub(super) const GSI_QPN: u32 = 1;
/// The P_Key every soft packet carries (the default partition).
const DEFAULT_PKEY: u16 = 0xffff;

/// The CM side of an endpoint: the agent, which queue pair each connection is for, and the
/// framing towards each peer.
pub(super) struct CmSide {
    agent: CmAgent,
    /// The queue pair of each connection we started or accepted, and the PSN it expects first.
    qps: Vec<(ConnId, usize, u32)>,
    /// Requests not yet accepted: the REQ's queue pair and sender.
    requests: Vec<(ConnId, QpOffer, IpAddr)>,
    /// How MADs to each peer are framed.
    paths: Vec<(IpAddr, Path)>,
    /// Events for the application, in order.
    events: VecDeque<CmEvent>,
    /// PSN of our next UD packet (unchecked by UD receivers; counted for captures).
    psn: u32,
    /// The port our REQs name as theirs in the CMA header.
    src_port: u16,
    /// SIDR requests not yet answered.
    sidr: Vec<ud::SidrRequest>,
}

/// The UD payload (a MAD) of a QP1 packet (BTH..pad) for us, or `None` when it is not one.
#[inline]
pub(super) fn gsi_mad(ib: &[u8]) -> Option<&[u8]> {
    let (repr, payload) = IbRepr::parse(ib).ok()?;
    let deth = repr.deth?;
    (repr.bth.opcode == Opcode::UD_SEND_ONLY
        && repr.bth.dest_qp == GSI_QPN
        && deth.qkey == DethRepr::GSI_QKEY
        && payload.len() >= MAD_LEN)
        .then(|| &payload[..MAD_LEN])
}

/// True when a packet (BTH..pad) is addressed to QP1.
#[inline]
pub(super) fn is_gsi(ib: &[u8]) -> bool {
    ib.len() >= 8 && ib[5..8] == [0, 0, GSI_QPN as u8]
}

/// Writes a UD SEND ONLY from QP1 to QP1 carrying `mad` into `buf`; returns its length (BTH..MAD).
fn write_gsi_packet(buf: &mut [u8], psn: u32, mad: &[u8]) -> usize {
    let mut bth = BthRepr::new(Opcode::UD_SEND_ONLY, GSI_QPN, psn & 0xff_ffff);
    bth.pkey = DEFAULT_PKEY;
    let mut ib = IbRepr::new(bth);
    ib.deth = Some(DethRepr {
        qkey: DethRepr::GSI_QKEY,
        src_qp: GSI_QPN,
    });
    let at = ib.header_len();
    ib.emit(buf);
    buf[at..at + mad.len()].copy_from_slice(mad);
    at + mad.len()
}

impl SoftEndpoint {
    /// The address our CM messages come from: the interface's IP and the CM side's source port.
    fn cm_local(&mut self) -> Result<SocketAddr> {
        let Some(ip) = self.rx.me.ip else {
            return Err(Error::InvalidRequest(
                "-R needs RoCE v2: the CM addresses the peer by IP address".into(),
            ));
        };
        Ok(SocketAddr::new(ip, self.cm_side().src_port))
    }

    /// The CM side, created on first use with a GUID from our MAC (as rxe's node GUID) or random.
    fn cm_side(&mut self) -> &mut CmSide {
        if self.rx.cm.is_none() {
            let seed = rng::mix(rng::run_seed() ^ u64::from(self.slots[0].qpn));
            let guid = match self.dev.mac {
                Some(m) if !m.is_zero() => {
                    let b = m.0;
                    u64::from_be_bytes([b[0] ^ 2, b[1], b[2], 0xff, 0xfe, b[3], b[4], b[5]])
                }
                _ => seed | 1,
            };
            self.rx.cm = Some(Box::new(CmSide {
                agent: CmAgent::new(CmConfig {
                    guid,
                    seed,
                    ..CmConfig::default()
                }),
                qps: Vec::new(),
                requests: Vec::new(),
                paths: Vec::new(),
                events: VecDeque::new(),
                psn: seed as u32 & 0xff_ffff,
                src_port: 32768 + (seed >> 40) as u16 % 28000,
                sidr: Vec::new(),
            }));
            // The CM's turn is the general poll's.
            self.refresh_simple();
        }
        self.rx.cm.as_deref_mut().expect("just made")
    }

    /// The CM's turn in a poll: fire its timer, turn its events into the application's (connecting
    /// the queue pairs they agree on), send its MADs.
    pub(super) fn cm_turn(&mut self, now: Instant) -> Result<()> {
        let Some(mut side) = self.rx.cm.take() else {
            return Ok(());
        };
        let out = self.cm_progress(now, &mut side);
        self.rx.cm = Some(side);
        out
    }

    fn cm_progress(&mut self, now: Instant, side: &mut CmSide) -> Result<()> {
        if side.agent.poll_timeout().is_some_and(|t| t <= now) {
            side.agent.handle_timeout(now);
        }
        while let Some(e) = side.agent.poll_event() {
            let find = |c: ConnId| {
                side.qps
                    .iter()
                    .find(|(id, ..)| *id == c)
                    .map(|&(_, q, r)| (q, r))
            };
            let qp_of = |c: ConnId| find(c).map(|(q, _)| q);
            // The active side learns its send PSN from the REP.
            let mut send_psn = None;
            let event = match e {
                agent::CmEvent::Request {
                    conn,
                    from,
                    peer,
                    private_data,
                    ..
                } => {
                    side.requests.push((conn, peer, from));
                    Some(CmEvent::Request {
                        req: conn.0,
                        from,
                        peer_qpn: peer.qpn,
                        private_data,
                    })
                }
                agent::CmEvent::Established { conn, peer } => find(conn).map(|(qp, recv)| {
                    let ip = side
                        .agent
                        .peer_ip(conn)
                        .unwrap_or(IpAddr::from([0, 0, 0, 0]));
                    send_psn = Some(peer.psn);
                    CmEvent::Established {
                        qp,
                        peer: cm_peer(ip, &peer, recv),
                    }
                }),
                agent::CmEvent::Rejected { conn, reason, .. } => {
                    qp_of(conn).map(|qp| CmEvent::Rejected { qp, reason })
                }
                agent::CmEvent::TimedOut {
                    conn,
                    unanswered,
                    sent,
                } => qp_of(conn).map(|qp| CmEvent::Unanswered {
                    qp,
                    detail: format!("{unanswered} sent {sent} times, never answered"),
                }),
                agent::CmEvent::Disconnected { conn } => {
                    qp_of(conn).map(|qp| CmEvent::Disconnected { qp })
                }
                e @ (agent::CmEvent::SidrRequest { .. }
                | agent::CmEvent::Resolved { .. }
                | agent::CmEvent::Unresolved { .. }) => self.sidr_event(side, e)?,
            };
            // The active side connects its queue pair as soon as the REP has told it the peer's.
            if let (Some(CmEvent::Established { qp, peer }), Some(send)) = (&event, send_psn)
                && self.slots[*qp].qp.is_none()
            {
                self.connect_from_cm(*qp, peer, send)?;
            }
            side.events.extend(event);
        }
        let mut mad = [0u8; MAD_LEN];
        while side.agent.wants_transmit() {
            if self.nic.tx_full() {
                self.nic.flush(now).map_err(io_error)?;
                if self.nic.tx_full() {
                    break; // the kernel takes no more now; the MADs wait for the next turn
                }
            }
            let Some((ip, len)) = side.agent.poll_transmit(&mut mad) else {
                break;
            };
            let path = self.gsi_path(side, ip)?;
            let psn = side.psn;
            side.psn = side.psn.wrapping_add(1);
            self.nic.tx_push(now, path.addr(), |b| {
                egress::frame(&path, &mut TxCache::new(), b, |ib| {
                    Some(write_gsi_packet(ib, psn, &mad[..len]))
                })
            });
            self.counters.tx_packets += 1;
        }
        Ok(())
    }

    /// How to frame QP1 packets to `ip` (decided once per peer, as for a queue pair).
    fn gsi_path(&self, side: &mut CmSide, ip: IpAddr) -> Result<Path> {
        if let Some((_, p)) = side.paths.iter().find(|(a, _)| *a == ip) {
            return Ok(*p);
        }
        let peer = self.cm_conn_info(ip, &[]);
        let dev = &self.dev;
        let path = path_to(&self.local_end(), &peer, (GSI_QPN, GSI_QPN), 0, |l, p| {
            crate::transport::soft::neighbour::resolve(dev, l, p)
        })
        .map_err(SoftError::from)?;
        side.paths.push((ip, path));
        Ok(path)
    }

    /// The peer at `ip` as [`path_to`] and `connect` take it: its RoCE v2 address on our UDP port.
    fn cm_conn_info(&self, ip: IpAddr, qps: &[QpInfo]) -> ConnInfo {
        ConnInfo {
            transport: TransportKind::Soft,
            gid: crate::wire::Gid::from_ip(ip),
            gid_index: None,
            mac: None,
            addr: Some(SocketAddr::new(ip, self.cfg.udp_port).to_string()),
            mtu: self.mtu.bytes(),
            qps: qps.to_vec(),
            needs_single_datagrams: false,
            connection: self.cfg.connection,
            qkey: None,
        }
    }

    /// Connects queue pair `qp` to the peer the CM described, sending from `send_psn`.
    ///
    /// A REQ's or REP's StartingPSN is the PSN its *sender expects to receive* (Linux's `ib_cm`:
    /// the active side's `rq_psn` and the passive side's `sq_psn` are the REQ's): so we offer the
    /// PSN we expect, the peer's offer is the PSN we send from, and `peer.psn` (what it sends from)
    /// is our own offer.
    fn connect_from_cm(&mut self, qp: usize, peer: &CmPeer, send_psn: u32) -> Result<()> {
        let mtu = RoceMtu::at_most(peer.mtu.min(self.mtu.bytes()));
        self.mtu = mtu;
        self.slots[qp].psn = send_psn;
        let remote = QpInfo {
            qpn: peer.qpn,
            psn: peer.psn,
            rkey: 0,
            vaddr: 0,
            len: 0,
            max_rd_atomic: u32::from(peer.responder_resources),
        };
        let info = self.cm_conn_info(peer.ip, std::slice::from_ref(&remote));
        self.connect_slot(qp, &info, &remote, mtu)
    }

    /// What queue pair `qp` offers the CM.
    fn offer(&self, qp: usize, p: &CmQpParams, mtu: RoceMtu) -> Result<QpOffer> {
        let s = self.slots.get(qp).ok_or_else(|| {
            Error::InvalidRequest(format!("queue pair {qp} of {}", self.slots.len()))
        })?;
        Ok(QpOffer {
            qpn: s.qpn,
            psn: s.psn,
            mtu,
            responder_resources: p.responder_resources,
            initiator_depth: p.initiator_depth,
            retry_count: p.retry_count,
            rnr_retry_count: p.rnr_retry_count,
            ack_timeout: p.ack_timeout,
        })
    }
}

/// The peer as the application sees it: its QPN, and `sends_from`, the PSN it sends from (the one
/// we offered; see [`SoftEndpoint::connect_from_cm`]).
fn cm_peer(ip: IpAddr, p: &QpOffer, sends_from: u32) -> CmPeer {
    CmPeer {
        ip,
        qpn: p.qpn,
        psn: sends_from,
        mtu: p.mtu.bytes(),
        responder_resources: p.responder_resources,
    }
}

/// A CM command that failed, as the transport contract reports it.
fn cm_error(e: agent::CmError) -> Error {
    Error::InvalidRequest(e.to_string())
}

impl CmEndpoint for SoftEndpoint {
    fn cm_listen(&mut self, port: u16) -> Result<()> {
        // Each kind of queue pair we have listens in its port space (perftest's -R message queue
        // pair is RC beside UD test queue pairs).
        let (ud, rc) = self
            .cfg
            .connection
            .port_spaces(self.slots.len(), self.cfg.rc_tail);
        let agent = &mut self.cm_side().agent;
        if ud {
            agent.listen_ud(port);
        }
        if rc {
            agent.listen(port);
        }
        Ok(())
    }

    fn cm_connect(
        &mut self,
        qp: usize,
        to: SocketAddr,
        params: &CmQpParams,
        private_data: &[u8],
    ) -> Result<()> {
        if self.conn_of(qp) == ConnType::Ud {
            return self.cm_resolve(qp, to);
        }
        let offer = self.offer(qp, params, self.mtu)?;
        let local = self.cm_local()?;
        let now = self.now();
        let side = self.cm_side();
        let conn = side.agent.connect(now, local, to, &offer, private_data);
        side.qps.push((conn, qp, offer.psn));
        Ok(())
    }

    fn cm_accept(&mut self, req: u32, qp: usize, params: &CmQpParams) -> Result<()> {
        let conn = ConnId(req);
        if self.cm_side().sidr.iter().any(|r| r.0 == conn) {
            return self.cm_answer_sidr(conn, qp);
        }
        let side = self.cm_side();
        let Some(&(_, peer, from)) = side.requests.iter().find(|(c, _, _)| *c == conn) else {
            return Err(Error::InvalidRequest(format!(
                "no pending CM request {req:#x}"
            )));
        };
        let mtu = RoceMtu::at_most(peer.mtu.bytes().min(self.mtu.bytes()));
        let offer = self.offer(qp, params, mtu)?;
        // Our queue pair is ready before the REP leaves: the peer may send as soon as it has it.
        self.connect_from_cm(qp, &cm_peer(from, &peer, offer.psn), peer.psn)?;
        let now = self.now();
        let side = self.cm_side();
        side.agent.accept(now, conn, &offer).map_err(cm_error)?;
        side.qps.push((conn, qp, offer.psn));
        Ok(())
    }

    fn cm_reject(&mut self, req: u32) -> Result<()> {
        if let Some(done) = self.cm_refuse_sidr(ConnId(req)) {
            return done;
        }
        let side = self.cm_side();
        side.requests.retain(|(c, _, _)| c.0 != req);
        side.agent
            .reject(ConnId(req), RejectReason::ConsumerDefined)
            .map_err(cm_error)
    }

    fn cm_disconnect(&mut self, qp: usize) -> Result<()> {
        if self.conn_of(qp) == ConnType::Ud {
            // A UD queue pair has no CM connection (rdma_cm sends no DREQ for it): nothing to
            // tear down.
            self.cm_side()
                .events
                .push_back(CmEvent::Disconnected { qp });
            return Ok(());
        }
        let now = self.now();
        let side = self.cm_side();
        let Some(&(conn, ..)) = side.qps.iter().rev().find(|&&(_, q, _)| q == qp) else {
            return Err(Error::InvalidRequest(format!(
                "queue pair {qp} was not connected through the CM"
            )));
        };
        side.agent.disconnect(now, conn).map_err(cm_error)
    }

    fn cm_ud_peer(&mut self, qp: usize, qpn: u32) -> Result<()> {
        let engine = self.connected(qp)?;
        if engine.set_remote_qpn(qpn) {
            Ok(())
        } else {
            Err(Error::InvalidRequest(format!(
                "queue pair {qp} is not a UD queue pair"
            )))
        }
    }

    fn cm_poll(&mut self) -> Result<Option<CmEvent>> {
        if let Some(e) = self.cm_side().events.pop_front() {
            return Ok(Some(e));
        }
        // One turn of the NIC; completions stay in the engines for the next poll_cq.
        self.poll(&mut [])?;
        Ok(self.cm_side().events.pop_front())
    }
}

impl CmSide {
    /// Takes a packet for QP1 from `src`: a MAD for the agent, or a drop.
    pub(super) fn receive(
        &mut self,
        now: Instant,
        ib: &[u8],
        src: crate::wire::Gid,
        c: &mut crate::transport::soft::counters::SoftCounters,
    ) {
        match gsi_mad(ib) {
            Some(mad) => self.agent.handle(now, src.to_ip(), mad),
            None => c.drops.malformed += 1,
        }
    }
}
