//! The responder: executes incoming requests exactly once, in PSN order, and answers them.
//!
//! It follows rxe (roce-wire.md §6.3-6.6): one PSN-sequence NAK per gap, duplicates re-ACKed
//! (SEND/WRITE) or replayed from saved resources (READ, atomics), RNR NAK when no receive is
//! posted, and NAK invalid request / remote access error (QP to ERROR) for requests that break the
//! rules. Answers wait in a small FIFO of jobs that `poll_transmit` drains in order.

use crate::transport::{Access, Completion, CompletionOp, CompletionStatus, RecvRequest};
use crate::wire::{AethKind, AethRepr, AtomicAckEthRepr, IbRepr, NakCode, Opcode, RethRepr};

use super::ctx::Ctx;
use super::mr::Span;
use super::packet::{self, Request, Seg};
use super::psn::Psn;
use super::ring::Ring;

/// The largest RETH DMA length accepted (rxe: 2^31).
const MAX_DMA_LEN: u32 = 1 << 31;

/// A posted receive: where the next SEND (or WRITE-with-immediate notice) goes.
#[derive(Clone, Copy, Debug)]
pub struct RecvWqe {
    /// The caller's id.
    pub wr_id: u64,
    /// Checked destination bytes.
    pub span: Span,
}

/// The multi-packet message in progress.
#[derive(Clone, Copy, Debug)]
enum InMsg {
    Idle,
    Send {
        recv: RecvWqe,
        written: usize,
    },
    Write {
        span: Option<Span>,
        len: usize,
        written: usize,
    },
}

/// What a responder remembers about an executed READ or atomic, to replay it for a duplicate.
#[derive(Clone, Copy, Debug)]
enum Resource {
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
enum Job {
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
        npkts: u32,
        len: u32,
        span: Option<Span>,
        msn: u32,
    },
}

/// Why a request in sequence was not executed.
enum Refusal {
    /// No receive posted: RNR NAK, the QP stays up.
    Rnr,
    /// NAK with this code; the QP enters ERROR.
    Nak(NakCode),
}

/// Receive-side state of a queue pair.
pub struct Responder {
    epsn: Psn,
    msn: u32,
    nak_sent: bool,
    msg: InMsg,
    /// Posted receives, oldest first.
    pub rq: Ring<RecvWqe>,
    resources: Ring<Resource>,
    jobs: Ring<Job>,
}

impl Responder {
    /// A responder expecting `psn` first, with `rq_depth` receives and `max_dest_rd_atomic` slots.
    pub fn new(psn: Psn, rq_depth: usize, max_dest_rd_atomic: u32) -> Responder {
        let slots = max_dest_rd_atomic as usize;
        Responder {
            epsn: psn,
            msn: 0,
            nak_sent: false,
            msg: InMsg::Idle,
            rq: Ring::with_capacity(rq_depth),
            resources: Ring::with_capacity(slots),
            jobs: Ring::with_capacity(2 * slots + 16),
        }
    }

    /// The PSN it expects next.
    pub fn expected_psn(&self) -> Psn {
        self.epsn
    }

    /// Receives that will still produce a completion: posted ones plus the one a SEND is filling.
    pub fn receives_held(&self) -> usize {
        self.rq.len() + usize::from(matches!(self.msg, InMsg::Send { .. }))
    }

    /// Posts a checked receive; the caller made sure there is room.
    pub fn push_recv(&mut self, wr: &RecvRequest, span: Span) {
        let pushed = self.rq.push_back(RecvWqe {
            wr_id: wr.wr_id,
            span,
        });
        debug_assert!(pushed.is_ok(), "post_recv checks room first");
    }

