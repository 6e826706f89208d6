//! CRC-32 of long runs (payloads) by carry-less multiplication on x86_64: the message is folded,
//! 16 bytes at a time, into 128-bit lanes, each step multiplying a lane by x^distance mod P with
//! two PCLMULQDQs; what is left (one lane and a tail of under 16 bytes) is folded by a shift and a
//! blend, and the lane reduced to the CRC by a Barrett reduction, all in registers. Two builds of
//! the folding: 128-bit lanes with VEX encoding (PCLMULQDQ and AVX, any x86_64 since 2011, and the
//! model valgrind simulates), and 512-bit lanes (VPCLMULQDQ and AVX-512) where the CPU has them.
//! The multipliers are derived from the polynomial at compile time, not copied in as magic numbers.
//!
//! Why not a crate: crc32fast folds 4 lanes with SSE encoding (a separate unaligned load before
//! each XOR: 0.45 instructions a byte under callgrind), crc-fast 1.10 spends 0.35; this spends
//! 0.276 on a 4096-byte payload (1,131 instructions: 1,024 in its loop, 4 per 16 bytes, the rest
//! the call's set-up, fold-down and reduction) with 8 lanes of VEX-encoded folds, and is as fast
//! as either in wall-clock on long runs.

use std::arch::x86_64::*;
use std::sync::atomic::{AtomicU8, Ordering};

/// The IEEE polynomial P without its x^32 term, bit d the coefficient of x^d (not reflected).
const POLY: u32 = 0x04c1_1db7;

/// x^n mod P, bit d the coefficient of x^d.
const fn xpow(n: u32) -> u32 {
    let mut v = 1u32;
    let mut i = 0;
    while i < n {
        v = (v << 1) ^ if v & 0x8000_0000 != 0 { POLY } else { 0 };
        i += 1;
    }
    v
}

/// The multipliers that move a 128-bit lane `bits` further along the message, as (low qword, high
/// qword). A lane loaded little-endian holds its earlier 8 bytes (the higher powers, times x^64)
/// in the low qword, so that one is multiplied by x^(bits+64) and the high one by x^bits; each
/// power is one lower because the carry-less product of two reflected qwords comes out one place
/// up; reflected, a remainder of degree < 32 sits in the top half of its qword.
const fn fold_by(bits: u32) -> (u64, u64) {
    (
        (xpow(bits + 63) as u64).reverse_bits(),
        (xpow(bits - 1) as u64).reverse_bits(),
    )
}

const K_1: (u64, u64) = fold_by(128);
const K_2: (u64, u64) = fold_by(2 * 128);
const K_3: (u64, u64) = fold_by(3 * 128);
const K_4: (u64, u64) = fold_by(4 * 128);
const K_8: (u64, u64) = fold_by(8 * 128);
const K_16: (u64, u64) = fold_by(16 * 128);

/// What the CPU offers, found once: 0 not yet looked, 1 neither build, 2 PCLMULQDQ and AVX,
/// 3 VPCLMULQDQ and AVX-512 as well.
static LEVEL: AtomicU8 = AtomicU8::new(0);

/// [`LEVEL`], looked up on the first call. Inlined: a packet's header run comes here, and a call
/// costs more than the load.
#[inline]
fn level() -> u8 {
    match LEVEL.load(Ordering::Relaxed) {
        0 => detect(),
        l => l,
    }
}

/// Finds what the CPU offers and keeps it in [`LEVEL`].
#[cold]
#[inline(never)]
fn detect() -> u8 {
    let l = if !(is_x86_feature_detected!("pclmulqdq") && is_x86_feature_detected!("avx")) {
        1
    } else if is_x86_feature_detected!("vpclmulqdq")
        && is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512vl")
    {
        3
    } else {
        2
    };
    LEVEL.store(l, Ordering::Relaxed);
    l
}

