//! `-R -c UD` on the soft transport: a UD queue pair "connects" through service ID resolution
//! (SIDR_REQ → SIDR_REP, rdma_cm's UDP port space) instead of REQ / REP / RTU; there is no
//! connection to tear down, only the peer's QPN and Q_Key to learn.
//!
//! A SIDR_REQ has no field for the requester's QPN (a real rdma_cm server learns it from the first
//! datagram it receives), so our requests carry it in the first 4 bytes of the private data after
//! rdma_cm's header ([`ud_request_data`], the verbs transport's too): the server pairs the request
//! with the peer's queue pair and can send to it at once (send_lat's server answers first datagrams).

use std::net::{IpAddr, SocketAddr};

use super::{CmSide, SoftEndpoint, cm_error};
use crate::transport::cm::{CmEvent, CmPeer, sidr_refused, ud_request_data, ud_request_parts};
use crate::transport::soft::cm::{self as agent, ConnId};
use crate::transport::soft::io::device::Device;
use crate::transport::soft::io::io_error;
use crate::transport::{Error, QpInfo, Result};
use crate::wire::cm::SidrStatus;

/// A SIDR request waiting for the application: the resolution, the requester's QPN and address.
pub(super) type SidrRequest = (ConnId, u32, IpAddr);

impl SoftEndpoint {
    /// Sends the SIDR_REQ of UD queue pair `qp` to the service at `to`.
    pub(super) fn cm_resolve(&mut self, qp: usize, to: SocketAddr) -> Result<()> {
        let qpn = self.slots.get(qp).map(|s| s.qpn).ok_or_else(|| {
            Error::InvalidRequest(format!("queue pair {qp} of {}", self.slots.len()))
        })?;
        let local = self.cm_local()?;
        let now = self.now();
        let side = self.cm_side();
        let conn = side
            .agent
            .resolve(now, local, to, &ud_request_data(qpn, &[]));
        side.qps.push((conn, qp, 0));
        Ok(())
    }

    /// Answers SIDR request `conn` with UD queue pair `qp`, which then sends to the requester.
    pub(super) fn cm_answer_sidr(&mut self, conn: ConnId, qp: usize) -> Result<()> {
        let side = self.cm_side();
        let Some(i) = side.sidr.iter().position(|r| r.0 == conn) else {
            return Err(Error::InvalidRequest(format!(
                "no pending SIDR request {:#x}",
                conn.0
            )));
        };
        let (_, peer_qpn, from) = side.sidr.swap_remove(i);
        let qkey = self.cfg.qkey;
        let qpn = self.slots.get(qp).map(|s| s.qpn).ok_or_else(|| {
            Error::InvalidRequest(format!("queue pair {qp} of {}", self.slots.len()))
        })?;
        // rdma_cm gives every QP of the UDP port space one Q_Key: the requester's is ours.
        self.connect_ud_from_cm(qp, from, peer_qpn, qkey)?;
        let peer = CmPeer::ud(from, peer_qpn, self.mtu.bytes());
        let side = self.cm_side();
        side.agent
            .answer_sidr(conn, qpn, qkey, &[])
            .map_err(cm_error)?;
        side.qps.push((conn, qp, 0));
        side.events.push_back(CmEvent::Established { qp, peer });
        // Nothing more comes from the requester (no RTU), and the application may turn to its
        // out-of-band peer before it polls us again: the SIDR_REP leaves now.
        let now = self.now();
        self.cm_turn(now)?;
        self.nic.flush(now).map_err(io_error)
    }

    /// Refuses SIDR request `conn` (rdma_reject: status "rejected"), if it is one.
    pub(super) fn cm_refuse_sidr(&mut self, conn: ConnId) -> Option<Result<()>> {
        let side = self.cm_side();
        let i = side.sidr.iter().position(|r| r.0 == conn)?;
        side.sidr.swap_remove(i);
        Some(
            side.agent
                .refuse_sidr(conn, SidrStatus::Reject)
                .map_err(cm_error),
        )
    }

    /// The application's event for one of the agent's SIDR events (connecting the resolved queue
    /// pair); `None` for a resolution of no queue pair of ours.
    pub(super) fn sidr_event(
        &mut self,
        side: &mut CmSide,
        e: agent::CmEvent,
    ) -> Result<Option<CmEvent>> {
        let qp_of = |c: ConnId| side.qps.iter().find(|(id, ..)| *id == c).map(|e| e.1);
        Ok(match e {
            agent::CmEvent::SidrRequest {
                conn,
                from,
                private_data,
                ..
            } => {
                let (peer_qpn, app) = ud_request_parts(&private_data);
                side.sidr.push((conn, peer_qpn, from));
                Some(CmEvent::Request {
                    req: conn.0,
                    from,
                    peer_qpn,
                    private_data: app.to_vec(),
                })
            }
            agent::CmEvent::Resolved {
                conn,
                from: ip,
                qpn,
                qkey,
                ..
            } => {
                let Some(qp) = qp_of(conn) else {
                    return Ok(None);
                };
                self.connect_ud_from_cm(qp, ip, qpn, qkey)?;
                Some(CmEvent::Established {
                    qp,
                    peer: CmPeer::ud(ip, qpn, self.mtu.bytes()),
                })
            }
            agent::CmEvent::Unresolved { conn, status } => {
                qp_of(conn).map(|qp| sidr_refused(qp, status))
            }
            _ => None,
        })
    }

    /// Points UD queue pair `qp` at queue pair `qpn` of `ip`, with `qkey` on what it sends.
    fn connect_ud_from_cm(&mut self, qp: usize, ip: IpAddr, qpn: u32, qkey: u32) -> Result<()> {
        let remote = QpInfo {
            qpn,
            psn: 0,
            rkey: 0,
            vaddr: 0,
            len: 0,
            max_rd_atomic: 0,
        };
        let mut info = self.cm_conn_info(ip, std::slice::from_ref(&remote));
        info.qkey = Some(qkey);
        let mtu = self.mtu;
        self.connect_slot(qp, &info, &remote, mtu)
    }
}
