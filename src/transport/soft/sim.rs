//! An in-memory link with seeded loss, duplication, reordering, delay and corruption, for tests.
//!
//! Everything runs at virtual time: [`Link`] holds packets until their arrival time, and
//! [`SimPair`] drives two queue pairs over two links, jumping the clock straight to the next
//! arrival or timer. A seed fixes every random choice, so a failing run can be replayed exactly.
//! The link is a [`Device`] (the wire: delay and jitter) inside the same impairer the endpoints use
//! ([`Impaired`]: loss, bursts, duplication, reordering, corruption), so the engine's simulations
//! and the binaries share one impairer. [`Bottleneck`] is a switch port that queues, drops at its
//! tail and marks CE (RED); [`Dumbbell`] runs N flows through one, for congestion control. This is test and benchmark infrastructure: it allocates per
//! packet, the engine does not.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::transport::Completion;

use super::io::IoError;
use super::io::device::Device;
use super::io::fault::Impaired;
use super::io::impair::{ImpairConfig, Impairment};
use super::rc::{Instant, Qp};

mod bottleneck;
mod dumbbell;

pub use bottleneck::{Bottleneck, BottleneckConfig, BottleneckStats, Departed};
pub use dumbbell::{Dumbbell, DumbbellConfig};

/// The simulated link's seeded generator: the transports' SplitMix64, fast and reproducible.
pub use crate::transport::rng::SplitMix64 as SimRng;

/// The largest packet a simulated link carries.
const MAX_PACKET: usize = 8192;

/// How a simulated link misbehaves. Probabilities are per packet.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkConfig {
    /// Fixed one-way delay, ns.
    pub delay_ns: u64,
    /// Extra uniform random delay in `0..jitter_ns` (reorders packets closer than that).
    pub jitter_ns: u64,
    /// Link rate in Gb/s: packets leave one after another, each taking its length at this rate
    /// (0: infinitely fast, every packet leaves at once).
    pub rate_gbps: f64,
    /// Probability a packet is lost (the long-run rate when `burst` is set).
    pub loss: f64,
    /// Gilbert–Elliott: mean length of a run of lost packets; 0: independent losses.
    pub burst: f64,
    /// Probability a packet arrives twice.
    pub duplicate: f64,
    /// Probability a packet is held back by `reorder_delay_ns`, letting later ones overtake it.
    pub reorder: f64,
    /// How long a reordered packet is held back, ns.
    pub reorder_delay_ns: u64,
    /// Probability one bit of a packet is flipped.
    pub corrupt: f64,
    /// Drop corrupted packets at the receiver, as the I/O backends do when the ICRC fails.
    /// Off, corrupted packets reach the engine (robustness tests).
    pub drop_corrupted: bool,
}

impl LinkConfig {
    /// A perfect link with a 1 µs delay.
    pub fn perfect() -> LinkConfig {
        LinkConfig {
            delay_ns: 1_000,
            jitter_ns: 0,
            rate_gbps: 0.0,
            loss: 0.0,
            burst: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_delay_ns: 0,
            corrupt: 0.0,
            drop_corrupted: true,
        }
    }

    /// A link that loses `loss` of its packets and also duplicates, reorders and corrupts some.
    pub fn lossy(loss: f64) -> LinkConfig {
        LinkConfig {
            delay_ns: 2_000,
            jitter_ns: 500,
            rate_gbps: 0.0,
            loss,
            burst: 0.0,
            duplicate: loss / 2.0,
            reorder: loss,
            reorder_delay_ns: 10_000,
            corrupt: loss / 4.0,
            drop_corrupted: true,
        }
    }

    /// The impairer's share of the configuration (everything but the wire's delay and jitter).
    fn impairment(&self, seed: u64) -> ImpairConfig {
        let i = Impairment {
            loss: self.loss,
            burst: self.burst,
            duplicate: self.duplicate,
            reorder: self.reorder,
            // Held back by exactly the configured time (0 would mean the impairer's default).
            reorder_ns: self.reorder_delay_ns.max(1),
            delay_ns: 0,
            corrupt: self.corrupt,
        };
        ImpairConfig {
            loss: i.loss,
            duplicate: i.duplicate,
            reorder: i.reorder,
            corrupt: i.corrupt,
            seed,
            burst: i.burst,
            reorder_ns: i.reorder_ns,
            delay_ns: 0,
            rx: Impairment::default(),
        }
    }
}

/// What a link did to its packets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Packets offered.
    pub sent: u64,
    /// Packets handed to the receiver.
    pub delivered: u64,
    /// Packets lost on purpose.
    pub lost: u64,
    /// Extra copies made.
    pub duplicated: u64,
    /// Packets held back.
    pub reordered: u64,
    /// Packets with a flipped bit.
    pub corrupted: u64,
    /// Corrupted packets dropped at the receiver (the ICRC stand-in caught them).
    pub(crate) corrupt_dropped: u64,
    /// The most packets lost in a row: past the retry count, RC is allowed to give up.
    pub longest_loss_run: u64,
    /// Packets lost in a row up to the last one offered.
    loss_run: u64,
}

