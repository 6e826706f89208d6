//! Untrusted Ethernet frames into the whole-frame parser: it must never panic, and whatever it accepts
//! must re-emit to bytes that parse back to the same thing with a valid ICRC.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roceperf::wire::{RoceFrame, RoceFrameRepr};

fuzz_target!(|data: &[u8]| {
    if let Ok(view) = RoceFrame::new_checked(data) {
        let _ = view.verify_icrc();
        let _ = view.bth().psn();
        assert!(view.as_bytes().len() <= data.len());
    }
    let verified = RoceFrameRepr::parse(data);
    let Ok((repr, payload)) = RoceFrameRepr::parse_unverified(data) else {
        assert!(verified.is_err());
        return;
    };
    // An unknown opcode's payload keeps its pad, so only the known header stacks round-trip exactly.
    if !repr.ib.bth.opcode.is_known() && repr.ib.bth.pad_count != 0 {
        return;
    }
    let mut out = vec![0xa5u8; repr.frame_len(payload.len())];
    let n = repr.emit(&mut out, payload);
    assert_eq!(n, out.len());
    let (back, back_payload) =
        RoceFrameRepr::parse(&out).expect("emitted frame must parse and verify");
    assert_eq!(back, repr);
    assert_eq!(back_payload, payload);
});
