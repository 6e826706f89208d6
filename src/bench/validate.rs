//! `--validate`: a deterministic payload pattern that the sender writes and the receiving side checks
//! byte for byte.
//!
//! What each test checks ([`Checked`] says it in the header):
//! - latency tests keep one operation in flight, so the pattern changes every iteration (seed from size
//!   and iteration): SEND and WRITE are checked on every message; READ reads a region the responder
//!   filled before the size started, so its seed is the size alone, and every read-back is checked in a
//!   target cleared before each READ;
//! - bandwidth tests have many operations in flight, so the seed is the size. READ: every READ lands in a
//!   slot of its own ([`ReadSlots`]) and is checked, then cleared, when its completion (or a later
//!   signaled one) arrives. SEND: every receive completion's length and bytes are checked, in the one
//!   target region all receives share (receives stay posted across the sizes of a sweep, so they cannot
//!   have a slot per size); SENDs that land in the same poll are seen as the last of them left the
//!   region. WRITE: an RDMA WRITE completes only at the writer, so the target side checks its target
//!   region once the writer's last WRITE of the size has completed: what the WRITEs left there.
//!
//! Seeds always include the size, so the data of an earlier size in an `-a` sweep never passes for the
//! current one; targets are cleared before each size, so a message that never arrived cannot pass either.

use super::{Error, Result};

/// Largest room for READ slots per queue pair: 64 MiB (or one slot of the largest message).
pub(crate) const READ_SLOTS_BUDGET: u64 = 64 << 20;

/// READ bandwidth under `--validate`: where READ `k` of a size lands, so that no READ overwrites
/// another before it is checked. Slot `k % count`; while a READ is in flight or completed but not yet
/// checked, at most `count` READs are outstanding, so the slot is not reused before its check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReadSlots {
    /// Offset of the first slot in the buffer.
    pub start: u64,
    /// Bytes from one slot to the next (the size, rounded up to a cache line).
    pub stride: u64,
    /// Slots: `-t`, or as many as fit the room (then also the READs in flight).
    pub count: u64,
}

impl ReadSlots {
    /// The slots for `size` in `layout` with `depth` READs wanted in flight; `None` without room.
    pub(crate) fn new(layout: &super::Layout, size: u64, depth: u32) -> Option<ReadSlots> {
        let stride = size.max(1).div_ceil(64) * 64;
        let count = (layout.read_slots / stride).min(u64::from(depth.max(1)));
        (count > 0).then_some(ReadSlots {
            start: 2 * layout.half,
            stride,
            count,
        })
    }

    /// The buffer offset READ `k` lands at.
    pub(crate) fn offset(&self, k: u64) -> u64 {
        self.start + (k % self.count) * self.stride
    }
}

/// What `--validate` checks in a test, as the header says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Checked {
    /// Latency tests: every message against its own pattern.
    EveryMessage,
    /// READ bandwidth: every READ in a slot of its own.
    EveryRead,
    /// SEND bandwidth: every receive, in one shared target region.
    EveryReceive,
    /// WRITE bandwidth: the target region after the size's last WRITE.
    WriteTarget,
    /// Atomics: every original returned, and every word at the responder after the run.
    EveryAtomic,
}

impl Checked {
    /// What a test checks.
    pub(crate) fn of(test: crate::params::TestKind) -> Checked {
        use crate::params::{Metric, Verb};
        match (test.metric, test.verb) {
            (_, Verb::Atomic) => Checked::EveryAtomic,
            (Metric::Latency, _) => Checked::EveryMessage,
            (Metric::Bandwidth, Verb::Read) => Checked::EveryRead,
            (Metric::Bandwidth, Verb::Send) => Checked::EveryReceive,
            (Metric::Bandwidth, Verb::Write) => Checked::WriteTarget,
        }
    }
}

