//! The datapath of [`SoftEndpoint`]: one [`poll`](SoftEndpoint::poll) sends what was posted since
//! the last one, receives a batch, checks and delivers each packet to its engine, fires due timers,
//! lets the engines fill the transmit batch and sends it, then hands out completions. No
//! allocation, one syscall per batch.
//!
//! ACK policy: the transmission that follows a receive keeps a lone plain ACK back; the next poll's
//! first transmission sends it after whatever the application posted meanwhile, in the same batch
//! (IB lets one ACK cover several packets and follow later ones). A ping-pong's responder thus sends
//! its reply and the ACK of the request with one syscall instead of two, the ACK off its critical
//! path; an ACK is never held longer than until the next poll.

use super::{QpSlot, SoftEndpoint};
use crate::transport::Completion;
use crate::transport::Result;
use crate::transport::soft::backend::{Backend, io_error};
use crate::transport::soft::counters::SoftCounters;
use crate::transport::soft::egress;
use crate::transport::soft::ingress::{
    FrameFilter, RxNet, Source, check_frame, check_udp, from_peer, qp_index,
};
use crate::transport::soft::io::batch::{RxDatagram, RxFrame};
use crate::transport::soft::io::device::Device;
use crate::transport::soft::nic::RxMeta;
use crate::transport::soft::rc::{self, LoneAck};

impl SoftEndpoint {
    /// One turn of the NIC: transmit, receive, fire due timers, transmit, hand out completions.
    pub(super) fn poll(&mut self, out: &mut [Completion]) -> Result<usize> {
        let now = self.now();
        // Work posted since the last call leaves first, with the ACKs the last call held back: a
        // ping-pong's reply must not wait behind a receive syscall (the doorbell of a real NIC rings
        // at post time; ours at the next poll), and the ACK rides in the same batch.
        self.transmit(now, LoneAck::Send)?;
        self.receive(now)?;
        for q in self.slots.iter_mut().filter_map(|s| s.qp.as_mut()) {
            if q.poll_timeout().is_some_and(|t| t <= now) {
                q.handle_timeout(now);
            }
        }
        self.cm_turn(now)?;
        // Answers to what just arrived (READ responses, NAKs, resends) leave now; a lone ACK waits for
        // the next poll, where it follows whatever the application posts meanwhile.
        self.transmit(now, LoneAck::Hold)?;
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
        let local = match self.nic.inner().backend() {
            Backend::Udp(s) => Some(s.local_addr()),
            Backend::Packet(_) => None,
        };
        let (slots, c, ids) = (&mut self.slots, &mut self.counters, &mut self.ipv4_ids);
        let cm = &mut self.cm;
        let n = self
            .nic
            .receive(now, |meta, data| {
                c.rx_packets += 1;
                let (packet, net) = match (meta, local) {
                    (
                        RxMeta::Datagram {
                            src,
                            dst,
                            truncated,
                        },
                        Some(local),
                    ) => {
                        let d = RxDatagram {
                            data,
                            src,
                            dst,
                            truncated,
                            gro_segment: None,
                        };
                        let net = src.map(|s| RxNet::Udp {
                            src: s.ip(),
                            dst: dst.unwrap_or(local.ip()),
                            len: data.len(),
                        });
                        (check_udp(&d, local, ids, &mut c.drops), net)
                    }
                    (
                        RxMeta::Frame {
                            pkttype,
                            ifindex,
                            truncated,
                        },
                        _,
                    ) => {
                        let f = RxFrame {
                            data,
                            pkttype,
                            ifindex,
                            truncated,
                        };
                        (check_frame(&f, &me, &mut c.drops), Some(RxNet::Frame(data)))
                    }
                    (RxMeta::Datagram { .. }, None) => (None, None),
                };
                if let (Some((ib, src)), Some(net)) = (packet, net) {
                    match cm.as_deref_mut() {
                        // -R: QP1 carries the CM's MADs.
                        Some(side) if super::cm::is_gsi(ib) => side.receive(now, ib, src, c),
                        _ => deliver(slots, c, now, ib, src, net),
                    }
                }
            })
            .map_err(io_error)?;
        if n > 0 {
            self.counters.rx_batches += 1;
        }
        Ok(())
    }

    /// Lets every engine with something to send fill the transmit batch, framing each packet, and
    /// sends it; `acks` says whether a lone ACK goes now or waits for the next call.
    fn transmit(&mut self, now: rc::Instant, acks: LoneAck) -> Result<()> {
        let n = self.slots.len();
        let mut blocked = false;
        for k in 0..n {
            let slot = &mut self.slots[(self.next_qp + k) % n];
            let (Some(qp), Some(path)) = (slot.qp.as_mut(), slot.path) else {
                continue;
            };
            // Asking an idle engine through the batch (GSO entry checks, framing) costs more.
            if !qp.has_transmit_work(acks) {
                continue;
            }
            loop {
                if self.nic.tx_full() {
                    self.nic.flush(now).map_err(io_error)?;
                    if self.nic.tx_full() {
                        blocked = true; // the kernel takes no more now; engines keep their packets
                        break;
                    }
                }
                let to = path.addr();
                if !self
                    .nic
                    .tx_push(now, to, |buf| egress::fill(qp, path, now, acks, buf))
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
        if self.nic.tx_pending() > 0 {
            self.nic.flush(now).map_err(io_error)?;
        }
        Ok(())
    }
}

/// Hands one verified packet (BTH..pad) from `src` to the queue pair its BTH.DestQP names, if it
/// comes from that queue pair's peer (any sender, for UD); `net` is where it came in.
#[inline]
fn deliver(
    slots: &mut [QpSlot],
    c: &mut SoftCounters,
    now: rc::Instant,
    ib: &[u8],
    src: Source,
    net: RxNet<'_>,
) {
    // QPNs are consecutive from the first slot's, so the index is a subtraction.
    let index = qp_index(ib, slots.first().map_or(0, |s| s.qpn));
    match slots.get_mut(index) {
        Some(QpSlot {
            qp: Some(qp), peer, ..
        }) => {
            // A datagram queue pair takes any sender's datagrams that carry its Q_Key (the engine checks).
            if qp.is_datagram() || from_peer(src, *peer) {
                qp.handle_packet(now, ib, || net.grh());
            } else {
                c.drops.wrong_source += 1;
            }
        }
        _ => c.drops.unknown_qpn += 1,
    }
}
