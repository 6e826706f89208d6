//! RoCE packet formats: Ethernet, GRH, IPv4, IPv6, UDP, BTH and extension headers, ICRC.
//!
//! Built as in smoltcp: a zero-copy `*Packet<T: AsRef<[u8]>>` view per header with a checked
//! constructor for untrusted bytes, and a plain `*Repr` with `parse` and `emit`. Unknown opcodes are
//! kept, not rejected. Nothing here holds state or allocates. See `docs/roce-wire.md` for the layouts.
#![warn(missing_docs)]

#[macro_use]
mod field;

mod aeth;
mod atomic;
mod bth;
mod deth;
mod error;
mod ib;
mod opcode;
mod reth;

pub use aeth::{AethKind, AethPacket, AethRepr, NakCode};
pub use atomic::{AtomicAckEthPacket, AtomicAckEthRepr, AtomicEthPacket, AtomicEthRepr};
pub use bth::{BthPacket, BthRepr};
pub use deth::{DethPacket, DethRepr};
pub use error::{Error, Result};
pub use ib::{CNP_RESERVED_LEN, IbRepr, pad_len};
pub use opcode::Opcode;
pub use reth::{RethPacket, RethRepr};
