//! The datapath of [`SoftEndpoint`]: one [`poll`](SoftEndpoint::poll) sends what was posted since
//! the last one, receives a batch, checks and delivers each packet to its engine, fires due timers,
//! lets the engines fill the transmit batch and sends it, then hands out completions. No
//! allocation, one syscall per batch.
//!
//! ACK policy: the transmission that follows a receive keeps a lone plain ACK back; the next poll's
//! first transmission sends it after whatever the application posted meanwhile, in the same batch
//! (IB lets one ACK cover several packets and follow later ones). A ping-pong's responder thus sends
//! its reply and the ACK of the request with one syscall instead of two, the ACK off its critical
//! path; an ACK is never held longer than until the next poll. A latency test signals one message in
//! 16 (`bench::lat`), and a requester asks for an ACK only on a signaled message, so most hops carry
//! the reply alone.

use super::{QpSlot, SoftEndpoint};
use crate::transport::Completion;
use crate::transport::Result;
use crate::transport::soft::counters::SoftCounters;
use crate::transport::soft::egress;
use crate::transport::soft::engine::Engine;
use crate::transport::soft::ingress::{
    FrameFilter, RxIcrcs, RxNet, Source, UdpRx, check_frame, check_udp_in, check_udp_v4, from_peer,
    is_ce, is_mac_control, qp_index,
};
use crate::transport::soft::io::Nic;
use crate::transport::soft::io::batch::{RxDatagram, RxFrame};
use crate::transport::soft::io::device::{Device, RxMeta};
use crate::transport::soft::io::io_error;
use crate::transport::soft::io::sockaddr::Name;
use crate::transport::soft::io::udp::{RxSink, Second, UdpDevice, Unqueued};
use crate::transport::soft::path::Path;
use crate::transport::soft::pfc::PauseState;
use crate::transport::soft::rc::{self, LoneAck};
use crate::transport::soft::unreliable::{Grh, UdQp};
use crate::wire::Ipv4IdCache;
use std::net::{SocketAddr, SocketAddrV4};

/// Idle polls between two timer checks. Timers are milliseconds (4.096 µs × 2^timeout) or, for an
/// RNR wait, at least tens of microseconds; an idle poll takes well under a microsecond, so this
/// schedule moves a timer by a few microseconds while sparing the idle loop a clock read per turn.
pub(super) const TIMER_CHECK_EVERY: u32 = 16;

/// Frames one transmission may send once PFC is armed (`PauseState::armed`: from the start on a
/// tagged AF_PACKET run, else once PFC frames have come): then the poll reads again before it sends
/// more, so a pause stops this side within this many frames of arriving, as a NIC stops within a few
/// frames (a switch's PFC headroom is sized for that). Without the cap a queue pair's whole window
/// (1,024 packets, 4 MB at 4 KiB) left in one transmission behind a pause and filled the switch's
/// buffer past its headroom.
const PFC_FRAMES_PER_TRANSMISSION: u32 = 16;

/// The engines' clock during one poll: read at most once, and only when something needs it.
pub(super) struct PollClock {
    /// [`monotonic_ns`] when the endpoint opened: the engines' time zero.
    epoch: u64,
    now: Option<rc::Instant>,
}

impl PollClock {
    fn new(epoch: u64) -> PollClock {
        PollClock { epoch, now: None }
    }

    /// The clock of a poll that read `now` already.
    fn at(epoch: u64, now: rc::Instant) -> PollClock {
        PollClock {
            epoch,
            now: Some(now),
        }
    }

    /// The time of this poll, read on first use.
    #[inline]
    fn now(&mut self) -> rc::Instant {
        let epoch = self.epoch;
        *self
            .now
            .get_or_insert_with(|| rc::Instant::from_nanos(monotonic_ns().saturating_sub(epoch)))
    }

    /// True once something in this poll needed the time.
    fn was_read(&self) -> bool {
        self.now.is_some()
    }

    /// The time now in nanoseconds, read afresh rather than this poll's.
    fn fresh_nanos(&self) -> u64 {
        monotonic_ns().saturating_sub(self.epoch)
    }
}

/// What the receive checks besides the queue pairs: whom a packet must be for, and what the checks
/// keep. One struct, so that the poll's receive closure borrows it once rather than field by field.
pub(super) struct RxState {
    /// Our encapsulation, IP address and GID: what a frame must be addressed to.
    pub(super) me: FrameFilter,
    /// The UDP socket's address (fixed once open); `None` on AF_PACKET.
    pub(super) local: Option<SocketAddr>,
    /// How the IPv4 ID moves the ICRC, per packet length: the UDP receive checks.
    pub(super) ipv4_ids: Ipv4IdCache,
    /// ICRCs started over the headers of received packets (the UDP receive checks).
    pub(super) icrcs: RxIcrcs,
    /// The CM on QP1 (`-R`), once asked for; here, so that the receive's closure reaches it
    /// through `RxState` rather than by a capture of its own.
    pub(super) cm: Option<Box<super::cm::CmSide>>,
}

/// Fires the due timers of `q` at `now`; true. Out of line and cold: most checks find none due.
#[cold]
#[inline(never)]
fn fire_rc(q: &mut rc::Qp, now: rc::Instant) -> bool {
    q.handle_timeout(now);
    true
}

/// CLOCK_MONOTONIC in nanoseconds, straight from the vDSO: `Instant::elapsed` costs several times
/// the instructions in its checked `Timespec` arithmetic.
#[inline]
pub(super) fn monotonic_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a live timespec the call writes; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

