//! The queue pair: one sans-IO RC state machine that joins requester (and its completer) and
//! responder.
//!
//! Shaped like quinn-proto's `Connection`: the caller feeds packets and work requests with an
//! explicit `now` (an [`Instant`] on its own clock), pulls packets to send into its own buffers, pulls
//! completions, and asks when to call back. Nothing inside reads a clock, a socket or allocates
//! per packet: every queue is a ring sized at creation.

use crate::params::Recovery;
use crate::transport::soft::cc::{CcCounters, Notifier, RateControl};
use crate::transport::{
    Access, Completion, CompletionStatus, Error, RecvRequest, Result, SendOp, SendRequest,
};
use crate::wire::{AethPacket, AethRepr, BthPacket, CnpRepr, IbRepr, Opcode};

use super::config::{ConfigError, QpConfig};
use super::counters::Counters;
use super::ctx::Ctx;
use super::mr::{MemoryRegion, MemoryTable, Span};
use super::packet::{self, Answer, Kind, MAX_HEADER_LEN, Response, Seg};
use super::psn::Psn;
use super::requester::Requester;
use super::responder::Responder;
use super::ring::Ring;
use super::time::{Instant, Now};
use super::wqe;

/// Most packets one message may take: a quarter of the 24-bit PSN space.
pub(crate) const MAX_MESSAGE_PACKETS: u32 = 1 << 22;

/// Life-cycle state of a queue pair.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum QpState {
    /// Ready to send and receive (RTS).
    Ready,
    /// Failed; every work request is flushed. The status says what failed first.
    Error(CompletionStatus),
}

/// One Reliable Connection queue pair.
pub struct Qp {
    cfg: QpConfig,
    mem: MemoryTable,
    cq: Ring<Completion>,
    counters: Counters,
    req: Requester,
    resp: Responder,
    state: QpState,
    /// Alternates requester and responder when both have packets ready, so neither starves.
    responder_turn: bool,
    /// Request packets sent while a lone ACK waited behind them (at most [`ACK_BEHIND_MAX`]).
    ack_behind: u32,
    /// DCQCN's notification point: the CNP owed to the peer for CE-marked packets.
    np: Notifier,
    /// A PFC pause holds CNPs' priority: an owed CNP stays queued (`hold_cnps`).
    cnps_held: bool,
    /// The region `cfg.local_lkey` names, and the id of the table it is a copy from: the
    /// postings' fast paths check their range in it without a lookup while `mem` is that table.
    local: (u64, MemoryRegion),
}

/// Most request packets a lone ACK waits behind before it goes anyway, so that a requester with a
/// long queue never holds back the peer's window.
const ACK_BEHIND_MAX: u32 = 16;

/// Whether a transmission may keep a lone ACK back for the next one.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum LoneAck {
    /// Everything queued goes, the ACK last.
    Send,
    /// A plain ACK that is all that is left stays queued (see `Qp::poll_transmit_with`).
    Hold,
}

impl Qp {
    /// A connected queue pair in RTS, owning `mem`; `cfg.local_lkey` must name a region of it.
    pub fn new(cfg: QpConfig, mem: MemoryTable) -> std::result::Result<Qp, ConfigError> {
        cfg.validate()?;
        let Some(&local) = mem.region(cfg.local_lkey) else {
            return Err(ConfigError::LocalKey(cfg.local_lkey));
        };
        // Selective repeat tracks every PSN of the window the requester may have out. A loss costs
        // it no resend of the window, so the window may be deeper than go-back-N's: four times,
        // which keeps the link busy while a hole waits a round trip (or a scheduler stall) for
        // its resend.
        let sr = cfg.recovery == Recovery::Sr;
        let sr_window = cfg
            .max_unacked_psns
            .saturating_mul(4)
            .clamp(256, 1 << 15)
            .next_power_of_two();
        Ok(Qp {
            // +1: the receive a SEND is filling is out of the RQ but still owes a completion.
            // Filled: a completion is written into its slot, without a growth path to check.
            cq: Ring::filled(cfg.sq_depth + cfg.rq_depth + 1, Completion::EMPTY),
            counters: Counters::default(),
            req: Requester::new(
                Psn::new(cfg.send_psn),
                cfg.sq_depth,
                cfg.retry_cnt,
                cfg.rnr_retry,
                sr.then_some(sr_window.saturating_mul(2)),
                (!sr && cfg.gbn_fast).then_some((cfg.max_unacked_psns, cfg.gbn_loss_window)),
                RateControl::new(cfg.cc, &cfg.cc_params),
            ),
            resp: Responder::new(
                Psn::new(cfg.recv_psn),
                cfg.rq_depth,
                cfg.max_dest_rd_atomic,
                sr.then_some(sr_window),
            ),
            state: QpState::Ready,
            responder_turn: false,
            ack_behind: 0,
            np: Notifier::new(cfg.cc, &cfg.cc_params),
            cnps_held: false,
            local: (mem.id(), local),
            mem,
            cfg,
        })
    }

    /// This QP's number: packets whose BTH.DestQP equals it belong here.
    pub fn qpn(&self) -> u32 {
        self.cfg.qpn
    }

    /// The attributes it was created with.
    pub fn config(&self) -> &QpConfig {
        &self.cfg
    }

    /// Its state.
    pub fn state(&self) -> QpState {
        self.state
    }

    /// Its counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Its registered memory.
    pub fn memory(&self) -> &MemoryTable {
        &self.mem
    }

    /// Its registered memory, to fill buffers before sending.
    pub fn memory_mut(&mut self) -> &mut MemoryTable {
        &mut self.mem
    }

    /// Size of the buffer `poll_transmit` needs: the largest packet at this path MTU.
    pub fn max_packet_len(&self) -> usize {
        MAX_HEADER_LEN + self.cfg.pmtu as usize + 3
    }

    /// Next PSN the responder expects (for tests and diagnostics).
    pub fn expected_psn(&self) -> u32 {
        self.resp.expected_psn().value()
    }

    /// Work requests posted and not yet completed, send and receive.
    pub fn outstanding(&self) -> (usize, usize) {
        (self.req.posted(), self.resp.rq.len())
    }

    fn reserve(&self) -> bool {
        // Every queued work request must find room for its completion, even if nobody polls.
        self.cq.len() + self.req.posted() + self.resp.receives_held() < self.cq.capacity()
    }

    /// [`reserve`](Self::reserve) with a SEND in progress always counted: a bound one compare
    /// cheaper for the postings' fast paths; what it refuses, the checked paths weigh exactly.
    #[inline(always)]
    fn reserve_bound(&self) -> bool {
        self.cq.len() + self.req.posted() + self.resp.rq.len() + 1 < self.cq.capacity()
    }

    /// Posts a SEND, WRITE, READ or atomic. The local range is checked now; the remote one by the peer.
    /// Always inlined: the fast path's checks and queueing land in the endpoint's posting, a
    /// refusal's error is built out of line.
    #[inline(always)]
    pub fn post_send(&mut self, wr: &SendRequest) -> Result<()> {
        if self.try_post_send(wr) {
            return Ok(());
        }
        self.post_send_checked(wr)
    }

