//! `--validate`: a deterministic payload pattern that the sender writes and the receiving side checks
//! byte for byte.
//!
//! What each test can check, given that the drivers reuse one source and one target region per queue pair:
//! - latency tests keep one operation in flight, so the pattern changes every iteration (seed from size
//!   and iteration): SEND and WRITE are checked on every message; READ reads a region the responder
//!   filled before the size started, so its seed is the size alone and every read-back is checked;
//! - bandwidth tests have many operations in flight over the same regions, so the seed is the size:
//!   SEND checks every received message (length and bytes), READ every signaled completion's data, WRITE
//!   the target region at the end of each size (after the writer's last completion).
//!
//! Seeds always include the size, so the data of an earlier size in an `-a` sweep never passes for the
//! current one; targets are cleared before each size, so a message that never arrived cannot pass either.

use super::{Error, Result};

/// Seed of the pattern for `size` at `iteration` (`None`: one pattern for the whole size).
pub fn seed(size: u64, iteration: Option<u64>) -> u64 {
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

/// The pattern byte at `offset` for `seed`.
pub fn byte(seed: u64, offset: u64) -> u8 {
    word(seed, offset / 8)[(offset % 8) as usize]
}

/// Fills `buf` (which starts at pattern offset 0) with the pattern of `seed`.
pub fn fill(buf: &mut [u8], seed: u64) {
    for (i, chunk) in buf.chunks_mut(8).enumerate() {
        let w = word(seed, i as u64);
        chunk.copy_from_slice(&w[..chunk.len()]);
    }
}

/// The first offset where `buf` differs from the pattern of `seed`, with the expected and found byte.
pub fn first_mismatch(buf: &[u8], seed: u64) -> Option<(u64, u8, u8)> {
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
pub fn check(
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