impl SoftEndpoint {
    /// `poll_cq` off the simple poll: `-e`'s sleep or the general poll. Out of line, so that the
    /// simple poll's caller saves none of its registers.
    #[inline(never)]
    pub(super) fn poll_general(&mut self, out: &mut [Completion]) -> Result<usize> {
        // `-e`'s sleep is out of line (`event`).
        let polled = if self.cfg.events {
            self.poll_or_sleep(out)
        } else {
            self.poll(out)
        };
        // Back to the simple poll once the device has sent what a transmission left queued.
        if self.simple_shape {
            self.simple = self.nic.tx_idle();
        }
        polled
    }

    /// One turn of the NIC: transmit, receive, fire due timers, transmit, hand out completions. A
    /// turn that finds nothing to do costs one receive syscall and no clock read. Inlined into
    /// `poll_general`: a call and a frame fewer per turn.
    #[inline(always)]
    pub(super) fn poll(&mut self, out: &mut [Completion]) -> Result<usize> {
        let mut clock = PollClock::new(self.epoch);
        // Once PFC frames come (AF_PACKET), what arrived is read first: a pause that came while
        // this side was off the CPU must stop it before it sends, not after a burst.
        let mut received = 0;
        if self.pfc.armed() {
            received = self.receive_first(&mut clock)?;
        }
        // Work posted since the last call leaves first, with the ACKs the last call held back: a
        // ping-pong's reply must not wait behind a receive syscall (the doorbell of a real NIC rings
        // at post time; ours at the next poll), and the ACK rides in the same batch.
        self.transmit(&mut clock, LoneAck::Send)?;
        // And again all that waits, so that the answers' transmission below sees a pause that
        // came behind a batch of ACKs.
        received += if self.pfc.armed() {
            self.receive_first(&mut clock)?
        } else {
            self.receive(&mut clock)?
        };
        self.finish(&mut clock, received, out)
    }

    /// The poll after its receive of `received` packets: due timers, the CM, the answers'
    /// transmission, the completions.
    #[inline(always)]
    fn finish(
        &mut self,
        clock: &mut PollClock,
        received: usize,
        out: &mut [Completion],
    ) -> Result<usize> {
        // A poll that read the clock checks the timers (the time is there) without counting itself
        // idle first: the count restarts either way.
        let due = clock.was_read() || self.idle_turn();
        let fired = due && self.fire_timers(clock);
        // -R: the CM agent's timers, events and MADs (no clock read without one).
        let cm = self.rx.cm.is_some();
        if cm {
            let now = clock.now();
            self.cm_turn(now)?;
        }
        // Answers to what just arrived (READ responses, NAKs, resends) leave now; a lone ACK waits
        // for the next poll, where it follows whatever the application posts meanwhile. Nothing
        // arrived, no timer fired and no CM: the first transmission already sent all there was.
        if received > 0 || fired || cm {
            self.transmit(clock, LoneAck::Hold)?;
        }
        Ok(self.hand_out(out))
    }

    /// Counts an idle poll (one that read no clock); whether the timers are due.
    #[inline(always)]
    fn idle_turn(&mut self) -> bool {
        self.idle_left -= 1;
        self.idle_left == 0
    }

    /// Restarts the idle count and fires the queue pairs' due timers; whether one fired.
    #[inline(never)]
    fn fire_timers(&mut self, clock: &mut PollClock) -> bool {
        self.idle_left = TIMER_CHECK_EVERY;
        let now = clock.now();
        let mut fired = false;
        for q in self.slots.iter_mut().filter_map(|s| s.qp.as_mut()) {
            if q.poll_timeout().is_some_and(|t| t <= now) {
                q.handle_timeout(now);
                fired = true;
            }
        }
        fired
    }

    /// [`fire_timers`](Self::fire_timers) for the simple poll's lone RC queue pair at this poll's
    /// `now` (the clock was read): its timers without the walk over the slots and the engine's
    /// match (a READ ping-pong checks them twice a round trip, after the clock reads of its request
    /// and its response). A leaf while nothing is due: the firing is out of line.
    #[inline(never)]
    fn fire_timers_simple(&mut self, now: rc::Instant) -> bool {
        let [
            QpSlot {
                qp: Some(Engine::Rc(q)),
                ..
            },
        ] = &mut self.slots[..]
        else {
            return self.fire_timers_at(now);
        };
        self.idle_left = TIMER_CHECK_EVERY;
        q.poll_timeout().is_some_and(|t| t <= now) && fire_rc(q, now)
    }

    /// [`fire_timers`](Self::fire_timers) at `now`. Out of line and cold: its clock, built on the
    /// stack, made every call of [`fire_timers_simple`](Self::fire_timers_simple) set up a frame.
    #[cold]
    #[inline(never)]
    fn fire_timers_at(&mut self, now: rc::Instant) -> bool {
        self.fire_timers(&mut PollClock::at(self.epoch, now))
    }

