//! BTH opcodes and the header stack each one prescribes (roce-wire.md §3, ib_pack.h).

use core::fmt;

/// Which extension headers follow the BTH, as a bit set ([`header_set`]); `ib` sums their lengths.
pub(super) mod hdr {
    pub(crate) const RETH: u8 = 1 << 0;
    pub(crate) const AETH: u8 = 1 << 1;
    pub(crate) const IMM: u8 = 1 << 2;
    pub(crate) const IETH: u8 = 1 << 3;
    pub(crate) const DETH: u8 = 1 << 4;
    pub(crate) const ATOMIC: u8 = 1 << 5;
    pub(crate) const ATOMIC_ACK: u8 = 1 << 6;
    /// The 16 reserved bytes that follow a CNP's BTH.
    pub(crate) const CNP_RESV: u8 = 1 << 7;
}

/// BTH opcode. Unknown values are kept (never rejected), so a receiver can count and drop them.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Opcode(pub u8);

macro_rules! opcodes {
    ($( $(#[$doc:meta])* $name:ident = $val:literal, $flags:expr; )*) => {
        impl Opcode {
            $( $(#[$doc])* pub const $name: Opcode = Opcode($val); )*
        }

        /// Name and header set of a known opcode.
        const fn lookup(v: u8) -> Option<(&'static str, u8)> {
            match v {
                $( $val => Some((stringify!($name), $flags)), )*
                _ => None,
            }
        }
    };
}

use hdr::*;

opcodes! {
    /// RC SEND, first packet of a multi-packet message.
    RC_SEND_FIRST = 0x00, 0;
    /// RC SEND, middle packet.
    RC_SEND_MIDDLE = 0x01, 0;
    /// RC SEND, last packet.
    RC_SEND_LAST = 0x02, 0;
    /// RC SEND, last packet, with ImmDt.
    RC_SEND_LAST_WITH_IMMEDIATE = 0x03, IMM;
    /// RC SEND that fits one packet.
    RC_SEND_ONLY = 0x04, 0;
    /// RC SEND that fits one packet, with ImmDt.
    RC_SEND_ONLY_WITH_IMMEDIATE = 0x05, IMM;
    /// RC RDMA WRITE, first packet (carries the RETH).
    RC_RDMA_WRITE_FIRST = 0x06, RETH;
    /// RC RDMA WRITE, middle packet.
    RC_RDMA_WRITE_MIDDLE = 0x07, 0;
    /// RC RDMA WRITE, last packet.
    RC_RDMA_WRITE_LAST = 0x08, 0;
    /// RC RDMA WRITE, last packet, with ImmDt.
    RC_RDMA_WRITE_LAST_WITH_IMMEDIATE = 0x09, IMM;
    /// RC RDMA WRITE that fits one packet.
    RC_RDMA_WRITE_ONLY = 0x0a, RETH;
    /// RC RDMA WRITE that fits one packet, with ImmDt.
    RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE = 0x0b, RETH | IMM;
    /// RC RDMA READ request.
    RC_RDMA_READ_REQUEST = 0x0c, RETH;
    /// RC RDMA READ response, first packet.
    RC_RDMA_READ_RESPONSE_FIRST = 0x0d, AETH;
    /// RC RDMA READ response, middle packet (no AETH).
    RC_RDMA_READ_RESPONSE_MIDDLE = 0x0e, 0;
    /// RC RDMA READ response, last packet.
    RC_RDMA_READ_RESPONSE_LAST = 0x0f, AETH;
    /// RC RDMA READ response that fits one packet.
    RC_RDMA_READ_RESPONSE_ONLY = 0x10, AETH;
    /// RC ACK or NAK.
    RC_ACKNOWLEDGE = 0x11, AETH;
    /// RC atomic response.
    RC_ATOMIC_ACKNOWLEDGE = 0x12, AETH | ATOMIC_ACK;
    /// RC atomic compare-and-swap request.
    RC_COMPARE_SWAP = 0x13, ATOMIC;
    /// RC atomic fetch-and-add request.
    RC_FETCH_ADD = 0x14, ATOMIC;
    /// RC SEND, last packet, invalidating an R_Key.
    RC_SEND_LAST_WITH_INVALIDATE = 0x16, IETH;
    /// RC SEND that fits one packet, invalidating an R_Key.
    RC_SEND_ONLY_WITH_INVALIDATE = 0x17, IETH;
    /// UC SEND, first packet.
    UC_SEND_FIRST = 0x20, 0;
    /// UC SEND, middle packet.
    UC_SEND_MIDDLE = 0x21, 0;
    /// UC SEND, last packet.
    UC_SEND_LAST = 0x22, 0;
    /// UC SEND, last packet, with ImmDt.
    UC_SEND_LAST_WITH_IMMEDIATE = 0x23, IMM;
    /// UC SEND that fits one packet.
    UC_SEND_ONLY = 0x24, 0;
    /// UC SEND that fits one packet, with ImmDt.
    UC_SEND_ONLY_WITH_IMMEDIATE = 0x25, IMM;
    /// UC RDMA WRITE, first packet.
    UC_RDMA_WRITE_FIRST = 0x26, RETH;
    /// UC RDMA WRITE, middle packet.
    UC_RDMA_WRITE_MIDDLE = 0x27, 0;
    /// UC RDMA WRITE, last packet.
    UC_RDMA_WRITE_LAST = 0x28, 0;
    /// UC RDMA WRITE, last packet, with ImmDt.
    UC_RDMA_WRITE_LAST_WITH_IMMEDIATE = 0x29, IMM;
    /// UC RDMA WRITE that fits one packet.
    UC_RDMA_WRITE_ONLY = 0x2a, RETH;
    /// UC RDMA WRITE that fits one packet, with ImmDt.
    UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE = 0x2b, RETH | IMM;
    /// UD SEND (always one packet; DETH follows the BTH).
    UD_SEND_ONLY = 0x64, DETH;
    /// UD SEND with ImmDt.
    UD_SEND_ONLY_WITH_IMMEDIATE = 0x65, DETH | IMM;
    /// RoCE v2 congestion notification packet (BECN set, 16 reserved bytes after the BTH).
    CNP = 0x81, CNP_RESV;
}

/// Bit in [`INFO`] marking an opcode this crate knows.
const KNOWN: u16 = 1 << 8;

/// For each of the 256 opcodes: the header set (bits 0-7) and [`KNOWN`] (bit 8), so the per-packet
/// questions are one table load.
static INFO: [u16; 256] = {
    let mut t = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        if let Some(f) = header_set(i as u8) {
            t[i] = KNOWN | f as u16;
        }
        i += 1;
    }
    t
};

/// The header set ([`hdr`] bits) of opcode `v`, None when this crate does not know it; usable in
/// constants (`ib`'s table of header lengths is built from it).
pub(super) const fn header_set(v: u8) -> Option<u8> {
    match lookup(v) {
        Some((_, f)) => Some(f),
        None => None,
    }
}

impl Opcode {
    /// The header set, or None for an opcode this crate does not know.
    #[inline]
    fn flags(self) -> Option<u8> {
        let v = INFO[usize::from(self.0)];
        if v & KNOWN != 0 { Some(v as u8) } else { None }
    }

    #[inline]
    fn has(self, bit: u8) -> bool {
        INFO[usize::from(self.0)] & u16::from(bit) != 0
    }

    /// True when a RETH follows the BTH (and DETH).
    #[inline]
    pub fn has_reth(self) -> bool {
        self.has(RETH)
    }

    /// True when an AETH follows the BTH.
    #[inline]
    pub fn has_aeth(self) -> bool {
        self.has(AETH)
    }

    /// True when an ImmDt precedes the payload.
    #[inline]
    pub fn has_immdt(self) -> bool {
        self.has(IMM)
    }

    /// True when an IETH (R_Key to invalidate) precedes the payload.
    #[inline]
    pub fn has_ieth(self) -> bool {
        self.has(IETH)
    }

    /// True when a DETH (UD Q_Key and source QP) follows the BTH.
    #[inline]
    pub fn has_deth(self) -> bool {
        self.has(DETH)
    }

    /// True when an AtomicETH follows the BTH.
    #[inline]
    pub fn has_atomic_eth(self) -> bool {
        self.has(ATOMIC)
    }

    /// True when an AtomicAckETH follows the AETH.
    #[inline]
    pub fn has_atomic_ack_eth(self) -> bool {
        self.has(ATOMIC_ACK)
    }

    /// True for a CNP, whose BTH is followed by 16 reserved bytes.
    #[inline]
    pub(crate) fn is_cnp(self) -> bool {
        self.has(CNP_RESV)
    }

    /// True when this crate knows the opcode's header stack.
    #[inline]
    pub fn is_known(self) -> bool {
        self.flags().is_some()
    }

    /// The ib_pack.h name without the `IB_OPCODE_` prefix, e.g. "RC_RDMA_WRITE_ONLY", or "UNKNOWN".
    pub fn name(self) -> &'static str {
        match lookup(self.0) {
            Some((n, _)) => n,
            None => "UNKNOWN",
        }
    }
}

impl fmt::Debug for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Opcode({:#04x} {})", self.0, self.name())
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_known() {
            f.write_str(self.name())
        } else {
            write!(f, "UNKNOWN({:#04x})", self.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_lengths_match_the_rxe_table() {
        // roce-wire.md §3 "hdr len" column.
        let table: &[(Opcode, usize)] = &[
            (Opcode::RC_SEND_FIRST, 12),
            (Opcode::RC_SEND_LAST_WITH_IMMEDIATE, 16),
            (Opcode::RC_SEND_ONLY, 12),
            (Opcode::RC_SEND_ONLY_WITH_IMMEDIATE, 16),
            (Opcode::RC_RDMA_WRITE_FIRST, 28),
            (Opcode::RC_RDMA_WRITE_MIDDLE, 12),
            (Opcode::RC_RDMA_WRITE_LAST_WITH_IMMEDIATE, 16),
            (Opcode::RC_RDMA_WRITE_ONLY, 28),
            (Opcode::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE, 32),
            (Opcode::RC_RDMA_READ_REQUEST, 28),
            (Opcode::RC_RDMA_READ_RESPONSE_FIRST, 16),
            (Opcode::RC_RDMA_READ_RESPONSE_MIDDLE, 12),
            (Opcode::RC_RDMA_READ_RESPONSE_LAST, 16),
            (Opcode::RC_RDMA_READ_RESPONSE_ONLY, 16),
            (Opcode::RC_ACKNOWLEDGE, 16),
            (Opcode::RC_ATOMIC_ACKNOWLEDGE, 24),
            (Opcode::RC_COMPARE_SWAP, 40),
            (Opcode::RC_FETCH_ADD, 40),
            (Opcode::RC_SEND_LAST_WITH_INVALIDATE, 16),
            (Opcode::RC_SEND_ONLY_WITH_INVALIDATE, 16),
            (Opcode::UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE, 32),
            (Opcode::UD_SEND_ONLY, 20),
            (Opcode::UD_SEND_ONLY_WITH_IMMEDIATE, 24),
            (Opcode::CNP, 28),
        ];
        for &(op, len) in table {
            assert_eq!(crate::wire::ib::stack_len(op), Some(len), "{op:?}");
        }
    }

    #[test]
    fn uc_opcodes_are_rc_plus_0x20() {
        for low in 0..=0x0bu8 {
            let rc = Opcode(low);
            let uc = Opcode(0x20 | low);
            assert_eq!(
                crate::wire::ib::stack_len(rc),
                crate::wire::ib::stack_len(uc)
            );
            assert_eq!(&rc.name()[3..], &uc.name()[3..]);
            assert!(uc.name().starts_with("UC_"));
        }
        // UC has no READ, ACK, atomics or invalidate.
        for low in 0x0c..=0x1fu8 {
            assert!(!Opcode(0x20 | low).is_known(), "{low:#x}");
        }
    }

    #[test]
    fn unknown_opcodes_are_kept_and_named_unknown() {
        for v in [0x15u8, 0x18, 0x1c, 0x1d, 0x40, 0x5f, 0x60, 0x66, 0x80, 0xff] {
            let op = Opcode(v);
            assert!(!op.is_known());
            assert_eq!(crate::wire::ib::stack_len(op), None);
            assert_eq!(op.name(), "UNKNOWN");
            assert!(!op.has_reth() && !op.has_aeth() && !op.has_immdt());
            assert_eq!(op.0, v);
        }
    }

    #[test]
    fn names_and_predicates() {
        assert_eq!(Opcode::RC_RDMA_WRITE_ONLY.name(), "RC_RDMA_WRITE_ONLY");
        assert_eq!(Opcode(0x0a), Opcode::RC_RDMA_WRITE_ONLY);
        assert_eq!(Opcode::UD_SEND_ONLY_WITH_IMMEDIATE.0, 0x65);
        assert!(Opcode::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE.has_reth());
        assert!(Opcode::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE.has_immdt());
        assert!(Opcode::RC_ATOMIC_ACKNOWLEDGE.has_aeth());
        assert!(Opcode::RC_ATOMIC_ACKNOWLEDGE.has_atomic_ack_eth());
        assert!(Opcode::RC_FETCH_ADD.has_atomic_eth());
        assert!(Opcode::RC_SEND_ONLY_WITH_INVALIDATE.has_ieth());
        assert!(Opcode::UD_SEND_ONLY.has_deth());
        assert!(!Opcode::RC_RDMA_READ_RESPONSE_MIDDLE.has_aeth());
        assert!(Opcode::CNP.is_cnp());
        assert_eq!(format!("{}", Opcode(0x99)), "UNKNOWN(0x99)");
    }
}
