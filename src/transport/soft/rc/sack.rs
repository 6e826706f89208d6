//! Selective repeat, the requester's half (IRN-like, issue 15; docs/lossy-roce.md).
//!
//! The responder keeps what arrives out of order and answers a gap with a NAK (PSN sequence error)
//! that names the first missing PSN and carries a SACK bitmap of what it holds beyond it. The
//! requester records what is known to have arrived (`Sack::got`) and resends only the rest: a PSN is
//! lost once something sent after it is known to have arrived (a later PSN SACKed or answered, beyond
//! a little reordering), and a resent PSN is lost again once something sent after the resend has
//! arrived. A timeout (the measured round trip, short while few packets are out) resends the oldest
//! missing PSN as a probe; the answer's SACKs tell the rest. READ responses are placed as they come;
//! a missing run is asked for again with a READ for just that run.
//!
//! On the wire (only between two sides that negotiated it): SEND packets carry 8 bytes before their
//! data (the receive they fill, counted from 0, and their offset in it), WRITE MIDDLE/LAST a RETH of
//! their own (this packet's address, the R_Key, the message length), and the SACK NAK a bitmap after
//! its AETH. [`SrExt`] reads and writes the first two.

use std::time::Duration;

use crate::transport::{CompletionStatus, SendOp};
use crate::wire::{AethKind, IbRepr, NakCode, RethPacket, RethRepr};

use super::completer::Outcome;
use super::ctx::Ctx;
use super::packet::{self, Request, Response};
use super::psn::Psn;
use super::requester::{Requester, RetryCause, Wqe};
use super::ring::Ring;
use super::time::Instant;
use super::timer::{self, Timer};

/// Bytes a SEND packet carries before its data under selective repeat.
pub const SEND_EXT_LEN: usize = 8;
/// Bytes a WRITE MIDDLE/LAST packet carries before its data under selective repeat.
pub const WRITE_EXT_LEN: usize = 16;
/// PSNs after the first missing one that a SACK NAK reports at most (512 bytes of bitmap; no more
/// than the path MTU's worth of bytes).
pub const SACK_MAX_PSNS: u32 = 4096;
/// Packets out at most for the short retransmission timeout.
const FEW_IN_FLIGHT: i32 = 3;
/// Later PSNs that must be known to have arrived before a missing one counts as lost, so that a
/// little reordering does not look like loss (TCP's duplicate-ACK threshold).
const REORDER_THRESHOLD: u32 = 3;

/// Selective repeat's extension before the data of a request packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SrExt {
    /// A SEND packet: the receive it fills (counted from 0 over the receive-consuming messages) and
    /// the offset of its data in the message.
    Send {
        /// Which receive.
        recv_seq: u32,
        /// Byte offset in the message.
        offset: u32,
    },
    /// A WRITE MIDDLE or LAST packet: the address of its own data, the R_Key, the message length.
    Write(RethRepr),
}

impl SrExt {
    /// Bytes on the wire.
    pub fn len(&self) -> usize {
        match self {
            SrExt::Send { .. } => SEND_EXT_LEN,
            SrExt::Write(_) => WRITE_EXT_LEN,
        }
    }

    /// Writes it at the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) {
        match self {
            SrExt::Send { recv_seq, offset } => {
                buf[..4].copy_from_slice(&recv_seq.to_be_bytes());
                buf[4..8].copy_from_slice(&offset.to_be_bytes());
            }
            SrExt::Write(reth) => reth.emit(buf),
        }
    }

    /// Splits the extension a request packet of kind `req` carries off its payload; `None` when the
    /// payload is too short to hold it. Packets without one give `(None, payload)`.
    pub fn split(req: Request, payload: &[u8]) -> Option<(Option<SrExt>, &[u8])> {
        match req {
            Request::Send(_) => {
                let (ext, data) = payload.split_at_checked(SEND_EXT_LEN)?;
                let word =
                    |i: usize| u32::from_be_bytes([ext[i], ext[i + 1], ext[i + 2], ext[i + 3]]);
                Some((
                    Some(SrExt::Send {
                        recv_seq: word(0),
                        offset: word(4),
                    }),
                    data,
                ))
            }
            Request::Write(seg) if !seg.starts() => {
                let (ext, data) = payload.split_at_checked(WRITE_EXT_LEN)?;
                let reth = RethRepr::parse(&RethPacket::new_unchecked(ext));
                Some((Some(SrExt::Write(reth)), data))
            }
            _ => Some((None, payload)),
        }
    }
}