    /// [`poll`](Self::poll) when `simple` holds (one RC queue pair on an unimpaired UDP socket, no
    /// `-e`, shared budget, CM or PFC): the same steps in the same order, without the checks of
    /// what `simple` rules out, each transmission the lone queue pair's unqueued one.
    #[inline(always)]
    pub(super) fn poll_simple(&mut self, out: &mut [Completion]) -> Result<usize> {
        let mut clock = PollClock::new(self.epoch);
        // The device holds nothing queued (`simple`): the queue pair alone is asked.
        if self.simple_tx_work(LoneAck::Send) {
            self.transmit_unqueued(&mut clock, LoneAck::Send)?;
        }
        let received = self.receive_simple(&mut clock)?;
        let fired = match clock.now {
            Some(now) => self.fire_timers_simple(now),
            None => self.idle_turn() && self.fire_timers(&mut clock),
        };
        // `simple` cleared: the first transmission left a packet queued, which goes now.
        if (received > 0 || fired) && (self.simple_tx_work(LoneAck::Hold) || !self.simple) {
            self.transmit_unqueued(&mut clock, LoneAck::Hold)?;
        }
        // The queue pair is RC's: its queue at one compare, where the engine's `cq` decodes
        // the variant in full.
        let [
            QpSlot {
                qp: Some(Engine::Rc(q)),
                ..
            },
        ] = &mut self.slots[..]
        else {
            return Ok(self.hand_out_any(out));
        };
        let cq = q.cq();
        Ok(if cq.is_empty() { 0 } else { cq.pop_into(out) })
    }

    /// [`transmit`](Self::transmit)'s question when `simple` holds: whether the queue pair may
    /// have something to send with `acks`. The device is not asked: while `simple` holds, it
    /// holds nothing queued.
    #[inline(always)]
    fn simple_tx_work(&self, acks: LoneAck) -> bool {
        let [QpSlot { qp: Some(q), .. }] = &self.slots[..] else {
            return true;
        };
        q.has_transmit_work(acks)
    }

    /// Moves completions into `out`, the queue pairs' in turn from the one the rotation is at;
    /// how many. Most polls find none: a look at each completion queue's length, then the next.
    #[inline(always)]
    fn hand_out(&mut self, out: &mut [Completion]) -> usize {
        // One queue pair (a latency test's): its queue alone, without the rotation's split and
        // loops, whose set-up every poll paid.
        if let [s] = &mut self.slots[..] {
            let Some(q) = &mut s.qp else { return 0 };
            // A look at the queue's length first, as `hand_out_from` does: the copy loop's set-up
            // (the end of `out`, the count) cost every poll that found nothing.
            let cq = q.cq();
            return if cq.is_empty() { 0 } else { cq.pop_into(out) };
        }
        self.hand_out_rotated(out)
    }

    /// [`hand_out`](Self::hand_out) out of line, for the simple poll, which never needs it (its
    /// one queue pair is RC's): the rotation's registers stay out of that poll's prologue.
    #[inline(never)]
    fn hand_out_any(&mut self, out: &mut [Completion]) -> usize {
        self.hand_out(out)
    }

    /// [`hand_out`](Self::hand_out) over several queue pairs.
    #[inline(always)]
    fn hand_out_rotated(&mut self, out: &mut [Completion]) -> usize {
        // The rotation's start is a slot (or 0 of none): the split is a plain walk, no wrap.
        let (before, from) = self.slots.split_at_mut(self.next_qp);
        let mut n = 0;
        if !hand_out_from(from, out, &mut n) {
            hand_out_from(before, out, &mut n);
        }
        n
    }

    /// Receives one batch and feeds every valid packet to its queue pair; how many packets came.
    /// Always inlined: the poll's own receive must stay in the poll (a call costs it more than
    /// the PFC receive that precedes it, behind a cold branch, costs in code size).
    #[inline(always)]
    fn receive(&mut self, clock: &mut PollClock) -> Result<usize> {
        self.receive_udp::<false>(clock)
    }

    /// [`receive`](Self::receive) when `simple` holds: the UDP device inside the impairer, which
    /// impairs nothing.
    #[inline(always)]
    fn receive_simple(&mut self, clock: &mut PollClock) -> Result<usize> {
        self.receive_udp::<true>(clock)
    }

    /// The receive of both polls: from a UDP socket without a receive impairment (every run but
    /// an impaired or AF_PACKET one), asked alone, else through `receive_any`. `SIMPLE`: the
    /// simple poll's endpoint, whose impairer impairs nothing, so its device is asked without
    /// the impairer's look at itself.
    #[inline(always)]
    fn receive_udp<const SIMPLE: bool>(&mut self, clock: &mut PollClock) -> Result<usize> {
        let (rx, slots, c) = (&mut self.rx, &mut self.slots, &mut self.counters);
        // The other devices' calls, which write their result in memory, would have the common
        // path store its own there too, and keep the closure's captures computed ahead of every
        // receive, an idle one included.
        let udp = if SIMPLE {
            self.nic.inner_mut().udp_mut()
        } else {
            self.nic.plain_rx().and_then(Nic::udp_mut)
        };
        let Some(udp) = udp else {
            return self.receive_any(clock);
        };
        let n = udp
            // Built only once packets came: an idle receive stores no captures. An unimpaired
            // device reads no clock.
            .receive_sink(move || receiver(rx, slots, c, NoFrames, clock))
            .map_err(io_error)?;
        if n > 0 {
            self.counters.rx_batches += 1;
        }
        Ok(n)
    }

