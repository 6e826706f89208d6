//! The IB transport header stack of one packet: the BTH and the extension headers its opcode prescribes.
//!
//! Parsed from and emitted to the bytes between the end of the network header and the ICRC.

use super::field::{get_u32, need, set_u32};
use super::{
    AethPacket, AethRepr, AtomicAckEthPacket, AtomicAckEthRepr, AtomicEthPacket, AtomicEthRepr,
    BthPacket, BthRepr, DethPacket, DethRepr, Error, Opcode, Result, RethPacket, RethRepr,
};

/// Bytes from the start of the BTH to the start of the payload for each opcode, 0 for one this crate
/// does not know: the header set the opcode prescribes, summed once, so a packet's question is one load.
static STACK_LEN: [u8; 256] = {
    use super::opcode::hdr::*;
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        if let Some(f) = super::opcode::header_set(i as u8) {
            let mut len = BthPacket::<&[u8]>::LEN;
            if f & DETH != 0 {
                len += DethPacket::<&[u8]>::LEN;
            }
            if f & RETH != 0 {
                len += RethPacket::<&[u8]>::LEN;
            }
            if f & ATOMIC != 0 {
                len += AtomicEthPacket::<&[u8]>::LEN;
            }
            if f & AETH != 0 {
                len += AethPacket::<&[u8]>::LEN;
            }
            if f & ATOMIC_ACK != 0 {
                len += AtomicAckEthPacket::<&[u8]>::LEN;
            }
            if f & IMM != 0 {
                len += IMMDT_LEN;
            }
            if f & IETH != 0 {
                len += IETH_LEN;
            }
            if f & CNP_RESV != 0 {
                len += CNP_RESERVED_LEN;
            }
            t[i] = len as u8;
        }
        i += 1;
    }
    t
};

/// Bytes from the start of the BTH to the start of the payload that `op` prescribes (BTH and
/// extension headers); None if the opcode is unknown.
#[inline]
pub(crate) fn stack_len(op: Opcode) -> Option<usize> {
    match STACK_LEN[usize::from(op.0)] {
        0 => None,
        n => Some(usize::from(n)),
    }
}

/// Length of the reserved block that follows a CNP's BTH.
pub(crate) const CNP_RESERVED_LEN: usize = 16;

/// Byte layout of the two one-field extension headers, ImmDt and IETH.
mod field {
    use crate::wire::field::Field;

    /// ImmDt: the immediate value.
    pub(crate) const IMM_DATA: Field = 0..4;
    /// IETH: the R_Key to invalidate.
    pub(crate) const IETH_RKEY: Field = 0..4;
}

/// Length of the ImmDt header.
const IMMDT_LEN: usize = field::IMM_DATA.end;
/// Length of the IETH header.
const IETH_LEN: usize = field::IETH_RKEY.end;

/// Pad bytes after a payload of `payload_len` bytes: `(-len) & 3`.
#[inline]
pub const fn pad_len(payload_len: usize) -> usize {
    payload_len.wrapping_neg() & 3
}

/// The whole IB transport header stack of one packet, as the opcode prescribes.
///
/// Headers appear on the wire in this order: BTH, DETH, RETH, AtomicETH, AETH, AtomicAckETH, ImmDt,
/// IETH (and for a CNP, 16 reserved zero bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IbRepr {
    /// Base transport header.
    pub bth: BthRepr,
    /// RDMA extended header (WRITE FIRST/ONLY, READ request).
    pub reth: Option<RethRepr>,
    /// Atomic request header.
    pub atomic_eth: Option<AtomicEthRepr>,
    /// ACK header (ACK/NAK, READ response FIRST/LAST/ONLY, atomic ACK).
    pub aeth: Option<AethRepr>,
    /// Atomic reply header.
    pub atomic_ack_eth: Option<AtomicAckEthRepr>,
    /// Immediate data, as the 32-bit big-endian value on the wire.
    pub imm: Option<u32>,
    /// R_Key to invalidate.
    pub ieth: Option<u32>,
    /// Datagram header (UD).
    pub deth: Option<DethRepr>,
}

