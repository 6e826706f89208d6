//! ConnectRequest (REQ, IBTA table 106): what the active side proposes for the connection.

use super::{
    Bits, check, comm_ids, get_bits, get_u24_hi, private, set_bits, set_private, set_u24_hi,
};
use crate::wire::Gid;
use crate::wire::Result;
use crate::wire::field::{get_array, get_u16, get_u32, get_u64, set_u16, set_u32, set_u64};

/// Byte layout of the REQ within the CM class data.
mod field {
    use super::Bits;
    use crate::wire::field::Field;

    pub(crate) const SERVICE_ID: Field = 8..16;
    pub(crate) const LOCAL_CA_GUID: Field = 16..24;
    pub(crate) const LOCAL_QKEY: Field = 28..32;
    /// LocalQPN (24 bits), then ResponderResources.
    pub(crate) const LOCAL_QPN: usize = 32;
    pub(crate) const RESPONDER_RESOURCES: usize = 35;
    /// LocalEECN (24 bits), then InitiatorDepth.
    pub(crate) const LOCAL_EECN: usize = 36;
    pub(crate) const INITIATOR_DEPTH: usize = 39;
    /// RemoteEECN (24 bits), then the response timeout, service type and flow control byte.
    pub(crate) const REMOTE_EECN: usize = 40;
    pub(crate) const REMOTE_CM_RESPONSE_TIMEOUT: Bits = Bits::new(43, 0, 5);
    pub(crate) const TRANSPORT_SERVICE_TYPE: Bits = Bits::new(43, 5, 2);
    pub(crate) const END_TO_END_FLOW_CONTROL: Bits = Bits::new(43, 7, 1);
    /// StartingPSN (24 bits), then the response timeout and retry count byte.
    pub(crate) const STARTING_PSN: usize = 44;
    pub(crate) const LOCAL_CM_RESPONSE_TIMEOUT: Bits = Bits::new(47, 0, 5);
    pub(crate) const RETRY_COUNT: Bits = Bits::new(47, 5, 3);
    pub(crate) const PARTITION_KEY: Field = 48..50;
    pub(crate) const PATH_MTU: Bits = Bits::new(50, 0, 4);
    pub(crate) const RDC_EXISTS: Bits = Bits::new(50, 4, 1);
    pub(crate) const RNR_RETRY_COUNT: Bits = Bits::new(50, 5, 3);
    pub(crate) const MAX_CM_RETRIES: Bits = Bits::new(51, 0, 4);
    pub(crate) const SRQ: Bits = Bits::new(51, 4, 1);
    pub(crate) const EXTENDED_TRANSPORT_TYPE: Bits = Bits::new(51, 5, 3);
    pub(crate) const PRIMARY_PATH: Field = 52..96;
    pub(crate) const ALTERNATE_PATH: Field = 96..140;
    /// SAP supported: bit 5 of the alternate path's last byte.
    pub(crate) const SAP_SUPPORTED: Bits = Bits::new(139, 5, 1);
    pub(crate) const PRIVATE_DATA: usize = 140;
}

/// Byte layout of one path within a REQ.
mod path_field {
    use super::Bits;
    use crate::wire::field::Field;

    pub(crate) const LOCAL_LID: Field = 0..2;
    pub(crate) const REMOTE_LID: Field = 2..4;
    pub(crate) const LOCAL_GID: Field = 4..20;
    pub(crate) const REMOTE_GID: Field = 20..36;
    /// FlowLabel in the top 20 bits, then reserved bits and the packet rate.
    pub(crate) const FLOW_LABEL: Field = 36..40;
    /// Bits below the flow label in its word.
    pub(crate) const FLOW_LABEL_SHIFT: u32 = 12;
    pub(crate) const PACKET_RATE: Bits = Bits::new(39, 2, 6);
    pub(crate) const TRAFFIC_CLASS: usize = 40;
    pub(crate) const HOP_LIMIT: usize = 41;
    pub(crate) const SL: Bits = Bits::new(42, 0, 4);
    pub(crate) const SUBNET_LOCAL: Bits = Bits::new(42, 4, 1);
    pub(crate) const LOCAL_ACK_TIMEOUT: Bits = Bits::new(43, 0, 5);
}

/// Bytes of private data a REQ carries.
pub(crate) const REQ_PRIVATE_LEN: usize = 92;

