//! CRC-32 (IEEE 802.3, reflected, the ICRC's polynomial) tuned for what RoCE packets hash: short
//! runs of header bytes. Up to [`SHORT`] bytes go through slice-by-8 tables built at compile time,
//! with no feature detection or dispatch per call (exactly 8, two carry-less multiplies where the
//! CPU has them); longer runs (a RETH and a small payload as much
//! as a 4 KiB one) go to carry-less multiply folding, which wins from one whole lane on: [`clmul`]
//! on x86_64, `crc32fast` elsewhere.
//!
//! Values are in `crc32fast`'s form: the CRC of the bytes so far, as `finalize` returns it, so
//! [`update`] continues a `crc32fast` value and the other way round.

#[cfg(target_arch = "x86_64")]
mod clmul;

/// Longest run hashed by the tables; longer ones are folded. A 16-byte lane folds and reduces in
/// registers in about 30 instructions with the call, where the tables spend about 22 per 8 bytes (a
/// small WRITE's 24 bytes after the BTH head: about 90); a run of 12 to 15 bytes (a small READ
/// response's after the head) is one lane, reduced in about as many, where the tables took a step
/// of 8 and one of 4.
const SHORT: usize = 11;

/// Longest run the tables take when the CPU cannot fold: `crc32fast`'s set-up costs more below.
const PORTABLE_SHORT: usize = 128;

/// The reflected IEEE polynomial.
const POLY: u32 = 0xedb8_8320;

/// `T[k][b]`: the CRC register after byte `b` followed by `k` zero bytes (slice-by-8).
static T: [[u32; 256]; 8] = tables();

const fn tables() -> [[u32; 256]; 8] {
    let mut t = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { POLY ^ (c >> 1) } else { c >> 1 };
            k += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut i = 0;
    while i < 256 {
        let mut k = 1;
        while k < 8 {
            let prev = t[k - 1][i];
            t[k][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            k += 1;
        }
        i += 1;
    }
    t
}

/// The CRC-32 of the bytes that gave `crc` followed by `bytes`. Always inlined: a transmission's
/// only hashing, and out of line it costs the call and a frame.
#[inline(always)]
pub(crate) fn update(crc: u32, bytes: &[u8]) -> u32 {
    if bytes.len() > SHORT {
        // Straight to the folding (one load decides it): a packet's header run takes this way.
        #[cfg(target_arch = "x86_64")]
        if let Some(c) = clmul::update(crc, bytes) {
            return c;
        }
        return long(crc, bytes);
    }
    // Exactly 8 bytes (a SEND ONLY's PSN word, 2-byte payload and pad after the kept BTH head):
    // two carry-less multiplies, where the tables take 8 lookups.
    #[cfg(target_arch = "x86_64")]
    if let Ok(b) = <&[u8; 8]>::try_from(bytes)
        && let Some(c) = clmul::update8(crc, b)
    {
        return c;
    }
    short_by_tables(crc, bytes)
}

/// [`update`] of exactly 8 bytes (a BTH's masked head) by one slice-by-8 step, inline.
#[inline(always)]
pub(crate) fn update8(crc: u32, bytes: &[u8; 8]) -> u32 {
    !step8(!crc, bytes)
}

/// The CRC-32 of the bytes that gave `crc` followed by `ib` with its byte 4 counted as ones (the
/// BTH byte the ICRC masks), in one run without a masked copy; `None` where `ib` holds under 16
/// bytes or the CPU cannot fold it so (the caller then hashes a masked copy).
#[inline]
pub(crate) fn update_bth(crc: u32, ib: &[u8]) -> Option<u32> {
    #[cfg(target_arch = "x86_64")]
    if ib.len() >= 16 {
        return clmul::update_bth(crc, ib);
    }
    let _ = (crc, ib);
    None
}

/// A run longer than [`SHORT`] on a CPU that cannot fold: the tables, or `crc32fast`'s portable
/// code for a long one.
#[inline(never)]
fn long(crc: u32, bytes: &[u8]) -> u32 {
    if bytes.len() <= PORTABLE_SHORT {
        return by_tables(crc, bytes);
    }
    let mut h = crc32fast::Hasher::new_with_initial(crc);
    h.update(bytes);
    h.finalize()
}

/// [`update`] by the slice-by-8 tables alone.
#[inline]
fn by_tables(crc: u32, bytes: &[u8]) -> u32 {
    let mut chunks = bytes.chunks_exact(8);
    let mut c = !crc;
    for b in &mut chunks {
        c = step8(c, b);
    }
    !tail(c, chunks.remainder())
}

/// [`by_tables`] of at most [`SHORT`] bytes (what [`update`] leaves to the tables): one 8-byte
/// step at most, without the loop's set-up.
#[inline]
fn short_by_tables(crc: u32, bytes: &[u8]) -> u32 {
    let mut c = !crc;
    let mut rest = bytes;
    if let Some((b, after)) = rest.split_first_chunk::<8>() {
        c = step8(c, b);
        rest = after;
    }
    !tail(c, rest)
}

/// The register `c` after the 8 bytes of `b` (slice-by-8).
#[inline(always)]
fn step8(c: u32, b: &[u8]) -> u32 {
    let lo = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) ^ c;
    let hi = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    T[7][(lo & 0xff) as usize]
        ^ T[6][((lo >> 8) & 0xff) as usize]
        ^ T[5][((lo >> 16) & 0xff) as usize]
        ^ T[4][(lo >> 24) as usize]
        ^ T[3][(hi & 0xff) as usize]
        ^ T[2][((hi >> 8) & 0xff) as usize]
        ^ T[1][((hi >> 16) & 0xff) as usize]
        ^ T[0][(hi >> 24) as usize]
}

/// The register `c` after `rest`, under 8 bytes.
#[inline(always)]
fn tail(mut c: u32, mut rest: &[u8]) -> u32 {
    // Four bytes in one step (slice-by-4): a byte at a time is a chain of four dependent lookups,
    // and a BTH (12 bytes) or a small WRITE's RETH and payload end in such a tail.
    if rest.len() >= 4 {
        let v = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) ^ c;
        c = T[3][(v & 0xff) as usize]
            ^ T[2][((v >> 8) & 0xff) as usize]
            ^ T[1][((v >> 16) & 0xff) as usize]
            ^ T[0][(v >> 24) as usize];
        rest = &rest[4..];
    }
    for &b in rest {
        c = T[0][((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8);
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_crc32fast_for_every_length_and_start() {
        let data: Vec<u8> = (0..600u32).map(|i| (i * 131 + 7) as u8).collect();
        for start in [0u32, 0x2144_df1c, 0xffff_ffff] {
            for len in 0..data.len() {
                let mut h = crc32fast::Hasher::new_with_initial(start);
                h.update(&data[..len]);
                assert_eq!(update(start, &data[..len]), h.finalize(), "len {len}");
            }
            let mut h = crc32fast::Hasher::new_with_initial(start);
            h.update(&data[..8]);
            let eight = data.first_chunk::<8>().unwrap();
            assert_eq!(update8(start, eight), h.finalize(), "update8");
        }
    }

    #[test]
    fn continues_across_calls() {
        let data: Vec<u8> = (0..300u32).map(|i| (i * 7) as u8).collect();
        let whole = crc32fast::hash(&data);
        for cut in [0, 1, 7, 8, 9, 64, 129, 299] {
            let (a, b) = data.split_at(cut);
            assert_eq!(update(update(0, a), b), whole, "cut {cut}");
        }
    }
}
