//! The egress (bottleneck) port without I/O: given `(now_ns, frame length, ECN, priority)` it says
//! whether the frame is queued (and marked) or dropped and when it departs, and whether PFC must pause
//! or resume the senders. The I/O loop (`switch.rs`) keeps the frames' bytes in the same order.
//!
//! Timing: one FIFO drained at the rate; a frame occupies the line for its wire bits (its bytes, at
//! least the 60-byte minimum, plus FCS 4, preamble 8 and inter-frame gap 12, as a real port spends
//! them) from max(its arrival, the end of the previous departure), and departs at the end of that
//! time (store and forward). The queue a frame finds is the bytes of the frames ahead of it that have
//! not departed yet.

use std::collections::VecDeque;

use roceperf::params::marks::MarkAt;
use roceperf::transport::soft::sim::{BottleneckConfig, SimRng};

use crate::frame::Ecn;

/// Bytes a frame costs on the wire beyond what the switch reads: FCS 4, preamble and SFD 8,
/// inter-frame gap 12.
pub const WIRE_OVERHEAD: u64 = 4 + 8 + 12;
/// The shortest frame without its FCS: shorter ones are padded to it.
pub const MIN_FRAME: u64 = 60;

/// `--discipline`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Discipline {
    /// Tail drop when the buffer is full.
    Lossy,
    /// RED: CE marks between Kmin and Kmax (ECN-capable IP), drops for Not-ECT IP; tail drop when full.
    Ecn,
    /// Lossless priority: pause at Xoff, resume at Xon; other priorities lossy.
    Pfc,
    /// PFC and ECN together, as a switch carrying DCQCN over a lossless priority runs: pauses as
    /// `pfc`, marks as `ecn`.
    #[value(name = "pfc-ecn")]
    PfcEcn,
}

impl Discipline {
    /// `lossy`, `ecn`, `pfc`.
    pub fn name(self) -> &'static str {
        match self {
            Discipline::Lossy => "lossy",
            Discipline::Ecn => "ecn",
            Discipline::Pfc => "pfc",
            Discipline::PfcEcn => "pfc-ecn",
        }
    }

    /// Whether it pauses (`pfc`, `pfc-ecn`).
    pub fn pauses(self) -> bool {
        matches!(self, Discipline::Pfc | Discipline::PfcEcn)
    }

    /// Whether it marks CE (`ecn`, `pfc-ecn`).
    pub fn marks(self) -> bool {
        matches!(self, Discipline::Ecn | Discipline::PfcEcn)
    }
}

/// The port's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct PortConfig {
    /// What it does when the queue grows.
    pub discipline: Discipline,
    /// Rate, buffer and RED thresholds (`mark_probability` is the one RED of the project).
    pub red: BottleneckConfig,
    /// PFC: pause above these bytes of the lossless priority.
    pub xoff: u64,
    /// PFC: resume at or below these.
    pub xon: u64,
    /// PFC: the lossless priority.
    pub pfc_prio: u8,
    /// ECN: the one priority RED acts on (marks, and drops of Not-ECT frames), as a switch's ECN
    /// profile belongs to one traffic class; every other priority only tail-drops. None: all.
    pub ecn_prio: Option<u8>,
    /// PFC: a pause is sent again after this long while the queue stays above Xon (before the
    /// senders' pause expires).
    pub refresh_ns: u64,
    /// ECN: when the mark is decided.
    pub mark_at: MarkAt,
}

/// Why a frame was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drop {
    /// The buffer is full.
    Tail,
    /// ECN: a Not-ECT IP frame of `ecn_prio` above Kmin, dropped with RED's probability (never
    /// one of PFC's lossless priority).
    Red,
    /// PFC: a lossless frame that did not fit although the senders were paused.
    Headroom,
}

/// What the port does with a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Queued; `mark`: set CE first; it departs at `departs_ns`.
    Queued {
        /// Mark it CE.
        mark: bool,
        /// When its last bit leaves.
        departs_ns: u64,
    },
    /// Dropped.
    Dropped(Drop),
}

/// What PFC asks of the I/O loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pfc {
    /// Send a pause (the longest time) to the ports that sent the lossless priority.
    Pause,
    /// Send a resume (zero time).
    Resume,
}

