//! Building RC packets with `crate::wire` and classifying received opcodes, selective repeat's
//! extension of request packets among them.
//!
//! Selective repeat (only between two sides that negotiated it; docs/lossy-roce.md): SEND packets
//! carry 8 bytes before their data (the receive they fill, counted from 0, and their offset in it),
//! WRITE MIDDLE/LAST a RETH of their own (this packet's address, the R_Key, the message length), and
//! the SACK NAK a bitmap after its AETH. `SrExt` reads and writes the first two: the requester's
//! packets (`wqe.rs`) carry it, the responder (`responder/reorder.rs`) reads it.

use crate::transport::soft::bytes::{copy_payload, zero};
use crate::wire::{
    AethPacket, AethRepr, AtomicAckEthRepr, AtomicEthPacket, BthPacket, BthRepr, IbRepr, Opcode,
    RethPacket, RethRepr,
};

use super::psn::Psn;

/// P_Key every RC packet carries (rxe: IB_DEFAULT_PKEY_FULL).
pub(crate) const PKEY: u16 = 0xffff;

/// Longest header stack the engine emits or accepts: BTH + AtomicETH (40 bytes).
pub(crate) const MAX_HEADER_LEN: usize = BthPacket::<&[u8]>::LEN + AtomicEthPacket::<&[u8]>::LEN;

/// Position of a packet within its message.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Seg {
    /// First of several.
    First,
    /// Neither first nor last.
    Middle,
    /// Last of several.
    Last,
    /// The whole message.
    Only,
}

impl Seg {
    /// Position of packet `index` in a message of `npkts` packets.
    pub(crate) fn of(index: u32, npkts: u32) -> Seg {
        match (index == 0, index + 1 >= npkts) {
            (true, true) => Seg::Only,
            (true, false) => Seg::First,
            (false, false) => Seg::Middle,
            (false, true) => Seg::Last,
        }
    }

    /// True for Last and Only: the packet ends the message.
    pub(crate) fn ends(self) -> bool {
        matches!(self, Seg::Last | Seg::Only)
    }

    /// True for First and Only: the packet starts the message.
    pub(crate) fn starts(self) -> bool {
        matches!(self, Seg::First | Seg::Only)
    }
}

/// Packets a message of `len` bytes needs at `pmtu` (a zero-length message still needs one).
/// Inline, and one packet without a division for a message within the MTU (a latency test's).
#[inline]
pub(crate) fn packets_for(len: u64, pmtu: u32) -> u32 {
    if len <= u64::from(pmtu) {
        return 1;
    }
    len.div_ceil(u64::from(pmtu)) as u32
}

/// Payload bytes of packet `index` of a `len`-byte message.
pub(crate) fn payload_len(len: u64, pmtu: u32, index: u32) -> usize {
    let start = u64::from(index) * u64::from(pmtu);
    len.saturating_sub(start).min(u64::from(pmtu)) as usize
}

/// The SEND opcode for a segment, with or without immediate.
#[inline]
pub(crate) fn send_opcode(seg: Seg, imm: bool) -> Opcode {
    match (seg, imm) {
        (Seg::First, _) => Opcode::RC_SEND_FIRST,
        (Seg::Middle, _) => Opcode::RC_SEND_MIDDLE,
        (Seg::Last, false) => Opcode::RC_SEND_LAST,
        (Seg::Last, true) => Opcode::RC_SEND_LAST_WITH_IMMEDIATE,
        (Seg::Only, false) => Opcode::RC_SEND_ONLY,
        (Seg::Only, true) => Opcode::RC_SEND_ONLY_WITH_IMMEDIATE,
    }
}