/// The CRC-32 (`crc32fast`'s form) of the bytes that gave `crc` followed by `bytes`, or `None`
/// when the CPU has no carry-less multiply (the caller then uses the portable code). `bytes` must
/// hold at least 8 bytes.
#[inline]
pub(super) fn update(crc: u32, bytes: &[u8]) -> Option<u32> {
    assert!(bytes.len() >= 8);
    // The 128-bit build one compare from its call (the level this model and most CPUs have);
    // the others, and the first look, after.
    let l = LEVEL.load(Ordering::Relaxed);
    if l == 2 {
        // SAFETY: `detect` found PCLMULQDQ and AVX.
        return Some(unsafe { update_avx(crc, bytes) });
    }
    match level() {
        // SAFETY: `level` found VPCLMULQDQ, AVX-512F/VL, PCLMULQDQ and AVX.
        3 => Some(unsafe { update_avx512(crc, bytes) }),
        // SAFETY: `level` found PCLMULQDQ and AVX.
        2 => Some(unsafe { update_avx(crc, bytes) }),
        _ => None,
    }
}

/// [`update`] of `ib` (at least 16 bytes) with its byte 4 counted as ones (the BTH byte the ICRC
/// masks), or `None` where the CPU cannot fold or the 512-bit build would take the run.
#[inline]
pub(super) fn update_bth(crc: u32, ib: &[u8]) -> Option<u32> {
    assert!(ib.len() >= 16);
    // As in `update`: the 128-bit build first.
    let l = LEVEL.load(Ordering::Relaxed);
    if l == 2 {
        // SAFETY: `detect` found PCLMULQDQ and AVX; `ib` holds 16 bytes.
        return Some(unsafe { update_avx_bth(crc, ib) });
    }
    match level() {
        // SAFETY: `level` found PCLMULQDQ and AVX; `ib` holds 16 bytes.
        2 => Some(unsafe { update_avx_bth(crc, ib) }),
        // SAFETY: as above (VPCLMULQDQ and AVX-512 too).
        3 if ib.len() < 512 => Some(unsafe { update_avx_bth(crc, ib) }),
        _ => None,
    }
}

/// [`update`] of exactly 8 bytes, or `None` where the CPU cannot fold or has not been looked at
/// yet (the caller then uses the tables).
#[inline]
pub(super) fn update8(crc: u32, bytes: &[u8; 8]) -> Option<u32> {
    if LEVEL.load(Ordering::Relaxed) < 2 {
        return None;
    }
    // SAFETY: a level of 2 or 3 means `detect` found PCLMULQDQ and AVX (so SSE4.1).
    Some(unsafe { update8_clmul(crc, u64::from_le_bytes(*bytes)) })
}

/// [`short`] of exactly 8 bytes `v`: the run fills the lane's high qword alone, so the fold by
/// x^96 leaves `v` itself (the CRC register XORed in) and the Barrett reduction finishes it.
#[target_feature(enable = "pclmulqdq,sse4.1")]
unsafe fn update8_clmul(crc: u32, v: u64) -> u32 {
    let x = _mm_cvtsi64_si128((v ^ u64::from(!crc)) as i64);
    let barrett = _mm_set_epi64x(P_REFLECTED as i64, MU as i64);
    let t = _mm_clmulepi64_si128(x, barrett, 0x00);
    let t = _mm_clmulepi64_si128(t, barrett, 0x10);
    // `x` has nothing in dword 2: the CRC is the product's.
    !(_mm_extract_epi32(t, 2) as u32)
}

/// A lane's multiplier pair as a register.
#[inline(always)]
fn k128(k: (u64, u64)) -> __m128i {
    // SAFETY: SSE2 is part of x86_64.
    unsafe { _mm_set_epi64x(k.1 as i64, k.0 as i64) }
}

/// `x` moved along by the multipliers in `k`, plus `next`.
#[inline(always)]
unsafe fn fold(x: __m128i, k: __m128i, next: __m128i) -> __m128i {
    // SAFETY: the caller's target features include PCLMULQDQ.
    unsafe {
        let lo = _mm_clmulepi64_si128(x, k, 0x00);
        let hi = _mm_clmulepi64_si128(x, k, 0x11);
        _mm_xor_si128(_mm_xor_si128(lo, hi), next)
    }
}