#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct InFlight {
    at: u64,
    seq: u64,
    crc: u32,
    bytes: Vec<u8>,
}

/// The wire of a simulated link: every packet arrives after the delay plus some jitter. A packet's
/// "address" is its CRC-32 as offered, which the receiving end checks (the ICRC's stand-in).
struct Wire {
    delay_ns: u64,
    jitter_ns: u64,
    rate_gbps: f64,
    /// When the last packet offered has left (a rate-limited link serialises them).
    busy_until: u64,
    rng: SimRng,
    queue: BinaryHeap<Reverse<InFlight>>,
    seq: u64,
}

impl Device for Wire {
    type Addr = u32;
    type Meta = u32;

    fn max_packet(&self) -> usize {
        MAX_PACKET
    }

    fn tx_full(&self) -> bool {
        false
    }

    fn tx_pending(&self) -> usize {
        0
    }

    fn tx_push(
        &mut self,
        now: Instant,
        crc: u32,
        fill: impl FnOnce(&mut [u8]) -> Option<usize>,
    ) -> bool {
        let mut buf = vec![0u8; MAX_PACKET];
        let Some(n) = fill(&mut buf) else {
            return false;
        };
        buf.truncate(n);
        let mut leaves = now.as_nanos();
        if self.rate_gbps > 0.0 {
            leaves = leaves.max(self.busy_until) + (n as f64 * 8.0 / self.rate_gbps) as u64;
            self.busy_until = leaves;
        }
        let at = leaves.saturating_add(self.delay_ns + self.rng.below(self.jitter_ns));
        self.seq += 1;
        self.queue.push(Reverse(InFlight {
            at,
            seq: self.seq,
            crc,
            bytes: buf,
        }));
        true
    }

    fn flush(&mut self, _now: Instant) -> Result<(), IoError> {
        Ok(())
    }

    fn receive(
        &mut self,
        now: Instant,
        mut each: impl FnMut(u32, &[u8]),
    ) -> Result<usize, IoError> {
        let mut n = 0;
        while let Some(p) = self.pop(now.as_nanos()) {
            each(p.crc, &p.bytes);
            n += 1;
        }
        Ok(n)
    }
}

impl Wire {
    fn pop(&mut self, now: u64) -> Option<InFlight> {
        if self.queue.peek()?.0.at > now {
            return None;
        }
        self.queue.pop().map(|p| p.0)
    }
}

/// Decides to drop a packet on purpose: gets the packet's 1-based index on the link and its bytes.
pub type DropRule = Box<dyn FnMut(u64, &[u8]) -> bool>;

/// A one-way link.
pub struct Link {
    /// How it misbehaves; may be changed between packets (e.g. to heal a dead link).
    pub cfg: LinkConfig,
    /// The configuration the wire and the impairer run with.
    applied: LinkConfig,
    seed: u64,
    dev: Impaired<Wire>,
    /// Packets `drop_rule` dropped.
    ruled_out: u64,
    /// What happened so far.
    pub stats: LinkStats,
    /// Drops the packets it returns true for (before any random decision), for targeted tests.
    pub drop_rule: Option<DropRule>,
    /// When `Some`, every offered packet is copied here (before loss), for tests that inspect headers.
    pub log: Option<Vec<Vec<u8>>>,
}

impl Link {
    /// A link with its own seed.
    pub fn new(cfg: LinkConfig, seed: u64) -> Link {
        let mut rng = SimRng::new(seed);
        let wire = Wire {
            delay_ns: cfg.delay_ns,
            jitter_ns: cfg.jitter_ns,
            rate_gbps: cfg.rate_gbps,
            busy_until: 0,
            rng: SimRng::new(rng.next_u64()),
            queue: BinaryHeap::new(),
            seq: 0,
        };
        let seed = rng.next_u64();
        Link {
            dev: Impaired::new(wire, Some(&cfg.impairment(seed))),
            applied: cfg.clone(),
            seed,
            cfg,
            ruled_out: 0,
            stats: LinkStats::default(),
            drop_rule: None,
            log: None,
        }
    }

    /// Applies a changed `cfg` (the generators go on where they were).
    fn sync(&mut self) {
        if self.cfg != self.applied {
            self.dev.configure(&self.cfg.impairment(self.seed));
            let w = self.dev.inner_mut();
            w.delay_ns = self.cfg.delay_ns;
            w.jitter_ns = self.cfg.jitter_ns;
            w.rate_gbps = self.cfg.rate_gbps;
            self.applied = self.cfg.clone();
        }
    }

