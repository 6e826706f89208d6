//! Field ranges and big-endian accessors shared by the header views (smoltcp's `wire::field`).
//!
//! Each header module declares its layout as a private `mod field` of named [`Field`] ranges and byte
//! offsets, and reads and writes them through these helpers. Callers have already checked the buffer
//! length, so the helpers index directly; an out-of-range index is a bug in a view, not a property of
//! the packet.

/// The bytes of one multi-byte field: a range of offsets within its header.
pub(crate) type Field = core::ops::Range<usize>;

/// Reads the big-endian u16 in `f` (2 bytes).
#[inline]
pub(crate) fn get_u16(b: &[u8], f: Field) -> u16 {
    debug_assert_eq!(f.len(), 2);
    u16::from_be_bytes([b[f.start], b[f.start + 1]])
}

/// Reads the big-endian 24-bit value in `f` (3 bytes).
#[inline]
pub(crate) fn get_u24(b: &[u8], f: Field) -> u32 {
    debug_assert_eq!(f.len(), 3);
    u32::from_be_bytes([0, b[f.start], b[f.start + 1], b[f.start + 2]])
}

/// Reads the big-endian u32 in `f` (4 bytes).
#[inline]
pub(crate) fn get_u32(b: &[u8], f: Field) -> u32 {
    debug_assert_eq!(f.len(), 4);
    u32::from_be_bytes([b[f.start], b[f.start + 1], b[f.start + 2], b[f.start + 3]])
}

/// Reads the big-endian u64 in `f` (8 bytes).
#[inline]
pub(crate) fn get_u64(b: &[u8], f: Field) -> u64 {
    debug_assert_eq!(f.len(), 8);
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[f]);
    u64::from_be_bytes(a)
}

/// Reads the bytes of `f` as an array (addresses, GIDs).
#[inline]
pub(crate) fn get_array<const N: usize>(b: &[u8], f: Field) -> [u8; N] {
    b[f].try_into().expect("field length matches the array")
}

/// Writes `v` big-endian into `f` (2 bytes).
#[inline]
pub(crate) fn set_u16(b: &mut [u8], f: Field, v: u16) {
    debug_assert_eq!(f.len(), 2);
    b[f].copy_from_slice(&v.to_be_bytes());
}

/// Writes the low 24 bits of `v` big-endian into `f` (3 bytes).
#[inline]
pub(crate) fn set_u24(b: &mut [u8], f: Field, v: u32) {
    debug_assert_eq!(f.len(), 3);
    b[f].copy_from_slice(&v.to_be_bytes()[1..]);
}

/// Writes `v` big-endian into `f` (4 bytes).
#[inline]
pub(crate) fn set_u32(b: &mut [u8], f: Field, v: u32) {
    debug_assert_eq!(f.len(), 4);
    b[f].copy_from_slice(&v.to_be_bytes());
}

/// Writes `v` big-endian into `f` (8 bytes).
#[inline]
pub(crate) fn set_u64(b: &mut [u8], f: Field, v: u64) {
    debug_assert_eq!(f.len(), 8);
    b[f].copy_from_slice(&v.to_be_bytes());
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
            pub(crate) fn check_len(&self) -> $crate::wire::Result<()> {
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

/// Reads the IPv6/GRH first word, in `f`: (version, traffic class, flow label).
#[inline]
pub(crate) fn get_ver_tc_flow(b: &[u8], f: Field) -> (u8, u8, u32) {
    let w = get_u32(b, f);
    ((w >> 28) as u8, (w >> 20) as u8, w & 0x000f_ffff)
}

/// Writes the IPv6/GRH first word into `f` (flow label truncated to 20 bits).
#[inline]
pub(crate) fn set_ver_tc_flow(b: &mut [u8], f: Field, version: u8, tclass: u8, flow: u32) {
    let w = (u32::from(version & 0xf) << 28) | (u32::from(tclass) << 20) | (flow & 0x000f_ffff);
    set_u32(b, f, w);
}

/// Converts a length the caller computed into a 16-bit length field; a longer packet is a caller bug.
#[inline]
pub(crate) fn len16(what: &'static str, len: usize) -> u16 {
    u16::try_from(len).unwrap_or_else(|_| panic!("{what} of {len} bytes does not fit 16 bits"))
}