/// Loads the 16 bytes at `p`.
#[inline(always)]
unsafe fn load(p: *const u8) -> __m128i {
    // SAFETY: the caller keeps `p .. p + 16` inside its slice.
    unsafe { _mm_loadu_si128(p as *const __m128i) }
}

/// Folds `bytes[at..]` (`at` a multiple of 16, at most `len - 16`) into `x`, which holds
/// `bytes[..at]`: whole lanes one at a time, then a partial one by a shift and a blend, then the
/// lane is reduced to the CRC (Barrett). All of it in registers, without the tables: about 20
/// instructions where the tables took about 40 for the lane and as many again for a tail.
#[inline(always)]
unsafe fn finish(mut x: __m128i, bytes: &[u8], mut at: usize) -> u32 {
    // SAFETY: loads stay within `bytes` (which holds at least 16 bytes); PCLMULQDQ and AVX (so
    // SSSE3 and SSE4.1) are in the caller's features.
    unsafe {
        let k1 = k128(K_1);
        while at + 16 <= bytes.len() {
            x = fold(x, k1, load(bytes.as_ptr().add(at)));
            at += 16;
        }
        // A last `n` (1..=15) bytes: `x` and they are 16 + n bytes of message. The first n (the
        // low bytes of `x`, moved to the top of a lane by `shl`) are folded forward one lane onto
        // the last 16: the high 16 - n bytes of `x` (moved to the bottom by `shr`) followed by
        // the n bytes, which one load ending at the end of `bytes` reads; `shr`'s high bits mark
        // where the blend takes them.
        let n = bytes.len() - at;
        if n > 0 {
            let shl = load(SHIFT.as_ptr().add(n));
            let shr = load(SHIFT.as_ptr().add(16 + n));
            let first = _mm_shuffle_epi8(x, shl);
            let tail = load(bytes.as_ptr().add(bytes.len() - 16));
            let last = _mm_blendv_epi8(_mm_shuffle_epi8(x, shr), tail, shr);
            x = fold(first, k1, last);
        }
        // The lane times x^32 modulo P is the CRC register: its high-order 64 bits (the low
        // qword, reflected) times x^96 mod P fold onto the rest, leaving 96 bits, which a
        // Barrett reduction with a 64-bit quotient estimate takes to 32 (as libdeflate's
        // crc32_pclmul_template.h and crc32fast 1.5 do).
        let x = _mm_xor_si128(
            _mm_clmulepi64_si128(x, _mm_cvtsi64_si128(X96 as i64), 0x00),
            _mm_srli_si128(x, 8),
        );
        let barrett = _mm_set_epi64x(P_REFLECTED as i64, MU as i64);
        let t = _mm_clmulepi64_si128(x, barrett, 0x00);
        let t = _mm_clmulepi64_si128(t, barrett, 0x10);
        !(_mm_extract_epi32(_mm_xor_si128(x, t), 2) as u32)
    }
}

/// `pshufb` masks for a partial lane of n bytes: the 16 at `n` move a lane's low n bytes to its
/// top (zeroing the rest: a mask byte with its high bit set writes 0), the 16 at `16 + n` move
/// its high 16 - n bytes to its bottom.
static SHIFT: [u8; 48] = {
    let mut t = [0x80u8; 48];
    let mut i = 0;
    while i < 16 {
        t[16 + i] = i as u8;
        i += 1;
    }
    t
};

/// `pshufb` masks for a run of n (8..=15) bytes held as its first 8 and its last 8 (a lane
/// `[b[..8], b[n - 8..]]`): the 16 at `16 * (n - 8)` lay it out as 16 - n zero bytes then the n
/// bytes, a lane with the run's remainder (leading zeros do not change one).
static SHORT_LANE: [u8; 128] = {
    let mut t = [0u8; 128];
    let mut n = 8;
    while n < 16 {
        let mut i = 0;
        while i < 16 {
            // Lane byte i is the run's byte i - (16 - n): from the first 8 while that is under 8,
            // then from the last 8, whose byte i - 8 is the run's n - 16 + i, the same one.
            t[16 * (n - 8) + i] = if i < 16 - n {
                0x80
            } else if i + n < 24 {
                (i + n - 16) as u8
            } else {
                i as u8
            };
            i += 1;
        }
        n += 1;
    }
    t
};

