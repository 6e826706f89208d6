//! Service ID Resolution: SIDR_REQ (table 119) and SIDR_REP (table 120), with which an unreliable
//! datagram client learns the QPN and Q_Key behind a service ID (rdma_cm's UDP port space).

use super::{check, get_u24_hi, private, set_private, set_u24_hi};
use crate::wire::Result;
use crate::wire::field::{get_u16, get_u32, get_u64, set_u16, set_u32, set_u64};

/// Byte layout of the SIDR_REQ within the CM class data.
mod req_field {
    use crate::wire::field::Field;

    pub(super) const REQUEST_ID: Field = 0..4;
    pub(super) const PARTITION_KEY: Field = 4..6;
    pub(super) const SERVICE_ID: Field = 8..16;
    pub(super) const PRIVATE_DATA: usize = 16;
}

/// Byte layout of the SIDR_REP within the CM class data.
mod rep_field {
    use crate::wire::field::Field;

    pub(super) const REQUEST_ID: Field = 0..4;
    pub(super) const STATUS: usize = 4;
    pub(super) const INFO_LENGTH: usize = 5;
    /// QPN (24 bits), then a vendor byte.
    pub(super) const QPN: usize = 8;
    pub(super) const SERVICE_ID: Field = 12..20;
    pub(super) const QKEY: Field = 20..24;
    pub(super) const INFO: usize = 24;
    pub(super) const PRIVATE_DATA: usize = 96;
}

/// Bytes of private data a SIDR_REQ carries.
pub(crate) const SIDR_REQ_PRIVATE_LEN: usize = 216;
/// Bytes of additional information a SIDR_REP carries.
pub(crate) const SIDR_REP_INFO_LEN: usize = 72;
/// Bytes of private data a SIDR_REP carries.
pub(crate) const SIDR_REP_PRIVATE_LEN: usize = 136;

/// The fields of a SIDR_REQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SidrReqRepr {
    /// The requester's ID for this resolution (echoed in the SIDR_REP).
    pub request_id: u32,
    /// The partition the datagrams will use.
    pub partition_key: u16,
    /// The service to resolve (rdma_cm: `RDMA_PS_UDP << 16 | port`).
    pub service_id: u64,
    /// Private data (rdma_cm: its 36-byte header, then the user's).
    pub private_data: [u8; SIDR_REQ_PRIVATE_LEN],
}

impl SidrReqRepr {
    /// Parses the CM class data of a SIDR_REQ.
    pub fn parse(b: &[u8]) -> Result<SidrReqRepr> {
        check("CM SIDR_REQ", b)?;
        use req_field::*;
        Ok(SidrReqRepr {
            request_id: get_u32(b, REQUEST_ID),
            partition_key: get_u16(b, PARTITION_KEY),
            service_id: get_u64(b, SERVICE_ID),
            private_data: private(b, PRIVATE_DATA),
        })
    }

    /// Writes the CM class data of this SIDR_REQ into `b` (reserved bytes left as they are).
    pub fn emit(&self, b: &mut [u8]) {
        use req_field::*;
        set_u32(b, REQUEST_ID, self.request_id);
        set_u16(b, PARTITION_KEY, self.partition_key);
        set_u64(b, SERVICE_ID, self.service_id);
        set_private(b, PRIVATE_DATA, &self.private_data);
    }
}

/// SIDR_REP status (table 120's `Status`, the kernel's `enum ib_cm_sidr_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SidrStatus {
    /// The QPN and Q_Key are valid.
    Success,
    /// The service ID is not supported (nobody listens on it).
    Unsupported,
    /// The service provider rejected the request.
    Reject,
    /// No QP is available for the service.
    NoQp,
    /// Redirected (the additional information says where).
    Redirect,
    /// The requester's class version is not supported.
    UnsupportedVersion,
    /// A value the spec reserves.
    Other(u8),
}

