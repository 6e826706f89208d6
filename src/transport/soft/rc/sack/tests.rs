use super::*;

#[test]
fn psn_bits_cover_a_window_that_moves_and_wraps() {
    let base = Psn::new(0xff_fff0);
    let mut b = PsnBits::new(64, base);
    assert!(b.get(base.sub(1)), "before the window counts as set");
    assert!(!b.get(base));
    assert!(b.set(base.add(20)), "across the 24-bit wrap");
    assert!(b.get(Psn::new(0x04)));
    assert!(!b.set(base.add(64)), "beyond the window");
    assert!(!b.get(base.add(64)));
    b.advance(base.add(21));
    assert!(b.get(base.add(20)) && !b.get(base.add(21)));
    // The slot of the PSN that left is clear for the one that reuses it.
    assert!(!b.get(base.add(20 + 64)));
    b.set(base.add(30));
    b.reset(base.add(25));
    assert!(!b.get(base.add(30)));
    assert_eq!(b.window(), 64);
}
