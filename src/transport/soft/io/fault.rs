//! The fault injector: [`Impaired`] wraps any [`Device`] and loses, duplicates, reorders, delays or
//! corrupts its packets as an [`ImpairConfig`] says, one RoCE packet at a time, in each direction
//! (smoltcp's `phy::FaultInjector`, for batches).
//!
//! The engine writes each packet straight into the device's slot (for UDP, into a GSO super-datagram)
//! and the verdict is drawn after it wrote, so the generator is consumed by real packets only and a
//! run replays exactly from its seed. A kept packet costs one or two random draws and nothing else; a
//! lost one is never queued; a held one (reordered or delayed) is copied into a preallocated hold
//! queue and queued again when its time comes. Nothing allocates per packet.

use super::IoError;
use super::device::Device;
use super::impair::{ImpairConfig, ImpairStats, Impairment};
use crate::transport::rng::SplitMix64;
use crate::transport::soft::rc::Instant;

/// Packets a direction may hold back for `reorder` at once (beyond it, packets are not reordered).
const REORDER_SLOTS: usize = 256;
/// Packets a direction may hold back for `delay` at once (beyond it, sending waits).
const DELAY_SLOTS: usize = 1024;

/// A probability as a threshold on a uniform u64, so the per-packet test is an integer compare.
fn threshold(p: f64) -> u64 {
    if p >= 1.0 {
        u64::MAX
    } else {
        (p * u64::MAX as f64) as u64
    }
}

/// Held packets in release order: a ring of preallocated slots.
struct HoldQueue<T: Copy> {
    mem: Box<[u8]>,
    slot: usize,
    entries: Box<[Option<(T, usize, Instant)>]>,
    head: usize,
    len: usize,
}

impl<T: Copy> HoldQueue<T> {
    fn new(slots: usize, slot: usize) -> HoldQueue<T> {
        HoldQueue {
            mem: vec![0u8; slots * slot].into_boxed_slice(),
            slot,
            entries: vec![None; slots].into_boxed_slice(),
            head: 0,
            len: 0,
        }
    }

    fn is_full(&self) -> bool {
        self.len == self.entries.len()
    }

    /// Copies `pkt` in, to leave at `until`; false when full (or too long).
    fn push(&mut self, to: T, pkt: &[u8], until: Instant) -> bool {
        if self.is_full() || pkt.len() > self.slot {
            return false;
        }
        let i = (self.head + self.len) % self.entries.len();
        self.mem[i * self.slot..i * self.slot + pkt.len()].copy_from_slice(pkt);
        self.entries[i] = Some((to, pkt.len(), until));
        self.len += 1;
        true
    }

    /// When the first held packet leaves.
    fn next_at(&self) -> Option<Instant> {
        (self.len > 0)
            .then(|| self.entries[self.head].map(|e| e.2))
            .flatten()
    }

    /// The first held packet and when it was due, if it is due at `now`.
    fn due(&self, now: Instant) -> Option<(T, &[u8], Instant)> {
        let (to, len, until) = self.entries[self.head].filter(|_| self.len > 0)?;
        (until <= now).then(|| (to, &self.mem[self.head * self.slot..][..len], until))
    }

    fn pop(&mut self) {
        self.entries[self.head] = None;
        self.head = (self.head + 1) % self.entries.len();
        self.len -= 1;
    }
}

/// What happens to one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    /// Goes on, maybe with a flipped bit, maybe twice, now or (`hold`) later.
    Pass {
        corrupt: bool,
        dup: bool,
        hold: Option<Hold>,
    },
    /// Never arrives.
    Drop,
}

/// When a packet held back goes on: at `until`, `reordered` (held by `reorder_delay`) or only delayed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Hold {
    until: Instant,
    reordered: bool,
}

/// The impairment of one direction: thresholds, the loss process, the generator, the hold queues.
struct Fault<T: Copy> {
    loss: u64,
    /// Gilbert–Elliott: enter the bad (losing) state / leave it, as thresholds; `None`: Bernoulli.
    burst: Option<(u64, u64)>,
    bad: bool,
    duplicate: u64,
    reorder: u64,
    corrupt: u64,
    delay_ns: u64,
    reorder_ns: u64,
    rng: SplitMix64,
    /// A copy of a packet about to be duplicated or corrupted on receive.
    scratch: Box<[u8]>,
    delayed: Option<HoldQueue<T>>,
    reordered: Option<HoldQueue<T>>,
    stats: ImpairStats,
}

