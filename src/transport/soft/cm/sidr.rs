//! Service ID resolution in the agent: SIDR_REQ → SIDR_REP, with which a UD client learns the QPN
//! and Q_Key of the server behind a port of rdma_cm's UDP port space (rdma_cm's `RDMA_PS_UDP`).
//!
//! The active side's SIDR_REQ is resent like a REQ until answered; the passive side raises
//! [`CmEvent::SidrRequest`] and answers with [`CmAgent::answer_sidr`] (rdma_accept) or
//! [`CmAgent::refuse_sidr`] (rdma_reject: status "rejected"); a SIDR_REQ for a port nobody listens
//! on gets status "service ID not supported" at once, as Linux's `ib_cm` answers it. A repeated
//! SIDR_REQ gets the same SIDR_REP again.

use std::net::{IpAddr, SocketAddr};

use super::{CmAgent, CmError, CmEvent, ConnId};
use crate::transport::soft::rc::Instant;
use crate::wire::cm::{
    CMA_HEADER_LEN, CmMessage, CmaHeader, RDMA_PS_UDP, SIDR_REP_PRIVATE_LEN, SIDR_REQ_PRIVATE_LEN,
    SidrRepRepr, SidrReqRepr, SidrStatus, service_id, service_port,
};

/// Bytes of a SIDR_REQ's private data after rdma_cm's header that the application may use.
pub(crate) const SIDR_PRIVATE_DATA_LEN: usize = SIDR_REQ_PRIVATE_LEN - CMA_HEADER_LEN;

/// The agent's resolutions, asked and answered.
#[derive(Debug, Default)]
pub(super) struct Sidr {
    /// Ports of the UDP port space we answer for.
    listening: Vec<u16>,
    queries: Vec<Query>,
}

/// One resolution.
#[derive(Debug)]
struct Query {
    /// Our handle (on the active side also the RequestID we sent).
    conn: u32,
    /// The RequestID on the wire (ours, or the peer's).
    request_id: u32,
    peer_ip: IpAddr,
    tid: u64,
    role: Role,
}

#[derive(Debug)]
enum Role {
    /// We sent this SIDR_REQ and wait for its SIDR_REP.
    Asking {
        req: Box<SidrReqRepr>,
        retries: u8,
        deadline: Instant,
    },
    /// The peer asked; the application has not decided yet.
    Deciding(Box<SidrReqRepr>),
    /// We answered (kept to answer a repeated SIDR_REQ the same way).
    Answered(Box<SidrRepRepr>),
}

impl Sidr {
    /// True when `id` names a resolution of ours.
    pub(super) fn uses(&self, id: u32) -> bool {
        self.queries.iter().any(|q| q.conn == id)
    }

    /// The earliest SIDR_REQ resend.
    pub(super) fn deadline(&self) -> Option<Instant> {
        self.queries
            .iter()
            .filter_map(|q| match q.role {
                Role::Asking { deadline, .. } => Some(deadline),
                _ => None,
            })
            .min()
    }
}

impl CmAgent {
    /// Answers SIDR_REQs for `port` of the UDP port space from now on (rdma_listen on an
    /// `RDMA_PS_UDP` ID).
    pub(crate) fn listen_ud(&mut self, port: u16) {
        if !self.sidr.listening.contains(&port) {
            self.sidr.listening.push(port);
        }
    }

    /// Sends a SIDR_REQ from `local` to the UD service at `peer`, with `private_data` after the CMA
    /// header (at most [`SIDR_PRIVATE_DATA_LEN`] bytes; more is cut). [`CmEvent::Resolved`],
    /// [`CmEvent::Unresolved`] or [`CmEvent::TimedOut`] follows.
    pub(crate) fn resolve(
        &mut self,
        now: Instant,
        local: SocketAddr,
        peer: SocketAddr,
        private_data: &[u8],
    ) -> ConnId {
        let id = self.new_comm_id();
        let mut req = SidrReqRepr {
            request_id: id,
            partition_key: 0xffff,
            service_id: service_id(RDMA_PS_UDP, peer.port()),
            private_data: [0; SIDR_REQ_PRIVATE_LEN],
        };
        CmaHeader {
            src: local,
            dst: peer.ip(),
        }
        .emit(&mut req.private_data);
        let n = private_data.len().min(SIDR_PRIVATE_DATA_LEN);
        req.private_data[CMA_HEADER_LEN..CMA_HEADER_LEN + n].copy_from_slice(&private_data[..n]);
        let tid = self.tid_hi | u64::from(id);
        self.queue(peer.ip(), tid, CmMessage::SidrReq(Box::new(req)));
        self.sidr.queries.push(Query {
            conn: id,
            request_id: id,
            peer_ip: peer.ip(),
            tid,
            role: Role::Asking {
                req: Box::new(req),
                retries: 0,
                deadline: now.saturating_add(self.cfg.retransmit),
            },
        });
        ConnId(id)
    }

    /// Answers a [`CmEvent::SidrRequest`] with our UD queue pair's number and Q_Key, and
    /// `private_data` (at most [`SIDR_REP_PRIVATE_LEN`] bytes; more is cut).
    pub(crate) fn answer_sidr(
        &mut self,
        conn: ConnId,
        qpn: u32,
        qkey: u32,
        private_data: &[u8],
    ) -> Result<(), CmError> {
        self.finish_sidr(conn, "answer", SidrStatus::Success, qpn, qkey, private_data)
    }

