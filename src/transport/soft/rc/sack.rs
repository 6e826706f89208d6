//! Selective repeat, the requester's half (IRN-like, issue 15; docs/lossy-roce.md).
//!
//! The responder keeps what arrives out of order and answers a gap with a NAK (PSN sequence error)
//! that names the first missing PSN and carries a SACK bitmap of what it holds beyond it. The
//! requester records what is known to have arrived (`Sack::got`) and resends only the rest: a PSN is
//! lost once something sent after it is known to have arrived (a later PSN SACKed or answered, beyond
//! a little reordering), and a resent PSN is lost again once something sent after the resend has
//! arrived. A timeout (the measured round trip, `rto.rs`) resends the oldest missing PSN as a
//! probe; the answer's SACKs tell the rest. READ responses are placed as they come;
//! a missing run is asked for again with a READ for just that run.
//!
//! On the wire (only between two sides that negotiated it): SEND packets carry 8 bytes before their
//! data (the receive they fill, counted from 0, and their offset in it), WRITE MIDDLE/LAST a RETH of
//! their own (this packet's address, the R_Key, the message length), and the SACK NAK a bitmap after
//! its AETH. [`SrExt`] reads and writes the first two.

use crate::wire::{RethPacket, RethRepr};

use super::packet::Request;
use super::psn::Psn;
use super::ring::Ring;

/// Bytes a SEND packet carries before its data under selective repeat.
pub const SEND_EXT_LEN: usize = 8;
/// Bytes a WRITE MIDDLE/LAST packet carries before its data under selective repeat.
pub const WRITE_EXT_LEN: usize = 16;
/// PSNs after the first missing one that a SACK NAK reports at most (512 bytes of bitmap; no more
/// than the path MTU's worth of bytes).
pub const SACK_MAX_PSNS: u32 = 4096;
/// Later PSNs that must be known to have arrived before a missing one counts as lost, so that a
/// little reordering does not look like loss (TCP's duplicate-ACK threshold).
const REORDER_THRESHOLD: u32 = 3;

/// Selective repeat's extension before the data of a request packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SrExt {
    /// A SEND packet: the receive it fills (counted from 0 over the receive-consuming messages) and
    /// the offset of its data in the message.
    Send {
        /// Which receive.
        recv_seq: u32,
        /// Byte offset in the message.
        offset: u32,
    },
    /// A WRITE MIDDLE or LAST packet: the address of its own data, the R_Key, the message length.
    Write(RethRepr),
}

impl SrExt {
    /// Bytes on the wire.
    pub fn len(&self) -> usize {
        match self {
            SrExt::Send { .. } => SEND_EXT_LEN,
            SrExt::Write(_) => WRITE_EXT_LEN,
        }
    }

    /// Writes it at the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) {
        match self {
            SrExt::Send { recv_seq, offset } => {
                buf[..4].copy_from_slice(&recv_seq.to_be_bytes());
                buf[4..8].copy_from_slice(&offset.to_be_bytes());
            }
            SrExt::Write(reth) => reth.emit(buf),
        }
    }

    /// Splits the extension a request packet of kind `req` carries off its payload; `None` when the
    /// payload is too short to hold it. Packets without one give `(None, payload)`.
    pub fn split(req: Request, payload: &[u8]) -> Option<(Option<SrExt>, &[u8])> {
        match req {
            Request::Send(_) => {
                let (ext, data) = payload.split_at_checked(SEND_EXT_LEN)?;
                let word =
                    |i: usize| u32::from_be_bytes([ext[i], ext[i + 1], ext[i + 2], ext[i + 3]]);
                Some((
                    Some(SrExt::Send {
                        recv_seq: word(0),
                        offset: word(4),
                    }),
                    data,
                ))
            }
            Request::Write(seg) if !seg.starts() => {
                let (ext, data) = payload.split_at_checked(WRITE_EXT_LEN)?;
                let reth = RethRepr::parse(&RethPacket::new_unchecked(ext));
                Some((Some(SrExt::Write(reth)), data))
            }
            _ => Some((None, payload)),
        }
    }
}

/// One flag per PSN of a window that starts at `base`: PSNs before it count as set, PSNs beyond
/// the window as clear.
pub(super) struct PsnBits {
    words: Box<[u64]>,
    base: Psn,
}

impl PsnBits {
    /// A clear window of `window` PSNs (a power of two) from `base`.
    pub fn new(window: u32, base: Psn) -> PsnBits {
        debug_assert!(window.is_power_of_two() && window >= 64);
        PsnBits {
            words: vec![0u64; window as usize / 64].into_boxed_slice(),
            base,
        }
    }

    /// PSNs the window covers.
    pub fn window(&self) -> u32 {
        self.words.len() as u32 * 64
    }

