//! Copies and zero pads of a packet's few payload bytes, done inline: a latency test's 2-byte
//! payload and 0–3 pad bytes would otherwise each cost a call into libc's `memcpy` or `memset`
//! (a slice copy of unknown length always makes one), which takes longer than the copy. Every
//! engine uses it where a payload is built or placed (RC requests and READ responses, UC, UD).
//! A payload of [`LONG`] bytes or more (an MTU's worth, what a bandwidth stream moves) is copied
//! by an AVX loop of 512 bytes a pass: glibc's `memcpy` takes 128 bytes a pass, about 420
//! instructions for 4 KiB where this takes about 300.

/// Copies `src` into `dst`, which must be as long (as `copy_from_slice` requires); up to 16 bytes
/// with two overlapping loads and stores, longer by [`copy_long`].
#[inline(always)]
pub(crate) fn copy_payload(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    assert_eq!(dst.len(), n, "copy_payload: lengths differ");
    match n {
        0 => {}
        // Bytes 0, n/2 and n-1 cover every byte of a run of one to three.
        1..=3 => {
            dst[0] = src[0];
            dst[n / 2] = src[n / 2];
            dst[n - 1] = src[n - 1];
        }
        4..=7 => {
            let (a, b) = (word4(&src[..4]), word4(&src[n - 4..]));
            dst[..4].copy_from_slice(&a);
            dst[n - 4..].copy_from_slice(&b);
        }
        8..=16 => {
            let (a, b) = (word8(&src[..8]), word8(&src[n - 8..]));
            dst[..8].copy_from_slice(&a);
            dst[n - 8..].copy_from_slice(&b);
        }
        _ => copy_long(dst, src),
    }
}

/// [`copy_payload`] of more than 16 bytes (and any copy, into a `dst` as long, that is most likely
/// as long: a multi-packet message's segment): [`copy_avx`] from [`LONG`] bytes where the CPU has
/// AVX, else `copy_from_slice`. Out of line, as the `memcpy` call it replaces: every inlined copy
/// stays as small as it was.
#[inline(never)]
pub(crate) fn copy_long(dst: &mut [u8], src: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    if src.len() >= LONG && dst.len() == src.len() {
        // Each way out a tail call, so that the function saves no registers.
        match AVX.load(std::sync::atomic::Ordering::Relaxed) {
            // SAFETY: AVX was detected; the lengths are equal and at least LONG.
            2 => return unsafe { copy_avx(dst, src) },
            0 => return copy_first(dst, src),
            _ => {}
        }
    }
    dst.copy_from_slice(src)
}

/// Whether the CPU has AVX: 0 not yet looked, 1 no, 2 yes (one compare, where
/// `is_x86_feature_detected!` takes a few instructions more).
#[cfg(target_arch = "x86_64")]
static AVX: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// [`copy_long`] before [`AVX`] was looked up (`dst` as long as `src`, at least [`LONG`] bytes):
/// looks it up, then copies.
#[cfg(target_arch = "x86_64")]
#[cold]
#[inline(never)]
fn copy_first(dst: &mut [u8], src: &[u8]) {
    let yes = std::arch::is_x86_feature_detected!("avx");
    AVX.store(
        if yes { 2 } else { 1 },
        std::sync::atomic::Ordering::Relaxed,
    );
    if yes {
        // SAFETY: AVX was detected; the caller checked the lengths.
        unsafe { copy_avx(dst, src) }
    } else {
        dst.copy_from_slice(src)
    }
}

/// The shortest copy [`copy_avx`] takes: one of its passes.
#[cfg(target_arch = "x86_64")]
const LONG: usize = 512;

