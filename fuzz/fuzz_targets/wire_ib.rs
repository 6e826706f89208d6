//! Untrusted bytes after the network header into the IB transport parser (and into the UDP-socket
//! path, BTH through ICRC): never a panic, and an accepted header stack re-emits to the same repr.
#![no_main]

use std::net::Ipv6Addr;

use libfuzzer_sys::fuzz_target;
use roceperf::wire::{IbRepr, Ipv6Repr, NetRepr, UdpRepr};

fuzz_target!(|data: &[u8]| {
    let net = NetRepr::V2v6(
        Ipv6Repr {
            src: Ipv6Addr::LOCALHOST,
            dst: Ipv6Addr::LOCALHOST,
            traffic_class: 0,
            flow_label: 0,
            hop_limit: 64,
        },
        UdpRepr::roce(0xc000),
    );
    let _ = net.parse_transport(data);

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
        // The UDP-socket path round-trips too.
        let mut t = vec![0u8; NetRepr::transport_len(&repr, payload.len())];
        net.emit_transport(&repr, payload, &mut t);
        let (back, back_payload) = net
            .parse_transport(&t)
            .expect("emitted transport must verify");
        assert_eq!(back, repr);
        assert_eq!(back_payload, payload);
    }
    let (back, back_payload) = IbRepr::parse(&out).expect("emitted headers must parse");
    assert_eq!(back, repr);
    assert_eq!(back_payload, payload);
});
