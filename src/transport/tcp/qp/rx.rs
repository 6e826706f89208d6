//! A queue pair's receive direction: where bytes go, and how they become payloads and completions.

use super::{FrameOp, HEADER_LEN, Header, QpState, RxFrame, STAGE_TAIL, TxFrame, closed};
use crate::transport::tcp::frame::OPERANDS_LEN;
use crate::transport::{Completion, CompletionOp, CompletionStatus, Error, Result};
use std::collections::VecDeque;

/// Why [`QpState::process`] stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::transport::tcp) enum Stop {
    /// It needs more bytes from the socket.
    Bytes,
    /// A SEND waits for a receive to be posted: leave it in the socket until one is (TCP flow control).
    Receive,
}

/// Where the next read from the socket goes.
pub(in crate::transport::tcp) enum RecvInto<'a> {
    /// The rest of the current payload straight into the buffer, and a little of what follows.
    Payload {
        /// The payload bytes still missing, in the registered buffer.
        rest: &'a mut [u8],
        /// The head of the staging area, for the frames behind the payload.
        tail: &'a mut [u8],
    },
    /// Free room in the staging area, for headers and small frames.
    Stage(&'a mut [u8]),
}

impl QpState {
    /// Where the next read goes. Call only after [`Self::process`] returned [`Stop::Bytes`].
    pub(crate) fn recv_into(&mut self) -> RecvInto<'_> {
        if let Some(fr) = &self.rx {
            // process() drained the staging area into the payload before asking for more bytes.
            debug_assert_eq!(self.stage_start, self.stage_end);
            self.stage_start = 0;
            self.stage_end = 0;
            let at = fr.dest + fr.done;
            let rest = &mut self.buf[at..fr.dest + fr.hdr.len as usize];
            return RecvInto::Payload {
                rest,
                tail: &mut self.stage[..STAGE_TAIL],
            };
        }
        // Need more bytes for a header: compact the staging area and fill it.
        if self.stage_start > 0 {
            self.stage.copy_within(self.stage_start..self.stage_end, 0);
            self.stage_end -= self.stage_start;
            self.stage_start = 0;
        }
        RecvInto::Stage(&mut self.stage[self.stage_end..])
    }

    /// A read into what [`Self::recv_into`] offered returned `n` bytes.
    pub(crate) fn received(&mut self, n: usize) {
        match &mut self.rx {
            Some(fr) => {
                let into_payload = n.min(fr.hdr.len as usize - fr.done);
                fr.done += into_payload;
                self.stage_end = n - into_payload;
            }
            None => self.stage_end += n,
        }
    }

    /// Applies the bytes received so far: places payloads, completes frames (into `cq`) and queues READ
    /// responses. Sets `progressed` when a frame completed.
    pub(crate) fn process(
        &mut self,
        cq: &mut VecDeque<Completion>,
        progressed: &mut bool,
    ) -> Result<Stop> {
        loop {
            if let Some(mut fr) = self.rx {
                // Payload of the current frame: first from the staging area, then from the socket.
                let want = fr.hdr.len as usize - fr.done;
                let have = (self.stage_end - self.stage_start).min(want);
                if have > 0 {
                    let dst = fr.dest + fr.done;
                    self.buf[dst..dst + have]
                        .copy_from_slice(&self.stage[self.stage_start..self.stage_start + have]);
                    self.stage_start += have;
                    fr.done += have;
                }
                if fr.done < fr.hdr.len as usize {
                    self.rx = Some(fr);
                    return Ok(Stop::Bytes);
                }
                self.rx = None;
                self.finish_frame(fr, cq)?;
                *progressed = true;
                continue;
            }
            if self.stage_end - self.stage_start < HEADER_LEN {
                return Ok(Stop::Bytes);
            }
            let h = &self.stage[self.stage_start..self.stage_start + HEADER_LEN];
            let Some(hdr) = Header::parse(h) else {
                return Err(Error::Connection(format!(
                    "data connection {} carried a frame that is not roceperf's (bytes {h:02x?}); is the peer the same roceperf version?",
                    self.idx
                )));
            };
            // An atomic's operands are read whole from the staging area with its header.
            if self.stage_end - self.stage_start < HEADER_LEN + hdr.operands_len() {
                return Ok(Stop::Bytes);
            }
            let Some(dest) = self.place(&hdr)? else {
                return Ok(Stop::Receive);
            };
            self.stage_start += HEADER_LEN;
            // Acknowledgements complete this side's work at once, whatever the frame carries.
            if hdr.acks > 0 {
                self.take_acks(hdr.acks, cq)?;
                *progressed = true;
            }
            if hdr.operands_len() > 0 {
                let at = self.stage_start;
                let operand = |i: usize| {
                    u64::from_le_bytes(
                        self.stage[at + 8 * i..at + 8 * i + 8]
                            .try_into()
                            .expect("8 bytes"),
                    )
                };
                let (first, second) = (operand(0), operand(1));
                self.stage_start += OPERANDS_LEN;
                self.execute_atomic(hdr.op, dest, first, second);
                *progressed = true;
                continue;
            }
            let fr = RxFrame { hdr, dest, done: 0 };
            if hdr.has_payload() {
                self.rx = Some(fr);
            } else {
                self.finish_frame(fr, cq)?;
                *progressed = true;
            }
        }
    }

    /// The peer acknowledged `n` of the signaled SENDs and WRITEs written: they complete, in order.
    fn take_acks(&mut self, n: u32, cq: &mut VecDeque<Completion>) -> Result<()> {
        for _ in 0..n {
            let Some((wr_id, op, byte_len)) = self.unacked.pop_front() else {
                return Err(Error::Connection(format!(
                    "data connection {}: the peer acknowledged more than this side sent",
                    self.idx
                )));
            };
            self.outstanding -= 1;
            cq.push_back(Completion {
                wr_id,
                qp: self.idx as u32,
                status: CompletionStatus::Success,
                op,
                byte_len,
                imm: None,
            });
        }
        Ok(())
    }

    /// The peer closed its end. An error only while this side still waits for the peer (as a verbs QP
    /// errs only for work that cannot complete); otherwise the queue pair just goes quiet.
    pub(crate) fn close_by_peer(&mut self) -> Result<()> {
        if self.outstanding > 0
            || !self.unacked.is_empty()
            || !self.reads.is_empty()
            || self.rx.is_some()
        {
            return Err(closed(self.idx));
        }
        self.peer_closed = true;
        Ok(())
    }

    /// Decides where an incoming frame's payload goes and checks it fits; `None` = wait for a receive.
    fn place(&self, h: &Header) -> Result<Option<usize>> {
        let idx = self.idx;
        let len = h.len as usize;
        let bad = |what: &str| {
            Err(Error::Connection(format!(
                "data connection {idx}: the peer's {what} of {len} bytes at offset {} is outside this side's {}-byte buffer; give both sides the same -s",
                h.offset,
                self.buf.len()
            )))
        };
        match h.op {
            FrameOp::Send | FrameOp::SendImm => {
                let Some(r) = self.recvs.front() else {
                    return Ok(None);
                };
                if len > r.len as usize {
                    return Err(Error::Connection(format!(
                        "data connection {idx}: an incoming SEND of {len} bytes is larger than the posted receive of {} bytes; give both sides the same -s",
                        r.len
                    )));
                }
                Ok(Some(r.offset as usize))
            }
            FrameOp::Write | FrameOp::WriteImm | FrameOp::ReadReq => {
                let end = h.offset.checked_add(len as u64);
                if end.is_none_or(|e| e > self.buf.len() as u64) {
                    return bad(if h.op == FrameOp::ReadReq {
                        "READ"
                    } else {
                        "WRITE"
                    });
                }
                if h.op == FrameOp::WriteImm && self.recvs.is_empty() {
                    return Ok(None);
                }
                Ok(Some(h.offset as usize))
            }
            FrameOp::FetchAdd | FrameOp::CmpSwap => {
                let end = h.offset.checked_add(8);
                if end.is_none_or(|e| e > self.buf.len() as u64) || len != 8 {
                    return bad("atomic");
                }
                if !h.offset.is_multiple_of(8) {
                    return Err(Error::Connection(format!(
                        "data connection {idx}: the peer's atomic at offset {} is not on an 8-byte aligned word",
                        h.offset
                    )));
                }
                Ok(Some(h.offset as usize))
            }
            FrameOp::Ack => Ok(Some(0)),
            FrameOp::ReadResp => match self.reads.front() {
                Some(r) if r.len == len && r.op == CompletionOp::Read => Ok(Some(r.offset)),
                _ => Err(Error::Connection(format!(
                    "data connection {idx}: a READ response of {len} bytes arrived that matches no outstanding READ"
                ))),
            },
            FrameOp::AtomicResp => match self.reads.front() {
                Some(r) if r.op != CompletionOp::Read => Ok(Some(r.offset)),
                _ => Err(Error::Connection(format!(
                    "data connection {idx}: an atomic response arrived that matches no outstanding atomic"
                ))),
            },
        }
    }

    /// Runs an atomic on the 8-byte word at `at` (in host order, as the peer's CPU would) and queues
    /// the response with the original value.
    fn execute_atomic(&mut self, op: FrameOp, at: usize, first: u64, second: u64) {
        let word: &mut [u8] = &mut self.buf[at..at + 8];
        let orig = u64::from_ne_bytes(word[..8].try_into().expect("8 bytes"));
        let new = match op {
            FrameOp::FetchAdd => orig.wrapping_add(first),
            _ if orig == first => second,
            _ => orig,
        };
        word.copy_from_slice(&new.to_ne_bytes());
        self.push_reply(TxFrame::reply(
            Header::bare(FrameOp::AtomicResp, 8, orig),
            0,
        ));
    }

    /// A frame has been fully received: complete receives and reads, queue READ responses.
    fn finish_frame(&mut self, fr: RxFrame, cq: &mut VecDeque<Completion>) -> Result<()> {
        let h = fr.hdr;
        if h.wants_ack() {
            self.acks_owed += 1;
        }
        let qp = self.idx as u32;
        let success = |wr_id, op, byte_len, imm| Completion {
            wr_id,
            qp,
            status: CompletionStatus::Success,
            op,
            byte_len,
            imm,
        };
        let (op, imm) = match h.op {
            FrameOp::Send => (CompletionOp::Recv, None),
            FrameOp::SendImm => (CompletionOp::Recv, Some(h.imm)),
            FrameOp::WriteImm => (CompletionOp::RecvWithImm, Some(h.imm)),
            FrameOp::Write => return Ok(()),
            FrameOp::ReadReq => {
                self.push_reply(TxFrame::reply(
                    Header::bare(FrameOp::ReadResp, h.len, 0),
                    fr.dest,
                ));
                return Ok(());
            }
            // Its acknowledgements were taken with its header.
            FrameOp::Ack => return Ok(()),
            FrameOp::ReadResp | FrameOp::AtomicResp => {
                // Placement matched the oldest outstanding request: a READ for a READ response
                // (whose data has landed), an atomic for an atomic response.
                let r = self
                    .reads
                    .pop_front()
                    .expect("placement matched a pending READ or atomic");
                self.outstanding -= 1;
                let byte_len = if h.op == FrameOp::AtomicResp {
                    // The original travels in the header's offset field; it lands in host order.
                    self.buf[r.offset..r.offset + 8].copy_from_slice(&h.offset.to_ne_bytes());
                    8
                } else {
                    h.len
                };
                if r.signaled {
                    cq.push_back(success(r.wr_id, r.op, byte_len, None));
                }
                return Ok(());
            }
            FrameOp::FetchAdd | FrameOp::CmpSwap => {
                unreachable!("atomic requests are executed in process()")
            }
        };
        let r = self
            .recvs
            .pop_front()
            .expect("placement checked a receive is posted");
        cq.push_back(success(r.wr_id, op, h.len, imm));
        Ok(())
    }
}
