//! The responder running an in-sequence request (SEND, WRITE, READ, atomic) against rules and memory.

use crate::transport::soft::bytes::copy_payload;
use crate::transport::{Access, Completion, CompletionOp, CompletionStatus};
use crate::wire::{BthPacket, IbRepr, NakCode, RethPacket, RethRepr};

use super::super::ctx::Ctx;
use super::super::mr::Span;
use super::super::packet::{self, Request, Seg};
use super::super::psn::Psn;
use super::answer::{Job, Resource};
use super::{InMsg, Refusal, Responder, recv_completion};

/// The largest RETH DMA length accepted (rxe: 2^31).
const MAX_DMA_LEN: u32 = 1 << 31;

/// Bytes of a BTH, and of a BTH and a RETH: where a SEND ONLY's and a WRITE ONLY's payload starts.
const BTH: usize = 12;
const BTH_RETH: usize = BTH + 16;

/// The RETH of a request whose headers [`Responder::fast_head`] passed with `START` = `BTH_RETH`
/// (so its bounds are already proven): a fixed-size view, read without bounds checks.
#[inline(always)]
fn fast_reth(ib: &[u8]) -> Option<RethPacket<&[u8; BTH_RETH - BTH]>> {
    ib[BTH..].first_chunk().map(RethPacket::new_unchecked)
}

impl Responder {
    /// Whether the responder's fast paths may take a packet at all: not under selective repeat
    /// (its window orders requests), and with room for an answer. The fast paths, what a NIC's
    /// does for the connected peer's expected packet ([`fast_write_only`](Self::fast_write_only),
    /// [`fast_send_only`](Self::fast_send_only), [`fast_read`](Self::fast_read) and the WRITE
    /// segments'), read the request straight from its bytes (BTH..pad) without the general parse.
    /// Each keeps every rule of [`handle_request`](Self::handle_request) and
    /// [`execute`](Self::execute) for such a packet (BTH version and P_Key, this queue pair, in
    /// sequence, length within the MTU, the RETH's rkey, bounds and access, a posted receive and
    /// its room, READs allowed and no payload on one) and leaves the same state. True when it
    /// took the packet; false, with nothing changed, for anything else (a PSN out of sequence, a
    /// refusal to answer with a NAK, a message in progress), which the general path then handles
    /// as before. The caller picked the arm by opcode, counted the packet and checked that the
    /// queue pair is not in error and this is true.
    #[inline(always)]
    pub(in super::super) fn fast_ready(&self) -> bool {
        self.reorder.is_none() && !self.jobs.is_full()
    }