/// A queued frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Queued {
    /// Its bytes.
    pub len: u64,
    /// Its priority.
    pub prio: u8,
    /// When it departs.
    pub departs_ns: u64,
    /// ECN-capable and of the priority RED acts on: a candidate for a mark at departure.
    pub ect: bool,
    /// Mark it CE as it leaves (`MarkAt::Dequeue`).
    pub mark: bool,
}

/// What the port counted.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counts {
    /// Frames offered, and their bytes.
    pub offered: (u64, u64),
    /// Frames that departed, and their bytes.
    pub forwarded: (u64, u64),
    /// Frames dropped (every kind), and their bytes.
    pub dropped: (u64, u64),
    /// Of the drops, lossless frames beyond the buffer.
    pub headroom_drops: u64,
    /// Frames marked CE.
    pub marked: u64,
    /// The longest queue, bytes.
    pub max_queue: u64,
    /// Pauses and resumes asked for.
    pub pauses: u64,
    /// Resumes asked for.
    pub resumes: u64,
    /// Time paused, ns (closed intervals; [`Port::paused_ns`] adds an open one).
    pub paused_ns: u64,
}

/// The egress port.
pub struct Port {
    cfg: PortConfig,
    rng: SimRng,
    fifo: VecDeque<Queued>,
    bytes: u64,
    prio_bytes: [u64; 8],
    /// End of the last scheduled departure, picoseconds (integer: no drift over millions of frames).
    busy_until_ps: u64,
    /// Picoseconds per wire byte.
    ps_per_byte: f64,
    /// Queue bytes × ns since `area_from`, for the time-weighted mean.
    area: f64,
    area_since: Option<u64>,
    last_change: u64,
    /// PFC: since when, and when the last pause went out.
    paused: Option<(u64, u64)>,
    /// What it did.
    pub counts: Counts,
}

impl Port {
    /// An empty port; `capacity`: frames it may hold at once (preallocated).
    pub fn new(cfg: PortConfig, seed: u64, capacity: usize) -> Port {
        let ps_per_byte = 8_000.0 / cfg.red.rate_gbps;
        Port {
            cfg,
            rng: SimRng::new(seed),
            fifo: VecDeque::with_capacity(capacity),
            bytes: 0,
            prio_bytes: [0; 8],
            busy_until_ps: 0,
            ps_per_byte,
            area: 0.0,
            area_since: None,
            last_change: 0,
            paused: None,
            counts: Counts::default(),
        }
    }

    /// Bytes queued (not departed).
    pub fn queued_bytes(&self) -> u64 {
        self.bytes
    }

    /// Frames queued.
    pub fn queued_frames(&self) -> usize {
        self.fifo.len()
    }

    /// How long `len` bytes occupy the line, ps.
    pub fn wire_ps(&self, len: u64) -> u64 {
        ((len.max(MIN_FRAME) + WIRE_OVERHEAD) as f64 * self.ps_per_byte).round() as u64
    }

    fn account(&mut self, now: u64) {
        match self.area_since {
            None => self.area_since = Some(now),
            Some(_) => self.area += self.bytes as f64 * now.saturating_sub(self.last_change) as f64,
        }
        self.last_change = now.max(self.last_change);
    }

    /// The queue's time-weighted mean from the first frame to `now`, bytes.
    pub fn mean_queue(&self, now: u64) -> f64 {
        let Some(from) = self.area_since else {
            return 0.0;
        };
        let area = self.area + self.bytes as f64 * now.saturating_sub(self.last_change) as f64;
        let span = now.saturating_sub(from);
        if span == 0 { 0.0 } else { area / span as f64 }
    }

