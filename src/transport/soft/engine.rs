//! [`Engine`]: the state machine behind one soft queue pair, RC, UC or UD (`-c`), as one type.
//!
//! An enum rather than a trait object, so the endpoint's per-packet loop stays free of dynamic
//! dispatch; each arm forwards to its engine ([`rc::Qp`], [`UcQp`], [`UdQp`]).

use super::counters::SoftCounters;
use super::rc::ring::Ring;
use super::rc::{self, MemoryTable, Qp, QpConfig};
use super::unreliable::{UcQp, UdQp};
use crate::params::ConnType;
use crate::transport::qp_counters::QpCounters;
use crate::transport::{Completion, RecvRequest, Result, SendRequest};

/// One soft queue pair's engine.
// One per queue pair, held in place in the endpoint's slots: boxing the RC arm to even the sizes
// out would put a pointer chase on the RC packet path for a few hundred bytes per queue pair.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Engine {
    /// Reliable Connection: the full RC engine.
    Rc(Qp),
    /// Unreliable Connection.
    Uc(UcQp),
    /// Unreliable Datagram.
    Ud(UdQp),
}

impl Engine {
    /// The engine `conn` asks for; UD sends with `remote_qkey` and accepts `qkey`.
    pub(crate) fn new(
        conn: ConnType,
        cfg: QpConfig,
        mem: MemoryTable,
        qkey: u32,
        remote_qkey: u32,
    ) -> std::result::Result<Engine, rc::ConfigError> {
        Ok(match conn {
            ConnType::Rc => Engine::Rc(Qp::new(cfg, mem)?),
            ConnType::Uc => Engine::Uc(UcQp::new(cfg, mem)?),
            ConnType::Ud => Engine::Ud(UdQp::new(cfg, mem, qkey, remote_qkey)?),
        })
    }

    /// UD: sends to queue pair `qpn` from now on; false (nothing changed) for RC and UC.
    pub(crate) fn set_remote_qpn(&mut self, qpn: u32) -> bool {
        match self {
            Engine::Ud(q) => {
                q.set_remote_qpn(qpn);
                true
            }
            _ => false,
        }
    }

    #[inline]
    pub(crate) fn post_send(&mut self, wr: &SendRequest) -> Result<()> {
        match self {
            Engine::Rc(q) => q.post_send(wr),
            Engine::Uc(q) => q.post_send(wr),
            Engine::Ud(q) => q.post_send(wr),
        }
    }

    pub(crate) fn post_recv(&mut self, wr: &RecvRequest) -> Result<()> {
        match self {
            Engine::Rc(q) => q.post_recv(wr),
            Engine::Uc(q) => q.post_recv(wr),
            Engine::Ud(q) => q.post_recv(wr),
        }
    }

    /// A PFC pause holds (or releases) CNPs' priority: RC keeps an owed CNP queued meanwhile.
    pub(crate) fn hold_cnps(&mut self, held: bool) {
        if let Engine::Rc(q) = self {
            q.hold_cnps(held);
        }
    }

    /// A PFC pause holds (or releases) data's priority: RC's retransmission timer then does not
    /// take the silence for a loss.
    pub(crate) fn hold_requests(&mut self, held: bool) {
        if let Engine::Rc(q) = self {
            q.hold_requests(held);
        }
    }

    /// The CNP RC owes the peer, not held: what leaves while a pause holds data's priority.
    pub(crate) fn poll_cnp(&mut self, buf: &mut [u8]) -> Option<usize> {
        match self {
            Engine::Rc(q) => q.poll_cnp(buf),
            Engine::Uc(_) | Engine::Ud(_) => None,
        }
    }

    /// Writes the next packet to send into `buf` and returns its length, or `None` when nothing is
    /// ready; with [`rc::LoneAck::Hold`] a lone ACK (RC's only) may wait for the next call.
    #[inline]
    pub(crate) fn poll_transmit_with(
        &mut self,
        now: impl rc::Now,
        buf: &mut [u8],
        acks: rc::LoneAck,
    ) -> Option<usize> {
        // RC or not first: one compare of the niche that holds the variant, where a three-way
        // match decodes it in full before the first arm.
        match self {
            Engine::Rc(q) => q.poll_transmit_with(now, buf, acks),
            other => other.poll_transmit_unreliable(now, buf),
        }
    }

    /// [`poll_transmit_with`](Self::poll_transmit_with) of UC and UD (RC: `None`).
    fn poll_transmit_unreliable(&mut self, now: impl rc::Now, buf: &mut [u8]) -> Option<usize> {
        match self {
            Engine::Uc(q) => q.poll_transmit(now, buf),
            Engine::Ud(q) => q.poll_transmit(now, buf),
            Engine::Rc(_) => None,
        }
    }