    /// [`receive`](Self::receive) on any device, impaired or not.
    #[inline(never)]
    fn receive_any(&mut self, clock: &mut PollClock) -> Result<usize> {
        // An impaired device releases what it held by the clock; a plain one only hands packets on.
        let dev_now = if self.impair.is_some() {
            clock.now()
        } else {
            rc::Instant::ZERO
        };
        let (rx, slots, c, pfc) = (
            &mut self.rx,
            &mut self.slots,
            &mut self.counters,
            &mut self.pfc,
        );
        let n = self
            .nic
            .receive_lazy(dev_now, move || {
                receiver(rx, slots, c, pfc, clock).closure()
            })
            .map_err(io_error)?;
        if n > 0 {
            self.counters.rx_batches += 1;
        }
        Ok(n)
    }

    /// Lets every engine with something to send fill the transmit batch, framing each packet, and
    /// sends it; `acks` says whether a lone ACK goes now or waits for the next call.
    ///
    /// Most transmissions of a ping-pong find nothing to send (a poll transmits before and after
    /// its receive): that answer is given here, inlined in the poll, without the call and the set-up
    /// of a transmission, which do the same and leave the same state (the rotation moves on).
    #[inline(always)]
    fn transmit(&mut self, clock: &mut PollClock, acks: LoneAck) -> Result<()> {
        // The engines first: when one has work (a transmission in two), the rest goes unasked.
        if !self.any_transmit_work(acks) && !self.pfc.armed() && self.nic.tx_idle() {
            // With one queue pair (a latency test's) the rotation stays at it: nothing to move.
            if self.slots.len() > 1 {
                self.next_qp = next_after(self.next_qp, self.slots.len());
            }
            return Ok(());
        }
        self.transmit_some(clock, acks)
    }

    /// Whether a queue pair may have something to send with `acks`: a plain loop, inlined in the
    /// poll (the iterator's `any` stays an out-of-line call).
    #[inline(always)]
    fn any_transmit_work(&self, acks: LoneAck) -> bool {
        let work = |s: &QpSlot| s.qp.as_ref().is_some_and(|q| q.has_transmit_work(acks));
        // One queue pair (a latency test's): asked alone, without the loop's set-up.
        if let [s] = &self.slots[..] {
            return work(s);
        }
        for s in &self.slots {
            if work(s) {
                return true;
            }
        }
        false
    }

    /// [`transmit`](Self::transmit) when a queue pair may have something to send, a packet is
    /// queued or PFC is armed.
    #[inline(always)]
    fn transmit_some(&mut self, clock: &mut PollClock, acks: LoneAck) -> Result<()> {
        if self.shared_budget.is_none() && !self.pfc.armed() {
            if self.slots.len() == 1 && self.impair.is_none() {
                return self.transmit_unqueued(clock, acks);
            }
            self.transmit_with::<true>(clock, acks)
        } else {
            self.transmit_with::<false>(clock, acks)
        }
    }

    /// [`transmit_some`](Self::transmit_some); `PLAIN` when no budget is shared and PFC is not
    /// armed (a latency test's case), which drops the budget's and the allowance's work.
    #[inline(never)]
    fn transmit_with<const PLAIN: bool>(
        &mut self,
        clock: &mut PollClock,
        acks: LoneAck,
    ) -> Result<()> {
        // One load on a run without PFC; a paused priority's frames stay queued in their
        // engines, no drop and no reordering.
        if !PLAIN && self.pfc.armed() && self.transmit_paused(clock)? {
            return Ok(());
        }
        let n = self.slots.len();
        // Only an impaired device holds packets by the clock; the engines read it when a timer is
        // armed or a round trip timed (most sends of a latency test do neither).
        let dev_now = if self.impair.is_some() {
            clock.now()
        } else {
            rc::Instant::ZERO
        };
        let budget = if PLAIN { None } else { self.shared_budget };
        let mut recounted = false;
        let mut blocked = false;
        // Frames this transmission may still send (see PFC_FRAMES_PER_TRANSMISSION).
        let mut allowance = if !PLAIN && self.pfc.armed() {
            PFC_FRAMES_PER_TRANSMISSION
        } else {
            u32::MAX
        };
        let mut starved = None;
        let mut i = self.next_qp;
        for _ in 0..n {
            let at = i;
            i = if i + 1 == n { 0 } else { i + 1 };
            // Asking an idle engine through the batch (GSO entry checks, framing) costs more.
            let work = |s: &QpSlot| s.qp.as_ref().is_some_and(|q| q.has_transmit_work(acks));
            let had = match budget {
                None => None,
                Some(_) if !work(&self.slots[at]) => continue,
                Some(budget) => match self.share(at, budget, &mut recounted, acks) {
                    Some(had) => Some(had),
                    None => {
                        // It waits for room; the next transmission starts with it.
                        starved.get_or_insert(at);
                        continue;
                    }
                },
            };
            let slot = &mut self.slots[at];
            // A lone queue pair without a shared budget (a latency test's) was asked a moment ago
            // by `transmit`, and one with nothing to send fills nothing: asking again cost a
            // round trip two calls of `has_transmit_work`.
            if had.is_none() && !(PLAIN && n == 1) && !work(slot) {
                continue;
            }
            let (Some(qp), Some(path), cache) =
                (slot.qp.as_mut(), slot.path.as_ref(), &mut slot.tx_cache)
            else {
                continue;
            };
            let to = path.addr();
            let mut src = egress::QpTx::new(qp, path, cache, || clock.now(), acks);
            loop {
                if self.nic.tx_full() {
                    self.nic.flush(dev_now).map_err(io_error)?;
                    if self.nic.tx_full() {
                        blocked = true; // the kernel takes no more now; engines keep their packets
                        break;
                    }
                }
                if !self.nic.tx_push(dev_now, to, |buf| src.fill(buf)) {
                    break;
                }
                self.counters.tx_packets += 1;
                if !PLAIN {
                    allowance -= 1;
                    if allowance == 0 {
                        blocked = true; // the poll reads pause frames before the next frames leave
                        break;
                    }
                }
                // The engine knows when it is done: asking it once more through the batch (entry
                // checks, framing) to hear "nothing" costs a push.
                if !src.qp.has_transmit_work(acks) {
                    break;
                }
            }
            if let Some(had) = had {
                let sent = src.qp.unacked_psns();
                self.in_flight = self.in_flight - had + sent;
                slot.unacked = sent;
            }
            if blocked {
                break;
            }
        }
        self.next_qp = match starved {
            Some(at) => at,
            None => next_after(self.next_qp, n),
        };
        // What was queued leaves, and held (delayed) packets of an impaired device by the clock;
        // with nothing queued or held the device's flush returns at its own check (asking
        // `tx_idle` first checks the same twice).
        self.nic.flush(dev_now).map_err(io_error)?;
        Ok(())
    }
}

