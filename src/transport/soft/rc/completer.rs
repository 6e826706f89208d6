//! The completer: the requester's side of ACKs, NAKs, READ responses and atomic ACKs.
//!
//! ACKs are cumulative. A NAK or a READ response also acknowledges everything before its PSN. An ACK
//! that passes a READ/atomic still waiting for its data means those responses were lost (an
//! implied NAK) and starts a retry at once, as rxe does.

use crate::transport::soft::bytes::copy_payload;
use crate::transport::{CompletionStatus, SendOp};
use crate::wire::{AethKind, IbRepr, NakCode};

use super::ctx::Ctx;
use super::packet::{self, Response, Seg};
use super::psn::Psn;
use super::requester::{Requester, RetryCause};
use super::time::Instant;
use super::timer::{self, Timer};

/// What a response did to the QP.
pub type Outcome = Option<CompletionStatus>;

/// The AETH of an Acknowledge; `None`, counted as a bad response, when it carries none.
#[inline]
pub(super) fn ack_kind(repr: &IbRepr, ctx: &mut Ctx<'_>) -> Option<AethKind> {
    let kind = repr.aeth.map(|aeth| aeth.kind());
    if kind.is_none() {
        ctx.counters.drops.protocol.bad_response += 1;
    }
    kind
}

impl Requester {
    /// The PSN of response `repr` when it can still answer something outstanding; `None`, counted as
    /// stale, otherwise.
    #[inline]
    pub(super) fn answering_psn(&self, repr: &IbRepr, ctx: &mut Ctx<'_>) -> Option<Psn> {
        let psn = Psn::new(repr.bth.psn);
        // Only PSNs in [comp_psn - 1, sent_high) can answer anything still outstanding; an ACK
        // for comp_psn - 1 is a plain duplicate.
        if !psn.before(self.sent_high) || psn.before(self.comp_psn) {
            ctx.counters.drops.protocol.stale_response += 1;
            return None;
        }
        Some(psn)
    }

    /// Handles one response packet. `Some(status)` means the QP must enter ERROR with `status` for the
    /// oldest work request.
    pub(crate) fn handle_response(
        &mut self,
        now: Instant,
        kind: Response,
        repr: &IbRepr,
        payload: &[u8],
        ctx: &mut Ctx<'_>,
    ) -> Outcome {
        if self.sr.is_some() {
            return self.sr_response(now, kind, repr, payload, ctx);
        }
        let psn = self.answering_psn(repr, ctx)?;
        match kind {
            Response::Acknowledge => {
                match ack_kind(repr, ctx)? {
                    AethKind::Ack { .. } => {
                        ctx.counters.acks_received += 1;
                        let outcome = self.acknowledge_before(now, psn.add(1), ctx);
                        self.gbn_probe_answered(psn);
                        outcome
                    }
                    AethKind::Nak(NakCode::PsnSequenceError) => {
                        ctx.counters.naks_received.psn_seq += 1;
                        if let Some(e) = self.acknowledge_before(now, psn, ctx) {
                            return Some(e);
                        }
                        self.retry(RetryCause::NakSequence, ctx)
                    }
                    AethKind::RnrNak { timer: code } => {
                        ctx.counters.naks_received.rnr += 1;
                        if let Some(e) = self.acknowledge_before(now, psn, ctx) {
                            return Some(e);
                        }
                        if !self.outstanding() {
                            return None;
                        }
                        if let Some(e) = self.rnr_wait(now, code, ctx) {
                            return Some(e);
                        }
                        // Then go back to the refused packet.
                        self.seek(self.comp_psn);
                        None
                    }
                    AethKind::Nak(code) => {
                        let status = self.fatal_nak(code, ctx);
                        if let Some(e) = self.acknowledge_before(now, psn, ctx) {
                            return Some(e);
                        }
                        Some(status)
                    }
                    AethKind::Reserved(_) => {
                        ctx.counters.drops.protocol.bad_response += 1;
                        None
                    }
                }
            }
            Response::AtomicAcknowledge => {
                let (Some(aeth), Some(ack)) = (repr.aeth, repr.atomic_ack_eth) else {
                    ctx.counters.drops.protocol.bad_response += 1;
                    return None;
                };
                if !matches!(aeth.kind(), AethKind::Ack { .. }) {
                    ctx.counters.drops.protocol.bad_response += 1;
                    return None;
                }
                if let Some(e) = self.acknowledge_before(now, psn, ctx) {
                    return Some(e);
                }
                let w = self.sq.front()?;
                if w.first_psn != psn
                    || !w.started
                    || !matches!(w.wr.op, SendOp::FetchAdd(_) | SendOp::CompareSwap { .. })
                {
                    ctx.counters.drops.protocol.stale_response += 1;
                    return None;
                }
                let local = w.local;
                ctx.counters.acks_received += 1;
                ctx.mem.span_mut(local)[..8].copy_from_slice(&ack.orig.to_ne_bytes());
                self.comp_psn = psn.add(1);
                self.complete_head(CompletionStatus::Success, ctx);
                if self.req_psn.before(self.comp_psn) {
                    self.seek(self.comp_psn);
                }
                self.progress(now, ctx);
                None
            }
            Response::ReadResponse(seg) => self.read_response(now, psn, seg, repr, payload, ctx),
        }
    }