impl<T: Copy> Fault<T> {
    fn new(imp: &Impairment, seed: u64, max_packet: usize) -> Fault<T> {
        let mut f = Fault {
            loss: 0,
            burst: None,
            bad: false,
            duplicate: 0,
            reorder: 0,
            corrupt: 0,
            delay_ns: 0,
            reorder_ns: 0,
            rng: SplitMix64::new(seed),
            scratch: vec![0u8; max_packet].into_boxed_slice(),
            delayed: (imp.delay_ns > 0).then(|| HoldQueue::new(DELAY_SLOTS, max_packet)),
            reordered: (imp.reorder > 0.0).then(|| HoldQueue::new(REORDER_SLOTS, max_packet)),
            stats: ImpairStats::default(),
        };
        f.configure(imp, max_packet);
        f
    }

    /// Takes `imp`'s probabilities and times, keeping the generator and what is held.
    fn configure(&mut self, imp: &Impairment, max_packet: usize) {
        self.loss = threshold(imp.loss);
        // Simple Gilbert: all of the bad state's packets are lost, none of the good state's. A mean
        // burst of b packets leaves the bad state with 1/b; the long-run loss L then needs an entry
        // probability of L / (b (1 - L)).
        self.burst = (imp.burst > 1.0 && imp.loss > 0.0).then(|| {
            let leave = 1.0 / imp.burst;
            let enter = imp.loss * leave / (1.0 - imp.loss);
            (threshold(enter), threshold(leave))
        });
        self.duplicate = threshold(imp.duplicate);
        self.reorder = threshold(imp.reorder);
        self.corrupt = threshold(imp.corrupt);
        self.delay_ns = imp.delay_ns;
        self.reorder_ns = imp.reorder_hold_ns();
        if imp.delay_ns > 0 && self.delayed.is_none() {
            self.delayed = Some(HoldQueue::new(DELAY_SLOTS, max_packet));
        }
        if imp.reorder > 0.0 && self.reordered.is_none() {
            self.reordered = Some(HoldQueue::new(REORDER_SLOTS, max_packet));
        }
    }

    #[inline]
    fn hit(&mut self, threshold: u64) -> bool {
        threshold != 0 && self.rng.next_u64() < threshold
    }

    /// The fate of the next packet.
    #[inline]
    fn decide(&mut self, now: Instant) -> Verdict {
        let lost = match self.burst {
            Some((enter, leave)) => {
                let r = self.rng.next_u64();
                self.bad = if self.bad { r >= leave } else { r < enter };
                self.bad
            }
            None => self.hit(self.loss),
        };
        if lost {
            return Verdict::Drop;
        }
        let corrupt = self.hit(self.corrupt);
        let dup = self.hit(self.duplicate);
        let reordered =
            self.hit(self.reorder) && !self.reordered.as_ref().is_some_and(|q| q.is_full());
        let hold = (reordered || self.delay_ns > 0).then(|| {
            let ns = self.delay_ns + if reordered { self.reorder_ns } else { 0 };
            Hold {
                until: Instant::from_nanos(now.as_nanos().saturating_add(ns)),
                reordered,
            }
        });
        Verdict::Pass { corrupt, dup, hold }
    }

    /// Flips one bit of `pkt`.
    fn flip(&mut self, pkt: &mut [u8]) {
        if pkt.is_empty() {
            return;
        }
        let r = self.rng.next_u64();
        pkt[(r as usize >> 3) % pkt.len()] ^= 1 << (r & 7);
        self.stats.corrupted += 1;
    }

    /// Holds `pkt` as `hold` says; false when there is no room.
    fn hold(&mut self, to: T, pkt: &mut [u8], hold: Hold) -> bool {
        let Hold { until, reordered } = hold;
        let q = if reordered {
            self.reordered.as_mut()
        } else {
            self.delayed.as_mut()
        };
        let held = q.is_some_and(|q| q.push(to, pkt, until));
        if held {
            if reordered {
                self.stats.reordered += 1;
            } else {
                self.stats.delayed += 1;
            }
        }
        held
    }

    /// The queue whose first packet is due first at `now`, if any is.
    fn due_queue(&mut self, now: Instant) -> Option<&mut HoldQueue<T>> {
        let d = self.delayed.as_ref().and_then(|q| q.next_at());
        let r = self.reordered.as_ref().and_then(|q| q.next_at());
        let pick_reordered = match (d, r) {
            (Some(d), Some(r)) => r < d,
            (None, Some(_)) => true,
            _ => false,
        };
        let q = if pick_reordered {
            self.reordered.as_mut()
        } else {
            self.delayed.as_mut()
        }?;
        q.due(now).is_some().then_some(q)
    }

    fn next_at(&self) -> Option<Instant> {
        let d = self.delayed.as_ref().and_then(|q| q.next_at());
        let r = self.reordered.as_ref().and_then(|q| q.next_at());
        d.into_iter().chain(r).min()
    }

    fn held(&self) -> usize {
        self.delayed.as_ref().map_or(0, |q| q.len) + self.reordered.as_ref().map_or(0, |q| q.len)
    }

