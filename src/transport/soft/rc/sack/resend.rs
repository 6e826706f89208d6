//! Selective repeat's requester side: what the SACKs say arrived, what to resend, probes and
//! READ re-asks ([`super`] has the wire extensions and the bookkeeping).

use crate::transport::{CompletionStatus, SendOp};
use crate::wire::{AethKind, IbRepr, NakCode};

use super::super::completer::Outcome;
use super::super::ctx::Ctx;
use super::super::packet::{self, Response};
use super::super::psn::Psn;
use super::super::requester::{Requester, RetryCause, Wqe};
use super::super::time::Instant;
use super::super::timer::{self, Timer};
use super::{REORDER_THRESHOLD, Sack};

impl Requester {
    /// The index in `sq` of the started work request holding `p`.
    fn wqe_index(&self, p: Psn) -> Option<usize> {
        let (mut lo, mut hi) = (0, self.sq.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            let w = self.sq.get(mid)?;
            if p.before(w.first_psn) {
                hi = mid;
            } else if p.in_window(w.first_psn, w.npkts) {
                return w.started.then_some(mid);
            } else {
                lo = mid + 1;
            }
        }
        None
    }

    fn sr(&mut self) -> &mut Sack {
        self.sr.as_mut().expect("selective repeat is on")
    }

    /// True when PSN `p` of `w` needs nothing more.
    fn sr_done(&self, w: &Wqe, p: Psn) -> bool {
        let sr = self.sr.as_ref().expect("selective repeat is on");
        match w.wr.op {
            SendOp::Send | SendOp::SendWithImm(_) | SendOp::Write | SendOp::WriteWithImm(_) => {
                p.before(sr.cum) || sr.got.get(p)
            }
            _ => sr.got.get(p),
        }
    }

