//! The responder: executes incoming requests exactly once, in PSN order, and answers them.
//!
//! It follows rxe (roce-wire.md §6.3-6.6): one PSN-sequence NAK per gap, duplicates re-ACKed
//! (SEND/WRITE) or replayed from saved resources (READ, atomics), RNR NAK when no receive is
//! posted, and NAK invalid request / remote access error (QP to ERROR) for requests that break the
//! rules. Answers wait in a small FIFO of jobs that `poll_transmit` drains in order.

mod answer;
mod execute;
mod reorder;

use crate::transport::{Completion, CompletionOp, CompletionStatus, RecvRequest};
use crate::wire::{AethRepr, IbRepr, NakCode};

use super::ctx::Ctx;
use super::failure::QpFailure;
use super::mr::Span;
use super::packet::Request;
use super::psn::Psn;
use super::ring::Ring;
use answer::{Job, Resource};
use reorder::Reorder;

/// A posted receive: where the next SEND (or WRITE-with-immediate notice) goes.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct RecvWqe {
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

/// Why a request in sequence was not executed.
enum Refusal {
    /// No receive posted: RNR NAK, the QP stays up.
    Rnr,
    /// NAK with this code; the QP enters ERROR.
    Nak(NakCode),
}

/// Receive-side state of a queue pair.
pub(super) struct Responder {
    epsn: Psn,
    msn: u32,
    nak_sent: bool,
    msg: InMsg,
    /// Posted receives, oldest first.
    pub rq: Ring<RecvWqe>,
    resources: Ring<Resource>,
    jobs: Ring<Job>,
    /// Selective repeat's window of early requests, when the QP runs it.
    reorder: Option<Box<Reorder>>,
    /// Receive-consuming messages completed (selective repeat: where a SEND's receive number starts).
    consumed: u32,
    /// A SACK answer is queued.
    sack_queued: bool,
    /// The request it refused with a fatal NAK, to name in the run's error.
    pub(super) refused: Option<QpFailure>,
}

impl Responder {
    /// A message ended here: the MSN an ACK reports moves on (24 bits, wrapping).
    #[inline(always)]
    fn count_message(&mut self) {
        self.msn = (self.msn + 1) & 0x00ff_ffff;
    }

    /// A responder expecting `psn` first, with `rq_depth` receives and `max_dest_rd_atomic` slots;
    /// `sr` gives it selective repeat with a window of that many PSNs (a power of two).
    pub(super) fn new(
        psn: Psn,
        rq_depth: usize,
        max_dest_rd_atomic: u32,
        sr: Option<u32>,
    ) -> Responder {
        let slots = max_dest_rd_atomic as usize;
        Responder {
            epsn: psn,
            msn: 0,
            nak_sent: false,
            msg: InMsg::Idle,
            rq: Ring::filled(rq_depth, RecvWqe::default()),
            resources: Ring::with_capacity(slots),
            jobs: Ring::with_capacity(2 * slots + 16),
            reorder: sr.map(|window| Box::new(Reorder::new(window, psn))),
            consumed: 0,
            sack_queued: false,
            refused: None,
        }
    }

    /// The PSN it expects next.
    pub(super) fn expected_psn(&self) -> Psn {
        self.epsn
    }

    /// Receives that will still produce a completion: posted ones plus the one a SEND is filling.
    pub(super) fn receives_held(&self) -> usize {
        self.rq.len() + usize::from(matches!(self.msg, InMsg::Send { .. }))
    }

    /// Posts a checked receive; the caller made sure there is room.
    pub(super) fn push_recv(&mut self, wr: &RecvRequest, span: Span) {
        // Written in its slot: the ring is filled, so no slot needs the vector's growth path.
        let Some(slot) = self.rq.push_back_slot() else {
            return debug_assert!(false, "post_recv checks room first");
        };
        *slot = RecvWqe {
            wr_id: wr.wr_id,
            span,
        };
    }

    /// Handles one request packet. `true` means the QP must enter ERROR (a fatal NAK is queued).
    pub(super) fn handle_request(
        &mut self,
        req: Request,
        repr: &IbRepr,
        payload: &[u8],
        ctx: &mut Ctx<'_>,
    ) -> bool {
        if self.jobs.is_full() {
            // Leave it unexecuted; the requester retransmits it.
            ctx.counters.drops.protocol.response_queue_full += 1;
            return false;
        }
        if self.reorder.is_some() {
            return self.handle_request_sr(req, repr, payload, ctx);
        }
        let psn = Psn::new(repr.bth.psn);
        let d = psn.diff(self.epsn);
        if d > 0 {
            if self.nak_sent {
                ctx.counters.drops.protocol.out_of_sequence += 1;
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
            Err(refusal) => self.refuse(refusal, psn, Some(repr), ctx),
        }
    }

    /// Answers the request at `psn` (`repr`, when it is at hand), in sequence but refused: an RNR
    /// NAK (the QP stays up), or a NAK that ends the QP (`true`), noted to name the request.
    fn refuse(
        &mut self,
        refusal: Refusal,
        psn: Psn,
        repr: Option<&IbRepr>,
        ctx: &mut Ctx<'_>,
    ) -> bool {
        match refusal {
            Refusal::Rnr => {
                ctx.counters.naks_sent.rnr += 1;
                let syndrome = AethRepr::rnr_nak(ctx.cfg.min_rnr_timer, 0).syndrome;
                self.push(Job::Ack {
                    psn,
                    syndrome,
                    msn: self.msn,
                });
                false
            }
            Refusal::Nak(code) => {
                self.refused.get_or_insert(match repr {
                    Some(r) => QpFailure::refused(r, code),
                    None => QpFailure::Refused {
                        psn: psn.value(),
                        opcode: None,
                        target: None,
                        nak: code,
                    },
                });
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

    /// Flushes every posted receive (the QP entered ERROR). `keep_answers` keeps a queued fatal NAK.
    pub(super) fn fail_all(&mut self, keep_answers: bool, ctx: &mut Ctx<'_>) {
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