    fn count(&mut self) {
        let (i, _) = self.dev.stats();
        self.stats.lost = self.ruled_out + i.dropped;
        self.stats.duplicated = i.duplicated;
        self.stats.reordered = i.reordered;
        self.stats.corrupted = i.corrupted;
    }

    /// Offers a packet at `now`.
    pub fn send(&mut self, now: u64, packet: &[u8]) {
        let lost_before = self.stats.lost;
        self.offer(now, packet);
        let s = &mut self.stats;
        s.loss_run = if s.lost > lost_before {
            s.loss_run + 1
        } else {
            0
        };
        s.longest_loss_run = s.longest_loss_run.max(s.loss_run);
    }

    fn offer(&mut self, now: u64, packet: &[u8]) {
        self.stats.sent += 1;
        if let Some(log) = &mut self.log {
            log.push(packet.to_vec());
        }
        let index = self.stats.sent;
        if self
            .drop_rule
            .as_mut()
            .is_some_and(|rule| rule(index, packet))
        {
            self.ruled_out += 1;
            self.count();
            return;
        }
        assert!(
            packet.len() <= MAX_PACKET,
            "a simulated link carries at most {MAX_PACKET} bytes"
        );
        self.sync();
        let now = Instant::from_nanos(now);
        let crc = crc32fast::hash(packet);
        self.dev.tx_push(now, crc, |buf| {
            buf[..packet.len()].copy_from_slice(packet);
            Some(packet.len())
        });
        let _ = self.dev.flush(now);
        self.count();
    }

    /// Arrival time of the next packet, if any is in flight (a held one counts from when it is let go).
    pub(crate) fn next_arrival(&self) -> Option<u64> {
        let wire = self.dev.inner().queue.peek().map(|p| p.0.at);
        let held = self.dev.poll_at().map(Instant::as_nanos);
        wire.into_iter().chain(held).min()
    }

    /// When the last packet offered has left the sender's end (its line rate serialises what it is
    /// offered; `now` or earlier when it is idle).
    pub(crate) fn busy_until(&self) -> u64 {
        self.dev.inner().busy_until
    }

    /// Packets in flight.
    pub fn in_flight(&self) -> usize {
        self.dev.inner().queue.len() + self.dev.held()
    }

    /// The next packet that has arrived by `now`.
    pub fn recv(&mut self, now: u64) -> Option<Vec<u8>> {
        let _ = self.dev.flush(Instant::from_nanos(now));
        loop {
            let p = self.dev.inner_mut().pop(now)?;
            if self.cfg.drop_corrupted && crc32fast::hash(&p.bytes) != p.crc {
                self.stats.corrupt_dropped += 1;
                continue;
            }
            self.stats.delivered += 1;
            return Some(p.bytes);
        }
    }
}

/// Two queue pairs joined by two links, run at virtual time.
pub struct SimPair {
    /// The first queue pair.
    pub a: Qp,
    /// The second queue pair.
    pub b: Qp,
    /// Link from `a` to `b`.
    pub ab: Link,
    /// Link from `b` to `a`.
    pub ba: Link,
    /// Virtual time, ns.
    pub now: u64,
    /// Completions `a` produced, in order.
    pub a_done: Vec<Completion>,
    /// Completions `b` produced, in order.
    pub b_done: Vec<Completion>,
    buf: Vec<u8>,
}

impl SimPair {
    /// Joins `a` and `b` with links `ab` and `ba`; the links get seeds derived from `seed`.
    pub fn new(a: Qp, b: Qp, ab: LinkConfig, ba: LinkConfig, seed: u64) -> SimPair {
        let mut rng = SimRng::new(seed);
        let buf = vec![0u8; a.max_packet_len().max(b.max_packet_len())];
        SimPair {
            a,
            b,
            ab: Link::new(ab, rng.next_u64()),
            ba: Link::new(ba, rng.next_u64()),
            now: 0,
            a_done: Vec::new(),
            b_done: Vec::new(),
            buf,
        }
    }

    /// Runs everything due at the current time until quiet; true if anything happened.
    pub fn pump(&mut self) -> bool {
        let mut any = false;
        let now = Instant::from_nanos(self.now);
        loop {
            let mut moved = false;
            while let Some(n) = self.a.poll_transmit(now, &mut self.buf) {
                self.ab.send(self.now, &self.buf[..n]);
                moved = true;
            }
            while let Some(n) = self.b.poll_transmit(now, &mut self.buf) {
                self.ba.send(self.now, &self.buf[..n]);
                moved = true;
            }
            while let Some(p) = self.ab.recv(self.now) {
                self.b.handle_packet(now, &p);
                moved = true;
            }
            while let Some(p) = self.ba.recv(self.now) {
                self.a.handle_packet(now, &p);
                moved = true;
            }
            if self.a.poll_timeout().is_some_and(|t| t <= now) {
                self.a.handle_timeout(now);
                moved = true;
            }
            if self.b.poll_timeout().is_some_and(|t| t <= now) {
                self.b.handle_timeout(now);
                moved = true;
            }
            while let Some(c) = self.a.poll_completion() {
                self.a_done.push(c);
                moved = true;
            }
            while let Some(c) = self.b.poll_completion() {
                self.b_done.push(c);
                moved = true;
            }
            if !moved {
                return any;
            }
            any = true;
        }
    }

