//! Priority flow control as a NIC port honours it: the pause state of the eight priorities (and of
//! 802.3x global pause) that received MAC Control frames set, and what they counted, under mlx5's
//! names (`rx_prio{N}_pause`, `rx_prio{N}_pause_duration`, `rx_prio{N}_resume`). Pure: times are
//! the engines' nanoseconds, given by the caller.
//!
//! A pause frame for priority N with a non-zero time stops the transmission of N's frames for
//! quanta × 512 bit times at the link's speed from its arrival; a later one replaces what was left;
//! a zero time resumes at once. The datapath asks [`PauseState::armed`] (one load) per
//! transmission and, only once a pause frame has come, which of its two classes (data, CNPs) it
//! must hold.

use serde::Serialize;

use crate::wire::pfc::{PauseKind, PauseRepr, quanta_to_ns};

/// Slots of the pause state: priorities 0..=7, then global pause.
const GLOBAL: usize = 8;

/// What one priority's pause frames counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PrioCounters {
    /// Frames for it with a non-zero time (`rx_prio{N}_pause`).
    pub pause: u64,
    /// Frames for it with a zero time (`rx_prio{N}_resume`).
    pub resume: u64,
    /// Nanoseconds it was held paused (`rx_prio{N}_pause_duration`, reported in µs).
    pub paused_ns: u64,
    /// A frame named it: only such priorities are reported.
    pub seen: bool,
}

/// The pause frames an endpoint received, per priority and global; empty when none came.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PfcCounters {
    /// Priorities 0..=7, then 802.3x global pause (`rx_global_*`).
    pub prio: [PrioCounters; 9],
    /// MAC Control frames that were no valid pause frame (dropped, never trusted).
    pub malformed: u64,
}

impl PfcCounters {
    /// True when no MAC Control frame arrived: nothing is reported.
    pub fn is_empty(&self) -> bool {
        self.malformed == 0 && self.prio.iter().all(|p| !p.seen)
    }

    /// The counters as mlx5 names them, priorities that saw a frame only, durations in µs.
    pub fn by_name(&self) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        for (i, p) in self.prio.iter().enumerate().filter(|(_, p)| p.seen) {
            let who = if i == GLOBAL {
                "global".to_string()
            } else {
                format!("prio{i}")
            };
            out.push((format!("rx_{who}_pause"), p.pause));
            out.push((format!("rx_{who}_pause_duration"), p.paused_ns / 1_000));
            out.push((format!("rx_{who}_resume"), p.resume));
        }
        out.push(("rx_pause_malformed".to_string(), self.malformed));
        out
    }
}

/// The counters as one JSON object of mlx5's names (`test.counters.pfc`).
impl Serialize for PfcCounters {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let named = self.by_name();
        let mut m = s.serialize_map(Some(named.len()))?;
        for (name, n) in named {
            m.serialize_entry(&name, &n)?;
        }
        m.end()
    }
}

/// The `-v` line: `PFC: prio3 pause 12 (48213 µs) resume 1; malformed 0`.
impl std::fmt::Display for PfcCounters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PFC pause frames received:")?;
        for (i, p) in self.prio.iter().enumerate().filter(|(_, p)| p.seen) {
            let who = if i == GLOBAL {
                "global".to_string()
            } else {
                format!("prio{i}")
            };
            write!(
                f,
                " {who} pause {} (held {} µs) resume {};",
                p.pause,
                p.paused_ns / 1_000,
                p.resume
            )?;
        }
        write!(f, " malformed {}", self.malformed)
    }
}

/// Which of the endpoint's frames a pause holds now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Held {
    /// Every frame but CNPs (requests, ACKs, NAKs, READ responses).
    pub data: bool,
    /// CNPs.
    pub cnps: bool,
}

