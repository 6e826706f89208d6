//! The I/O loop around [`Port`]: receive a batch on every port, learn source MACs, forward at once
//! what does not go to the egress port, queue what does (its bytes in the [`Ring`]), send what is
//! due, send PFC frames, and sleep in `ppoll` until the next departure or refresh, or a frame (queue
//! samples are filled in at each wake-up).

use roceperf::params::marks::MarkAt;
use roceperf::results::switch::{
    EgressStats, PfcStats, PortStats, SWITCH_SCHEMA, SwitchStats, Thresholds,
};
use roceperf::wire::MacAddr;
use roceperf::wire::pfc::{
    ASSUMED_SPEED_MBPS, PAUSE_FRAME_LEN, PauseRepr, link_speed_mbps, refresh_ns,
};

use crate::cli::Config;
use crate::error::{Error, Result};
use crate::frame::{self, ETH_HEADER, VLAN_TAG};
use crate::port::{MIN_FRAME, Pfc, Port, PortConfig, Verdict, WIRE_OVERHEAD};
use crate::ring::Ring;
use crate::sock::{BATCH, Rx, Sock, max_frame};
use crate::sys;

/// The longest sleep, so that a stop signal between the check and `ppoll` waits at most this.
const MAX_SLEEP_NS: u64 = 100_000_000;
/// MACs the switch remembers.
const MACS: usize = 256;

/// An empty iovec.
const NO_IOV: libc::iovec = libc::iovec {
    iov_base: std::ptr::null_mut(),
    iov_len: 0,
};

fn iov(b: &[u8]) -> libc::iovec {
    libc::iovec {
        iov_base: b.as_ptr() as *mut libc::c_void,
        iov_len: b.len(),
    }
}

/// Per-port counts.
#[derive(Default, Clone, Copy)]
struct Count {
    rx: u64,
    tx: u64,
    pauses: u64,
    resumes: u64,
}

/// The switch.
pub struct Switch {
    cfg: Config,
    /// Ingress ports, then the egress port last.
    socks: Vec<Sock>,
    egress: usize,
    port: Port,
    ring: Ring,
    macs: Vec<([u8; 6], usize)>,
    next_mac: usize,
    /// Per port: the priorities it sent towards the egress port (bit i: priority i).
    prio_seen: Vec<u8>,
    counts: Vec<Count>,
    /// Pause refresh period: half the shortest pause of the ingress ports' speeds.
    pub refresh_ns: u64,
    /// Where the quanta's speed came from.
    pub speed_note: String,
    rx: Vec<Rx>,
    tags: [[u8; VLAN_TAG]; BATCH],
    /// Staged immediate sends: iovecs and their counts, per output port.
    stage: Vec<(Vec<[libc::iovec; 3]>, Vec<usize>)>,
    /// `--mark-at dequeue` only: per queued frame, oldest first, where its IP header lies in its
    /// stored bytes, for its mark at departure.
    ip_spans: std::collections::VecDeque<Option<(usize, usize, bool)>>,
    eg_iovs: Vec<[libc::iovec; 3]>,
    eg_counts: Vec<usize>,
    oversize: u64,
    start: Option<u64>,
    samples: Vec<[u64; 2]>,
    next_sample: u64,
    /// Departure precision: sum and max of how late frames left, ns, and how many.
    late: (u64, u64, u64),
    /// Busy periods: since when (scheduled), their wire bits, and the closed ones' totals.
    period: Option<u64>,
    period_bits: u64,
    busy: (u64, u64),
    /// The latest arrival time a frame was queued at: arrival stamps from several ports are kept
    /// in order by never going back before it.
    last_arrival: u64,
}

