//! Selective repeat, the responder's half (issue 15; docs/lossy-roce.md): a request that arrives
//! early, within a window of the expected PSN, is placed at once (WRITE data where its own RETH
//! says, SEND data into the receive it names) and remembered; what must happen in order (receive
//! completions, the MSN, READ and atomic execution) happens once everything before it has arrived.
//! While anything is held, answers are SACK NAKs: the first missing PSN and a bitmap of what is held
//! beyond it, built when the answer leaves, so one NAK carries the latest state.

use crate::transport::{Access, Completion, CompletionOp, CompletionStatus};
use crate::wire::{AethRepr, AtomicEthRepr, BthRepr, IbRepr, NakCode, RethRepr};

use super::super::ctx::Ctx;
use super::super::packet::{self, Request, SACK_MAX_PSNS, Seg, SrExt};
use super::super::psn::Psn;
use super::answer::Job;
use super::{Refusal, Responder, recv_completion};

/// The largest RETH DMA length accepted (rxe: 2^31).
const MAX_DMA_LEN: u32 = 1 << 31;
/// Answers kept free in the job queue while early READs and atomics are run.
const JOB_RESERVE: usize = 2;
/// Early packets between two SACKs when nothing else calls for one (a new hole, AckReq).
const SACK_EVERY: u32 = 16;

/// How a placed packet ends its message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum End {
    /// It does not.
    No,
    /// The last packet of a SEND of `len` bytes: the receive completes.
    Send { len: u32, imm: Option<u32> },
    /// The last packet of a WRITE.
    Write,
    /// The last packet of a WRITE with immediate: a receive completes with it.
    WriteImm { len: u32, imm: u32 },
}

/// What a request that arrived still has to do once everything before it has arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Pending {
    /// Nothing arrived at this PSN.
    Empty,
    /// Its data is in place.
    Placed { ack_req: bool, end: End },
    /// A READ request, run in order.
    Read { reth: RethRepr, ack_req: bool },
    /// An atomic, run in order.
    Atomic {
        req: Request,
        eth: AtomicEthRepr,
        ack_req: bool,
    },
}

/// The window of early requests.
pub(super) struct Reorder {
    slots: Box<[Pending]>,
    /// Slots not empty.
    held: u32,
    /// One past the highest PSN held.
    high: Psn,
    /// Early packets placed since the last SACK left.
    since: u32,
}

impl Reorder {
    /// A window of `window` PSNs (a power of two).
    pub(super) fn new(window: u32, epsn: Psn) -> Reorder {
        debug_assert!(window.is_power_of_two());
        Reorder {
            slots: vec![Pending::Empty; window as usize].into_boxed_slice(),
            held: 0,
            high: epsn,
            since: 0,
        }
    }

    fn window(&self) -> u32 {
        self.slots.len() as u32
    }

    fn slot(&mut self, p: Psn) -> &mut Pending {
        let i = p.value() & (self.window() - 1);
        &mut self.slots[i as usize]
    }

    fn peek(&self, p: Psn) -> Pending {
        self.slots[(p.value() & (self.window() - 1)) as usize]
    }

    /// Packets held beyond the expected PSN.
    pub(super) fn held(&self) -> u32 {
        self.held
    }

    /// The SACK bitmap after `epsn` into `out` (bit 7 of byte 0 is `epsn + 1`), of at most `max_bits`
    /// PSNs; returns its length, a multiple of 4.
    pub(super) fn bitmap(
        &self,
        epsn: Psn,
        max_bits: u32,
        out: &mut [u8; SACK_MAX_PSNS as usize / 8],
    ) -> usize {
        let span = (self.high.diff(epsn).max(1) as u32 - 1)
            .min(SACK_MAX_PSNS)
            .min(max_bits);
        out.fill(0);
        let mut last = 0;
        for i in 0..span {
            if self.peek(epsn.add(1 + i)) != Pending::Empty {
                out[i as usize / 8] |= 0x80 >> (i % 8);
                last = i as usize / 8 + 1;
            }
        }
        last.next_multiple_of(4)
    }
}

/// Bytes of data a packet at `seg` must carry at `pmtu`.
fn length_ok(seg: Seg, len: usize, pmtu: usize) -> bool {
    match seg {
        Seg::First | Seg::Middle => len == pmtu,
        Seg::Last => (1..=pmtu).contains(&len),
        Seg::Only => len <= pmtu,
    }
}