impl IbRepr {
    /// A repr with only a BTH; set the extension headers the opcode needs before emitting.
    #[inline]
    pub fn new(bth: BthRepr) -> Self {
        IbRepr {
            bth,
            reth: None,
            atomic_eth: None,
            aeth: None,
            atomic_ack_eth: None,
            imm: None,
            ieth: None,
            deth: None,
        }
    }

    /// Parses `ib`, the bytes from the BTH to the end of the pad (ICRC not included). Returns the repr
    /// and the payload with the pad removed. For an unknown opcode only the BTH is parsed and every
    /// byte after it is returned as the payload (the pad cannot be located without the header stack).
    /// Truncated or inconsistent input (PadCnt larger than what follows the headers) is an error.
    // Always inlined: returned from a call, the repr (over 150 bytes) is copied with a memcpy call.
    #[inline(always)]
    pub fn parse(ib: &[u8]) -> Result<(IbRepr, &[u8])> {
        let bth = BthRepr::parse(&BthPacket::new_checked(ib)?);
        let mut repr = IbRepr::new(bth);
        let op = bth.opcode;
        let Some(hdr_len) = stack_len(op) else {
            return Ok((repr, &ib[BthPacket::<&[u8]>::LEN..]));
        };
        need("IB extension headers", hdr_len, ib.len())?;
        let mut at = BthPacket::<&[u8]>::LEN;
        if op.has_deth() {
            repr.deth = Some(DethRepr::parse(&DethPacket::new_unchecked(&ib[at..])));
            at += DethPacket::<&[u8]>::LEN;
        }
        if op.has_reth() {
            repr.reth = Some(RethRepr::parse(&RethPacket::new_unchecked(&ib[at..])));
            at += RethPacket::<&[u8]>::LEN;
        }
        if op.has_atomic_eth() {
            repr.atomic_eth = Some(AtomicEthRepr::parse(&AtomicEthPacket::new_unchecked(
                &ib[at..],
            )));
            at += AtomicEthPacket::<&[u8]>::LEN;
        }
        if op.has_aeth() {
            repr.aeth = Some(AethRepr::parse(&AethPacket::new_unchecked(&ib[at..])));
            at += AethPacket::<&[u8]>::LEN;
        }
        if op.has_atomic_ack_eth() {
            let p = AtomicAckEthPacket::new_unchecked(&ib[at..]);
            repr.atomic_ack_eth = Some(AtomicAckEthRepr::parse(&p));
            at += AtomicAckEthPacket::<&[u8]>::LEN;
        }
        if op.has_immdt() {
            repr.imm = Some(get_u32(&ib[at..], field::IMM_DATA));
            at += IMMDT_LEN;
        }
        if op.has_ieth() {
            repr.ieth = Some(get_u32(&ib[at..], field::IETH_RKEY));
            at += IETH_LEN;
        }
        if op.is_cnp() {
            at += CNP_RESERVED_LEN;
        }
        debug_assert_eq!(at, hdr_len);
        let rest = &ib[hdr_len..];
        let pad = usize::from(bth.pad_count);
        if pad > rest.len() {
            return Err(Error::PadExceedsPayload {
                pad: bth.pad_count,
                after_headers: rest.len(),
            });
        }
        Ok((repr, &rest[..rest.len() - pad]))
    }

    /// Header bytes this repr emits (BTH + extension headers); 12 for an unknown opcode.
    #[inline]
    pub fn header_len(&self) -> usize {
        stack_len(self.bth.opcode).unwrap_or(BthPacket::<&[u8]>::LEN)
    }

    /// True when exactly the extension headers the opcode prescribes are present (always true for an
    /// unknown opcode, whose extension headers are ignored).
    pub fn is_consistent(&self) -> bool {
        let op = self.bth.opcode;
        !op.is_known()
            || (op.has_reth() == self.reth.is_some()
                && op.has_atomic_eth() == self.atomic_eth.is_some()
                && op.has_aeth() == self.aeth.is_some()
                && op.has_atomic_ack_eth() == self.atomic_ack_eth.is_some()
                && op.has_immdt() == self.imm.is_some()
                && op.has_ieth() == self.ieth.is_some()
                && op.has_deth() == self.deth.is_some())
    }