/// The RDMA WRITE opcode for a segment, with or without immediate.
#[inline]
pub(crate) fn write_opcode(seg: Seg, imm: bool) -> Opcode {
    match (seg, imm) {
        (Seg::First, _) => Opcode::RC_RDMA_WRITE_FIRST,
        (Seg::Middle, _) => Opcode::RC_RDMA_WRITE_MIDDLE,
        (Seg::Last, false) => Opcode::RC_RDMA_WRITE_LAST,
        (Seg::Last, true) => Opcode::RC_RDMA_WRITE_LAST_WITH_IMMEDIATE,
        (Seg::Only, false) => Opcode::RC_RDMA_WRITE_ONLY,
        (Seg::Only, true) => Opcode::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
    }
}

/// The READ response opcode for a segment.
pub(crate) fn read_response_opcode(seg: Seg) -> Opcode {
    match seg {
        Seg::First => Opcode::RC_RDMA_READ_RESPONSE_FIRST,
        Seg::Middle => Opcode::RC_RDMA_READ_RESPONSE_MIDDLE,
        Seg::Last => Opcode::RC_RDMA_READ_RESPONSE_LAST,
        Seg::Only => Opcode::RC_RDMA_READ_RESPONSE_ONLY,
    }
}

/// What a request packet asks of a responder.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Request {
    /// A SEND packet.
    Send(Seg),
    /// An RDMA WRITE packet.
    Write(Seg),
    /// An RDMA READ request.
    Read,
    /// An atomic compare-and-swap.
    CompareSwap,
    /// An atomic fetch-and-add.
    FetchAdd,
    /// A valid RC request this engine does not implement (SEND with invalidate, FLUSH, ATOMIC_WRITE).
    Unsupported,
}

/// What a response packet tells a requester.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Response {
    /// ACK or NAK.
    Acknowledge,
    /// ATOMIC ACKNOWLEDGE.
    AtomicAcknowledge,
    /// A READ response packet.
    Read(Seg),
}

/// What the requester reads of a response's headers: the PSN, the AETH and the AtomicAckETH (the
/// queue pair's fast path takes them straight from the bytes of an ACK or a READ response, without
/// a whole [`IbRepr`]).
#[derive(Clone, Copy, Debug)]
pub(super) struct Answer {
    /// The BTH's PSN.
    pub(super) psn: u32,
    /// The ACK header, if any.
    pub(super) aeth: Option<AethRepr>,
    /// The atomic reply header, if any.
    pub(super) atomic_ack_eth: Option<AtomicAckEthRepr>,
}

impl Answer {
    /// The headers of a parsed response.
    pub(super) fn of(repr: &IbRepr) -> Answer {
        Answer {
            psn: repr.bth.psn,
            aeth: repr.aeth,
            atomic_ack_eth: repr.atomic_ack_eth,
        }
    }
}

/// The payload of a packet a fast path may take, its headers ending at `start`: `None` unless the
/// BTH passes every check the general path counts a drop for (the pad within the packet, transport
/// version 0, the default P_Key, our QPN `qpn`), so that path gets the packet untouched.
#[inline(always)]
pub(super) fn fast_payload<'a, T: AsRef<[u8]>>(
    ib: &'a [u8],
    bth: &BthPacket<T>,
    start: usize,
    qpn: u32,
) -> Option<&'a [u8]> {
    let pad = usize::from(bth.pad_count());
    if ib.len() < start + pad
        || bth.tver() != 0
        || bth.pkey() & 0x7fff != 0x7fff
        || bth.dest_qp() != qpn
    {
        return None;
    }
    Some(&ib[start..ib.len() - pad])
}

/// A received RC opcode, sorted by who handles it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Kind {
    /// Handled by the responder.
    Request(Request),
    /// Handled by the completer.
    Response(Response),
}

