//! DisconnectRequest (DREQ, table 112) and DisconnectReply (DREP, table 113).

use super::{check, get_u24_hi, private, set_u24_hi};
use crate::wire::Result;
use crate::wire::field::{get_u32, set_u32};

/// Bytes of private data a DREQ carries.
pub const DREQ_PRIVATE_LEN: usize = 220;
/// Bytes of private data a DREP carries.
pub const DREP_PRIVATE_LEN: usize = 224;

/// The fields of a DREQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DreqRepr {
    /// The sender's communication ID.
    pub local_comm_id: u32,
    /// The receiver's communication ID.
    pub remote_comm_id: u32,
    /// The receiver's QPN (24 bits).
    pub remote_qpn: u32,
    /// Private data.
    pub private_data: [u8; DREQ_PRIVATE_LEN],
}

impl DreqRepr {
    /// A DREQ without private data.
    pub fn new(local_comm_id: u32, remote_comm_id: u32, remote_qpn: u32) -> DreqRepr {
        DreqRepr {
            local_comm_id,
            remote_comm_id,
            remote_qpn,
            private_data: [0; DREQ_PRIVATE_LEN],
        }
    }

    /// Parses the CM class data of a DREQ.
    pub fn parse(b: &[u8]) -> Result<DreqRepr> {
        check("CM DREQ", b)?;
        Ok(DreqRepr {
            local_comm_id: get_u32(b, 0..4),
            remote_comm_id: get_u32(b, 4..8),
            remote_qpn: get_u24_hi(b, 8),
            private_data: private(b, 12),
        })
    }

    /// Writes the CM class data of this DREQ into `b`.
    pub fn emit(&self, b: &mut [u8]) {
        set_u32(b, 0..4, self.local_comm_id);
        set_u32(b, 4..8, self.remote_comm_id);
        set_u24_hi(b, 8, self.remote_qpn);
        b[12..12 + DREQ_PRIVATE_LEN].copy_from_slice(&self.private_data);
    }
}

/// The fields of a DREP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DrepRepr {
    /// The sender's communication ID.
    pub local_comm_id: u32,
    /// The receiver's communication ID.
    pub remote_comm_id: u32,
    /// Private data.
    pub private_data: [u8; DREP_PRIVATE_LEN],
}

impl DrepRepr {
    /// A DREP without private data.
    pub fn new(local_comm_id: u32, remote_comm_id: u32) -> DrepRepr {
        DrepRepr {
            local_comm_id,
            remote_comm_id,
            private_data: [0; DREP_PRIVATE_LEN],
        }
    }

    /// Parses the CM class data of a DREP.
    pub fn parse(b: &[u8]) -> Result<DrepRepr> {
        check("CM DREP", b)?;
        Ok(DrepRepr {
            local_comm_id: get_u32(b, 0..4),
            remote_comm_id: get_u32(b, 4..8),
            private_data: private(b, 8),
        })
    }

    /// Writes the CM class data of this DREP into `b`.
    pub fn emit(&self, b: &mut [u8]) {
        set_u32(b, 0..4, self.local_comm_id);
        set_u32(b, 4..8, self.remote_comm_id);
        b[8..8 + DREP_PRIVATE_LEN].copy_from_slice(&self.private_data);
    }
}
