//! Selective repeat, the requester's half (IRN-like, issue 15; docs/lossy-roce.md).
//!
//! The responder keeps what arrives out of order and answers a gap with a NAK (PSN sequence error)
//! that names the first missing PSN and carries a SACK bitmap of what it holds beyond it. The
//! requester records what is known to have arrived (`Sack::got`) and resends only the rest: a PSN is
//! lost once something sent after it is known to have arrived (a later PSN SACKed or answered, beyond
//! a little reordering), and a resent PSN is lost again once something sent after the resend has
//! arrived. A timeout (the measured round trip, `rto.rs`) resends the oldest missing PSN as a
//! probe; the answer's SACKs tell the rest. READ responses are placed as they come;
//! a missing run is asked for again with a READ for just that run.
//!
//! [`Sack`] is the requester's sub-state for it: it records answers, finds losses and picks the next
//! resend, reading the send queue it is handed; the requester (`requester.rs`) completes work
//! requests, sends packets and runs the timers. What selective repeat adds on the wire is in
//! `packet.rs` ([`SrExt`](super::packet::SrExt)).

use super::psn::Psn;
use super::ring::Ring;
use super::wqe::{SendQueue, Wqe};
use crate::transport::SendOp;

/// Later PSNs that must be known to have arrived before a missing one counts as lost, so that a
/// little reordering does not look like loss (TCP's duplicate-ACK threshold).
const REORDER_THRESHOLD: u32 = 3;

/// One flag per PSN of a window that starts at `base`: PSNs before it count as set, PSNs beyond
/// the window as clear.
pub(super) struct PsnBits {
    words: Box<[u64]>,
    base: Psn,
}

impl PsnBits {
    /// A clear window of `window` PSNs (a power of two) from `base`.
    pub(super) fn new(window: u32, base: Psn) -> PsnBits {
        debug_assert!(window.is_power_of_two() && window >= 64);
        PsnBits {
            words: vec![0u64; window as usize / 64].into_boxed_slice(),
            base,
        }
    }

    /// PSNs the window covers.
    #[inline]
    pub(super) fn window(&self) -> u32 {
        self.words.len() as u32 * 64
    }

    /// True when `p` is in the window.
    #[inline]
    pub(super) fn covers(&self, p: Psn) -> bool {
        p.in_window(self.base, self.window())
    }

    #[inline]
    fn at(&self, p: Psn) -> (usize, u64) {
        let i = p.value() & (self.window() - 1);
        ((i / 64) as usize, 1 << (i % 64))
    }

