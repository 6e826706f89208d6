//! `-R` on verbs: librdmacm connects this endpoint's own queue pairs. librdmacm is loaded at run
//! time by rdma-mummy-sys's shim, like libibverbs, so the binary still starts without it; a call
//! then fails with `EOPNOTSUPP` and [`RdmaCm::open`] says which package to install.
//!
//! The queue pairs are ours, not rdma_cm's (`rdma_create_qp` is not used): the CM exchange runs on
//! rdma_cm ids with the QP number in `rdma_conn_param`, and each side moves its QP to RTR and RTS
//! with the attributes `rdma_init_qp_attr` gives (peer QPN, both PSNs, path MTU, address vector),
//! as librdmacm would for a QP of its own. The active side then completes with `rdma_establish`
//! (after `RDMA_CM_EVENT_CONNECT_RESPONSE`), the passive side with `rdma_accept`.
//!
//! UD queue pairs (`-c UD`) take ids in rdma_cm's UDP port space instead, where `rdma_connect`
//! resolves the service (SIDR_REQ / SIDR_REP) rather than connects it: see [`ud`]. Both kinds may
//! live on one endpoint (perftest's `-R` message queue pair is RC beside UD test queue pairs): one
//! event channel, each id in its queue pair's port space, a listener in each space in use, and a
//! request accepted by its kind.

use std::collections::VecDeque;
use std::ffi::CStr;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::ptr;

use super::VerbsEndpoint;
use crate::params::ConnType;
use crate::transport::cm::{CmEndpoint, CmEvent, CmPeer, CmQpParams, RejectReason};
use crate::transport::{Error, Result, RoceMtu};
use rdma_mummy_sys as sys;
use sys::rdma_cm_event_type as ev;

mod addr;
mod request;
mod ud;

use addr::{gid_ip, peer_of, sockaddr};
use request::Request;

/// The soname the shim loads.
const LIBRDMACM: &CStr = c"librdmacm.so.1";
/// How long address and route resolution may take (perftest's 2000 ms).
const RESOLVE_MS: i32 = 2000;
/// `RDMA_OPTION_ID` / `RDMA_OPTION_ID_ACK_TIMEOUT` (rdma_cma.h).
const OPTION_ID: i32 = 0;
const OPTION_ID_ACK_TIMEOUT: i32 = 3;

/// One queue pair's rdma_cm id.
struct Conn {
    id: *mut sys::rdma_cm_id,
    params: CmQpParams,
    private: Vec<u8>,
    peer_ip: IpAddr,
    /// An id of the UDP port space (a UD queue pair, resolved rather than connected).
    ud: bool,
}

/// The rdma_cm state of one verbs endpoint.
pub(super) struct RdmaCm {
    channel: *mut sys::rdma_event_channel,
    /// The listeners: one per port space in use (TCP's for RC queue pairs, UDP's for UD ones).
    listen: Vec<*mut sys::rdma_cm_id>,
    /// Per queue pair.
    conns: Vec<Option<Conn>>,
    requests: Vec<Request>,
    next_req: u32,
    events: VecDeque<CmEvent>,
}

/// The last OS error, as librdmacm sets it.
fn os_err(call: &str) -> Error {
    Error::Io {
        context: format!("{call} (librdmacm)"),
        source: io::Error::last_os_error(),
    }
}

