//! One queue pair's byte-stream state machine, without sockets: frames out, bytes in, completions.
//!
//! The I/O layer asks [`QpState::tx_slices`] what to write and reports with [`QpState::sent`] how much
//! the socket took; it asks [`QpState::recv_into`] where to read and reports with
//! [`QpState::received`] how much arrived, then [`QpState::process`] applies whole and partial frames.
//! No system call happens here, so every split of the byte stream can be tested without a socket.

use super::frame::{FLAG_ACK_REQ, FrameOp, HEADER_LEN, Header, OPERANDS_LEN};
use crate::transport::memory::{self, OutOfMemory};
use crate::transport::{CompletionOp, Error, RecvRequest, Result, SendOp, SendRequest};
use std::collections::VecDeque;
use std::io::IoSlice;

/// Most frames gathered into one `writev`.
pub(super) const TX_BATCH: usize = 128;

/// Receive staging area: small frames are read many at a time into it, then copied out.
const STAGE_LEN: usize = 256 * 1024;

/// When a large payload is read straight into the buffer, how much of what follows is read with it.
const STAGE_TAIL: usize = 4096;

/// What retiring a fully written frame does to the send queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OnSent {
    /// A signaled SEND or WRITE: completes as this op when the peer acknowledges it, as on an RC QP.
    AwaitAck(CompletionOp),
    /// An unsignaled SEND or WRITE retires silently, as on a real send queue.
    Retire,
    /// READ requests retire when answered; READ responses and acknowledgements are not requests.
    Nothing,
}

/// Longest head of a frame: a header and an atomic's operand block.
const HEAD_MAX: usize = HEADER_LEN + OPERANDS_LEN;

/// One outgoing frame in the send queue: head (header, and an atomic's operands), payload range in
/// the local buffer, progress.
#[derive(Debug, Clone, Copy)]
struct TxFrame {
    head: [u8; HEAD_MAX],
    head_len: usize,
    offset: usize,
    len: usize,
    /// Bytes of header+payload already written to the socket.
    sent: usize,
    wr_id: u64,
    on_sent: OnSent,
}

impl TxFrame {
    fn total(&self) -> usize {
        self.head_len + self.len
    }

    /// A head of just `hdr`.
    fn head(hdr: &Header) -> [u8; HEAD_MAX] {
        let mut head = [0u8; HEAD_MAX];
        head[..HEADER_LEN].copy_from_slice(&hdr.emit());
        head
    }

    /// A frame this side sends on its own account (READ or atomic response, acknowledgement).
    fn reply(hdr: Header, offset: usize) -> TxFrame {
        TxFrame {
            head: TxFrame::head(&hdr),
            head_len: HEADER_LEN,
            offset,
            len: if hdr.has_payload() {
                hdr.len as usize
            } else {
                0
            },
            sent: 0,
            wr_id: 0,
            on_sent: OnSent::Nothing,
        }
    }
}

/// A READ or atomic whose response has not arrived yet.
#[derive(Debug, Clone, Copy)]
struct PendingRead {
    wr_id: u64,
    offset: usize,
    len: usize,
    signaled: bool,
    /// Read, FetchAdd or CompareSwap: what the response completes.
    op: CompletionOp,
}

/// Where the payload of the frame being received goes.
#[derive(Debug, Clone, Copy)]
struct RxFrame {
    hdr: Header,
    /// Destination offset in the local buffer.
    dest: usize,
    /// Payload bytes already placed.
    done: usize,
}

