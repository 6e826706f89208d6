//! RoCE packet formats: Ethernet, GRH, IPv4, IPv6, UDP, BTH and extension headers, ICRC.
//!
//! Built as in smoltcp: a zero-copy `*Packet<T: AsRef<[u8]>>` view per header with a checked
//! constructor for untrusted bytes, and a plain `*Repr` with `parse` and `emit`. Unknown opcodes are
//! kept, not rejected. Nothing here holds state or allocates. See `docs/roce-wire.md` for the layouts.
//!
//! - IB transport layer: [`Opcode`], [`BthRepr`], the extension headers and [`IbRepr`] (the whole
//!   stack an opcode prescribes).
//! - Encapsulations: [`EthernetRepr`], [`GrhRepr`] (v1), [`Ipv4Repr`] / [`Ipv6Repr`] + [`UdpRepr`] (v2).
//! - [`Icrc`] and [`icrc_v1`] / [`icrc_v2_ipv4`] / [`icrc_v2_ipv6`].
//! - A whole frame: [`RoceFrame`] (checked view) and [`RoceFrameRepr`] (parse verifies the ICRC, emit
//!   computes it).
#![warn(missing_docs)]

#[macro_use]
mod field;

mod aeth;
mod atomic;
mod bth;
mod deth;
mod error;
pub mod ethernet;
mod frame;
mod grh;
mod ib;
mod icrc;
mod ipv4;
mod ipv6;
mod opcode;
mod reth;
mod udp;

pub use aeth::{AethKind, AethPacket, AethRepr, NakCode};
pub use atomic::{AtomicAckEthPacket, AtomicAckEthRepr, AtomicEthPacket, AtomicEthRepr};
pub use bth::{BthPacket, BthRepr};
pub use deth::{DethPacket, DethRepr};
pub use error::{Error, Result};
pub use ethernet::{EthernetFrame, EthernetRepr, MacAddr, VlanTag};
pub use frame::{Encapsulation, NetRepr, RoceFrame, RoceFrameRepr};
pub use grh::{Gid, GrhPacket, GrhRepr, NXTHDR_IBA};
pub use ib::{CNP_RESERVED_LEN, IbRepr, pad_len};
pub use icrc::{ICRC_LEN, Icrc, icrc_v1, icrc_v2_ipv4, icrc_v2_ipv6, split_icrc};
pub use ipv4::{Ipv4Packet, Ipv4Repr, PROTO_UDP};
pub use ipv6::{Ipv6Packet, Ipv6Repr};
pub use opcode::Opcode;
pub use reth::{RethPacket, RethRepr};
pub use udp::{ROCE_V2_PORT, UdpPacket, UdpRepr};