/// The pause state of one endpoint's port.
#[derive(Debug, Clone)]
pub(crate) struct PauseState {
    /// The link speed quanta are timed at (`wire::pfc::link_speed_mbps`).
    speed_mbps: u64,
    /// The priority of data frames and of CNPs (`wire::pfc::frame_priority`).
    data_prio: u8,
    cnp_prio: u8,
    /// Bit i: slot i is paused (its time may have passed: [`PauseState::held`] settles that).
    paused: u16,
    /// When each slot's pause ends, and since when it holds (nanoseconds).
    until: [u64; 9],
    since: [u64; 9],
    /// What the engines were last told is held (they keep a held CNP queued, and a requester
    /// whose packets a pause holds does not take the silence for a loss).
    told: Held,
    /// A pause frame has arrived, or the run tags its frames for PFC: the datapath then reads
    /// before it sends ([`Self::armed`]).
    armed: bool,
    counters: PfcCounters,
}

impl PauseState {
    /// Nothing paused, on a link of `speed_mbps`, data frames of priority `data_prio` and CNPs
    /// of `cnp_prio`; `armed` from the start on a link where pauses are to be expected (see
    /// [`Self::armed`]), else once the first pause frame comes.
    pub(crate) fn new(speed_mbps: u64, data_prio: u8, cnp_prio: u8, armed: bool) -> PauseState {
        PauseState {
            speed_mbps,
            data_prio: data_prio & 7,
            cnp_prio: cnp_prio & 7,
            paused: 0,
            until: [0; 9],
            since: [0; 9],
            told: Held::default(),
            armed,
            counters: PfcCounters::default(),
        }
    }

    /// The link speed quanta are timed at.
    pub(crate) fn speed_mbps(&self) -> u64 {
        self.speed_mbps
    }

    /// The priorities of data frames and of CNPs.
    pub(crate) fn priorities(&self) -> (u8, u8) {
        (self.data_prio, self.cnp_prio)
    }

    /// True from the start on a run that tags its frames with a priority (`-S` over AF_PACKET),
    /// else once a pause frame has arrived: then every transmission asks [`held`](Self::held)
    /// and sends a bounded number of frames, and a poll receives before its first transmission,
    /// so that pause frames which arrived while this side was off the CPU stop it before it sends
    /// (a NIC reads them as they arrive; a descheduled poll loop cannot). Armed only by the first
    /// pause, a run sent a whole window (1,024 packets per queue pair) unchecked before it, all
    /// beyond a switch's headroom: the first Xoff of every congestion study's PFC run. One load
    /// per poll and transmission; false on an untagged run before any pause, whose polls keep
    /// their order.
    #[inline(always)]
    pub(crate) fn armed(&self) -> bool {
        self.armed
    }

    /// Takes a received MAC Control frame (from the Ethernet header on) at `now`: a pause frame
    /// sets the times of the priorities it names; anything else is counted malformed and ignored.
    #[cold]
    pub(crate) fn on_frame(&mut self, now: u64, frame: &[u8]) {
        let Ok(repr) = PauseRepr::parse(frame) else {
            self.counters.malformed += 1;
            return;
        };
        self.armed = true;
        match repr.kind {
            PauseKind::Priority { enable, quanta } => {
                for (p, &q) in quanta.iter().enumerate() {
                    if enable & (1 << p) != 0 {
                        self.set(p, now, q);
                    }
                }
            }
            PauseKind::Global { quanta } => self.set(GLOBAL, now, quanta),
        }
    }

    /// Slot `i` paused for `quanta` from `now` (0: resumed).
    fn set(&mut self, i: usize, now: u64, quanta: u16) {
        let c = &mut self.counters.prio[i];
        c.seen = true;
        if self.paused & (1 << i) != 0 {
            // What the last pause held, up to its end or now, whichever came first.
            c.paused_ns += self.until[i].min(now).saturating_sub(self.since[i]);
            self.paused &= !(1 << i);
        }
        if quanta == 0 {
            c.resume += 1;
            return;
        }
        c.pause += 1;
        self.since[i] = now;
        self.until[i] = now + quanta_to_ns(quanta, self.speed_mbps);
        self.paused |= 1 << i;
    }

