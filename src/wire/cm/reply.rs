//! ConnectReply (REP, table 110), ReadyToUse (RTU, table 111) and MsgRcptAck (MRA, table 107).

use super::{
    Answered, Bits, check, comm_ids, get_bits, get_u24_hi, private, set_bits, set_private,
    set_u24_hi,
};
use crate::wire::Result;
use crate::wire::field::{get_u32, get_u64, set_u32, set_u64};

/// Byte layout of the REP within the CM class data, after the communication IDs.
mod rep_field {
    use super::Bits;
    use crate::wire::field::Field;

    pub(crate) const LOCAL_QKEY: Field = 8..12;
    /// LocalQPN (24 bits).
    pub(crate) const LOCAL_QPN: usize = 12;
    /// LocalEEContextNumber (24 bits).
    pub(crate) const LOCAL_EECN: usize = 16;
    /// StartingPSN (24 bits).
    pub(crate) const STARTING_PSN: usize = 20;
    pub(crate) const RESPONDER_RESOURCES: usize = 24;
    pub(crate) const INITIATOR_DEPTH: usize = 25;
    pub(crate) const TARGET_ACK_DELAY: Bits = Bits::new(26, 0, 5);
    pub(crate) const FAILOVER_ACCEPTED: Bits = Bits::new(26, 5, 2);
    pub(crate) const END_TO_END_FLOW_CONTROL: Bits = Bits::new(26, 7, 1);
    pub(crate) const RNR_RETRY_COUNT: Bits = Bits::new(27, 0, 3);
    pub(crate) const SRQ: Bits = Bits::new(27, 3, 1);
    pub(crate) const LOCAL_CA_GUID: Field = 28..36;
    pub(crate) const PRIVATE_DATA: usize = 36;
}

/// Byte layout of the MRA within the CM class data, after the communication IDs.
mod mra_field {
    use super::Bits;

    /// MessageMRAed:2, which message is acknowledged.
    pub(crate) const MESSAGE_MRAED: Bits = Bits::new(8, 0, 2);
    /// ServiceTimeout:5.
    pub(crate) const SERVICE_TIMEOUT: Bits = Bits::new(9, 0, 5);
    pub(crate) const PRIVATE_DATA: usize = 10;
}

/// Bytes of private data a REP carries.
pub(crate) const REP_PRIVATE_LEN: usize = 196;
/// Bytes of private data an RTU carries.
pub(crate) const RTU_PRIVATE_LEN: usize = 224;
/// Bytes of private data an MRA carries.
pub(crate) const MRA_PRIVATE_LEN: usize = 222;

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
        use rep_field::*;
        Ok(RepRepr {
            local_comm_id: get_u32(b, comm_ids::LOCAL),
            remote_comm_id: get_u32(b, comm_ids::REMOTE),
            local_qkey: get_u32(b, LOCAL_QKEY),
            local_qpn: get_u24_hi(b, LOCAL_QPN),
            local_eecn: get_u24_hi(b, LOCAL_EECN),
            starting_psn: get_u24_hi(b, STARTING_PSN),
            responder_resources: b[RESPONDER_RESOURCES],
            initiator_depth: b[INITIATOR_DEPTH],
            target_ack_delay: get_bits(b, TARGET_ACK_DELAY),
            failover_accepted: get_bits(b, FAILOVER_ACCEPTED),
            end_to_end_flow_control: get_bits(b, END_TO_END_FLOW_CONTROL) == 1,
            rnr_retry_count: get_bits(b, RNR_RETRY_COUNT),
            srq: get_bits(b, SRQ) == 1,
            local_ca_guid: get_u64(b, LOCAL_CA_GUID),
            private_data: private(b, PRIVATE_DATA),
        })
    }

    /// Writes the CM class data of this REP into `b` (232 bytes, zeroed by the caller).
    pub fn emit(&self, b: &mut [u8]) {
        use rep_field::*;
        set_u32(b, comm_ids::LOCAL, self.local_comm_id);
        set_u32(b, comm_ids::REMOTE, self.remote_comm_id);
        set_u32(b, LOCAL_QKEY, self.local_qkey);
        set_u24_hi(b, LOCAL_QPN, self.local_qpn);
        set_u24_hi(b, LOCAL_EECN, self.local_eecn);
        set_u24_hi(b, STARTING_PSN, self.starting_psn);
        b[RESPONDER_RESOURCES] = self.responder_resources;
        b[INITIATOR_DEPTH] = self.initiator_depth;
        set_bits(b, TARGET_ACK_DELAY, self.target_ack_delay);
        set_bits(b, FAILOVER_ACCEPTED, self.failover_accepted);
        set_bits(
            b,
            END_TO_END_FLOW_CONTROL,
            self.end_to_end_flow_control.into(),
        );
        set_bits(b, RNR_RETRY_COUNT, self.rnr_retry_count);
        set_bits(b, SRQ, self.srq.into());
        set_u64(b, LOCAL_CA_GUID, self.local_ca_guid);
        set_private(b, PRIVATE_DATA, &self.private_data);
    }
}

comm_ids_message!(
    /// The fields of an RTU.
    RtuRepr, "An" "RTU", RTU_PRIVATE_LEN,
    local: "The active side's communication ID.",
    remote: "The passive side's communication ID (from its REP)."
);

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
            local_comm_id: get_u32(b, comm_ids::LOCAL),
            remote_comm_id: get_u32(b, comm_ids::REMOTE),
            message_mraed: Answered::from_bits(get_bits(b, mra_field::MESSAGE_MRAED)),
            service_timeout: get_bits(b, mra_field::SERVICE_TIMEOUT),
            private_data: private(b, mra_field::PRIVATE_DATA),
        })
    }

    /// Writes the CM class data of this MRA into `b`.
    pub fn emit(&self, b: &mut [u8]) {
        set_u32(b, comm_ids::LOCAL, self.local_comm_id);
        set_u32(b, comm_ids::REMOTE, self.remote_comm_id);
        set_bits(b, mra_field::MESSAGE_MRAED, self.message_mraed.bits());
        set_bits(b, mra_field::SERVICE_TIMEOUT, self.service_timeout);
        set_private(b, mra_field::PRIVATE_DATA, &self.private_data);
    }
}