/// One queue pair's buffer, send queue, receive queue and the two directions' stream positions.
pub(super) struct QpState {
    /// Queue-pair index, for completions and messages.
    idx: usize,
    buf: Box<[u8]>,
    sq_depth: usize,
    rq_depth: usize,
    /// The peer's buffer as it described it: vaddr and length, for bounds checks and offsets.
    peer_vaddr: u64,
    peer_len: u64,
    peer_max_reads: usize,
    tx: VecDeque<TxFrame>,
    /// Requests posted and not yet retired (SEND/WRITE until written, READ until answered).
    outstanding: usize,
    reads: VecDeque<PendingRead>,
    /// Signaled SENDs and WRITEs written to the socket, waiting for the peer's acknowledgement.
    unacked: VecDeque<(u64, CompletionOp, u32)>,
    /// Frames received that asked for an acknowledgement not sent yet.
    acks_owed: u32,
    /// The peer closed its end while nothing was pending; new work is refused.
    peer_closed: bool,
    recvs: VecDeque<RecvRequest>,
    stage: Box<[u8]>,
    stage_start: usize,
    stage_end: usize,
    rx: Option<RxFrame>,
}

impl QpState {
    /// Queue pair `idx` with a zeroed `buf_len`-byte buffer and queues sized for the given depths.
    #[cfg(test)]
    pub(crate) fn new(idx: usize, buf_len: usize, sq_depth: usize, rq_depth: usize) -> QpState {
        Self::with_buffer(
            idx,
            vec![0u8; buf_len].into_boxed_slice(),
            sq_depth,
            rq_depth,
        )
    }

    /// Queue pair `idx` with a zeroed `buf_len`-byte buffer and queues sized for the given depths, or
    /// the error when the host cannot give the buffer.
    pub(crate) fn try_new(
        idx: usize,
        buf_len: usize,
        sq_depth: usize,
        rq_depth: usize,
    ) -> std::result::Result<QpState, OutOfMemory> {
        Ok(Self::with_buffer(
            idx,
            memory::zeroed(buf_len)?,
            sq_depth,
            rq_depth,
        ))
    }

    fn with_buffer(idx: usize, buf: Box<[u8]>, sq_depth: usize, rq_depth: usize) -> QpState {
        QpState {
            idx,
            buf,
            sq_depth,
            rq_depth,
            peer_vaddr: 0,
            peer_len: 0,
            peer_max_reads: 0,
            tx: VecDeque::with_capacity(sq_depth + 16),
            outstanding: 0,
            reads: VecDeque::with_capacity(sq_depth),
            unacked: VecDeque::with_capacity(sq_depth),
            acks_owed: 0,
            peer_closed: false,
            recvs: VecDeque::with_capacity(rq_depth),
            stage: vec![0u8; STAGE_LEN].into_boxed_slice(),
            stage_start: 0,
            stage_end: 0,
            rx: None,
        }
    }

    /// The registered buffer.
    pub(super) fn buf(&self) -> &[u8] {
        &self.buf
    }

    /// The registered buffer, writable.
    pub(crate) fn buf_mut(&mut self) -> &mut [u8] {
        &mut self.buf
    }

    /// Records the peer's buffer (address, length) and how many READs and atomics it answers at once.
    pub(super) fn set_peer(&mut self, vaddr: u64, len: u64, max_reads: usize) {
        self.peer_vaddr = vaddr;
        self.peer_len = len;
        self.peer_max_reads = max_reads;
    }

    /// Whether the peer closed its end while nothing was pending.
    pub(crate) fn peer_closed(&self) -> bool {
        self.peer_closed
    }