impl SoftEndpoint {
    /// [`transmit_with::<true>`](Self::transmit_with) of a lone queue pair on an unimpaired UDP
    /// socket with GSO (a latency test's every transmission): the first packet is written where
    /// the batch's first goes and, when the engine has no second, leaves by one sendto with none
    /// of the batch's bookkeeping (an entry opened, closed and flushed). A second packet queues
    /// it, and the general transmission goes on from there; packets queued, another backend or a
    /// frame path take that one at once. The UDP device is named here, where the rest of the
    /// endpoint goes through `Device`: through the trait's dispatch the fill stayed out of line
    /// and a third of the saving was lost.
    #[inline(never)]
    fn transmit_unqueued(&mut self, clock: &mut PollClock, acks: LoneAck) -> Result<()> {
        // The device inside the impairer, which impairs nothing here (the caller checked).
        let (Some(dev), [slot]) = (self.nic.inner_mut().udp_mut(), &mut self.slots[..]) else {
            return self.transmit_queued(clock, acks);
        };
        let (Some(qp), Some(path @ Path::Udp { dst, .. }), cache) =
            (slot.qp.as_mut(), slot.path.as_ref(), &mut slot.tx_cache)
        else {
            return self.transmit_queued(clock, acks);
        };
        // By reference: a copy of the address cost two copies of 32 bytes a transmission.
        let mut src = egress::QpTx::new(qp, path, cache, || clock.now(), acks);
        let len = match dev.tx_unqueued(dst, |buf| src.fill(buf)) {
            Unqueued::Busy => return self.transmit_queued(clock, acks),
            // As the general transmission: nothing queued, nothing to flush.
            Unqueued::Declined => return Ok(()),
            Unqueued::Cnp => None,
            Unqueued::Filled(len) => Some(len),
        };
        self.counters.tx_packets += 1;
        // Asked after the packet, as the general transmission asks.
        let more = src.qp.has_transmit_work(acks);
        match (len, more) {
            (Some(len), false) => {
                // Looked up after the fill: a reference held across it costs a register.
                let name = &slot.name;
                let sent = dev.tx_unqueued_send(dst, name, len);
                if !matches!(sent, Ok(true)) {
                    // Kept queued, for the general poll to send.
                    self.simple = false;
                }
                sent.map(|_| ()).map_err(io_error)
            }
            (Some(len), true) => {
                // The fill's clock closure is `transmit_two`'s own: the same `QpTx::fill` with
                // two callers went out of line (+98 a round trip).
                let egress::QpTx {
                    qp, path, cache, ..
                } = src;
                let src = egress::QpTx {
                    qp,
                    path,
                    cache,
                    now: &mut *clock,
                    acks,
                };
                let packets = &mut self.counters.tx_packets;
                match Self::transmit_two(dev, src, dst, &slot.name, len, packets) {
                    Some(done) => {
                        // A failed send of the two keeps them queued, as `transmit_queued`.
                        if !self.nic.inner().tx_idle() {
                            self.simple = false;
                        }
                        done
                    }
                    None => self.transmit_queued(clock, acks),
                }
            }
            (None, false) => Ok(()),
            (None, true) => self.transmit_queued(clock, acks),
        }
    }

    /// `transmit_with::<true>` for [`transmit_unqueued`](Self::transmit_unqueued): a packet the
    /// kernel did not take stays queued, and `simple`, whose poll does not ask the device, is
    /// cleared until the general poll has sent it.
    #[inline(always)]
    fn transmit_queued(&mut self, clock: &mut PollClock, acks: LoneAck) -> Result<()> {
        let sent = self.transmit_with::<true>(clock, acks);
        // The impairer impairs nothing here (the callers checked): its device alone is asked.
        if !self.nic.inner().tx_idle() {
            self.simple = false;
        }
        sent
    }

