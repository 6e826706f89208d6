//! A switch's egress port at virtual time: a rate, a buffer that drops at its tail when full, and
//! RED-style CE marking of ECN-capable packets (DCQCN's congestion point, SIGCOMM'15 §3.1): none
//! below `kmin`, rising linearly to `pmax` at `kmax`, every packet above `kmax`, by the queue a
//! packet finds when it arrives. Seeded, so a run replays exactly. It allocates per packet (test
//! infrastructure), the engine does not.

use std::collections::VecDeque;

use super::SimRng;

/// The bottleneck's rate, buffer and marking thresholds.
#[derive(Clone, Debug, PartialEq)]
pub struct BottleneckConfig {
    /// Drain rate, Gb/s.
    pub rate_gbps: f64,
    /// Buffer, bytes: a packet that does not fit is dropped.
    pub buffer_bytes: u64,
    /// Queue below which nothing is marked, bytes.
    pub kmin_bytes: u64,
    /// Queue at which the marking probability reaches `pmax`, bytes; above it every packet is marked.
    pub kmax_bytes: u64,
    /// Marking probability at `kmax`.
    pub pmax: f64,
    /// Propagation delay after the port, ns.
    pub delay_ns: u64,
}

impl BottleneckConfig {
    /// The DCQCN study's switch at 25 Gb/s (HPCC's simulator defaults: Kmin 100 KB, Kmax 400 KB,
    /// Pmax 0.2), a 1 MB buffer and 2 µs to the receiver.
    pub fn dcqcn_25g() -> BottleneckConfig {
        BottleneckConfig {
            rate_gbps: 25.0,
            buffer_bytes: 1_000_000,
            kmin_bytes: 100_000,
            kmax_bytes: 400_000,
            pmax: 0.2,
            delay_ns: 2_000,
        }
    }

    /// The probability a packet finding `queued` bytes ahead of it is marked.
    pub fn mark_probability(&self, queued: u64) -> f64 {
        if queued < self.kmin_bytes {
            0.0
        } else if queued > self.kmax_bytes {
            1.0
        } else if self.kmax_bytes == self.kmin_bytes {
            self.pmax
        } else {
            self.pmax * (queued - self.kmin_bytes) as f64
                / (self.kmax_bytes - self.kmin_bytes) as f64
        }
    }
}

/// What the bottleneck did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BottleneckStats {
    /// Packets offered.
    pub offered: u64,
    /// Packets dropped at the tail (buffer full).
    pub dropped: u64,
    /// Packets marked CE.
    pub marked: u64,
    /// The longest queue seen, bytes.
    pub max_queue_bytes: u64,
}

/// A packet through the bottleneck: which flow it belongs to, its bytes, and its CE mark.
#[derive(Debug)]
pub struct Departed {
    /// The flow (the caller's index) it was offered for.
    pub flow: usize,
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// Marked Congestion Experienced.
    pub ce: bool,
}

struct Queued {
    leaves: u64,
    arrives: u64,
    packet: Departed,
}

/// One egress port: FIFO, so packets arrive in the order they were queued.
pub struct Bottleneck {
    cfg: BottleneckConfig,
    rng: SimRng,
    /// Packets queued or on the wire after it, oldest first.
    fifo: VecDeque<Queued>,
    /// When the last queued packet has left.
    busy_until: u64,
    /// What it did.
    pub stats: BottleneckStats,
}

impl Bottleneck {
    /// An empty port.
    pub fn new(cfg: BottleneckConfig, seed: u64) -> Bottleneck {
        Bottleneck {
            cfg,
            rng: SimRng::new(seed),
            fifo: VecDeque::new(),
            busy_until: 0,
            stats: BottleneckStats::default(),
        }
    }

    /// Bytes waiting at `now` (queued and not yet left).
    pub fn queued_bytes(&self, now: u64) -> u64 {
        self.fifo
            .iter()
            .rev()
            .take_while(|q| q.leaves > now)
            .map(|q| q.packet.bytes.len() as u64)
            .sum()
    }