/// What an rdma_cm event means for queue pair `qp`, when it was not established by it (`ud`: an id
/// of the UDP port space, where a SIDR_REP that refuses comes as UNREACHABLE with its status).
pub(super) fn failure(qp: usize, event: u32, status: i32, ud: bool) -> Option<CmEvent> {
    let name = match event {
        ev::RDMA_CM_EVENT_REJECTED => {
            let reason = RejectReason::from_code(status.unsigned_abs() as u16);
            return Some(CmEvent::Rejected { qp, reason });
        }
        ev::RDMA_CM_EVENT_UNREACHABLE if ud => return Some(ud::unreachable(qp, status)),
        ev::RDMA_CM_EVENT_ADDR_ERROR => {
            "address resolution failed (no route to the peer from an RDMA device?)"
        }
        ev::RDMA_CM_EVENT_ROUTE_ERROR => "route resolution failed",
        ev::RDMA_CM_EVENT_CONNECT_ERROR => "connection error",
        ev::RDMA_CM_EVENT_UNREACHABLE => "peer unreachable (no REP to our REQ)",
        _ => return None,
    };
    let detail = format!(
        "{name}, status {status} ({})",
        io::Error::from_raw_os_error(status.abs())
    );
    Some(CmEvent::Unanswered { qp, detail })
}

impl RdmaCm {
    /// An event channel, non-blocking, or why librdmacm is not usable.
    pub(super) fn open() -> Result<RdmaCm> {
        // SAFETY: no arguments; returns NULL with errno on failure.
        let channel = unsafe { sys::rdma_create_event_channel() };
        if channel.is_null() {
            let e = io::Error::last_os_error();
            return Err(if e.raw_os_error() == Some(libc::EOPNOTSUPP) {
                Error::Unavailable(format!(
                    "-R needs librdmacm ({} could not be loaded): apt-get install librdmacm1 (or rdma-core)",
                    LIBRDMACM.to_string_lossy()
                ))
            } else {
                Error::Io {
                    context: "rdma_create_event_channel: is /dev/infiniband/rdma_cm there (modprobe rdma_ucm)?".into(),
                    source: e,
                }
            });
        }
        // SAFETY: `channel` is a live event channel; fd is its first field.
        let fd = unsafe { (*channel).fd };
        // SAFETY: fcntl on a descriptor we own.
        unsafe {
            let fl = libc::fcntl(fd, libc::F_GETFL);
            libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK);
        }
        Ok(RdmaCm {
            channel,
            listen: Vec::new(),
            conns: Vec::new(),
            requests: Vec::new(),
            next_req: 1,
            events: VecDeque::new(),
        })
    }

    /// A new id on our channel, in the UDP port space for a UD queue pair (`ud`), TCP's otherwise.
    fn create_id(&mut self, ud: bool) -> Result<*mut sys::rdma_cm_id> {
        let mut id = ptr::null_mut();
        let ps = if ud {
            sys::rdma_port_space::RDMA_PS_UDP
        } else {
            sys::rdma_port_space::RDMA_PS_TCP
        };
        // SAFETY: a live channel and an out-pointer.
        let rc = unsafe { sys::rdma_create_id(self.channel, &mut id, ptr::null_mut(), ps) };
        if rc != 0 {
            return Err(os_err("rdma_create_id"));
        }
        Ok(id)
    }

    fn qp_of(&self, id: *mut sys::rdma_cm_id) -> Option<usize> {
        self.conns
            .iter()
            .position(|c| c.as_ref().is_some_and(|c| c.id == id))
    }
}

impl Drop for RdmaCm {
    fn drop(&mut self) {
        // SAFETY: every id and the channel were created here and are destroyed once; events are
        // acknowledged as they are read, so none holds an id.
        unsafe {
            for c in self.conns.iter().flatten() {
                sys::rdma_destroy_id(c.id);
            }
            for r in &self.requests {
                sys::rdma_destroy_id(r.id);
            }
            for &id in &self.listen {
                sys::rdma_destroy_id(id);
            }
            sys::rdma_destroy_event_channel(self.channel);
        }
    }
}

impl VerbsEndpoint {
    fn rdma_cm(&mut self) -> Result<&mut RdmaCm> {
        if self.cm.is_none() {
            if self.kinds().0 {
                ud::check_qkey(self.cfg.qkey)?;
            }
            self.cm = Some(Box::new(RdmaCm::open()?));
        }
        Ok(self.cm.as_deref_mut().expect("just opened"))
    }