    /// [`transmit_unqueued`](Self::transmit_unqueued)'s second packet, the first (`len` bytes)
    /// written and not queued (a ping-pong's request and its trailing ACK, a message's FIRST and
    /// next segment): `src` writes it right behind the first in the batch's first entry, and when
    /// it is no longer than the first and the engine has no third the two leave by one sendmsg
    /// with UDP_SEGMENT, none of the batch's bookkeeping; else they are queued as the general
    /// transmission queues them. `None`: the general transmission goes on from there.
    #[inline(never)]
    fn transmit_two(
        dev: &mut UdpDevice,
        src: egress::QpTx<'_, &mut PollClock>,
        dst: &SocketAddr,
        name: &Name,
        len: usize,
        packets: &mut u64,
    ) -> Option<Result<()>> {
        let egress::QpTx {
            qp,
            path,
            cache,
            now: clock,
            acks,
        } = src;
        let mut src = egress::QpTx::new(qp, path, cache, || clock.now(), acks);
        let second = match dev.tx_unqueued_second(dst, len, |buf| src.fill(buf)) {
            Second::Busy => {
                dev.tx_unqueued_queue(dst, len);
                return None;
            }
            // As the general transmission, which stops at a packet not queued: the first leaves.
            Second::Declined => {
                return Some(
                    dev.tx_unqueued_send(dst, name, len)
                        .map(drop)
                        .map_err(io_error),
                );
            }
            second => second,
        };
        *packets += 1;
        // Asked after the packet, as the general transmission asks.
        let more = src.qp.has_transmit_work(acks);
        match second {
            Second::Appended(n) if !more => Some(
                dev.tx_unqueued_send_two(dst, name, len, n)
                    .map_err(io_error),
            ),
            Second::Appended(n) | Second::Longer(n) => {
                dev.tx_unqueued_queue_two(dst, len, n);
                if more {
                    return None;
                }
                Some(dev.flush(rc::Instant::ZERO).map_err(io_error))
            }
            // A CNP left on its own: the first is the only packet of the batch.
            _ if more => {
                dev.tx_unqueued_queue(dst, len);
                None
            }
            _ => Some(
                dev.tx_unqueued_send(dst, name, len)
                    .map(drop)
                    .map_err(io_error),
            ),
        }
    }

    /// The receive a poll makes before it sends once PFC frames come (see `poll`): everything
    /// waiting, not one batch, since the newest pause may sit behind a batch of ACKs after this
    /// side was off the CPU (bounded, so a flood cannot keep it from sending what it may).
    #[cold]
    #[inline(never)]
    fn receive_first(&mut self, clock: &mut PollClock) -> Result<usize> {
        let mut received = 0;
        for _ in 0..64 {
            match self.receive(clock)? {
                0 => break,
                n => received += n,
            }
        }
        Ok(received)
    }

    /// The transmission once PFC frames come: ends the pauses whose time passed, tells
    /// the engines whether CNPs wait, and when data's priority is held sends only the CNPs that
    /// may go (their own priority not paused). True when the transmission is done with that.
    #[cold]
    #[inline(never)]
    fn transmit_paused(&mut self, clock: &mut PollClock) -> Result<bool> {
        let held = self.pfc.held(clock.now().as_nanos());
        if self.pfc.tell_held(held) {
            for q in self.slots.iter_mut().filter_map(|s| s.qp.as_mut()) {
                q.hold_cnps(held.cnps);
                q.hold_requests(held.data);
            }
        }
        if !held.data {
            return Ok(false);
        }
        if held.cnps {
            return Ok(true);
        }
        let dev_now = if self.impair.is_some() {
            clock.now()
        } else {
            rc::Instant::ZERO
        };
        for slot in self.slots.iter_mut() {
            let (Some(qp), Some(path), cache) =
                (slot.qp.as_mut(), slot.path.as_ref(), &mut slot.tx_cache)
            else {
                continue;
            };
            let to = path.addr();
            while !self.nic.tx_full()
                && self
                    .nic
                    .tx_push(dev_now, to, |buf| egress::fill_cnp(qp, path, cache, buf))
            {
                self.counters.tx_packets += 1;
            }
        }
        // Nothing queued or held, the device's flush returns at its own check.
        self.nic.flush(dev_now).map_err(io_error)?;
        Ok(true)
    }

    /// Caps queue pair `at`'s requester at its share of `budget`, the PSNs all queue pairs may
    /// have unacknowledged together: the peer buffers them in one socket buffer or ring, and an
    /// overflow costs every window behind it again (thousands of queue pairs collapsed into
    /// resends). Its unacknowledged PSNs now, or `None` when it has nothing to send but what the
    /// cap holds. ACKs only lower the sum, so it is counted again once it reaches the budget (once
    /// per transmission: nothing is acknowledged during one).
    #[inline]
    fn share(
        &mut self,
        at: usize,
        budget: u32,
        recounted: &mut bool,
        acks: LoneAck,
    ) -> Option<u32> {
        let slot = &mut self.slots[at];
        let qp = slot.qp.as_mut()?;
        let had = qp.unacked_psns();
        self.in_flight = self.in_flight - slot.unacked + had;
        slot.unacked = had;
        if self.in_flight >= budget && !*recounted {
            self.in_flight = recount(&mut self.slots);
            *recounted = true;
        }
        let room = budget.saturating_sub(self.in_flight);
        let qp = self.slots[at].qp.as_mut()?;
        qp.cap_unacked(had + room);
        (room > 0 || qp.has_uncapped_work(acks)).then_some(had)
    }
}

/// The slot a transmission starts from after one that started at `at` of `n` and left none
/// waiting for room.
#[inline]
fn next_after(at: usize, n: usize) -> usize {
    if at + 1 >= n { 0 } else { at + 1 }
}

