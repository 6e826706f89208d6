//! Why a queue pair failed where no completion of this side can say it: the request its responder
//! refused with a fatal NAK, or a fatal NAK the peer sent for a PSN this side never sent (a
//! refusal of someone else's request). Kept once, the first, to name in the run's error.

use std::fmt;

use crate::wire::{IbRepr, NakCode, Opcode};

/// The first failure a queue pair cannot report through a completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpFailure {
    /// Our responder answered the request at `psn` with the fatal NAK `nak` and entered ERROR.
    Refused {
        /// The request's PSN.
        psn: u32,
        /// Its BTH opcode, when the request is at hand.
        opcode: Option<Opcode>,
        /// The rkey, address and length it named (RETH or AtomicETH), when it had one.
        target: Option<(u32, u64, u32)>,
        /// The NAK sent.
        nak: NakCode,
    },
    /// The peer answered PSN `psn`, which this side had not sent, with the fatal NAK `nak`: its
    /// queue pair refused a request that was not ours and is in ERROR now.
    ForeignNak {
        /// The NAK's PSN.
        psn: u32,
        /// Its code.
        nak: NakCode,
    },
}

impl QpFailure {
    /// The request in `repr` refused with `nak`.
    pub(super) fn refused(repr: &IbRepr, nak: NakCode) -> QpFailure {
        let target = match (repr.reth, repr.atomic_eth) {
            (Some(r), _) => Some((r.rkey, r.va, r.dma_len)),
            (None, Some(a)) => Some((a.rkey, a.va, 8)),
            (None, None) => None,
        };
        QpFailure::Refused {
            psn: repr.bth.psn,
            opcode: Some(repr.bth.opcode),
            target,
            nak,
        }
    }
}

/// The NAK as IBA names it, with its AETH syndrome.
fn nak_name(nak: NakCode) -> String {
    let name = match nak {
        NakCode::PsnSequenceError => "PSN sequence error",
        NakCode::InvalidRequest => "invalid request",
        NakCode::RemoteAccessError => "remote access error",
        NakCode::RemoteOperationalError => "remote operational error",
        NakCode::InvalidRdRequest => "invalid RD request",
        NakCode::Other(_) => "reserved code",
    };
    let code = match nak {
        NakCode::PsnSequenceError => 0,
        NakCode::InvalidRequest => 1,
        NakCode::RemoteAccessError => 2,
        NakCode::RemoteOperationalError => 3,
        NakCode::InvalidRdRequest => 4,
        NakCode::Other(c) => c,
    };
    format!("NAK {name} (syndrome {:#04x})", 0x60 | code)
}

impl fmt::Display for QpFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            QpFailure::Refused {
                psn,
                opcode,
                target,
                nak,
            } => {
                match opcode {
                    Some(op) => write!(f, "it refused {op} at PSN {psn:#08x} (")?,
                    None => write!(f, "it refused the request at PSN {psn:#08x} (")?,
                }
                match target {
                    Some((rkey, va, len)) => {
                        write!(f, "rkey {rkey:#010x}, address {va:#x}, {len} bytes")?
                    }
                    None => write!(f, "no RETH or AtomicETH")?,
                }
                write!(f, ") with {} and entered the error state", nak_name(nak))?;
                if nak == NakCode::RemoteAccessError {
                    write!(f, ": no region registered here allows that rkey and range")?;
                }
                Ok(())
            }
            QpFailure::ForeignNak { psn, nak } => write!(
                f,
                "the peer answered PSN {psn:#08x}, which this side had not sent, with {}: its queue pair refused a request that did not come from this side (a forged or stray packet) and stopped acknowledging",
                nak_name(nak)
            ),
        }
    }
}
