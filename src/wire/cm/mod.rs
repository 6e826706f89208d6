//! Communication Manager messages (IBTA vol. 1 ch. 12), as Linux's `ib_cm` writes them: the class
//! data of a CM MAD (232 bytes after the MAD header), one repr per message.
//!
//! Connection setup is REQ (active side) → REP (passive side) → RTU (active side); either side may
//! answer a REQ or REP with REJ (and a reason), or with MRA (more time needed); DREQ → DREP tear the
//! connection down. rdma_cm (`librdmacm`, the kernel's `cma.c`) puts a 36-byte [`CmaHeader`] in front
//! of the REQ's private data and derives the service ID from the port ([`service_id`]).
//! Unreliable datagram services are resolved instead with SIDR_REQ → SIDR_REP (rdma_cm's UDP port
//! space, [`RDMA_PS_UDP`]): the reply carries the server's QPN and Q_Key.
//!
//! Fields are named as in the spec's tables; bit fields are read from the most significant bit of
//! their byte, as the kernel's `ibta_vol1_c12.h` declares them.

/// Declares a CM message that carries only the two communication IDs and private data (RTU and
/// DREP share this layout): the struct, `new`, `parse` and `emit`.
macro_rules! comm_ids_message {
    (
        $(#[$doc:meta])*
        $name:ident, $a:literal $what:literal, $private_len:ident,
        local: $local:literal, remote: $remote:literal
    ) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub struct $name {
            #[doc = $local]
            pub local_comm_id: u32,
            #[doc = $remote]
            pub remote_comm_id: u32,
            /// Private data.
            pub private_data: [u8; $private_len],
        }

        impl $name {
            #[doc = concat!($a, " ", $what, " without private data.")]
            pub fn new(local_comm_id: u32, remote_comm_id: u32) -> $name {
                $name {
                    local_comm_id,
                    remote_comm_id,
                    private_data: [0; $private_len],
                }
            }

            #[doc = concat!("Parses the CM class data of the ", $what, ".")]
            pub fn parse(b: &[u8]) -> $crate::wire::Result<$name> {
                super::check(concat!("CM ", $what), b)?;
                Ok($name {
                    local_comm_id: $crate::wire::field::get_u32(b, super::comm_ids::LOCAL),
                    remote_comm_id: $crate::wire::field::get_u32(b, super::comm_ids::REMOTE),
                    private_data: super::private(b, super::comm_ids::END),
                })
            }

            #[doc = concat!("Writes the CM class data of this ", $what, " into `b`.")]
            pub fn emit(&self, b: &mut [u8]) {
                $crate::wire::field::set_u32(b, super::comm_ids::LOCAL, self.local_comm_id);
                $crate::wire::field::set_u32(b, super::comm_ids::REMOTE, self.remote_comm_id);
                super::set_private(b, super::comm_ids::END, &self.private_data);
            }
        }
    };
}

/// The communication IDs CM messages open with: the sender's (every message but the SIDR pair's),
/// then the receiver's (all of those but REQ, which has none yet).
mod comm_ids {
    use crate::wire::field::Field;

    /// The sender's communication ID.
    pub(super) const LOCAL: Field = 0..4;
    /// The receiver's communication ID.
    pub(super) const REMOTE: Field = 4..8;
    /// Where what follows them starts.
    pub(super) const END: usize = REMOTE.end;
}

mod cma;
mod dreq;
mod rej;
mod reply;
mod req;
mod sidr;

pub(crate) use cma::{CMA_HEADER_LEN, service_port};
pub use cma::{CmaHeader, RDMA_PS_TCP, RDMA_PS_UDP, RDMA_UDP_QKEY, service_id};
pub use dreq::{DrepRepr, DreqRepr};
pub use rej::{RejRepr, RejectReason};
pub use reply::{MraRepr, RepRepr, RtuRepr};
pub use req::{CmPath, ReqRepr};
pub(crate) use sidr::{SIDR_REP_PRIVATE_LEN, SIDR_REQ_PRIVATE_LEN};
pub use sidr::{SidrRepRepr, SidrReqRepr, SidrStatus};

use super::mad::{
    CM_CLASS_VERSION, MAD_BASE_VERSION, MAD_DATA_LEN, MAD_LEN, MGMT_CLASS_CM, MadHeader, MadPacket,
};
use super::{Error, Result};