    fn read_response(
        &mut self,
        now: Instant,
        psn: Psn,
        seg: Seg,
        repr: &IbRepr,
        payload: &[u8],
        ctx: &mut Ctx<'_>,
    ) -> Outcome {
        if repr
            .aeth
            .is_some_and(|a| !matches!(a.kind(), AethKind::Ack { .. }))
        {
            ctx.counters.drops.protocol.bad_response += 1;
            return None;
        }
        if let Some(e) = self.acknowledge_before(now, psn, ctx) {
            return Some(e);
        }
        let pmtu = ctx.cfg.pmtu;
        let Some(w) = self.sq.front_mut() else {
            ctx.counters.drops.protocol.stale_response += 1;
            return None;
        };
        if !matches!(w.wr.op, SendOp::Read) || !w.started {
            ctx.counters.drops.protocol.stale_response += 1;
            return None;
        }
        // In order only: a later response means an earlier one was lost; the timer recovers.
        if psn != w.first_psn.add(w.received) {
            ctx.counters.drops.protocol.stale_response += 1;
            return None;
        }
        let k = w.received;
        let last = k + 1 == w.npkts;
        // A resumed READ may be answered MIDDLE/LAST (rxe) or FIRST/ONLY (a fresh response to the
        // reissued request); accept both, as long as the packet's end matches the message's end.
        let fits = match seg {
            Seg::First => !last,
            Seg::Middle => !last && k > 0,
            Seg::Last => last && k > 0,
            Seg::Only => last,
        };
        let want = packet::payload_len(u64::from(w.wr.len), pmtu, k);
        if !fits || payload.len() != want {
            ctx.counters.drops.protocol.bad_response += 1;
            return None;
        }
        let start = k as usize * pmtu as usize;
        let local = w.local;
        w.received += 1;
        copy_payload(&mut ctx.mem.span_mut(local)[start..start + want], payload);
        self.comp_psn = psn.add(1);
        if last {
            self.complete_head(CompletionStatus::Success, ctx);
        }
        if self.req_psn.before(self.comp_psn) {
            self.seek(self.comp_psn);
        }
        self.progress(now, ctx);
        None
    }

    /// Everything before `limit` was received by the responder: completes the SEND/WRITE work
    /// requests that end before it. A READ/atomic that ends before it without its data means its
    /// responses were lost: go back N (implied NAK).
    fn acknowledge_before(&mut self, now: Instant, limit: Psn, ctx: &mut Ctx<'_>) -> Outcome {
        let before = self.comp_psn;
        while let Some(w) = self.sq.front() {
            if !w.started || !w.first_psn.before(limit) {
                break;
            }
            if w.is_read_or_atomic() {
                if w.last_psn().before(limit) {
                    self.comp_psn = w.first_psn.add(w.received);
                    if self.comp_psn != before {
                        self.progress(now, ctx);
                    }
                    return self.retry(RetryCause::ImpliedNak, ctx);
                }
                break;
            }
            if !w.last_psn().before(limit) {
                // Part of a long SEND/WRITE is acknowledged.
                if limit.after(self.comp_psn) {
                    self.comp_psn = limit;
                }
                break;
            }
            self.comp_psn = w.last_psn().add(1);
            self.complete_head(CompletionStatus::Success, ctx);
        }
        if self.comp_psn != before {
            if self.req_psn.before(self.comp_psn) {
                self.seek(self.comp_psn);
            }
            self.progress(now, ctx);
        }
        None
    }

    /// Forward progress: fresh retry budgets, a round-trip sample when the timed packet is now
    /// acknowledged, the loss-reactive window's growth, and a fresh timer.
    pub(super) fn progress(&mut self, now: Instant, ctx: &mut Ctx<'_>) {
        self.retry_left = ctx.cfg.retry_cnt;
        self.rnr_left = ctx.cfg.rnr_retry;
        self.started_retry = false;
        self.rto.fast_spent = 0;
        if self.rto.timed().is_some_and(|p| p.before(self.comp_psn)) {
            self.rto.arrived(now);
        }
        if let Some(g) = &mut self.gbn {
            g.probe_due = false; // not a silence any more
            g.acknowledged(self.comp_psn, now);
        }
        self.rearm(now, ctx);
    }

    /// An RNR NAK with timer `code`: spends an RNR retry (7 means unlimited) and waits the peer's RNR
    /// time instead of the retransmit timeout; the QP's error once the retries are spent.
    pub(super) fn rnr_wait(&mut self, now: Instant, code: u8, ctx: &mut Ctx<'_>) -> Outcome {
        if ctx.cfg.rnr_retry != 7 {
            if self.rnr_left == 0 {
                return Some(CompletionStatus::RnrRetryExceeded);
            }
            self.rnr_left -= 1;
        }
        self.timers.stop(Timer::Retransmit);
        let wait = timer::rnr_timer(code);
        self.timers.set(Timer::Rnr, now.saturating_add(wait));
        None
    }

    /// Counts a NAK that ends the QP and gives the status its oldest work request fails with.
    pub(super) fn fatal_nak(&mut self, code: NakCode, ctx: &mut Ctx<'_>) -> CompletionStatus {
        match code {
            NakCode::InvalidRequest => {
                ctx.counters.naks_received.invalid_request += 1;
                CompletionStatus::RemoteInvalidRequestError
            }
            NakCode::RemoteAccessError => {
                ctx.counters.naks_received.remote_access += 1;
                CompletionStatus::RemoteAccessError
            }
            _ => {
                ctx.counters.naks_received.remote_operational += 1;
                CompletionStatus::RemoteOperationalError
            }
        }
    }
}
