//! One CM connection: its state, the message it waits to have answered, and what each message
//! received does to it.

use std::net::IpAddr;
use std::time::Duration;

use super::{CmEvent, ConnId, QpOffer};
use crate::transport::soft::rc::Instant;
use crate::wire::cm::{CmMessage, DrepRepr, DreqRepr, RepRepr, RtuRepr};

/// Where a connection is (IBTA 12.9's states, reduced to those rdma_cm passes through).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    /// Active side: REQ sent, waiting for REP (or REJ, MRA).
    ReqSent,
    /// Passive side: REQ received, waiting for the application to accept or reject.
    ReqRcvd,
    /// Passive side: REP sent, waiting for RTU.
    RepSent,
    /// Both sides: connected.
    Established,
    /// DREQ sent, waiting for DREP.
    DreqSent,
    /// Disconnected; still answers a repeated DREQ.
    TimeWait,
    /// Rejected or timed out: nothing more happens.
    Closed,
}

impl State {
    /// The state as the spec names it.
    pub(super) fn name(self) -> &'static str {
        match self {
            State::ReqSent => "REQ sent",
            State::ReqRcvd => "REQ received",
            State::RepSent => "REP sent",
            State::Established => "established",
            State::DreqSent => "DREQ sent",
            State::TimeWait => "time wait",
            State::Closed => "closed",
        }
    }
}

/// One connection.
#[derive(Debug)]
pub(super) struct Conn {
    /// Our communication ID.
    pub id: u32,
    /// The peer's communication ID (0 until known).
    pub remote_id: u32,
    /// The peer's address (replies go there).
    pub peer_ip: IpAddr,
    /// The transaction ID of the exchange in progress.
    pub tid: u64,
    pub state: State,
    /// Our queue pair.
    pub offer: Option<QpOffer>,
    /// The peer's queue pair, once known.
    pub peer: Option<QpOffer>,
    /// The message sent again when its answer is late.
    pub pending: Option<CmMessage>,
    /// When `pending` is resent (or given up on).
    pub deadline: Option<Instant>,
    /// Resends of `pending` so far.
    pub retries: u8,
}

impl Conn {
    pub(super) fn new(id: u32, peer_ip: IpAddr, tid: u64, state: State) -> Conn {
        Conn {
            id,
            remote_id: 0,
            peer_ip,
            tid,
            state,
            offer: None,
            peer: None,
            pending: None,
            deadline: None,
            retries: 0,
        }
    }

    /// The REP that accepts the peer's REQ with `offer` (the RDMA READ depths capped crosswise:
    /// our responder resources by its initiator depth, and the other way round).
    pub(super) fn rep(&self, offer: &QpOffer, guid: u64) -> RepRepr {
        let peer = self.peer.unwrap_or(*offer);
        RepRepr {
            local_comm_id: self.id,
            remote_comm_id: self.remote_id,
            local_qkey: 0,
            local_qpn: offer.qpn,
            local_eecn: 0,
            starting_psn: offer.psn,
            responder_resources: offer.responder_resources.min(peer.initiator_depth),
            initiator_depth: offer.initiator_depth.min(peer.responder_resources),
            target_ack_delay: 0,
            failover_accepted: 0,
            end_to_end_flow_control: false,
            rnr_retry_count: offer.rnr_retry_count.min(7),
            srq: false,
            local_ca_guid: guid,
            private_data: [0; 196],
        }
    }

    /// The DREQ that tears this connection down.
    pub(super) fn dreq(&self) -> DreqRepr {
        DreqRepr::new(self.id, self.remote_id, self.peer.map_or(0, |p| p.qpn))
    }

    fn settle(&mut self) {
        self.pending = None;
        self.deadline = None;
        self.retries = 0;
    }

    /// What a message for this connection does: the message to send back, the event to report.
    pub(super) fn on_message(
        &mut self,
        now: Instant,
        msg: CmMessage,
        retransmit: Duration,
    ) -> (Option<CmMessage>, Option<CmEvent>) {
        let conn = ConnId(self.id);
        let rtu = |c: &Conn| CmMessage::Rtu(RtuRepr::new(c.id, c.remote_id));
        match (self.state, msg) {
            (State::ReqSent, CmMessage::Rep(rep)) => {
                self.remote_id = rep.local_comm_id;
                let ours = self.offer.expect("an active connection has its offer");
                let peer = QpOffer {
                    qpn: rep.local_qpn,
                    psn: rep.starting_psn,
                    mtu: ours.mtu,
                    responder_resources: rep.responder_resources,
                    initiator_depth: rep.initiator_depth,
                    retry_count: ours.retry_count,
                    rnr_retry_count: rep.rnr_retry_count,
                    ack_timeout: ours.ack_timeout,
                };
                self.peer = Some(peer);
                self.state = State::Established;
                self.settle();
                (Some(rtu(self)), Some(CmEvent::Established { conn, peer }))
            }
            // Our RTU was lost: the peer resent its REP.
            (State::Established, CmMessage::Rep(_)) if self.offer.is_some() => {
                (Some(rtu(self)), None)
            }
            (State::RepSent, CmMessage::Rtu(_)) => {
                self.state = State::Established;
                self.settle();
                let peer = self.peer.expect("a passive connection has the REQ's peer");
                (None, Some(CmEvent::Established { conn, peer }))
            }
            (State::ReqSent | State::RepSent, CmMessage::Rej(rej)) => {
                self.state = State::Closed;
                self.settle();
                let event = CmEvent::Rejected {
                    conn,
                    reason: rej.reason,
                    private_data: rej.private_data.to_vec(),
                };
                (None, Some(event))
            }
            (State::ReqSent | State::RepSent | State::DreqSent, CmMessage::Mra(mra)) => {
                // The peer needs service_timeout more (4.096 µs × 2^n); then the usual wait.
                let extra = Duration::from_nanos(4096u64 << mra.service_timeout.min(31));
                self.deadline = Some(now.saturating_add(extra + retransmit));
                (None, None)
            }
            (State::Established | State::DreqSent | State::TimeWait, CmMessage::Dreq(_)) => {
                let first = self.state != State::TimeWait;
                self.state = State::TimeWait;
                self.settle();
                let drep = CmMessage::Drep(DrepRepr::new(self.id, self.remote_id));
                (Some(drep), first.then_some(CmEvent::Disconnected { conn }))
            }
            (State::DreqSent, CmMessage::Drep(_)) => {
                self.state = State::TimeWait;
                self.settle();
                (None, Some(CmEvent::Disconnected { conn }))
            }
            _ => (None, None),
        }
    }
}