    /// True when a packet that must be delayed finds no room: sending waits.
    fn delay_full(&self) -> bool {
        self.delayed.as_ref().is_some_and(|q| q.is_full())
    }
}

/// Queues the held transmit packets that are due into `dev`, as long as it has room; each leaves as
/// of the time it was due (what a simulated wire counts its delay from).
fn release_tx<D: Device>(f: &mut Fault<D::Addr>, dev: &mut D, now: Instant) {
    while !dev.tx_full() {
        let Some(q) = f.due_queue(now) else { return };
        let (to, pkt, due) = q.due(now).expect("due_queue checked");
        let len = pkt.len();
        dev.tx_push(due, to, |buf| {
            buf[..len].copy_from_slice(pkt);
            Some(len)
        });
        q.pop();
    }
}

/// A device whose packets are impaired as configured; without impairment it is the device itself
/// plus one branch per call.
pub struct Impaired<D: Device> {
    dev: D,
    tx: Option<Box<Fault<D::Addr>>>,
    rx: Option<Box<Fault<D::Meta>>>,
}

impl<D: Device> Impaired<D> {
    /// `dev`, impaired as `cfg` says (`None`: not at all).
    pub fn new(dev: D, cfg: Option<&ImpairConfig>) -> Impaired<D> {
        let mut d = Impaired {
            dev,
            tx: None,
            rx: None,
        };
        if let Some(c) = cfg {
            d.configure(c);
        }
        d
    }

    /// Takes `cfg`'s impairment (the simulated link may change it between packets), keeping each
    /// direction's generator and what it holds.
    pub fn configure(&mut self, cfg: &ImpairConfig) {
        let max = self.dev.max_packet();
        let (tx, rx) = (cfg.tx(), cfg.rx);
        match &mut self.tx {
            Some(f) => f.configure(&tx, max),
            None if !tx.is_none() => self.tx = Some(Box::new(Fault::new(&tx, cfg.seed, max))),
            None => {}
        }
        // The receive direction draws from its own generator, so adding rx: keys leaves the
        // transmit decisions as they were.
        let rx_seed = crate::transport::rng::mix(cfg.seed ^ 0x7278_5f69_6d70_6169);
        match &mut self.rx {
            Some(f) => f.configure(&rx, max),
            None if !rx.is_none() => self.rx = Some(Box::new(Fault::new(&rx, rx_seed, max))),
            None => {}
        }
    }

    /// The device inside.
    pub fn inner(&self) -> &D {
        &self.dev
    }

    /// The device inside, mutably.
    pub fn inner_mut(&mut self) -> &mut D {
        &mut self.dev
    }

    /// What was done to transmitted and to received packets.
    pub fn stats(&self) -> (ImpairStats, ImpairStats) {
        (
            self.tx
                .as_ref()
                .map_or_else(ImpairStats::default, |f| f.stats),
            self.rx
                .as_ref()
                .map_or_else(ImpairStats::default, |f| f.stats),
        )
    }

    /// Packets held back now, both directions.
    pub fn held(&self) -> usize {
        self.tx.as_ref().map_or(0, |f| f.held()) + self.rx.as_ref().map_or(0, |f| f.held())
    }
}

impl<D: Device> Impaired<D> {
    /// The device itself when received packets go unimpaired: a caller that knows its type may
    /// then receive from it without the impaired path beside.
    #[inline(always)]
    pub(crate) fn plain_rx(&mut self) -> Option<&mut D> {
        match self.rx {
            None => Some(&mut self.dev),
            Some(_) => None,
        }
    }
}

impl<D: Device> Device for Impaired<D> {
    type Addr = D::Addr;
    type Meta = D::Meta;

    fn max_packet(&self) -> usize {
        self.dev.max_packet()
    }

    #[inline]
    fn tx_full(&self) -> bool {
        self.dev.tx_full() || self.tx.as_ref().is_some_and(|f| f.delay_full())
    }

    #[inline]
    fn tx_pending(&self) -> usize {
        self.dev.tx_pending() + self.tx.as_ref().map_or(0, |f| f.held())
    }

    #[inline]
    fn tx_idle(&self) -> bool {
        self.dev.tx_idle() && self.tx.as_ref().is_none_or(|f| f.held() == 0)
    }

    /// Only forwards, the impaired path out of line (`tx_push_impaired`), as the receive does:
    /// the plain path then calls `fill` from the device's own sites alone.
    #[inline]
    fn tx_push(
        &mut self,
        now: Instant,
        to: D::Addr,
        fill: impl FnOnce(&mut [u8]) -> Option<usize>,
    ) -> bool {
        match self.tx.as_deref_mut() {
            None => self.dev.tx_push(now, to, fill),
            Some(f) => tx_push_impaired(f, &mut self.dev, now, to, fill),
        }
    }