    /// Posts `wr` when every check passes on the commonest path (a SEND, WRITE or READ of a
    /// valid length to a QP not in error), else false and nothing done: no error to build keeps
    /// its frame and registers small. [`post_send_checked`](Self::post_send_checked) says why not.
    /// Inlined into `post_send` / `post_recv`: no call, no frame.
    #[inline(always)]
    fn try_post_send(&mut self, wr: &SendRequest) -> bool {
        // The remote address is looked at in the arm that needs it: no flag kept for later.
        let access = match wr.op {
            SendOp::Send | SendOp::SendWithImm(_) => Access(0),
            SendOp::Write | SendOp::WriteWithImm(_) if wr.remote.is_some() => Access(0),
            SendOp::Read if wr.remote.is_some() => Access::LOCAL_WRITE,
            _ => return false,
        };
        // At most one path MTU (validated at creation: at most 4 KiB) is one packet and within
        // both limits: only a longer message pays for the division and the two compares.
        let npkts = if wr.len <= self.cfg.pmtu {
            1
        } else {
            let npkts = packet::packets_for(wr.len.into(), self.cfg.pmtu);
            if wr.len > 1 << 31 || npkts > MAX_MESSAGE_PACKETS {
                return false;
            }
            npkts
        };
        if self.req.is_full() || !self.reserve_bound() || matches!(self.state, QpState::Error(_)) {
            return false;
        }
        let Some(local) = self.local_span(wr.offset, wr.len.into(), access) else {
            return false;
        };
        self.req.push(*wr, local, npkts);
        true
    }

    /// The postings' fast range check: `len` bytes at `offset` of the local region, or `None`
    /// (the checked paths say why) when refused or `mem` is no longer the table it was copied from.
    #[inline(always)]
    fn local_span(&self, offset: u64, len: u64, need: Access) -> Option<Span> {
        let (table, r) = &self.local;
        if *table != self.mem.id() {
            return None;
        }
        MemoryTable::local_span_of(r, offset, len, need)
    }

    /// [`post_send`](Self::post_send) when its fast path declined: every check in order, and the
    /// error of the first that fails.
    #[cold]
    #[inline(never)]
    fn post_send_checked(&mut self, wr: &SendRequest) -> Result<()> {
        if self.req.is_full() || !self.reserve() {
            return Err(Error::QueueFull);
        }
        // One look at the operation gives the PSNs it occupies (counted once for the checks and
        // the send queue), whether it needs a remote address, and the rights it needs on its
        // local buffer: a match for each cost twice the compares and a spill.
        let (npkts, remote, access) = match wr.op {
            SendOp::Send | SendOp::SendWithImm(_) => (self.message_packets(wr)?, false, Access(0)),
            SendOp::Write | SendOp::WriteWithImm(_) => (self.message_packets(wr)?, true, Access(0)),
            SendOp::Read => (self.message_packets(wr)?, true, Access::LOCAL_WRITE),
            SendOp::FetchAdd(_) | SendOp::CompareSwap { .. } => {
                if wr.len != 8 {
                    return Err(Error::InvalidRequest(format!(
                        "atomic work request {} has length {}; atomics move exactly 8 bytes",
                        wr.wr_id, wr.len
                    )));
                }
                (1, true, Access::LOCAL_WRITE)
            }
        };
        if remote && wr.remote.is_none() {
            return Err(Error::InvalidRequest(format!(
                "work request {} ({:?}) needs a remote address and rkey",
                wr.wr_id, wr.op
            )));
        }
        let local = self.mem.send_buffer(self.cfg.local_lkey, wr, access)?;
        if self.flushed_at_once(wr.wr_id, wqe::completion_op(wr.op))? {
            return Ok(());
        }
        self.req.push(*wr, local, npkts);
        Ok(())
    }

    /// The PSNs a SEND, WRITE or READ of `wr.len` bytes occupies, or why it may not be posted.
    #[inline(always)]
    fn message_packets(&self, wr: &SendRequest) -> Result<u32> {
        if wr.len > 1 << 31 {
            return Err(Error::InvalidRequest(format!(
                "work request {} of {} bytes exceeds the 2 GiB RC message limit",
                wr.wr_id, wr.len
            )));
        }
        // PSN comparisons are signed 24-bit: one message must stay far below 2^23 PSNs.
        let npkts = packet::packets_for(wr.len.into(), self.cfg.pmtu);
        if npkts > MAX_MESSAGE_PACKETS {
            return Err(Error::InvalidRequest(format!(
                "work request {} of {} bytes needs more than {MAX_MESSAGE_PACKETS} packets at path MTU {}; use a larger MTU (-m) or a smaller size (-s)",
                wr.wr_id, wr.len, self.cfg.pmtu
            )));
        }
        Ok(npkts)
    }

    /// Posts a receive buffer for the next incoming SEND or WRITE-with-immediate.
    /// Always inlined: the fast path's checks and queueing land in the endpoint's posting, a
    /// refusal's error is built out of line.
    #[inline(always)]
    pub fn post_recv(&mut self, wr: &RecvRequest) -> Result<()> {
        if self.try_post_recv(wr) {
            return Ok(());
        }
        self.post_recv_checked(wr)
    }

    /// Posts `wr` when every check passes (room, a QP not in error, a writable local range),
    /// else false and nothing done. Inlined into `post_send` / `post_recv`: no call, no frame.
    #[inline(always)]
    fn try_post_recv(&mut self, wr: &RecvRequest) -> bool {
        if self.resp.rq.is_full()
            || !self.reserve_bound()
            || matches!(self.state, QpState::Error(_))
        {
            return false;
        }
        let Some(span) = self.local_span(wr.offset, wr.len.into(), Access::LOCAL_WRITE) else {
            return false;
        };
        self.resp.push_recv(wr, span);
        true
    }

    /// [`post_recv`](Self::post_recv) when [`try_post_recv`](Self::try_post_recv) declined: every
    /// check in order, and the error of the first that fails.
    #[cold]
    #[inline(never)]
    fn post_recv_checked(&mut self, wr: &RecvRequest) -> Result<()> {
        if self.resp.rq.is_full() || !self.reserve() {
            return Err(Error::QueueFull);
        }
        let span = self.mem.recv_buffer(self.cfg.local_lkey, wr)?;
        if self.flushed_at_once(wr.wr_id, crate::transport::CompletionOp::Recv)? {
            return Ok(());
        }
        self.resp.push_recv(wr, span);
        Ok(())
    }

    /// In the error state a posted request completes at once, flushed (as verbs does); true then.
    #[inline]
    fn flushed_at_once(&mut self, wr_id: u64, op: crate::transport::CompletionOp) -> Result<bool> {
        if let QpState::Error(_) = self.state {
            return self.flush_posted(wr_id, op);
        }
        Ok(false)
    }

    /// [`flushed_at_once`](Self::flushed_at_once) in the error state, out of the posting's way.
    #[cold]
    fn flush_posted(&mut self, wr_id: u64, op: crate::transport::CompletionOp) -> Result<bool> {
        self.cq
            .push_back(flushed(wr_id, op, self.cfg.cq_tag))
            .map_err(|_| Error::QueueFull)?;
        Ok(true)
    }