    /// What every request the fast paths ([`fast_ready`](Self::fast_ready)) take must pass, its headers ending
    /// at `START`: the BTH's checks ([`packet::fast_payload`]), the expected PSN, no message in
    /// progress, and a payload within the MTU (`CARRIES`) or none (a READ request, whose DMA
    /// length is its response's: no MTU to compare with). The BTH and the payload.
    #[inline(always)]
    fn fast_head<'a, const START: usize, const CARRIES: bool>(
        &self,
        ib: &'a [u8],
        ctx: &Ctx<'_>,
    ) -> Option<(BthPacket<&'a [u8; BTH]>, &'a [u8])> {
        // A fixed-size view: the compiler then reads every header field without a bounds check.
        let bth = BthPacket::new_unchecked(ib.first_chunk::<BTH>()?);
        let payload = packet::fast_payload(ib, &bth, START, ctx.cfg.qpn)?;
        let fits = if CARRIES {
            payload.len() <= ctx.cfg.pmtu as usize
        } else {
            payload.is_empty()
        };
        if bth.psn() != self.epsn.value() || !matches!(self.msg, InMsg::Idle) || !fits {
            return None;
        }
        Some((bth, payload))
    }

    /// The fast path ([`fast_ready`](Self::fast_ready)) of an RDMA WRITE ONLY (no immediate).
    #[inline(always)]
    pub(in super::super) fn fast_write_only(&mut self, ib: &[u8], ctx: &mut Ctx<'_>) -> bool {
        let Some((bth, payload)) = self.fast_head::<BTH_RETH, true>(ib, ctx) else {
            return false;
        };
        let Some(reth) = fast_reth(ib) else {
            return false;
        };
        let len = payload.len();
        // A WRITE ONLY's DMA length is its payload's (so within the MTU, far below 2^31).
        if reth.dma_len() as usize != len {
            return false;
        }
        if len > 0 {
            let Some(dst) =
                ctx.mem
                    .remote_mut(reth.rkey(), reth.va(), len as u64, Access::REMOTE_WRITE)
            else {
                return false;
            };
            copy_payload(dst, payload);
        }
        self.count_message();
        self.took_in_sequence(bth.ack_req());
        true
    }

    /// The fast path ([`fast_ready`](Self::fast_ready)) of a SEND ONLY (no immediate).
    #[inline(always)]
    pub(in super::super) fn fast_send_only(&mut self, ib: &[u8], ctx: &mut Ctx<'_>) -> bool {
        let Some((bth, payload)) = self.fast_head::<BTH, true>(ib, ctx) else {
            return false;
        };
        let len = payload.len();
        // The receive goes as it is looked at: no second look (and copy) of it.
        let Some(recv) = self.rq.pop_front_if(|r| len <= r.span.len) else {
            return false;
        };
        if len > 0 {
            copy_payload(ctx.mem.span_part_mut(recv.span, 0..len), payload);
        }
        self.count_message();
        ctx.complete(recv_completion(
            recv.wr_id,
            CompletionStatus::Success,
            len as u32,
            None,
            ctx,
        ));
        self.took_in_sequence(bth.ack_req());
        true
    }

    /// The fast path ([`fast_ready`](Self::fast_ready)) of an RDMA READ request. Out of line: one request a
    /// READ, where a WRITE or SEND is a request a message, and the receive loop it would swell
    /// then keeps the ICRC's check inline.
    #[inline(never)]
    pub(in super::super) fn fast_read(&mut self, ib: &[u8], ctx: &mut Ctx<'_>) -> bool {
        if self.fast_head::<BTH_RETH, false>(ib, ctx).is_none() || ctx.cfg.max_dest_rd_atomic == 0 {
            return false;
        }
        let Some(reth) = fast_reth(ib) else {
            return false;
        };
        let reth = RethRepr {
            va: reth.va(),
            rkey: reth.rkey(),
            dma_len: reth.dma_len(),
        };
        if reth.dma_len > MAX_DMA_LEN {
            return false;
        }
        let span = match reth.dma_len {
            0 => None,
            n => match ctx
                .mem
                .remote_span(reth.rkey, reth.va, n.into(), Access::REMOTE_READ)
            {
                Some(span) => Some(span),
                None => return false,
            },
        };
        self.nak_sent = false;
        let psn = self.epsn;
        self.start_read(psn, reth, span, ctx.cfg.pmtu);
        true
    }

    /// Executes the request at the expected PSN, or says why it was refused.
    pub(super) fn execute(
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
                    copy_payload(
                        &mut ctx.mem.span_mut(recv.span)[at..at + payload.len()],
                        payload,
                    );
                }
                let written = at + payload.len();
                self.msg = InMsg::Send { recv, written };
                if seg.ends() {
                    self.msg = InMsg::Idle;
                    self.count_message();
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
                if let Some(len) = self.write_segment(seg.ends(), payload, ctx)?
                    && needs_recv
                {
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
            Request::Read => {
                if ctx.cfg.max_dest_rd_atomic == 0 {
                    return Err(INVALID);
                }
                let (reth, span) = self.reth_span(repr, Access::REMOTE_READ, ctx)?;
                self.start_read(psn, reth, span, ctx.cfg.pmtu);
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
                self.count_message();
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
        self.took_in_sequence(repr.bth.ack_req);
        Ok(())
    }

    /// The fast path for an RDMA WRITE FIRST, on the terms of [`fast_ready`](Self::fast_ready):
    /// the expected PSN with no message in progress, a payload filling the MTU and within the
    /// RETH's DMA length (at most 2^31), the RETH's memory writable. It starts the WRITE as
    /// [`execute`](Self::execute) does. True when it took the packet; false, with nothing changed,
    /// for anything else. Out of line: one packet a message.
    #[inline(never)]
    pub(in super::super) fn fast_write_first(&mut self, ib: &[u8], ctx: &mut Ctx<'_>) -> bool {
        if !self.fast_ready() {
            return false;
        }
        let Some((bth, payload)) = self.fast_head::<BTH_RETH, true>(ib, ctx) else {
            return false;
        };
        let Some(reth) = fast_reth(ib) else {
            return false;
        };
        let (len, dma_len) = (payload.len(), reth.dma_len());
        // The payload fills the MTU (at least 256 bytes), so the DMA length is not 0 and the
        // memory needs its key.
        if len != ctx.cfg.pmtu as usize || dma_len > MAX_DMA_LEN || len > dma_len as usize {
            return false;
        }
        let Ok(span) =
            ctx.mem
                .resolve_remote(reth.rkey(), reth.va(), dma_len.into(), Access::REMOTE_WRITE)
        else {
            return false;
        };
        copy_payload(ctx.mem.span_part_mut(span, 0..len), payload);
        self.msg = InMsg::Write {
            span: Some(span),
            len: dma_len as usize,
            written: len,
        };
        self.took_in_sequence(bth.ack_req());
        true
    }

    /// The fast path for an RDMA WRITE MIDDLE or LAST (no immediate; `ends`: the LAST) of the
    /// WRITE in progress, on the terms of [`fast_ready`](Self::fast_ready): the expected PSN,
    /// a middle segment filling the MTU or a last one of at least a byte that ends the message
    /// exactly. True when it took the packet; false, with nothing changed, for anything else.
    #[inline(always)]
    pub(in super::super) fn fast_write_next(
        &mut self,
        ib: &[u8],
        ends: bool,
        ctx: &mut Ctx<'_>,
    ) -> bool {
        let Some(head) = ib.first_chunk::<BTH>() else {
            return false;
        };
        if !self.fast_ready() {
            return false;
        }
        let bth = BthPacket::new_unchecked(head);
        let Some(payload) = packet::fast_payload(ib, &bth, BTH, ctx.cfg.qpn) else {
            return false;
        };
        let (len, pmtu) = (payload.len(), ctx.cfg.pmtu as usize);
        // A middle segment fills the MTU; the last brings at least a byte.
        let length_ok = if ends {
            (1..=pmtu).contains(&len)
        } else {
            len == pmtu
        };
        if bth.psn() != self.epsn.value()
            || !length_ok
            || self.write_segment(ends, payload, ctx).is_err()
        {
            return false;
        }
        self.took_in_sequence(bth.ack_req());
        true
    }

    /// The request at the expected PSN was executed: the next is expected, a NAK may be sent again,
    /// and an ACK is owed when the request asked for one.
    #[inline(always)]
    fn took_in_sequence(&mut self, ack_req: bool) {
        self.nak_sent = false;
        let psn = self.epsn;
        self.epsn = psn.add(1);
        if ack_req {
            self.push_ack(psn);
        }
    }

    /// Lands `payload`, the next segment of the WRITE in progress, in its memory (`ends`: the
    /// message's last segment, which must fill it exactly). The message's length when that ends it
    /// (back to idle, the MSN one on), `None` while it goes on; INVALID, with nothing changed,
    /// without a WRITE in progress or past its length. Shared by [`execute`](Self::execute) and
    /// the fast path.
    #[inline(always)]
    fn write_segment(
        &mut self,
        ends: bool,
        payload: &[u8],
        ctx: &mut Ctx<'_>,
    ) -> Result<Option<usize>, Refusal> {
        let InMsg::Write { span, len, written } = self.msg else {
            return Err(Refusal::Nak(NakCode::InvalidRequest));
        };
        let end = written + payload.len();
        if end > len || (ends && end != len) {
            return Err(Refusal::Nak(NakCode::InvalidRequest));
        }
        if let Some(span) = span
            && !payload.is_empty()
        {
            copy_payload(ctx.mem.span_part_mut(span, written..end), payload);
        }
        if !ends {
            self.msg = InMsg::Write {
                span,
                len,
                written: end,
            };
            return Ok(None);
        }
        self.msg = InMsg::Idle;
        self.count_message();
        Ok(Some(len))
    }

    /// Takes the READ request at `psn` for `reth`'s memory (`span`, checked; `None` for zero
    /// bytes): remembers it for a replay and queues its response packets. Always inlined: the
    /// fast READ ends with it, and its call passed the RETH and span through memory to a frame of
    /// its own.
    #[inline(always)]
    fn start_read(&mut self, psn: Psn, reth: RethRepr, span: Option<Span>, pmtu: u32) {
        let npkts = packet::packets_for(reth.dma_len.into(), pmtu);
        self.remember(Resource::Read {
            first: psn,
            npkts,
            rkey: reth.rkey,
            va: reth.va,
            len: reth.dma_len,
            span,
        });
        self.count_message();
        self.push(Job::Read {
            first: psn,
            next: 0,
            npkts,
            end: npkts,
            len: reth.dma_len,
            span,
            msn: self.msn,
            replay: false,
        });
        self.epsn = psn.add(npkts);
    }

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

    /// Checks a remote access; a zero-length access needs no valid rkey (rxe).
    pub(super) fn remote(
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
}
