//! Datagram Extended Transport Header (8 bytes): Q_Key and source QP of a UD packet.

use super::field::set_u24;

/// Byte layout of the DETH.
mod field {
    use crate::wire::field::Field;

    /// Q_Key.
    pub(crate) const QKEY: Field = 0..4;
    /// Reserved byte before the source QP.
    pub(crate) const RESERVED: usize = 4;
    /// Source QP (24 bits).
    pub(crate) const SRC_QP: Field = 5..8;
}

header!(
    /// A view of a DETH at the start of a buffer.
    DethPacket, "DETH", len = field::SRC_QP.end;
    get {
        /// Q_Key.
        pub qkey: u32 = field::QKEY;
        /// Source QP (24 bits).
        pub src_qp: u24 = field::SRC_QP;
    }
    set {
        /// Sets the Q_Key.
        pub(crate) set_qkey: u32 = field::QKEY;
    }
);

impl<T: AsRef<[u8]> + AsMut<[u8]>> DethPacket<T> {
    /// Sets the source QP (low 24 bits) and clears the reserved byte before it.
    #[inline]
    pub(crate) fn set_src_qp(&mut self, v: u32) {
        let b = self.buffer.as_mut();
        b[field::RESERVED] = 0;
        set_u24(b, field::SRC_QP, v);
    }
}

/// The fields of a DETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct DethRepr {
    /// Q_Key (GSI: 0x80010000).
    pub qkey: u32,
    /// Source QP (24 bits).
    pub src_qp: u32,
}

impl DethRepr {
    /// Q_Key of QP1 (GSI), used by CM MADs.
    pub const GSI_QKEY: u32 = 0x8001_0000;

    /// Reads a DETH view.
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(p: &DethPacket<T>) -> Self {
        DethRepr {
            qkey: p.qkey(),
            src_qp: p.src_qp(),
        }
    }
    /// Writes all 8 bytes at the start of `buf`, the reserved byte as zero. Panics if `buf` is
    /// shorter.
    #[inline]
    pub fn emit(&self, buf: &mut [u8]) {
        let mut p = DethPacket::new_unchecked(&mut buf[..DethPacket::<&[u8]>::LEN]);
        p.set_qkey(self.qkey);
        p.set_src_qp(self.src_qp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gsi_deth() {
        let r = DethRepr {
            qkey: DethRepr::GSI_QKEY,
            src_qp: 1,
        };
        let mut buf = [0xa5u8; 8];
        r.emit(&mut buf);
        assert_eq!(buf, [0x80, 0x01, 0, 0, 0, 0, 0, 1]);
        assert_eq!(
            DethRepr::parse(&DethPacket::new_checked(&buf[..]).unwrap()),
            r
        );
        assert!(DethPacket::new_checked(&buf[..7]).is_err());
    }
}
