//! The datapath of [`SoftEndpoint`]: one [`poll`](SoftEndpoint::poll) receives a batch, checks and
//! delivers each packet to its engine, fires due timers, lets the engines fill the transmit batch
//! and sends it, then hands out completions. No allocation, one syscall per batch.

use super::{QpSlot, SoftEndpoint};
use crate::transport::Completion;
use crate::transport::Result;
use crate::transport::soft::backend::{Backend, io_error};
use crate::transport::soft::counters::SoftCounters;
use crate::transport::soft::ingress::{
    FrameFilter, Source, check_frame, check_udp, from_peer, gro_packets, qp_index,
};
use crate::transport::soft::rc;

impl SoftEndpoint {
    /// One turn of the NIC: transmit, receive, fire due timers, transmit, hand out completions.
    pub(super) fn poll(&mut self, out: &mut [Completion]) -> Result<usize> {
        let now = self.now();
        // Work posted since the last call leaves first: a ping-pong's reply must not wait behind a
        // receive syscall (the doorbell of a real NIC rings at post time; ours at the next poll).
        self.transmit(now)?;
        self.receive(now)?;
        for q in self.slots.iter_mut().filter_map(|s| s.qp.as_mut()) {
            if q.poll_timeout().is_some_and(|t| t <= now) {
                q.handle_timeout(now);
            }
        }
        self.transmit(now)?;
        let mut n = 0;
        let count = self.slots.len();
        for k in 0..count {
            if n == out.len() {
                break;
            }
            if let Some(q) = self.slots[(self.next_qp + k) % count].qp.as_mut() {
                while n < out.len() {
                    match q.poll_completion() {
                        Some(c) => {
                            out[n] = c;
                            n += 1;
                        }
                        None => break,
                    }
                }
            }
        }
        Ok(n)
    }

    /// Receives one batch and feeds every valid packet to its queue pair.
    fn receive(&mut self, now: rc::Instant) -> Result<()> {
        let me = FrameFilter {
            encap: self.encap,
            ip: self.local_ip,
            gid: self.gid,
        };
        if let Backend::Packet(sock) = &mut self.backend
            && let Some(ring) = sock.rx_ring()
        {
            let c = &mut self.counters;
            let mut got = 0;
            while got < self.cfg.batch {
                let Some(f) = ring.peek() else { break };
                got += 1;
                if let Some((ib, src)) = check_frame(&f, &me, &mut c.drops) {
                    deliver(&mut self.slots, c, now, ib, src);
                }
                ring.release();
            }
            if got > 0 {
                c.rx_batches += 1;
                c.rx_packets += got as u64;
            }
            return Ok(());
        }
        let n = match &self.backend {
            Backend::Udp(s) => s.recv_batch(&mut self.rx),
            Backend::Packet(s) => s.recv_batch(&mut self.rx),
        }
        .map_err(io_error)?;
        if n == 0 {
            return Ok(());
        }
        let c = &mut self.counters;
        c.rx_batches += 1;
        for i in 0..n {
            match &self.backend {
                Backend::Udp(sock) => {
                    for one in gro_packets(self.rx.datagram(i)) {
                        c.rx_packets += 1;
                        if let Some((ib, src)) =
                            check_udp(&one, sock.local_addr(), &mut self.ipv4_ids, &mut c.drops)
                        {
                            deliver(&mut self.slots, c, now, ib, src);
                        }
                    }
                }
                Backend::Packet(_) => {
                    c.rx_packets += 1;
                    if let Some((ib, src)) = check_frame(&self.rx.frame(i), &me, &mut c.drops) {
                        deliver(&mut self.slots, c, now, ib, src);
                    }
                }
            }
        }
        Ok(())
    }

    /// Lets every engine fill the transmit batch, framing each packet, and sends it.
    fn transmit(&mut self, now: rc::Instant) -> Result<()> {
        let n = self.slots.len();
        let mut blocked = false;
        for k in 0..n {
            let slot = &mut self.slots[(self.next_qp + k) % n];
            let (Some(qp), Some(path)) = (slot.qp.as_mut(), slot.path) else {
                continue;
            };
            loop {
                if self.out.is_full() {
                    self.out.flush(&self.backend, &mut self.counters)?;
                    if self.out.is_full() {
                        blocked = true; // the kernel takes no more now; engines keep their packets
                        break;
                    }
                }
                if !self
                    .out
                    .push(qp, path, now, &mut self.ipv4_ids, self.impairer.as_mut())
                {
                    break;
                }
                self.counters.tx_packets += 1;
            }
            if blocked {
                break;
            }
        }
        self.next_qp = (self.next_qp + 1) % n.max(1);
        if self.out.pending() > 0 {
            self.out.flush(&self.backend, &mut self.counters)?;
        }
        Ok(())
    }
}

/// Hands one verified packet (BTH..pad) from `src` to the queue pair its BTH.DestQP names, if it
/// comes from that queue pair's peer.
#[inline]
fn deliver(slots: &mut [QpSlot], c: &mut SoftCounters, now: rc::Instant, ib: &[u8], src: Source) {
    // QPNs are consecutive from the first slot's, so the index is a subtraction.
    let index = qp_index(ib, slots.first().map_or(0, |s| s.qpn));
    match slots.get_mut(index) {
        Some(QpSlot {
            qp: Some(qp), peer, ..
        }) => {
            if from_peer(src, *peer) {
                qp.handle_packet(now, ib);
            } else {
                c.drops.wrong_source += 1;
            }
        }
        _ => c.drops.unknown_qpn += 1,
    }
}
