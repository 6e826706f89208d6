//! Connection requests waiting for the application: a REQ (TCP port space, an RC queue pair's).
//!
//! A SIDR_REQ (UDP port space) is read in [`super::ud`]; both wait here until accepted onto a queue
//! pair of their kind or rejected.

use super::RdmaCm;
use super::addr::peer_of;
use crate::transport::cm::CmEvent;
use rdma_mummy_sys as sys;
use std::net::IpAddr;

/// A request not yet accepted or rejected.
pub(super) struct Request {
    /// What the application calls it.
    pub(super) handle: u32,
    /// The request's own id.
    pub(super) id: *mut sys::rdma_cm_id,
    /// The requester.
    pub(super) from: IpAddr,
    /// Its QPN (UD: as our dialect's private data carries it, 0 without; RC: the REQ's).
    pub(super) qpn: u32,
    /// A SIDR_REQ (UDP port space) rather than a REQ.
    pub(super) ud: bool,
}

impl RdmaCm {
    /// A REQ reached our TCP port: the request, with its sender, its QPN and its private data,
    /// waits for the application.
    pub(super) fn rc_request(&mut self, e: &sys::rdma_cm_event) {
        let id = e.id;
        let handle = self.next_req;
        self.next_req += 1;
        // SAFETY: a CONNECT_REQUEST carries the connection parameters.
        let conn = unsafe { e.param.conn };
        let private = if conn.private_data.is_null() {
            Vec::new()
        } else {
            // SAFETY: librdmacm's private data, valid until the event is acknowledged.
            unsafe {
                std::slice::from_raw_parts(
                    conn.private_data.cast::<u8>(),
                    usize::from(conn.private_data_len),
                )
            }
            .to_vec()
        };
        // The REQ's QPN and sender, as rdma_cm would program them into an RTR.
        // SAFETY: ibv_qp_attr is plain old data; the id is live.
        let mut attr: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        attr.qp_state = sys::ibv_qp_state::IBV_QPS_RTR;
        let mut mask = 0;
        // SAFETY: as above.
        unsafe { sys::rdma_init_qp_attr(id, &mut attr, &mut mask) };
        let peer = peer_of(&attr, 0);
        self.requests.push(Request {
            handle,
            id,
            from: peer.ip,
            qpn: peer.qpn,
            ud: false,
        });
        self.events.push_back(CmEvent::Request {
            req: handle,
            from: peer.ip,
            peer_qpn: peer.qpn,
            private_data: private,
        });
    }
}