impl SidrStatus {
    /// The status of a wire value.
    pub fn from_code(v: u8) -> SidrStatus {
        match v {
            0 => SidrStatus::Success,
            1 => SidrStatus::Unsupported,
            2 => SidrStatus::Reject,
            3 => SidrStatus::NoQp,
            4 => SidrStatus::Redirect,
            5 => SidrStatus::UnsupportedVersion,
            v => SidrStatus::Other(v),
        }
    }

    /// The wire value.
    pub fn code(self) -> u8 {
        match self {
            SidrStatus::Success => 0,
            SidrStatus::Unsupported => 1,
            SidrStatus::Reject => 2,
            SidrStatus::NoQp => 3,
            SidrStatus::Redirect => 4,
            SidrStatus::UnsupportedVersion => 5,
            SidrStatus::Other(v) => v,
        }
    }
}

impl core::fmt::Display for SidrStatus {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let name = match self {
            SidrStatus::Success => "success",
            SidrStatus::Unsupported => "service ID not supported",
            SidrStatus::Reject => "rejected",
            SidrStatus::NoQp => "no QP available",
            SidrStatus::Redirect => "redirect",
            SidrStatus::UnsupportedVersion => "class version not supported",
            SidrStatus::Other(_) => "reserved",
        };
        write!(f, "\"{name}\" (status {})", self.code())
    }
}

/// The fields of a SIDR_REP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SidrRepRepr {
    /// The requester's ID (from its SIDR_REQ).
    pub request_id: u32,
    /// Whether the QPN and Q_Key below are valid, and why not.
    pub status: SidrStatus,
    /// Valid bytes of [`info`](Self::info).
    pub info_length: u8,
    /// The QPN serving the service (24 bits).
    pub qpn: u32,
    /// The service ID resolved.
    pub service_id: u64,
    /// The Q_Key datagrams to that QPN must carry.
    pub qkey: u32,
    /// Additional information (a redirect's ClassPortInfo).
    pub info: [u8; SIDR_REP_INFO_LEN],
    /// Private data.
    pub private_data: [u8; SIDR_REP_PRIVATE_LEN],
}

impl SidrRepRepr {
    /// A SIDR_REP for `req` with `status`, QPN and Q_Key, without private data.
    pub fn answer(req: &SidrReqRepr, status: SidrStatus, qpn: u32, qkey: u32) -> SidrRepRepr {
        SidrRepRepr {
            request_id: req.request_id,
            status,
            info_length: 0,
            qpn,
            service_id: req.service_id,
            qkey,
            info: [0; SIDR_REP_INFO_LEN],
            private_data: [0; SIDR_REP_PRIVATE_LEN],
        }
    }

    /// Parses the CM class data of a SIDR_REP.
    pub fn parse(b: &[u8]) -> Result<SidrRepRepr> {
        check("CM SIDR_REP", b)?;
        use rep_field::*;
        Ok(SidrRepRepr {
            request_id: get_u32(b, REQUEST_ID),
            status: SidrStatus::from_code(b[STATUS]),
            info_length: b[INFO_LENGTH],
            qpn: get_u24_hi(b, QPN),
            service_id: get_u64(b, SERVICE_ID),
            qkey: get_u32(b, QKEY),
            info: private(b, INFO),
            private_data: private(b, PRIVATE_DATA),
        })
    }

    /// Writes the CM class data of this SIDR_REP into `b` (reserved bytes left as they are).
    pub fn emit(&self, b: &mut [u8]) {
        use rep_field::*;
        set_u32(b, REQUEST_ID, self.request_id);
        b[STATUS] = self.status.code();
        b[INFO_LENGTH] = self.info_length;
        set_u24_hi(b, QPN, self.qpn);
        set_u64(b, SERVICE_ID, self.service_id);
        set_u32(b, QKEY, self.qkey);
        set_private(b, INFO, &self.info);
        set_private(b, PRIVATE_DATA, &self.private_data);
    }
}