    /// Writes exactly `header_len()` bytes into `buf[..header_len()]`: the headers the opcode
    /// prescribes, in wire order. A prescribed header left `None` is written as zeros (a debug build
    /// asserts [`is_consistent`](Self::is_consistent)). Panics if `buf` is too short.
    pub fn emit(&self, buf: &mut [u8]) {
        debug_assert!(
            self.is_consistent(),
            "IbRepr headers do not match {}",
            self.bth.opcode
        );
        let len = self.header_len();
        let buf = &mut buf[..len];
        self.bth.emit(buf);
        let op = self.bth.opcode;
        if !op.is_known() {
            return;
        }
        let mut at = BthPacket::<&[u8]>::LEN;
        if op.has_deth() {
            let d = self.deth.unwrap_or_default();
            d.emit(&mut buf[at..]);
            at += DethPacket::<&[u8]>::LEN;
        }
        if op.has_reth() {
            let r = self.reth.unwrap_or_default();
            r.emit(&mut buf[at..]);
            at += RethPacket::<&[u8]>::LEN;
        }
        if op.has_atomic_eth() {
            let a = self.atomic_eth.unwrap_or_default();
            a.emit(&mut buf[at..]);
            at += AtomicEthPacket::<&[u8]>::LEN;
        }
        if op.has_aeth() {
            let a = self.aeth.unwrap_or(AethRepr {
                syndrome: 0,
                msn: 0,
            });
            a.emit(&mut buf[at..]);
            at += AethPacket::<&[u8]>::LEN;
        }
        if op.has_atomic_ack_eth() {
            let a = self.atomic_ack_eth.unwrap_or_default();
            a.emit(&mut buf[at..]);
            at += AtomicAckEthPacket::<&[u8]>::LEN;
        }
        if op.has_immdt() {
            set_u32(&mut buf[at..], field::IMM_DATA, self.imm.unwrap_or(0));
            at += IMMDT_LEN;
        }
        if op.has_ieth() {
            set_u32(&mut buf[at..], field::IETH_RKEY, self.ieth.unwrap_or(0));
            at += IETH_LEN;
        }
        if op.is_cnp() {
            buf[at..at + CNP_RESERVED_LEN].fill(0);
            at += CNP_RESERVED_LEN;
        }
        debug_assert_eq!(at, len);
    }
}

#[cfg(test)]
mod tests {
    use super::super::{AethKind, NakCode, Opcode};
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn pad_len_rounds_up_to_four() {
        let want = [0, 3, 2, 1, 0, 3, 2, 1, 0];
        for (len, pad) in want.iter().enumerate() {
            assert_eq!(pad_len(len), *pad, "len {len}");
        }
        assert_eq!(pad_len(4096), 0);
        assert_eq!(pad_len(4095), 1);
    }

    #[test]
    fn parses_hardware_write_only() {
        // BTH..pad of tests/data/vectors/v1_hw_write_only.hex.
        let ib = hex("0a70ffff0000010a80a788bc000055d4c0726000000047b3000000050000000001000000");
        let (r, payload) = IbRepr::parse(&ib).unwrap();
        assert_eq!(r.bth.opcode, Opcode::RC_RDMA_WRITE_ONLY);
        assert_eq!(r.bth.pad_count, 3);
        let reth = r.reth.unwrap();
        assert_eq!(
            (reth.va, reth.rkey, reth.dma_len),
            (0x55d4c0726000, 0x47b3, 5)
        );
        assert_eq!(payload, &[0, 0, 0, 0, 1]);
        assert_eq!(r.header_len(), 28);
        assert!(r.is_consistent());
        let mut out = vec![0xa5u8; 28];
        r.emit(&mut out);
        assert_eq!(out, &ib[..28]);
    }

