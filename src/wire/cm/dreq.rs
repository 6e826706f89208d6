//! DisconnectRequest (DREQ, table 112) and DisconnectReply (DREP, table 113).

use super::{check, comm_ids, get_u24_hi, private, set_private, set_u24_hi};
use crate::wire::Result;
use crate::wire::field::{get_u32, set_u32};

/// Byte layout of the DREQ within the CM class data, after the communication IDs.
mod field {
    /// RemoteQPN/EECN (24 bits), then a reserved byte.
    pub(crate) const REMOTE_QPN: usize = 8;
    pub(crate) const PRIVATE_DATA: usize = 12;
}

/// Bytes of private data a DREQ carries.
pub(crate) const DREQ_PRIVATE_LEN: usize = 220;
/// Bytes of private data a DREP carries.
pub(crate) const DREP_PRIVATE_LEN: usize = 224;

/// The fields of a DREQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DreqRepr {
    /// The sender's communication ID.
    pub local_comm_id: u32,
    /// The receiver's communication ID.
    pub remote_comm_id: u32,
    /// The receiver's QPN (24 bits).
    pub(crate) remote_qpn: u32,
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
            local_comm_id: get_u32(b, comm_ids::LOCAL),
            remote_comm_id: get_u32(b, comm_ids::REMOTE),
            remote_qpn: get_u24_hi(b, field::REMOTE_QPN),
            private_data: private(b, field::PRIVATE_DATA),
        })
    }

    /// Writes the CM class data of this DREQ into `b`.
    pub fn emit(&self, b: &mut [u8]) {
        set_u32(b, comm_ids::LOCAL, self.local_comm_id);
        set_u32(b, comm_ids::REMOTE, self.remote_comm_id);
        set_u24_hi(b, field::REMOTE_QPN, self.remote_qpn);
        set_private(b, field::PRIVATE_DATA, &self.private_data);
    }
}

comm_ids_message!(
    /// The fields of a DREP.
    DrepRepr, "A" "DREP", DREP_PRIVATE_LEN,
    local: "The sender's communication ID.",
    remote: "The receiver's communication ID."
);
