//! Selective repeat, the requester's answers: ACKs, SACK NAKs, READ responses and atomic ACKs
//! recorded as what arrived, work requests completed as far as everything before them is done.

use crate::transport::soft::bytes::copy_payload;
use crate::transport::{CompletionStatus, SendOp};
use crate::wire::{AethKind, IbRepr, NakCode};

use super::super::completer::{Outcome, ack_kind};
use super::super::ctx::Ctx;
use super::super::packet::{self, Response};
use super::super::psn::Psn;
use super::super::requester::Requester;
use super::super::time::Instant;
use super::PsnOrder;

impl Requester {
    /// Everything before `limit` reached the responder.
    pub(super) fn sr_cumulative(&mut self, limit: Psn) {
        let sr = self.sr.as_ref().expect("selective repeat is on");
        if !limit.after(sr.cum) || limit.after(self.sent_high) {
            return;
        }
        let from = sr.cum;
        let start = self.wqe_index(from.max_with(self.comp_psn)).unwrap_or(0);
        for i in start..self.sq.len() {
            let w = self.sq.get_mut(i).expect("in range");
            if !w.first_psn.before(limit) {
                break;
            }
            if w.is_read_or_atomic() {
                w.req_acked = true;
            }
        }
        let sr = self.sr();
        sr.cum = limit;
        if limit.after(sr.high_req) {
            sr.high_req = limit;
        }
    }

    /// The SACK bitmap of a NAK naming `epsn`: bit 7 of byte 0 is `epsn + 1`, and so on.
    pub(super) fn sr_sack(&mut self, epsn: Psn, bitmap: &[u8]) {
        let mut hint = 0;
        for (i, byte) in bitmap.iter().enumerate() {
            for b in 0..8 {
                if byte & (0x80 >> b) == 0 {
                    continue;
                }
                let q = epsn.add(1 + (i * 8 + b) as u32);
                if !q.before(self.sent_high) {
                    return;
                }
                let Some(at) = (hint..self.sq.len())
                    .find(|&j| self.sq.get(j).is_some_and(|w| !q.after(w.last_psn())))
                else {
                    return;
                };
                hint = at;
                let w = self.sq.get_mut(at).expect("found");
                if !q.in_window(w.first_psn, w.npkts) {
                    continue;
                }
                if w.is_read_or_atomic() {
                    if q == w.first_psn {
                        w.req_acked = true;
                    }
                } else {
                    self.sr().got.set(q);
                }
                let sr = self.sr();
                if q.add(1).after(sr.high_req) {
                    sr.high_req = q.add(1);
                }
            }
        }
    }

    /// Completes what is done from the oldest work request on and moves `comp_psn` to the first PSN
    /// still missing.
    pub(super) fn sr_advance(&mut self, now: Instant, ctx: &mut Ctx<'_>) {
        let before = self.comp_psn;
        while let Some(w) = self.sq.front().copied() {
            if !w.started {
                break;
            }
            let end = w.last_psn().add(1);
            let mut p = self.comp_psn.max_with(w.first_psn);
            let cum = self.sr.as_ref().expect("on").cum;
            while p.before(end) && self.sr_done(&w, p) {
                p = if p.before(cum) && !w.is_read_or_atomic() {
                    cum.min_with(end)
                } else {
                    p.add(1)
                };
            }
            self.comp_psn = p;
            if p != end {
                break;
            }
            self.complete_head(CompletionStatus::Success, ctx);
        }
        if self.comp_psn != before {
            let comp = self.comp_psn;
            let sr = self.sr();
            sr.got.advance(comp);
            sr.queued.advance(comp);
            self.rto.fast_spent = 0;
            self.progress(now, ctx);
        }
    }