    /// Ends the pauses whose time has passed at `now` and says what is held.
    #[cold]
    pub(crate) fn held(&mut self, now: u64) -> Held {
        for i in 0..=GLOBAL {
            if self.paused & (1 << i) != 0 && self.until[i] <= now {
                self.counters.prio[i].paused_ns += self.until[i] - self.since[i];
                self.paused &= !(1 << i);
            }
        }
        let global = self.paused & (1 << GLOBAL) != 0;
        Held {
            data: global || self.paused & (1 << self.data_prio) != 0,
            cnps: global || self.paused & (1 << self.cnp_prio) != 0,
        }
    }

    /// When the first pause still running ends (nanoseconds), if any: a sleeping side (`-e`)
    /// wakes then to send what it holds.
    pub(crate) fn next_end(&self) -> Option<u64> {
        (0..=GLOBAL)
            .filter(|&i| self.paused & (1 << i) != 0)
            .map(|i| self.until[i])
            .min()
    }

    /// Records what the engines were told is held; true when that changed.
    pub(crate) fn tell_held(&mut self, held: Held) -> bool {
        let changed = self.told != held;
        self.told = held;
        changed
    }

    /// The counters at `now`, the pauses still running counted up to it.
    pub(crate) fn counters(&self, now: u64) -> PfcCounters {
        let mut c = self.counters;
        for i in 0..=GLOBAL {
            if self.paused & (1 << i) != 0 {
                c.prio[i].paused_ns += self.until[i].min(now).saturating_sub(self.since[i]);
            }
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::MacAddr;
    use crate::wire::pfc::PAUSE_FRAME_LEN;

    const SWITCH: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x5e]);
    /// 10 Gb/s: one quantum is 51.2 ns, 1000 quanta 51.2 µs.
    const Q1000_NS: u64 = 51_200;

    fn frame(repr: PauseRepr) -> [u8; PAUSE_FRAME_LEN] {
        let mut buf = [0u8; PAUSE_FRAME_LEN];
        repr.emit(&mut buf);
        buf
    }

    fn pfc(prio: u8, quanta: u16) -> [u8; PAUSE_FRAME_LEN] {
        frame(PauseRepr::priority(SWITCH, prio, quanta))
    }

    #[test]
    fn a_pause_holds_its_priority_for_its_quanta_at_the_link_speed() {
        let mut s = PauseState::new(10_000, 3, 6, false);
        assert!(!s.armed(), "no pause frame: the datapath pays one load");
        s.on_frame(1_000, &pfc(3, 1000));
        assert!(s.armed());
        assert_eq!(
            s.held(1_000 + Q1000_NS - 1),
            Held {
                data: true,
                cnps: false
            }
        );
        assert_eq!(s.held(1_000 + Q1000_NS), Held::default(), "expired");
        assert!(s.armed(), "the next pause may come at any time");
        let c = s.counters(1_000_000).prio[3];
        assert_eq!((c.pause, c.resume, c.paused_ns), (1, 0, Q1000_NS));
    }

    #[test]
    fn a_tagged_run_is_armed_from_the_start_and_holds_nothing_until_a_pause() {
        let mut s = PauseState::new(10_000, 3, 6, true);
        assert!(s.armed(), "the first pause must find the datapath checking");
        assert_eq!(s.held(5_000), Held::default());
        s.on_frame(10_000, &pfc(3, 1000));
        assert!(s.held(10_000).data);
        assert_eq!(s.counters(20_000).prio[3].pause, 1);
    }

    #[test]
    fn a_new_pause_replaces_the_time_left_and_a_zero_time_resumes() {
        let mut s = PauseState::new(10_000, 3, 6, false);
        s.on_frame(0, &pfc(3, 1000));
        // 10 µs in, a shorter pause: it ends 100 quanta (5.12 µs) from now, not at 51.2 µs.
        s.on_frame(10_000, &pfc(3, 100));
        assert!(s.held(15_119).data);
        assert!(!s.held(15_120).data);
        assert_eq!(s.counters(20_000).prio[3].paused_ns, 15_120);
        // A longer one extends; a resume ends it at once.
        s.on_frame(20_000, &pfc(3, 0xffff));
        assert!(s.held(1_000_000).data);
        s.on_frame(1_000_000, &pfc(3, 0));
        assert!(!s.held(1_000_000).data);
        let c = s.counters(5_000_000).prio[3];
        assert_eq!((c.pause, c.resume), (3, 1));
        assert_eq!(c.paused_ns, 15_120 + 980_000, "held until the resume");
    }