/// Classifies an opcode; `None` for anything that is not an RC opcode of the IB spec.
pub(crate) fn classify(op: Opcode) -> Option<Kind> {
    use Kind::{Request as Q, Response as R};
    Some(match op {
        Opcode::RC_SEND_FIRST => Q(Request::Send(Seg::First)),
        Opcode::RC_SEND_MIDDLE => Q(Request::Send(Seg::Middle)),
        Opcode::RC_SEND_LAST | Opcode::RC_SEND_LAST_WITH_IMMEDIATE => Q(Request::Send(Seg::Last)),
        Opcode::RC_SEND_ONLY | Opcode::RC_SEND_ONLY_WITH_IMMEDIATE => Q(Request::Send(Seg::Only)),
        Opcode::RC_RDMA_WRITE_FIRST => Q(Request::Write(Seg::First)),
        Opcode::RC_RDMA_WRITE_MIDDLE => Q(Request::Write(Seg::Middle)),
        Opcode::RC_RDMA_WRITE_LAST | Opcode::RC_RDMA_WRITE_LAST_WITH_IMMEDIATE => {
            Q(Request::Write(Seg::Last))
        }
        Opcode::RC_RDMA_WRITE_ONLY | Opcode::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE => {
            Q(Request::Write(Seg::Only))
        }
        Opcode::RC_RDMA_READ_REQUEST => Q(Request::Read),
        Opcode::RC_COMPARE_SWAP => Q(Request::CompareSwap),
        Opcode::RC_FETCH_ADD => Q(Request::FetchAdd),
        Opcode::RC_SEND_LAST_WITH_INVALIDATE | Opcode::RC_SEND_ONLY_WITH_INVALIDATE => {
            Q(Request::Unsupported)
        }
        Opcode(0x1c) | Opcode(0x1d) => Q(Request::Unsupported),
        Opcode::RC_RDMA_READ_RESPONSE_FIRST => R(Response::Read(Seg::First)),
        Opcode::RC_RDMA_READ_RESPONSE_MIDDLE => R(Response::Read(Seg::Middle)),
        Opcode::RC_RDMA_READ_RESPONSE_LAST => R(Response::Read(Seg::Last)),
        Opcode::RC_RDMA_READ_RESPONSE_ONLY => R(Response::Read(Seg::Only)),
        Opcode::RC_ACKNOWLEDGE => R(Response::Acknowledge),
        Opcode::RC_ATOMIC_ACKNOWLEDGE => R(Response::AtomicAcknowledge),
        _ => return None,
    })
}

/// Bytes a SEND packet carries before its data under selective repeat.
pub(crate) const SEND_EXT_LEN: usize = 8;
/// Bytes a WRITE MIDDLE/LAST packet carries before its data under selective repeat.
pub(crate) const WRITE_EXT_LEN: usize = 16;
/// PSNs after the first missing one that a SACK NAK reports at most (512 bytes of bitmap; no more
/// than the path MTU's worth of bytes).
pub(crate) const SACK_MAX_PSNS: u32 = 4096;

/// Selective repeat's extension before the data of a request packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SrExt {
    /// A SEND packet: the receive it fills (counted from 0 over the receive-consuming messages) and
    /// the offset of its data in the message.
    Send {
        /// Which receive.
        recv_seq: u32,
        /// Byte offset in the message.
        offset: u32,
    },
    /// A WRITE MIDDLE or LAST packet: the address of its own data, the R_Key, the message length.
    Write(RethRepr),
}

impl SrExt {
    /// Bytes on the wire.
    pub(crate) fn len(&self) -> usize {
        match self {
            SrExt::Send { .. } => SEND_EXT_LEN,
            SrExt::Write(_) => WRITE_EXT_LEN,
        }
    }

    /// Writes it at the start of `buf`.
    pub(crate) fn emit(&self, buf: &mut [u8]) {
        match self {
            SrExt::Send { recv_seq, offset } => {
                buf[..4].copy_from_slice(&recv_seq.to_be_bytes());
                buf[4..8].copy_from_slice(&offset.to_be_bytes());
            }
            SrExt::Write(reth) => reth.emit(buf),
        }
    }