    /// Whether this endpoint has (UD, non-UD) queue pairs: the port spaces it uses.
    fn kinds(&self) -> (bool, bool) {
        self.cfg
            .connection
            .port_spaces(self.qps.len(), self.cfg.rc_tail)
    }

    /// rdma_cm's attributes for `state` on `id`, applied to queue pair `qp`; returns them.
    fn cm_modify(
        &mut self,
        qp: usize,
        id: *mut sys::rdma_cm_id,
        state: u32,
        adjust: impl FnOnce(&mut sys::ibv_qp_attr),
    ) -> Result<sys::ibv_qp_attr> {
        // SAFETY: ibv_qp_attr is plain old data.
        let mut attr: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        attr.qp_state = state;
        let mut mask = 0;
        // SAFETY: a live id, and out-pointers to locals.
        if unsafe { sys::rdma_init_qp_attr(id, &mut attr, &mut mask) } != 0 {
            return Err(os_err("rdma_init_qp_attr"));
        }
        adjust(&mut attr);
        // SAFETY: a live QP of ours and a filled attribute set with its mask.
        let rc = unsafe { sys::ibv_modify_qp(self.qps[qp].raw, &mut attr, mask) };
        if rc != 0 {
            return Err(Error::Io {
                context: format!("ibv_modify_qp to state {state} with rdma_cm's attributes"),
                source: io::Error::from_raw_os_error(rc),
            });
        }
        Ok(attr)
    }

    /// RTR then RTS with rdma_cm's attributes; our PSN becomes the one rdma_cm sent; the peer.
    fn cm_ready(&mut self, qp: usize, id: *mut sys::rdma_cm_id, p: &CmQpParams) -> Result<CmPeer> {
        let out_reads = self.setup.out_reads.min(u32::from(u8::MAX)) as u8;
        let rtr = self.cm_modify(qp, id, sys::ibv_qp_state::IBV_QPS_RTR, |a| {
            a.max_dest_rd_atomic = a.max_dest_rd_atomic.min(out_reads).max(1);
        })?;
        let rts = self.cm_modify(qp, id, sys::ibv_qp_state::IBV_QPS_RTS, |a| {
            a.max_rd_atomic = a.max_rd_atomic.min(p.initiator_depth).max(1);
        })?;
        self.qps[qp].psn = rts.sq_psn;
        self.setup.path_mtu = RoceMtu::from_ib_enum(rtr.path_mtu).map(RoceMtu::bytes);
        self.connected = true;
        Ok(peer_of(&rtr, rtr.max_dest_rd_atomic))
    }

    /// Checks that rdma_cm routed through our device; the id's device name otherwise.
    fn cm_same_device(&self, id: *mut sys::rdma_cm_id) -> std::result::Result<(), String> {
        // SAFETY: a resolved id has its verbs context; the name is a NUL-terminated C string.
        let name = unsafe {
            let verbs = (*id).verbs;
            if verbs.is_null() {
                return Err("(no device)".into());
            }
            CStr::from_ptr(sys::ibv_get_device_name((*verbs).device))
                .to_string_lossy()
                .into_owned()
        };
        if name == self.setup.device {
            Ok(())
        } else {
            Err(name)
        }
    }

    fn cm_conn_param(&self, qp: usize, p: &CmQpParams, private: &[u8]) -> sys::rdma_conn_param {
        let depth = self.setup.out_reads.min(u32::from(u8::MAX)) as u8;
        sys::rdma_conn_param {
            private_data: if private.is_empty() {
                ptr::null()
            } else {
                private.as_ptr().cast()
            },
            private_data_len: private.len().min(56) as u8,
            responder_resources: p.responder_resources.min(depth),
            initiator_depth: p.initiator_depth.min(depth),
            flow_control: 1,
            retry_count: p.retry_count.min(7),
            rnr_retry_count: p.rnr_retry_count.min(7),
            srq: 0,
            qp_num: self.qpns[qp],
        }
    }