    /// Handles one request packet. `true` means the QP must enter ERROR (a fatal NAK is queued).
    pub fn handle_request(
        &mut self,
        req: Request,
        repr: &IbRepr,
        payload: &[u8],
        ctx: &mut Ctx<'_>,
    ) -> bool {
        if self.jobs.is_full() {
            // Leave it unexecuted; the requester retransmits it.
            ctx.counters.drops.response_queue_full += 1;
            return false;
        }
        let psn = Psn::new(repr.bth.psn);
        let d = psn.diff(self.epsn);
        if d > 0 {
            if self.nak_sent {
                ctx.counters.drops.out_of_sequence += 1;
            } else {
                self.nak_sent = true;
                ctx.counters.naks_sent.psn_seq += 1;
                self.push(Job::Ack {
                    psn: self.epsn,
                    syndrome: AethRepr::nak(NakCode::PsnSequenceError, 0).syndrome,
                    msn: self.msn,
                });
            }
            return false;
        }
        if d < 0 {
            self.duplicate(req, psn, repr, ctx);
            return false;
        }
        self.nak_sent = false;
        match self.execute(req, psn, repr, payload, ctx) {
            Ok(()) => false,
            Err(Refusal::Rnr) => {
                ctx.counters.naks_sent.rnr += 1;
                let syndrome = AethRepr::rnr_nak(ctx.cfg.min_rnr_timer, 0).syndrome;
                self.push(Job::Ack {
                    psn,
                    syndrome,
                    msn: self.msn,
                });
                false
            }
            Err(Refusal::Nak(code)) => {
                match code {
                    NakCode::InvalidRequest => ctx.counters.naks_sent.invalid_request += 1,
                    NakCode::RemoteAccessError => ctx.counters.naks_sent.remote_access += 1,
                    _ => ctx.counters.naks_sent.remote_operational += 1,
                }
                self.jobs.clear();
                let syndrome = AethRepr::nak(code, 0).syndrome;
                self.push(Job::Ack {
                    psn,
                    syndrome,
                    msn: self.msn,
                });
                true
            }
        }
    }

