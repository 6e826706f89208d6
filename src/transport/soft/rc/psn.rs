//! 24-bit packet sequence numbers with wrap-around arithmetic (roce-wire.md §6.1).

/// Mask of the 24 PSN bits.
pub(crate) const PSN_MASK: u32 = 0x00ff_ffff;

/// A packet sequence number: 24 bits that wrap, compared by the sign of their 24-bit difference.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct Psn(u32);

impl Psn {
    /// A PSN from any `u32`; bits above 24 are dropped.
    pub const fn new(value: u32) -> Psn {
        Psn(value & PSN_MASK)
    }

    /// The 24-bit value.
    pub const fn value(self) -> u32 {
        self.0
    }

    /// `self + n`, wrapping at 2^24.
    pub const fn add(self, n: u32) -> Psn {
        Psn(self.0.wrapping_add(n) & PSN_MASK)
    }

    /// `self - n`, wrapping at 2^24.
    pub const fn sub(self, n: u32) -> Psn {
        Psn(self.0.wrapping_sub(n) & PSN_MASK)
    }

    /// Signed distance `self - other` in the 24-bit circle, in -2^23 .. 2^23 (rxe's `psn_compare`).
    pub const fn diff(self, other: Psn) -> i32 {
        // Shift the 24-bit difference into the top of an i32 so its sign bit is bit 23 of the difference.
        ((self.0.wrapping_sub(other.0) << 8) as i32) >> 8
    }

    /// True when `self` comes strictly before `other`.
    pub const fn before(self, other: Psn) -> bool {
        self.diff(other) < 0
    }

    /// True when `self` comes strictly after `other`.
    pub const fn after(self, other: Psn) -> bool {
        self.diff(other) > 0
    }

    /// True when `first <= self < first + count` in the circle.
    pub const fn in_window(self, first: Psn, count: u32) -> bool {
        let d = self.diff(first);
        d >= 0 && (d as u32) < count
    }
}

impl std::fmt::Display for Psn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#08x}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_wraps_at_24_bits() {
        assert_eq!(Psn::new(PSN_MASK).add(1), Psn::new(0));
        assert_eq!(Psn::new(PSN_MASK - 2).add(5), Psn::new(2));
        assert_eq!(Psn::new(1).sub(3), Psn::new(PSN_MASK - 1));
        assert_eq!(Psn::new(0x1234_5678).value(), 0x34_5678);
    }

    #[test]
    fn diff_is_signed_across_the_wrap() {
        let a = Psn::new(PSN_MASK - 1);
        let b = Psn::new(3);
        assert_eq!(b.diff(a), 5);
        assert_eq!(a.diff(b), -5);
        assert!(a.before(b));
        assert!(b.after(a));
        assert!(!a.after(a) && !a.before(a));
        assert_eq!(Psn::new(0x80_0000).diff(Psn::new(0)), -0x80_0000);
        assert_eq!(Psn::new(0x7f_ffff).diff(Psn::new(0)), 0x7f_ffff);
    }

    proptest::proptest! {
        #[test]
        fn add_sub_and_diff_agree(a in 0u32..=PSN_MASK, n in 0u32..(1 << 23)) {
            let p = Psn::new(a);
            proptest::prop_assert_eq!(p.add(n).diff(p), n as i32);
            proptest::prop_assert_eq!(p.add(n).sub(n), p);
            proptest::prop_assert_eq!(p.diff(p.add(n)), -(n as i32));
            proptest::prop_assert_eq!(p.add(n).after(p), n > 0);
            proptest::prop_assert!(p.add(n).in_window(p, n + 1));
            proptest::prop_assert!(!p.add(n).in_window(p, n));
        }
    }

    #[test]
    fn window_membership_wraps() {
        let first = Psn::new(PSN_MASK - 1);
        assert!(first.in_window(first, 1));
        assert!(Psn::new(1).in_window(first, 4));
        assert!(!Psn::new(2).in_window(first, 4));
        assert!(!Psn::new(PSN_MASK - 2).in_window(first, 4));
        assert!(!first.in_window(first, 0));
    }
}