    /// Splits the extension a request packet of kind `req` carries off its payload; `None` when the
    /// payload is too short to hold it. Packets without one give `(None, payload)`.
    pub(crate) fn split(req: Request, payload: &[u8]) -> Option<(Option<SrExt>, &[u8])> {
        match req {
            Request::Send(_) => {
                let (ext, data) = payload.split_at_checked(SEND_EXT_LEN)?;
                let word =
                    |i: usize| u32::from_be_bytes([ext[i], ext[i + 1], ext[i + 2], ext[i + 3]]);
                Some((
                    Some(SrExt::Send {
                        recv_seq: word(0),
                        offset: word(4),
                    }),
                    data,
                ))
            }
            Request::Write(seg) if !seg.starts() => {
                let (ext, data) = payload.split_at_checked(WRITE_EXT_LEN)?;
                let reth = RethRepr::parse(&RethPacket::new_unchecked(ext));
                Some((Some(SrExt::Write(reth)), data))
            }
            _ => Some((None, payload)),
        }
    }
}

/// A header stack with only a BTH filled in; the caller adds extension headers.
pub(crate) fn repr(
    opcode: Opcode,
    dest_qp: u32,
    psn: Psn,
    ack_req: bool,
    payload_len: usize,
) -> IbRepr {
    IbRepr::new(BthRepr {
        pad_count: crate::wire::pad_len(payload_len) as u8,
        pkey: PKEY,
        ack_req,
        ..BthRepr::new(opcode, dest_qp, psn.value())
    })
}

/// An ACKNOWLEDGE (ACK, NAK or RNR NAK) header stack.
pub(crate) fn acknowledge(dest_qp: u32, psn: Psn, aeth: AethRepr) -> IbRepr {
    let mut r = repr(Opcode::RC_ACKNOWLEDGE, dest_qp, psn, false, 0);
    r.aeth = Some(aeth);
    r
}

/// Writes headers, payload and zero pad into `buf`; returns the packet length.
pub(crate) fn emit(buf: &mut [u8], repr: &IbRepr, payload: &[u8]) -> usize {
    let hl = repr.header_len();
    let (total, _) = place_payload(buf, hl, payload);
    repr.emit(&mut buf[..hl]);
    total
}

/// Writes `payload` after `hl` bytes of headers and its zero pad, once `buf` is checked to hold
/// the whole packet; returns the packet length and the pad (the BTH's PadCnt). The headers are
/// the caller's to write.
#[inline(always)]
fn place_payload(buf: &mut [u8], hl: usize, payload: &[u8]) -> (usize, usize) {
    let pad = crate::wire::pad_len(payload.len());
    let total = hl + payload.len() + pad;
    assert!(
        buf.len() >= total,
        "transmit buffer of {} bytes is shorter than the {total}-byte packet",
        buf.len()
    );
    // The pad (at most three bytes) ends the packet's last word, and headers fill whole words:
    // that word zeroed first, the payload and the headers written over the rest of it, the pad
    // costs one store and no branch on its length.
    buf[total - 4..total].fill(0);
    copy_payload(&mut buf[hl..hl + payload.len()], payload);
    (total, pad)
}

/// Writes a SEND or RDMA WRITE packet without selective repeat's extension, or an RDMA READ
/// request, straight from its fields: the bytes [`emit`] writes for [`repr`] with `reth` and `imm`
/// added where `opcode` prescribes them, without building the header stack (every message of a
/// latency test comes here); returns the packet length. `reth` is asked for only where the RETH is
/// written, after the payload: read before, its fields were kept on the stack across the copy
/// (10 instructions a WRITE). Always inlined: left to the compiler, whether `Wqe::emit_only`
/// takes it in flips with unrelated changes, by about 80 instructions a round trip.
#[inline(always)]
pub(crate) fn emit_data(
    buf: &mut [u8],
    bth: (Opcode, u32, Psn, bool),
    reth: impl FnOnce() -> Option<RethRepr>,
    imm: Option<u32>,
    payload: &[u8],
) -> usize {
    let opcode = bth.0;
    const RETH: usize = RethPacket::<&[u8]>::LEN;
    let hl =
        BTH + if opcode.has_reth() { RETH } else { 0 } + if opcode.has_immdt() { 4 } else { 0 };
    let total = emit_around(buf, bth, hl, payload);
    let mut at = BTH;
    if opcode.has_reth() {
        reth().unwrap_or_default().emit(&mut buf[at..]);
        at += RETH;
    }
    if opcode.has_immdt() {
        buf[at..at + 4].copy_from_slice(&imm.unwrap_or(0).to_be_bytes());
    }
    total
}