    /// One rdma_cm event, handled; what the application must know goes to the event queue.
    fn cm_handle(&mut self, e: &sys::rdma_cm_event) -> Result<()> {
        let (id, kind, status) = (e.id, e.event, e.status);
        let cm = self
            .cm
            .as_deref_mut()
            .expect("events come from an open channel");
        // SAFETY: every event's id is live until the event is acknowledged (a request's is the new
        // id librdmacm made for it).
        let space = unsafe { (*id).ps };
        if kind == ev::RDMA_CM_EVENT_CONNECT_REQUEST && space == sys::rdma_port_space::RDMA_PS_UDP {
            cm.ud_request(e);
            return Ok(());
        }
        if kind == ev::RDMA_CM_EVENT_CONNECT_REQUEST {
            cm.rc_request(e);
            return Ok(());
        }
        let Some(qp) = cm.qp_of(id) else {
            return Ok(());
        };
        let conn = cm.conns[qp].as_ref().expect("found above");
        let (params, peer_ip, ud) = (conn.params, conn.peer_ip, conn.ud);
        match kind {
            ev::RDMA_CM_EVENT_ADDR_RESOLVED => {
                let mut t = params.ack_timeout;
                // SAFETY: a live id; a one-byte option value.
                unsafe {
                    sys::rdma_set_option(
                        id,
                        OPTION_ID,
                        OPTION_ID_ACK_TIMEOUT,
                        ptr::from_mut(&mut t).cast(),
                        1,
                    )
                };
                // SAFETY: a live id whose address is resolved.
                if unsafe { sys::rdma_resolve_route(id, RESOLVE_MS) } != 0 {
                    return Err(os_err("rdma_resolve_route"));
                }
            }
            ev::RDMA_CM_EVENT_ROUTE_RESOLVED => {
                if let Err(theirs) = self.cm_same_device(id) {
                    let detail = format!(
                        "rdma_cm reaches {peer_ip} through device {theirs}, but -d chose {}; give -d {theirs} (or -x for the GID on that network)",
                        self.setup.device
                    );
                    self.cm_mut()
                        .events
                        .push_back(CmEvent::Unanswered { qp, detail });
                    return Ok(());
                }
                let private = self.cm_mut().conns[qp]
                    .as_ref()
                    .map(|c| c.private.clone())
                    .unwrap_or_default();
                let mut cp = self.cm_conn_param(qp, &params, &private);
                // SAFETY: a live id with its route; `cp` and the private data outlive the call.
                if unsafe { sys::rdma_connect(id, &mut cp) } != 0 {
                    return Err(os_err("rdma_connect"));
                }
            }
            ev::RDMA_CM_EVENT_CONNECT_RESPONSE => {
                let peer = self.cm_ready(qp, id, &params)?;
                // SAFETY: a live id whose QP (ours) is in RTS: sends the RTU.
                if unsafe { sys::rdma_establish(id) } != 0 {
                    return Err(os_err("rdma_establish"));
                }
                self.cm_mut()
                    .events
                    .push_back(CmEvent::Established { qp, peer });
            }
            ev::RDMA_CM_EVENT_ESTABLISHED if ud => {
                // SAFETY: a UD id's ESTABLISHED carries the SIDR_REP's resolution.
                let resolved = unsafe { e.param.ud };
                self.ud_resolved(qp, &resolved, peer_ip)?;
            }
            ev::RDMA_CM_EVENT_ESTABLISHED => {
                // The passive side: the RTU came. Its peer as the RTR programmed it.
                // SAFETY: ibv_qp_attr is plain old data; the id is live.
                let mut attr: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
                attr.qp_state = sys::ibv_qp_state::IBV_QPS_RTR;
                let mut mask = 0;
                // SAFETY: as above.
                unsafe { sys::rdma_init_qp_attr(id, &mut attr, &mut mask) };
                let peer = peer_of(&attr, attr.max_dest_rd_atomic);
                self.cm_mut()
                    .events
                    .push_back(CmEvent::Established { qp, peer });
            }
            ev::RDMA_CM_EVENT_DISCONNECTED => {
                self.cm_mut().events.push_back(CmEvent::Disconnected { qp });
            }
            _ => {
                if let Some(event) = failure(qp, kind, status, ud) {
                    self.cm_mut().events.push_back(event);
                }
            }
        }
        Ok(())
    }

