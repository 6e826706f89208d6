//! Selective repeat, the requester's losses: what is known lost (SACKed or answered beyond it, or
//! a resend overtaken), what is resent next, and what a timeout does.

use crate::transport::{CompletionStatus, SendOp};

use super::super::ctx::Ctx;
use super::super::psn::Psn;
use super::super::requester::{Requester, RetryCause, Wqe};
use super::super::time::Now;
use super::super::timer::Timer;
use super::{PsnOrder, REORDER_THRESHOLD, Sack};

impl Requester {
    pub(super) fn sr(&mut self) -> &mut Sack {
        self.sr.as_mut().expect("selective repeat is on")
    }

    /// True when PSN `p` of `w` needs nothing more.
    pub(super) fn sr_done(&self, w: &Wqe, p: Psn) -> bool {
        let sr = self.sr.as_ref().expect("selective repeat is on");
        match w.wr.op {
            SendOp::Send | SendOp::SendWithImm(_) | SendOp::Write | SendOp::WriteWithImm(_) => {
                p.before(sr.cum) || sr.got.get(p)
            }
            _ => sr.got.get(p),
        }
    }

    /// Queues what is now known lost: PSNs below the highest known to have arrived that have not,
    /// and resent ones overtaken by something sent after their resend.
    pub(super) fn sr_find_losses(&mut self) {
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

    /// Resends everything not known to have arrived (a timeout, or the end of an RNR wait).
    pub(in crate::transport::soft::rc) fn sr_resend_all(&mut self) {
        let comp = self.comp_psn;
        self.rto.cancel();
        {
            let sr = self.sr();
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
        now: &mut impl Now,
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
            self.rto.cancel();
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

    /// A timeout under selective repeat: a fast one resends what is missing without spending the
    /// retry budget; past the fast ones, [`retry`](Requester::retry) as under go-back-N.
    pub(in crate::transport::soft::rc) fn sr_timeout(
        &mut self,
        ctx: &mut Ctx<'_>,
    ) -> Option<CompletionStatus> {
        let in_flight = self.sent_high.diff(self.comp_psn);
        if self.outstanding() && self.rto.fast_timeout(in_flight, ctx.cfg).is_some() {
            ctx.counters.retries += 1;
            self.rto.fast_spent += 1;
            self.noack_pkts = 0;
            self.timers.stop(Timer::Retransmit);
            // A probe, not the whole window: on a loaded host a fast timeout is as likely a peer
            // that was not scheduled as a loss, and its answer (with the SACKs of whatever did
            // arrive) shows what is really missing.
            let probe = self.probe_psn();
            self.rto.cancel();
            let sr = self.sr();
            sr.queued.clear(probe);
            sr.queue(probe);
            return None;
        }
        self.retry(RetryCause::Timeout, ctx)
    }
}