/// One flag per PSN of a window that starts at `base`: PSNs before it count as set, PSNs beyond
/// the window as clear.
pub(super) struct PsnBits {
    words: Box<[u64]>,
    base: Psn,
}

impl PsnBits {
    /// A clear window of `window` PSNs (a power of two) from `base`.
    pub fn new(window: u32, base: Psn) -> PsnBits {
        debug_assert!(window.is_power_of_two() && window >= 64);
        PsnBits {
            words: vec![0u64; window as usize / 64].into_boxed_slice(),
            base,
        }
    }

    /// PSNs the window covers.
    pub fn window(&self) -> u32 {
        self.words.len() as u32 * 64
    }

    /// True when `p` is in the window.
    pub fn covers(&self, p: Psn) -> bool {
        p.in_window(self.base, self.window())
    }

    fn at(&self, p: Psn) -> (usize, u64) {
        let i = p.value() & (self.window() - 1);
        ((i / 64) as usize, 1 << (i % 64))
    }

    /// The flag of `p`.
    pub fn get(&self, p: Psn) -> bool {
        if p.before(self.base) {
            return true;
        }
        if !self.covers(p) {
            return false;
        }
        let (w, b) = self.at(p);
        self.words[w] & b != 0
    }

    /// Sets the flag of `p`; false (and nothing set) when `p` is outside the window.
    pub fn set(&mut self, p: Psn) -> bool {
        if !self.covers(p) {
            return false;
        }
        let (w, b) = self.at(p);
        self.words[w] |= b;
        true
    }

    /// Clears the flag of `p` (nothing outside the window).
    pub fn clear(&mut self, p: Psn) {
        if self.covers(p) {
            let (w, b) = self.at(p);
            self.words[w] &= !b;
        }
    }

    /// Moves the window to start at `to`, clearing the flags of the PSNs it leaves.
    pub fn advance(&mut self, to: Psn) {
        let n = to.diff(self.base);
        if n <= 0 {
            return;
        }
        if n as u32 >= self.window() {
            self.words.fill(0);
        } else {
            let mut p = self.base;
            while p != to {
                let (w, b) = self.at(p);
                self.words[w] &= !b;
                p = p.add(1);
            }
        }
        self.base = to;
    }

    /// Clears every flag and starts the window at `base`.
    pub fn reset(&mut self, base: Psn) {
        self.words.fill(0);
        self.base = base;
    }
}

/// The requester's selective-repeat state.
pub struct Sack {
    /// PSNs done: SEND/WRITE PSNs the responder SACKed, READ response PSNs received, atomics
    /// answered. (SEND/WRITE PSNs below `cum` are done too.)
    got: PsnBits,
    /// PSNs waiting in `retx` (an entry whose flag was cleared is stale).
    queued: PsnBits,
    /// Every request PSN before it reached the responder (its cumulative ACK).
    cum: Psn,
    /// One past the highest request PSN known to have reached the responder.
    high_req: Psn,
    /// One past the highest READ response PSN received.
    high_resp: Psn,
    /// Losses below these have been looked for.
    scan_req: Psn,
    scan_resp: Psn,
    /// PSNs to send again, oldest first.
    retx: Ring<Psn>,
    /// Request PSNs resent, with the send frontier then, in the order resent.
    resent_req: Ring<(Psn, Psn)>,
    /// READ response runs asked for again, likewise.
    resent_resp: Ring<(Psn, Psn)>,
    /// Per PSN of the window: the send frontier of its latest resend (which entry is current).
    marks: Box<[u32]>,
    /// Short timeouts spent without progress.
    fast_spent: u8,
    /// The packet being timed for the round-trip estimate, and when it left (never a resent one:
    /// Karn's rule).
    probe: Option<(Psn, Instant)>,
    /// Smoothed round trip and its mean deviation, ns (RFC 6298); 0 before the first sample.
    srtt_ns: u64,
    rttvar_ns: u64,
}