/// The CRC-32 of a run of 8 to 15 bytes in registers: the run as one lane (two 8-byte loads and
/// a shuffle), reduced as [`finish`] reduces one.
#[inline(always)]
unsafe fn short(crc: u32, bytes: &[u8]) -> u32 {
    let n = bytes.len();
    debug_assert!((8..16).contains(&n));
    // SAFETY: both 8-byte reads lie within `bytes` (8 to 15 bytes; read, not checked, so that
    // no panic path costs the function a frame); the mask's 16 bytes at `16 * (n - 8)` lie
    // within SHORT_LANE; the caller's target features include PCLMULQDQ and AVX (so SSSE3 and
    // SSE4.1).
    unsafe {
        let p = bytes.as_ptr();
        let first = u64::from_le(p.cast::<u64>().read_unaligned()) ^ u64::from(!crc);
        let last = u64::from_le(p.add(n - 8).cast::<u64>().read_unaligned());
        let both = _mm_set_epi64x(last as i64, first as i64);
        let x = _mm_shuffle_epi8(both, load(SHORT_LANE.as_ptr().add(16 * (n - 8))));
        let x = _mm_xor_si128(
            _mm_clmulepi64_si128(x, _mm_cvtsi64_si128(X96 as i64), 0x00),
            _mm_srli_si128(x, 8),
        );
        let barrett = _mm_set_epi64x(P_REFLECTED as i64, MU as i64);
        let t = _mm_clmulepi64_si128(x, barrett, 0x00);
        let t = _mm_clmulepi64_si128(t, barrett, 0x10);
        !(_mm_extract_epi32(_mm_xor_si128(x, t), 2) as u32)
    }
}

/// x^96 mod P reflected into 33 bits (bit 32 - d the coefficient of x^d): multiplying the low
/// qword of a lane by it lands the product on the lane's high 96 bits.
const X96: u64 = (xpow(96).reverse_bits() as u64) << 1;

/// P with its x^32 term, reflected into 33 bits.
const P_REFLECTED: u64 = ((POLY as u64) | 1 << 32).reverse_bits() >> 31;

/// floor(x^95 / P), the Barrett quotient estimate, reflected into 64 bits.
const MU: u64 = {
    // Long division of x^95 by P (x^32 + POLY), bit d the coefficient of x^d.
    let p = (POLY as u128) | 1 << 32;
    let mut rem = 1u128 << 95;
    let mut q = 0u64;
    let mut d = 95;
    while d >= 32 {
        if rem >> d & 1 != 0 {
            rem ^= p << (d - 32);
            q |= 1 << (d - 32);
        }
        d -= 1;
    }
    q.reverse_bits()
};

/// One round of the 128-bit build: each of the 8 lanes moved along by `k8` onto the 16 bytes at
/// `q + 16 j`.
#[inline(always)]
unsafe fn round(l: &mut [__m128i; 8], k8: __m128i, q: *const u8) {
    // SAFETY: the caller keeps `q .. q + 128` inside its slice; its features include PCLMULQDQ.
    unsafe {
        for (j, lane) in l.iter_mut().enumerate() {
            *lane = fold(*lane, k8, load(q.add(16 * j)));
        }
    }
}

/// The 128-bit build: 8 lanes (128 bytes a round) while at least two rounds remain, then one.
/// The loop runs eight rounds per pass over a pointer, so that each 16 bytes cost their four
/// instructions (two PCLMULQDQs, an XOR with the next block straight from memory, an XOR that
/// combines) and the pass's few (add, compare, branch) are spread over 1 KiB: a 4 KiB payload
/// takes 3 passes and a four, not 15 passes. A run under 16 bytes (at least 8) goes to [`short`].
#[target_feature(enable = "pclmulqdq,avx")]
unsafe fn update_avx(crc: u32, bytes: &[u8]) -> u32 {
    // SAFETY: `bytes` holds at least 8 bytes, and 16 for `fold_avx`; the features are this
    // function's.
    unsafe {
        if bytes.len() < 16 {
            return short(crc, bytes);
        }
        fold_avx(crc, bytes, _mm_setzero_si128())
    }
}