    /// Whether a transmission would find anything to send (UC and UD are always asked: their
    /// queues are cheap to look at).
    #[inline]
    pub(crate) fn has_transmit_work(&self, acks: rc::LoneAck) -> bool {
        match self {
            Engine::Rc(q) => q.has_transmit_work(acks),
            Engine::Uc(_) | Engine::Ud(_) => true,
        }
    }

    /// As [`has_transmit_work`](Self::has_transmit_work) once the endpoint's cap holds the
    /// requester: only what the cap does not hold.
    #[inline]
    pub(crate) fn has_uncapped_work(&self, acks: rc::LoneAck) -> bool {
        match self {
            Engine::Rc(q) => q.has_uncapped_work(acks),
            Engine::Uc(_) | Engine::Ud(_) => true,
        }
    }

    /// RC's failure that no completion names ([`rc::Qp::failure`]); UC and UD have none.
    pub(crate) fn failure(&self) -> Option<rc::QpFailure> {
        match self {
            Engine::Rc(q) => q.failure(),
            Engine::Uc(_) | Engine::Ud(_) => None,
        }
    }

    /// PSNs sent and not yet acknowledged (RC; UC and UD are never acknowledged: 0).
    #[inline]
    pub(crate) fn unacked_psns(&self) -> u32 {
        match self {
            Engine::Rc(q) => q.unacked_psns(),
            Engine::Uc(_) | Engine::Ud(_) => 0,
        }
    }

    /// The most PSNs an RC requester's window lets out (UC and UD wait for nothing: 0).
    pub(crate) fn window_max(&self) -> u32 {
        match self {
            Engine::Rc(q) => q.window_max(),
            Engine::Uc(_) | Engine::Ud(_) => 0,
        }
    }

    /// Holds an RC requester to `cap` unacknowledged PSNs (UC and UD: nothing to hold).
    #[inline]
    pub(crate) fn cap_unacked(&mut self, cap: u32) {
        if let Engine::Rc(q) = self {
            q.cap_unacked(cap);
        }
    }

    /// Its completion queue, whichever kind of queue pair it is.
    #[inline(always)]
    pub(crate) fn cq(&mut self) -> &mut Ring<Completion> {
        match self {
            Engine::Rc(q) => q.cq(),
            Engine::Uc(q) => q.cq(),
            Engine::Ud(q) => q.cq(),
        }
    }

    /// When the timers want a call (only RC has timers).
    #[inline]
    pub(crate) fn poll_timeout(&self) -> Option<rc::Instant> {
        match self {
            Engine::Rc(q) => q.poll_timeout(),
            Engine::Uc(_) | Engine::Ud(_) => None,
        }
    }

    pub(crate) fn handle_timeout(&mut self, now: rc::Instant) {
        if let Engine::Rc(q) = self {
            q.handle_timeout(now);
        }
    }

    pub(crate) fn memory(&self) -> &MemoryTable {
        match self {
            Engine::Rc(q) => q.memory(),
            Engine::Uc(q) => q.memory(),
            Engine::Ud(q) => q.memory(),
        }
    }

    pub(crate) fn memory_mut(&mut self) -> &mut MemoryTable {
        match self {
            Engine::Rc(q) => q.memory_mut(),
            Engine::Uc(q) => q.memory_mut(),
            Engine::Ud(q) => q.memory_mut(),
        }
    }

    /// Its own counters into `c` (the caller set its index, QPN and CE marks). RC counts what it
    /// resent and its congestion control; UC and UD never resend, send or handle a CNP, or pace:
    /// zeros, and no rate.
    pub(crate) fn qp_counters(&self, c: &mut QpCounters) {
        let gbps = |kbps: u64| (kbps > 0).then(|| kbps as f64 / 1e6);
        match self {
            Engine::Rc(q) => {
                let k = q.counters();
                let cc = q.cc_counters();
                c.retransmitted_packets = k.retransmitted_packets;
                c.retransmitted_bytes = k.retransmitted_bytes;
                c.cnps_sent = Some(cc.np_cnp_sent);
                c.cnps_handled = Some(cc.rp_cnp_handled);
                c.rate_cuts = Some(cc.rp_rate_cuts);
                c.rate_now_gbps = gbps(cc.rp_current_rate_kbps);
                c.rate_lowest_gbps = gbps(cc.rp_min_rate_kbps);
            }
            Engine::Uc(_) | Engine::Ud(_) => {
                c.cnps_sent = Some(0);
                c.cnps_handled = Some(0);
                c.rate_cuts = Some(0);
            }
        }
    }

    /// Adds this engine's counters to the endpoint's.
    pub(crate) fn add_counters(&self, c: &mut SoftCounters) {
        match self {
            Engine::Rc(q) => {
                c.add_engine(q.counters());
                c.cc.add(&q.cc_counters());
            }
            Engine::Uc(q) => c.unreliable.add(q.counters()),
            Engine::Ud(q) => c.unreliable.add(q.counters()),
        }
    }
}