impl Responder {
    /// Handles one request packet under selective repeat. `true`: the QP must enter ERROR.
    pub(super) fn handle_request_sr(
        &mut self,
        req: Request,
        repr: &IbRepr,
        payload: &[u8],
        ctx: &mut Ctx<'_>,
    ) -> bool {
        let psn = Psn::new(repr.bth.psn);
        let d = psn.diff(self.epsn);
        if d < 0 {
            self.duplicate(req, psn, repr, ctx);
            return false;
        }
        let ro = self.reorder.as_mut().expect("selective repeat is on");
        if d as u32 >= ro.window() {
            ctx.counters.drops.protocol.out_of_sequence += 1;
            self.want_sack();
            return false;
        }
        if *ro.slot(psn) != Pending::Empty {
            ctx.counters.duplicate_requests += 1;
            self.want_sack();
            return false;
        }
        let mut tell = repr.bth.ack_req;
        match self.place(req, repr, payload, d == 0, ctx) {
            Ok(p) => {
                let ro = self.reorder.as_mut().expect("on");
                // A new hole (or the first) is news at once; more of the same every few packets.
                if d > 0 {
                    ro.since += 1;
                    tell |= ro.held == 0 || psn.after(ro.high) || ro.since >= SACK_EVERY;
                }
                *ro.slot(psn) = p;
                ro.held += 1;
                if psn.add(1).after(ro.high) {
                    ro.high = psn.add(1);
                }
            }
            Err(refusal) if d == 0 => return self.refuse(refusal, psn, Some(repr), ctx),
            Err(_) => {
                // Left for the requester to resend; it is refused (or placed) in order then.
                ctx.counters.drops.protocol.out_of_sequence += 1;
                self.want_sack();
                return false;
            }
        }
        let mut ack = false;
        while self.jobs.room() > JOB_RESERVE {
            let epsn = self.epsn;
            let ro = self.reorder.as_mut().expect("on");
            let p = std::mem::replace(ro.slot(epsn), Pending::Empty);
            if p == Pending::Empty {
                break;
            }
            ro.held -= 1;
            let mut asked = None;
            let run = match p {
                Pending::Empty => unreachable!("checked"),
                Pending::Placed { ack_req, end } => {
                    self.finish(end, ctx);
                    self.epsn = epsn.add(1);
                    ack |= ack_req;
                    Ok(())
                }
                Pending::Read { reth, ack_req } => {
                    let mut r = IbRepr::new(BthRepr::new(
                        crate::wire::Opcode::RC_RDMA_READ_REQUEST,
                        ctx.cfg.qpn,
                        epsn.value(),
                    ));
                    r.bth.ack_req = ack_req;
                    r.reth = Some(reth);
                    asked = Some(r);
                    self.execute(Request::Read, epsn, &r, &[], ctx)
                }
                Pending::Atomic { req, eth, ack_req } => {
                    let op = match req {
                        Request::FetchAdd => crate::wire::Opcode::RC_FETCH_ADD,
                        _ => crate::wire::Opcode::RC_COMPARE_SWAP,
                    };
                    let mut r = IbRepr::new(BthRepr::new(op, ctx.cfg.qpn, epsn.value()));
                    r.bth.ack_req = ack_req;
                    r.atomic_eth = Some(eth);
                    asked = Some(r);
                    self.execute(req, epsn, &r, &[], ctx)
                }
            };
            if let Err(refusal) = run {
                return self.refuse(refusal, epsn, asked.as_ref(), ctx);
            }
        }
        if self.reorder.as_ref().is_some_and(|r| r.held > 0) {
            if tell || ack {
                self.want_sack();
            }
        } else if ack {
            self.push_ack(self.epsn.sub(1));
        }
        false
    }

    /// Queues one SACK answer (its contents are taken when it leaves).
    pub(super) fn want_sack(&mut self) {
        if !self.sack_queued && !self.jobs.is_full() {
            self.sack_queued = true;
            self.push(Job::Sack);
        }
    }

    /// Writes the SACK answer: a NAK naming the first missing PSN with the bitmap of what is held,
    /// or, when nothing is held any more, a plain ACK.
    pub(super) fn emit_sack(&mut self, buf: &mut [u8], ctx: &mut Ctx<'_>) -> usize {
        self.sack_queued = false;
        let dest = ctx.cfg.remote_qpn;
        let ro = self.reorder.as_mut().expect("selective repeat is on");
        ro.since = 0;
        if ro.held == 0 {
            ctx.counters.acks_sent += 1;
            let aeth = AethRepr::ack(self.msn);
            return packet::emit(buf, &packet::acknowledge(dest, self.epsn.sub(1), aeth), &[]);
        }
        let mut bitmap = [0u8; SACK_MAX_PSNS as usize / 8];
        // The bitmap fits any answer buffer: no more bytes than the path MTU.
        let n = ro.bitmap(self.epsn, ctx.cfg.pmtu * 8, &mut bitmap);
        ctx.counters.naks_sent.psn_seq += 1;
        let aeth = AethRepr::nak(NakCode::PsnSequenceError, self.msn);
        packet::emit(
            buf,
            &packet::acknowledge(dest, self.epsn, aeth),
            &bitmap[..n],
        )
    }