/// One path of a REQ (primary or alternate), as the active side sees it ("local" is the sender).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CmPath {
    /// The sender's LID (0xFFFF, permissive, on a routed RoCE path).
    pub local_lid: u16,
    /// The receiver's LID.
    pub remote_lid: u16,
    /// The sender's GID (on RoCE v2, its IP address).
    pub local_gid: Gid,
    /// The receiver's GID.
    pub remote_gid: Gid,
    /// Flow label (20 bits).
    pub flow_label: u32,
    /// Packet rate (6 bits, the IB rate enum).
    pub packet_rate: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Service level (4 bits).
    pub sl: u8,
    /// Sender and receiver share a subnet.
    pub subnet_local: bool,
    /// Local ACK timeout (5 bits: 4.096 µs × 2^n).
    pub local_ack_timeout: u8,
}

impl CmPath {
    fn parse(b: &[u8]) -> CmPath {
        use path_field::*;
        CmPath {
            local_lid: get_u16(b, LOCAL_LID),
            remote_lid: get_u16(b, REMOTE_LID),
            local_gid: Gid::from(get_array::<16>(b, LOCAL_GID)),
            remote_gid: Gid::from(get_array::<16>(b, REMOTE_GID)),
            flow_label: get_u32(b, FLOW_LABEL) >> FLOW_LABEL_SHIFT,
            packet_rate: get_bits(b, PACKET_RATE),
            traffic_class: b[TRAFFIC_CLASS],
            hop_limit: b[HOP_LIMIT],
            sl: get_bits(b, SL),
            subnet_local: get_bits(b, SUBNET_LOCAL) == 1,
            local_ack_timeout: get_bits(b, LOCAL_ACK_TIMEOUT),
        }
    }

    fn emit(&self, b: &mut [u8]) {
        use path_field::*;
        set_u16(b, LOCAL_LID, self.local_lid);
        set_u16(b, REMOTE_LID, self.remote_lid);
        b[LOCAL_GID].copy_from_slice(&<[u8; 16]>::from(self.local_gid));
        b[REMOTE_GID].copy_from_slice(&<[u8; 16]>::from(self.remote_gid));
        set_u32(
            b,
            FLOW_LABEL,
            (self.flow_label & 0xf_ffff) << FLOW_LABEL_SHIFT,
        );
        set_bits(b, PACKET_RATE, self.packet_rate);
        b[TRAFFIC_CLASS] = self.traffic_class;
        b[HOP_LIMIT] = self.hop_limit;
        set_bits(b, SL, self.sl);
        set_bits(b, SUBNET_LOCAL, u8::from(self.subnet_local));
        set_bits(b, LOCAL_ACK_TIMEOUT, self.local_ack_timeout);
    }

    /// True for an absent path (the alternate of most REQs): no LID and no GID.
    pub fn is_absent(&self) -> bool {
        self.local_lid == 0 && self.local_gid.is_zero()
    }
}

/// The fields of a REQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReqRepr {
    /// The sender's communication ID for this connection.
    pub local_comm_id: u32,
    /// The service asked for (rdma_cm: [`super::service_id`]).
    pub service_id: u64,
    /// The sender's channel adapter GUID.
    pub local_ca_guid: u64,
    /// The sender's Q_Key (UD/RD only).
    pub local_qkey: u32,
    /// The sender's QPN (24 bits).
    pub local_qpn: u32,
    /// RDMA READs / atomics the sender accepts as responder at once.
    pub responder_resources: u8,
    /// Local EE context (RD only).
    pub local_eecn: u32,
    /// RDMA READs / atomics the sender issues at once.
    pub initiator_depth: u8,
    /// Remote EE context (RD only).
    pub remote_eecn: u32,
    /// How long the receiver may take to answer (5 bits: 4.096 µs × 2^n).
    pub remote_cm_response_timeout: u8,
    /// RC, UC ([`super::service_type`]).
    pub transport_service_type: u8,
    /// End-to-end flow control.
    pub end_to_end_flow_control: bool,
    /// The first PSN the sender sends (24 bits).
    pub starting_psn: u32,
    /// How long the sender takes to answer (5 bits).
    pub local_cm_response_timeout: u8,
    /// Transport retries (3 bits).
    pub retry_count: u8,
    /// P_Key.
    pub partition_key: u16,
    /// Path MTU as the IB enum (1: 256 … 5: 4096).
    pub path_mtu: u8,
    /// RDC exists (RD only).
    pub rdc_exists: bool,
    /// RNR retries (3 bits; 7 = forever).
    pub rnr_retry_count: u8,
    /// How often the sender resends a CM message before giving up (4 bits).
    pub max_cm_retries: u8,
    /// The sender uses a shared receive queue.
    pub srq: bool,
    /// Extended transport type (3 bits).
    pub extended_transport_type: u8,
    /// The primary path.
    pub primary: CmPath,
    /// The alternate path (absent: all zero).
    pub alternate: CmPath,
    /// SAP supported.
    pub sap_supported: bool,
    /// Private data (rdma_cm puts its [`super::CmaHeader`] first).
    pub private_data: [u8; REQ_PRIVATE_LEN],
}