    /// Offers a frame of `len` bytes at `now`. Call [`Port::depart`] for what is due first, so that
    /// the queue it finds is the queue at `now`.
    pub fn offer(&mut self, now: u64, len: u64, ecn: Ecn, prio: u8) -> Verdict {
        self.account(now);
        self.counts.offered.0 += 1;
        self.counts.offered.1 += len;
        let queued = self.bytes;
        let lossless = self.cfg.discipline.pauses() && prio == self.cfg.pfc_prio;
        let verdict = if queued + len > self.cfg.red.buffer_bytes {
            if lossless {
                Err(Drop::Headroom)
            } else {
                Err(Drop::Tail)
            }
        } else if self.red_applies(prio) {
            match ecn {
                // Marked at departure, an ECT frame's mark waits until it leaves.
                Ecn::Ect => Ok(self.cfg.mark_at == MarkAt::Enqueue && self.red_hit(queued)),
                // A lossless class is never dropped: WRED's drop does not apply to it.
                Ecn::NotEct if !lossless && self.red_hit(queued) => Err(Drop::Red),
                _ => Ok(false),
            }
        } else {
            Ok(false)
        };
        match verdict {
            Err(d) => {
                self.counts.dropped.0 += 1;
                self.counts.dropped.1 += len;
                self.counts.headroom_drops += u64::from(d == Drop::Headroom);
                Verdict::Dropped(d)
            }
            Ok(mark) => {
                self.counts.marked += u64::from(mark);
                let start = (now * 1_000).max(self.busy_until_ps);
                self.busy_until_ps = start + self.wire_ps(len);
                let departs_ns = self.busy_until_ps.div_ceil(1_000);
                self.fifo.push_back(Queued {
                    len,
                    prio: prio & 7,
                    departs_ns,
                    ect: ecn == Ecn::Ect && self.red_applies(prio),
                    mark: false,
                });
                self.bytes += len;
                self.prio_bytes[usize::from(prio & 7)] += len;
                self.counts.max_queue = self.counts.max_queue.max(self.bytes);
                Verdict::Queued { mark, departs_ns }
            }
        }
    }

    /// RED's draw with `queued` bytes in the queue: the frame is marked (or, Not-ECT, dropped).
    fn red_hit(&mut self, queued: u64) -> bool {
        let p = self.cfg.red.mark_probability(queued);
        p > 0.0 && (p >= 1.0 || self.rng.chance(p))
    }

    /// RED acts on this priority (marks, and drops of Not-ECT frames).
    fn red_applies(&self, prio: u8) -> bool {
        self.cfg.discipline.marks() && self.cfg.ecn_prio.is_none_or(|p| p == prio)
    }

    /// When the next frame departs, if one is queued.
    pub fn next_departure(&self) -> Option<u64> {
        self.fifo.front().map(|q| q.departs_ns)
    }

    /// The oldest frame if it is due at `now`: it leaves the queue (the caller sends its bytes).
    pub fn depart(&mut self, now: u64) -> Option<Queued> {
        if self.fifo.front()?.departs_ns > now {
            return None;
        }
        self.account(now);
        let mut q = self.fifo.pop_front()?;
        self.bytes -= q.len;
        self.prio_bytes[usize::from(q.prio)] -= q.len;
        if q.ect && self.cfg.mark_at == MarkAt::Dequeue {
            q.mark = self.red_hit(self.bytes);
            self.counts.marked += u64::from(q.mark);
        }
        self.counts.forwarded.0 += 1;
        self.counts.forwarded.1 += q.len;
        Some(q)
    }

    /// PFC: what to send now, if anything: a pause when the lossless priority's bytes pass Xoff
    /// (again every `refresh_ns` while they stay above Xon), a resume when they fall to Xon.
    pub fn pfc(&mut self, now: u64) -> Option<Pfc> {
        if !self.cfg.discipline.pauses() {
            return None;
        }
        let q = self.prio_bytes[usize::from(self.cfg.pfc_prio)];
        match self.paused {
            None if q > self.cfg.xoff => {
                self.paused = Some((now, now));
                self.counts.pauses += 1;
                Some(Pfc::Pause)
            }
            Some((since, _)) if q <= self.cfg.xon => {
                self.paused = None;
                self.counts.paused_ns += now.saturating_sub(since);
                self.counts.resumes += 1;
                Some(Pfc::Resume)
            }
            Some((since, last)) if now >= last + self.cfg.refresh_ns => {
                self.paused = Some((since, now));
                self.counts.pauses += 1;
                Some(Pfc::Pause)
            }
            _ => None,
        }
    }

    /// PFC: when a pause must be refreshed, while paused.
    pub fn next_refresh(&self) -> Option<u64> {
        self.paused.map(|(_, last)| last + self.cfg.refresh_ns)
    }

