//! The responder's answers: queued ACKs, NAKs, atomic ACKs and READ responses, and replays.
//!
//! `poll_transmit` drains the queue in order; duplicate READs and atomics are answered again from the
//! resources saved when they first ran.

use crate::wire::{AethKind, AethRepr, AtomicAckEthRepr, IbRepr, Opcode};

use super::super::ctx::Ctx;
use super::super::mr::Span;
use super::super::packet::{self, Request, Seg};
use super::super::psn::Psn;
use super::Responder;

/// What a responder remembers about an executed READ or atomic, to replay it for a duplicate.
#[derive(Clone, Copy, Debug)]
pub(super) enum Resource {
    Read {
        first: Psn,
        npkts: u32,
        rkey: u32,
        va: u64,
        len: u32,
        span: Option<Span>,
    },
    Atomic {
        psn: Psn,
        orig: u64,
    },
}

/// One answer waiting to be transmitted.
#[derive(Clone, Copy, Debug)]
pub(super) enum Job {
    Ack {
        psn: Psn,
        syndrome: u8,
        msn: u32,
    },
    AtomicAck {
        psn: Psn,
        orig: u64,
        msn: u32,
    },
    Read {
        first: Psn,
        next: u32,
        /// Packets of the whole READ (what the opcodes are relative to).
        npkts: u32,
        /// One past the last packet this answer sends (a replay may ask for only some).
        end: u32,
        len: u32,
        span: Option<Span>,
        msn: u32,
        /// Answers a duplicate request: its bytes count as sent again.
        replay: bool,
    },
    /// Selective repeat's answer: a SACK NAK, or an ACK when nothing is held any more, built when
    /// it leaves.
    Sack,
}

impl Responder {
    /// Answers a request older than the expected PSN: re-ACKs a SEND/WRITE, replays a READ or an
    /// atomic from its saved resource.
    pub(super) fn duplicate(&mut self, req: Request, psn: Psn, repr: &IbRepr, ctx: &mut Ctx<'_>) {
        ctx.counters.duplicate_requests += 1;
        match req {
            Request::Send(_) | Request::Write(_)
                if self.reorder.as_ref().is_some_and(|r| r.held() > 0) =>
            {
                self.want_sack()
            }
            Request::Send(_) | Request::Write(_) => self.push_ack(self.epsn.sub(1)),
            Request::Read => {
                let Some(reth) = repr.reth else {
                    ctx.counters.drops.malformed += 1;
                    return;
                };
                let found = self.resources.iter().find_map(|r| match *r {
                    Resource::Read {
                        first,
                        npkts,
                        rkey,
                        va,
                        len,
                        span,
                    } if psn.in_window(first, npkts)
                        && rkey == reth.rkey
                        && reth
                            .va
                            .checked_sub(va)
                            .and_then(|skip| skip.checked_add(u64::from(reth.dma_len)))
                            .is_some_and(|end| end <= u64::from(len)) =>
                    {
                        // Only what was asked for again: a go-back-N requester asks for the rest
                        // of the READ, a selective-repeat one for a missing run.
                        let next = psn.diff(first) as u32;
                        let asked = packet::packets_for(reth.dma_len.into(), ctx.cfg.pmtu);
                        Some(Job::Read {
                            first,
                            next,
                            npkts,
                            end: (next + asked).min(npkts),
                            len,
                            span,
                            msn: self.msn,
                            replay: true,
                        })
                    }
                    _ => None,
                });
                match found {
                    Some(job) => self.push(job),
                    None => ctx.counters.drops.protocol.duplicate_unmatched += 1,
                }
            }
            Request::CompareSwap | Request::FetchAdd => {
                let found = self.resources.iter().find_map(|r| match *r {
                    Resource::Atomic { psn: p, orig } if p == psn => Some(orig),
                    _ => None,
                });
                match found {
                    Some(orig) => self.push(Job::AtomicAck {
                        psn,
                        orig,
                        msn: self.msn,
                    }),
                    None => ctx.counters.drops.protocol.duplicate_unmatched += 1,
                }
            }
            Request::Unsupported => ctx.counters.drops.protocol.duplicate_unmatched += 1,
        }
    }

    /// Saves a READ/atomic for replays, recycling the oldest slot (rxe's ring of resources).
    pub(super) fn remember(&mut self, r: Resource) {
        self.resources.push_back_evicting(r);
    }

    /// Queues an answer; `handle_request` made sure there is room.
    pub(super) fn push(&mut self, job: Job) {
        let pushed = self.jobs.push_back(job);
        debug_assert!(pushed.is_ok(), "handle_request checks room first");
    }

