//! ConnectRequest (REQ, IBTA table 106): what the active side proposes for the connection.

use super::{check, get_bits, get_u24_hi, private, set_bits, set_u24_hi};
use crate::wire::Gid;
use crate::wire::Result;
use crate::wire::field::{get_array, get_u16, get_u32, get_u64, set_u16, set_u32, set_u64};

/// Byte layout of the REQ within the CM class data.
mod field {
    use crate::wire::field::Field;

    pub const LOCAL_COMM_ID: Field = 0..4;
    pub const SERVICE_ID: Field = 8..16;
    pub const LOCAL_CA_GUID: Field = 16..24;
    pub const LOCAL_QKEY: Field = 28..32;
    /// LocalQPN (24 bits), then ResponderResources.
    pub const LOCAL_QPN: usize = 32;
    pub const RESPONDER_RESOURCES: usize = 35;
    /// LocalEECN (24 bits), then InitiatorDepth.
    pub const LOCAL_EECN: usize = 36;
    pub const INITIATOR_DEPTH: usize = 39;
    /// RemoteEECN (24 bits), then RemoteCMResponseTimeout:5, TransportServiceType:2, E2E flow:1.
    pub const REMOTE_EECN: usize = 40;
    pub const TIMEOUT_TYPE_FLOW: usize = 43;
    /// StartingPSN (24 bits), then LocalCMResponseTimeout:5, RetryCount:3.
    pub const STARTING_PSN: usize = 44;
    pub const TIMEOUT_RETRY: usize = 47;
    pub const PARTITION_KEY: Field = 48..50;
    /// PathPacketPayloadMTU:4, RDCExists:1, RNRRetryCount:3.
    pub const MTU_RDC_RNR: usize = 50;
    /// MaxCMRetries:4, SRQ:1, ExtendedTransportType:3.
    pub const RETRIES_SRQ_EXT: usize = 51;
    pub const PRIMARY_PATH: usize = 52;
    pub const ALTERNATE_PATH: usize = 96;
    /// SAP supported: bit 5 of the alternate path's last byte.
    pub const SAP_SUPPORTED: usize = 139;
    pub const PRIVATE_DATA: usize = 140;
}

