//! Atomics (`roce_atomic_bw`, `roce_atomic_lat`): which 8-byte operation each queue pair posts, where it
//! lands, and what `--validate` expects it to return and to leave behind.
//!
//! Every queue pair runs its own sequence of operations k = 0, 1, 2, ... (warm-up included). Operation k
//! targets word `k % words` of the peer's target region (a bandwidth test cycles over 64 words a cache
//! line apart, one 4 KiB page, as perftest's cycle buffer does; a latency test hits one word, as
//! perftest's does) and is the `m = k / words`-th operation on that word, so what the word holds before
//! it, the original value it returns, is fully determined:
//! - FETCH_AND_ADD adds 1 (perftest's value): the m-th operation on a word returns `v(0) + m`;
//! - CMP_AND_SWAP runs a chain per word: the m-th operation compares with `v(m)` and swaps in `v(m+1)`,
//!   pseudo-random values, so every swap succeeds exactly when each operation runs once and in order,
//!   and returns `v(m)`. (perftest compares with 0 and swaps in 0: its swaps succeed only on a zero word
//!   and never change it, so nothing can be checked.)
//!
//! Each side writes `v(0)` into its words before a size starts, so the traffic is the same with and
//! without `--validate`. `--validate` checks every original in a result slot of its own (cleared once
//! checked) and, at the responder, every word's final value; the responder learns how many operations
//! each queue pair ran from a tally word the requester sets after its run with one more CMP_AND_SWAP
//! (0 → tag | count), so the check needs no message out of band and works in duration mode too.
//!
//! Byte order: rxe, the soft transport and TCP keep the words and return originals in host order;
//! Mellanox HCAs on little-endian hosts return originals in big-endian. Every `v(0)` is a byte
//! palindrome (the same in either order), and each check accepts either order until a value tells them
//! apart, then holds the device to it.

use super::{Error, Result, check, tr};
use crate::params::AtomicOp;
use crate::transport::rng::mix;
use crate::transport::{Completion, Endpoint, RemoteAddr, SendOp, SendRequest};

/// What FETCH_AND_ADD adds (perftest's `ATOMIC_ADD_VALUE`).
pub(crate) const ADD: u64 = 1;

/// Bytes from one word (or result slot) to the next: a cache line, as perftest steps its addresses.
pub(crate) const STRIDE: u64 = 64;

/// Words a bandwidth test cycles over per queue pair: a 4 KiB page of cache lines (perftest's cycle).
pub(crate) const BW_WORDS: u64 = 64;

/// Result slots a bandwidth test cycles over when nothing is checked (perftest's local cycle).
const PLAIN_SLOTS: u64 = 64;

/// The top 24 bits of a tally word; the low 40 carry the count of operations.
const TALLY_TAG: u64 = 0xa7_0a11 << 40;
const TALLY_COUNT: u64 = (1 << 40) - 1;

/// The work request id of a tally (the drivers number their own requests from 0).
pub(crate) const TALLY_WR_ID: u64 = u64::MAX;

/// The operations of one test: which, over how many words, into how many result slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Atomics {
    /// FETCH_AND_ADD or CMP_AND_SWAP.
    pub op: AtomicOp,
    /// Target words per queue pair.
    pub words: u64,
    /// Result slots per queue pair (at least the operations in flight when they are checked).
    pub slots: u64,
}

impl Atomics {
    /// A bandwidth test with `depth` operations in flight: 64 words, and with `validate` a result slot
    /// per operation in flight, so none is overwritten before it is checked.
    pub fn bandwidth(op: AtomicOp, depth: u32, validate: bool) -> Atomics {
        let slots = if validate {
            PLAIN_SLOTS.max(u64::from(depth))
        } else {
            PLAIN_SLOTS
        };
        Atomics {
            op,
            words: BW_WORDS,
            slots,
        }
    }

    /// A latency test: one operation at a time on one word.
    pub fn latency(op: AtomicOp) -> Atomics {
        Atomics {
            op,
            words: 1,
            slots: 1,
        }
    }

    /// Bytes each half of a queue pair's buffer needs: the result slots (source half), the words and
    /// the tally (target half).
    pub(crate) fn half_len(&self) -> u64 {
        (self.slots * STRIDE).max((self.words + 1) * STRIDE)
    }

    /// Offset of operation `k`'s result slot in the buffer (the source half starts at 0).
    pub fn slot(&self, k: u64) -> u64 {
        (k % self.slots) * STRIDE
    }

    /// The word operation `k` targets and how many operations that word saw before it.
    fn word_of(&self, k: u64) -> (u64, u64) {
        (k % self.words, k / self.words)
    }