/// AttributeIDs of the CM messages.
pub mod attr {
    /// ConnectRequest.
    pub const REQ: u16 = 0x0010;
    /// MsgRcptAck.
    pub const MRA: u16 = 0x0011;
    /// ConnectReject.
    pub const REJ: u16 = 0x0012;
    /// ConnectReply.
    pub const REP: u16 = 0x0013;
    /// ReadyToUse.
    pub const RTU: u16 = 0x0014;
    /// DisconnectRequest.
    pub const DREQ: u16 = 0x0015;
    /// DisconnectReply.
    pub const DREP: u16 = 0x0016;
    /// ServiceIDResolutionRequest.
    pub const SIDR_REQ: u16 = 0x0017;
    /// ServiceIDResolutionResponse.
    pub const SIDR_REP: u16 = 0x0018;
}

/// Transport service type of a REQ (`CM_REQ_TRANSPORT_SERVICE_TYPE`).
pub mod service_type {
    /// Reliable Connection.
    pub const RC: u8 = 0;
    /// Unreliable Connection.
    pub const UC: u8 = 1;
}

/// Which message a REJ or MRA answers (`MessageRejected`, `MessageMRAed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Answered {
    /// The REQ.
    Req,
    /// The REP.
    Rep,
    /// Anything else (or a value the spec reserves).
    Other,
}

impl Answered {
    fn from_bits(v: u8) -> Answered {
        match v {
            0 => Answered::Req,
            1 => Answered::Rep,
            _ => Answered::Other,
        }
    }
    fn bits(self) -> u8 {
        match self {
            Answered::Req => 0,
            Answered::Rep => 1,
            Answered::Other => 2,
        }
    }
}

/// One CM message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CmMessage {
    /// ConnectRequest.
    Req(Box<ReqRepr>),
    /// MsgRcptAck.
    Mra(MraRepr),
    /// ConnectReject.
    Rej(Box<RejRepr>),
    /// ConnectReply.
    Rep(Box<RepRepr>),
    /// ReadyToUse.
    Rtu(RtuRepr),
    /// DisconnectRequest.
    Dreq(DreqRepr),
    /// DisconnectReply.
    Drep(DrepRepr),
    /// ServiceIDResolutionRequest.
    SidrReq(Box<SidrReqRepr>),
    /// ServiceIDResolutionResponse.
    SidrRep(Box<SidrRepRepr>),
}

impl CmMessage {
    /// The AttributeID that carries this message.
    pub fn attr_id(&self) -> u16 {
        match self {
            CmMessage::Req(_) => attr::REQ,
            CmMessage::Mra(_) => attr::MRA,
            CmMessage::Rej(_) => attr::REJ,
            CmMessage::Rep(_) => attr::REP,
            CmMessage::Rtu(_) => attr::RTU,
            CmMessage::Dreq(_) => attr::DREQ,
            CmMessage::Drep(_) => attr::DREP,
            CmMessage::SidrReq(_) => attr::SIDR_REQ,
            CmMessage::SidrRep(_) => attr::SIDR_REP,
        }
    }

