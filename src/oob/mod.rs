//! Out-of-band setup over TCP: handshake, parameter check, barriers, result exchange.

pub mod perftest;
