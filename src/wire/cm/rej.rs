//! ConnectReject (REJ, table 108) and its reasons (table 109).

use super::{Answered, Bits, check, comm_ids, get_bits, private, set_bits, set_private};
use crate::wire::Result;
use crate::wire::field::{get_u16, get_u32, set_u16, set_u32};

/// Byte layout of the REJ within the CM class data, after the communication IDs.
mod field {
    use super::Bits;
    use crate::wire::field::Field;

    /// MessageRejected:2, which message is rejected.
    pub(crate) const MESSAGE_REJECTED: Bits = Bits::new(8, 0, 2);
    /// RejectedInfoLength:7, the bytes of ARI that count.
    pub(crate) const REJECTED_INFO_LENGTH: Bits = Bits::new(9, 0, 7);
    pub(crate) const REASON: Field = 10..12;
    /// Additional Rejection Information.
    pub(crate) const ARI: usize = 12;
    pub(crate) const PRIVATE_DATA: usize = 84;
}

/// Bytes of Additional Rejection Information.
pub(crate) const REJ_ARI_LEN: usize = 72;
/// Bytes of private data a REJ carries.
pub(crate) const REJ_PRIVATE_LEN: usize = 148;

/// Why a REQ or REP was rejected (the reasons a user meets; others keep their number).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RejectReason {
    /// 1: no QP available.
    NoQp,
    /// 3: no resources.
    NoResources,
    /// 4: the sender gave up waiting (its REQ or REP timed out).
    Timeout,
    /// 5: unsupported request.
    UnsupportedRequest,
    /// 6: invalid communication ID.
    InvalidCommId,
    /// 8: nobody listens on the service ID (rdma_cm: no listener on that port).
    InvalidServiceId,
    /// 9: invalid transport service type.
    InvalidTransportType,
    /// 10: stale connection (the QP is still known from an earlier connection).
    StaleConnection,
    /// 12: invalid GID.
    InvalidGid,
    /// 26: invalid path MTU.
    InvalidMtu,
    /// 27: insufficient responder resources.
    InsufficientResponderResources,
    /// 28: the consumer (the application) refused.
    ConsumerDefined,
    /// 29: invalid RNR retry count.
    InvalidRnrRetry,
    /// 30: duplicate local communication ID.
    DuplicateLocalCommId,
    /// 31: unsupported class version.
    InvalidClassVersion,
    /// Any other reason, by number.
    Other(u16),
}

impl RejectReason {
    /// The reason's number on the wire.
    pub fn code(self) -> u16 {
        match self {
            RejectReason::NoQp => 1,
            RejectReason::NoResources => 3,
            RejectReason::Timeout => 4,
            RejectReason::UnsupportedRequest => 5,
            RejectReason::InvalidCommId => 6,
            RejectReason::InvalidServiceId => 8,
            RejectReason::InvalidTransportType => 9,
            RejectReason::StaleConnection => 10,
            RejectReason::InvalidGid => 12,
            RejectReason::InvalidMtu => 26,
            RejectReason::InsufficientResponderResources => 27,
            RejectReason::ConsumerDefined => 28,
            RejectReason::InvalidRnrRetry => 29,
            RejectReason::DuplicateLocalCommId => 30,
            RejectReason::InvalidClassVersion => 31,
            RejectReason::Other(n) => n,
        }
    }

    /// The reason of number `code`.
    pub fn from_code(code: u16) -> RejectReason {
        [
            RejectReason::NoQp,
            RejectReason::NoResources,
            RejectReason::Timeout,
            RejectReason::UnsupportedRequest,
            RejectReason::InvalidCommId,
            RejectReason::InvalidServiceId,
            RejectReason::InvalidTransportType,
            RejectReason::StaleConnection,
            RejectReason::InvalidGid,
            RejectReason::InvalidMtu,
            RejectReason::InsufficientResponderResources,
            RejectReason::ConsumerDefined,
            RejectReason::InvalidRnrRetry,
            RejectReason::DuplicateLocalCommId,
            RejectReason::InvalidClassVersion,
        ]
        .into_iter()
        .find(|r| r.code() == code)
        .unwrap_or(RejectReason::Other(code))
    }

