//! RDMA Extended Transport Header (16 bytes): where a WRITE or READ goes.

/// Byte layout of the RETH.
mod field {
    use crate::wire::field::Field;

    /// Remote virtual address.
    pub(crate) const VA: Field = 0..8;
    /// R_Key.
    pub(crate) const RKEY: Field = 8..12;
    /// DMA length.
    pub(crate) const DMA_LEN: Field = 12..16;
}

header!(
    /// A view of a RETH at the start of a buffer.
    RethPacket, "RETH", len = field::DMA_LEN.end;
    get {
        /// Remote virtual address.
        pub va: u64 = field::VA;
        /// R_Key of the remote region.
        pub rkey: u32 = field::RKEY;
        /// DMA length: the whole remaining message, not this packet's payload.
        pub dma_len: u32 = field::DMA_LEN;
    }
    set {
        /// Sets the remote virtual address.
        pub(crate) set_va: u64 = field::VA;
        /// Sets the R_Key.
        pub(crate) set_rkey: u32 = field::RKEY;
        /// Sets the DMA length.
        pub(crate) set_dma_len: u32 = field::DMA_LEN;
    }
);

/// The fields of a RETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RethRepr {
    /// Remote virtual address.
    pub va: u64,
    /// R_Key.
    pub rkey: u32,
    /// DMA length of the whole message.
    pub dma_len: u32,
}

impl RethRepr {
    /// Reads a RETH view.
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(p: &RethPacket<T>) -> Self {
        RethRepr {
            va: p.va(),
            rkey: p.rkey(),
            dma_len: p.dma_len(),
        }
    }
    /// Writes all 16 bytes at the start of `buf`. Panics if `buf` is shorter.
    #[inline]
    pub fn emit(&self, buf: &mut [u8]) {
        let mut p = RethPacket::new_unchecked(&mut buf[..RethPacket::<&[u8]>::LEN]);
        p.set_va(self.va);
        p.set_rkey(self.rkey);
        p.set_dma_len(self.dma_len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_hardware_reth() {
        // RETH of tests/data/vectors/v1_hw_write_only.hex.
        let bytes = [
            0x00, 0x00, 0x55, 0xd4, 0xc0, 0x72, 0x60, 0x00, 0x00, 0x00, 0x47, 0xb3, 0, 0, 0, 5,
        ];
        let r = RethRepr::parse(&RethPacket::new_checked(&bytes[..]).unwrap());
        assert_eq!(
            r,
            RethRepr {
                va: 0x0000_55d4_c072_6000,
                rkey: 0x47b3,
                dma_len: 5
            }
        );
        let mut out = [0xa5u8; 16];
        r.emit(&mut out);
        assert_eq!(out, bytes);
        assert!(RethPacket::new_checked(&bytes[..15]).is_err());
    }
}