    /// Feeds one received packet: the bytes from the BTH to the end of the pad (no ICRC). Always
    /// inlined into the engine's dispatch, its one caller on the datapath: out of line it cost a
    /// call and a frame per packet (57 instructions a write round trip).
    #[inline(always)]
    pub fn handle_packet(&mut self, mut now: impl Now, ib: &[u8]) {
        self.counters.rx_packets += 1;
        // The connected peer's expected SEND, WRITE or READ, or an ACK or one-packet READ response,
        // straight from its bytes; anything else (and whatever those paths decline, unchanged) takes
        // the general path.
        if !self.try_fast(ib) && !self.try_fast_response(&mut now, ib) && !self.try_fast_segment(ib)
        {
            self.handle_general(now, ib);
        }
    }

    /// The responder's fast paths for an RDMA WRITE FIRST, MIDDLE or LAST (not in the error state):
    /// what a bandwidth stream of messages longer than the MTU mostly receives. True when it took
    /// the packet, false with nothing changed. Out of line, and asked after the other fast paths,
    /// so that a ping-pong's one-packet messages pay nothing for it.
    #[inline(never)]
    fn try_fast_segment(&mut self, ib: &[u8]) -> bool {
        let Some(&op) = ib.first() else {
            return false;
        };
        if matches!(self.state, QpState::Error(_)) {
            return false;
        }
        let (_, resp, mut ctx) = self.parts();
        // An arm each, `ends` a constant in it: the MIDDLE's and the LAST's checks are then
        // compiled apart, each without the other's.
        match Opcode(op) {
            Opcode::RC_RDMA_WRITE_FIRST => resp.fast_write_first(ib, &mut ctx),
            Opcode::RC_RDMA_WRITE_MIDDLE => resp.fast_write_next(ib, false, &mut ctx),
            Opcode::RC_RDMA_WRITE_LAST => resp.fast_write_next(ib, true, &mut ctx),
            _ => false,
        }
    }

    /// The requester, the responder and the context they run in (configuration, memory,
    /// completion queue, counters), borrowed apart from the rest of the queue pair.
    #[inline(always)]
    fn parts(&mut self) -> (&mut Requester, &mut Responder, Ctx<'_>) {
        let ctx = Ctx {
            cfg: &self.cfg,
            mem: &mut self.mem,
            cq: &mut self.cq,
            counters: &mut self.counters,
        };
        (&mut self.req, &mut self.resp, ctx)
    }

    /// The responder's fast path for the expected SEND or WRITE ONLY or READ request (not in the
    /// error state, where the general path drops every packet); true when it took the packet,
    /// false with nothing changed. Inlined with the responder's part into
    /// [`handle_packet`](Self::handle_packet), its one caller: one call a packet, not two. The
    /// opcode picks the arm at once (the responder's paths do not look at it again), and each arm
    /// borrows the context for itself: built ahead of the arms, it was spilled for every packet.
    #[inline(always)]
    fn try_fast(&mut self, ib: &[u8]) -> bool {
        let Some(&op) = ib.first() else {
            return false;
        };
        match Opcode(op) {
            Opcode::RC_RDMA_WRITE_ONLY if self.fast_ready() => {
                let (_, resp, mut ctx) = self.parts();
                resp.fast_write_only(ib, &mut ctx)
            }
            Opcode::RC_SEND_ONLY if self.fast_ready() => {
                let (_, resp, mut ctx) = self.parts();
                resp.fast_send_only(ib, &mut ctx)
            }
            Opcode::RC_RDMA_READ_REQUEST if self.fast_ready() => {
                let (_, resp, mut ctx) = self.parts();
                resp.fast_read(ib, &mut ctx)
            }
            _ => false,
        }
    }

    /// Whether the responder's fast paths may take a request: not in the error state, and
    /// [`Responder::fast_ready`].
    #[inline(always)]
    fn fast_ready(&self) -> bool {
        !matches!(self.state, QpState::Error(_)) && self.resp.fast_ready()
    }

    /// The requester's fast path for an ACK or a READ RESPONSE ONLY (a BTH and an AETH, then the
    /// payload): the headers the requester reads are taken straight from the bytes, without a whole
    /// [`IbRepr`]; true when it took the packet, false with nothing changed (any check the general
    /// path would count as a drop, or the error state). Inlined into
    /// [`handle_packet`](Self::handle_packet), its one caller.
    #[inline(always)]
    fn try_fast_response(&mut self, now: &mut impl Now, ib: &[u8]) -> bool {
        const BTH_AETH: usize = BthPacket::<&[u8]>::LEN + AethPacket::<&[u8]>::LEN;
        // A fixed-size view: the compiler then reads every header field without a bounds check.
        let Some(head) = ib.first_chunk::<BTH_AETH>() else {
            return false;
        };
        let bth = BthPacket::new_unchecked(&head[..]);
        let kind = match bth.opcode() {
            Opcode::RC_ACKNOWLEDGE => Response::Acknowledge,
            Opcode::RC_RDMA_READ_RESPONSE_ONLY => Response::Read(Seg::Only),
            _ => return false,
        };
        let Some(payload) = packet::fast_payload(ib, &bth, BTH_AETH, self.cfg.qpn) else {
            return false;
        };
        if matches!(self.state, QpState::Error(_)) {
            return false;
        }
        let aeth = AethPacket::new_unchecked(&head[BthPacket::<&[u8]>::LEN..]);
        let answer = Answer {
            psn: bth.psn(),
            aeth: Some(AethRepr::parse(&aeth)),
            atomic_ack_eth: None,
        };
        self.respond(now.now(), kind, &answer, payload);
        true
    }

    /// Hands a response to the requester; an outcome that ends the queue pair puts it in ERROR.
    #[inline]
    fn respond(&mut self, now: Instant, kind: Response, answer: &Answer, payload: &[u8]) {
        let (req, _, mut ctx) = self.parts();
        if let Some(status) = req.handle_response(now, kind, answer, payload, &mut ctx) {
            self.enter_error(status, false);
        }
    }

    /// [`handle_packet`](Self::handle_packet) without the fast paths (the packet is counted): parse,
    /// check, and hand to the requester or the responder. Out of line: the fast paths' packets
    /// then pay for no frame of its size.
    #[inline(never)]
    fn handle_general(&mut self, now: impl Now, ib: &[u8]) {
        let Ok((repr, payload)) = IbRepr::parse(ib) else {
            self.counters.drops.malformed += 1;
            return;
        };
        self.handle_parsed(now, &repr, payload);
    }

