//! The bytes on a data connection: the greeting that opens it and the header in front of every frame.

/// Size of the frame header that precedes every payload on a data connection.
pub(crate) const HEADER_LEN: usize = 24;

/// Where a header carries its acknowledgement count.
const ACKS: std::ops::Range<usize> = 20..24;

/// Bytes of the operand block that follows an atomic request's header: two little-endian u64s
/// (FETCH_AND_ADD: the addend and 0; CMP_AND_SWAP: compare, swap). It is read whole from the staging
/// area, never placed in the buffer.
pub(crate) const OPERANDS_LEN: usize = 16;

/// Header flag: the sender completes this SEND or WRITE only when the peer acknowledges having applied it.
pub(super) const FLAG_ACK_REQ: u8 = 1;

/// First bytes a client writes on each data connection, so a stray connection is recognised.
/// The last two digits number the framing: 02 counts acknowledgements in every header.
const DATA_MAGIC: &[u8; 8] = b"rpdata02";

/// Bytes of the data-connection greeting: magic, queue-pair index, the server QP's PSN as a token.
pub(super) const GREETING_LEN: usize = 16;

/// Frame opcodes on the data connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum FrameOp {
    /// SEND: the payload lands in the oldest posted receive.
    Send = 1,
    /// SEND with immediate.
    SendImm = 2,
    /// WRITE: the payload lands at `offset` in the peer's buffer.
    Write = 3,
    /// WRITE with immediate: as WRITE, and consumes a receive.
    WriteImm = 4,
    /// READ request for `len` bytes at `offset` (header only).
    ReadReq = 5,
    /// READ response: the payload answers the oldest READ request.
    ReadResp = 6,
    /// Acknowledges `offset` frames that asked for it (header only).
    Ack = 7,
    /// Atomic fetch-and-add of the 8-byte word at `offset`; an operand block follows the header.
    FetchAdd = 8,
    /// Atomic compare-and-swap of the 8-byte word at `offset`; an operand block follows the header.
    CmpSwap = 9,
    /// Answers the oldest atomic request: its original value travels in `offset` (header only).
    AtomicResp = 10,
}

impl FrameOp {
    /// The opcode byte's meaning; `None` for a byte that is not one of ours.
    fn from_u8(v: u8) -> Option<FrameOp> {
        Some(match v {
            1 => FrameOp::Send,
            2 => FrameOp::SendImm,
            3 => FrameOp::Write,
            4 => FrameOp::WriteImm,
            5 => FrameOp::ReadReq,
            6 => FrameOp::ReadResp,
            7 => FrameOp::Ack,
            8 => FrameOp::FetchAdd,
            9 => FrameOp::CmpSwap,
            10 => FrameOp::AtomicResp,
            _ => return None,
        })
    }
}

/// A frame header: op, payload length (or requested length for READ), remote offset, immediate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Header {
    /// What the frame does.
    pub op: FrameOp,
    /// [`FLAG_ACK_REQ`] or 0.
    pub flags: u8,
    /// Payload bytes that follow (for a READ request: bytes asked for).
    pub len: u32,
    /// Offset in the receiver's buffer (WRITE, READ).
    pub offset: u64,
    /// Immediate data (SEND/WRITE with immediate).
    pub imm: u32,
    /// Frames of the receiver's that asked for an acknowledgement and that this frame acknowledges:
    /// any frame carries them, so a ping-pong's acknowledgement rides on its reply; an ACK frame
    /// carries nothing else.
    pub acks: u32,
}

impl Header {
    /// A frame with no immediate, flags or acknowledgements (READ response headers).
    pub(super) fn bare(op: FrameOp, len: u32, offset: u64) -> Header {
        Header {
            op,
            flags: 0,
            len,
            offset,
            imm: 0,
            acks: 0,
        }
    }

    /// An ACK frame: acknowledges `acks` frames and carries nothing else.
    pub(super) fn ack(acks: u32) -> Header {
        Header {
            acks,
            ..Header::bare(FrameOp::Ack, 0, 0)
        }
    }