/// Moves the completions of `slots`, in order, into `out` from `n` on, counting them in `n`; true
/// once `out` is full.
#[inline(always)]
fn hand_out_from(slots: &mut [QpSlot], out: &mut [Completion], n: &mut usize) -> bool {
    for s in slots {
        // A look at the queue's length first: most polls find none.
        if let Some(q) = &mut s.qp
            && !q.cq().is_empty()
        {
            *n += q.cq().pop_into(&mut out[*n..]);
            if *n == out.len() {
                return true;
            }
        }
    }
    false
}

/// Looks at every queue pair's unacknowledged PSNs again (ACKs and go-backs lowered them since);
/// their sum.
#[cold]
fn recount(slots: &mut [QpSlot]) -> u32 {
    let mut sum = 0u32;
    for s in slots.iter_mut() {
        s.unacked = s.qp.as_ref().map_or(0, |q| q.unacked_psns());
        sum = sum.saturating_add(s.unacked);
    }
    sum
}

/// What a receive hands each packet to: its checks, then its queue pair (or the CM, or the pause
/// state). One sink type for each pause sink: the UDP receive's and `receive_any`'s.
#[inline(always)]
fn receiver<'a, P: PauseSink>(
    rx: &'a mut RxState,
    slots: &'a mut [QpSlot],
    c: &'a mut SoftCounters,
    pfc: P,
    clock: &'a mut PollClock,
) -> Receiver<'a, P> {
    Receiver {
        rx,
        slots,
        c,
        pfc,
        clock,
    }
}

/// The receive's sink ([`receiver`]): what its checks and deliveries borrow. `P`: where a pause
/// frame goes (a UDP socket's receive, which hands on none, builds the sink without it).
struct Receiver<'a, P> {
    rx: &'a mut RxState,
    slots: &'a mut [QpSlot],
    c: &'a mut SoftCounters,
    pfc: P,
    clock: &'a mut PollClock,
}

/// What a received PFC or pause frame is handed to.
trait PauseSink {
    /// Takes the frame `data`, arrived at `now` nanoseconds (read only if needed).
    fn on_frame(&mut self, now: impl FnOnce() -> u64, data: &[u8]);
}

impl PauseSink for &mut PauseState {
    #[inline(always)]
    fn on_frame(&mut self, now: impl FnOnce() -> u64, data: &[u8]) {
        PauseState::on_frame(self, now(), data);
    }
}

/// The pause sink of a UDP socket's receive: a socket hands on datagrams, never a frame.
struct NoFrames;

impl PauseSink for NoFrames {
    #[inline(always)]
    fn on_frame(&mut self, _: impl FnOnce() -> u64, _: &[u8]) {}
}

impl<P: PauseSink> Receiver<'_, P> {
    /// As a [`Device::receive`] closure, for a receive through the general device.
    #[inline(always)]
    fn closure(mut self) -> impl FnMut(RxMeta, &[u8]) {
        move |meta, data| self.meta(meta, data)
    }
}

impl<P: PauseSink> RxSink for Receiver<'_, P> {
    /// A plain IPv4 datagram's packet (a ping-pong's every one): the UDP checks read its sender
    /// and TOS as values.
    fn ipv4(&mut self, src: SocketAddrV4, tos: u8, data: &[u8]) {
        let Receiver {
            rx,
            slots,
            c,
            clock,
            ..
        } = self;
        c.rx_packets += 1;
        // Only a UDP socket hands on datagrams: it has an address.
        let Some(local) = &rx.local else {
            return;
        };
        let Some((ib, from)) = check_udp_v4(
            data,
            src,
            local,
            &mut rx.ipv4_ids,
            &mut rx.icrcs,
            &mut c.drops,
        ) else {
            return;
        };
        let packet = (ib, from, is_ce(tos));
        match rx.cm.as_deref_mut() {
            // -R: QP1 carries the CM's MADs.
            Some(side) if super::cm::is_gsi(ib) => side.receive(clock.now(), ib, from, c),
            _ => {
                let local = &rx.local;
                let ud = |q: &mut UdQp, ib: &[u8]| {
                    let meta = RxMeta::Datagram {
                        src: Some(SocketAddr::V4(src)),
                        dst: None,
                        truncated: false,
                        tclass: tos,
                    };
                    q.handle_packet(ib, || datagram_grh(&meta, data, local));
                };
                deliver(slots, c, || clock.now(), packet, ud)
            }
        }
    }

    fn meta(&mut self, meta: RxMeta, data: &[u8]) {
        let Receiver {
            rx,
            slots,
            c,
            pfc,
            clock,
        } = self;
        // Named whole, so the closure holds one reference to it rather than one per
        // field.
        let rx: &mut RxState = rx;
        c.rx_packets += 1;
        // Each kind of packet goes from its checks to its queue pair in its own arm:
        // the network header a UD receive rebuilds (`RxNet`) is made only if one asks
        // for it.
        match &meta {
            RxMeta::Datagram {
                src,
                dst,
                truncated,
                tclass,
            } => {
                // Only a UDP socket hands on datagrams: it has an address.
                let Some(local) = &rx.local else {
                    return;
                };
                // The fields are read where the device left them (see UdpRx).
                let d = UdpRx {
                    data,
                    src,
                    dst,
                    truncated: *truncated,
                };
                let Some((ib, from)) =
                    check_udp_in(d, local, &mut rx.ipv4_ids, &mut rx.icrcs, &mut c.drops)
                else {
                    return;
                };
                let packet = (ib, from, is_ce(*tclass));
                match rx.cm.as_deref_mut() {
                    // -R: QP1 carries the CM's MADs.
                    Some(side) if super::cm::is_gsi(ib) => side.receive(clock.now(), ib, from, c),
                    // The engine reads the clock only for what needs it (an ACK, a
                    // response). The network header, for a UD receive, is rebuilt
                    // from the device's `meta` where it lies: were `d` captured, every
                    // packet would copy the datagram into memory for the checks to
                    // read back.
                    _ => {
                        let local = &rx.local;
                        let ud = |q: &mut UdQp, ib: &[u8]| {
                            q.handle_packet(ib, || datagram_grh(&meta, data, local));
                        };
                        deliver(slots, c, || clock.now(), packet, ud)
                    }
                }
            }
            &RxMeta::Frame {
                pkttype,
                ifindex,
                truncated,
            } => {
                // A PFC or pause frame (the filter passes them beside RoCE) sets what
                // the transmissions hold; it is no packet for a queue pair. Timed by a
                // clock read of its own: the poll's may be a whole window's sending
                // old, and a pause timed from then runs out before the next poll
                // looks.
                if is_mac_control(data) {
                    pfc.on_frame(|| clock.fresh_nanos(), data);
                    return;
                }
                let f = RxFrame {
                    data,
                    pkttype,
                    ifindex,
                    truncated,
                };
                let Some(packet) = check_frame(&f, &rx.me, &mut c.drops) else {
                    return;
                };
                let (ib, from, _) = packet;
                let ud = |q: &mut UdQp, ib: &[u8]| q.handle_packet(ib, || RxNet::Frame(data).grh());
                match rx.cm.as_deref_mut() {
                    Some(side) if super::cm::is_gsi(ib) => side.receive(clock.now(), ib, from, c),
                    _ => deliver(slots, c, || clock.now(), packet, ud),
                }
            }
        }
    }
}