    #[test]
    fn other_priorities_are_counted_and_hold_nothing_of_ours() {
        let mut s = PauseState::new(10_000, 3, 6, false);
        s.on_frame(0, &pfc(5, 0xffff));
        assert_eq!(s.held(1), Held::default());
        // CNPs' priority (6) paused: CNPs wait, data goes.
        s.on_frame(0, &pfc(6, 0xffff));
        assert_eq!(
            s.held(1),
            Held {
                data: false,
                cnps: true
            }
        );
        let c = s.counters(1_000);
        assert_eq!(
            (c.prio[5].pause, c.prio[6].pause, c.prio[3].seen),
            (1, 1, false)
        );
        let names: Vec<String> = c.by_name().into_iter().map(|(n, _)| n).collect();
        assert_eq!(
            names,
            [
                "rx_prio5_pause",
                "rx_prio5_pause_duration",
                "rx_prio5_resume",
                "rx_prio6_pause",
                "rx_prio6_pause_duration",
                "rx_prio6_resume",
                "rx_pause_malformed"
            ]
        );
    }

    #[test]
    fn a_global_pause_holds_everything() {
        let mut s = PauseState::new(100_000, 3, 6, false);
        let global = |quanta| {
            frame(PauseRepr {
                src: SWITCH,
                kind: PauseKind::Global { quanta },
            })
        };
        s.on_frame(0, &global(1000));
        assert_eq!(
            s.held(5_119),
            Held {
                data: true,
                cnps: true
            },
            "1000 quanta at 100 Gb/s: 5.12 µs"
        );
        assert_eq!(s.held(5_120), Held::default());
        s.on_frame(6_000, &global(0));
        let c = s.counters(10_000).prio[GLOBAL];
        assert_eq!((c.pause, c.resume, c.paused_ns), (1, 1, 5_120));
        assert!(c.seen);
        assert_eq!(
            s.counters(10_000).to_string(),
            "PFC pause frames received: global pause 1 (held 5 µs) resume 1; malformed 0"
        );
    }

    #[test]
    fn one_frame_may_pause_and_resume_several_priorities() {
        let mut s = PauseState::new(10_000, 3, 6, false);
        let mut quanta = [0u16; 8];
        quanta[3] = 1000;
        quanta[6] = 7;
        quanta[1] = 1000; // its bit is clear: ignored
        s.on_frame(
            0,
            &frame(PauseRepr {
                src: SWITCH,
                kind: PauseKind::Priority {
                    enable: (1 << 3) | (1 << 6) | (1 << 4),
                    quanta,
                },
            }),
        );
        let c = s.counters(0);
        assert_eq!(
            (c.prio[3].pause, c.prio[6].pause, c.prio[4].resume),
            (1, 1, 1)
        );
        assert!(
            !c.prio[1].seen,
            "a priority whose bit is clear is not named"
        );
        assert!(
            s.held(358).cnps && !s.held(359).cnps,
            "7 quanta: 358.4 ns, rounded up"
        );
    }

    #[test]
    fn a_malformed_mac_control_frame_is_counted_and_changes_nothing() {
        let mut s = PauseState::new(10_000, 3, 6, false);
        let mut bad = pfc(3, 0xffff);
        bad[15] = 0x02; // opcode 0x0102
        s.on_frame(0, &bad);
        s.on_frame(0, &bad[..40]);
        assert!(!s.armed());
        let c = s.counters(0);
        assert_eq!(c.malformed, 2);
        assert!(!c.is_empty() && !c.prio.iter().any(|p| p.seen));
        assert!(PfcCounters::default().is_empty());
        assert_eq!(
            serde_json::to_value(c).unwrap(),
            serde_json::json!({"rx_pause_malformed": 2})
        );
    }
}