/// Writes a packet whose one header is its BTH (a SEND or RDMA WRITE MIDDLE) straight from its
/// fields: what [`emit_data`] writes for an opcode without RETH or immediate, with no look at the
/// opcode's headers; returns the packet length.
#[inline(always)]
pub(crate) fn emit_bth_only(
    buf: &mut [u8],
    bth: (Opcode, u32, Psn, bool),
    payload: &[u8],
) -> usize {
    emit_around(buf, bth, BTH, payload)
}

/// Writes an ACKNOWLEDGE or an RDMA READ response straight from its fields: the bytes [`emit`]
/// writes for [`repr`] with `aeth` added where `opcode` prescribes one (a READ response's middle has
/// none), without the header stack's per-header dispatch (every answer of a latency test comes
/// here); returns the packet length. Always inlined: its callers' opcodes are then known where
/// the AETH is decided (with three callers it was left out of line).
#[inline(always)]
pub(crate) fn emit_response(
    buf: &mut [u8],
    bth: (Opcode, u32, Psn),
    aeth: Option<AethRepr>,
    payload: &[u8],
) -> usize {
    let (opcode, dest_qp, psn) = bth;
    const AETH: usize = AethPacket::<&[u8]>::LEN;
    let hl = BTH + if opcode.has_aeth() { AETH } else { 0 };
    let total = emit_around(buf, (opcode, dest_qp, psn, false), hl, payload);
    if opcode.has_aeth() {
        let a = aeth.unwrap_or(AethRepr {
            syndrome: 0,
            msn: 0,
        });
        a.emit(&mut buf[BTH..]);
    }
    total
}

/// Bytes of a BTH.
const BTH: usize = BthPacket::<&[u8]>::LEN;

/// What every packet written straight from its fields shares: the BTH with the pad the payload
/// needs, the payload after `hl` bytes of headers, and the zero pad. The headers between the BTH
/// and `hl` are the caller's to write. Returns the packet length.
#[inline(always)]
fn emit_around(buf: &mut [u8], bth: (Opcode, u32, Psn, bool), hl: usize, payload: &[u8]) -> usize {
    let (opcode, dest_qp, psn, ack_req) = bth;
    let (total, pad) = place_payload(buf, hl, payload);
    // The BTH as three big-endian words (opcode, pad and P_Key; DestQP, FECN and BECN clear;
    // AckReq and PSN): the bytes `BthRepr::emit` writes field by field for these values, in three
    // stores.
    let words = [
        u32::from(opcode.0) << 24 | (pad as u32) << 20 | u32::from(PKEY),
        dest_qp & 0x00ff_ffff,
        u32::from(ack_req) << 31 | psn.value() & 0x00ff_ffff,
    ];
    for (i, w) in words.iter().enumerate() {
        buf[4 * i..4 * i + 4].copy_from_slice(&w.to_be_bytes());
    }
    total
}