    fn cm_mut(&mut self) -> &mut RdmaCm {
        self.cm.as_deref_mut().expect("the CM is open")
    }

    /// Our address on the GID in use: the source of every REQ (so rdma_cm routes through -d).
    fn cm_source(&self, to: SocketAddr) -> Option<SocketAddr> {
        let ip = gid_ip(self.setup.gid.entry.gid.into());
        (ip.is_ipv4() == to.is_ipv4() && !ip.is_unspecified()).then_some(SocketAddr::new(ip, 0))
    }
}

impl CmEndpoint for VerbsEndpoint {
    fn cm_listen(&mut self, port: u16) -> Result<()> {
        let any = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port);
        let (ud, rc) = self.kinds();
        let cm = self.rdma_cm()?;
        if !cm.listen.is_empty() {
            return Ok(());
        }
        // Each kind of queue pair we have listens in its port space.
        for space in [ud.then_some(true), rc.then_some(false)]
            .into_iter()
            .flatten()
        {
            let id = cm.create_id(space)?;
            cm.listen.push(id);
            let mut ss = sockaddr(any);
            // SAFETY: a fresh id and an address that outlives the call.
            if unsafe { sys::rdma_bind_addr(id, ptr::from_mut(&mut ss).cast()) } != 0 {
                return Err(os_err(
                    "rdma_bind_addr (is -p taken by another rdma_cm listener?)",
                ));
            }
            // SAFETY: a bound id.
            if unsafe { sys::rdma_listen(id, 64) } != 0 {
                return Err(os_err("rdma_listen"));
            }
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
        if qp >= self.qps.len() {
            return Err(Error::InvalidRequest(format!(
                "queue pair {qp} of {}",
                self.qps.len()
            )));
        }
        let src = self.cm_source(to);
        let qpn = self.qpns[qp];
        let ud = self.cfg.conn_of(qp) == ConnType::Ud;
        let cm = self.rdma_cm()?;
        let private = if ud {
            crate::transport::cm::ud_request_data(qpn, private_data)
        } else {
            private_data.to_vec()
        };
        if let Some(old) = cm.conns.get_mut(qp).and_then(Option::take) {
            // A retry after a REJ: the old id is spent.
            // SAFETY: an id of ours, no longer used.
            unsafe { sys::rdma_destroy_id(old.id) };
        }
        let id = cm.create_id(ud)?;
        if cm.conns.len() <= qp {
            cm.conns.resize_with(qp + 1, || None);
        }
        cm.conns[qp] = Some(Conn {
            id,
            params: *params,
            private,
            peer_ip: to.ip(),
            ud,
        });
        let mut dst = sockaddr(to);
        let mut src = src.map(sockaddr);
        let src_ptr = src
            .as_mut()
            .map_or(ptr::null_mut(), |s| ptr::from_mut(s).cast());
        // SAFETY: a fresh id and addresses that outlive the call.
        let rc = unsafe {
            sys::rdma_resolve_addr(id, src_ptr, ptr::from_mut(&mut dst).cast(), RESOLVE_MS)
        };
        if rc != 0 {
            return Err(os_err("rdma_resolve_addr"));
        }
        Ok(())
    }