    /// The time of the next arrival or timer, if any.
    pub(crate) fn next_event(&self) -> Option<u64> {
        [
            self.ab.next_arrival(),
            self.ba.next_arrival(),
            self.a.poll_timeout().map(Instant::as_nanos),
            self.b.poll_timeout().map(Instant::as_nanos),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Pumps and advances time until `done` holds (true) or nothing is left to happen or the
    /// virtual time passes `limit_ns` (false).
    pub fn run_until(&mut self, limit_ns: u64, mut done: impl FnMut(&SimPair) -> bool) -> bool {
        loop {
            self.pump();
            if done(self) {
                return true;
            }
            match self.next_event() {
                Some(t) if t <= limit_ns => self.now = self.now.max(t),
                _ => return false,
            }
        }
    }

    /// Runs until both sides are idle: nothing in flight, nothing to send, no timers.
    pub fn run_idle(&mut self, limit_ns: u64) -> bool {
        loop {
            self.pump();
            match self.next_event() {
                None => return true,
                Some(t) if t <= limit_ns => self.now = self.now.max(t),
                Some(_) => return false,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rng_is_reproducible_and_roughly_uniform() {
        let mut a = SimRng::new(42);
        let mut b = SimRng::new(42);
        assert_eq!(a.next_u64(), b.next_u64());
        let hits = (0..100_000).filter(|_| a.chance(0.05)).count();
        assert!(
            (4_000..6_000).contains(&hits),
            "5% of 100k draws gave {hits}"
        );
    }

    #[test]
    fn perfect_link_delivers_in_order_after_the_delay() {
        let mut l = Link::new(LinkConfig::perfect(), 1);
        l.send(0, b"one");
        l.send(10, b"two");
        assert_eq!(l.recv(999), None);
        assert_eq!(l.next_arrival(), Some(1_000));
        assert_eq!(l.recv(1_000).as_deref(), Some(&b"one"[..]));
        assert_eq!(l.recv(1_010).as_deref(), Some(&b"two"[..]));
        assert_eq!(l.stats.delivered, 2);
    }

    #[test]
    fn the_longest_run_of_losses_is_counted() {
        let mut l = Link::new(LinkConfig::perfect(), 1);
        // Packets 2-4 and 7-8 are lost: the longest run is three.
        l.drop_rule = Some(Box::new(|i, _| matches!(i, 2..=4 | 7..=8)));
        for i in 0..10u64 {
            l.send(i * 100, b"p");
        }
        assert_eq!((l.stats.lost, l.stats.longest_loss_run), (5, 3));
    }

    #[test]
    fn lossy_link_loses_duplicates_reorders_and_catches_corruption() {
        let cfg = LinkConfig {
            corrupt: 0.1,
            ..LinkConfig::lossy(0.1)
        };
        let mut l = Link::new(cfg, 7);
        for i in 0..10_000u32 {
            l.send(u64::from(i) * 100, &i.to_be_bytes());
        }
        let mut got = Vec::new();
        while let Some(p) = l.recv(u64::MAX) {
            got.push(u32::from_be_bytes(p[..].try_into().unwrap()));
        }
        let s = l.stats;
        assert!(s.lost > 800 && s.lost < 1200, "{s:?}");
        assert!(
            s.duplicated > 0 && s.reordered > 0 && s.corrupted > 0,
            "{s:?}"
        );
        assert_eq!(
            s.corrupt_dropped, s.corrupted,
            "every flipped bit is caught: {s:?}"
        );
        assert_eq!(got.len() as u64, s.delivered);
        assert!(
            got.windows(2).any(|w| w[0] > w[1]),
            "some packets arrive out of order"
        );
        assert!(
            got.windows(2).any(|w| w[0] == w[1]),
            "some packets arrive twice"
        );
    }

    #[test]
    fn corrupted_packets_reach_the_receiver_when_not_checked() {
        let cfg = LinkConfig {
            corrupt: 1.0,
            drop_corrupted: false,
            ..LinkConfig::perfect()
        };
        let mut l = Link::new(cfg, 3);
        l.send(0, &[0u8; 16]);
        let p = l.recv(u64::MAX).unwrap();
        assert_eq!(p.iter().map(|b| b.count_ones()).sum::<u32>(), 1);
    }
}