/// Copies `src` into `dst` (as long, at least [`LONG`] bytes) 512 bytes a pass in sixteen 32-byte
/// registers: two passes a turn of the loop, whose index counts up to zero (an add and a branch a
/// turn), then a pass, then the last partial pass as the 512 bytes that end the run (rewriting
/// some already copied: `dst` and `src` cannot overlap).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn copy_avx(dst: &mut [u8], src: &[u8]) {
    use std::arch::x86_64::{__m256i, _mm256_loadu_si256, _mm256_storeu_si256};
    /// Copies the 512 bytes at `s` to `d`.
    #[inline(always)]
    unsafe fn pass(d: *mut u8, s: *const u8) {
        // SAFETY: the caller keeps both 512-byte ranges inside their slices; AVX is enabled.
        unsafe {
            let v: [__m256i; 16] =
                std::array::from_fn(|j| _mm256_loadu_si256(s.add(32 * j).cast()));
            for (j, v) in v.iter().enumerate() {
                _mm256_storeu_si256(d.add(32 * j).cast(), *v);
            }
        }
    }
    let n = src.len();
    debug_assert!(n >= LONG && dst.len() == n);
    let (d, s) = (dst.as_mut_ptr(), src.as_ptr());
    // SAFETY: each pass covers 512 bytes starting at most `n - 512` into both slices, which
    // hold `n` bytes each: the loop's pairs end at `pairs` (at most `n`), the single pass
    // follows only with 512 bytes after them, and the last one ends at `n`.
    unsafe {
        let pairs = n / (2 * LONG) * (2 * LONG);
        let (d_end, s_end) = (d.add(pairs), s.add(pairs));
        let mut i = -(pairs as isize);
        while i != 0 {
            pass(d_end.offset(i), s_end.offset(i));
            pass(
                d_end.offset(i + LONG as isize),
                s_end.offset(i + LONG as isize),
            );
            i += 2 * LONG as isize;
        }
        let mut at = pairs;
        if n - at >= LONG {
            pass(d.add(at), s.add(at));
            at += LONG;
        }
        if at < n {
            pass(d.add(n - LONG), s.add(n - LONG));
        }
    }
}

/// Zeroes `buf`: a pad of up to three bytes inline, anything longer through `fill`.
#[inline(always)]
pub(crate) fn zero(buf: &mut [u8]) {
    let n = buf.len();
    match n {
        0 => {}
        1..=3 => {
            buf[0] = 0;
            buf[n / 2] = 0;
            buf[n - 1] = 0;
        }
        _ => buf.fill(0),
    }
}

#[inline(always)]
fn word4(b: &[u8]) -> [u8; 4] {
    [b[0], b[1], b[2], b[3]]
}

#[inline(always)]
fn word8(b: &[u8]) -> [u8; 8] {
    [b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_exactly_the_bytes_of_every_length() {
        let src: Vec<u8> = (0..5000u32).map(|i| (i * 7 + i / 251) as u8 | 1).collect();
        for n in (0..=40).chain([
            511, 512, 513, 1000, 1024, 1535, 1536, 2047, 2048, 2100, 4096, 4100,
        ]) {
            let mut dst = vec![0xeeu8; n + 2];
            copy_payload(&mut dst[1..=n], &src[..n]);
            assert_eq!(&dst[1..=n], &src[..n], "length {n}");
            assert_eq!(
                (dst[0], dst[n + 1]),
                (0xee, 0xee),
                "length {n}: outside written"
            );
        }
    }

    #[test]
    fn zeroes_exactly_the_bytes_of_every_length() {
        for n in 0..=20 {
            let mut buf = vec![0xeeu8; n + 2];
            zero(&mut buf[1..=n]);
            assert!(buf[1..=n].iter().all(|&b| b == 0), "length {n}");
            assert_eq!(
                (buf[0], buf[n + 1]),
                (0xee, 0xee),
                "length {n}: outside zeroed"
            );
        }
    }

    #[test]
    #[should_panic(expected = "lengths differ")]
    fn unequal_lengths_panic_as_copy_from_slice_does() {
        copy_payload(&mut [0u8; 3], &[1, 2]);
    }
}
