//! Field ranges and big-endian accessors shared by the header views (smoltcp's `wire::field`).
//!
//! Each header module declares its layout as a private `mod field` of named [`Field`] ranges and byte
//! offsets, and reads and writes them through these helpers. Callers have already checked the buffer
//! length, so the helpers index directly; an out-of-range index is a bug in a view, not a property of
//! the packet.

/// The bytes of one multi-byte field: a range of offsets within its header.
pub(crate) type Field = core::ops::Range<usize>;

/// Reads the big-endian u16 in `f` (2 bytes).
#[inline(always)]
pub(crate) fn get_u16(b: &[u8], f: Field) -> u16 {
    debug_assert_eq!(f.len(), 2);
    u16::from_be_bytes(array(b, f.start))
}

/// Reads the big-endian 24-bit value in `f` (3 bytes).
#[inline(always)]
pub(crate) fn get_u24(b: &[u8], f: Field) -> u32 {
    debug_assert_eq!(f.len(), 3);
    match f.start.checked_sub(1) {
        // The 4 bytes ending with the field, masked: one load and a swap where 3 bytes take two
        // loads and their merge. The buffer must hold the same bytes up to the field's end.
        Some(at) => u32::from_be_bytes(array(b, at)) & 0x00ff_ffff,
        None => {
            let [x, y, z] = array(b, f.start);
            u32::from_be_bytes([0, x, y, z])
        }
    }
}

/// Reads the big-endian u32 in `f` (4 bytes).
#[inline(always)]
pub(crate) fn get_u32(b: &[u8], f: Field) -> u32 {
    debug_assert_eq!(f.len(), 4);
    u32::from_be_bytes(array(b, f.start))
}

/// Reads the big-endian u64 in `f` (8 bytes).
#[inline(always)]
pub(crate) fn get_u64(b: &[u8], f: Field) -> u64 {
    debug_assert_eq!(f.len(), 8);
    u64::from_be_bytes(array(b, f.start))
}

/// The `N` bytes at `at`: one bounds check for the whole field (indexing byte by byte checks each,
/// and kept a per-packet header read out of line).
#[inline(always)]
fn array<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    *b[at..]
        .first_chunk::<N>()
        .expect("the view checked the header's length")
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

/// Declares a smoltcp-style zero-copy view over a fixed-length header, in one place: the struct,
/// `LEN`, checked and unchecked constructors, `check_len`, `into_inner`, and the plain accessors from
/// its `field` table, one line a field.
///
/// ```text
/// header!(
///     /// A view of a UDP header at the start of a buffer.
///     UdpPacket, "UDP header", len = field::CHECKSUM.end;
///     get { pub src_port: u16 = field::SRC_PORT; }
///     set { pub(crate) set_src_port: u16 = field::SRC_PORT; }
/// );
/// ```
///
/// `u8` is one byte at an offset, `u24` three bytes read into a `u32`. Bit flags and fields with
/// rules of their own are written by hand next to the invocation.
macro_rules! header {
    (@ty u8) => { u8 };
    (@ty u16) => { u16 };
    (@ty u24) => { u32 };
    (@ty u32) => { u32 };
    (@ty u64) => { u64 };
    (@get u8, $b:expr, $f:expr) => { $b[$f] };
    (@get u16, $b:expr, $f:expr) => { $crate::wire::field::get_u16($b, $f) };
    (@get u24, $b:expr, $f:expr) => { $crate::wire::field::get_u24($b, $f) };
    (@get u32, $b:expr, $f:expr) => { $crate::wire::field::get_u32($b, $f) };
    (@get u64, $b:expr, $f:expr) => { $crate::wire::field::get_u64($b, $f) };
    (@set u8, $b:expr, $f:expr, $v:expr) => { $b[$f] = $v };
    (@set u16, $b:expr, $f:expr, $v:expr) => { $crate::wire::field::set_u16($b, $f, $v) };
    (@set u24, $b:expr, $f:expr, $v:expr) => { $crate::wire::field::set_u24($b, $f, $v) };
    (@set u32, $b:expr, $f:expr, $v:expr) => { $crate::wire::field::set_u32($b, $f, $v) };
    (@set u64, $b:expr, $f:expr, $v:expr) => { $crate::wire::field::set_u64($b, $f, $v) };
    (
        $(#[$doc:meta])* $name:ident, $what:literal, len = $len:expr;
        $(get { $( $(#[$gdoc:meta])* $gvis:vis $get:ident: $gk:ident = $gf:expr; )* })?
        $(set { $( $(#[$sdoc:meta])* $svis:vis $set:ident: $sk:ident = $sf:expr; )* })?
    ) => {
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

            $($(
                $(#[$gdoc])*
                #[inline]
                $gvis fn $get(&self) -> header!(@ty $gk) {
                    header!(@get $gk, self.buffer.as_ref(), $gf)
                }
            )*)?
        }

        $(impl<T: AsRef<[u8]> + AsMut<[u8]>> $name<T> {
            $(
                $(#[$sdoc])*
                #[inline]
                $svis fn $set(&mut self, v: header!(@ty $sk)) {
                    header!(@set $sk, self.buffer.as_mut(), $sf, v)
                }
            )*
        })?
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
