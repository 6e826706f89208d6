//! AtomicETH (28 bytes) and AtomicAckETH (8 bytes): compare-and-swap / fetch-and-add and their reply.

use super::RethPacket;

/// Byte layout of the AtomicETH and the AtomicAckETH.
mod field {
    use crate::wire::field::Field;

    // AtomicETH: the remote virtual address and R_Key first, laid out as in the RETH.
    /// AtomicETH: swap value or addend.
    pub(crate) const SWAP_ADD: Field = 12..20;
    /// AtomicETH: compare value.
    pub(crate) const COMPARE: Field = 20..28;

    /// AtomicAckETH: the original remote data.
    pub(crate) const ORIG: Field = 0..8;
}

header!(
    /// A view of an AtomicETH at the start of a buffer.
    AtomicEthPacket, "AtomicETH", len = field::COMPARE.end;
    get {
        /// Swap value (compare-and-swap) or addend (fetch-and-add).
        pub swap_add: u64 = field::SWAP_ADD;
        /// Compare value (compare-and-swap only).
        pub compare: u64 = field::COMPARE;
    }
    set {
        /// Sets the swap value / addend.
        pub(crate) set_swap_add: u64 = field::SWAP_ADD;
        /// Sets the compare value.
        pub(crate) set_compare: u64 = field::COMPARE;
    }
);

/// The AtomicETH opens with the RETH's VA and R_Key, read and written through a RETH view.
impl<T: AsRef<[u8]>> AtomicEthPacket<T> {
    /// Remote virtual address (must be 8-byte aligned).
    #[inline]
    pub fn va(&self) -> u64 {
        RethPacket::new_unchecked(self.buffer.as_ref()).va()
    }
    /// R_Key.
    #[inline]
    pub fn rkey(&self) -> u32 {
        RethPacket::new_unchecked(self.buffer.as_ref()).rkey()
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> AtomicEthPacket<T> {
    /// Sets the remote virtual address.
    #[inline]
    pub(crate) fn set_va(&mut self, v: u64) {
        RethPacket::new_unchecked(self.buffer.as_mut()).set_va(v);
    }
    /// Sets the R_Key.
    #[inline]
    pub(crate) fn set_rkey(&mut self, v: u32) {
        RethPacket::new_unchecked(self.buffer.as_mut()).set_rkey(v);
    }
}

/// The fields of an AtomicETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AtomicEthRepr {
    /// Remote virtual address.
    pub va: u64,
    /// R_Key.
    pub rkey: u32,
    /// Swap value or addend.
    pub swap_add: u64,
    /// Compare value.
    pub compare: u64,
}

impl AtomicEthRepr {
    /// Reads an AtomicETH view.
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(p: &AtomicEthPacket<T>) -> Self {
        AtomicEthRepr {
            va: p.va(),
            rkey: p.rkey(),
            swap_add: p.swap_add(),
            compare: p.compare(),
        }
    }
    /// Writes all 28 bytes at the start of `buf`. Panics if `buf` is shorter.
    #[inline]
    pub fn emit(&self, buf: &mut [u8]) {
        let mut p = AtomicEthPacket::new_unchecked(&mut buf[..AtomicEthPacket::<&[u8]>::LEN]);
        p.set_va(self.va);
        p.set_rkey(self.rkey);
        p.set_swap_add(self.swap_add);
        p.set_compare(self.compare);
    }
}

header!(
    /// A view of an AtomicAckETH at the start of a buffer.
    AtomicAckEthPacket, "AtomicAckETH", len = field::ORIG.end;
    get {
        /// The remote data before the atomic operation.
        pub orig: u64 = field::ORIG;
    }
    set {
        /// Sets the original remote data.
        pub(crate) set_orig: u64 = field::ORIG;
    }
);

/// The fields of an AtomicAckETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AtomicAckEthRepr {
    /// Original remote data.
    pub orig: u64,
}

impl AtomicAckEthRepr {
    /// Reads an AtomicAckETH view.
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(p: &AtomicAckEthPacket<T>) -> Self {
        AtomicAckEthRepr { orig: p.orig() }
    }
    /// Writes all 8 bytes at the start of `buf`. Panics if `buf` is shorter.
    #[inline]
    pub fn emit(&self, buf: &mut [u8]) {
        let mut p = AtomicAckEthPacket::new_unchecked(&mut buf[..AtomicAckEthPacket::<&[u8]>::LEN]);
        p.set_orig(self.orig);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_eth_is_packed_big_endian() {
        let r = AtomicEthRepr {
            va: 0x0102030405060708,
            rkey: 0x090a0b0c,
            swap_add: 0x1112131415161718,
            compare: 0x2122232425262728,
        };
        let mut buf = [0xa5u8; 28];
        r.emit(&mut buf);
        assert_eq!(&buf[..12], &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
        assert_eq!(
            &buf[12..20],
            &[0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18]
        );
        assert_eq!(
            &buf[20..],
            &[0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28]
        );
        assert_eq!(
            AtomicEthRepr::parse(&AtomicEthPacket::new_checked(&buf[..]).unwrap()),
            r
        );
        assert!(AtomicEthPacket::new_checked(&buf[..27]).is_err());
    }

    #[test]
    fn atomic_ack_eth() {
        let r = AtomicAckEthRepr {
            orig: 0xdead_beef_0000_0001,
        };
        let mut buf = [0xa5u8; 8];
        r.emit(&mut buf);
        assert_eq!(buf, [0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 1]);
        assert_eq!(
            AtomicAckEthRepr::parse(&AtomicAckEthPacket::new_checked(&buf[..]).unwrap()),
            r
        );
    }
}