    /// Queues an ACK, merging it into a queued ACK: ACKs are cumulative.
    pub(super) fn push_ack(&mut self, psn: Psn) {
        let ack = AethRepr::ack(0).syndrome;
        if let Some(Job::Ack {
            psn: p,
            syndrome,
            msn,
        }) = self.jobs.back_mut()
            && *syndrome == ack
        {
            *p = psn;
            *msn = self.msn;
            return;
        }
        self.push(Job::Ack {
            psn,
            syndrome: ack,
            msn: self.msn,
        });
    }

    /// True when an answer is queued.
    pub(crate) fn has_answers(&self) -> bool {
        !self.jobs.is_empty()
    }

    /// True when the only answer queued is a plain (cumulative) ACK: it may wait for the next
    /// transmission and follow whatever the requester sends then (IB lets ACKs be coalesced, and an
    /// ACK need not precede the packets sent after the request it answers).
    pub(crate) fn only_ack_queued(&self) -> bool {
        self.jobs.len() == 1
            && matches!(self.jobs.front(), Some(Job::Ack { syndrome, .. }) if *syndrome == AethRepr::ack(0).syndrome)
    }

    /// Writes the next answer into `buf`; `None` when there is none. A READ of one packet (a
    /// latency test's every READ) is written here, its ONLY opcode and AETH known, without the
    /// segment arithmetic, the opcode's header lookups and the other kinds' registers.
    pub(crate) fn poll_transmit(&mut self, buf: &mut [u8], ctx: &mut Ctx<'_>) -> Option<usize> {
        let Some(&Job::Read {
            first,
            next: 0,
            npkts: 1,
            len,
            span,
            msn,
            replay,
            ..
        }) = self.jobs.front()
        else {
            return self.poll_transmit_any(buf, ctx);
        };
        let n = packet::payload_len(u64::from(len), ctx.cfg.pmtu, 0);
        let data: &[u8] = match span {
            Some(s) => &ctx.mem.span(s)[..n],
            None => &[],
        };
        let bth = (
            Opcode::RC_RDMA_READ_RESPONSE_ONLY,
            ctx.cfg.remote_qpn,
            first,
        );
        let out = packet::emit_response(buf, bth, Some(AethRepr::ack(msn)), data);
        ctx.counters.tx_payload_bytes += n as u64;
        if replay {
            ctx.counters.retransmitted_bytes += n as u64;
        }
        // Packet 0 was the last this answer sends, as the general arm finds.
        self.jobs.pop_front();
        Some(out)
    }

    /// [`poll_transmit`](Self::poll_transmit) for every other answer. Out of line: its kinds'
    /// registers stay out of the one-packet READ response's frame.
    #[inline(never)]
    fn poll_transmit_any(&mut self, buf: &mut [u8], ctx: &mut Ctx<'_>) -> Option<usize> {
        let dest = ctx.cfg.remote_qpn;
        let pmtu = ctx.cfg.pmtu;
        let job = self.jobs.front_mut()?;
        let len = match job {
            Job::Ack { psn, syndrome, msn } => {
                let aeth = AethRepr {
                    syndrome: *syndrome,
                    msn: *msn,
                };
                if matches!(aeth.kind(), AethKind::Ack { .. }) {
                    ctx.counters.acks_sent += 1;
                }
                let bth = (Opcode::RC_ACKNOWLEDGE, dest, *psn);
                let n = packet::emit_response(buf, bth, Some(aeth), &[]);
                self.jobs.pop_front();
                n
            }
            Job::AtomicAck { psn, orig, msn } => {
                let mut r = packet::repr(Opcode::RC_ATOMIC_ACKNOWLEDGE, dest, *psn, false, 0);
                r.aeth = Some(AethRepr::ack(*msn));
                r.atomic_ack_eth = Some(AtomicAckEthRepr { orig: *orig });
                ctx.counters.acks_sent += 1;
                let n = packet::emit(buf, &r, &[]);
                self.jobs.pop_front();
                n
            }
            Job::Sack => {
                self.jobs.pop_front();
                return Some(self.emit_sack(buf, ctx));
            }
            Job::Read {
                first,
                next,
                npkts,
                end,
                len,
                span,
                msn,
                replay,
            } => {
                let seg = Seg::of(*next, *npkts);
                let n = packet::payload_len(u64::from(*len), pmtu, *next);
                let bth = (packet::read_response_opcode(seg), dest, first.add(*next));
                let aeth = (seg != Seg::Middle).then(|| AethRepr::ack(*msn));
                let start = *next as usize * pmtu as usize;
                let data: &[u8] = match span {
                    Some(s) => &ctx.mem.span(*s)[start..start + n],
                    None => &[],
                };
                let out = packet::emit_response(buf, bth, aeth, data);
                ctx.counters.tx_payload_bytes += n as u64;
                if *replay {
                    ctx.counters.retransmitted_bytes += n as u64;
                }
                *next += 1;
                if *next >= *end {
                    self.jobs.pop_front();
                }
                out
            }
        };
        Some(len)
    }
}