    /// The message's name as the spec abbreviates it.
    pub fn name(&self) -> &'static str {
        match self {
            CmMessage::Req(_) => "REQ",
            CmMessage::Mra(_) => "MRA",
            CmMessage::Rej(_) => "REJ",
            CmMessage::Rep(_) => "REP",
            CmMessage::Rtu(_) => "RTU",
            CmMessage::Dreq(_) => "DREQ",
            CmMessage::Drep(_) => "DREP",
            CmMessage::SidrReq(_) => "SIDR_REQ",
            CmMessage::SidrRep(_) => "SIDR_REP",
        }
    }

    /// The sender's communication ID (every CM message starts with it; a SIDR message's is the
    /// requester's RequestID).
    pub fn local_comm_id(&self) -> u32 {
        match self {
            CmMessage::Req(m) => m.local_comm_id,
            CmMessage::Mra(m) => m.local_comm_id,
            CmMessage::Rej(m) => m.local_comm_id,
            CmMessage::Rep(m) => m.local_comm_id,
            CmMessage::Rtu(m) => m.local_comm_id,
            CmMessage::Dreq(m) => m.local_comm_id,
            CmMessage::Drep(m) => m.local_comm_id,
            CmMessage::SidrReq(m) => m.request_id,
            CmMessage::SidrRep(m) => m.request_id,
        }
    }

    /// Parses a whole MAD: `(TransactionID, message)`. Fails on a MAD that is not a CM message of
    /// class version 2, or whose AttributeID names no message parsed here (LAP, APR).
    pub fn parse(mad: &[u8]) -> Result<(u64, CmMessage)> {
        let p = MadPacket::new_checked(mad)?;
        if p.base_version() != MAD_BASE_VERSION {
            return Err(Error::Malformed("MAD base version is not 1"));
        }
        if p.mgmt_class() != MGMT_CLASS_CM {
            return Err(Error::Malformed("MAD class is not the CM (0x07)"));
        }
        if p.class_version() != CM_CLASS_VERSION {
            return Err(Error::Malformed("CM class version is not 2"));
        }
        let d = p.data();
        let m = match p.attr_id() {
            attr::REQ => CmMessage::Req(Box::new(ReqRepr::parse(d)?)),
            attr::MRA => CmMessage::Mra(MraRepr::parse(d)?),
            attr::REJ => CmMessage::Rej(Box::new(RejRepr::parse(d)?)),
            attr::REP => CmMessage::Rep(Box::new(RepRepr::parse(d)?)),
            attr::RTU => CmMessage::Rtu(RtuRepr::parse(d)?),
            attr::DREQ => CmMessage::Dreq(DreqRepr::parse(d)?),
            attr::DREP => CmMessage::Drep(DrepRepr::parse(d)?),
            attr::SIDR_REQ => CmMessage::SidrReq(Box::new(SidrReqRepr::parse(d)?)),
            attr::SIDR_REP => CmMessage::SidrRep(Box::new(SidrRepRepr::parse(d)?)),
            _ => {
                return Err(Error::Malformed(
                    "CM attribute is not REQ/MRA/REJ/REP/RTU/DREQ/DREP/SIDR_REQ/SIDR_REP",
                ));
            }
        };
        Ok((p.tid(), m))
    }

    /// Writes the whole 256-byte MAD (header with `tid`, then the message) into `buf`; returns
    /// [`MAD_LEN`]. Panics if `buf` is shorter.
    pub fn emit(&self, tid: u64, buf: &mut [u8]) -> usize {
        let mad = &mut buf[..MAD_LEN];
        MadHeader::cm(self.attr_id(), tid).emit(mad);
        let mut p = MadPacket::new_unchecked(mad);
        let d = p.data_mut();
        d.fill(0);
        match self {
            CmMessage::Req(m) => m.emit(d),
            CmMessage::Mra(m) => m.emit(d),
            CmMessage::Rej(m) => m.emit(d),
            CmMessage::Rep(m) => m.emit(d),
            CmMessage::Rtu(m) => m.emit(d),
            CmMessage::Dreq(m) => m.emit(d),
            CmMessage::Drep(m) => m.emit(d),
            CmMessage::SidrReq(m) => m.emit(d),
            CmMessage::SidrRep(m) => m.emit(d),
        }
        MAD_LEN
    }
}

/// Fails unless `data` holds the 232 bytes of CM class data.
fn check(what: &'static str, data: &[u8]) -> Result<()> {
    super::field::need(what, MAD_DATA_LEN, data.len())
}

/// A bit field of CM class data: `width` bits of byte `at`, `skip` bits below its most significant
/// bit (the spec's bit offset), as the kernel's `IBA_FIELD_BLOC` places them.
#[derive(Debug, Clone, Copy)]
struct Bits {
    at: usize,
    skip: u32,
    width: u32,
}

impl Bits {
    /// The field `width` bits wide, `skip` bits into byte `at`.
    const fn new(at: usize, skip: u32, width: u32) -> Bits {
        Bits { at, skip, width }
    }

    /// How far the field's lowest bit sits above bit 0 of its byte, and its mask there.
    #[inline]
    fn shift_mask(self) -> (u32, u8) {
        let shift = 8 - self.skip - self.width;
        (shift, (((1u16 << self.width) - 1) as u8) << shift)
    }
}

/// Reads the bit field `f`.
#[inline]
fn get_bits(b: &[u8], f: Bits) -> u8 {
    let (shift, mask) = f.shift_mask();
    (b[f.at] & mask) >> shift
}

/// Writes the low bits of `v` into the bit field `f`, leaving the byte's other bits.
#[inline]
fn set_bits(b: &mut [u8], f: Bits, v: u8) {
    let (shift, mask) = f.shift_mask();
    b[f.at] = (b[f.at] & !mask) | ((v << shift) & mask);
}

/// Reads the top 24 bits of the big-endian word at `at` (QPNs, PSNs, EECNs: a byte follows them).
#[inline]
fn get_u24_hi(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([0, b[at], b[at + 1], b[at + 2]])
}

/// Writes the low 24 bits of `v` into the 3 bytes at `at`.
#[inline]
fn set_u24_hi(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 3].copy_from_slice(&v.to_be_bytes()[1..]);
}

/// Copies the private data at `at` into an array of its fixed size.
#[inline]
fn private<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    b[at..at + N].try_into().expect("bounds checked by check()")
}

/// Writes private data (or another fixed-size block) at `at`, as [`private`] reads it.
#[inline]
fn set_private<const N: usize>(b: &mut [u8], at: usize, data: &[u8; N]) {
    b[at..at + N].copy_from_slice(data);
}

#[cfg(test)]
mod tests;