    /// True when `p` is in the window.
    pub fn covers(&self, p: Psn) -> bool {
        p.in_window(self.base, self.window())
    }

    fn at(&self, p: Psn) -> (usize, u64) {
        let i = p.value() & (self.window() - 1);
        ((i / 64) as usize, 1 << (i % 64))
    }

    /// The flag of `p`.
    pub fn get(&self, p: Psn) -> bool {
        if p.before(self.base) {
            return true;
        }
        if !self.covers(p) {
            return false;
        }
        let (w, b) = self.at(p);
        self.words[w] & b != 0
    }

    /// Sets the flag of `p`; false (and nothing set) when `p` is outside the window.
    pub fn set(&mut self, p: Psn) -> bool {
        if !self.covers(p) {
            return false;
        }
        let (w, b) = self.at(p);
        self.words[w] |= b;
        true
    }

    /// Clears the flag of `p` (nothing outside the window).
    pub fn clear(&mut self, p: Psn) {
        if self.covers(p) {
            let (w, b) = self.at(p);
            self.words[w] &= !b;
        }
    }

    /// Moves the window to start at `to`, clearing the flags of the PSNs it leaves.
    pub fn advance(&mut self, to: Psn) {
        let n = to.diff(self.base);
        if n <= 0 {
            return;
        }
        if n as u32 >= self.window() {
            self.words.fill(0);
        } else {
            let mut p = self.base;
            while p != to {
                let (w, b) = self.at(p);
                self.words[w] &= !b;
                p = p.add(1);
            }
        }
        self.base = to;
    }

    /// Clears every flag and starts the window at `base`.
    pub fn reset(&mut self, base: Psn) {
        self.words.fill(0);
        self.base = base;
    }
}

/// The requester's selective-repeat state.
pub struct Sack {
    /// PSNs done: SEND/WRITE PSNs the responder SACKed, READ response PSNs received, atomics
    /// answered. (SEND/WRITE PSNs below `cum` are done too.)
    got: PsnBits,
    /// PSNs waiting in `retx` (an entry whose flag was cleared is stale).
    queued: PsnBits,
    /// Every request PSN before it reached the responder (its cumulative ACK).
    cum: Psn,
    /// One past the highest request PSN known to have reached the responder.
    high_req: Psn,
    /// One past the highest READ response PSN received.
    high_resp: Psn,
    /// Losses below these have been looked for.
    scan_req: Psn,
    scan_resp: Psn,
    /// PSNs to send again, oldest first.
    retx: Ring<Psn>,
    /// Request PSNs resent, with the send frontier then, in the order resent.
    resent_req: Ring<(Psn, Psn)>,
    /// READ response runs asked for again, likewise.
    resent_resp: Ring<(Psn, Psn)>,
    /// Per PSN of the window: the send frontier of its latest resend (which entry is current).
    marks: Box<[u32]>,
}

impl Sack {
    /// Selective repeat over a window of `window` PSNs (rounded up to a power of two) from `psn`.
    pub fn new(psn: Psn, window: u32) -> Sack {
        let window = window.clamp(64, 1 << 16).next_power_of_two();
        Sack {
            got: PsnBits::new(window, psn),
            queued: PsnBits::new(window, psn),
            cum: psn,
            high_req: psn,
            high_resp: psn,
            scan_req: psn,
            scan_resp: psn,
            retx: Ring::with_capacity(window as usize),
            resent_req: Ring::with_capacity(window as usize),
            resent_resp: Ring::with_capacity(window as usize),
            marks: vec![0u32; window as usize].into_boxed_slice(),
        }
    }

    /// PSNs the state covers.
    pub fn window(&self) -> u32 {
        self.got.window()
    }

    fn mark(&mut self, p: Psn) -> &mut u32 {
        let i = p.value() & (self.window() - 1);
        &mut self.marks[i as usize]
    }

    /// Queues `p` to be sent again, once.
    fn queue(&mut self, p: Psn) {
        if !self.queued.get(p) && self.queued.set(p) && self.retx.push_back(p).is_err() {
            // No room: the timeout will resend it.
            self.queued.clear(p);
        }
    }
}

/// PSN helpers the scans use: the later or earlier of two PSNs in the 24-bit circle.
trait PsnOrder {
    fn max_with(self, other: Psn) -> Psn;
    fn min_with(self, other: Psn) -> Psn;
}

impl PsnOrder for Psn {
    fn max_with(self, other: Psn) -> Psn {
        if other.after(self) { other } else { self }
    }
    fn min_with(self, other: Psn) -> Psn {
        if other.before(self) { other } else { self }
    }
}

mod answers;
mod losses;

#[cfg(test)]
mod tests;