    /// Feeds one packet the caller already parsed (an endpoint demultiplexing by QPN does).
    pub(crate) fn handle_parsed(&mut self, mut now: impl Now, repr: &IbRepr, payload: &[u8]) {
        let bth = &repr.bth;
        if bth.tver != 0 || bth.pkey & 0x7fff != 0x7fff {
            self.counters.drops.malformed += 1;
            return;
        }
        if bth.dest_qp != self.cfg.qpn {
            self.counters.drops.unknown_qpn += 1;
            return;
        }
        if bth.opcode == Opcode::CNP {
            // The peer saw our packets CE-marked: DCQCN's reaction point cuts (ignored with
            // `--cc none`, and in the error state, where nothing is sent anyway).
            if self.state == QpState::Ready {
                self.req.on_cnp(now.now(), self.counters.tx_payload_bytes);
            }
            return;
        }
        let Some(kind) = packet::classify(bth.opcode) else {
            self.counters.drops.malformed += 1;
            return;
        };
        if let QpState::Error(_) = self.state {
            self.counters.drops.protocol.qp_error += 1;
            return;
        }
        match kind {
            Kind::Request(r) => {
                let (_, resp, mut ctx) = self.parts();
                if resp.handle_request(r, repr, payload, &mut ctx) {
                    self.enter_error(CompletionStatus::WrFlushError, true);
                }
            }
            Kind::Response(r) => self.respond(now.now(), r, &Answer::of(repr), payload),
        }
    }

    /// A packet this queue pair received arrived CE-marked (the caller read the IP header's ECN
    /// field): as DCQCN's notification point it owes the peer's queue pair a CNP, at most one per
    /// `np_min_time_between_cnps` (none with `--cc none`). The CNP leaves with the next
    /// transmission, ahead of everything else; the caller's egress gives it the CNP's class.
    pub fn on_congestion_experienced(&mut self, now: Instant) {
        if self.state == QpState::Ready {
            self.np.congestion_experienced(now.as_nanos());
        }
    }

    /// What its congestion control counted: CNPs sent and handled, rate cuts, its rate.
    pub fn cc_counters(&self) -> CcCounters {
        let mut c = CcCounters {
            np_cnp_sent: self.np.sent,
            ..CcCounters::default()
        };
        self.req.count_cc(&mut c);
        c
    }

    /// The first failure of this queue pair that no completion names: the request its responder
    /// refused with a fatal NAK, else a fatal NAK the peer sent for a PSN never sent from here.
    pub fn failure(&self) -> Option<super::QpFailure> {
        self.resp.refused.or(self.req.foreign_nak)
    }

    /// PSNs this queue pair's requester sent and has not seen acknowledged (0 in the error state).
    pub fn unacked_psns(&self) -> u32 {
        match self.state {
            QpState::Error(_) => 0,
            QpState::Ready => self.req.unacked(),
        }
    }

    /// The most PSNs the requester's window ever lets out unacknowledged.
    pub fn window_max(&self) -> u32 {
        self.req.window_max(self.cfg.max_unacked_psns)
    }

    /// Holds the requester to at most `cap` unacknowledged PSNs (an endpoint sharing one receive
    /// buffer among many queue pairs); answers, probes and selective repeat's resends still go.
    pub fn cap_unacked(&mut self, cap: u32) {
        self.req.set_cap(cap);
    }

    /// Writes the next packet to send into `buf` (at least `max_packet_len()` bytes) and returns its
    /// length, or `None` when nothing is ready. Call until `None` after every other call.
    pub fn poll_transmit(&mut self, mut now: impl Now, buf: &mut [u8]) -> Option<usize> {
        self.transmit(&mut now, buf, LoneAck::Send)
    }

    /// As [`poll_transmit`](Self::poll_transmit), but `None` rather than a plain ACK that is the only
    /// packet left: a caller that transmits again soon (its next poll, with whatever its application
    /// posts meanwhile) then sends that ACK, coalesced with any later one, after those packets and
    /// in the same batch, instead of a batch of its own now. The ACK stays queued. (The endpoint
    /// asks through [`poll_transmit_with`](Self::poll_transmit_with); the unit tests by this name.)
    #[cfg(test)]
    pub(crate) fn poll_transmit_holding_ack(
        &mut self,
        mut now: impl Now,
        buf: &mut [u8],
    ) -> Option<usize> {
        self.transmit(&mut now, buf, LoneAck::Hold)
    }

    /// [`poll_transmit`](Self::poll_transmit) with `LoneAck::Send`; with `LoneAck::Hold`, `None`
    /// rather than a plain ACK that is the only packet left (it stays queued for the next call).
    /// The endpoint's one call, into which the transmission is inlined.
    #[inline]
    pub(crate) fn poll_transmit_with(
        &mut self,
        mut now: impl Now,
        buf: &mut [u8],
        acks: LoneAck,
    ) -> Option<usize> {
        self.transmit(&mut now, buf, acks)
    }

    /// Whether a transmission with `acks` may find a packet now: false when nothing is queued (or,
    /// holding, only a lone ACK). Cheap, and it may say true when the requester turns out to be
    /// blocked (window, READ credits, RNR wait), for a caller that skips idle queue pairs. Always
    /// inlined: every poll asks it, and a call cost more than its few loads.
    #[inline(always)]
    pub fn has_transmit_work(&self, acks: LoneAck) -> bool {
        self.np.pending()
            || self.has_answers(acks)
            || (self.state == QpState::Ready && self.req.may_transmit())
    }

    /// As [`has_transmit_work`](Self::has_transmit_work) for a requester whose cap
    /// ([`cap_unacked`](Self::cap_unacked)) is reached: answers, a probe or a selective resend.
    pub fn has_uncapped_work(&self, acks: LoneAck) -> bool {
        self.np.pending()
            || self.has_answers(acks)
            || (self.state == QpState::Ready && self.req.may_resend())
    }

    /// The responder has something to send with `acks` (in any state: a fatal NAK goes in ERROR).
    #[inline]
    fn has_answers(&self, acks: LoneAck) -> bool {
        self.resp.has_answers() && !(acks == LoneAck::Hold && self.resp.only_ack_queued())
    }

    /// While `held` (a PFC pause of CNPs' priority), an owed CNP stays queued and the other
    /// packets go; it leaves first once released.
    pub(crate) fn hold_cnps(&mut self, held: bool) {
        self.cnps_held = held;
    }

    /// While `held` (a PFC pause of data's priority, or a NIC's line still busy), the requester's
    /// packets stay queued: its retransmission timer then does not take the silence for a loss.
    pub(crate) fn hold_requests(&mut self, held: bool) {
        self.req.hold(held);
    }

    /// Writes the CNP owed to the peer, if any and not held, into `buf`: all that may leave while
    /// a PFC pause holds every other packet's priority.
    pub(crate) fn poll_cnp(&mut self, buf: &mut [u8]) -> Option<usize> {
        if !self.np.pending() || self.cnps_held {
            return None;
        }
        self.np.take();
        self.counters.tx_packets += 1;
        let cnp = CnpRepr {
            dest_qp: self.cfg.remote_qpn,
        };
        Some(cnp.emit(buf))
    }

