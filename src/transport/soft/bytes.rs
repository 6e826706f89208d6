//! Copies and zero pads of a packet's few payload bytes, done inline: a latency test's 2-byte
//! payload and 0–3 pad bytes would otherwise each cost a call into libc's `memcpy` or `memset`
//! (a slice copy of unknown length always makes one), which takes longer than the copy. Every
//! engine uses it where a payload is built or placed (RC requests and READ responses, UC, UD).

/// Copies `src` into `dst`, which must be as long (as `copy_from_slice` requires); up to 16 bytes
/// with two overlapping loads and stores, longer through `copy_from_slice`.
#[inline(always)]
pub(crate) fn copy_payload(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    assert_eq!(dst.len(), n, "copy_payload: lengths differ");
    match n {
        0 => {}
        // A latency test's payload, two bytes: one load and store of both.
        1..=3 if n == 2 => dst.copy_from_slice(&[src[0], src[1]]),
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
        _ => dst.copy_from_slice(src),
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
        let src: Vec<u8> = (1..=64u8).collect();
        for n in 0..=40 {
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