    fn execute(
        &mut self,
        req: Request,
        psn: Psn,
        repr: &IbRepr,
        payload: &[u8],
        ctx: &mut Ctx<'_>,
    ) -> Result<(), Refusal> {
        const INVALID: Refusal = Refusal::Nak(NakCode::InvalidRequest);
        let pmtu = ctx.cfg.pmtu as usize;
        let in_order = match req {
            Request::Send(Seg::Middle | Seg::Last) => matches!(self.msg, InMsg::Send { .. }),
            Request::Write(Seg::Middle | Seg::Last) => matches!(self.msg, InMsg::Write { .. }),
            Request::Unsupported => false,
            _ => matches!(self.msg, InMsg::Idle),
        };
        let length_ok = match req {
            Request::Send(seg) | Request::Write(seg) => match seg {
                Seg::First | Seg::Middle => payload.len() == pmtu,
                Seg::Last => (1..=pmtu).contains(&payload.len()),
                Seg::Only => payload.len() <= pmtu,
            },
            _ => payload.is_empty(),
        };
        if !in_order || !length_ok {
            return Err(INVALID);
        }
        let imm = repr.imm;
        match req {
            Request::Send(seg) => {
                if seg.starts() {
                    let recv = self.rq.pop_front().ok_or(Refusal::Rnr)?;
                    self.msg = InMsg::Send { recv, written: 0 };
                }
                let InMsg::Send { recv, written } = &mut self.msg else {
                    return Err(INVALID);
                };
                let (recv, at) = (*recv, *written);
                if at + payload.len() > recv.span.len {
                    self.msg = InMsg::Idle;
                    ctx.complete(recv_completion(
                        recv.wr_id,
                        CompletionStatus::LocalLengthError,
                        0,
                        None,
                        ctx,
                    ));
                    return Err(INVALID);
                }
                if !payload.is_empty() {
                    ctx.mem.span_mut(recv.span)[at..at + payload.len()].copy_from_slice(payload);
                }
                let written = at + payload.len();
                self.msg = InMsg::Send { recv, written };
                if seg.ends() {
                    self.msg = InMsg::Idle;
                    self.msn = (self.msn + 1) & 0x00ff_ffff;
                    let c = recv_completion(
                        recv.wr_id,
                        CompletionStatus::Success,
                        written as u32,
                        imm,
                        ctx,
                    );
                    ctx.complete(c);
                }
            }
            Request::Write(seg) => {
                let needs_recv = seg.ends() && imm.is_some();
                if needs_recv && self.rq.is_empty() {
                    return Err(Refusal::Rnr);
                }
                if seg.starts() {
                    let (reth, span) = self.reth_span(repr, Access::REMOTE_WRITE, ctx)?;
                    self.msg = InMsg::Write {
                        span,
                        len: reth.dma_len as usize,
                        written: 0,
                    };
                }
                let InMsg::Write { span, len, written } = self.msg else {
                    return Err(INVALID);
                };
                let end = written + payload.len();
                if end > len || (seg.ends() && end != len) {
                    return Err(INVALID);
                }
                if let Some(span) = span
                    && !payload.is_empty()
                {
                    ctx.mem.span_mut(span)[written..end].copy_from_slice(payload);
                }
                self.msg = InMsg::Write {
                    span,
                    len,
                    written: end,
                };
                if seg.ends() {
                    self.msg = InMsg::Idle;
                    self.msn = (self.msn + 1) & 0x00ff_ffff;
                    if needs_recv {
                        let recv = self.rq.pop_front().ok_or(Refusal::Rnr)?;
                        let c = recv_completion(
                            recv.wr_id,
                            CompletionStatus::Success,
                            len as u32,
                            imm,
                            ctx,
                        );
                        ctx.complete(Completion {
                            op: CompletionOp::RecvWithImm,
                            ..c
                        });
                    }
                }
            }
            Request::Read => {
                if ctx.cfg.max_dest_rd_atomic == 0 {
                    return Err(INVALID);
                }
                let (reth, span) = self.reth_span(repr, Access::REMOTE_READ, ctx)?;
                let npkts = packet::packets_for(reth.dma_len.into(), ctx.cfg.pmtu);
                self.remember(Resource::Read {
                    first: psn,
                    npkts,
                    rkey: reth.rkey,
                    va: reth.va,
                    len: reth.dma_len,
                    span,
                });
                self.msn = (self.msn + 1) & 0x00ff_ffff;
                self.push(Job::Read {
                    first: psn,
                    next: 0,
                    npkts,
                    len: reth.dma_len,
                    span,
                    msn: self.msn,
                });
                self.epsn = psn.add(npkts);
                return Ok(());
            }
            Request::CompareSwap | Request::FetchAdd => {
                if ctx.cfg.max_dest_rd_atomic == 0 {
                    return Err(INVALID);
                }
                let a = repr.atomic_eth.ok_or(INVALID)?;
                if a.va & 7 != 0 {
                    return Err(INVALID);
                }
                let span = self
                    .remote(a.rkey, a.va, 8, Access::REMOTE_ATOMIC, ctx)?
                    .ok_or(Refusal::Nak(NakCode::RemoteAccessError))?;
                let word: &mut [u8] = ctx.mem.span_mut(span);
                let orig = u64::from_ne_bytes(word[..8].try_into().expect("8-byte span"));
                let new = match req {
                    Request::FetchAdd => orig.wrapping_add(a.swap_add),
                    _ if orig == a.compare => a.swap_add,
                    _ => orig,
                };
                word[..8].copy_from_slice(&new.to_ne_bytes());
                self.remember(Resource::Atomic { psn, orig });
                self.msn = (self.msn + 1) & 0x00ff_ffff;
                self.push(Job::AtomicAck {
                    psn,
                    orig,
                    msn: self.msn,
                });
                self.epsn = psn.add(1);
                return Ok(());
            }
            Request::Unsupported => return Err(INVALID),
        }
        self.epsn = psn.add(1);
        if repr.bth.ack_req {
            self.push_ack(psn);
        }
        Ok(())
    }

    /// Checks a remote access; a zero-length access needs no valid rkey (rxe).
    /// The RETH of a WRITE or READ request and the memory it names, checked for `need`: INVALID
    /// without a RETH or beyond the largest DMA length, else as [`Self::remote`].
    fn reth_span(
        &self,
        repr: &IbRepr,
        need: Access,
        ctx: &mut Ctx<'_>,
    ) -> Result<(RethRepr, Option<Span>), Refusal> {
        let reth = repr.reth.ok_or(Refusal::Nak(NakCode::InvalidRequest))?;
        if reth.dma_len > MAX_DMA_LEN {
            return Err(Refusal::Nak(NakCode::InvalidRequest));
        }
        let span = self.remote(reth.rkey, reth.va, reth.dma_len.into(), need, ctx)?;
        Ok((reth, span))
    }