    /// Offers `bytes` of flow `flow` at `now`; `ect` says it is ECN-capable. False if dropped.
    pub fn offer(&mut self, now: u64, flow: usize, bytes: Vec<u8>, ect: bool) -> bool {
        self.stats.offered += 1;
        let queued = self.queued_bytes(now);
        let len = bytes.len() as u64;
        if queued + len > self.cfg.buffer_bytes {
            self.stats.dropped += 1;
            return false;
        }
        let p = self.cfg.mark_probability(queued);
        let ce = ect && p > 0.0 && (p >= 1.0 || self.rng.chance(p));
        self.stats.marked += u64::from(ce);
        self.stats.max_queue_bytes = self.stats.max_queue_bytes.max(queued + len);
        let leaves = now.max(self.busy_until) + (len as f64 * 8.0 / self.cfg.rate_gbps) as u64;
        self.busy_until = leaves;
        self.fifo.push_back(Queued {
            leaves,
            arrives: leaves + self.cfg.delay_ns,
            packet: Departed { flow, bytes, ce },
        });
        true
    }

    /// When the next packet reaches its receiver, if one is under way.
    pub fn next_arrival(&self) -> Option<u64> {
        self.fifo.front().map(|q| q.arrives)
    }

    /// The next packet that has reached its receiver by `now`.
    pub fn recv(&mut self, now: u64) -> Option<Departed> {
        if self.fifo.front()?.arrives > now {
            return None;
        }
        self.fifo.pop_front().map(|q| q.packet)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn red_marks_nothing_below_kmin_linearly_to_pmax_and_everything_above_kmax() {
        let c = BottleneckConfig::dcqcn_25g();
        assert_eq!(c.mark_probability(99_999), 0.0);
        assert_eq!(c.mark_probability(100_000), 0.0);
        assert!((c.mark_probability(250_000) - 0.1).abs() < 1e-12);
        assert!((c.mark_probability(400_000) - 0.2).abs() < 1e-12);
        assert_eq!(c.mark_probability(400_001), 1.0);
    }

    #[test]
    fn the_port_drains_at_its_rate_drops_at_its_tail_and_marks_by_its_queue() {
        let cfg = BottleneckConfig {
            rate_gbps: 8.0, // one byte a nanosecond
            buffer_bytes: 3_000,
            kmin_bytes: 1_000,
            kmax_bytes: 1_500,
            pmax: 0.5,
            delay_ns: 100,
        };
        let mut b = Bottleneck::new(cfg, 1);
        for _ in 0..4 {
            b.offer(0, 0, vec![0; 1_000], true);
        }
        // 0 and 1000 bytes ahead: unmarked; 2000 (> Kmax): marked; the fourth does not fit.
        assert_eq!(
            b.stats,
            BottleneckStats {
                offered: 4,
                dropped: 1,
                marked: 1,
                max_queue_bytes: 3_000
            }
        );
        assert_eq!(b.queued_bytes(1_500), 2_000, "the first left at 1000 ns");
        assert_eq!(b.next_arrival(), Some(1_100));
        assert!(b.recv(1_099).is_none());
        let got: Vec<bool> = std::iter::from_fn(|| b.recv(10_000))
            .map(|d| d.ce)
            .collect();
        assert_eq!(got, [false, false, true]);
        // Not ECN-capable: never marked, whatever the queue.
        let mut b = Bottleneck::new(
            BottleneckConfig {
                pmax: 1.0,
                kmin_bytes: 0,
                kmax_bytes: 0,
                ..BottleneckConfig::dcqcn_25g()
            },
            1,
        );
        b.offer(0, 0, vec![0; 100], false);
        b.offer(0, 0, vec![0; 100], false);
        assert_eq!(b.stats.marked, 0);
    }
}