    /// Queues a work request as a frame; nothing is written until the I/O layer asks [`Self::tx_slices`].
    pub(super) fn post_send(&mut self, wr: &SendRequest) -> Result<()> {
        let qp = self.idx;
        if self.outstanding >= self.sq_depth {
            return Err(Error::QueueFull);
        }
        let len = wr.len as usize;
        let offset = wr.offset as usize;
        if offset.checked_add(len).is_none_or(|e| e > self.buf.len()) {
            return Err(Error::InvalidRequest(format!(
                "local range {offset}+{len} is outside queue pair {qp}'s {}-byte buffer",
                self.buf.len()
            )));
        }
        let atomic = matches!(wr.op, SendOp::FetchAdd(_) | SendOp::CompareSwap { .. });
        if atomic && len != 8 {
            return Err(Error::InvalidRequest(format!(
                "atomic work request {} has length {len}; atomics move exactly 8 bytes",
                wr.wr_id
            )));
        }
        let remote_offset = match wr.op {
            SendOp::Send | SendOp::SendWithImm(_) => 0,
            SendOp::Write
            | SendOp::WriteWithImm(_)
            | SendOp::Read
            | SendOp::FetchAdd(_)
            | SendOp::CompareSwap { .. } => {
                let r = wr.remote.ok_or_else(|| {
                    Error::InvalidRequest("WRITE and READ need a remote address".into())
                })?;
                let off = r.addr.wrapping_sub(self.peer_vaddr);
                if r.addr < self.peer_vaddr || off + len as u64 > self.peer_len {
                    return Err(Error::InvalidRequest(format!(
                        "remote range {:#x}+{len} is outside the peer's {}-byte buffer at {:#x}",
                        r.addr, self.peer_len, self.peer_vaddr
                    )));
                }
                if atomic && !off.is_multiple_of(8) {
                    return Err(Error::InvalidRequest(format!(
                        "atomic at remote address {:#x}: atomics need an 8-byte aligned word",
                        r.addr
                    )));
                }
                off
            }
        };
        let (op, imm, complete_as, operands) = match wr.op {
            SendOp::Send => (FrameOp::Send, 0, CompletionOp::Send, [0, 0]),
            SendOp::SendWithImm(i) => (FrameOp::SendImm, i, CompletionOp::Send, [0, 0]),
            SendOp::Write => (FrameOp::Write, 0, CompletionOp::Write, [0, 0]),
            SendOp::WriteWithImm(i) => (FrameOp::WriteImm, i, CompletionOp::Write, [0, 0]),
            SendOp::Read => (FrameOp::ReadReq, 0, CompletionOp::Read, [0, 0]),
            SendOp::FetchAdd(add) => (FrameOp::FetchAdd, 0, CompletionOp::FetchAdd, [add, 0]),
            SendOp::CompareSwap { compare, swap } => (
                FrameOp::CmpSwap,
                0,
                CompletionOp::CompareSwap,
                [compare, swap],
            ),
        };
        // READs and atomics complete on their response, which is their acknowledgement.
        let answered = matches!(op, FrameOp::ReadReq | FrameOp::FetchAdd | FrameOp::CmpSwap);
        let ack = wr.signaled && !answered;
        let hdr = Header {
            op,
            flags: if ack { FLAG_ACK_REQ } else { 0 },
            len: wr.len,
            offset: remote_offset,
            imm,
            acks: 0,
        };
        let mut head = TxFrame::head(&hdr);
        let head_len = HEADER_LEN + hdr.operands_len();
        head[HEADER_LEN..HEADER_LEN + 8].copy_from_slice(&operands[0].to_le_bytes());
        head[HEADER_LEN + 8..].copy_from_slice(&operands[1].to_le_bytes());
        if answered {
            if self.reads.len() >= self.peer_max_reads.max(1) {
                return Err(Error::QueueFull);
            }
            self.reads.push_back(PendingRead {
                wr_id: wr.wr_id,
                offset,
                len,
                signaled: wr.signaled,
                op: complete_as,
            });
            self.tx.push_back(TxFrame {
                head,
                head_len,
                offset: 0,
                len: 0,
                sent: 0,
                wr_id: wr.wr_id,
                on_sent: OnSent::Nothing,
            });
        } else {
            self.tx.push_back(TxFrame {
                head,
                head_len,
                offset,
                len,
                sent: 0,
                wr_id: wr.wr_id,
                on_sent: if wr.signaled {
                    OnSent::AwaitAck(complete_as)
                } else {
                    OnSent::Retire
                },
            });
        }
        self.outstanding += 1;
        Ok(())
    }

