//! RDMA Extended Transport Header (16 bytes): where a WRITE or READ goes.

use super::field::{get_u32, get_u64, set_u32, set_u64};

header_view!(
    /// A view of a RETH at the start of a buffer.
    RethPacket,
    16,
    "RETH"
);

impl<T: AsRef<[u8]>> RethPacket<T> {
    /// Remote virtual address.
    #[inline]
    pub fn va(&self) -> u64 {
        get_u64(self.buffer.as_ref(), 0)
    }
    /// R_Key of the remote region.
    #[inline]
    pub fn rkey(&self) -> u32 {
        get_u32(self.buffer.as_ref(), 8)
    }
    /// DMA length: the whole remaining message, not this packet's payload.
    #[inline]
    pub fn dma_len(&self) -> u32 {
        get_u32(self.buffer.as_ref(), 12)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> RethPacket<T> {
    /// Sets the remote virtual address.
    #[inline]
    pub fn set_va(&mut self, va: u64) {
        set_u64(self.buffer.as_mut(), 0, va);
    }
    /// Sets the R_Key.
    #[inline]
    pub fn set_rkey(&mut self, rkey: u32) {
        set_u32(self.buffer.as_mut(), 8, rkey);
    }
    /// Sets the DMA length.
    #[inline]
    pub fn set_dma_len(&mut self, len: u32) {
        set_u32(self.buffer.as_mut(), 12, len);
    }
}

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
    /// Writes all 16 bytes.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut RethPacket<T>) {
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
        r.emit(&mut RethPacket::new_unchecked(&mut out[..]));
        assert_eq!(out, bytes);
        assert!(RethPacket::new_checked(&bytes[..15]).is_err());
    }
}
