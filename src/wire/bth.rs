//! Base Transport Header (12 bytes, roce-wire.md §2.6).

use super::Opcode;
use super::field::{set_u16, set_u24};

/// Byte layout of the BTH, and the bits of its flag bytes.
pub(crate) mod field {
    use crate::wire::field::Field;

    /// OpCode.
    pub(crate) const OPCODE: usize = 0;
    /// SE, M, PadCnt and TVer.
    pub(crate) const FLAGS: usize = 1;
    /// P_Key.
    pub(crate) const PKEY: Field = 2..4;
    /// FECN, BECN and resv6a: the byte the ICRC masks.
    pub(crate) const ECN: usize = 4;
    /// DestQP (24 bits).
    pub(crate) const DEST_QP: Field = 5..8;
    /// AckReq and resv7.
    pub(crate) const ACK_REQ: usize = 8;
    /// PSN (24 bits).
    pub(crate) const PSN: Field = 9..12;

    /// SE, solicited event, in `FLAGS`.
    pub(crate) const FLG_SE: u8 = 0x80;
    /// M, MigReq, in `FLAGS`.
    pub(crate) const FLG_MIGREQ: u8 = 0x40;
    /// PadCnt, in `FLAGS`.
    pub(crate) const PAD_MASK: u8 = 0x30;
    /// Position of PadCnt in `FLAGS`.
    pub(crate) const PAD_SHIFT: u32 = 4;
    /// TVer, in `FLAGS`.
    pub(crate) const TVER_MASK: u8 = 0x0f;
    /// FECN, in `ECN`.
    pub(crate) const FLG_FECN: u8 = 0x80;
    /// BECN, in `ECN`.
    pub(crate) const FLG_BECN: u8 = 0x40;
    /// AckReq, in `ACK_REQ`.
    pub(crate) const FLG_ACK_REQ: u8 = 0x80;
}

use field::{FLG_ACK_REQ, FLG_BECN, FLG_FECN, FLG_MIGREQ, FLG_SE, PAD_MASK, PAD_SHIFT, TVER_MASK};

header!(
    /// A view of a BTH at the start of a buffer.
    BthPacket, "BTH", len = field::PSN.end;
    get {
        /// P_Key.
        pub pkey: u16 = field::PKEY;
        /// DestQP (24 bits).
        pub dest_qp: u24 = field::DEST_QP;
        /// PSN (24 bits).
        pub psn: u24 = field::PSN;
    }
);

impl<T: AsRef<[u8]>> BthPacket<T> {
    #[inline]
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// OpCode (byte 0).
    #[inline]
    pub fn opcode(&self) -> Opcode {
        Opcode(self.b()[field::OPCODE])
    }
    /// SE, solicited event.
    #[inline]
    pub fn solicited(&self) -> bool {
        self.b()[field::FLAGS] & FLG_SE != 0
    }
    /// M, MigReq (ConnectX sets it; receivers ignore it).
    #[inline]
    pub fn migreq(&self) -> bool {
        self.b()[field::FLAGS] & FLG_MIGREQ != 0
    }
    /// PadCnt, pad bytes after the payload (0-3).
    #[inline]
    pub fn pad_count(&self) -> u8 {
        (self.b()[field::FLAGS] & PAD_MASK) >> PAD_SHIFT
    }
    /// TVer, transport header version (must be 0).
    #[inline]
    pub fn tver(&self) -> u8 {
        self.b()[field::FLAGS] & TVER_MASK
    }
    /// FECN, forward ECN (masked in the ICRC).
    #[inline]
    pub fn fecn(&self) -> bool {
        self.b()[field::ECN] & FLG_FECN != 0
    }
    /// BECN, backward ECN (set in CNPs; masked in the ICRC).
    #[inline]
    pub fn becn(&self) -> bool {
        self.b()[field::ECN] & FLG_BECN != 0
    }
    /// AckReq.
    #[inline]
    pub fn ack_req(&self) -> bool {
        self.b()[field::ACK_REQ] & FLG_ACK_REQ != 0
    }
}

/// The first 12 bytes of `b` as an array (panics if `b` is shorter, as a field read would).
#[inline]
fn bytes12(b: &[u8]) -> &[u8; 12] {
    b[..BthPacket::<&[u8]>::LEN]
        .try_into()
        .expect("sliced to 12 bytes")
}

/// The fields of a BTH. Reserved bits are not kept: emit writes them as zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BthRepr {
    /// OpCode.
    pub opcode: Opcode,
    /// SE, solicited event.
    pub solicited: bool,
    /// M, MigReq.
    pub migreq: bool,
    /// PadCnt (0-3; emit uses the low 2 bits).
    pub pad_count: u8,
    /// TVer (0; emit uses the low 4 bits).
    pub tver: u8,
    /// P_Key (rxe: 0xFFFF).
    pub pkey: u16,
    /// FECN.
    pub fecn: bool,
    /// BECN.
    pub becn: bool,
    /// DestQP (24 bits; emit uses the low 24).
    pub dest_qp: u32,
    /// AckReq.
    pub ack_req: bool,
    /// PSN (24 bits; emit uses the low 24).
    pub psn: u32,
}