    /// The reason in words, as the spec names it.
    pub fn name(self) -> &'static str {
        match self {
            RejectReason::NoQp => "no QP available",
            RejectReason::NoResources => "no resources",
            RejectReason::Timeout => "timeout",
            RejectReason::UnsupportedRequest => "unsupported request",
            RejectReason::InvalidCommId => "invalid communication ID",
            RejectReason::InvalidServiceId => "invalid service ID",
            RejectReason::InvalidTransportType => "invalid transport service type",
            RejectReason::StaleConnection => "stale connection",
            RejectReason::InvalidGid => "invalid GID",
            RejectReason::InvalidMtu => "invalid path MTU",
            RejectReason::InsufficientResponderResources => "insufficient responder resources",
            RejectReason::ConsumerDefined => "consumer reject",
            RejectReason::InvalidRnrRetry => "invalid RNR retry count",
            RejectReason::DuplicateLocalCommId => "duplicate local communication ID",
            RejectReason::InvalidClassVersion => "invalid class version",
            RejectReason::Other(_) => "other reason",
        }
    }
}

impl std::fmt::Display for RejectReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "\"{}\" (reason {})", self.name(), self.code())
    }
}

/// The fields of a REJ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RejRepr {
    /// The rejecting side's communication ID (0 when it never had one: a REQ nobody took).
    pub local_comm_id: u32,
    /// The rejected side's communication ID.
    pub remote_comm_id: u32,
    /// Which message is rejected.
    pub(crate) message_rejected: Answered,
    /// Bytes of `ari` that mean something (7 bits).
    pub(crate) rejected_info_length: u8,
    /// Why.
    pub reason: RejectReason,
    /// Additional Rejection Information (e.g. the GID that was wrong).
    pub(crate) ari: [u8; REJ_ARI_LEN],
    /// Private data (rdma_cm's `rdma_reject` puts the application's here).
    pub private_data: [u8; REJ_PRIVATE_LEN],
}

impl RejRepr {
    /// A REJ of `message` for `reason`, without additional information or private data.
    pub fn new(
        local_comm_id: u32,
        remote_comm_id: u32,
        message_rejected: Answered,
        reason: RejectReason,
    ) -> RejRepr {
        RejRepr {
            local_comm_id,
            remote_comm_id,
            message_rejected,
            rejected_info_length: 0,
            reason,
            ari: [0; REJ_ARI_LEN],
            private_data: [0; REJ_PRIVATE_LEN],
        }
    }

    /// Parses the CM class data of a REJ.
    pub fn parse(b: &[u8]) -> Result<RejRepr> {
        check("CM REJ", b)?;
        Ok(RejRepr {
            local_comm_id: get_u32(b, comm_ids::LOCAL),
            remote_comm_id: get_u32(b, comm_ids::REMOTE),
            message_rejected: Answered::from_bits(get_bits(b, field::MESSAGE_REJECTED)),
            rejected_info_length: get_bits(b, field::REJECTED_INFO_LENGTH),
            reason: RejectReason::from_code(get_u16(b, field::REASON)),
            ari: private(b, field::ARI),
            private_data: private(b, field::PRIVATE_DATA),
        })
    }

    /// Writes the CM class data of this REJ into `b`.
    pub fn emit(&self, b: &mut [u8]) {
        set_u32(b, comm_ids::LOCAL, self.local_comm_id);
        set_u32(b, comm_ids::REMOTE, self.remote_comm_id);
        set_bits(b, field::MESSAGE_REJECTED, self.message_rejected.bits());
        set_bits(b, field::REJECTED_INFO_LENGTH, self.rejected_info_length);
        set_u16(b, field::REASON, self.reason.code());
        set_private(b, field::ARI, &self.ari);
        set_private(b, field::PRIVATE_DATA, &self.private_data);
    }
}