/// [`update_avx`] of a run of at least 16 bytes whose byte 4 counts as ones (the BTH byte the
/// ICRC masks), without a masked copy.
#[target_feature(enable = "pclmulqdq,avx")]
unsafe fn update_avx_bth(crc: u32, bytes: &[u8]) -> u32 {
    // SAFETY: `bytes` holds at least 16 bytes; the features are this function's.
    unsafe { fold_avx(crc, bytes, _mm_set_epi64x(0, 0xff << 32)) }
}

/// The 128-bit build's folding of a run of at least 16 bytes, the bits set in `ones` set in its
/// first lane (none for a plain run: the OR then folds away).
#[inline(always)]
unsafe fn fold_avx(crc: u32, bytes: &[u8], ones: __m128i) -> u32 {
    // SAFETY: every load is of 16 bytes that end at or before `bytes.len()`; the caller's
    // features include PCLMULQDQ and AVX.
    unsafe {
        let p = bytes.as_ptr();
        // The CRC register continues into the first 4 bytes.
        let start = _mm_cvtsi32_si128(!crc as i32);
        let first = _mm_or_si128(load(p), ones);
        if bytes.len() < 256 {
            return finish(_mm_xor_si128(first, start), bytes, 16);
        }
        let mut l = [_mm_setzero_si128(); 8];
        for (j, lane) in l.iter_mut().enumerate() {
            *lane = load(p.add(16 * j));
        }
        l[0] = _mm_xor_si128(first, start);
        let k8 = k128(K_8);
        // Rounds after the first: eights of them over a pointer, then a four, a pair and an odd one.
        let rounds = bytes.len() / 128 - 1;
        let mut q = p.add(128);
        let stop = q.add(1024 * (rounds / 8));
        while q != stop {
            for i in 0..8 {
                round(&mut l, k8, q.add(128 * i));
            }
            q = q.add(1024);
        }
        if rounds & 4 != 0 {
            for i in 0..4 {
                round(&mut l, k8, q.add(128 * i));
            }
            q = q.add(512);
        }
        if rounds & 2 != 0 {
            round(&mut l, k8, q);
            round(&mut l, k8, q.add(128));
            q = q.add(256);
        }
        if rounds & 1 != 0 {
            round(&mut l, k8, q);
        }
        // Lane j is 7 - j lanes from the end: halve them three times (8 to 4 by K_4, to 2 by
        // K_2, to 1 by K_1), so that three multiplier pairs are loaded instead of seven.
        let k4 = k128(K_4);
        let h = [
            fold(l[0], k4, l[4]),
            fold(l[1], k4, l[5]),
            fold(l[2], k4, l[6]),
            fold(l[3], k4, l[7]),
        ];
        let k2 = k128(K_2);
        let x = fold(fold(h[0], k2, h[2]), k128(K_1), fold(h[1], k2, h[3]));
        finish(x, bytes, 128 * (rounds + 1))
    }
}

/// A multiplier pair in each of a 512-bit register's four lanes.
#[inline(always)]
unsafe fn k512(k: (u64, u64)) -> __m512i {
    // SAFETY: the caller's target features include AVX-512F.
    unsafe {
        _mm512_set_epi64(
            k.1 as i64, k.0 as i64, k.1 as i64, k.0 as i64, k.1 as i64, k.0 as i64, k.1 as i64,
            k.0 as i64,
        )
    }
}

/// Loads the 64 bytes at `p`.
#[inline(always)]
unsafe fn load4(p: *const u8) -> __m512i {
    // SAFETY: the caller keeps `p .. p + 64` inside its slice; its features include AVX-512F.
    unsafe { _mm512_loadu_si512(p as *const __m512i) }
}

