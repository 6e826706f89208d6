//! ACK Extended Transport Header (4 bytes): syndrome and MSN of an ACK, NAK or READ response.

/// Byte layout of the AETH.
mod field {
    use crate::wire::field::Field;

    /// Syndrome.
    pub(crate) const SYNDROME: usize = 0;
    /// Message sequence number (24 bits).
    pub(super) const MSN: Field = 1..4;
}

header!(
    /// A view of an AETH at the start of a buffer.
    AethPacket, "AETH", len = field::MSN.end;
    get {
        /// Syndrome byte (ACK / RNR NAK / NAK and its code).
        pub syndrome: u8 = field::SYNDROME;
        /// Message sequence number (24 bits).
        pub msn: u24 = field::MSN;
    }
    set {
        /// Sets the syndrome.
        pub(crate) set_syndrome: u8 = field::SYNDROME;
        /// Sets the MSN (low 24 bits are used).
        pub(crate) set_msn: u24 = field::MSN;
    }
);

/// NAK code: the low 5 bits of a NAK syndrome (0x60 | code).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NakCode {
    /// 0: PSN sequence error (the AETH MSN and BTH PSN tell where to resume).
    PsnSequenceError,
    /// 1: invalid request.
    InvalidRequest,
    /// 2: remote access error (bad R_Key or range).
    RemoteAccessError,
    /// 3: remote operational error.
    RemoteOperationalError,
    /// 4: invalid RD request (RD only).
    InvalidRdRequest,
    /// Any other (reserved) code, kept.
    Other(u8),
}

impl NakCode {
    /// The 5-bit code.
    pub fn code(self) -> u8 {
        match self {
            NakCode::PsnSequenceError => 0,
            NakCode::InvalidRequest => 1,
            NakCode::RemoteAccessError => 2,
            NakCode::RemoteOperationalError => 3,
            NakCode::InvalidRdRequest => 4,
            NakCode::Other(c) => c & 0x1f,
        }
    }

    /// The code named by the low 5 bits of `c`.
    pub fn from_code(c: u8) -> Self {
        match c & 0x1f {
            0 => NakCode::PsnSequenceError,
            1 => NakCode::InvalidRequest,
            2 => NakCode::RemoteAccessError,
            3 => NakCode::RemoteOperationalError,
            4 => NakCode::InvalidRdRequest,
            c => NakCode::Other(c),
        }
    }
}

/// What an AETH syndrome means (roce-wire.md §2.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AethKind {
    /// ACK with a credit code (0x1F = unlimited / invalid, what rxe sends).
    Ack {
        /// Credit code, bits 4-0.
        credits: u8,
    },
    /// RNR NAK with an RNR timer code (bits 4-0).
    RnrNak {
        /// RNR timer code (roce-wire.md §6.7).
        timer: u8,
    },
    /// NAK with its code.
    Nak(NakCode),
    /// Type bits 10, or the reserved bit 7 set: the whole syndrome, kept. rxe treats it as an error.
    Reserved(u8),
}

/// The fields of an AETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AethRepr {
    /// Syndrome byte.
    pub syndrome: u8,
    /// Message sequence number (24 bits; emit uses the low 24).
    pub msn: u32,
}

impl AethRepr {
    /// Credit code for "no credit information", which rxe always sends.
    pub(crate) const CREDITS_UNLIMITED: u8 = 0x1f;

    /// A positive ACK with unlimited credits (syndrome 0x1F), as rxe sends it.
    pub fn ack(msn: u32) -> AethRepr {
        AethRepr {
            syndrome: Self::CREDITS_UNLIMITED,
            msn,
        }
    }

    /// A NAK (syndrome 0x60 | code).
    pub fn nak(code: NakCode, msn: u32) -> AethRepr {
        AethRepr {
            syndrome: 0x60 | code.code(),
            msn,
        }
    }

    /// An RNR NAK with a 5-bit timer code (syndrome 0x20 | timer).
    pub(crate) fn rnr_nak(timer: u8, msn: u32) -> AethRepr {
        AethRepr {
            syndrome: 0x20 | (timer & 0x1f),
            msn,
        }
    }

    /// Decodes the syndrome.
    pub fn kind(&self) -> AethKind {
        let s = self.syndrome;
        if s & 0x80 != 0 {
            return AethKind::Reserved(s);
        }
        match (s >> 5) & 0x3 {
            0b00 => AethKind::Ack { credits: s & 0x1f },
            0b01 => AethKind::RnrNak { timer: s & 0x1f },
            0b11 => AethKind::Nak(NakCode::from_code(s)),
            _ => AethKind::Reserved(s),
        }
    }

    /// Reads an AETH view.
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(p: &AethPacket<T>) -> Self {
        AethRepr {
            syndrome: p.syndrome(),
            msn: p.msn(),
        }
    }

    /// Writes all 4 bytes at the start of `buf`. Panics if `buf` is shorter.
    #[inline]
    pub fn emit(&self, buf: &mut [u8]) {
        let mut p = AethPacket::new_unchecked(&mut buf[..AethPacket::<&[u8]>::LEN]);
        p.set_syndrome(self.syndrome);
        p.set_msn(self.msn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syndromes_decode_as_roce_wire_lists_them() {
        assert_eq!(AethRepr::ack(1).kind(), AethKind::Ack { credits: 0x1f });
        assert_eq!(AethRepr::ack(1).syndrome, 0x1f);
        let hw = AethRepr {
            syndrome: 0x00,
            msn: 5,
        };
        assert_eq!(hw.kind(), AethKind::Ack { credits: 0 });
        assert_eq!(AethRepr::rnr_nak(14, 0).syndrome, 0x2e);
        assert_eq!(
            AethRepr {
                syndrome: 0x2e,
                msn: 0
            }
            .kind(),
            AethKind::RnrNak { timer: 14 }
        );
        let naks = [
            (0x60, NakCode::PsnSequenceError),
            (0x61, NakCode::InvalidRequest),
            (0x62, NakCode::RemoteAccessError),
            (0x63, NakCode::RemoteOperationalError),
            (0x64, NakCode::InvalidRdRequest),
            (0x7f, NakCode::Other(0x1f)),
        ];
        for (s, code) in naks {
            assert_eq!(
                AethRepr {
                    syndrome: s,
                    msn: 3
                }
                .kind(),
                AethKind::Nak(code)
            );
            assert_eq!(AethRepr::nak(code, 3).syndrome, s);
        }
        assert_eq!(
            AethRepr {
                syndrome: 0x40,
                msn: 0
            }
            .kind(),
            AethKind::Reserved(0x40)
        );
        assert_eq!(
            AethRepr {
                syndrome: 0x9f,
                msn: 0
            }
            .kind(),
            AethKind::Reserved(0x9f)
        );
    }

    #[test]
    fn emit_and_parse() {
        let r = AethRepr::nak(NakCode::PsnSequenceError, 0x030201);
        let mut buf = [0xa5u8; 4];
        r.emit(&mut buf);
        assert_eq!(buf, [0x60, 0x03, 0x02, 0x01]);
        assert_eq!(
            AethRepr::parse(&AethPacket::new_checked(&buf[..]).unwrap()),
            r
        );
        assert!(AethPacket::new_checked(&buf[..3]).is_err());
    }
}
