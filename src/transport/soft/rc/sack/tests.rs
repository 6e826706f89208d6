use super::*;
use crate::transport::soft::rc::packet::Seg;

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

#[test]
fn extensions_round_trip_and_short_payloads_are_refused() {
    let mut buf = [0u8; 16];
    let send = SrExt::Send {
        recv_seq: 0x0102_0304,
        offset: 8192,
    };
    send.emit(&mut buf);
    let mut pkt = buf[..8].to_vec();
    pkt.extend_from_slice(b"data");
    let (ext, data) = SrExt::split(Request::Send(Seg::Middle), &pkt).unwrap();
    assert_eq!((ext, data), (Some(send), &b"data"[..]));
    let write = SrExt::Write(RethRepr {
        va: 0x1234_5678_9abc,
        rkey: 7,
        dma_len: 65536,
    });
    write.emit(&mut buf);
    let (ext, data) = SrExt::split(Request::Write(Seg::Last), &buf).unwrap();
    assert_eq!((ext, data.len()), (Some(write), 0));
    // WRITE FIRST/ONLY have their RETH in the header already; READs carry nothing.
    assert_eq!(
        SrExt::split(Request::Write(Seg::First), b"abcd"),
        Some((None, &b"abcd"[..]))
    );
    assert_eq!(SrExt::split(Request::Read, b""), Some((None, &b""[..])));
    assert_eq!(SrExt::split(Request::Send(Seg::Only), &[0; 7]), None);
    assert_eq!(SrExt::split(Request::Write(Seg::Middle), &[0; 15]), None);
}
