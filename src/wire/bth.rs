//! Base Transport Header (12 bytes, roce-wire.md §2.6).

use super::Opcode;
use super::field::{get_u16, get_u24, set_u16, set_u24};

header_view!(
    /// A view of a BTH at the start of a buffer.
    BthPacket,
    12,
    "BTH"
);

impl<T: AsRef<[u8]>> BthPacket<T> {
    #[inline]
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// OpCode (byte 0).
    #[inline]
    pub fn opcode(&self) -> Opcode {
        Opcode(self.b()[0])
    }
    /// SE, solicited event.
    #[inline]
    pub fn solicited(&self) -> bool {
        self.b()[1] & 0x80 != 0
    }
    /// M, MigReq (ConnectX sets it; receivers ignore it).
    #[inline]
    pub fn migreq(&self) -> bool {
        self.b()[1] & 0x40 != 0
    }
    /// PadCnt, pad bytes after the payload (0-3).
    #[inline]
    pub fn pad_count(&self) -> u8 {
        (self.b()[1] >> 4) & 0x3
    }
    /// TVer, transport header version (must be 0).
    #[inline]
    pub fn tver(&self) -> u8 {
        self.b()[1] & 0x0f
    }
    /// P_Key.
    #[inline]
    pub fn pkey(&self) -> u16 {
        get_u16(self.b(), 2)
    }
    /// FECN, forward ECN (masked in the ICRC).
    #[inline]
    pub fn fecn(&self) -> bool {
        self.b()[4] & 0x80 != 0
    }
    /// BECN, backward ECN (set in CNPs; masked in the ICRC).
    #[inline]
    pub fn becn(&self) -> bool {
        self.b()[4] & 0x40 != 0
    }
    /// DestQP (24 bits).
    #[inline]
    pub fn dest_qp(&self) -> u32 {
        get_u24(self.b(), 5)
    }
    /// AckReq.
    #[inline]
    pub fn ack_req(&self) -> bool {
        self.b()[8] & 0x80 != 0
    }
    /// PSN (24 bits).
    #[inline]
    pub fn psn(&self) -> u32 {
        get_u24(self.b(), 9)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> BthPacket<T> {
    #[inline]
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }
    #[inline]
    fn set_bit(&mut self, at: usize, mask: u8, on: bool) {
        let b = &mut self.bm()[at];
        *b = if on { *b | mask } else { *b & !mask };
    }
    /// Sets the OpCode.
    #[inline]
    pub fn set_opcode(&mut self, op: Opcode) {
        self.bm()[0] = op.0;
    }
    /// Sets SE.
    #[inline]
    pub fn set_solicited(&mut self, on: bool) {
        self.set_bit(1, 0x80, on);
    }
    /// Sets M (MigReq).
    #[inline]
    pub fn set_migreq(&mut self, on: bool) {
        self.set_bit(1, 0x40, on);
    }
    /// Sets PadCnt (low 2 bits of `pad` are used).
    #[inline]
    pub fn set_pad_count(&mut self, pad: u8) {
        let b = &mut self.bm()[1];
        *b = (*b & !0x30) | ((pad & 0x3) << 4);
    }
    /// Sets TVer (low 4 bits are used).
    #[inline]
    pub fn set_tver(&mut self, tver: u8) {
        let b = &mut self.bm()[1];
        *b = (*b & !0x0f) | (tver & 0x0f);
    }
    /// Sets the P_Key.
    #[inline]
    pub fn set_pkey(&mut self, pkey: u16) {
        set_u16(self.bm(), 2, pkey);
    }
    /// Sets FECN.
    #[inline]
    pub fn set_fecn(&mut self, on: bool) {
        self.set_bit(4, 0x80, on);
    }
    /// Sets BECN.
    #[inline]
    pub fn set_becn(&mut self, on: bool) {
        self.set_bit(4, 0x40, on);
    }
    /// Sets DestQP (low 24 bits are used).
    #[inline]
    pub fn set_dest_qp(&mut self, qpn: u32) {
        set_u24(self.bm(), 5, qpn);
    }
    /// Sets AckReq.
    #[inline]
    pub fn set_ack_req(&mut self, on: bool) {
        self.set_bit(8, 0x80, on);
    }
    /// Sets the PSN (low 24 bits are used).
    #[inline]
    pub fn set_psn(&mut self, psn: u32) {
        set_u24(self.bm(), 9, psn);
    }
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
    pub const DEFAULT_PKEY: u16 = 0xffff;

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
        BthRepr {
            opcode: p.opcode(),
            solicited: p.solicited(),
            migreq: p.migreq(),
            pad_count: p.pad_count(),
            tver: p.tver(),
            pkey: p.pkey(),
            fecn: p.fecn(),
            becn: p.becn(),
            dest_qp: p.dest_qp(),
            ack_req: p.ack_req(),
            psn: p.psn(),
        }
    }

    /// Writes all 12 bytes of the BTH, reserved bits as zero.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut BthPacket<T>) {
        let b = p.bm();
        b[0] = self.opcode.0;
        b[1] = (u8::from(self.solicited) << 7)
            | (u8::from(self.migreq) << 6)
            | ((self.pad_count & 0x3) << 4)
            | (self.tver & 0x0f);
        set_u16(b, 2, self.pkey);
        b[4] = (u8::from(self.fecn) << 7) | (u8::from(self.becn) << 6);
        set_u24(b, 5, self.dest_qp);
        b[8] = u8::from(self.ack_req) << 7;
        set_u24(b, 9, self.psn);
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
        r.emit(&mut BthPacket::new_unchecked(&mut buf[..]));
        assert_eq!(buf, HW_BTH);
    }

    #[test]
    fn flags_and_masks() {
        let mut r = BthRepr::new(Opcode::CNP, 0xffffff, 0);
        r.becn = true;
        r.fecn = true;
        r.solicited = true;
        let mut buf = [0xa5u8; 12];
        r.emit(&mut BthPacket::new_unchecked(&mut buf[..]));
        assert_eq!(
            buf,
            [
                0x81, 0x80, 0xff, 0xff, 0xc0, 0xff, 0xff, 0xff, 0x00, 0, 0, 0
            ]
        );
        // Out-of-range values are truncated to their field widths.
        let mut big = BthRepr::new(Opcode::RC_SEND_ONLY, 0x1234_5678, 0xff00_0001);
        big.pad_count = 7;
        big.emit(&mut BthPacket::new_unchecked(&mut buf[..]));
        let back = BthRepr::parse(&BthPacket::new_unchecked(&buf[..]));
        assert_eq!((back.dest_qp, back.psn, back.pad_count), (0x345678, 1, 3));
    }

    #[test]
    fn setters_touch_only_their_field() {
        let mut buf = HW_BTH;
        let mut p = BthPacket::new_unchecked(&mut buf[..]);
        p.set_psn(0x123456);
        p.set_pad_count(1);
        p.set_becn(true);
        p.set_ack_req(false);
        let r = BthRepr::parse(&p);
        assert_eq!(r.psn, 0x123456);
        assert_eq!(r.pad_count, 1);
        assert!(r.becn && r.migreq && !r.ack_req);
        assert_eq!(r.dest_qp, 0x00010a);
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