    /// Writes the 24-byte little-endian form: op, flags, 2 reserved, len, offset, imm, acks.
    pub(super) fn emit(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0] = self.op as u8;
        b[1] = self.flags;
        b[4..8].copy_from_slice(&self.len.to_le_bytes());
        b[8..16].copy_from_slice(&self.offset.to_le_bytes());
        b[16..20].copy_from_slice(&self.imm.to_le_bytes());
        b[ACKS].copy_from_slice(&self.acks.to_le_bytes());
        b
    }

    /// Adds `more` acknowledgements to an emitted header that has not left yet; false (and the
    /// header unchanged) when its count would overflow.
    pub(crate) fn add_acks(b: &mut [u8], more: u32) -> bool {
        let have = u32::from_le_bytes(b[ACKS].try_into().expect("4 bytes"));
        match have.checked_add(more) {
            Some(sum) => {
                b[ACKS].copy_from_slice(&sum.to_le_bytes());
                true
            }
            None => false,
        }
    }

    /// Parses a header; `None` when the opcode or reserved bytes are not ours (a corrupt stream).
    pub(super) fn parse(b: &[u8]) -> Option<Header> {
        let op = FrameOp::from_u8(b[0])?;
        if b[1] & !FLAG_ACK_REQ != 0 || b[2..4] != [0, 0] {
            return None;
        }
        Some(Header {
            op,
            flags: b[1],
            len: u32::from_le_bytes(b[4..8].try_into().ok()?),
            offset: u64::from_le_bytes(b[8..16].try_into().ok()?),
            imm: u32::from_le_bytes(b[16..20].try_into().ok()?),
            acks: u32::from_le_bytes(b[ACKS].try_into().ok()?),
        })
    }

    /// Whether a payload follows the header on the wire (an atomic's operand block is not one: see
    /// [`Self::operands_len`]).
    pub(super) fn has_payload(&self) -> bool {
        !matches!(
            self.op,
            FrameOp::ReadReq
                | FrameOp::Ack
                | FrameOp::FetchAdd
                | FrameOp::CmpSwap
                | FrameOp::AtomicResp
        )
    }

    /// Bytes of operands that follow the header: [`OPERANDS_LEN`] for atomic requests, else 0.
    pub(crate) fn operands_len(&self) -> usize {
        match self.op {
            FrameOp::FetchAdd | FrameOp::CmpSwap => OPERANDS_LEN,
            _ => 0,
        }
    }

    /// Whether the sender asked to be told when this frame has been applied.
    pub(crate) fn wants_ack(&self) -> bool {
        self.flags & FLAG_ACK_REQ != 0
    }
}

/// The greeting a client sends first on data connection `qp`, carrying the server QP's `token`.
pub(super) fn greeting(qp: u32, token: u32) -> [u8; GREETING_LEN] {
    let mut pre = [0u8; GREETING_LEN];
    pre[..8].copy_from_slice(DATA_MAGIC);
    pre[8..12].copy_from_slice(&qp.to_le_bytes());
    pre[12..16].copy_from_slice(&token.to_le_bytes());
    pre
}

/// Whether a greeting that [`parse_greeting`] refused comes from a roceperf of another framing.
pub(super) fn other_framing(pre: &[u8; GREETING_LEN]) -> bool {
    pre[..6] == DATA_MAGIC[..6] && pre[..8] != DATA_MAGIC[..]
}

/// The queue-pair index and token of a greeting; `None` when the magic is not ours.
pub(super) fn parse_greeting(pre: &[u8; GREETING_LEN]) -> Option<(usize, u32)> {
    if &pre[..8] != DATA_MAGIC {
        return None;
    }
    let idx = u32::from_le_bytes(pre[8..12].try_into().expect("4 bytes")) as usize;
    let tok = u32::from_le_bytes(pre[12..16].try_into().expect("4 bytes"));
    Some((idx, tok))
}

#[cfg(test)]
mod tests;