impl Switch {
    /// Opens every port and sizes the queue.
    pub fn open(cfg: Config) -> Result<Switch> {
        let mut socks = Vec::with_capacity(cfg.ports.len() + 1);
        for name in cfg.ports.iter().chain(std::iter::once(&cfg.egress)) {
            // Arrival stamps only where a frame may wait a whole sleep to be read (--batch-us).
            socks.push(Sock::open(name, cfg.batch_ns > 0)?);
        }
        let egress = socks.len() - 1;
        // Pause quanta are timed at an ingress port's speed by the rule the soft endpoint that
        // honours them takes (`wire::pfc::link_speed_mbps`): the slowest port's, for the shortest pause.
        let ingress = &socks[..egress];
        let slowest = ingress
            .iter()
            .map(|s| link_speed_mbps(s.speed))
            .min()
            .unwrap_or(ASSUMED_SPEED_MBPS);
        let speed_note = if ingress.iter().all(|s| s.speed.is_some_and(|v| v > 0)) {
            format!("{slowest} Mb/s (the ingress ports' sysfs speed)")
        } else {
            format!(
                "{ASSUMED_SPEED_MBPS} Mb/s assumed (an ingress port's sysfs speed is unknown; veth reports 10000)"
            )
        };
        // The sender's pause lasts 0xffff quanta at its link speed: refreshed at half of that.
        let refresh_ns = refresh_ns(slowest);
        let buffer = cfg.red.buffer_bytes as usize;
        let port = Port::new(
            PortConfig {
                discipline: cfg.discipline,
                red: cfg.red.clone(),
                xoff: cfg.xoff,
                xon: cfg.xon,
                pfc_prio: cfg.pfc_prio,
                ecn_prio: cfg.ecn_prio,
                refresh_ns,
                mark_at: cfg.mark_at,
            },
            cfg.seed,
            buffer / ETH_HEADER + 1,
        );
        let n = socks.len();
        Ok(Switch {
            port,
            ring: Ring::new(buffer),
            macs: Vec::with_capacity(MACS),
            next_mac: 0,
            prio_seen: vec![0; n],
            counts: vec![Count::default(); n],
            refresh_ns,
            speed_note,
            rx: Vec::with_capacity(BATCH),
            tags: [[0; VLAN_TAG]; BATCH],
            stage: (0..n)
                .map(|_| (Vec::with_capacity(BATCH), Vec::with_capacity(BATCH)))
                .collect(),
            ip_spans: std::collections::VecDeque::with_capacity(match cfg.mark_at {
                MarkAt::Dequeue => buffer / ETH_HEADER + 1,
                MarkAt::Enqueue => 0,
            }),
            eg_iovs: vec![[NO_IOV; 3]; BATCH],
            eg_counts: Vec::with_capacity(BATCH),
            oversize: 0,
            start: None,
            samples: Vec::new(),
            next_sample: 0,
            late: (0, 0, 0),
            period: None,
            period_bits: 0,
            busy: (0, 0),
            last_arrival: 0,
            socks,
            egress,
            cfg,
        })
    }

    /// The ports' names and MTUs, for the start-up line.
    pub fn describe(&self) -> String {
        let ins: Vec<String> = self.socks[..self.egress]
            .iter()
            .map(|s| format!("{} (MTU {})", s.name, s.mtu))
            .collect();
        let e = &self.socks[self.egress];
        format!(
            "ports {} -> egress {} (MTU {})",
            ins.join(", "),
            e.name,
            e.mtu
        )
    }