impl std::fmt::Display for Checked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Checked::EveryAtomic => {
                "--validate: each queue pair's atomics follow a sequence that fixes every original value (FETCH_AND_ADD: the word's start plus 1 per earlier add; CMP_AND_SWAP: a chain of swaps that all succeed), so every original is checked in a result slot of its own when its completion (or a later signaled one) arrives, and after the run the responder checks every word against the count of operations the requester tallies into it with one last CMP_AND_SWAP; host or big-endian values, as the device returns them; the checks are inside the measurement, so figures are lower than without"
            }
            Checked::EveryMessage => {
                "--validate: every message's payload is checked against a pattern of its own (READ: the responder's, read into a target cleared before each READ); the checks are inside the measurement, so latencies are higher than without"
            }
            Checked::EveryRead => {
                "--validate: every READ lands in a slot of its own and is checked byte for byte, then cleared, when its completion (or a later signaled one) arrives; up to -t slots and at most 64 MiB of them per queue pair, and fewer slots than -t also cap the READs in flight; the checks are inside the measurement, so figures are lower than without"
            }
            Checked::EveryReceive => {
                "--validate: every received SEND's length and bytes are checked when its receive completes, in the one target region all receives share, so SENDs that land in the same poll are seen as the last of them left it; the checks are inside the measurement, so figures are lower than without"
            }
            Checked::WriteTarget => {
                "--validate: RDMA WRITEs complete only at the writer, so once the size's last WRITE has completed the target side checks every byte its target region holds against the pattern: what the WRITEs left there, not each WRITE as it landed; nothing is checked inside the measurement"
            }
        })
    }
}

/// Seed of the pattern for `size` at `iteration` (`None`: one pattern for the whole size).
pub(crate) fn seed(size: u64, iteration: Option<u64>) -> u64 {
    let it = iteration.map_or(0x5eed, |i| i.wrapping_add(1));
    size.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ it.wrapping_mul(0xbf58_476d_1ce4_e5b9)
}

/// Eight pattern bytes for the aligned word starting at byte `8 * word`.
fn word(seed: u64, word: u64) -> [u8; 8] {
    let mut z = seed ^ word.wrapping_mul(0x94d0_49bb_1331_11eb);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)).to_le_bytes()
}

/// Fills `buf` (which starts at pattern offset 0) with the pattern of `seed`.
pub(crate) fn fill(buf: &mut [u8], seed: u64) {
    for (i, chunk) in buf.chunks_mut(8).enumerate() {
        let w = word(seed, i as u64);
        chunk.copy_from_slice(&w[..chunk.len()]);
    }
}

/// The first offset where `buf` differs from the pattern of `seed`, with the expected and found byte.
pub(crate) fn first_mismatch(buf: &[u8], seed: u64) -> Option<(u64, u8, u8)> {
    for (i, chunk) in buf.chunks(8).enumerate() {
        let w = word(seed, i as u64);
        if chunk != &w[..chunk.len()] {
            let j = chunk.iter().zip(w).position(|(a, b)| *a != b).unwrap_or(0);
            let off = (i * 8 + j) as u64;
            return Some((off, w[j], chunk[j]));
        }
    }
    None
}

/// Checks `buf` against the pattern; the error names the test step, size, iteration and offset.
pub(crate) fn check(
    buf: &[u8],
    size: u64,
    iteration: Option<u64>,
    pattern_iteration: Option<u64>,
    what: &'static str,
) -> Result<()> {
    match first_mismatch(buf, seed(size, pattern_iteration)) {
        None => Ok(()),
        Some((offset, expected, found)) => Err(Error::Validation {
            what,
            size,
            iteration,
            offset,
            expected,
            found,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pattern byte at `offset` for `seed`.
    fn byte(seed: u64, offset: u64) -> u8 {
        word(seed, offset / 8)[(offset % 8) as usize]
    }

    #[test]
    fn fill_then_check_passes_and_a_flipped_byte_is_found() {
        let mut b = vec![0u8; 1027];
        fill(&mut b, seed(1027, Some(3)));
        assert!(check(&b, 1027, Some(3), Some(3), "SEND").is_ok());
        assert_eq!(b[1000], byte(seed(1027, Some(3)), 1000));
        b[1000] ^= 0x10;
        let e = check(&b, 1027, Some(3), Some(3), "SEND").unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("offset 1000")
                && text.contains("size 1027")
                && text.contains("iteration 3"),
            "{text}"
        );
    }

    #[test]
    fn patterns_differ_between_sizes_and_iterations() {
        let mut a = vec![0u8; 64];
        let mut b = vec![0u8; 64];
        fill(&mut a, seed(64, Some(1)));
        fill(&mut b, seed(64, Some(2)));
        assert_ne!(a, b);
        fill(&mut b, seed(32, Some(1)));
        assert_ne!(a, b);
        assert!(first_mismatch(&[0u8; 64], seed(64, None)).is_some());
    }
}