    /// Refuses a [`CmEvent::SidrRequest`] with `status` (rdma_reject sends "rejected").
    pub(crate) fn refuse_sidr(&mut self, conn: ConnId, status: SidrStatus) -> Result<(), CmError> {
        self.finish_sidr(conn, "refuse", status, 0, 0, &[])
    }

    fn finish_sidr(
        &mut self,
        conn: ConnId,
        what: &'static str,
        status: SidrStatus,
        qpn: u32,
        qkey: u32,
        private_data: &[u8],
    ) -> Result<(), CmError> {
        let q = self
            .sidr
            .queries
            .iter_mut()
            .find(|q| q.conn == conn.0)
            .ok_or(CmError::UnknownConnection(conn.0))?;
        let Role::Deciding(req) = &q.role else {
            let state = match q.role {
                Role::Asking { .. } => "SIDR_REQ sent",
                _ => "SIDR_REP sent",
            };
            return Err(CmError::WrongState { what, state });
        };
        let mut rep = SidrRepRepr::answer(req, status, qpn, qkey);
        let n = private_data.len().min(SIDR_REP_PRIVATE_LEN);
        rep.private_data[..n].copy_from_slice(&private_data[..n]);
        q.role = Role::Answered(Box::new(rep));
        let (ip, tid) = (q.peer_ip, q.tid);
        self.queue(ip, tid, CmMessage::SidrRep(Box::new(rep)));
        Ok(())
    }

    /// A SIDR_REQ from `from`.
    pub(super) fn on_sidr_req(&mut self, from: IpAddr, tid: u64, req: SidrReqRepr) {
        let known = self.sidr.queries.iter().find(|q| {
            q.request_id == req.request_id
                && q.peer_ip == from
                && !matches!(q.role, Role::Asking { .. })
        });
        if let Some(q) = known {
            // A repeat: our SIDR_REP was lost (send it again), or the application still decides.
            if let Role::Answered(rep) = &q.role {
                let m = CmMessage::SidrRep(rep.clone());
                self.queue(from, tid, m);
            }
            return;
        }
        let port = service_port(RDMA_PS_UDP, req.service_id);
        let Some(port) = port.filter(|p| self.sidr.listening.contains(p)) else {
            let rep = SidrRepRepr::answer(&req, SidrStatus::Unsupported, 0, 0);
            self.queue(from, tid, CmMessage::SidrRep(Box::new(rep)));
            return;
        };
        let id = self.new_comm_id();
        let cma = CmaHeader::parse(&req.private_data).ok();
        let skip = if cma.is_some() { CMA_HEADER_LEN } else { 0 };
        self.events.push_back(CmEvent::SidrRequest {
            conn: ConnId(id),
            from,
            port,
            cma,
            private_data: req.private_data[skip..].to_vec(),
        });
        self.sidr.queries.push(Query {
            conn: id,
            request_id: req.request_id,
            peer_ip: from,
            tid,
            role: Role::Deciding(Box::new(req)),
        });
    }

    /// A SIDR_REP from `from`: ends the resolution it answers.
    pub(super) fn on_sidr_rep(&mut self, from: IpAddr, rep: &SidrRepRepr) {
        let Some(i) = self.sidr.queries.iter().position(|q| {
            q.request_id == rep.request_id
                && q.peer_ip == from
                && matches!(q.role, Role::Asking { .. })
        }) else {
            self.counters.dropped += 1; // a repeat, or for nothing we asked
            return;
        };
        let conn = ConnId(self.sidr.queries.swap_remove(i).conn);
        self.events.push_back(match rep.status {
            SidrStatus::Success => CmEvent::Resolved {
                conn,
                from,
                qpn: rep.qpn,
                qkey: rep.qkey,
                private_data: rep.private_data.to_vec(),
            },
            status => CmEvent::Unresolved { conn, status },
        });
    }

    /// Resends the SIDR_REQs due at `now`, or gives up on those resent often enough.
    pub(super) fn sidr_timeout(&mut self, now: Instant) {
        let (retransmit, max) = (self.cfg.retransmit, self.cfg.max_retries);
        let mut i = 0;
        while i < self.sidr.queries.len() {
            let q = &mut self.sidr.queries[i];
            let Role::Asking {
                req,
                retries,
                deadline,
            } = &mut q.role
            else {
                i += 1;
                continue;
            };
            if *deadline > now {
                i += 1;
                continue;
            }
            if *retries < max {
                *retries += 1;
                *deadline = now.saturating_add(retransmit);
                let (ip, tid, m) = (q.peer_ip, q.tid, CmMessage::SidrReq(req.clone()));
                self.counters.retransmits += 1;
                self.queue(ip, tid, m);
                i += 1;
                continue;
            }
            let sent = u32::from(*retries) + 1;
            let conn = ConnId(self.sidr.queries.swap_remove(i).conn);
            self.events.push_back(CmEvent::TimedOut {
                conn,
                unanswered: "SIDR_REQ",
                sent,
            });
        }
    }
}