/// Writes headers, selective repeat's extension, payload and zero pad into `buf` (the pad counts
/// extension and payload together, as `repr`'s pad count does); returns the packet length.
pub(crate) fn emit_with_ext(buf: &mut [u8], repr: &IbRepr, ext: &SrExt, payload: &[u8]) -> usize {
    let hl = repr.header_len();
    let el = ext.len();
    let pad = crate::wire::pad_len(el + payload.len());
    let total = hl + el + payload.len() + pad;
    assert!(
        buf.len() >= total,
        "transmit buffer of {} bytes is shorter than the {total}-byte packet",
        buf.len()
    );
    repr.emit(&mut buf[..hl]);
    ext.emit(&mut buf[hl..hl + el]);
    copy_payload(&mut buf[hl + el..hl + el + payload.len()], payload);
    zero(&mut buf[hl + el + payload.len()..total]);
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_cover_boundaries() {
        assert_eq!(packets_for(0, 256), 1);
        assert_eq!(packets_for(1, 256), 1);
        assert_eq!(packets_for(256, 256), 1);
        assert_eq!(packets_for(257, 256), 2);
        assert_eq!(packets_for(8 << 20, 4096), 2048);
        assert_eq!(Seg::of(0, 1), Seg::Only);
        assert_eq!(Seg::of(0, 2), Seg::First);
        assert_eq!(Seg::of(1, 3), Seg::Middle);
        assert_eq!(Seg::of(2, 3), Seg::Last);
        assert_eq!(payload_len(257, 256, 0), 256);
        assert_eq!(payload_len(257, 256, 1), 1);
        assert_eq!(payload_len(0, 256, 0), 0);
    }

    #[test]
    fn every_rc_opcode_is_classified() {
        for v in 0u8..=0x14 {
            assert!(classify(Opcode(v)).is_some(), "opcode {v:#x}");
        }
        assert_eq!(classify(Opcode(0x15)), None);
        assert_eq!(classify(Opcode(0x24)), None, "UC SEND_ONLY is not RC");
        assert_eq!(classify(Opcode(0x81)), None, "CNP");
    }

    #[test]
    fn data_packets_written_from_their_fields_match_the_header_stack() {
        let reth = RethRepr {
            va: 0x1122_3344_5566_7788,
            rkey: 0x99aa_bbcc,
            dma_len: 4097,
        };
        for opcode in (0u8..=0x0b).map(Opcode) {
            for payload in [&b""[..], b"a", b"ab", b"abc", b"abcd", &[7u8; 300][..]] {
                for ack_req in [false, true] {
                    let psn = Psn::new(0x00ab_cdef);
                    let mut r = repr(opcode, 0x12_3456, psn, ack_req, payload.len());
                    let imm = opcode.has_immdt().then_some(0xdead_beef);
                    r.reth = opcode.has_reth().then_some(reth);
                    r.imm = imm;
                    let (mut a, mut b) = ([0xeeu8; 400], [0x55u8; 400]);
                    let n = emit(&mut a, &r, payload);
                    let m = emit_data(
                        &mut b,
                        (opcode, 0x12_3456, psn, ack_req),
                        || Some(reth),
                        imm,
                        payload,
                    );
                    assert_eq!(a[..n], b[..m], "{opcode} with {} bytes", payload.len());
                }
            }
        }
    }

    #[test]
    fn extensions_round_trip_and_short_payloads_are_refused() {
        let mut buf = [0u8; 16];
        let send = SrExt::Send {
            recv_seq: 0x0102_0304,
            offset: 8192,
        };
        send.emit(&mut buf);
        let mut pkt = buf[..8].to_vec();
        pkt.extend_from_slice(b"data");
        let (ext, data) = SrExt::split(Request::Send(Seg::Middle), &pkt).unwrap();
        assert_eq!((ext, data), (Some(send), &b"data"[..]));
        let write = SrExt::Write(RethRepr {
            va: 0x1234_5678_9abc,
            rkey: 7,
            dma_len: 65536,
        });
        write.emit(&mut buf);
        let (ext, data) = SrExt::split(Request::Write(Seg::Last), &buf).unwrap();
        assert_eq!((ext, data.len()), (Some(write), 0));
        // WRITE FIRST/ONLY have their RETH in the header already; READs carry nothing.
        assert_eq!(
            SrExt::split(Request::Write(Seg::First), b"abcd"),
            Some((None, &b"abcd"[..]))
        );
        assert_eq!(SrExt::split(Request::Read, b""), Some((None, &b""[..])));
        assert_eq!(SrExt::split(Request::Send(Seg::Only), &[0; 7]), None);
        assert_eq!(SrExt::split(Request::Write(Seg::Middle), &[0; 15]), None);
    }
}
