//! roceperf's own out-of-band dialect fed a hostile peer's bytes: the 12-byte hello, then messages
//! framed as a 4-byte length and a JSON envelope, each decoded as every kind the channel waits for
//! (params, conn, barrier, results; an abort). Never a panic; what decodes re-encodes to a frame
//! that decodes to the same value (`roceperf::oob::frame::read_peer_stream`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) =
        roceperf::oob::frame::read_peer_stream::<roceperf::results::SizeReport>(data)
    {
        panic!("{e}");
    }
});