    /// Time paused until `now`, ns.
    pub fn paused_ns(&self, now: u64) -> u64 {
        self.counts.paused_ns
            + self
                .paused
                .map_or(0, |(since, _)| now.saturating_sub(since))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(discipline: Discipline) -> PortConfig {
        PortConfig {
            discipline,
            red: BottleneckConfig {
                // 8 Gb/s: one wire byte a nanosecond.
                rate_gbps: 8.0,
                buffer_bytes: 10_000,
                kmin_bytes: 2_000,
                kmax_bytes: 6_000,
                pmax: 0.5,
                delay_ns: 0,
            },
            xoff: 4_000,
            xon: 2_000,
            pfc_prio: 3,
            ecn_prio: None,
            refresh_ns: 50_000,
            mark_at: MarkAt::Enqueue,
        }
    }

    #[test]
    fn frames_depart_back_to_back_at_the_rate_with_wire_overhead() {
        let mut p = Port::new(cfg(Discipline::Lossy), 1, 16);
        // 976 + 24 = 1000 wire bytes: 1000 ns each at 8 Gb/s.
        let v = p.offer(100, 976, Ecn::NotIp, 0);
        assert_eq!(
            v,
            Verdict::Queued {
                mark: false,
                departs_ns: 1_100
            }
        );
        assert_eq!(
            p.offer(200, 976, Ecn::NotIp, 0),
            Verdict::Queued {
                mark: false,
                departs_ns: 2_100
            },
            "waits for the line"
        );
        // A runt is padded to 60 bytes: 84 ns.
        assert_eq!(
            p.offer(300, 20, Ecn::NotIp, 0),
            Verdict::Queued {
                mark: false,
                departs_ns: 2_184
            }
        );
        assert_eq!(p.queued_bytes(), 1_972);
        assert_eq!(p.depart(1_099), None);
        assert_eq!(p.depart(1_100).map(|q| q.len), Some(976));
        assert_eq!(p.next_departure(), Some(2_100));
        assert_eq!(p.depart(5_000).map(|q| q.len), Some(976));
        assert_eq!(p.depart(5_000).map(|q| q.len), Some(20));
        assert_eq!(p.depart(5_000), None);
        // An idle line: the next frame starts when it arrives.
        assert_eq!(
            p.offer(10_000, 976, Ecn::NotIp, 0),
            Verdict::Queued {
                mark: false,
                departs_ns: 11_000
            }
        );
        assert_eq!(p.counts.forwarded, (3, 1_972));
    }

    #[test]
    fn lossy_drops_at_the_tail_only_when_the_buffer_is_full() {
        let mut p = Port::new(cfg(Discipline::Lossy), 1, 16);
        for _ in 0..5 {
            assert!(matches!(
                p.offer(0, 2_000, Ecn::Ect, 0),
                Verdict::Queued { mark: false, .. }
            ));
        }
        assert_eq!(p.offer(0, 2_000, Ecn::Ect, 3), Verdict::Dropped(Drop::Tail));
        assert!(
            matches!(p.offer(0, 0, Ecn::Ect, 0), Verdict::Queued { .. }),
            "a frame that fits"
        );
        assert_eq!(p.counts.dropped, (1, 2_000));
        assert_eq!(p.counts.marked, 0);
        assert_eq!(p.counts.max_queue, 10_000);
        assert_eq!(p.pfc(0), None, "no PFC in lossy mode");
    }

    #[test]
    fn marked_at_dequeue_a_frame_is_judged_by_the_queue_it_leaves_behind() {
        let mut p = Port::new(
            PortConfig {
                mark_at: MarkAt::Dequeue,
                ..cfg(Discipline::Ecn)
            },
            7,
            64,
        );
        // 10 frames of 1000 bytes at once: on arrival none is marked (the decision waits).
        for _ in 0..10 {
            assert!(matches!(
                p.offer(0, 1_000, Ecn::Ect, 0),
                Verdict::Queued { mark: false, .. }
            ));
        }
        p.offer(0, 0, Ecn::NotIp, 0);
        assert_eq!(p.counts.marked, 0);
        // 8 Gb/s: one byte a nanosecond (plus the wire's overhead); all have left by 20 µs.
        let left: Vec<(bool, u64)> =
            std::iter::from_fn(|| p.depart(20_000).map(|q| (q.mark, p.queued_bytes()))).collect();
        assert_eq!(left.len(), 11);
        // Above Kmax (6000) behind it: always marked; below Kmin (2000): never.
        for &(mark, behind) in &left {
            if behind > 6_000 {
                assert!(mark, "{behind} bytes behind");
            }
            if behind < 2_000 {
                assert!(!mark, "{behind} bytes behind");
            }
        }
        assert!(!left[10].0, "a frame that is not IP is never marked");
        assert_eq!(p.counts.marked, left.iter().filter(|l| l.0).count() as u64);
        assert!(p.counts.marked >= 3, "9000, 8000, 7000 behind");
    }

    #[test]
    fn ecn_marks_only_above_kmin_and_every_ect_frame_above_kmax() {
        let mut p = Port::new(cfg(Discipline::Ecn), 7, 64);
        // Below Kmin (0, 1000 bytes ahead): never marked.
        for _ in 0..2 {
            assert!(matches!(
                p.offer(0, 1_000, Ecn::Ect, 0),
                Verdict::Queued { mark: false, .. }
            ));
        }
        // 2000..6000 ahead: marked with probability up to 0.5; above 6000: always.
        let mut marks = Vec::new();
        for _ in 0..8 {
            match p.offer(0, 1_000, Ecn::Ect, 0) {
                Verdict::Queued { mark, .. } => marks.push(mark),
                v => panic!("{v:?}"),
            }
        }
        assert_eq!(p.queued_bytes(), 10_000);
        assert_eq!(
            &marks[5..],
            [true, true, true],
            "7000, 8000, 9000 ahead: above Kmax"
        );
        assert_eq!(
            p.offer(0, 1, Ecn::Ect, 0),
            Verdict::Dropped(Drop::Tail),
            "full"
        );
        assert!(p.counts.marked >= 3);
        // A Not-ECT IP frame above Kmax is dropped RED-style, a non-IP one is queued.
        let mut p = Port::new(cfg(Discipline::Ecn), 7, 64);
        for _ in 0..7 {
            p.offer(0, 1_000, Ecn::NotIp, 0);
        }
        assert_eq!(
            p.offer(0, 1_000, Ecn::NotEct, 0),
            Verdict::Dropped(Drop::Red)
        );
        assert!(matches!(
            p.offer(0, 1_000, Ecn::NotIp, 0),
            Verdict::Queued { mark: false, .. }
        ));
        assert!(
            matches!(
                p.offer(0, 1_000, Ecn::Ce, 0),
                Verdict::Queued { mark: false, .. }
            ),
            "already CE"
        );
        // Seeded: the same offers mark the same frames.
        let run = |seed| {
            let mut p = Port::new(cfg(Discipline::Ecn), seed, 64);
            (0..10)
                .map(|_| {
                    matches!(
                        p.offer(0, 1_000, Ecn::Ect, 0),
                        Verdict::Queued { mark: true, .. }
                    )
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(run(42), run(42));
    }

    #[test]
    fn pfc_ecn_pauses_and_marks() {
        let mut p = Port::new(cfg(Discipline::PfcEcn), 7, 64);
        let mut marked = 0;
        for _ in 0..9 {
            if let Verdict::Queued { mark: true, .. } = p.offer(0, 976, Ecn::Ect, 3) {
                marked += 1;
            }
        }
        // Above Kmax (6000) every frame is marked; above Xoff (4000) the priority is paused.
        assert!(marked >= 2, "{marked}");
        assert_eq!(p.pfc(0), Some(Pfc::Pause));
        let mut only_pfc = Port::new(cfg(Discipline::Pfc), 7, 64);
        for _ in 0..9 {
            only_pfc.offer(0, 976, Ecn::Ect, 3);
        }
        assert_eq!(only_pfc.counts.marked, 0, "pfc alone never marks");
    }

    #[test]
    fn red_acts_on_its_priority_only_and_never_drops_the_lossless_one() {
        // pfc-ecn with ECN on priority 3, the study's switch: PFC holds priority 3's queue above
        // Kmax (6000), where RED marks every ECT frame of it.
        let mut p = Port::new(
            PortConfig {
                ecn_prio: Some(3),
                ..cfg(Discipline::PfcEcn)
            },
            7,
            64,
        );
        for _ in 0..7 {
            p.offer(0, 1_000, Ecn::Ect, 3);
        }
        assert!(matches!(
            p.offer(0, 1_000, Ecn::Ect, 3),
            Verdict::Queued { mark: true, .. }
        ));
        // A victim's TCP SYN (Not-ECT, priority 0) waits behind it instead of being RED-dropped
        // at every retry (the victim's connect failed so in roce_compare --congestion); ECT of
        // another priority is not marked either; a Not-ECT lossless frame is not dropped.
        for (ecn, prio) in [(Ecn::NotEct, 0), (Ecn::Ect, 0), (Ecn::NotEct, 3)] {
            assert!(
                matches!(
                    p.offer(0, 74, ecn, prio),
                    Verdict::Queued { mark: false, .. }
                ),
                "{ecn:?} of priority {prio}"
            );
        }
        assert_eq!(p.counts.dropped, (0, 0));
        // Without --ecn-prio every priority is RED's, as before: the SYN is dropped.
        let mut all = Port::new(cfg(Discipline::PfcEcn), 7, 64);
        for _ in 0..7 {
            all.offer(0, 1_000, Ecn::Ect, 3);
        }
        assert_eq!(
            all.offer(0, 74, Ecn::NotEct, 0),
            Verdict::Dropped(Drop::Red)
        );
    }

    #[test]
    fn pfc_pauses_above_xoff_refreshes_resumes_at_xon_and_counts_headroom_drops() {
        let mut p = Port::new(cfg(Discipline::Pfc), 1, 64);
        // 4000 bytes of priority 3: not above Xoff yet.
        for _ in 0..4 {
            p.offer(0, 976, Ecn::Ect, 3);
        }
        p.offer(0, 96, Ecn::Ect, 3);
        assert_eq!(p.pfc(0), None);
        // Other priorities do not count towards Xoff.
        p.offer(0, 976, Ecn::Ect, 0);
        assert_eq!(p.pfc(0), None);
        p.offer(0, 1, Ecn::Ect, 3);
        assert_eq!(p.pfc(0), Some(Pfc::Pause));
        assert_eq!(p.pfc(10), None, "paused already");
        assert_eq!(p.next_refresh(), Some(50_000));
        // Senders that ignore the pause fill the buffer: the lossless frame beyond it is a
        // headroom drop, a lossy one a tail drop.
        for _ in 0..5 {
            p.offer(20, 976, Ecn::Ect, 3);
        }
        assert_eq!(
            p.offer(20, 976, Ecn::Ect, 3),
            Verdict::Dropped(Drop::Headroom)
        );
        assert_eq!(p.offer(20, 976, Ecn::Ect, 1), Verdict::Dropped(Drop::Tail));
        assert_eq!(p.counts.headroom_drops, 1);
        assert_eq!(p.counts.dropped.0, 2);
        assert_eq!(p.pfc(50_000), Some(Pfc::Pause), "refreshed");
        // Drain to Xon (2000 bytes of priority 3 or fewer).
        let mut now = 50_000;
        while p.prio_bytes[3] > 2_000 {
            now = p.next_departure().unwrap();
            p.depart(now);
            if p.prio_bytes[3] > 2_000 {
                assert_eq!(p.pfc(now), None);
            }
        }
        assert_eq!(p.pfc(now), Some(Pfc::Resume));
        assert_eq!(p.paused_ns(now + 5), now);
        assert_eq!((p.counts.pauses, p.counts.resumes), (2, 1));
        assert_eq!(p.next_refresh(), None);
    }

    #[test]
    fn the_mean_queue_is_weighted_by_time() {
        let mut p = Port::new(cfg(Discipline::Lossy), 1, 4);
        p.offer(0, 976, Ecn::NotIp, 0); // departs at 1000
        p.depart(1_000);
        // 976 bytes for 1000 ns, then 0 for 1000 ns.
        assert!((p.mean_queue(2_000) - 488.0).abs() < 1e-9);
    }
}