    /// `v(m)`: what word `word` of queue pair `qp` holds after `m` operations on it.
    pub fn value(&self, qp: usize, word: u64, m: u64) -> u64 {
        let key = mix(0x00a7_0a11_c0de ^ ((qp as u64) << 32) ^ word);
        let first = palindrome(key);
        match self.op {
            AtomicOp::FetchAndAdd => first.wrapping_add(ADD.wrapping_mul(m)),
            AtomicOp::CmpAndSwap if m == 0 => first,
            AtomicOp::CmpAndSwap => mix(key ^ m.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
        }
    }

    /// Operation `k` of queue pair `qp` against the peer's target region at `target`.
    #[inline]
    pub fn request(&self, qp: usize, k: u64, target: RemoteAddr, signaled: bool) -> SendRequest {
        let (word, m) = self.word_of(k);
        let op = match self.op {
            AtomicOp::FetchAndAdd => SendOp::FetchAdd(ADD),
            AtomicOp::CmpAndSwap => SendOp::CompareSwap {
                compare: self.value(qp, word, m),
                swap: self.value(qp, word, m + 1),
            },
        };
        SendRequest {
            wr_id: k,
            op,
            offset: self.slot(k),
            len: 8,
            remote: Some(RemoteAddr {
                addr: target.addr + word * STRIDE,
                rkey: target.rkey,
            }),
            signaled,
            inline: false,
        }
    }

    /// The original value operation `k` of queue pair `qp` returns.
    pub fn expected(&self, qp: usize, k: u64) -> u64 {
        let (word, m) = self.word_of(k);
        self.value(qp, word, m)
    }

    /// What word `word` of queue pair `qp` holds once `ops` operations have run.
    pub(crate) fn final_value(&self, qp: usize, word: u64, ops: u64) -> u64 {
        let count = if ops > word {
            (ops - word - 1) / self.words + 1
        } else {
            0
        };
        self.value(qp, word, count)
    }

    /// Offset of the tally word in the target region.
    fn tally_offset(&self) -> u64 {
        self.words * STRIDE
    }

    /// The tally of queue pair `qp` after `ops` operations: a CMP_AND_SWAP of the (zeroed) tally word.
    pub(crate) fn tally_request(&self, ops: u64, target: RemoteAddr) -> SendRequest {
        SendRequest {
            wr_id: TALLY_WR_ID,
            op: SendOp::CompareSwap {
                compare: 0,
                swap: TALLY_TAG | (ops & TALLY_COUNT),
            },
            offset: self.slot(ops),
            len: 8,
            remote: Some(RemoteAddr {
                addr: target.addr + self.tally_offset(),
                rkey: target.rkey,
            }),
            signaled: true,
            inline: false,
        }
    }

    /// Before a size: queue pair `qp`'s words hold `v(0)`, its tally 0, its result slots 0. `target`
    /// is the offset of the target region (the buffer's second half).
    pub(crate) fn prepare(&self, buf: &mut [u8], target: usize, qp: usize) {
        for w in 0..self.words {
            let at = target + (w * STRIDE) as usize;
            buf[at..at + 8].copy_from_slice(&self.value(qp, w, 0).to_ne_bytes());
        }
        let tally = target + self.tally_offset() as usize;
        buf[tally..tally + 8].fill(0);
        buf[..(self.slots * STRIDE) as usize].fill(0);
    }

    /// `--validate` at the responder: queue pair `qp`'s tally says how many operations the peer ran,
    /// and every word must hold what that many operations leave.
    pub(crate) fn check_target(&self, buf: &[u8], target: usize, qp: usize) -> Result<()> {
        let at = target + self.tally_offset() as usize;
        let bytes: [u8; 8] = buf[at..at + 8].try_into().expect("8 bytes");
        let (ops, mut order) = [Order::Host, Order::Big]
            .into_iter()
            .map(|o| (o.read(bytes), o))
            .find(|(v, _)| v & !TALLY_COUNT == TALLY_TAG)
            .map(|(v, o)| (v & TALLY_COUNT, o))
            .ok_or(Error::AtomicTally {
                qp: qp as u32,
                found: u64::from_ne_bytes(bytes),
            })?;
        for word in 0..self.words {
            let at = target + (word * STRIDE) as usize;
            let expected = self.final_value(qp, word, ops);
            order
                .check(buf[at..at + 8].try_into().expect("8 bytes"), expected)
                .map_err(|found| Error::AtomicTarget {
                    qp: qp as u32,
                    word,
                    ops,
                    expected,
                    found,
                })?;
        }
        Ok(())
    }
}

/// A byte palindrome from 32 random bits: the same value whichever order a device reads it in.
fn palindrome(r: u64) -> u64 {
    let half = (r as u32).to_be_bytes();
    u64::from_be_bytes([
        half[0], half[1], half[2], half[3], half[3], half[2], half[1], half[0],
    ])
}

/// The order a device keeps 64-bit atomic values in, as far as its values have shown it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Order {
    /// Not known yet: every value so far read the same either way.
    #[default]
    Unknown,
    /// Host order (rxe, soft, TCP, and most HCAs).
    Host,
    /// Big-endian (network order), as Mellanox HCAs return originals on little-endian hosts.
    Big,
}