    /// A response under selective repeat. `Some(status)` ends the QP, as
    /// [`handle_response`](Requester::handle_response).
    pub(in crate::transport::soft::rc) fn sr_response(
        &mut self,
        now: Instant,
        kind: Response,
        repr: &IbRepr,
        payload: &[u8],
        ctx: &mut Ctx<'_>,
    ) -> Outcome {
        let psn = self.answering_psn(repr, ctx)?;
        let heard = self.sr_heard();
        match kind {
            Response::Acknowledge => {
                match ack_kind(repr, ctx)? {
                    AethKind::Ack { .. } => {
                        ctx.counters.acks_received += 1;
                        self.sr_cumulative(psn.add(1));
                    }
                    AethKind::Nak(NakCode::PsnSequenceError) => {
                        ctx.counters.naks_received.psn_seq += 1;
                        self.sr_cumulative(psn);
                        self.sr_sack(psn, payload);
                    }
                    AethKind::RnrNak { timer: code } => {
                        ctx.counters.naks_received.rnr += 1;
                        self.sr_cumulative(psn);
                        self.sr_advance(now, ctx);
                        if !self.outstanding() {
                            return None;
                        }
                        return self.rnr_wait(now, code, ctx);
                    }
                    AethKind::Nak(code) => {
                        // Fatal, exactly as under go-back-N.
                        self.sr_cumulative(psn);
                        self.sr_advance(now, ctx);
                        return Some(self.fatal_nak(code, ctx));
                    }
                    AethKind::Reserved(_) => {
                        ctx.counters.drops.protocol.bad_response += 1;
                        return None;
                    }
                }
            }
            Response::AtomicAcknowledge => {
                let (Some(aeth), Some(ack)) = (repr.aeth, repr.atomic_ack_eth) else {
                    ctx.counters.drops.protocol.bad_response += 1;
                    return None;
                };
                let w = self.wqe_index(psn).and_then(|i| self.sq.get(i).copied());
                let ok = matches!(aeth.kind(), AethKind::Ack { .. })
                    && w.is_some_and(|w| {
                        w.first_psn == psn
                            && matches!(w.wr.op, SendOp::FetchAdd(_) | SendOp::CompareSwap { .. })
                    });
                let Some(w) = w.filter(|_| ok) else {
                    ctx.counters.drops.protocol.stale_response += 1;
                    return None;
                };
                ctx.counters.acks_received += 1;
                self.sr_cumulative(psn);
                if !self.sr().got.get(psn) {
                    ctx.mem.span_mut(w.local)[..8].copy_from_slice(&ack.orig.to_ne_bytes());
                    self.sr().got.set(psn);
                }
            }
            Response::ReadResponse(_) => {
                if repr
                    .aeth
                    .is_some_and(|a| !matches!(a.kind(), AethKind::Ack { .. }))
                {
                    ctx.counters.drops.protocol.bad_response += 1;
                    return None;
                }
                let Some(i) = self.wqe_index(psn) else {
                    ctx.counters.drops.protocol.stale_response += 1;
                    return None;
                };
                let w = *self.sq.get(i).expect("found");
                if !matches!(w.wr.op, SendOp::Read) {
                    ctx.counters.drops.protocol.stale_response += 1;
                    return None;
                }
                let k = psn.diff(w.first_psn) as u32;
                let want = packet::payload_len(u64::from(w.wr.len), ctx.cfg.pmtu, k);
                if payload.len() != want {
                    ctx.counters.drops.protocol.bad_response += 1;
                    return None;
                }
                self.sr_cumulative(w.first_psn);
                if self.sr().got.get(psn) || !self.sr().got.covers(psn) {
                    ctx.counters.drops.protocol.stale_response += 1;
                    return None;
                }
                let start = k as usize * ctx.cfg.pmtu as usize;
                copy_payload(&mut ctx.mem.span_mut(w.local)[start..start + want], payload);
                let sr = self.sr();
                sr.got.set(psn);
                if psn.add(1).after(sr.high_resp) {
                    sr.high_resp = psn.add(1);
                }
                let w = self.sq.get_mut(i).expect("found");
                w.received += 1;
                w.req_acked = true;
            }
        }
        self.sr_find_losses();
        self.sr_advance(now, ctx);
        self.sr_time(now);
        // News of anything having arrived restarts the timer: the peer is alive and answering, and
        // what was lost meanwhile is found from the answers. A timeout is then a silence (a lost
        // tail, or a dead link), not a resend that waits behind a full window.
        if self.sr_heard() != heard {
            self.rto.fast_spent = 0;
            self.rearm(now, ctx);
        }
        None
    }

    /// What the requester has heard of: cumulative ACK, highest PSNs known to have arrived.
    pub(super) fn sr_heard(&self) -> (Psn, Psn, Psn, Psn) {
        let sr = self.sr.as_ref().expect("selective repeat is on");
        (self.comp_psn, sr.cum, sr.high_req, sr.high_resp)
    }

    /// Takes a round-trip sample when the packet being timed is known to have arrived.
    pub(super) fn sr_time(&mut self, now: Instant) {
        let Some(p) = self.rto.timed() else {
            return;
        };
        let done = p.before(self.comp_psn)
            || self
                .wqe_index(p)
                .and_then(|i| self.sq.get(i).copied())
                .is_some_and(|w| self.sr_done(&w, p));
        if done {
            self.rto.arrived(now);
        }
    }
}