    fn remote(
        &self,
        rkey: u32,
        va: u64,
        len: u64,
        need: Access,
        ctx: &mut Ctx<'_>,
    ) -> Result<Option<Span>, Refusal> {
        if len == 0 {
            return Ok(None);
        }
        match ctx.mem.resolve_remote(rkey, va, len, need) {
            Ok(s) => Ok(Some(s)),
            Err(_) => {
                ctx.counters.remote_access_violations += 1;
                Err(Refusal::Nak(NakCode::RemoteAccessError))
            }
        }
    }

    fn duplicate(&mut self, req: Request, psn: Psn, repr: &IbRepr, ctx: &mut Ctx<'_>) {
        ctx.counters.duplicate_requests += 1;
        match req {
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
                        Some(Job::Read {
                            first,
                            next: psn.diff(first) as u32,
                            npkts,
                            len,
                            span,
                            msn: self.msn,
                        })
                    }
                    _ => None,
                });
                match found {
                    Some(job) => self.push(job),
                    None => ctx.counters.drops.duplicate_unmatched += 1,
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
                    None => ctx.counters.drops.duplicate_unmatched += 1,
                }
            }
            Request::Unsupported => ctx.counters.drops.duplicate_unmatched += 1,
        }
    }

    /// Saves a READ/atomic for replays, recycling the oldest slot (rxe's ring of resources).
    fn remember(&mut self, r: Resource) {
        if self.resources.capacity() == 0 {
            return;
        }
        if self.resources.is_full() {
            self.resources.pop_front();
        }
        let _ = self.resources.push_back(r);
    }

    fn push(&mut self, job: Job) {
        let pushed = self.jobs.push_back(job);
        debug_assert!(pushed.is_ok(), "handle_request checks room first");
    }

    /// Queues an ACK, merging it into a queued ACK: ACKs are cumulative.
    fn push_ack(&mut self, psn: Psn) {
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

    /// Writes the next answer into `buf`; `None` when there is none.
    pub fn poll_transmit(&mut self, buf: &mut [u8], ctx: &mut Ctx<'_>) -> Option<usize> {
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
                let n = packet::emit(buf, &packet::acknowledge(dest, *psn, aeth), &[]);
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
            Job::Read {
                first,
                next,
                npkts,
                len,
                span,
                msn,
            } => {
                let seg = Seg::of(*next, *npkts);
                let n = packet::payload_len(u64::from(*len), pmtu, *next);
                let mut r = packet::repr(
                    packet::read_response_opcode(seg),
                    dest,
                    first.add(*next),
                    false,
                    n,
                );
                if seg != Seg::Middle {
                    r.aeth = Some(AethRepr::ack(*msn));
                }
                let start = *next as usize * pmtu as usize;
                let data: &[u8] = match span {
                    Some(s) => &ctx.mem.span(*s)[start..start + n],
                    None => &[],
                };
                let out = packet::emit(buf, &r, data);
                ctx.counters.tx_payload_bytes += n as u64;
                *next += 1;
                if *next >= *npkts {
                    self.jobs.pop_front();
                }
                out
            }
        };
        Some(len)
    }

    /// Flushes every posted receive (the QP entered ERROR). `keep_answers` keeps a queued fatal NAK.
    pub fn fail_all(&mut self, keep_answers: bool, ctx: &mut Ctx<'_>) {
        if let InMsg::Send { recv, .. } = self.msg {
            ctx.complete(recv_completion(
                recv.wr_id,
                CompletionStatus::WrFlushError,
                0,
                None,
                ctx,
            ));
        }
        self.msg = InMsg::Idle;
        while let Some(r) = self.rq.pop_front() {
            ctx.complete(recv_completion(
                r.wr_id,
                CompletionStatus::WrFlushError,
                0,
                None,
                ctx,
            ));
        }
        if !keep_answers {
            self.jobs.clear();
        }
    }
}

fn recv_completion(
    wr_id: u64,
    status: CompletionStatus,
    byte_len: u32,
    imm: Option<u32>,
    ctx: &Ctx<'_>,
) -> Completion {
    Completion {
        wr_id,
        qp: ctx.cfg.cq_tag,
        status,
        op: CompletionOp::Recv,
        byte_len,
        imm,
    }
}
