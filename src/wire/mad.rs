//! Management Datagram (MAD): the 256-byte message QP1 (the GSI) carries, a 24-byte common header and
//! 232 bytes of class data. The Communication Manager (class 0x07) sets connections up with them.

use super::field::{set_u16, set_u32, set_u64};

/// Length of every MAD on QP1.
pub const MAD_LEN: usize = 256;
/// Length of the common MAD header.
pub(crate) const MAD_HEADER_LEN: usize = 24;
/// Length of the class data after the header.
pub(crate) const MAD_DATA_LEN: usize = MAD_LEN - MAD_HEADER_LEN;
/// `BaseVersion` of every MAD.
pub(crate) const MAD_BASE_VERSION: u8 = 1;
/// `MgmtClass` of the Communication Manager.
pub(crate) const MGMT_CLASS_CM: u8 = 0x07;
/// `ClassVersion` of the CM that Linux speaks (`IB_CM_CLASS_VERSION`).
pub(crate) const CM_CLASS_VERSION: u8 = 2;
/// `Method` of every CM message: Send (the CM matches its messages by communication IDs, not TIDs).
pub(crate) const METHOD_SEND: u8 = 0x03;

/// Byte layout of the common MAD header.
mod field {
    use crate::wire::field::Field;

    /// BaseVersion.
    pub(crate) const BASE_VERSION: usize = 0;
    /// MgmtClass.
    pub(crate) const MGMT_CLASS: usize = 1;
    /// ClassVersion.
    pub(crate) const CLASS_VERSION: usize = 2;
    /// R bit (response) and Method.
    pub(crate) const METHOD: usize = 3;
    /// Status.
    pub(crate) const STATUS: Field = 4..6;
    /// ClassSpecific.
    pub(crate) const CLASS_SPECIFIC: Field = 6..8;
    /// TransactionID.
    pub(crate) const TID: Field = 8..16;
    /// AttributeID.
    pub(crate) const ATTR_ID: Field = 16..18;
    /// Reserved.
    pub(crate) const RESERVED: Field = 18..20;
    /// AttributeModifier.
    pub(crate) const ATTR_MOD: Field = 20..24;
}

header!(
    /// A view of a whole MAD (header and class data).
    MadPacket, "MAD", len = MAD_LEN;
    get {
        /// BaseVersion (1).
        pub(crate) base_version: u8 = field::BASE_VERSION;
        /// MgmtClass.
        pub(crate) mgmt_class: u8 = field::MGMT_CLASS;
        /// ClassVersion.
        pub(crate) class_version: u8 = field::CLASS_VERSION;
        /// Method (with the response bit).
        pub method: u8 = field::METHOD;
        /// Status.
        pub status: u16 = field::STATUS;
        /// TransactionID.
        pub(crate) tid: u64 = field::TID;
        /// AttributeID: which message of the class.
        pub attr_id: u16 = field::ATTR_ID;
        /// AttributeModifier.
        pub attr_mod: u32 = field::ATTR_MOD;
    }
);

impl<T: AsRef<[u8]>> MadPacket<T> {
    /// The 232 bytes of class data.
    #[inline]
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[MAD_HEADER_LEN..MAD_LEN]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> MadPacket<T> {
    /// The 232 bytes of class data, to write.
    #[inline]
    pub(crate) fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[MAD_HEADER_LEN..MAD_LEN]
    }
}

/// The fields of the common MAD header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct MadHeader {
    /// MgmtClass.
    pub(crate) mgmt_class: u8,
    /// ClassVersion.
    pub(crate) class_version: u8,
    /// Method (with the response bit).
    pub(crate) method: u8,
    /// Status.
    pub status: u16,
    /// TransactionID.
    pub(crate) tid: u64,
    /// AttributeID.
    pub attr_id: u16,
    /// AttributeModifier.
    pub(crate) attr_mod: u32,
}

impl MadHeader {
    /// The header of a CM message `attr_id` in transaction `tid`, as Linux's CM writes it.
    pub(crate) fn cm(attr_id: u16, tid: u64) -> MadHeader {
        MadHeader {
            mgmt_class: MGMT_CLASS_CM,
            class_version: CM_CLASS_VERSION,
            method: METHOD_SEND,
            status: 0,
            tid,
            attr_id,
            attr_mod: 0,
        }
    }

    /// Writes the 24 header bytes (base version 1, reserved and class-specific zero) at the start of
    /// `buf`. Panics if `buf` is shorter.
    pub(crate) fn emit(&self, buf: &mut [u8]) {
        let b = &mut buf[..MAD_HEADER_LEN];
        b[field::BASE_VERSION] = MAD_BASE_VERSION;
        b[field::MGMT_CLASS] = self.mgmt_class;
        b[field::CLASS_VERSION] = self.class_version;
        b[field::METHOD] = self.method;
        set_u16(b, field::STATUS, self.status);
        set_u16(b, field::CLASS_SPECIFIC, 0);
        set_u64(b, field::TID, self.tid);
        set_u16(b, field::ATTR_ID, self.attr_id);
        set_u16(b, field::RESERVED, 0);
        set_u32(b, field::ATTR_MOD, self.attr_mod);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip_and_layout() {
        let h = MadHeader::cm(0x0010, 0x0000_0001_2345_6789);
        let mut buf = [0xa5u8; MAD_LEN];
        h.emit(&mut buf);
        assert_eq!(&buf[..4], &[1, 0x07, 2, 0x03]);
        assert_eq!(&buf[8..16], &0x0000_0001_2345_6789u64.to_be_bytes());
        assert_eq!(&buf[16..18], &[0x00, 0x10]);
        let p = MadPacket::new_checked(&buf[..]).unwrap();
        assert_eq!(p.base_version(), 1);
        assert_eq!(
            (p.mgmt_class(), p.class_version(), p.method(), p.status()),
            (h.mgmt_class, h.class_version, h.method, h.status)
        );
        assert_eq!(
            (p.tid(), p.attr_id(), p.attr_mod()),
            (h.tid, h.attr_id, h.attr_mod)
        );
        assert_eq!(p.data().len(), MAD_DATA_LEN);
        assert!(MadPacket::new_checked(&buf[..255]).is_err());
    }
}
