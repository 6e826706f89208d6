//! The Congestion Notification Packet (RoCE v2 Annex A17.9.3): BTH opcode 0x81 with BECN set, then
//! 16 reserved zero bytes. A notification point sends it to the queue pair whose packets arrived
//! CE-marked; that queue pair's reaction point lowers its rate.

use super::{BthRepr, Error, IbRepr, Opcode, Result};

/// A CNP: all it carries is the queue pair it is for (the ConnectX-4 Lx capture in
/// `tests/data/vectors/v2_cnp_connectx4lx.hex` is the reference).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CnpRepr {
    /// The queue pair whose rate must come down: the sender of the CE-marked packets.
    pub dest_qp: u32,
}

impl CnpRepr {
    /// Bytes from the BTH to the ICRC: the BTH and the 16 reserved bytes.
    pub const LEN: usize = 28;

    /// Reads a CNP from its BTH on (ICRC excluded; checked by the caller, as for every packet).
    /// Anything that is not a CNP as ConnectX sends it is an error: another opcode, BECN clear, a
    /// pad, or bytes after the reserved block.
    pub fn parse(ib: &[u8]) -> Result<CnpRepr> {
        let (repr, rest) = IbRepr::parse(ib)?;
        let bth = repr.bth;
        if bth.opcode != Opcode::CNP || !bth.becn || bth.pad_count != 0 || !rest.is_empty() {
            return Err(Error::Malformed(
                "a CNP has opcode 0x81, BECN set, no pad and no payload",
            ));
        }
        Ok(CnpRepr {
            dest_qp: bth.dest_qp,
        })
    }

    /// The header stack a CNP is: BTH (opcode 0x81, BECN 1, FECN 0, P_Key 0xFFFF, PSN 0, AckReq 0).
    pub fn ib(&self) -> IbRepr {
        let mut bth = BthRepr::new(Opcode::CNP, self.dest_qp, 0);
        bth.becn = true;
        IbRepr::new(bth)
    }

    /// Writes the CNP's [`LEN`](Self::LEN) bytes at the start of `buf`; returns that length.
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        self.ib().emit(buf);
        Self::LEN
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cnp_round_trips_and_anything_else_is_refused() {
        let mut buf = [0xaau8; CnpRepr::LEN];
        let cnp = CnpRepr { dest_qp: 0x118 };
        assert_eq!(cnp.emit(&mut buf), 28);
        assert_eq!(
            &buf[..12],
            &[0x81, 0, 0xff, 0xff, 0x40, 0, 0x01, 0x18, 0, 0, 0, 0]
        );
        assert!(buf[12..].iter().all(|&b| b == 0), "16 reserved zero bytes");
        assert_eq!(CnpRepr::parse(&buf).unwrap(), cnp);
        let mut no_becn = buf;
        no_becn[4] = 0;
        assert!(CnpRepr::parse(&no_becn).is_err());
        let mut other = buf;
        other[0] = Opcode::RC_ACKNOWLEDGE.0;
        assert!(CnpRepr::parse(&other).is_err());
        assert!(CnpRepr::parse(&buf[..20]).is_err(), "truncated");
    }
}