    /// Everything before `limit` reached the responder.
    fn sr_cumulative(&mut self, limit: Psn) {
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
    fn sr_sack(&mut self, epsn: Psn, bitmap: &[u8]) {
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

    /// Queues what is now known lost: PSNs below the highest known to have arrived that have not,
    /// and resent ones overtaken by something sent after their resend.
    fn sr_find_losses(&mut self) {
        let comp = self.comp_psn;
        let (high_req, from) = {
            let sr = self.sr();
            (
                sr.high_req.sub(REORDER_THRESHOLD),
                sr.scan_req.max_with(comp),
            )
        };
        let mut p = from;
        while p.before(high_req) {
            let Some(i) = self.wqe_index(p) else { break };
            let w = *self.sq.get(i).expect("found");
            let next = match w.wr.op {
                SendOp::Read => {
                    if p == w.first_psn && !w.req_acked && w.received == 0 {
                        self.sr().queue(p);
                    }
                    w.last_psn().add(1)
                }
                SendOp::FetchAdd(_) | SendOp::CompareSwap { .. } => {
                    if !w.req_acked && !self.sr_done(&w, p) {
                        self.sr().queue(p);
                    }
                    p.add(1)
                }
                _ => {
                    if !self.sr_done(&w, p) {
                        self.sr().queue(p);
                    }
                    p.add(1)
                }
            };
            p = next;
        }
        let high_resp = {
            let sr = self.sr();
            if high_req.after(sr.scan_req) {
                sr.scan_req = high_req;
            }
            sr.high_resp.sub(REORDER_THRESHOLD)
        };
        let mut p = self.sr().scan_resp.max_with(comp);
        while p.before(high_resp) {
            let Some(i) = self.wqe_index(p) else { break };
            let w = *self.sq.get(i).expect("found");
            if matches!(w.wr.op, SendOp::Read) && (w.req_acked || w.received > 0) {
                if !self.sr_done(&w, p) {
                    self.sr().queue(p);
                }
                p = p.add(1);
            } else {
                p = w.last_psn().add(1);
            }
        }
        let sr = self.sr();
        if high_resp.after(sr.scan_resp) {
            sr.scan_resp = high_resp;
        }
        // Resends overtaken by later traffic were lost too.
        for resp in [false, true] {
            loop {
                let sr = self.sr.as_mut().expect("on");
                let (fifo, high) = if resp {
                    (&mut sr.resent_resp, sr.high_resp.sub(REORDER_THRESHOLD))
                } else {
                    (&mut sr.resent_req, sr.high_req.sub(REORDER_THRESHOLD))
                };
                let Some(&(p, mark)) = fifo.front() else {
                    break;
                };
                if !high.after(mark) {
                    break;
                }
                fifo.pop_front();
                let current = *sr.mark(p) == mark.value();
                if !current || p.before(comp) {
                    continue;
                }
                let done = match self.wqe_index(p) {
                    Some(i) => {
                        let w = *self.sq.get(i).expect("found");
                        self.sr_done(&w, p)
                    }
                    None => true,
                };
                if !done {
                    self.sr().queue(p);
                }
            }
        }
    }

    /// Completes what is done from the oldest work request on and moves `comp_psn` to the first PSN
    /// still missing.
    fn sr_advance(&mut self, now: Instant, ctx: &mut Ctx<'_>) {
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
            sr.fast_spent = 0;
            self.progress(now, ctx);
        }
    }

    /// Resends everything not known to have arrived (a timeout, or the end of an RNR wait).
    pub(in crate::transport::soft::rc) fn sr_resend_all(&mut self) {
        let comp = self.comp_psn;
        {
            let sr = self.sr();
            sr.probe = None;
            sr.retx.clear();
            sr.resent_req.clear();
            sr.resent_resp.clear();
            sr.queued.reset(comp);
        }
        for i in 0..self.sq.len() {
            let w = *self.sq.get(i).expect("in range");
            if !w.started {
                break;
            }
            let mut p = comp.max_with(w.first_psn);
            while p.in_window(w.first_psn, w.npkts) && p.before(self.sent_high) {
                if matches!(w.wr.op, SendOp::Read) && !w.req_acked && w.received == 0 {
                    self.sr().queue(w.first_psn);
                    break;
                }
                if !self.sr_done(&w, p) {
                    self.sr().queue(p);
                }
                p = p.add(1);
            }
        }
    }

    /// The next resend, if any: one packet, or for a READ one request for a run of missing responses.
    pub(in crate::transport::soft::rc) fn sr_poll_retransmit(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        ctx: &mut Ctx<'_>,
    ) -> Option<usize> {
        loop {
            let p = *self.sr.as_ref()?.retx.front()?;
            let comp = self.comp_psn;
            let sr = self.sr();
            sr.retx.pop_front();
            if !sr.queued.get(p) || p.before(comp) {
                continue;
            }
            sr.queued.clear(p);
            let Some(i) = self.wqe_index(p) else { continue };
            let w = *self.sq.get(i).expect("found");
            if self.sr_done(&w, p) {
                continue;
            }
            let frontier = self.sent_high;
            self.sr().probe = None;
            let (k, n, resp) = match w.wr.op {
                SendOp::Read if !w.req_acked && w.received == 0 => (0, None, false),
                SendOp::Read => {
                    let k = p.diff(w.first_psn) as u32;
                    let mut n = 1;
                    while k + n < w.npkts && !self.sr_done(&w, p.add(n)) {
                        self.sr().queued.clear(p.add(n));
                        n += 1;
                    }
                    (k, Some(n), true)
                }
                _ => (p.diff(w.first_psn) as u32, None, false),
            };
            let at = w.first_psn.add(k);
            let sent = self.emit(&w, k, at, n, true, buf, ctx);
            let sr = self.sr();
            *sr.mark(at) = frontier.value();
            let fifo = if resp {
                &mut sr.resent_resp
            } else {
                &mut sr.resent_req
            };
            if fifo.is_full() {
                fifo.pop_front();
            }
            let _ = fifo.push_back((at, frontier));
            ctx.counters.retransmitted_packets += 1;
            ctx.counters.retransmitted_bytes += sent.payload as u64;
            self.sent(now, sent.payload, ctx);
            return Some(sent.len);
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
        let psn = Psn::new(repr.bth.psn);
        if !psn.before(self.sent_high) || psn.before(self.comp_psn) {
            ctx.counters.drops.stale_response += 1;
            return None;
        }
        let heard = self.sr_heard();
        match kind {
            Response::Acknowledge => {
                let Some(aeth) = repr.aeth else {
                    ctx.counters.drops.bad_response += 1;
                    return None;
                };
                match aeth.kind() {
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
                        if ctx.cfg.rnr_retry != 7 {
                            if self.rnr_left == 0 {
                                return Some(CompletionStatus::RnrRetryExceeded);
                            }
                            self.rnr_left -= 1;
                        }
                        self.timers.stop(Timer::Retransmit);
                        let wait = timer::rnr_timer(code);
                        self.timers.set(Timer::Rnr, now.saturating_add(wait));
                        return None;
                    }
                    AethKind::Nak(code) => {
                        // Fatal, exactly as under go-back-N.
                        self.sr_cumulative(psn);
                        self.sr_advance(now, ctx);
                        return Some(self.fatal_nak(code, ctx));
                    }
                    AethKind::Reserved(_) => {
                        ctx.counters.drops.bad_response += 1;
                        return None;
                    }
                }
            }
            Response::AtomicAcknowledge => {
                let (Some(aeth), Some(ack)) = (repr.aeth, repr.atomic_ack_eth) else {
                    ctx.counters.drops.bad_response += 1;
                    return None;
                };
                let w = self.wqe_index(psn).and_then(|i| self.sq.get(i).copied());
                let ok = matches!(aeth.kind(), AethKind::Ack { .. })
                    && w.is_some_and(|w| {
                        w.first_psn == psn
                            && matches!(w.wr.op, SendOp::FetchAdd(_) | SendOp::CompareSwap { .. })
                    });
                let Some(w) = w.filter(|_| ok) else {
                    ctx.counters.drops.stale_response += 1;
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
                    ctx.counters.drops.bad_response += 1;
                    return None;
                }
                let Some(i) = self.wqe_index(psn) else {
                    ctx.counters.drops.stale_response += 1;
                    return None;
                };
                let w = *self.sq.get(i).expect("found");
                if !matches!(w.wr.op, SendOp::Read) {
                    ctx.counters.drops.stale_response += 1;
                    return None;
                }
                let k = psn.diff(w.first_psn) as u32;
                let want = packet::payload_len(u64::from(w.wr.len), ctx.cfg.pmtu, k);
                if payload.len() != want {
                    ctx.counters.drops.bad_response += 1;
                    return None;
                }
                self.sr_cumulative(w.first_psn);
                if self.sr().got.get(psn) || !self.sr().got.covers(psn) {
                    ctx.counters.drops.stale_response += 1;
                    return None;
                }
                let start = k as usize * ctx.cfg.pmtu as usize;
                ctx.mem.span_mut(w.local)[start..start + want].copy_from_slice(payload);
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
            self.sr().fast_spent = 0;
            self.rearm(now, ctx);
        }
        None
    }

    /// What the requester has heard of: cumulative ACK, highest PSNs known to have arrived.
    fn sr_heard(&self) -> (Psn, Psn, Psn, Psn) {
        let sr = self.sr.as_ref().expect("selective repeat is on");
        (self.comp_psn, sr.cum, sr.high_req, sr.high_resp)
    }

    /// Takes a round-trip sample when the packet being timed is known to have arrived.
    fn sr_time(&mut self, now: Instant) {
        let Some((p, sent)) = self.sr.as_ref().and_then(|sr| sr.probe) else {
            return;
        };
        let done = p.before(self.comp_psn)
            || self
                .wqe_index(p)
                .and_then(|i| self.sq.get(i).copied())
                .is_some_and(|w| self.sr_done(&w, p));
        if done {
            let sr = self.sr();
            sr.probe = None;
            sr.sample(now.as_nanos().saturating_sub(sent.as_nanos()));
        }
    }

    /// A timeout under selective repeat: a fast one resends what is missing without spending the
    /// retry budget; past the fast ones, [`retry`](Requester::retry) as under go-back-N.
    pub(in crate::transport::soft::rc) fn sr_timeout(
        &mut self,
        ctx: &mut Ctx<'_>,
    ) -> Option<CompletionStatus> {
        let in_flight = self.sent_high.diff(self.comp_psn);
        if self.outstanding()
            && let Some(sr) = &self.sr
            && sr.fast_timeout(in_flight, ctx).is_some()
        {
            ctx.counters.retries += 1;
            self.sr().fast_spent += 1;
            self.noack_pkts = 0;
            self.timers.stop(Timer::Retransmit);
            // A probe, not the whole window: on a loaded host a fast timeout is as likely a peer
            // that was not scheduled as a loss, and its answer (with the SACKs of whatever did
            // arrive) shows what is really missing.
            let comp = self.comp_psn;
            let sr = self.sr();
            sr.probe = None;
            sr.queued.clear(comp);
            sr.queue(comp);
            return None;
        }
        self.retry(RetryCause::Timeout, ctx)
    }
}

/// PSN helpers the scans use: the later or earlier of two PSNs in the 24-bit circle.
trait PsnOrder {
    fn max_with(self, other: Psn) -> Psn;
    fn min_with(self, other: Psn) -> Psn;
}

impl PsnOrder for Psn {
    fn max_with(self, other: Psn) -> Psn {
        if other.after(self) { other } else { self }
    }
    fn min_with(self, other: Psn) -> Psn {
        if other.before(self) { other } else { self }
    }
}
