//! Big-endian field accessors shared by the header views.
//!
//! Callers have already checked the buffer length, so these index directly; an out-of-range index is a
//! bug in a view, not a property of the packet.

/// Reads a big-endian u16 at `at`.
#[inline]
pub(crate) fn get_u16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Reads a big-endian 24-bit value at `at`.
#[inline]
pub(crate) fn get_u24(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([0, b[at], b[at + 1], b[at + 2]])
}

/// Reads a big-endian u32 at `at`.
#[inline]
pub(crate) fn get_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Reads a big-endian u64 at `at`.
#[inline]
pub(crate) fn get_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

/// Writes a big-endian u16 at `at`.
#[inline]
pub(crate) fn set_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// Writes the low 24 bits of `v` big-endian at `at`.
#[inline]
pub(crate) fn set_u24(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 3].copy_from_slice(&v.to_be_bytes()[1..]);
}

/// Writes a big-endian u32 at `at`.
#[inline]
pub(crate) fn set_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

/// Writes a big-endian u64 at `at`.
#[inline]
pub(crate) fn set_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_be_bytes());
}

/// Fails with [`Error::Truncated`](super::Error::Truncated) unless `have >= need`.
#[inline]
pub(crate) fn need(what: &'static str, need: usize, have: usize) -> super::Result<()> {
    if have < need {
        Err(super::Error::Truncated { what, need, have })
    } else {
        Ok(())
    }
}

/// Declares a smoltcp-style zero-copy view over a fixed-length header: the struct, `LEN`, checked and
/// unchecked constructors, `check_len` and `into_inner`. Field accessors are written by hand next to it.
macro_rules! header_view {
    ($(#[$doc:meta])* $name:ident, $len:expr, $what:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name<T: AsRef<[u8]>> {
            buffer: T,
        }

        impl<T: AsRef<[u8]>> $name<T> {
            #[doc = concat!("Length of the ", $what, " in bytes.")]
            pub const LEN: usize = $len;

            /// Wraps a buffer without checking its length; accessors panic if it is too short.
            #[inline]
            pub const fn new_unchecked(buffer: T) -> Self {
                Self { buffer }
            }

            #[doc = concat!("Wraps a buffer after checking that it holds a whole ", $what, ".")]
            #[inline]
            pub fn new_checked(buffer: T) -> $crate::wire::Result<Self> {
                let v = Self::new_unchecked(buffer);
                v.check_len()?;
                Ok(v)
            }

            #[doc = concat!("Fails with `Truncated` unless the buffer holds a whole ", $what, ".")]
            #[inline]
            pub fn check_len(&self) -> $crate::wire::Result<()> {
                $crate::wire::field::need($what, Self::LEN, self.buffer.as_ref().len())
            }

            /// Returns the wrapped buffer.
            #[inline]
            pub fn into_inner(self) -> T {
                self.buffer
            }
        }
    };
}

/// Reads the IPv6/GRH first word: (version, traffic class, flow label).
#[inline]
pub(crate) fn get_ver_tc_flow(b: &[u8]) -> (u8, u8, u32) {
    let w = get_u32(b, 0);
    ((w >> 28) as u8, (w >> 20) as u8, w & 0x000f_ffff)
}

/// Writes the IPv6/GRH first word (flow label truncated to 20 bits).
#[inline]
pub(crate) fn set_ver_tc_flow(b: &mut [u8], version: u8, tclass: u8, flow: u32) {
    let w = (u32::from(version & 0xf) << 28) | (u32::from(tclass) << 20) | (flow & 0x000f_ffff);
    set_u32(b, 0, w);
}

/// Converts a length the caller computed into a 16-bit length field; a longer packet is a caller bug.
#[inline]
pub(crate) fn len16(what: &'static str, len: usize) -> u16 {
    u16::try_from(len).unwrap_or_else(|_| panic!("{what} of {len} bytes does not fit 16 bits"))
}