/// Bytes of private data a REQ carries.
pub const REQ_PRIVATE_LEN: usize = 92;
/// Bytes of one path in a REQ.
const PATH_LEN: usize = 44;

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
        CmPath {
            local_lid: get_u16(b, 0..2),
            remote_lid: get_u16(b, 2..4),
            local_gid: Gid::from(get_array::<16>(b, 4..20)),
            remote_gid: Gid::from(get_array::<16>(b, 20..36)),
            flow_label: get_u32(b, 36..40) >> 12,
            packet_rate: get_bits(b, 39, 2, 6),
            traffic_class: b[40],
            hop_limit: b[41],
            sl: get_bits(b, 42, 0, 4),
            subnet_local: get_bits(b, 42, 4, 1) == 1,
            local_ack_timeout: get_bits(b, 43, 0, 5),
        }
    }

    fn emit(&self, b: &mut [u8]) {
        set_u16(b, 0..2, self.local_lid);
        set_u16(b, 2..4, self.remote_lid);
        b[4..20].copy_from_slice(&<[u8; 16]>::from(self.local_gid));
        b[20..36].copy_from_slice(&<[u8; 16]>::from(self.remote_gid));
        set_u32(b, 36..40, (self.flow_label & 0xf_ffff) << 12);
        set_bits(b, 39, 2, 6, self.packet_rate);
        b[40] = self.traffic_class;
        b[41] = self.hop_limit;
        set_bits(b, 42, 0, 4, self.sl);
        set_bits(b, 42, 4, 1, u8::from(self.subnet_local));
        set_bits(b, 43, 0, 5, self.local_ack_timeout);
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
            local_comm_id: get_u32(b, LOCAL_COMM_ID),
            service_id: get_u64(b, SERVICE_ID),
            local_ca_guid: get_u64(b, LOCAL_CA_GUID),
            local_qkey: get_u32(b, LOCAL_QKEY),
            local_qpn: get_u24_hi(b, LOCAL_QPN),
            responder_resources: b[RESPONDER_RESOURCES],
            local_eecn: get_u24_hi(b, LOCAL_EECN),
            initiator_depth: b[INITIATOR_DEPTH],
            remote_eecn: get_u24_hi(b, REMOTE_EECN),
            remote_cm_response_timeout: get_bits(b, TIMEOUT_TYPE_FLOW, 0, 5),
            transport_service_type: get_bits(b, TIMEOUT_TYPE_FLOW, 5, 2),
            end_to_end_flow_control: get_bits(b, TIMEOUT_TYPE_FLOW, 7, 1) == 1,
            starting_psn: get_u24_hi(b, STARTING_PSN),
            local_cm_response_timeout: get_bits(b, TIMEOUT_RETRY, 0, 5),
            retry_count: get_bits(b, TIMEOUT_RETRY, 5, 3),
            partition_key: get_u16(b, PARTITION_KEY),
            path_mtu: get_bits(b, MTU_RDC_RNR, 0, 4),
            rdc_exists: get_bits(b, MTU_RDC_RNR, 4, 1) == 1,
            rnr_retry_count: get_bits(b, MTU_RDC_RNR, 5, 3),
            max_cm_retries: get_bits(b, RETRIES_SRQ_EXT, 0, 4),
            srq: get_bits(b, RETRIES_SRQ_EXT, 4, 1) == 1,
            extended_transport_type: get_bits(b, RETRIES_SRQ_EXT, 5, 3),
            primary: CmPath::parse(&b[PRIMARY_PATH..PRIMARY_PATH + PATH_LEN]),
            alternate: CmPath::parse(&b[ALTERNATE_PATH..ALTERNATE_PATH + PATH_LEN]),
            sap_supported: get_bits(b, SAP_SUPPORTED, 5, 1) == 1,
            private_data: private(b, PRIVATE_DATA),
        })
    }

    /// Writes the CM class data of this REQ into `b` (232 bytes, zeroed by the caller).
    pub fn emit(&self, b: &mut [u8]) {
        use field::*;
        set_u32(b, LOCAL_COMM_ID, self.local_comm_id);
        set_u64(b, SERVICE_ID, self.service_id);
        set_u64(b, LOCAL_CA_GUID, self.local_ca_guid);
        set_u32(b, LOCAL_QKEY, self.local_qkey);
        set_u24_hi(b, LOCAL_QPN, self.local_qpn);
        b[RESPONDER_RESOURCES] = self.responder_resources;
        set_u24_hi(b, LOCAL_EECN, self.local_eecn);
        b[INITIATOR_DEPTH] = self.initiator_depth;
        set_u24_hi(b, REMOTE_EECN, self.remote_eecn);
        set_bits(b, TIMEOUT_TYPE_FLOW, 0, 5, self.remote_cm_response_timeout);
        set_bits(b, TIMEOUT_TYPE_FLOW, 5, 2, self.transport_service_type);
        set_bits(
            b,
            TIMEOUT_TYPE_FLOW,
            7,
            1,
            self.end_to_end_flow_control.into(),
        );
        set_u24_hi(b, STARTING_PSN, self.starting_psn);
        set_bits(b, TIMEOUT_RETRY, 0, 5, self.local_cm_response_timeout);
        set_bits(b, TIMEOUT_RETRY, 5, 3, self.retry_count);
        set_u16(b, PARTITION_KEY, self.partition_key);
        set_bits(b, MTU_RDC_RNR, 0, 4, self.path_mtu);
        set_bits(b, MTU_RDC_RNR, 4, 1, self.rdc_exists.into());
        set_bits(b, MTU_RDC_RNR, 5, 3, self.rnr_retry_count);
        set_bits(b, RETRIES_SRQ_EXT, 0, 4, self.max_cm_retries);
        set_bits(b, RETRIES_SRQ_EXT, 4, 1, self.srq.into());
        set_bits(b, RETRIES_SRQ_EXT, 5, 3, self.extended_transport_type);
        self.primary
            .emit(&mut b[PRIMARY_PATH..PRIMARY_PATH + PATH_LEN]);
        self.alternate
            .emit(&mut b[ALTERNATE_PATH..ALTERNATE_PATH + PATH_LEN]);
        set_bits(b, SAP_SUPPORTED, 5, 1, self.sap_supported.into());
        b[PRIVATE_DATA..PRIVATE_DATA + REQ_PRIVATE_LEN].copy_from_slice(&self.private_data);
    }
}