    /// Places the data of a request that arrived (early or in order) and says what is left for when
    /// everything before it has arrived. READs and atomics are only remembered.
    fn place(
        &mut self,
        req: Request,
        repr: &IbRepr,
        payload: &[u8],
        in_order: bool,
        ctx: &mut Ctx<'_>,
    ) -> Result<Pending, Refusal> {
        const INVALID: Refusal = Refusal::Nak(NakCode::InvalidRequest);
        let pmtu = ctx.cfg.pmtu as usize;
        let ack_req = repr.bth.ack_req;
        match req {
            Request::Send(seg) => {
                let Some((Some(SrExt::Send { recv_seq, offset }), data)) =
                    SrExt::split(req, payload)
                else {
                    return Err(INVALID);
                };
                if !length_ok(seg, data.len(), pmtu) {
                    return Err(INVALID);
                }
                let index = recv_seq.wrapping_sub(self.consumed) as usize;
                let recv = *self.rq.get(index).ok_or(Refusal::Rnr)?;
                let at = offset as usize;
                if at + data.len() > recv.span.len {
                    if in_order && index == 0 {
                        self.rq.pop_front();
                        self.consumed = self.consumed.wrapping_add(1);
                        let c = recv_completion(
                            recv.wr_id,
                            CompletionStatus::LocalLengthError,
                            0,
                            None,
                            ctx,
                        );
                        ctx.complete(c);
                    }
                    return Err(INVALID);
                }
                ctx.mem.span_mut(recv.span)[at..at + data.len()].copy_from_slice(data);
                let end = if seg.ends() {
                    End::Send {
                        len: (at + data.len()) as u32,
                        imm: repr.imm,
                    }
                } else {
                    End::No
                };
                Ok(Pending::Placed { ack_req, end })
            }
            Request::Write(seg) => {
                let (ext, data) = SrExt::split(req, payload).ok_or(INVALID)?;
                if !length_ok(seg, data.len(), pmtu) {
                    return Err(INVALID);
                }
                let reth = match (seg.starts(), ext) {
                    (true, _) => repr.reth.ok_or(INVALID)?,
                    (false, Some(SrExt::Write(r))) => r,
                    _ => return Err(INVALID),
                };
                if reth.dma_len > MAX_DMA_LEN {
                    return Err(INVALID);
                }
                let imm = seg.ends().then_some(repr.imm).flatten();
                // A receive completes with it: only in order, so the receive is the oldest.
                if imm.is_some() && (!in_order || self.rq.is_empty()) {
                    return Err(Refusal::Rnr);
                }
                let span = self.remote(
                    reth.rkey,
                    reth.va,
                    data.len() as u64,
                    Access::REMOTE_WRITE,
                    ctx,
                )?;
                if let Some(span) = span {
                    ctx.mem.span_mut(span)[..data.len()].copy_from_slice(data);
                }
                let end = match (seg.ends(), imm) {
                    (false, _) => End::No,
                    (true, None) => End::Write,
                    (true, Some(imm)) => End::WriteImm {
                        len: reth.dma_len,
                        imm,
                    },
                };
                Ok(Pending::Placed { ack_req, end })
            }
            Request::Read if payload.is_empty() => Ok(Pending::Read {
                reth: repr.reth.ok_or(INVALID)?,
                ack_req,
            }),
            Request::CompareSwap | Request::FetchAdd if payload.is_empty() => Ok(Pending::Atomic {
                req,
                eth: repr.atomic_eth.ok_or(INVALID)?,
                ack_req,
            }),
            _ => Err(INVALID),
        }
    }

    /// What completes a message once everything before it has arrived.
    fn finish(&mut self, end: End, ctx: &mut Ctx<'_>) {
        let (len, imm, op) = match end {
            End::No => return,
            End::Write => {
                self.count_message();
                return;
            }
            End::Send { len, imm } => (len, imm, CompletionOp::Recv),
            End::WriteImm { len, imm } => (len, Some(imm), CompletionOp::RecvWithImm),
        };
        self.count_message();
        self.consumed = self.consumed.wrapping_add(1);
        // Placement found this receive posted, and only in-order completions take receives.
        if let Some(recv) = self.rq.pop_front() {
            let c = recv_completion(recv.wr_id, CompletionStatus::Success, len, imm, ctx);
            ctx.complete(Completion { op, ..c });
        }
    }
}

#[cfg(test)]
mod tests;
