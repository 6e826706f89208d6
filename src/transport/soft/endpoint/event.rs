//! `-e/--events`, perftest's "sleep on CQ events": a poll that found nothing to do (no packet came,
//! no completion) puts the side to sleep in `poll(2)` on its socket until a packet comes, its next
//! timer is due or a PFC pause it honours ends, at most [`EVENT_WAIT_MAX_NS`], instead of
//! returning to spin. The socket's readiness stands for a NIC's completion interrupt: a packet
//! that wakes the side is taken by the poll that follows. The default, busy polling, never comes
//! here (`SoftEndpoint::poll_cq` asks one flag).

use super::SoftEndpoint;
use super::datapath::monotonic_ns;
use crate::transport::soft::io::device::{Backend, Device};
use crate::transport::soft::rc::LoneAck;
use crate::transport::{Completion, Error, Result};

/// The longest sleep: the drivers get control back this often to check the out-of-band channel for
/// the end of the test (and a `--latency_gap` or a UD loss timeout overruns by at most this), as the
/// TCP transport's idle sleep (`tcp::IDLE_SLEEP_MS`). A sleeping side wakes 1,000 times a second.
pub(crate) const EVENT_WAIT_MAX_NS: u64 = 1_000_000;

impl SoftEndpoint {
    /// One poll, then, when it found nothing to do, a sleep until something may be (see the module).
    #[inline(never)]
    pub(super) fn poll_or_sleep(&mut self, out: &mut [Completion]) -> Result<usize> {
        let before = self.counters.rx_packets;
        let n = self.poll(out)?;
        if n == 0 && self.counters.rx_packets == before {
            self.sleep_until_event()?;
        }
        Ok(n)
    }

    /// Sleeps on the socket for as long as [`sleep_for`](Self::sleep_for) allows.
    fn sleep_until_event(&mut self) -> Result<()> {
        let now = monotonic_ns().saturating_sub(self.epoch);
        let Some(ns) = self.sleep_for(now) else {
            return Ok(());
        };
        let timeout = rustix::fs::Timespec {
            tv_sec: (ns / 1_000_000_000) as i64,
            tv_nsec: (ns % 1_000_000_000) as _,
        };
        let fd = self.nic.inner().wait_fd();
        let mut fds = [rustix::event::PollFd::new(
            &fd,
            rustix::event::PollFlags::IN,
        )];
        match rustix::event::poll(&mut fds, Some(&timeout)) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => {
                return Err(Error::Io {
                    context: "-e: sleeping in poll(2) on the soft transport's socket".into(),
                    source: e.into(),
                });
            }
        }
        // Whatever woke it, the next poll checks the timers rather than wait for its 16th idle turn.
        self.idle_left = 1;
        Ok(())
    }

    /// How long the side may sleep from `now` (nanoseconds since the epoch): until the first
    /// timer, the impaired device's next release or the end of a PFC pause that holds its frames,
    /// within [`EVENT_WAIT_MAX_NS`]; `None` when it must poll again at once (frames queued for the
    /// kernel, a transmission PFC's allowance cut short, the CM's turn under `-R`, a deadline past).
    pub(super) fn sleep_for(&mut self, now: u64) -> Option<u64> {
        if !self.nic.tx_idle() || self.rx.cm.is_some() {
            return None;
        }
        let mut deadline = now + EVENT_WAIT_MAX_NS;
        if self.pfc.armed() {
            // Once PFC is armed a transmission sends at most 16 frames: work left is sent by the
            // next poll, unless a pause holds it, until the pause ends.
            let held = self.pfc.held(now);
            let work = self.slots.iter().any(|s| {
                s.qp.as_ref()
                    .is_some_and(|q| q.has_transmit_work(LoneAck::Send))
            });
            if work && !held.data {
                return None;
            }
            if let Some(end) = self.pfc.next_end() {
                deadline = deadline.min(end);
            }
        }
        let timers = self
            .slots
            .iter()
            .filter_map(|s| s.qp.as_ref()?.poll_timeout())
            .chain(self.nic.poll_at())
            .map(|t| t.as_nanos())
            .min();
        if let Some(t) = timers {
            deadline = deadline.min(t);
        }
        (deadline > now).then(|| deadline - now)
    }
}