    #[inline]
    fn transmit(&mut self, now: &mut impl Now, buf: &mut [u8], acks: LoneAck) -> Option<usize> {
        if self.np.pending()
            && let Some(n) = self.poll_cnp(buf)
        {
            return Some(n);
        }
        let mut ctx = Ctx {
            cfg: &self.cfg,
            mem: &mut self.mem,
            cq: &mut self.cq,
            counters: &mut self.counters,
        };
        let n = if let QpState::Error(_) = self.state {
            // Only a queued fatal NAK still goes out.
            self.resp.poll_transmit(buf, &mut ctx)
        } else if self.resp.only_ack_queued() {
            // A lone ACK follows the requester's packets (up to a bound): IB lets an ACK be
            // coalesced and sent after later packets, and the peer waits for our requests' answers
            // first; the ACK then leaves in the same batch as they do.
            if self.ack_behind < ACK_BEHIND_MAX {
                if !self.req.quiet()
                    && let Some(n) = self.req.poll_transmit(now, buf, &mut ctx)
                {
                    self.ack_behind += 1;
                    self.counters.tx_packets += 1;
                    return Some(n);
                }
                if acks == LoneAck::Hold {
                    return None;
                }
            }
            self.resp.poll_transmit(buf, &mut ctx)
        } else if self.responder_turn && self.resp.has_answers() {
            // Without answers its turn is the requester's: no call to hear "nothing" first.
            self.resp
                .poll_transmit(buf, &mut ctx)
                .or_else(|| self.req.poll_transmit(now, buf, &mut ctx))
        } else if let sent @ Some(_) = self.req.poll_transmit(now, buf, &mut ctx) {
            // Not `or_else`: its option was taken apart and built again before the `?`.
            sent
        } else {
            self.resp.poll_transmit(buf, &mut ctx)
        }?;
        self.responder_turn = !self.responder_turn;
        self.ack_behind = 0;
        self.counters.tx_packets += 1;
        Some(n)
    }

    /// The next completion, oldest first.
    pub fn poll_completion(&mut self) -> Option<Completion> {
        self.cq.pop_front()
    }

    /// Its completion queue, which the endpoint's poll looks at and drains in place.
    #[inline(always)]
    pub(crate) fn cq(&mut self) -> &mut Ring<Completion> {
        &mut self.cq
    }

    /// When `handle_timeout` must be called next (on the clock of `now`), if ever.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.req.next_timeout()
    }

    /// Fires the timers that are due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        if let QpState::Error(_) = self.state {
            return;
        }
        let (req, _, mut ctx) = self.parts();
        if let Some(status) = req.handle_timeout(now, &mut ctx) {
            self.enter_error(status, false);
        }
    }

    /// Moves to ERROR: the oldest send fails with `status`, everything else is flushed.
    fn enter_error(&mut self, status: CompletionStatus, keep_answers: bool) {
        let (req, resp, mut ctx) = self.parts();
        req.fail_all(status, &mut ctx);
        resp.fail_all(keep_answers, &mut ctx);
        self.state = QpState::Error(status);
    }
}