    /// Posts a receive for the next incoming SEND or WRITE with immediate.
    pub(super) fn post_recv(&mut self, wr: &RecvRequest) -> Result<()> {
        if wr
            .offset
            .checked_add(wr.len as u64)
            .is_none_or(|e| e > self.buf.len() as u64)
        {
            return Err(Error::InvalidRequest(format!(
                "receive range {}+{} is outside queue pair {}'s {}-byte buffer",
                wr.offset,
                wr.len,
                self.idx,
                self.buf.len()
            )));
        }
        if self.recvs.len() >= self.rq_depth {
            return Err(Error::QueueFull);
        }
        self.recvs.push_back(*wr);
        Ok(())
    }

    /// Acknowledges every frame received that asked for it since the last call: in the header of
    /// the last frame queued when it has not started to leave (a ping-pong's reply carries the
    /// acknowledgement of the request it answers, as one 26-byte message), else in an ACK frame
    /// behind whatever the caller posted since, in the same write.
    pub(crate) fn queue_acks(&mut self) {
        if self.acks_owed == 0 {
            return;
        }
        let owed = self.acks_owed;
        self.acks_owed = 0;
        if let Some(last) = self.tx.back_mut()
            && last.sent == 0
            && Header::add_acks(&mut last.head[..HEADER_LEN], owed)
        {
            return;
        }
        self.push_reply(TxFrame::reply(Header::ack(owed), 0));
    }

    /// Queues a frame this side owes the peer; growing the queue once, rarely, is cheaper than failing.
    fn push_reply(&mut self, f: TxFrame) {
        if self.tx.len() >= self.tx.capacity() {
            self.tx.reserve(self.tx.capacity());
        }
        self.tx.push_back(f);
    }

    /// Work requests posted and not yet completed.
    pub(super) fn outstanding(&self) -> usize {
        self.outstanding
    }

    /// Whether frames wait to be written.
    pub(crate) fn has_tx(&self) -> bool {
        !self.tx.is_empty()
    }

    /// Frames waiting to be written.
    pub(crate) fn tx_frames(&self) -> usize {
        self.tx.len()
    }

    /// Fills `iov` with the unwritten bytes of the first `iov.len() / 2` frames (header and payload
    /// slices, in stream order); returns how many slices it filled.
    pub(crate) fn tx_slices<'a>(&'a self, iov: &mut [IoSlice<'a>]) -> usize {
        let mut n = 0;
        for f in self.tx.iter().take(iov.len() / 2) {
            if f.sent < f.head_len {
                iov[n] = IoSlice::new(&f.head[f.sent..f.head_len]);
                n += 1;
            }
            let done = f.sent.saturating_sub(f.head_len);
            if f.len > done {
                iov[n] = IoSlice::new(&self.buf[f.offset + done..f.offset + f.len]);
                n += 1;
            }
        }
        n
    }

    /// The socket took `n` bytes of what [`Self::tx_slices`] offered: retire the frames they finish.
    pub(super) fn sent(&mut self, mut n: usize) {
        while n > 0 {
            let f = self
                .tx
                .front_mut()
                .expect("bytes written belong to queued frames");
            let take = n.min(f.total() - f.sent);
            f.sent += take;
            n -= take;
            if f.sent == f.total() {
                let f = self.tx.pop_front().expect("front exists");
                match f.on_sent {
                    OnSent::AwaitAck(op) => self.unacked.push_back((f.wr_id, op, f.len as u32)),
                    OnSent::Retire => self.outstanding -= 1,
                    OnSent::Nothing => {}
                }
            }
        }
    }
}

/// The error for work on (or waiting on) a data connection the peer closed.
pub(super) fn closed(qp: usize) -> Error {
    Error::Connection(format!(
        "the peer closed data connection {qp}; it stopped or failed, see its output"
    ))
}

mod rx;
pub(super) use rx::{RecvInto, Stop};

#[cfg(test)]
mod tests;
