//! RoCE packet formats: Ethernet, GRH, IPv4, IPv6, UDP, BTH and extension headers, ICRC.
//!
//! Built as in smoltcp: a zero-copy `*Packet<T: AsRef<[u8]>>` view per header with a checked
//! constructor for untrusted bytes, and a plain `*Repr` with `parse` and `emit`. Each header module
//! names its byte layout in a private `mod field` (ranges and offsets), and nothing else indexes a
//! header by number. Every `emit` has one shape: `emit(&self, buf: &mut [u8], ..)` writes the header
//! at the start of `buf` (panicking if `buf` is too short); a header with a length field also takes
//! the length of what follows it, and the frame-level reprs take the payload and return the length.
//! Unknown opcodes are kept, not rejected. Nothing here holds state or allocates. See
//! `docs/roce-wire.md` for the layouts.
//!
//! - IB transport layer: [`Opcode`], [`BthRepr`], the extension headers and [`IbRepr`] (the whole
//!   stack an opcode prescribes).
//! - Encapsulations: [`EthernetRepr`], [`GrhRepr`] (v1), [`Ipv4Repr`] / [`Ipv6Repr`] + [`UdpRepr`] (v2).
//! - Management: [`mad`] (the 256-byte MADs of QP1) and [`cm`] (the Communication Manager's
//!   REQ / REP / RTU / REJ / DREQ / DREP, rdma_cm's IP header and service IDs).
//! - [`pfc`]: MAC Control pause frames (PFC and global pause), which lossless RoCE runs on.
//! - [`Icrc`] and [`icrc_v1`] / [`icrc_v2_ipv4`] / [`icrc_v2_ipv6`].
//! - A whole frame: [`RoceFrame`] (checked view) and [`RoceFrameRepr`] (parse verifies the ICRC, emit
//!   computes it).
//!
//! ```
//! use std::net::Ipv4Addr;
//! use roceperf::wire::*;
//!
//! // An RC RDMA WRITE ONLY of 5 bytes over RoCE v2/IPv4, as rxe would send it.
//! let payload = b"hello";
//! let mut bth = BthRepr::new(Opcode::RC_RDMA_WRITE_ONLY, 0x11, 0x100);
//! bth.pad_count = pad_len(payload.len()) as u8;
//! bth.ack_req = true;
//! let mut ib = IbRepr::new(bth);
//! ib.reth = Some(RethRepr { va: 0x7f00_0000_1000, rkey: 0x1234, dma_len: 5 });
//! let ip = Ipv4Repr::roce(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
//! let eth = EthernetRepr { dst: MacAddr([2, 0, 0, 0, 0, 2]), src: MacAddr([2, 0, 0, 0, 0, 1]), vlan: None, ethertype: 0 };
//! let frame = RoceFrameRepr { eth, net: NetRepr::V2v4(ip, UdpRepr::roce(0xc123)), ib };
//!
//! let mut buf = [0u8; 128];
//! let len = frame.emit(&mut buf, payload);
//! assert_eq!(len, 14 + 20 + 8 + 28 + 5 + 3 + 4);
//!
//! // Parsing verifies the ICRC and gives back the same repr and payload.
//! let (back, data) = RoceFrameRepr::parse(&buf[..len]).unwrap();
//! assert_eq!(back.ib, ib);
//! assert_eq!(data, payload);
//!
//! // A UDP socket carries BTH through ICRC; the kernel writes the IP and UDP headers.
//! let (ib_back, data) = frame.net.parse_transport(&buf[42..len]).unwrap();
//! assert_eq!((ib_back, data), (ib, &payload[..]));
//! ```
#![warn(missing_docs)]

#[macro_use]
mod field;

mod addr;
mod aeth;
mod atomic;
mod bth;
pub mod cm;
mod cnp;
mod crc32;
mod deth;
mod encap;
mod error;
pub(crate) mod ethernet;
mod frame;
mod grh;
mod ib;
mod icrc;
mod icrc_ipv4_id;
mod ipv4;
mod ipv6;
pub mod mad;
mod opcode;
pub mod pfc;
mod reth;
mod udp;

pub use addr::{Gid, MacAddr};
pub(crate) use aeth::AethPacket;
pub use aeth::{AethKind, AethRepr, NakCode};
pub(crate) use atomic::{AtomicAckEthPacket, AtomicEthPacket};
pub use atomic::{AtomicAckEthRepr, AtomicEthRepr};
pub(crate) use bth::BthPacket;
pub use bth::BthRepr;
pub use cnp::CnpRepr;
pub(crate) use deth::DethPacket;
pub use deth::DethRepr;
pub use encap::Encapsulation;
pub use error::Error;
pub(crate) use error::Result;
pub(crate) use ethernet::EthernetFrame;
pub use ethernet::{EthernetRepr, VlanTag};
pub use frame::{NetRepr, RoceFrame, RoceFrameRepr};
pub(crate) use grh::GrhPacket;
pub use grh::GrhRepr;
pub(crate) use ib::stack_len;
pub use ib::{IbRepr, pad_len};
pub(crate) use icrc::BTH_HEAD_LEN;
pub use icrc::{ICRC_LEN, Icrc, icrc_v1, icrc_v2_ipv4, icrc_v2_ipv6, split_icrc};
pub use icrc_ipv4_id::Ipv4IdCache;
pub(crate) use ipv4::Ipv4Packet;
pub use ipv4::{Ipv4Repr, ipv4_checksum_ok, set_ipv4_ecn};
pub(crate) use ipv6::Ipv6Packet;
pub use ipv6::Ipv6Repr;
pub use opcode::Opcode;
pub(crate) use reth::RethPacket;
pub use reth::RethRepr;
pub(crate) use udp::ROCE_V2_PORT;
pub(crate) use udp::UdpPacket;
pub use udp::UdpRepr;