    /// The flag of `p`.
    #[inline]
    pub(super) fn get(&self, p: Psn) -> bool {
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
    #[inline]
    pub(super) fn set(&mut self, p: Psn) -> bool {
        if !self.covers(p) {
            return false;
        }
        let (w, b) = self.at(p);
        self.words[w] |= b;
        true
    }

    /// Clears the flag of `p` (nothing outside the window).
    #[inline]
    pub(super) fn clear(&mut self, p: Psn) {
        if self.covers(p) {
            let (w, b) = self.at(p);
            self.words[w] &= !b;
        }
    }

    /// Moves the window to start at `to`, clearing the flags of the PSNs it leaves.
    #[inline]
    pub(super) fn advance(&mut self, to: Psn) {
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
    pub(super) fn reset(&mut self, base: Psn) {
        self.words.fill(0);
        self.base = base;
    }
}

/// The requester's selective-repeat state.
pub(super) struct Sack {
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
    resent_req: Ring<(Psn, Psn, u32)>,
    /// READ response runs asked for again, likewise.
    resent_resp: Ring<(Psn, Psn, u32)>,
    /// Per PSN of the window: the serial of its latest resend (which entry is current).
    marks: Box<[u32]>,
    /// Resends so far: each one's serial (a PSN resent twice at the same frontier, as happens
    /// when no new PSN may be sent, has two entries; only the latest is current).
    serial: u32,
}

/// What to send again next ([`Sack::next_resend`]): packet `k` of `wqe`, or for a READ a request
/// for `read_pkts` of its responses from `k` on.
#[derive(Clone, Copy, Debug)]
pub(super) struct Resend {
    /// The work request.
    pub(super) wqe: Wqe,
    /// Its packet (a READ: its first response packet asked for).
    pub(super) k: u32,
    /// A READ asks for a run of this many responses; `None`: all from `k` on, or not a READ.
    pub(super) read_pkts: Option<u32>,
    /// It asks again for READ responses (rather than resending a request the responder lacks).
    pub(super) response: bool,
}

impl Sack {
    /// Selective repeat over a window of `window` PSNs (rounded up to a power of two) from `psn`.
    pub(super) fn new(psn: Psn, window: u32) -> Sack {
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
            serial: 0,
        }
    }

    /// PSNs the state covers.
    #[inline]
    pub(super) fn window(&self) -> u32 {
        self.got.window()
    }

    /// True when the resend entry of `p` with `serial` is its latest.
    #[inline]
    fn current(&self, p: Psn, serial: u32) -> bool {
        self.marks[(p.value() & (self.window() - 1)) as usize] == serial
    }

    #[inline]
    fn mark(&mut self, p: Psn) -> &mut u32 {
        let i = p.value() & (self.window() - 1);
        &mut self.marks[i as usize]
    }

    /// Queues `p` to be sent again, once.
    #[inline]
    fn queue(&mut self, p: Psn) {
        if !self.queued.get(p) && self.queued.set(p) && self.retx.push_back(p).is_err() {
            // No room: the timeout will resend it.
            self.queued.clear(p);
        }
    }

    /// What has been heard of: the cumulative ACK, the highest PSNs known to have arrived.
    #[inline]
    pub(super) fn heard(&self) -> (Psn, Psn, Psn) {
        (self.cum, self.high_req, self.high_resp)
    }

    /// True when PSN `p` of `w` needs nothing more.
    #[inline]
    pub(super) fn done(&self, w: &Wqe, p: Psn) -> bool {
        match w.wr.op {
            SendOp::Send | SendOp::SendWithImm(_) | SendOp::Write | SendOp::WriteWithImm(_) => {
                p.before(self.cum) || self.got.get(p)
            }
            _ => self.got.get(p),
        }
    }

    /// The first PSN of `w` from `comp` on that still needs something (one past its last when
    /// none does).
    #[inline]
    pub(super) fn done_until(&self, w: &Wqe, comp: Psn) -> Psn {
        let end = w.last_psn().add(1);
        let mut p = comp.max_with(w.first_psn);
        while p.before(end) && self.done(w, p) {
            p = if p.before(self.cum) && !w.is_read_or_atomic() {
                self.cum.min_with(end)
            } else {
                p.add(1)
            };
        }
        p
    }

    /// Everything before `comp` is done and completed: the window moves on.
    #[inline]
    pub(super) fn advance(&mut self, comp: Psn) {
        self.got.advance(comp);
        self.queued.advance(comp);
    }

    /// Everything before `limit` reached the responder (`comp`: the oldest PSN not done,
    /// `sent_high`: one past the newest sent); the READs and atomics it passes are known asked.
    pub(super) fn cumulative(&mut self, limit: Psn, sq: &mut SendQueue, comp: Psn, sent_high: Psn) {
        if !limit.after(self.cum) || limit.after(sent_high) {
            return;
        }
        let start = sq.index_of(self.cum.max_with(comp)).unwrap_or(0);
        for i in start..sq.len() {
            let w = sq.get_mut(i).expect("in range");
            if !w.first_psn.before(limit) {
                break;
            }
            if w.is_read_or_atomic() {
                w.req_acked = true;
            }
        }
        self.cum = limit;
        if limit.after(self.high_req) {
            self.high_req = limit;
        }
    }

    /// The SACK bitmap of a NAK naming `epsn`: bit 7 of byte 0 is `epsn + 1`, and so on.
    pub(super) fn sack(&mut self, epsn: Psn, bitmap: &[u8], sq: &mut SendQueue, sent_high: Psn) {
        let mut hint = 0;
        for (i, byte) in bitmap.iter().enumerate() {
            for b in 0..8 {
                if byte & (0x80 >> b) == 0 {
                    continue;
                }
                let q = epsn.add(1 + (i * 8 + b) as u32);
                if !q.before(sent_high) {
                    return;
                }
                let Some(at) =
                    (hint..sq.len()).find(|&j| sq.get(j).is_some_and(|w| !q.after(w.last_psn())))
                else {
                    return;
                };
                hint = at;
                let w = sq.get_mut(at).expect("found");
                if !q.in_window(w.first_psn, w.npkts) {
                    continue;
                }
                if w.is_read_or_atomic() {
                    if q == w.first_psn {
                        w.req_acked = true;
                    }
                } else {
                    self.got.set(q);
                }
                if q.add(1).after(self.high_req) {
                    self.high_req = q.add(1);
                }
            }
        }
    }

    /// The atomic at `psn` was answered: true the first time (its original value is to be kept).
    #[inline]
    pub(super) fn atomic_answered(&mut self, psn: Psn) -> bool {
        if self.got.get(psn) {
            return false;
        }
        self.got.set(psn);
        true
    }

    /// READ response `psn` arrived: true when it is new and in the window (its data is to be
    /// placed), false when stale.
    #[inline]
    pub(super) fn read_response(&mut self, psn: Psn) -> bool {
        if self.got.get(psn) || !self.got.covers(psn) {
            return false;
        }
        self.got.set(psn);
        if psn.add(1).after(self.high_resp) {
            self.high_resp = psn.add(1);
        }
        true
    }

    /// Queues what is now known lost (`comp`: the oldest PSN not done): PSNs below the highest
    /// known to have arrived that have not, and resent ones overtaken by something sent after
    /// their resend.
    pub(super) fn find_losses(&mut self, sq: &SendQueue, comp: Psn) {
        let high_req = self.high_req.sub(REORDER_THRESHOLD);
        let mut p = self.scan_req.max_with(comp);
        while p.before(high_req) {
            let Some(w) = sq.started_at(p) else { break };
            let next = match w.wr.op {
                SendOp::Read => {
                    if p == w.first_psn && !w.req_acked && w.received == 0 {
                        self.queue(p);
                    }
                    w.last_psn().add(1)
                }
                SendOp::FetchAdd(_) | SendOp::CompareSwap { .. } => {
                    if !w.req_acked && !self.done(&w, p) {
                        self.queue(p);
                    }
                    p.add(1)
                }
                _ => {
                    if !self.done(&w, p) {
                        self.queue(p);
                    }
                    p.add(1)
                }
            };
            p = next;
        }
        if high_req.after(self.scan_req) {
            self.scan_req = high_req;
        }
        let high_resp = self.high_resp.sub(REORDER_THRESHOLD);
        let mut p = self.scan_resp.max_with(comp);
        while p.before(high_resp) {
            let Some(w) = sq.started_at(p) else { break };
            if matches!(w.wr.op, SendOp::Read) && (w.req_acked || w.received > 0) {
                if !self.done(&w, p) {
                    self.queue(p);
                }
                p = p.add(1);
            } else {
                p = w.last_psn().add(1);
            }
        }
        if high_resp.after(self.scan_resp) {
            self.scan_resp = high_resp;
        }
        // Resends overtaken by later traffic were lost too.
        for resp in [false, true] {
            loop {
                let (fifo, high) = if resp {
                    (&mut self.resent_resp, self.high_resp.sub(REORDER_THRESHOLD))
                } else {
                    (&mut self.resent_req, self.high_req.sub(REORDER_THRESHOLD))
                };
                let Some(&(p, mark, serial)) = fifo.front() else {
                    break;
                };
                if !high.after(mark) {
                    break;
                }
                fifo.pop_front();
                let current = self.current(p, serial);
                if !current || p.before(comp) {
                    continue;
                }
                let done = match sq.started_at(p) {
                    Some(w) => self.done(&w, p),
                    None => true,
                };
                if !done {
                    self.queue(p);
                }
            }
        }
        self.resends_overtaken_by_resends(sq, comp);
    }

    /// Request resends that a later resend overtook were lost: the resends leave in order on one
    /// path, so one that arrived says that every current one before it that has not, never will.
    /// When the window has no new PSN left to send, nothing overtakes a lost resend's send
    /// frontier (the rule above): without this rule each lost resend waited for its own timeout,
    /// and a flow through a full tail-drop queue stalled for timeout after timeout while the
    /// other flows took the port (issue 30's lossy-sr run; `sim::dumbbell`'s tail-drop test).
    fn resends_overtaken_by_resends(&mut self, sq: &SendQueue, comp: Psn) {
        let done = |s: &Sack, p: Psn| {
            p.before(comp)
                || match sq.started_at(p) {
                    Some(w) => s.done(&w, p),
                    None => true,
                }
        };
        let newest = (0..self.resent_req.len()).rev().find(|&k| {
            let &(p, _, serial) = self.resent_req.get(k).expect("in range");
            self.current(p, serial) && done(self, p)
        });
        let Some(newest) = newest else { return };
        for _ in 0..newest {
            let Some((p, _, serial)) = self.resent_req.pop_front() else {
                break;
            };
            if self.current(p, serial) && !done(self, p) {
                self.queue(p);
            }
        }
    }

    /// Queues everything sent and not known to have arrived, from `comp` (the oldest PSN not done)
    /// to `sent_high` (one past the newest sent): a timeout, or the end of an RNR wait.
    pub(super) fn resend_all(&mut self, sq: &SendQueue, comp: Psn, sent_high: Psn) {
        self.retx.clear();
        self.resent_req.clear();
        self.resent_resp.clear();
        self.queued.reset(comp);
        for w in sq.iter() {
            if !w.started {
                break;
            }
            let mut p = comp.max_with(w.first_psn);
            while p.in_window(w.first_psn, w.npkts) && p.before(sent_high) {
                if matches!(w.wr.op, SendOp::Read) && !w.req_acked && w.received == 0 {
                    self.queue(w.first_psn);
                    break;
                }
                if !self.done(w, p) {
                    self.queue(p);
                }
                p = p.add(1);
            }
        }
    }

    /// The next resend, if any (`comp`: the oldest PSN not done): one packet, or for a READ one
    /// request for a run of missing responses. The caller sends it and calls [`Sack::resent`].
    #[inline]
    pub(super) fn next_resend(&mut self, sq: &SendQueue, comp: Psn) -> Option<Resend> {
        loop {
            let p = self.retx.pop_front()?;
            if !self.queued.get(p) || p.before(comp) {
                continue;
            }
            self.queued.clear(p);
            let Some(w) = sq.started_at(p) else { continue };
            if self.done(&w, p) {
                continue;
            }
            let (k, read_pkts, response) = match w.wr.op {
                SendOp::Read if !w.req_acked && w.received == 0 => (0, None, false),
                SendOp::Read => {
                    let k = p.diff(w.first_psn) as u32;
                    let mut n = 1;
                    while k + n < w.npkts && !self.done(&w, p.add(n)) {
                        self.queued.clear(p.add(n));
                        n += 1;
                    }
                    (k, Some(n), true)
                }
                _ => (p.diff(w.first_psn) as u32, None, false),
            };
            return Some(Resend {
                wqe: w,
                k,
                read_pkts,
                response,
            });
        }
    }

    /// The resend of `at` left while `frontier` was one past the newest PSN sent: it is lost
    /// again once something sent after it arrives.
    #[inline]
    pub(super) fn resent(&mut self, at: Psn, frontier: Psn, response: bool) {
        self.serial = self.serial.wrapping_add(1);
        let serial = self.serial;
        *self.mark(at) = serial;
        let fifo = if response {
            &mut self.resent_resp
        } else {
            &mut self.resent_req
        };
        if fifo.is_full() {
            fifo.pop_front();
        }
        let _ = fifo.push_back((at, frontier, serial));
    }

    /// A fast timeout probes with `p`: it is queued afresh (an earlier entry for it goes stale).
    pub(super) fn probe(&mut self, p: Psn) {
        self.queued.clear(p);
        self.queue(p);
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