    #[test]
    fn parses_nak_and_rnr() {
        let mut ack = IbRepr::new(BthRepr::new(Opcode::RC_ACKNOWLEDGE, 0x12, 0x105));
        ack.aeth = Some(AethRepr::nak(NakCode::PsnSequenceError, 3));
        let mut buf = [0xa5u8; 16];
        ack.emit(&mut buf);
        let (back, payload) = IbRepr::parse(&buf).unwrap();
        assert_eq!(back, ack);
        assert!(payload.is_empty());
        assert_eq!(
            back.aeth.unwrap().kind(),
            AethKind::Nak(NakCode::PsnSequenceError)
        );
    }

    #[test]
    fn every_known_opcode_round_trips_with_payload_and_pad() {
        for v in 0..=255u8 {
            let op = Opcode(v);
            if !op.is_known() {
                continue;
            }
            let payload: Vec<u8> = (0..7u8).collect();
            let mut bth = BthRepr::new(op, 0x00abcdef, 0x00fedcba);
            bth.pad_count = pad_len(payload.len()) as u8;
            let mut r = IbRepr::new(bth);
            r.reth = op.has_reth().then_some(RethRepr {
                va: 0x1122334455667788,
                rkey: 0x99aabbcc,
                dma_len: 7,
            });
            r.atomic_eth = op.has_atomic_eth().then_some(AtomicEthRepr {
                va: 8,
                rkey: 9,
                swap_add: 10,
                compare: 11,
            });
            r.aeth = op.has_aeth().then_some(AethRepr::ack(42));
            r.atomic_ack_eth = op
                .has_atomic_ack_eth()
                .then_some(AtomicAckEthRepr { orig: 77 });
            r.imm = op.has_immdt().then_some(0xdeadbeef);
            r.ieth = op.has_ieth().then_some(0x1234);
            r.deth = op.has_deth().then_some(DethRepr { qkey: 5, src_qp: 6 });
            assert!(r.is_consistent());
            let hl = r.header_len();
            let mut buf = vec![0xa5u8; hl + payload.len() + 1];
            r.emit(&mut buf);
            buf[hl..hl + payload.len()].copy_from_slice(&payload);
            buf[hl + payload.len()] = 0;
            let (back, p) = IbRepr::parse(&buf).unwrap();
            assert_eq!(back, r, "{op:?}");
            assert_eq!(p, &payload[..], "{op:?}");
        }
    }

    #[test]
    fn unknown_opcode_keeps_bth_and_returns_rest() {
        let mut buf = [0u8; 20];
        BthRepr::new(Opcode(0x1c), 1, 2).emit(&mut buf);
        buf[12..].copy_from_slice(b"abcdefgh");
        let (r, payload) = IbRepr::parse(&buf).unwrap();
        assert_eq!(r.bth.opcode, Opcode(0x1c));
        assert_eq!(r.header_len(), 12);
        assert_eq!(payload, b"abcdefgh");
        assert!(r.reth.is_none() && r.aeth.is_none());
    }

    #[test]
    fn truncated_and_inconsistent_inputs_are_errors() {
        let mut r = IbRepr::new(BthRepr::new(Opcode::RC_RDMA_WRITE_ONLY, 1, 2));
        r.reth = Some(RethRepr::default());
        let mut buf = [0u8; 28];
        r.emit(&mut buf);
        for cut in 0..28 {
            assert!(matches!(
                IbRepr::parse(&buf[..cut]),
                Err(Error::Truncated { .. })
            ));
        }
        // PadCnt 2 but nothing after the headers.
        r.bth.pad_count = 2;
        r.emit(&mut buf);
        assert_eq!(
            IbRepr::parse(&buf).unwrap_err(),
            Error::PadExceedsPayload {
                pad: 2,
                after_headers: 0
            }
        );
    }

    #[test]
    fn cnp_reserved_bytes_are_zeroed() {
        let mut bth = BthRepr::new(Opcode::CNP, 0x11, 0);
        bth.becn = true;
        let r = IbRepr::new(bth);
        let mut buf = [0xa5u8; 28];
        r.emit(&mut buf);
        assert!(buf[12..].iter().all(|&b| b == 0));
        let (back, payload) = IbRepr::parse(&buf).unwrap();
        assert_eq!(back, r);
        assert!(payload.is_empty());
    }
}
