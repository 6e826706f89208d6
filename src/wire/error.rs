//! Errors of the wire layer: what was wrong with which header, without allocating.

/// Why a packet could not be parsed or verified. Every variant is cheap to build (no allocation), so a
/// receive path can drop and count bad packets at line rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The buffer ends before the named header or field does.
    #[error(
        "truncated {what}: need {need} bytes, have {have}; the packet was cut short or a length field is wrong"
    )]
    Truncated {
        /// The header or region that did not fit.
        what: &'static str,
        /// Bytes it needs.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// A field holds a value that contradicts the rest of the packet.
    #[error("malformed packet: {0}")]
    Malformed(&'static str),
    /// BTH.PadCnt says there are more pad bytes than bytes after the headers.
    #[error("BTH PadCnt {pad} exceeds the {after_headers} bytes after the IB headers")]
    PadExceedsPayload {
        /// The PadCnt field.
        pad: u8,
        /// Bytes between the end of the IB headers and the ICRC.
        after_headers: usize,
    },
    /// The frame is not RoCE: its EtherType is neither IPv4, IPv6 nor 0x8915.
    #[error("EtherType {0:#06x} is not IPv4 (0x0800), IPv6 (0x86dd) or RoCE v1 (0x8915)")]
    UnknownEtherType(u16),
    /// The IP packet does not carry UDP.
    #[error("IP protocol / next header {0} is not UDP (17); RoCE v2 needs UDP")]
    NotUdp(u8),
    /// The UDP destination port is not the RoCE v2 port.
    #[error("UDP destination port {0} is not RoCE v2 (4791)")]
    NotRocePort(u16),
    /// The GRH does not announce an IB transport header.
    #[error("GRH next header {0:#04x} is not 0x1b (IBA transport)")]
    NotIbTransport(u8),
    /// The ICRC on the wire does not match the one computed over the packet.
    #[error(
        "ICRC mismatch: computed {expected:#010x}, packet carries {found:#010x}; the packet was corrupted or a masked/unmasked field was changed"
    )]
    BadIcrc {
        /// The ICRC computed over the received bytes.
        expected: u32,
        /// The ICRC carried by the packet.
        found: u32,
    },
}

/// Result of the wire layer.
pub(crate) type Result<T> = core::result::Result<T, Error>;
