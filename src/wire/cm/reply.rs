//! ConnectReply (REP, table 110), ReadyToUse (RTU, table 111) and MsgRcptAck (MRA, table 107).

use super::{Answered, check, get_bits, get_u24_hi, private, set_bits, set_u24_hi};
use crate::wire::Result;
use crate::wire::field::{get_u32, get_u64, set_u32, set_u64};

/// Byte layout of the REP within the CM class data.
mod field {
    use crate::wire::field::Field;

    pub const LOCAL_COMM_ID: Field = 0..4;
    pub const REMOTE_COMM_ID: Field = 4..8;
    pub const LOCAL_QKEY: Field = 8..12;
    /// LocalQPN (24 bits).
    pub const LOCAL_QPN: usize = 12;
    /// LocalEEContextNumber (24 bits).
    pub const LOCAL_EECN: usize = 16;
    /// StartingPSN (24 bits).
    pub const STARTING_PSN: usize = 20;
    pub const RESPONDER_RESOURCES: usize = 24;
    pub const INITIATOR_DEPTH: usize = 25;
    /// TargetACKDelay:5, FailoverAccepted:2, End-to-end flow control:1.
    pub const ACK_DELAY_FAILOVER_FLOW: usize = 26;
    /// RNRRetryCount:3, SRQ:1.
    pub const RNR_SRQ: usize = 27;
    pub const LOCAL_CA_GUID: Field = 28..36;
    pub const PRIVATE_DATA: usize = 36;
}

/// Bytes of private data a REP carries.
pub const REP_PRIVATE_LEN: usize = 196;
/// Bytes of private data an RTU carries.
pub const RTU_PRIVATE_LEN: usize = 224;
/// Bytes of private data an MRA carries.
pub const MRA_PRIVATE_LEN: usize = 222;

/// The fields of a REP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RepRepr {
    /// The passive side's communication ID.
    pub local_comm_id: u32,
    /// The active side's communication ID (from its REQ).
    pub remote_comm_id: u32,
    /// The passive side's Q_Key (UD/RD only).
    pub local_qkey: u32,
    /// The passive side's QPN (24 bits).
    pub local_qpn: u32,
    /// Local EE context (RD only).
    pub local_eecn: u32,
    /// The first PSN the passive side sends (24 bits).
    pub starting_psn: u32,
    /// RDMA READs / atomics the passive side accepts as responder at once.
    pub responder_resources: u8,
    /// RDMA READs / atomics the passive side issues at once.
    pub initiator_depth: u8,
    /// Target ACK delay (5 bits).
    pub target_ack_delay: u8,
    /// Failover accepted (2 bits).
    pub failover_accepted: u8,
    /// End-to-end flow control.
    pub end_to_end_flow_control: bool,
    /// RNR retries the active side should use (3 bits).
    pub rnr_retry_count: u8,
    /// The passive side uses a shared receive queue.
    pub srq: bool,
    /// The passive side's channel adapter GUID.
    pub local_ca_guid: u64,
    /// Private data.
    pub private_data: [u8; REP_PRIVATE_LEN],
}

impl RepRepr {
    /// Parses the CM class data of a REP.
    pub fn parse(b: &[u8]) -> Result<RepRepr> {
        check("CM REP", b)?;
        use field::*;
        Ok(RepRepr {
            local_comm_id: get_u32(b, LOCAL_COMM_ID),
            remote_comm_id: get_u32(b, REMOTE_COMM_ID),
            local_qkey: get_u32(b, LOCAL_QKEY),
            local_qpn: get_u24_hi(b, LOCAL_QPN),
            local_eecn: get_u24_hi(b, LOCAL_EECN),
            starting_psn: get_u24_hi(b, STARTING_PSN),
            responder_resources: b[RESPONDER_RESOURCES],
            initiator_depth: b[INITIATOR_DEPTH],
            target_ack_delay: get_bits(b, ACK_DELAY_FAILOVER_FLOW, 0, 5),
            failover_accepted: get_bits(b, ACK_DELAY_FAILOVER_FLOW, 5, 2),
            end_to_end_flow_control: get_bits(b, ACK_DELAY_FAILOVER_FLOW, 7, 1) == 1,
            rnr_retry_count: get_bits(b, RNR_SRQ, 0, 3),
            srq: get_bits(b, RNR_SRQ, 3, 1) == 1,
            local_ca_guid: get_u64(b, LOCAL_CA_GUID),
            private_data: private(b, PRIVATE_DATA),
        })
    }