impl BthRepr {
    /// Default P_Key, as rxe sends it.
    pub(crate) const DEFAULT_PKEY: u16 = 0xffff;

    /// A BTH with rxe's defaults (P_Key 0xFFFF, every flag clear, no pad).
    #[inline]
    pub fn new(opcode: Opcode, dest_qp: u32, psn: u32) -> Self {
        BthRepr {
            opcode,
            solicited: false,
            migreq: false,
            pad_count: 0,
            tver: 0,
            pkey: Self::DEFAULT_PKEY,
            fecn: false,
            becn: false,
            dest_qp,
            ack_req: false,
            psn,
        }
    }

    /// Reads every field of a BTH view.
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(p: &BthPacket<T>) -> Self {
        // One length check for the 12 bytes, not one per field (every received packet comes here).
        let b = BthPacket::new_unchecked(bytes12(p.b()));
        BthRepr {
            opcode: b.opcode(),
            solicited: b.solicited(),
            migreq: b.migreq(),
            pad_count: b.pad_count(),
            tver: b.tver(),
            pkey: b.pkey(),
            fecn: b.fecn(),
            becn: b.becn(),
            dest_qp: b.dest_qp(),
            ack_req: b.ack_req(),
            psn: b.psn(),
        }
    }

    /// Writes all 12 bytes of the BTH at the start of `buf`, reserved bits as zero. Panics if `buf` is
    /// shorter.
    #[inline]
    pub fn emit(&self, buf: &mut [u8]) {
        let b: &mut [u8; 12] = (&mut buf[..BthPacket::<&[u8]>::LEN])
            .try_into()
            .expect("sliced to 12 bytes");
        let bit = |on: bool, flag: u8| if on { flag } else { 0 };
        b[field::OPCODE] = self.opcode.0;
        b[field::FLAGS] = bit(self.solicited, FLG_SE)
            | bit(self.migreq, FLG_MIGREQ)
            | ((self.pad_count << PAD_SHIFT) & PAD_MASK)
            | (self.tver & TVER_MASK);
        set_u16(b, field::PKEY, self.pkey);
        b[field::ECN] = bit(self.fecn, FLG_FECN) | bit(self.becn, FLG_BECN);
        set_u24(b, field::DEST_QP, self.dest_qp);
        b[field::ACK_REQ] = bit(self.ack_req, FLG_ACK_REQ);
        set_u24(b, field::PSN, self.psn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // BTH of the v1 hardware RDMA WRITE ONLY (tests/data/vectors/v1_hw_write_only.hex).
    const HW_BTH: [u8; 12] = [
        0x0a, 0x70, 0xff, 0xff, 0x00, 0x00, 0x01, 0x0a, 0x80, 0xa7, 0x88, 0xbc,
    ];

    #[test]
    fn parses_hardware_bth() {
        let p = BthPacket::new_checked(&HW_BTH[..]).unwrap();
        let r = BthRepr::parse(&p);
        assert_eq!(r.opcode, Opcode::RC_RDMA_WRITE_ONLY);
        assert!(!r.solicited);
        assert!(r.migreq);
        assert_eq!(r.pad_count, 3);
        assert_eq!(r.tver, 0);
        assert_eq!(r.pkey, 0xffff);
        assert!(!r.fecn && !r.becn);
        assert_eq!(r.dest_qp, 0x00010a);
        assert!(r.ack_req);
        assert_eq!(r.psn, 0xa788bc);
    }

    #[test]
    fn emit_overwrites_every_byte() {
        let r = BthRepr::parse(&BthPacket::new_unchecked(&HW_BTH[..]));
        let mut buf = [0xa5u8; 12];
        r.emit(&mut buf);
        assert_eq!(buf, HW_BTH);
    }

    #[test]
    fn flags_and_masks() {
        let mut r = BthRepr::new(Opcode::CNP, 0xffffff, 0);
        r.becn = true;
        r.fecn = true;
        r.solicited = true;
        let mut buf = [0xa5u8; 12];
        r.emit(&mut buf);
        assert_eq!(
            buf,
            [
                0x81, 0x80, 0xff, 0xff, 0xc0, 0xff, 0xff, 0xff, 0x00, 0, 0, 0
            ]
        );
        // Out-of-range values are truncated to their field widths.
        let mut big = BthRepr::new(Opcode::RC_SEND_ONLY, 0x1234_5678, 0xff00_0001);
        big.pad_count = 7;
        big.emit(&mut buf);
        let back = BthRepr::parse(&BthPacket::new_unchecked(&buf[..]));
        assert_eq!((back.dest_qp, back.psn, back.pad_count), (0x345678, 1, 3));
    }

    #[test]
    fn short_buffer_is_truncated_error() {
        let e = BthPacket::new_checked(&HW_BTH[..11]).unwrap_err();
        assert_eq!(
            e,
            crate::wire::Error::Truncated {
                what: "BTH",
                need: 12,
                have: 11
            }
        );
    }
}