impl Sack {
    /// Selective repeat over a window of `window` PSNs (rounded up to a power of two) from `psn`.
    pub fn new(psn: Psn, window: u32) -> Sack {
        let window = window.clamp(64, 1 << 16).next_power_of_two();
        Sack {
            got: PsnBits::new(window, psn),
            queued: PsnBits::new(window, psn),
            cum: psn,
            high_req: psn,
            high_resp: psn,
            scan_req: psn,
            scan_resp: psn,
            retx: Ring::with_capacity(window as usize),
            resent_req: Ring::with_capacity(window as usize),
            resent_resp: Ring::with_capacity(window as usize),
            marks: vec![0u32; window as usize].into_boxed_slice(),
            fast_spent: 0,
            probe: None,
            srtt_ns: 0,
            rttvar_ns: 0,
        }
    }

    /// Times the new packet `psn` sent at `now`, unless one is being timed already.
    pub fn time(&mut self, psn: Psn, now: Instant) {
        if self.probe.is_none() {
            self.probe = Some((psn, now));
        }
    }

    /// A round-trip sample (RFC 6298's smoothing).
    fn sample(&mut self, rtt_ns: u64) {
        if self.srtt_ns == 0 {
            self.srtt_ns = rtt_ns;
            self.rttvar_ns = rtt_ns / 2;
        } else {
            let dev = self.srtt_ns.abs_diff(rtt_ns);
            self.rttvar_ns = (3 * self.rttvar_ns + dev) / 4;
            self.srtt_ns = (7 * self.srtt_ns + rtt_ns) / 8;
        }
    }

    /// PSNs the state covers.
    pub fn window(&self) -> u32 {
        self.got.window()
    }

    fn mark(&mut self, p: Psn) -> &mut u32 {
        let i = p.value() & (self.window() - 1);
        &mut self.marks[i as usize]
    }

    /// Queues `p` to be sent again, once.
    fn queue(&mut self, p: Psn) {
        if !self.queued.get(p) && self.queued.set(p) && self.retx.push_back(p).is_err() {
            // No room: the timeout will resend it.
            self.queued.clear(p);
        }
    }

    /// The shorter retransmission timeout while fast retries are left, or `None` once it would reach
    /// the configured ACK timeout: from then on the QP backs off and spends its retry budget as under
    /// go-back-N, so a stalled peer is given as long as ever. It is the measured round trip plus four
    /// deviations (RFC 6298), at least `sr_rto_small_ns` with at most three packets out and
    /// `sr_rto_ns` otherwise, doubled per timeout without progress.
    pub fn fast_timeout(&self, in_flight: i32, ctx: &Ctx<'_>) -> Option<Duration> {
        let floor = if in_flight <= FEW_IN_FLIGHT {
            ctx.cfg.sr_rto_small_ns
        } else {
            ctx.cfg.sr_rto_ns
        };
        let base = floor.max(self.srtt_ns + 4 * self.rttvar_ns);
        let t = Duration::from_nanos(base.checked_shl(u32::from(self.fast_spent))?);
        let limit = timer::ack_timeout(ctx.cfg.timeout)?;
        (base > 0 && t < limit).then_some(t)
    }
}

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
    pub(super) fn sr_resend_all(&mut self) {
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
    pub(super) fn sr_poll_retransmit(
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
    pub(super) fn sr_response(
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
    pub(super) fn sr_timeout(&mut self, ctx: &mut Ctx<'_>) -> Option<CompletionStatus> {
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

#[cfg(test)]
mod tests;