    /// Writes the CM class data of this REP into `b` (232 bytes, zeroed by the caller).
    pub fn emit(&self, b: &mut [u8]) {
        use field::*;
        set_u32(b, LOCAL_COMM_ID, self.local_comm_id);
        set_u32(b, REMOTE_COMM_ID, self.remote_comm_id);
        set_u32(b, LOCAL_QKEY, self.local_qkey);
        set_u24_hi(b, LOCAL_QPN, self.local_qpn);
        set_u24_hi(b, LOCAL_EECN, self.local_eecn);
        set_u24_hi(b, STARTING_PSN, self.starting_psn);
        b[RESPONDER_RESOURCES] = self.responder_resources;
        b[INITIATOR_DEPTH] = self.initiator_depth;
        set_bits(b, ACK_DELAY_FAILOVER_FLOW, 0, 5, self.target_ack_delay);
        set_bits(b, ACK_DELAY_FAILOVER_FLOW, 5, 2, self.failover_accepted);
        set_bits(
            b,
            ACK_DELAY_FAILOVER_FLOW,
            7,
            1,
            self.end_to_end_flow_control.into(),
        );
        set_bits(b, RNR_SRQ, 0, 3, self.rnr_retry_count);
        set_bits(b, RNR_SRQ, 3, 1, self.srq.into());
        set_u64(b, LOCAL_CA_GUID, self.local_ca_guid);
        b[PRIVATE_DATA..PRIVATE_DATA + REP_PRIVATE_LEN].copy_from_slice(&self.private_data);
    }
}

/// The fields of an RTU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RtuRepr {
    /// The active side's communication ID.
    pub local_comm_id: u32,
    /// The passive side's communication ID (from its REP).
    pub remote_comm_id: u32,
    /// Private data.
    pub private_data: [u8; RTU_PRIVATE_LEN],
}

impl RtuRepr {
    /// An RTU without private data.
    pub fn new(local_comm_id: u32, remote_comm_id: u32) -> RtuRepr {
        RtuRepr {
            local_comm_id,
            remote_comm_id,
            private_data: [0; RTU_PRIVATE_LEN],
        }
    }

    /// Parses the CM class data of an RTU.
    pub fn parse(b: &[u8]) -> Result<RtuRepr> {
        check("CM RTU", b)?;
        Ok(RtuRepr {
            local_comm_id: get_u32(b, 0..4),
            remote_comm_id: get_u32(b, 4..8),
            private_data: private(b, 8),
        })
    }

    /// Writes the CM class data of this RTU into `b`.
    pub fn emit(&self, b: &mut [u8]) {
        set_u32(b, 0..4, self.local_comm_id);
        set_u32(b, 4..8, self.remote_comm_id);
        b[8..8 + RTU_PRIVATE_LEN].copy_from_slice(&self.private_data);
    }
}

/// The fields of an MRA: "your message arrived; give me `service_timeout` more".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MraRepr {
    /// The sender's communication ID.
    pub local_comm_id: u32,
    /// The receiver's communication ID.
    pub remote_comm_id: u32,
    /// Which message is acknowledged.
    pub message_mraed: Answered,
    /// Extra time the sender needs (5 bits: 4.096 µs × 2^n).
    pub service_timeout: u8,
    /// Private data.
    pub private_data: [u8; MRA_PRIVATE_LEN],
}

impl MraRepr {
    /// Parses the CM class data of an MRA.
    pub fn parse(b: &[u8]) -> Result<MraRepr> {
        check("CM MRA", b)?;
        Ok(MraRepr {
            local_comm_id: get_u32(b, 0..4),
            remote_comm_id: get_u32(b, 4..8),
            message_mraed: Answered::from_bits(get_bits(b, 8, 0, 2)),
            service_timeout: get_bits(b, 9, 0, 5),
            private_data: private(b, 10),
        })
    }

    /// Writes the CM class data of this MRA into `b`.
    pub fn emit(&self, b: &mut [u8]) {
        set_u32(b, 0..4, self.local_comm_id);
        set_u32(b, 4..8, self.remote_comm_id);
        set_bits(b, 8, 0, 2, self.message_mraed.bits());
        set_bits(b, 9, 0, 5, self.service_timeout);
        b[10..10 + MRA_PRIVATE_LEN].copy_from_slice(&self.private_data);
    }
}