/// The network header a UD receive rebuilds for a datagram handed on as `data` with `meta` by the
/// UDP socket bound to `local`.
fn datagram_grh(meta: &RxMeta, data: &[u8], local: &Option<SocketAddr>) -> Grh {
    let Some(local) = *local else {
        unreachable!("only the receive's arm of a datagram on a UDP socket asks");
    };
    RxNet::of_datagram(&datagram(meta, data), local).grh()
}

/// The datagram a UDP socket handed on as `data` with `meta`; only a datagram's meta may come
/// (the callers' arms have matched it, so the check folds away).
#[inline(always)]
fn datagram<'a>(meta: &RxMeta, data: &'a [u8]) -> RxDatagram<'a> {
    let RxMeta::Datagram {
        src,
        dst,
        truncated,
        tclass,
    } = *meta
    else {
        unreachable!("a datagram's meta, not a frame's");
    };
    RxDatagram {
        data,
        src,
        dst,
        truncated,
        gro_segment: None,
        tclass,
    }
}

/// Hands one verified packet (BTH..pad) from `src` to the queue pair its BTH.DestQP names, if it
/// comes from that queue pair's peer (any sender, for UD); `ud` hands it to a UD queue pair with
/// the network header it came with. An arm per kind of queue pair: RC's, the common one, then
/// checks its peer and hands on without a second look at the kind, and the closure that rebuilds
/// the header is made in UD's arm alone (made ahead of the arms, it was stored for every packet).
#[inline]
fn deliver(
    slots: &mut [QpSlot],
    c: &mut SoftCounters,
    mut now: impl rc::Now,
    (ib, src, ce): (&[u8], Source, bool),
    ud: impl FnOnce(&mut UdQp, &[u8]),
) {
    // QPNs are consecutive from the first slot's, so the index is a subtraction.
    // A lone queue pair (a benchmark's usual endpoint) is the packet's if the QPNs are equal:
    // no index to scale by the slot's size.
    let slot = match slots {
        [s] => (qp_index(ib, s.qpn) == 0).then_some(s),
        _ => slots.get_mut(qp_index(ib, slots.first().map_or(0, |s| s.qpn))),
    };
    let Some(QpSlot {
        qp: Some(qp),
        peer,
        ce_marked,
        ..
    }) = slot
    else {
        c.drops.unknown_qpn += 1;
        return;
    };
    // A connected queue pair takes only its peer's packets; a datagram queue pair takes any
    // sender's datagrams that carry its Q_Key (the engine checks).
    match qp {
        Engine::Rc(q) => {
            if !from_peer(src, *peer) {
                c.drops.wrong_source += 1;
                return;
            }
            if ce {
                count_ce(c, ce_marked);
                q.on_congestion_experienced(now.now());
            }
            q.handle_packet(now, ib);
        }
        Engine::Uc(q) => {
            if !from_peer(src, *peer) {
                c.drops.wrong_source += 1;
                return;
            }
            if ce {
                count_ce(c, ce_marked);
            }
            q.handle_packet(ib);
        }
        Engine::Ud(q) => {
            if ce {
                count_ce(c, ce_marked);
            }
            ud(q, ib);
        }
    }
}

/// Counts a packet that arrived marked Congestion Experienced: a switch (or `iptables -j ECN` on
/// one host) marked this verified RoCE v2 packet. RC's notification point then schedules a CNP to
/// the sender (at most one per np_min_time_between_cnps), as a ConnectX does, reading the clock
/// only then; UC and UD take no part in DCQCN here.
#[inline(always)]
fn count_ce(c: &mut SoftCounters, ce_marked: &mut u64) {
    c.np_ecn_marked_roce_packets += 1;
    *ce_marked += 1;
}