    // Always: one transmission flushes once, and a call costs it more than the few checks.
    #[inline(always)]
    fn flush(&mut self, now: Instant) -> Result<(), IoError> {
        if let Some(f) = self.tx.as_deref_mut() {
            release_tx(f, &mut self.dev, now);
        }
        self.dev.flush(now)
    }

    /// Only forwards, the impaired path out of line (`receive_impaired`): the plain path, which
    /// every receive of an unimpaired run takes (idle ones included), then compiles without a
    /// second copy of the device's receive loop beside it. Always inlined, so that the device's
    /// own inline part (the UDP receive syscall) lands in the caller's poll.
    #[inline(always)]
    fn receive(
        &mut self,
        now: Instant,
        each: impl FnMut(D::Meta, &[u8]),
    ) -> Result<usize, IoError> {
        self.receive_lazy(now, move || each)
    }

    #[inline(always)]
    fn receive_lazy<F: FnMut(D::Meta, &[u8])>(
        &mut self,
        now: Instant,
        make: impl FnOnce() -> F,
    ) -> Result<usize, IoError> {
        match self.rx.as_deref_mut() {
            None => self.dev.receive_lazy(now, make),
            Some(f) => receive_impaired(f, &mut self.dev, now, make()),
        }
    }

    fn poll_at(&self) -> Option<Instant> {
        let tx = self.tx.as_ref().and_then(|f| f.next_at());
        let rx = self.rx.as_ref().and_then(|f| f.next_at());
        [tx, rx, self.dev.poll_at()].into_iter().flatten().min()
    }
}

/// [`Impaired::tx_push`] with a transmit impairment: releases the held packets that are due, then
/// queues `fill`'s packet to `dev`, dropping, corrupting, duplicating or holding it as `f` decides.
#[inline(never)]
fn tx_push_impaired<D: Device>(
    f: &mut Fault<D::Addr>,
    dev: &mut D,
    now: Instant,
    to: D::Addr,
    fill: impl FnOnce(&mut [u8]) -> Option<usize>,
) -> bool {
    release_tx(f, dev, now);
    let mut produced = false;
    let mut copy = 0;
    let queued = dev.tx_push(now, to, |buf| {
        let n = fill(buf)?;
        produced = true;
        match f.decide(now) {
            Verdict::Pass { corrupt, dup, hold } => {
                let pkt = &mut buf[..n];
                if dup {
                    f.scratch[..n].copy_from_slice(pkt);
                    copy = n;
                }
                if corrupt {
                    f.flip(pkt);
                }
                match hold {
                    Some(h) if f.hold(to, pkt, h) => None,
                    _ => Some(n),
                }
            }
            Verdict::Drop => {
                f.stats.dropped += 1;
                None
            }
        }
    });
    if copy > 0 && !dev.tx_full() {
        let pkt = &f.scratch[..copy];
        if dev.tx_push(now, to, |buf| {
            buf[..copy].copy_from_slice(pkt);
            Some(copy)
        }) {
            f.stats.duplicated += 1;
        }
    }
    queued || produced
}

/// [`Impaired::receive`] with a receive impairment: hands on the held packets that are due, then
/// receives one batch from `dev`, dropping, corrupting, duplicating or holding each as `f` decides.
#[inline(never)]
fn receive_impaired<D: Device>(
    f: &mut Fault<D::Meta>,
    dev: &mut D,
    now: Instant,
    mut each: impl FnMut(D::Meta, &[u8]),
) -> Result<usize, IoError> {
    while let Some(q) = f.due_queue(now) {
        let (meta, pkt, _) = q.due(now).expect("due_queue checked");
        each(meta, pkt);
        q.pop();
    }
    dev.receive(now, |meta, pkt| match f.decide(now) {
        Verdict::Drop => f.stats.dropped += 1,
        Verdict::Pass { corrupt, dup, hold } => {
            // The received packet is borrowed: flip or hold a copy of it (the original stays
            // intact for the duplicate).
            if corrupt || hold.is_some() {
                let n = pkt.len().min(f.scratch.len());
                let mut copy = std::mem::take(&mut f.scratch);
                copy[..n].copy_from_slice(&pkt[..n]);
                if corrupt {
                    f.flip(&mut copy[..n]);
                }
                if !hold.is_some_and(|h| f.hold(meta, &mut copy[..n], h)) {
                    each(meta, &copy[..n]);
                }
                f.scratch = copy;
            } else {
                each(meta, pkt);
            }
            if dup {
                f.stats.duplicated += 1;
                each(meta, pkt);
            }
        }
    })
}

#[cfg(test)]
mod tests;
