//! Untrusted bytes after the network header into the IB transport parser: never a panic, and an
//! accepted header stack re-emits to the same repr.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roceperf::wire::IbRepr;

fuzz_target!(|data: &[u8]| {
    let Ok((repr, payload)) = IbRepr::parse(data) else {
        return;
    };
    assert!(repr.is_consistent());
    assert!(repr.header_len() + payload.len() <= data.len());
    let mut out = vec![0xa5u8; repr.header_len()];
    repr.emit(&mut out);
    out.extend_from_slice(payload);
    if repr.bth.opcode.is_known() {
        out.resize(out.len() + usize::from(repr.bth.pad_count), 0);
    }
    let (back, back_payload) = IbRepr::parse(&out).expect("emitted headers must parse");
    assert_eq!(back, repr);
    assert_eq!(back_payload, payload);
});