impl ReqRepr {
    /// Parses the CM class data of a REQ.
    pub fn parse(b: &[u8]) -> Result<ReqRepr> {
        check("CM REQ", b)?;
        use field::*;
        Ok(ReqRepr {
            local_comm_id: get_u32(b, comm_ids::LOCAL),
            service_id: get_u64(b, SERVICE_ID),
            local_ca_guid: get_u64(b, LOCAL_CA_GUID),
            local_qkey: get_u32(b, LOCAL_QKEY),
            local_qpn: get_u24_hi(b, LOCAL_QPN),
            responder_resources: b[RESPONDER_RESOURCES],
            local_eecn: get_u24_hi(b, LOCAL_EECN),
            initiator_depth: b[INITIATOR_DEPTH],
            remote_eecn: get_u24_hi(b, REMOTE_EECN),
            remote_cm_response_timeout: get_bits(b, REMOTE_CM_RESPONSE_TIMEOUT),
            transport_service_type: get_bits(b, TRANSPORT_SERVICE_TYPE),
            end_to_end_flow_control: get_bits(b, END_TO_END_FLOW_CONTROL) == 1,
            starting_psn: get_u24_hi(b, STARTING_PSN),
            local_cm_response_timeout: get_bits(b, LOCAL_CM_RESPONSE_TIMEOUT),
            retry_count: get_bits(b, RETRY_COUNT),
            partition_key: get_u16(b, PARTITION_KEY),
            path_mtu: get_bits(b, PATH_MTU),
            rdc_exists: get_bits(b, RDC_EXISTS) == 1,
            rnr_retry_count: get_bits(b, RNR_RETRY_COUNT),
            max_cm_retries: get_bits(b, MAX_CM_RETRIES),
            srq: get_bits(b, SRQ) == 1,
            extended_transport_type: get_bits(b, EXTENDED_TRANSPORT_TYPE),
            primary: CmPath::parse(&b[PRIMARY_PATH]),
            alternate: CmPath::parse(&b[ALTERNATE_PATH]),
            sap_supported: get_bits(b, SAP_SUPPORTED) == 1,
            private_data: private(b, PRIVATE_DATA),
        })
    }

    /// Writes the CM class data of this REQ into `b` (232 bytes, zeroed by the caller).
    pub fn emit(&self, b: &mut [u8]) {
        use field::*;
        set_u32(b, comm_ids::LOCAL, self.local_comm_id);
        set_u64(b, SERVICE_ID, self.service_id);
        set_u64(b, LOCAL_CA_GUID, self.local_ca_guid);
        set_u32(b, LOCAL_QKEY, self.local_qkey);
        set_u24_hi(b, LOCAL_QPN, self.local_qpn);
        b[RESPONDER_RESOURCES] = self.responder_resources;
        set_u24_hi(b, LOCAL_EECN, self.local_eecn);
        b[INITIATOR_DEPTH] = self.initiator_depth;
        set_u24_hi(b, REMOTE_EECN, self.remote_eecn);
        set_bits(
            b,
            REMOTE_CM_RESPONSE_TIMEOUT,
            self.remote_cm_response_timeout,
        );
        set_bits(b, TRANSPORT_SERVICE_TYPE, self.transport_service_type);
        set_bits(
            b,
            END_TO_END_FLOW_CONTROL,
            self.end_to_end_flow_control.into(),
        );
        set_u24_hi(b, STARTING_PSN, self.starting_psn);
        set_bits(b, LOCAL_CM_RESPONSE_TIMEOUT, self.local_cm_response_timeout);
        set_bits(b, RETRY_COUNT, self.retry_count);
        set_u16(b, PARTITION_KEY, self.partition_key);
        set_bits(b, PATH_MTU, self.path_mtu);
        set_bits(b, RDC_EXISTS, self.rdc_exists.into());
        set_bits(b, RNR_RETRY_COUNT, self.rnr_retry_count);
        set_bits(b, MAX_CM_RETRIES, self.max_cm_retries);
        set_bits(b, SRQ, self.srq.into());
        set_bits(b, EXTENDED_TRANSPORT_TYPE, self.extended_transport_type);
        self.primary.emit(&mut b[PRIMARY_PATH]);
        self.alternate.emit(&mut b[ALTERNATE_PATH]);
        set_bits(b, SAP_SUPPORTED, self.sap_supported.into());
        set_private(b, PRIVATE_DATA, &self.private_data);
    }
}