impl Order {
    /// `bytes` read in this order (host order while unknown).
    fn read(self, bytes: [u8; 8]) -> u64 {
        match self {
            Order::Big => u64::from_be_bytes(bytes),
            _ => u64::from_ne_bytes(bytes),
        }
    }

    /// Whether `bytes` hold `expected` in this order; while unknown, either order passes and the one
    /// that matched alone becomes the order. The error is the value found.
    pub(crate) fn check(&mut self, bytes: [u8; 8], expected: u64) -> std::result::Result<(), u64> {
        let (host, big) = (u64::from_ne_bytes(bytes), u64::from_be_bytes(bytes));
        match *self {
            Order::Unknown if host == expected => {
                if big != expected {
                    *self = Order::Host;
                }
                Ok(())
            }
            Order::Unknown if big == expected => {
                *self = Order::Big;
                Ok(())
            }
            o if o.read(bytes) == expected => Ok(()),
            o => Err(o.read(bytes)),
        }
    }
}

/// A requester's operations across a run's warm-up and measurement: how many each queue pair posted,
/// and the order its device returns originals in.
#[derive(Debug, Clone)]
pub(crate) struct AtomicRun {
    /// The operations.
    pub seq: Atomics,
    ops: Vec<u64>,
    order: Order,
}

impl AtomicRun {
    /// Nothing posted yet on any of `qps` queue pairs.
    pub(crate) fn new(seq: Atomics, qps: usize) -> AtomicRun {
        AtomicRun {
            seq,
            ops: vec![0; qps],
            order: Order::Unknown,
        }
    }

    /// Operations queue pair `qp` has posted so far.
    pub(crate) fn posted(&self, qp: usize) -> u64 {
        self.ops[qp]
    }

    /// Queue pair `qp` has posted `n` more.
    pub(crate) fn add(&mut self, qp: usize, n: u64) {
        self.ops[qp] += n;
    }

    /// `--validate`: operation `k` of queue pair `qp` has completed; checks its original in `buf`, then
    /// clears the slot, so that an operation which returns nothing there cannot pass on this one's.
    pub(crate) fn check(&mut self, buf: &mut [u8], qp: usize, k: u64) -> Result<()> {
        let at = self.seq.slot(k) as usize;
        let slot = &mut buf[at..at + 8];
        let expected = self.seq.expected(qp, k);
        self.order
            .check(slot[..8].try_into().expect("8 bytes"), expected)
            .map_err(|found| Error::AtomicOriginal {
                qp: qp as u32,
                op: self.seq.op,
                index: k,
                word: k % self.seq.words,
                expected,
                found,
            })?;
        slot.fill(0);
        Ok(())
    }

    /// `--validate`, after the last operation: sets every queue pair's tally at the peer (`targets`, one
    /// per queue pair) and checks that each found the tally word zeroed.
    pub(crate) fn tally<E: Endpoint>(&mut self, ep: &mut E, targets: &[RemoteAddr]) -> Result<()> {
        let qps = ep.qp_count();
        for (q, target) in targets.iter().enumerate().take(qps) {
            let wr = self.seq.tally_request(self.ops[q], *target);
            // The tally word's original is 0: a slot that still holds this marker got no answer.
            let at = wr.offset as usize;
            ep.buffer_mut(q)[at..at + 8].fill(0xff);
            ep.post_send(q, &wr).map_err(tr("posting the tally"))?;
        }
        let mut comps = [Completion::EMPTY; 16];
        let mut left = qps;
        while left > 0 {
            let n = ep
                .poll_cq(&mut comps)
                .map_err(tr("waiting for the tally"))?;
            for c in &comps[..n] {
                check(ep, c)?;
                if c.wr_id != TALLY_WR_ID {
                    continue;
                }
                let q = c.qp as usize;
                let at = self.seq.slot(self.ops[q]) as usize;
                let bytes: [u8; 8] = ep.buffer(q)[at..at + 8].try_into().expect("8 bytes");
                if bytes != [0; 8] {
                    return Err(Error::AtomicTallyTaken {
                        qp: c.qp,
                        found: u64::from_ne_bytes(bytes),
                    });
                }
                left -= 1;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
