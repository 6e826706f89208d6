//! rdma_cm's IP addressing on top of the CM: the 36-byte header at the start of a REQ's private
//! data (the kernel's `struct cma_hdr`), and the service ID a port maps to.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::wire::field::{get_array, get_u16, set_u16};
use crate::wire::{Error, Result};

/// Byte layout of the header.
mod field {
    use crate::wire::field::Field;

    /// CMA version (0).
    pub(super) const VERSION: usize = 0;
    /// IP version in bits 7:4.
    pub(crate) const IP_VERSION: usize = 1;
    /// The active side's port.
    pub(crate) const SRC_PORT: Field = 2..4;
    /// The active side's address (IPv4: the last 4 bytes, the first 12 zero).
    pub(crate) const SRC_ADDR: Field = 4..20;
    /// The passive side's address.
    pub(crate) const DST_ADDR: Field = 20..36;
}

/// Length of the header.
pub(crate) const CMA_HEADER_LEN: usize = field::DST_ADDR.end;
/// rdma_cm's port space for reliable connections (`RDMA_PS_TCP`).
pub const RDMA_PS_TCP: u16 = 0x0106;
/// rdma_cm's port space for datagram services (`RDMA_PS_UDP`), resolved with SIDR.
pub const RDMA_PS_UDP: u16 = 0x0111;
/// The Q_Key rdma_cm gives every QP of the UDP port space (`RDMA_UDP_QKEY`).
pub const RDMA_UDP_QKEY: u32 = 0x0123_4567;
/// The only CMA header version.
const CMA_VERSION: u8 = 0;

/// The service ID rdma_cm listens on for `port` in port space `ps`: `ps << 16 | port`
/// (`0x0000000001060000 | port` for [`RDMA_PS_TCP`]).
pub fn service_id(ps: u16, port: u16) -> u64 {
    (u64::from(ps) << 16) | u64::from(port)
}

/// The port of an rdma_cm service ID of port space `ps`, if it is one.
pub(crate) fn service_port(ps: u16, service_id: u64) -> Option<u16> {
    (service_id >> 16 == u64::from(ps)).then_some(service_id as u16)
}

/// The addresses of an rdma_cm connection, as the active side puts them in its REQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CmaHeader {
    /// The active side's address and port.
    pub src: SocketAddr,
    /// The passive side's address (its port is the service ID's).
    pub dst: IpAddr,
}

impl CmaHeader {
    /// Parses the header at the start of a REQ's private data.
    pub fn parse(b: &[u8]) -> Result<CmaHeader> {
        crate::wire::field::need("CMA header", CMA_HEADER_LEN, b.len())?;
        if b[field::VERSION] != CMA_VERSION {
            return Err(Error::Malformed("CMA header version is not 0"));
        }
        let addr = |f| -> IpAddr {
            let raw: [u8; 16] = get_array(b, f);
            match b[field::IP_VERSION] >> 4 {
                4 => IpAddr::V4(Ipv4Addr::new(raw[12], raw[13], raw[14], raw[15])),
                _ => IpAddr::V6(Ipv6Addr::from(raw)),
            }
        };
        if !matches!(b[field::IP_VERSION] >> 4, 4 | 6) {
            return Err(Error::Malformed("CMA header IP version is neither 4 nor 6"));
        }
        Ok(CmaHeader {
            src: SocketAddr::new(addr(field::SRC_ADDR), get_u16(b, field::SRC_PORT)),
            dst: addr(field::DST_ADDR),
        })
    }

    /// Writes the header at the start of `b`. Both addresses must be of one family (the first's
    /// decides the IP version).
    pub fn emit(&self, b: &mut [u8]) {
        let b = &mut b[..CMA_HEADER_LEN];
        b.fill(0);
        b[field::VERSION] = CMA_VERSION;
        let put = |b: &mut [u8], f: core::ops::Range<usize>, ip: IpAddr| match ip {
            IpAddr::V4(v4) => b[f.end - 4..f.end].copy_from_slice(&v4.octets()),
            IpAddr::V6(v6) => b[f].copy_from_slice(&v6.octets()),
        };
        b[field::IP_VERSION] = if self.src.is_ipv4() { 4 << 4 } else { 6 << 4 };
        set_u16(b, field::SRC_PORT, self.src.port());
        put(b, field::SRC_ADDR, self.src.ip());
        put(b, field::DST_ADDR, self.dst);
    }
}
