//! How the requester recovers from loss, and why it goes back: the sub-state it owns
//! ([`LossRecovery`]: go-back-N as rxe, go-back-N with a probe, selective repeat) and the cause of
//! a retry ([`RetryCause`]). The requester (`requester.rs`) moves them; they hold no logic of its.

use super::gbn::GbnLoss;
use super::sack::Sack;

/// Why the send queue goes back to its oldest unacknowledged PSN.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum RetryCause {
    /// The retransmission timer expired.
    Timeout,
    /// The responder sent NAK PSN sequence error.
    NakSequence,
    /// An ACK passed a READ/atomic whose responses never came.
    ImpliedNak,
    /// The ACK of a probe named the probe and nothing after it (`gbn.rs`).
    Probe,
}

/// How the requester recovers from loss: its sub-state, fixed when the QP is created.
///
/// An explicit tag (`repr(u8)`), not a niche in `GbnLoss`'s fields: the idle check every poll
/// makes (`Requester::may_resend`) then reads it with one compare.
#[repr(u8)]
pub(super) enum LossRecovery {
    /// Go-back-N as rxe: the configured window, the ACK timeout.
    GoBackN,
    /// Go-back-N between roceperf endpoints (`QpConfig::gbn_fast`): a probe after the measured
    /// round trip, and a window that reacts to loss.
    Probing(GbnLoss),
    /// Selective repeat: only what is missing is sent again.
    Selective(Box<Sack>),
}

impl LossRecovery {
    /// Selective repeat's state, where the caller knows it runs.
    #[inline]
    pub(super) fn sack(&mut self) -> &mut Sack {
        match self {
            LossRecovery::Selective(sr) => sr,
            _ => unreachable!("selective repeat is on"),
        }
    }

    /// Selective repeat's state, to read, where the caller knows it runs.
    #[inline]
    pub(super) fn sack_ref(&self) -> &Sack {
        match self {
            LossRecovery::Selective(sr) => sr,
            _ => unreachable!("selective repeat is on"),
        }
    }

    /// Go-back-N's probe and window, when they run.
    #[inline]
    pub(super) fn gbn(&mut self) -> Option<&mut GbnLoss> {
        match self {
            LossRecovery::Probing(g) => Some(g),
            _ => None,
        }
    }

    /// Selective repeat runs: request packets carry its extension.
    #[inline]
    pub(super) fn is_selective(&self) -> bool {
        matches!(self, LossRecovery::Selective(_))
    }

    /// Round trips are measured and a silence is answered after one (selective repeat, `gbn`).
    #[inline]
    pub(super) fn fast(&self) -> bool {
        !matches!(self, LossRecovery::GoBackN)
    }
}
