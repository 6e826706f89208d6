//! Arbitrary text into the `--impair` parser (what `--impair` and `ROCEPERF_IMPAIR` take): never a
//! panic, every accepted probability in 0..=1, and an accepted spec prints (`spec()`, what the header
//! and the results record) to a spec that parses back to exactly the same impairment (a burst of 1,
//! independent losses, may print as no burst), and printing that again gives the same text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roceperf::transport::soft::io::impair::{ImpairConfig, Impairment};

fn same(a: &Impairment, b: &Impairment, dir: &str) {
    for (what, x, y) in [
        ("loss", a.loss, b.loss),
        ("dup", a.duplicate, b.duplicate),
        ("reorder", a.reorder, b.reorder),
        ("corrupt", a.corrupt, b.corrupt),
    ] {
        assert!(
            (0.0..=1.0).contains(&x),
            "{dir}{what}={x} is not a probability"
        );
        assert!(x == y, "{dir}{what}: {x} printed reads back as {y}");
    }
    assert!(
        a.burst == b.burst || (a.burst <= 1.0 && b.burst <= 1.0),
        "{dir}burst: {} printed reads back as {}",
        a.burst,
        b.burst
    );
    assert_eq!(a.delay_ns, b.delay_ns, "{dir}delay");
    assert_eq!(a.reorder_ns, b.reorder_ns, "{dir}reorder_delay");
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let cfg = match ImpairConfig::parse_from(text, "--impair") {
        Ok(cfg) => cfg,
        Err(e) => {
            assert!(e.to_string().starts_with("--impair: "), "{e}");
            return;
        }
    };
    let spec = cfg.spec();
    let back = ImpairConfig::parse_from(&spec, "--impair")
        .unwrap_or_else(|e| panic!("{text:?} printed as {spec:?}, which does not parse: {e}"));
    assert_eq!(back.seed, cfg.seed, "seed");
    same(&cfg.tx(), &back.tx(), "");
    same(&cfg.rx, &back.rx, "rx:");
    assert_eq!(back.is_none(), cfg.is_none());
    assert_eq!(back.spec(), spec, "printing is not stable");
});