fn flushed(wr_id: u64, op: crate::transport::CompletionOp, qp: u32) -> Completion {
    Completion {
        wr_id,
        qp,
        status: CompletionStatus::WrFlushError,
        op,
        byte_len: 0,
        imm: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::{Access, RemoteAddr};
    use crate::wire::Opcode;

    #[test]
    fn a_queue_pair_can_move_to_the_datapath_thread() {
        fn send<T: Send>() {}
        send::<Qp>();
    }

    fn pair() -> (Qp, Qp, RemoteAddr, RemoteAddr) {
        pair_with(|_| {})
    }

    /// Two connected queue pairs whose configurations `tune` adjusts.
    fn pair_with(tune: impl Fn(&mut QpConfig)) -> (Qp, Qp, RemoteAddr, RemoteAddr) {
        let qp = |qpn, peer, psn, peer_psn| {
            let mut mem = MemoryTable::new(qpn);
            let keys = mem.add_registered(4096, Access(1 | 2 | 4 | 8));
            let remote = RemoteAddr {
                addr: keys.va,
                rkey: keys.rkey,
            };
            let mut cfg = QpConfig::new(qpn, peer, psn, peer_psn, keys.lkey);
            tune(&mut cfg);
            let q = Qp::new(cfg, mem).unwrap();
            (q, remote)
        };
        let ((a, ra), (b, rb)) = (qp(0x11, 0x12, 1, 2), qp(0x12, 0x11, 2, 1));
        (a, b, ra, rb)
    }

    /// The postings check their local range in the table the queue pair holds now, not in the
    /// region it copied at creation: a table put in its place (the same key, a shorter region)
    /// refuses what the first allowed, sends and receives alike.
    #[test]
    fn postings_check_a_replaced_memory_table() {
        let (mut a, _b, _ra, rb) = pair();
        let mut mem = MemoryTable::new(a.qpn());
        let keys = mem.add_registered(64, Access(1 | 2 | 4 | 8));
        assert_eq!(keys.lkey, a.config().local_lkey);
        *a.memory_mut() = mem;
        let long = SendRequest::new(1, SendOp::Write, 0, 128, Some(rb));
        assert!(matches!(a.post_send(&long), Err(Error::InvalidRequest(_))));
        a.post_send(&SendRequest::new(2, SendOp::Write, 0, 64, Some(rb)))
            .unwrap();
        let recv = |len| RecvRequest {
            wr_id: 3,
            offset: 0,
            len,
        };
        assert!(matches!(
            a.post_recv(&recv(65)),
            Err(Error::InvalidRequest(_))
        ));
        a.post_recv(&recv(64)).unwrap();
        assert_eq!(a.outstanding(), (1, 1));
    }

    /// A pair where A's one-packet WRITE (wr_id 1) reached B, which owes an ACK: (A, B, A's region,
    /// a packet buffer).
    fn b_owes_an_ack() -> (Qp, Qp, RemoteAddr, Vec<u8>) {
        let (mut a, mut b, ra, rb) = pair();
        let now = Instant::ZERO;
        let mut buf = vec![0u8; a.max_packet_len()];
        a.post_send(&write(1, rb)).unwrap();
        let n = a.poll_transmit(now, &mut buf).unwrap();
        b.handle_packet(now, &buf[..n]);
        (a, b, ra, buf)
    }

    fn write(id: u64, to: RemoteAddr) -> SendRequest {
        SendRequest {
            wr_id: id,
            op: SendOp::Write,
            offset: 0,
            len: 2,
            remote: Some(to),
            signaled: true,
            inline: false,
        }
    }

    fn opcode(pkt: &[u8]) -> Opcode {
        IbRepr::parse(pkt).unwrap().0.bth.opcode
    }

    #[test]
    fn a_lone_ack_is_held_for_the_next_transmission_and_follows_the_requesters_packets() {
        let (mut a, mut b, ra, mut buf) = b_owes_an_ack();
        let now = Instant::ZERO;
        // B owes an ACK and has nothing else: holding, it sends nothing and keeps the ACK.
        assert!(!b.has_transmit_work(LoneAck::Hold));
        assert!(b.has_transmit_work(LoneAck::Send));
        assert_eq!(b.poll_transmit_holding_ack(now, &mut buf), None);
        assert_eq!(b.counters().acks_sent, 0);
        // B's own WRITE goes first, the ACK right after it, in the same transmission.
        b.post_send(&write(2, ra)).unwrap();
        assert!(b.has_transmit_work(LoneAck::Hold));
        let mut sent = Vec::new();
        while let Some(n) = b.poll_transmit(now, &mut buf) {
            sent.push(opcode(&buf[..n]));
            a.handle_packet(now, &buf[..n]);
        }
        assert_eq!(sent, [Opcode::RC_RDMA_WRITE_ONLY, Opcode::RC_ACKNOWLEDGE]);
        let c = a.poll_completion().expect("A's WRITE is acknowledged");
        assert_eq!((c.wr_id, c.status), (1, CompletionStatus::Success));
        // Without holding, a lone ACK goes at once.
        assert_eq!(a.poll_transmit_holding_ack(now, &mut buf), None);
        let n = a.poll_transmit(now, &mut buf).unwrap();
        assert_eq!(opcode(&buf[..n]), Opcode::RC_ACKNOWLEDGE);
        assert!(!a.has_transmit_work(LoneAck::Send));
    }

    #[test]
    fn a_lone_ack_waits_behind_at_most_sixteen_request_packets() {
        let (_, mut b, ra, mut buf) = b_owes_an_ack();
        let now = Instant::ZERO;
        for i in 0..40 {
            b.post_send(&write(10 + i, ra)).unwrap();
        }
        let mut sent = Vec::new();
        while let Some(n) = b.poll_transmit_holding_ack(now, &mut buf) {
            sent.push(opcode(&buf[..n]));
        }
        let ack = sent.iter().position(|&o| o == Opcode::RC_ACKNOWLEDGE);
        assert_eq!(ack, Some(ACK_BEHIND_MAX as usize), "{sent:?}");
        assert_eq!(sent.len(), 41);
    }

    #[test]
    fn the_clock_is_read_only_to_arm_a_timer_time_a_round_trip_or_take_an_answer() {
        // Go-back-N between two roceperf peers times the round trips of packets that ask for an ACK.
        let (mut a, mut b, _, rb) = pair_with(|c| c.gbn_fast = true);
        let mut buf = vec![0u8; a.max_packet_len()];
        let reads = std::cell::Cell::new(0u32);
        let clock = || {
            reads.set(reads.get() + 1);
            Instant::from_nanos(1_000)
        };
        let unsignaled = |id| SendRequest {
            signaled: false,
            ..write(id, rb)
        };
        a.post_send(&unsignaled(1)).unwrap();
        a.post_send(&unsignaled(2)).unwrap();
        a.post_send(&write(3, rb)).unwrap();
        // The first send arms the retransmission timer: one read.
        let n = a.poll_transmit(clock, &mut buf).unwrap();
        assert_eq!(reads.get(), 1);
        // A request arriving needs no time, nor does a send while the timer runs and asks nothing.
        b.handle_packet(clock, &buf[..n]);
        let n = a.poll_transmit(clock, &mut buf).unwrap();
        b.handle_packet(clock, &buf[..n]);
        assert_eq!(reads.get(), 1);
        // The signaled WRITE asks for an ACK: its round trip is timed.
        let n = a.poll_transmit(clock, &mut buf).unwrap();
        assert_eq!(reads.get(), 2);
        b.handle_packet(clock, &buf[..n]);
        // B's answer needs no time to leave; it does to arrive (round trip, timers).
        let n = b.poll_transmit(clock, &mut buf).expect("B acknowledges");
        assert_eq!(opcode(&buf[..n]), Opcode::RC_ACKNOWLEDGE);
        assert_eq!(reads.get(), 2);
        a.handle_packet(clock, &buf[..n]);
        assert!(reads.get() > 2);
        let c = a.poll_completion().expect("the signaled WRITE completes");
        assert_eq!((c.wr_id, c.status), (3, CompletionStatus::Success));
    }

    #[test]
    fn the_retransmission_timer_follows_what_is_in_flight_and_starts_at_the_question() {
        // Between roceperf peers (fast timeout): one packet out arms the timer at the ping-pong
        // floor (0.25 ms); a burst that fills the window past three packets moves the deadline to
        // the larger floor (1 ms) from the same start, rather than timing out a window's first
        // ACK 0.25 ms into a stream.
        let at = |us: u64| Instant::from_nanos(us * 1_000);
        let (mut a, _, _, rb) = pair_with(|c| c.gbn_fast = true);
        let mut buf = vec![0u8; a.max_packet_len()];
        for id in 0..8 {
            let wr = SendRequest {
                signaled: id == 7,
                ..write(id, rb)
            };
            a.post_send(&wr).unwrap();
        }
        a.poll_transmit(at(10), &mut buf).unwrap();
        assert_eq!(a.poll_timeout(), Some(at(260)), "the small floor");
        a.poll_transmit(at(10), &mut buf).unwrap();
        a.poll_transmit(at(10), &mut buf).unwrap();
        assert_eq!(a.poll_timeout(), Some(at(260)), "three out: still small");
        a.poll_transmit(at(10), &mut buf).unwrap();
        assert_eq!(
            a.poll_timeout(),
            Some(at(1_010)),
            "four out, more behind: 1 ms"
        );
        // Unsignaled WRITEs asked nothing; a pause holds the signaled one that asks (or the
        // pacer does), and it leaves long after: the peer's silence starts then.
        a.poll_transmit(at(20), &mut buf).unwrap();
        a.poll_transmit(at(20), &mut buf).unwrap();
        a.poll_transmit(at(20), &mut buf).unwrap();
        a.hold_requests(true);
        assert_eq!(a.poll_timeout(), Some(at(1_010)));
        a.hold_requests(false);
        a.poll_transmit(at(900), &mut buf).unwrap();
        assert_eq!(
            a.poll_timeout(),
            Some(at(1_900)),
            "restarted by the held question"
        );
        assert_eq!(a.counters().timeouts, 0);

        // A lazy ping-pong posts each unsignaled ping after the last pong: nothing waits behind
        // it, few are in the network at once, and a lost one still costs the small floor.
        let (mut a, _, _, rb) = pair_with(|c| c.gbn_fast = true);
        for id in 0..5 {
            let wr = SendRequest {
                signaled: false,
                ..write(id, rb)
            };
            a.post_send(&wr).unwrap();
            a.poll_transmit(at(10 + 40 * id), &mut buf).unwrap();
        }
        assert_eq!(a.poll_timeout(), Some(at(260)));
    }

    #[test]
    fn a_held_cnp_waits_while_other_packets_go_and_leaves_first_once_released() {
        let (mut a, _, _, rb) = pair_with(|c| c.cc = crate::params::CongestionControl::Dcqcn);
        let now = Instant::ZERO;
        let mut buf = vec![0u8; a.max_packet_len()];
        a.on_congestion_experienced(now);
        a.hold_cnps(true);
        assert_eq!(a.poll_cnp(&mut buf), None, "held");
        a.post_send(&write(1, rb)).unwrap();
        let n = a.poll_transmit(now, &mut buf).expect("the WRITE goes");
        assert_eq!(opcode(&buf[..n]), Opcode::RC_RDMA_WRITE_ONLY);
        assert_eq!(a.poll_transmit(now, &mut buf), None, "the CNP still waits");
        assert!(a.has_transmit_work(LoneAck::Send), "it is owed");
        a.hold_cnps(false);
        a.post_send(&write(2, rb)).unwrap();
        let n = a.poll_transmit(now, &mut buf).expect("the CNP goes first");
        assert_eq!(opcode(&buf[..n]), Opcode::CNP);
        assert_eq!(a.poll_cnp(&mut buf), None, "one CNP");
        assert_eq!(a.cc_counters().np_cnp_sent, 1);
    }

    #[test]
    fn a_nak_is_never_held() {
        let (mut a, mut b, _, rb) = pair();
        let now = Instant::ZERO;
        let mut buf = vec![0u8; a.max_packet_len()];
        a.post_send(&write(1, rb)).unwrap();
        a.post_send(&write(2, rb)).unwrap();
        let _lost = a.poll_transmit(now, &mut buf).unwrap();
        let n = a.poll_transmit(now, &mut buf).unwrap();
        b.handle_packet(now, &buf[..n]);
        // The gap is answered with a PSN sequence NAK, which leaves even when holding.
        let n = b
            .poll_transmit_holding_ack(now, &mut buf)
            .expect("the NAK goes");
        let aeth = IbRepr::parse(&buf[..n]).unwrap().0.aeth.unwrap();
        assert!(!matches!(aeth.kind(), crate::wire::AethKind::Ack { .. }));
    }

    /// Everything a received packet can change that anyone can see: counters, state, PSN, posted
    /// work, the region's bytes, then (drained) the completions and the packets it owes.
    fn observed(q: &mut Qp, rkey: u32) -> String {
        let mut buf = vec![0u8; q.max_packet_len()];
        let mut sent = Vec::new();
        while let Some(n) = q.poll_transmit(Instant::ZERO, &mut buf) {
            sent.push(buf[..n].to_vec());
        }
        let completions: Vec<_> = std::iter::from_fn(|| q.poll_completion()).collect();
        format!(
            "{:?} {:?} psn {} outstanding {:?} held {} failure {:?} memory {:?} completions {completions:?} sent {sent:?}",
            q.counters(),
            q.state(),
            q.expected_psn(),
            q.outstanding(),
            q.resp.receives_held(),
            q.failure(),
            q.memory().region_bytes(rkey),
        )
    }

    /// Feeds `pkt` to `fast` as `handle_packet` does (fast path, else the general path) and to
    /// `general` through the general path alone; whether the fast path took it.
    fn feed(fast: &mut Qp, general: &mut Qp, pkt: &[u8]) -> bool {
        fast.counters.rx_packets += 1;
        let took = fast.try_fast(pkt);
        if !took {
            fast.handle_general(Instant::ZERO, pkt);
        }
        general.counters.rx_packets += 1;
        general.handle_general(Instant::ZERO, pkt);
        took
    }

    /// Three responders alike (fast path, general path, and a twin that is left out of the packet
    /// under test) with the requester that feeds them and its packets' target, their region.
    fn responders(tune: impl Fn(&mut QpConfig) + Copy) -> (Qp, [Qp; 3], RemoteAddr) {
        let (a, fast, _, rb) = pair_with(tune);
        let (_, general, _, _) = pair_with(tune);
        let (_, twin, _, _) = pair_with(tune);
        (a, [fast, general, twin], rb)
    }

    /// The next packet `a` sends.
    fn next(a: &mut Qp) -> Vec<u8> {
        let mut buf = vec![0u8; a.max_packet_len()];
        let n = a.poll_transmit(Instant::ZERO, &mut buf).expect("a packet");
        buf[..n].to_vec()
    }

    fn send(id: u64, len: u32, signaled: bool) -> SendRequest {
        SendRequest {
            wr_id: id,
            op: SendOp::Send,
            offset: 0,
            len,
            remote: None,
            signaled,
            inline: false,
        }
    }

    fn read(id: u64, from: RemoteAddr, len: u32) -> SendRequest {
        SendRequest {
            wr_id: id,
            op: SendOp::Read,
            offset: 0,
            len,
            remote: Some(from),
            signaled: true,
            inline: false,
        }
    }

    fn recv(id: u64, len: u32) -> RecvRequest {
        RecvRequest {
            wr_id: id,
            offset: 64,
            len,
        }
    }

    #[test]
    fn the_fast_path_leaves_the_state_the_general_path_leaves_for_every_packet_it_takes() {
        let (mut a, [mut fast, mut general, _], rb) = responders(|_| {});
        let lkey = a.config().local_lkey;
        a.memory_mut().region_bytes_mut(lkey).unwrap()[..64]
            .iter_mut()
            .enumerate()
            .for_each(|(i, b)| *b = i as u8 + 1);
        for q in [&mut fast, &mut general] {
            for id in 0..3 {
                q.post_recv(&recv(100 + id, 64)).unwrap();
            }
        }
        let at = |off: u64| RemoteAddr {
            addr: rb.addr + off,
            ..rb
        };
        let requests = [
            // A signaled WRITE ONLY asks for an ACK; an unsignaled one does not.
            write(1, at(0)),
            SendRequest {
                signaled: false,
                len: 5,
                ..write(2, at(100))
            },
            // Zero bytes: no rkey is needed (rxe), nothing is written.
            SendRequest {
                len: 0,
                ..write(
                    3,
                    RemoteAddr {
                        addr: 0,
                        rkey: 0x5a5a,
                    },
                )
            },
            // A WRITE of the MTU exactly, to the region's last byte.
            SendRequest {
                len: 1024,
                ..write(4, at(4096 - 1024))
            },
            send(5, 2, true),
            send(6, 7, false),
            send(7, 0, true),
            // READs, of one response packet, of three, and of nothing.
            read(8, at(8), 2),
            read(9, at(0), 3000),
            read(
                10,
                RemoteAddr {
                    addr: 0,
                    rkey: 0x5a5a,
                },
                0,
            ),
        ];
        for (i, wr) in requests.iter().enumerate() {
            a.post_send(wr).unwrap();
            let pkt = next(&mut a);
            assert!(
                feed(&mut fast, &mut general, &pkt),
                "request {i} took the fast path"
            );
            assert_eq!(
                observed(&mut fast, rb.rkey),
                observed(&mut general, rb.rkey),
                "after request {i}"
            );
        }
        assert_eq!(fast.counters().rx_packets, requests.len() as u64);
        assert!(fast.memory().region_bytes(rb.rkey).unwrap()[..2] == [1, 2]);
    }

    #[test]
    fn what_the_fast_path_declines_is_left_untouched_for_the_general_path() {
        // Each case: a tuning, receives to post, the requests the requester posts, and which of
        // its packets (in the order sent, after `skip` delivered first) to feed and how to alter it.
        type Alter = fn(&mut Vec<u8>);
        struct Case {
            name: &'static str,
            tune: fn(&mut QpConfig),
            recvs: &'static [u32],
            requests: fn(RemoteAddr) -> Vec<SendRequest>,
            deliver_first: usize,
            pick: usize,
            alter: Alter,
        }
        let none: Alter = |_| {};
        let plain = |_: &mut QpConfig| {};
        let two_writes = |rb| vec![write(1, rb), write(2, rb)];
        let cases = [
            Case {
                name: "PSN ahead of the expected one",
                tune: plain,
                recvs: &[],
                requests: two_writes,
                deliver_first: 0,
                pick: 1,
                alter: none,
            },
            Case {
                name: "duplicate PSN",
                tune: plain,
                recvs: &[],
                requests: two_writes,
                deliver_first: 1,
                pick: 0,
                alter: none,
            },
            Case {
                name: "another queue pair's QPN",
                tune: plain,
                recvs: &[],
                requests: two_writes,
                deliver_first: 0,
                pick: 0,
                alter: |p| p[7] ^= 0x40,
            },
            Case {
                name: "BTH version",
                tune: plain,
                recvs: &[],
                requests: two_writes,
                deliver_first: 0,
                pick: 0,
                alter: |p| p[1] |= 1,
            },
            Case {
                name: "P_Key",
                tune: plain,
                recvs: &[],
                requests: two_writes,
                deliver_first: 0,
                pick: 0,
                alter: |p| p[3] = 0x7e,
            },
            Case {
                name: "truncated in the RETH",
                tune: plain,
                recvs: &[],
                requests: two_writes,
                deliver_first: 0,
                pick: 0,
                alter: |p| p.truncate(20),
            },
            Case {
                name: "truncated in the BTH",
                tune: plain,
                recvs: &[],
                requests: two_writes,
                deliver_first: 0,
                pick: 0,
                alter: |p| p.truncate(11),
            },
            Case {
                name: "pad longer than the payload",
                tune: plain,
                recvs: &[64],
                requests: |_| vec![send(1, 0, true)],
                deliver_first: 0,
                pick: 0,
                alter: |p| p[1] |= 0x30,
            },
            Case {
                name: "DMA length other than the payload",
                tune: plain,
                recvs: &[],
                requests: two_writes,
                deliver_first: 0,
                pick: 0,
                alter: |p| p[27] = 3,
            },
            Case {
                name: "rkey out of bounds",
                tune: plain,
                recvs: &[],
                requests: |rb| {
                    vec![write(
                        1,
                        RemoteAddr {
                            addr: rb.addr + 4095,
                            ..rb
                        },
                    )]
                },
                deliver_first: 0,
                pick: 0,
                alter: none,
            },
            Case {
                name: "unknown rkey",
                tune: plain,
                recvs: &[],
                requests: |rb| {
                    vec![write(
                        1,
                        RemoteAddr {
                            rkey: rb.rkey ^ 0x100,
                            ..rb
                        },
                    )]
                },
                deliver_first: 0,
                pick: 0,
                alter: none,
            },
            Case {
                name: "SEND with no receive posted",
                tune: plain,
                recvs: &[],
                requests: |_| vec![send(1, 2, true)],
                deliver_first: 0,
                pick: 0,
                alter: none,
            },
            Case {
                name: "SEND longer than its receive",
                tune: plain,
                recvs: &[4],
                requests: |_| vec![send(1, 8, true)],
                deliver_first: 0,
                pick: 0,
                alter: none,
            },
            Case {
                name: "a multi-packet SEND",
                tune: plain,
                recvs: &[3000],
                requests: |_| vec![send(1, 2000, true)],
                deliver_first: 0,
                pick: 0,
                alter: none,
            },
            Case {
                name: "a multi-packet SEND's last packet",
                tune: plain,
                recvs: &[3000],
                requests: |_| vec![send(1, 2000, true)],
                deliver_first: 1,
                pick: 1,
                alter: none,
            },
            Case {
                name: "a WRITE with immediate",
                tune: plain,
                recvs: &[64],
                requests: |rb| {
                    vec![SendRequest {
                        op: SendOp::WriteWithImm(7),
                        ..write(1, rb)
                    }]
                },
                deliver_first: 0,
                pick: 0,
                alter: none,
            },
            Case {
                name: "a READ out of bounds",
                tune: plain,
                recvs: &[],
                requests: |rb| {
                    vec![read(
                        1,
                        RemoteAddr {
                            addr: rb.addr + 4000,
                            ..rb
                        },
                        200,
                    )]
                },
                deliver_first: 0,
                pick: 0,
                alter: none,
            },
            Case {
                name: "a READ with a payload",
                tune: plain,
                recvs: &[],
                requests: |rb| vec![read(1, rb, 2)],
                deliver_first: 0,
                pick: 0,
                alter: |p| p.extend_from_slice(&[0; 4]),
            },
            Case {
                name: "a READ to a responder that takes none",
                tune: |c| c.max_dest_rd_atomic = 0,
                recvs: &[],
                requests: |rb| vec![read(1, rb, 2)],
                deliver_first: 0,
                pick: 0,
                alter: none,
            },
            Case {
                name: "a READ's DMA length beyond 2^31",
                tune: plain,
                recvs: &[],
                requests: |rb| vec![read(1, rb, 2)],
                deliver_first: 0,
                pick: 0,
                alter: |p| p[24] = 0x80,
            },
            Case {
                name: "an atomic",
                tune: plain,
                recvs: &[],
                requests: |rb| {
                    vec![SendRequest {
                        op: SendOp::FetchAdd(1),
                        len: 8,
                        ..write(1, rb)
                    }]
                },
                deliver_first: 0,
                pick: 0,
                alter: none,
            },
            Case {
                name: "the queue pair in error",
                tune: plain,
                recvs: &[],
                requests: |rb| {
                    vec![
                        write(
                            1,
                            RemoteAddr {
                                addr: rb.addr + 4095,
                                ..rb
                            },
                        ),
                        write(2, rb),
                    ]
                },
                deliver_first: 1,
                pick: 1,
                alter: none,
            },
            Case {
                name: "selective repeat",
                tune: |c| c.recovery = crate::params::Recovery::Sr,
                recvs: &[],
                requests: two_writes,
                deliver_first: 0,
                pick: 0,
                alter: none,
            },
        ];
        for case in cases {
            let (mut a, [mut fast, mut general, mut twin], rb) = responders(case.tune);
            for q in [&mut fast, &mut general, &mut twin] {
                for (i, &len) in case.recvs.iter().enumerate() {
                    q.post_recv(&recv(100 + i as u64, len)).unwrap();
                }
            }
            let mut pkts = Vec::new();
            for wr in (case.requests)(rb) {
                a.post_send(&wr).unwrap();
            }
            let mut buf = vec![0u8; a.max_packet_len()];
            while let Some(n) = a.poll_transmit(Instant::ZERO, &mut buf) {
                pkts.push(buf[..n].to_vec());
            }
            for pkt in &pkts[..case.deliver_first] {
                for q in [&mut fast, &mut general, &mut twin] {
                    q.handle_packet(Instant::ZERO, pkt);
                }
            }
            // What the first packets left is drained alike from all three.
            let before = observed(&mut fast, rb.rkey);
            assert_eq!(before, observed(&mut general, rb.rkey), "{}", case.name);
            assert_eq!(before, observed(&mut twin, rb.rkey), "{}", case.name);
            let mut pkt = pkts[case.pick].clone();
            (case.alter)(&mut pkt);
            assert!(!fast.try_fast(&pkt), "{}: declined", case.name);
            assert_eq!(
                observed(&mut fast, rb.rkey),
                observed(&mut twin, rb.rkey),
                "{}: untouched",
                case.name
            );
            fast.handle_packet(Instant::ZERO, &pkt);
            general.counters.rx_packets += 1;
            general.handle_general(Instant::ZERO, &pkt);
            assert_eq!(
                observed(&mut fast, rb.rkey),
                observed(&mut general, rb.rkey),
                "{}: as the general path",
                case.name
            );
        }
    }
}
