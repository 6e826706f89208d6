use super::*;

#[test]
fn the_bitmap_names_what_is_held_after_the_first_missing_psn() {
    let epsn = Psn::new(0xff_fffe);
    let mut r = Reorder::new(64, epsn);
    let mut out = [0u8; SACK_MAX_PSNS as usize / 8];
    assert_eq!(r.bitmap(epsn, 4096, &mut out), 0, "nothing held: no bitmap");
    for k in [1u32, 3, 9] {
        *r.slot(epsn.add(k)) = Pending::Placed {
            ack_req: false,
            end: End::No,
        };
        r.held += 1;
        r.high = epsn.add(k + 1);
    }
    let n = r.bitmap(epsn, 4096, &mut out);
    assert_eq!(r.bitmap(epsn, 2, &mut out), 4, "cut to the bits asked for");
    assert_eq!(out[0], 0b1000_0000);
    let n2 = r.bitmap(epsn, 4096, &mut out);
    assert_eq!(n, n2);
    assert_eq!(n, 4, "whole 32-bit words");
    // Bit 7 of byte 0 is epsn + 1.
    assert_eq!(&out[..4], &[0b1010_0000, 0b1000_0000, 0, 0]);
    assert_eq!(r.held(), 3);
}

#[test]
fn packet_lengths_follow_the_segment_rules() {
    assert!(length_ok(Seg::First, 1024, 1024));
    assert!(!length_ok(Seg::Middle, 1000, 1024));
    assert!(length_ok(Seg::Last, 1, 1024) && !length_ok(Seg::Last, 0, 1024));
    assert!(length_ok(Seg::Only, 0, 1024) && !length_ok(Seg::Only, 1025, 1024));
}