/// Four lanes moved along at once, plus `next` (a three-way XOR in one instruction).
#[inline(always)]
unsafe fn fold4(x: __m512i, k: __m512i, next: __m512i) -> __m512i {
    // SAFETY: the caller's target features include VPCLMULQDQ and AVX-512F.
    unsafe {
        let lo = _mm512_clmulepi64_epi128(x, k, 0x00);
        let hi = _mm512_clmulepi64_epi128(x, k, 0x11);
        _mm512_ternarylogic_epi64(lo, hi, next, 0x96)
    }
}

/// The 512-bit build: 16 lanes in four registers (256 bytes a round) while at least two rounds
/// remain, then the 128-bit build's single lane. Only for runs of 512 bytes and more (shorter
/// ones, of at least 8, go to the 128-bit build).
#[target_feature(enable = "pclmulqdq,avx,avx512f,avx512vl,vpclmulqdq")]
unsafe fn update_avx512(crc: u32, bytes: &[u8]) -> u32 {
    // SAFETY: every load is of 64 (or 16) bytes that end at or before `bytes.len()`.
    unsafe {
        if bytes.len() < 512 {
            return update_avx(crc, bytes);
        }
        let p = bytes.as_ptr();
        let start = _mm512_zextsi128_si512(_mm_cvtsi32_si128(!crc as i32));
        let mut z = [
            load4(p),
            load4(p.add(64)),
            load4(p.add(128)),
            load4(p.add(192)),
        ];
        z[0] = _mm512_xor_si512(z[0], start);
        let k16 = k512(K_16);
        let mut at = 256;
        while at + 256 <= bytes.len() {
            for (j, zj) in z.iter_mut().enumerate() {
                *zj = fold4(*zj, k16, load4(p.add(at + 64 * j)));
            }
            at += 256;
        }
        // Register j is 3 - j registers (of four lanes each) from the end.
        let k4 = k512(K_4);
        let mut y = fold4(z[0], k4, z[1]);
        y = fold4(y, k4, z[2]);
        y = fold4(y, k4, z[3]);
        while at + 64 <= bytes.len() {
            y = fold4(y, k4, load4(p.add(at)));
            at += 64;
        }
        // Its lane j is 3 - j lanes from the end.
        let mut x = _mm512_extracti32x4_epi32::<3>(y);
        x = fold(_mm512_extracti32x4_epi32::<0>(y), k128(K_3), x);
        x = fold(_mm512_extracti32x4_epi32::<1>(y), k128(K_2), x);
        x = fold(_mm512_extracti32x4_epi32::<2>(y), k128(K_1), x);
        finish(x, bytes, at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pseudo-random bytes (xorshift), so that no structure in the data hides a wrong multiplier.
    fn random(n: usize, mut s: u64) -> Vec<u8> {
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 24) as u8
            })
            .collect()
    }

    fn reference(crc: u32, bytes: &[u8]) -> u32 {
        let mut h = crc32fast::Hasher::new_with_initial(crc);
        h.update(bytes);
        h.finalize()
    }

    /// A build of the folding.
    type Build = unsafe fn(u32, &[u8]) -> u32;

    /// Each build available here, named.
    fn builds() -> Vec<(&'static str, Build)> {
        let mut b: Vec<(&'static str, Build)> = Vec::new();
        if level() >= 2 {
            b.push(("avx", update_avx));
        }
        if level() >= 3 {
            b.push(("avx512", update_avx512));
        }
        let missing = &["avx", "avx512"][b.len()..];
        if !missing.is_empty() {
            eprintln!(
                "crc32::clmul: this CPU cannot run the {missing:?} build(s): not tested here"
            );
        }
        b
    }

    #[test]
    fn the_multipliers_are_the_polynomial_s_powers() {
        // x^32 mod P is P's low terms, and x^31 is itself.
        assert_eq!(xpow(32), POLY);
        assert_eq!(xpow(31), 1 << 31);
        // P has no x^31 term, so x^33 is x times its low terms.
        assert_eq!(xpow(33), POLY << 1);
        // x^a times x^b is x^(a + b): the long powers agree with products of short ones.
        let mulmod = |a: u32, b: u32| {
            let mut r = 0u32;
            for d in (0..32).rev() {
                r = (r << 1) ^ if r & 0x8000_0000 != 0 { POLY } else { 0 };
                if b >> d & 1 != 0 {
                    r ^= a;
                }
            }
            r
        };
        for (a, b) in [(64, 63), (1000, 1111), (2048, 63), (40, 50)] {
            assert_eq!(mulmod(xpow(a), xpow(b)), xpow(a + b), "x^{a} x^{b}");
        }
    }

    #[test]
    fn the_reduction_constants_are_the_published_ones() {
        // As crc32fast 1.5 (specialized/pclmulqdq.rs: K4, BARRETT_G, BARRETT_MU) writes them.
        assert_eq!(X96, 0x0_ccaa_009e);
        assert_eq!(P_REFLECTED, 0x1_db71_0641);
        assert_eq!(MU, 0xb4e5_b025_f701_1641);
    }

    #[test]
    fn every_build_matches_crc32fast_for_every_length_alignment_and_start() {
        let data = random(300 + 64, 7);
        for (name, f) in builds() {
            for align in 0..64 {
                for len in 8..=300 {
                    let run = &data[align..align + len];
                    for start in [0u32, 0x2144_df1c, 0xffff_ffff] {
                        // SAFETY: `builds` lists only what this CPU runs.
                        let got = unsafe { f(start, run) };
                        assert_eq!(got, reference(start, run), "{name}: len {len} at +{align}");
                    }
                }
            }
        }
    }

    #[test]
    fn the_8_byte_build_matches_crc32fast() {
        if !(is_x86_feature_detected!("pclmulqdq") && is_x86_feature_detected!("avx")) {
            return;
        }
        let data = random(8 * 64, 11);
        for (i, run) in data.chunks_exact(8).enumerate() {
            let start = [0, !0, 0x1234_5678, (i as u32).wrapping_mul(0x9e37_79b9)][i % 4];
            let v = u64::from_le_bytes(run.try_into().unwrap());
            // SAFETY: the CPU has PCLMULQDQ and AVX (checked above).
            let got = unsafe { update8_clmul(start, v) };
            assert_eq!(got, reference(start, run), "run {i}");
        }
    }

    #[test]
    fn the_bth_variant_hashes_byte_4_as_ones() {
        let data = random(700, 5);
        for len in [16, 17, 31, 32, 33, 255, 256, 300, 511, 512, 700] {
            let mut masked = data[..len].to_vec();
            masked[4] = 0xff;
            let got = update_bth(0x2144_df1c, &data[..len]);
            if level() >= 2 && (level() == 2 || len < 512) {
                assert_eq!(got, Some(reference(0x2144_df1c, &masked)), "len {len}");
            } else {
                assert_eq!(got, None, "len {len}");
            }
        }
    }

    #[test]
    fn every_build_matches_crc32fast_on_long_runs() {
        let data = random(70_000, 99);
        let lens = [
            511, 512, 513, 640, 767, 768, 896, 1024, 1040, 1152, 4000, 4096, 4111, 4112, 4113,
            9000, 65_535, 65_536, 65_551,
        ];
        for (name, f) in builds() {
            for align in [0, 1, 3, 8, 15, 16, 33, 63] {
                for len in lens {
                    let run = &data[align..align + len];
                    // SAFETY: `builds` lists only what this CPU runs.
                    let got = unsafe { f(0x1234_5678, run) };
                    assert_eq!(
                        got,
                        reference(0x1234_5678, run),
                        "{name}: len {len} at +{align}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_dispatch_answers_on_this_cpu_as_the_best_build_does() {
        let data = random(5000, 3);
        let got = update(0, &data);
        if level() >= 2 {
            assert_eq!(got, Some(reference(0, &data)));
        } else {
            assert_eq!(
                got, None,
                "no carry-less multiply here: the caller's code runs"
            );
        }
    }
}