    fn cm_accept(&mut self, req: u32, qp: usize, params: &CmQpParams) -> Result<()> {
        let ours = self.cfg.conn_of(qp);
        let cm = self.rdma_cm()?;
        let Some(i) = cm.requests.iter().position(|r| r.handle == req) else {
            return Err(Error::InvalidRequest(format!(
                "no pending CM request {req}"
            )));
        };
        if cm.requests[i].ud != (ours == ConnType::Ud) {
            let kind = if cm.requests[i].ud {
                "a SIDR_REQ"
            } else {
                "a REQ"
            };
            return Err(Error::InvalidRequest(format!(
                "CM request {req} is {kind}, but queue pair {qp} is {ours}: accept it onto a queue pair of its kind"
            )));
        }
        let Request {
            id,
            from: ip,
            qpn: peer_qpn,
            ud,
            ..
        } = cm.requests.swap_remove(i);
        if cm.conns.len() <= qp {
            cm.conns.resize_with(qp + 1, || None);
        }
        cm.conns[qp] = Some(Conn {
            id,
            params: *params,
            private: Vec::new(),
            peer_ip: ip,
            ud,
        });
        if let Err(theirs) = self.cm_same_device(id) {
            return Err(Error::InvalidRequest(format!(
                "a connection request for {ip} arrived on device {theirs}, but -d chose {}",
                self.setup.device
            )));
        }
        if ud {
            return self.ud_accept(qp, id, ip, peer_qpn, params);
        }
        self.cm_ready(qp, id, params)?;
        let mut cp = self.cm_conn_param(qp, params, &[]);
        // SAFETY: the request's id; `cp` outlives the call.
        if unsafe { sys::rdma_accept(id, &mut cp) } != 0 {
            return Err(os_err("rdma_accept"));
        }
        Ok(())
    }

    fn cm_reject(&mut self, req: u32) -> Result<()> {
        let cm = self.rdma_cm()?;
        if let Some(i) = cm.requests.iter().position(|r| r.handle == req) {
            let id = cm.requests.swap_remove(i).id;
            // SAFETY: the request's id, rejected then destroyed once.
            unsafe {
                sys::rdma_reject(id, ptr::null(), 0);
                sys::rdma_destroy_id(id);
            }
        }
        Ok(())
    }

    fn cm_disconnect(&mut self, qp: usize) -> Result<()> {
        let ud = self.cfg.conn_of(qp) == ConnType::Ud;
        let cm = self.rdma_cm()?;
        if ud {
            // A resolved UD queue pair has no connection (rdma_cm sends no DREQ for it).
            cm.events.push_back(CmEvent::Disconnected { qp });
            return Ok(());
        }
        match cm.conns.get(qp).and_then(Option::as_ref) {
            // SAFETY: a connected id of ours.
            Some(c) if unsafe { sys::rdma_disconnect(c.id) } == 0 => Ok(()),
            Some(_) => Err(os_err("rdma_disconnect")),
            None => Err(Error::InvalidRequest(format!(
                "queue pair {qp} was not connected through the CM"
            ))),
        }
    }

    fn cm_ud_peer(&mut self, qp: usize, qpn: u32) -> Result<()> {
        self.ud_repoint(qp, qpn)
    }

    fn cm_poll(&mut self) -> Result<Option<CmEvent>> {
        if let Some(e) = self.rdma_cm()?.events.pop_front() {
            return Ok(Some(e));
        }
        let channel = self.rdma_cm()?.channel;
        let mut e: *mut sys::rdma_cm_event = ptr::null_mut();
        // SAFETY: a live, non-blocking channel and an out-pointer.
        if unsafe { sys::rdma_get_cm_event(channel, &mut e) } != 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::WouldBlock {
                std::thread::yield_now();
                return Ok(None);
            }
            return Err(os_err("rdma_get_cm_event"));
        }
        // SAFETY: librdmacm's event, read here and acknowledged right after.
        let handled = self.cm_handle(unsafe { &*e });
        // SAFETY: the event we got, acknowledged once.
        unsafe { sys::rdma_ack_cm_event(e) };
        handled?;
        Ok(self.rdma_cm()?.events.pop_front())
    }
}

#[cfg(test)]
mod tests;