    /// Switches until SIGINT or SIGTERM.
    pub fn run(&mut self) -> Result<()> {
        let mut fds: Vec<libc::pollfd> = self
            .socks
            .iter()
            .map(|s| libc::pollfd {
                fd: s.fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        while !sys::stop_requested() {
            let now = sys::now_ns();
            self.sample(now);
            // Arrivals first: each is queued at its stamp after what left before it (with
            // --batch-us they may have waited a while to be read), then what is due now leaves.
            let mut got = false;
            for i in 0..self.socks.len() {
                got |= self.receive(i)?;
            }
            let now = sys::now_ns();
            self.depart(now, now)?;
            self.pfc(now)?;
            if got {
                continue;
            }
            let now = sys::now_ns();
            let next = [self.port.next_departure(), self.port.next_refresh()]
                .into_iter()
                .flatten()
                .min();
            // --batch-us: with frames queued, the ingress ports do not wake it, and it sleeps at
            // least that long; what arrived is read at the next wake-up, queued at its stamps.
            let batching = self.cfg.batch_ns > 0 && self.port.queued_frames() > 0;
            let next = match (batching, self.port.next_departure()) {
                (true, Some(d)) => Some(
                    d.max(now + self.cfg.batch_ns)
                        .min(self.port.next_refresh().unwrap_or(u64::MAX)),
                ),
                _ => next,
            };
            let timeout = next.map_or(MAX_SLEEP_NS, |t| t.saturating_sub(now).min(MAX_SLEEP_NS));
            let watched = if batching {
                &mut fds[self.egress..]
            } else {
                &mut fds[..]
            };
            if timeout > 0 {
                sys::wait(watched, Some(timeout))
                    .map_err(|e| Error::io("ppoll on the ports", e))?;
            }
        }
        Ok(())
    }

    /// Sends what is due by `at` out of the egress port; `wall` is the time now (`at` is earlier
    /// when an arrival read late is queued at its stamp: what left before it leaves first). The
    /// caller asks PFC after it.
    fn depart(&mut self, at: u64, wall: u64) -> Result<()> {
        loop {
            let mut skip = 0;
            self.eg_counts.clear();
            while self.eg_counts.len() < BATCH {
                let Some(q) = self.port.depart(at) else {
                    break;
                };
                let span = self.ip_spans.pop_front().flatten();
                // Only a frame marked at departure has a mark here (and a span kept for it).
                if let (true, Some((at, n, v6))) = (q.mark, span) {
                    self.ring
                        .with_bytes_mut(skip, at, n, |h| frame::mark_ce_header(h, v6));
                }
                let (a, b) = self.ring.at(skip, q.len as usize);
                let n = self.eg_counts.len();
                self.eg_iovs[n] = [iov(a), iov(b), NO_IOV];
                self.eg_counts.push(if b.is_empty() { 1 } else { 2 });
                skip += q.len as usize;
                let late = wall.saturating_sub(q.departs_ns);
                self.late = (self.late.0 + late, self.late.1.max(late), self.late.2 + 1);
                self.period_bits += (q.len.max(MIN_FRAME) + WIRE_OVERHEAD) * 8;
            }
            let n = self.eg_counts.len();
            if n == 0 {
                break;
            }
            let e = self.egress;
            let sent = self.socks[e]
                .send(&mut self.eg_iovs[..n], &self.eg_counts)
                .map_err(|err| {
                    Error::io(
                        format!("sending on the egress port {}", self.socks[e].name),
                        err,
                    )
                })?;
            self.counts[e].tx += sent as u64;
            self.ring.pop(skip);
            if n < BATCH {
                break;
            }
        }
        if self.port.queued_frames() == 0 {
            if let Some(from) = self.period.take() {
                self.busy = (
                    self.busy.0 + self.period_bits,
                    self.busy.1 + wall.saturating_sub(from),
                );
            }
            self.period_bits = 0;
        }
        Ok(())
    }

    /// Sends a pause or resume out of every ingress port that sent the lossless priority, when PFC
    /// asks for one.
    fn pfc(&mut self, now: u64) -> Result<()> {
        let quanta = match self.port.pfc(now) {
            Some(Pfc::Pause) => 0xffff,
            Some(Pfc::Resume) => 0,
            None => return Ok(()),
        };
        let prio = self.cfg.pfc_prio;
        for j in 0..self.egress {
            if self.prio_seen[j] & (1 << prio) == 0 {
                continue;
            }
            let mut buf = [0u8; PAUSE_FRAME_LEN];
            PauseRepr::priority(MacAddr(self.socks[j].mac), prio, quanta).emit(&mut buf);
            let mut iovs = [[iov(&buf), NO_IOV, NO_IOV]];
            let sent = self.socks[j].send(&mut iovs, &[1]).map_err(|e| {
                Error::io(format!("sending a PFC frame on {}", self.socks[j].name), e)
            })?;
            self.counts[j].tx += sent as u64;
            if quanta == 0 {
                self.counts[j].resumes += sent as u64;
            } else {
                self.counts[j].pauses += sent as u64;
            }
        }
        Ok(())
    }

    /// Receives one batch on port `i` and forwards or queues each frame; true if any came.
    fn receive(&mut self, i: usize) -> Result<bool> {
        let mut rx = std::mem::take(&mut self.rx);
        let got = self.socks[i]
            .recv(&mut rx)
            .map_err(|e| Error::io(format!("receiving on {}", self.socks[i].name), e));
        let result = got.and_then(|()| self.handle(i, &rx));
        let any = !rx.is_empty();
        self.rx = rx;
        result.map(|()| any)
    }

    fn handle(&mut self, i: usize, rx: &[Rx]) -> Result<()> {
        if rx.is_empty() {
            return Ok(());
        }
        let now = sys::now_ns();
        // Arrival stamps (--batch-us only) are CLOCK_REALTIME: moved onto the port's monotonic clock.
        let realtime_ahead = if self.cfg.batch_ns > 0 {
            sys::realtime_ns().saturating_sub(now)
        } else {
            0
        };
        self.start.get_or_insert(now);
        if self.next_sample == 0 {
            self.next_sample = now;
        }
        for s in &mut self.stage {
            s.0.clear();
            s.1.clear();
        }
        let limit = max_frame(self.socks[i].mtu);
        for r in rx {
            self.counts[i].rx += 1;
            let in_band_tag = r.len >= 14 && self.socks[i].frame(r)[12..14] == [0x81, 0x00];
            let plain_limit = if in_band_tag { limit } else { limit - VLAN_TAG };
            if r.truncated || r.len > plain_limit || r.len < ETH_HEADER {
                self.oversize += u64::from(r.len >= ETH_HEADER);
                continue;
            }
            // When it came. With --batch-us, its stamp (never before a frame already queued nor
            // after now): it may have waited a whole sleep to be read. Without, when it is read:
            // a frame still in the socket counts as in flight, and a switch that wakes late (a
            // loaded machine) does not charge its own lateness to the senders as drops.
            let at = match r.stamp_ns.checked_sub(realtime_ahead) {
                Some(t) if r.stamp_ns > 0 => t.clamp(self.last_arrival, now),
                _ => now,
            };
            self.last_arrival = at;
            // What left the port before it came, left first: the queue it finds is the one it met.
            self.depart(at, now)?;
            let f = self.socks[i].frame(r);
            let (dst, src) = (frame::dst(f), frame::src(f));
            if frame::is_link_local(&dst) {
                continue;
            }
            if !frame::is_group(&src) {
                self.learn(src, i);
            }
            let to = if frame::is_group(&dst) {
                None
            } else {
                self.lookup(&dst)
            };
            match to {
                Some(o) if o == i => {}
                Some(o) => self.forward(i, r, o, at),
                None => {
                    for o in (0..self.socks.len()).filter(|&o| o != i) {
                        self.forward(i, r, o, at);
                    }
                }
            }
            // Xoff is judged on every frame as it is queued, as a switch's ingress accounting
            // does: judged once per batch, the queue passed Xoff by up to a batch (64 frames,
            // 266 KB at MTU 4200) before the pause left, headroom the senders then lacked.
            self.pfc(at)?;
        }
        for o in 0..self.socks.len() {
            if self.stage[o].1.is_empty() {
                continue;
            }
            let (iovs, counts) = &mut self.stage[o];
            let sent = self.socks[o]
                .send(iovs, counts)
                .map_err(|e| Error::io(format!("sending on {}", self.socks[o].name), e))?;
            self.counts[o].tx += sent as u64;
        }
        Ok(())
    }

    /// Sends frame `r` of port `i` to port `o`: queued if `o` is the egress port, else staged.
    fn forward(&mut self, i: usize, r: &Rx, o: usize, now: u64) {
        // The kernel took the 802.1Q tag off into the metadata: it goes back into the frame.
        if let Some(t) = r.tci {
            self.tags[r.slot] = [0x81, 0x00, (t >> 8) as u8, t as u8];
        }
        if o != self.egress {
            let f = self.socks[i].frame(r);
            let parts = match r.tci {
                Some(_) => [iov(&f[..12]), iov(&self.tags[r.slot]), iov(&f[12..])],
                None => [iov(f), NO_IOV, NO_IOV],
            };
            self.stage[o].0.push(parts);
            self.stage[o].1.push(if r.tci.is_some() { 3 } else { 1 });
            return;
        }
        let tag = r.tci.map(|_| self.tags[r.slot]);
        let class = frame::classify(self.socks[i].frame(r), r.tci);
        self.prio_seen[i] |= 1 << class.prio;
        let len = (r.len + tag.map_or(0, |_| VLAN_TAG)) as u64;
        let was_empty = self.port.queued_frames() == 0;
        match self.port.offer(now, len, class.ecn, class.prio) {
            Verdict::Queued { mark, .. } => {
                let f = self.socks[i].frame_mut(r);
                if mark {
                    frame::mark_ce(f, &class);
                }
                if self.cfg.mark_at == MarkAt::Dequeue {
                    // Where the IP header will be in the stored bytes (after the tag put back).
                    let span = frame::ip_span(f, &class)
                        .map(|(at, n, v6)| (at + tag.map_or(0, |_| VLAN_TAG), n, v6));
                    self.ip_spans.push_back(span);
                }
                let stored = match &tag {
                    Some(t) => self.ring.push(&[&f[..12], &t[..], &f[12..]]),
                    None => self.ring.push(&[f]),
                };
                debug_assert!(stored, "the port admits no more than the ring holds");
                if was_empty {
                    self.period = Some(now);
                }
            }
            Verdict::Dropped(_) => {}
        }
    }

    fn learn(&mut self, mac: [u8; 6], port: usize) {
        if let Some(e) = self.macs.iter_mut().find(|(m, _)| *m == mac) {
            e.1 = port;
        } else if self.macs.len() < MACS {
            self.macs.push((mac, port));
        } else {
            self.macs[self.next_mac] = (mac, port);
            self.next_mac = (self.next_mac + 1) % MACS;
        }
    }

    fn lookup(&self, mac: &[u8; 6]) -> Option<usize> {
        self.macs.iter().find(|(m, _)| m == mac).map(|(_, p)| *p)
    }

    /// Records the queue at every sample time up to `now`, before this wake-up's departures and
    /// arrivals. The queue changes only at those, so what it holds now it held since the last
    /// wake-up: a sample needs no wake-up of its own. (It had one: 10,000 a second at 100 µs, each
    /// preempting a busy-polling endpoint under SCHED_FIFO; the idle switch took a quarter of a core.)
    fn sample(&mut self, now: u64) {
        let (Some(period), Some(start)) = (self.cfg.sample_ns, self.start) else {
            return;
        };
        let queued = self.port.queued_bytes();
        while self.next_sample <= now {
            self.samples
                .push([(self.next_sample - start) / 1_000, queued]);
            self.next_sample += period;
        }
    }

    /// What the switch did, as its stats file holds it.
    pub fn stats(&self) -> SwitchStats {
        let now = sys::now_ns();
        let c = &self.port.counts;
        let start = self.start.unwrap_or(now);
        let (late_sum, late_max, late_n) = self.late;
        let ports: Vec<PortStats> = self
            .socks
            .iter()
            .zip(&self.counts)
            .map(|(s, c)| PortStats {
                name: s.name.clone(),
                rx_packets: c.rx,
                tx_packets: c.tx,
                pause_frames_sent: c.pauses + c.resumes,
                rx_kernel_drops: s.kernel_drops(),
            })
            .collect();
        SwitchStats {
            schema: SWITCH_SCHEMA.into(),
            discipline: self.cfg.discipline.name().into(),
            rate_gbps: self.cfg.red.rate_gbps,
            thresholds: Thresholds {
                buffer_bytes: self.cfg.red.buffer_bytes,
                kmin_bytes: self.cfg.red.kmin_bytes,
                kmax_bytes: self.cfg.red.kmax_bytes,
                pmax: self.cfg.red.pmax,
                xoff_bytes: self.cfg.xoff,
                xon_bytes: self.cfg.xon,
            },
            pfc_prio: self.cfg.pfc_prio,
            ecn_prio: self.cfg.ecn_prio,
            duration_s: now.saturating_sub(start) as f64 / 1e9,
            cpu_s: sys::cpu_seconds(),
            egress: EgressStats {
                offered_packets: c.offered.0,
                offered_bytes: c.offered.1,
                forwarded_packets: c.forwarded.0,
                forwarded_bytes: c.forwarded.1,
                dropped_packets: c.dropped.0,
                dropped_bytes: c.dropped.1,
                headroom_drops: c.headroom_drops,
                marked_packets: c.marked,
                queued_at_stop_packets: self.port.queued_frames() as u64,
                oversize_drops: self.oversize,
                max_queue_bytes: c.max_queue,
                mean_queue_bytes: self.port.mean_queue(now),
                achieved_busy_gbps: if self.busy.1 == 0 {
                    0.0
                } else {
                    self.busy.0 as f64 / self.busy.1 as f64
                },
                departure_late_mean_ns: if late_n == 0 {
                    0.0
                } else {
                    late_sum as f64 / late_n as f64
                },
                departure_late_max_ns: late_max,
            },
            pfc: PfcStats {
                pause_frames_sent: self.counts.iter().map(|c| c.pauses).sum(),
                resume_frames_sent: self.counts.iter().map(|c| c.resumes).sum(),
                paused_ns: self.port.paused_ns(now),
            },
            ports,
            queue_samples: self.samples.clone(),
        }
    }
}
