//! perftest's out-of-band dialect (`--oob perftest`) fed a hostile peer: never a panic, never a hang.
//!
//! Input: `[test, flags, qps, size, peer bytes..]`. The first four bytes configure our side (one of
//! the eight tests, client or server, `-a`, `-b`, `-D`, `-R`, 1..4 queue pairs, one of five sizes);
//! the rest is everything the peer sends, read from memory. The session is driven to its end as the
//! binaries drive it, and every block it wrote must parse with our own parsers (perftest's reads
//! them as we do). Each parser is also fed the raw bytes directly: an accepted key record (ASCII or
//! `-R`'s binary one) or MTU block re-emits to the same value, the report's five fields to the same
//! bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roceperf::oob::perftest::binkey;
use roceperf::oob::perftest::channel::{OobStream, PerftestChannel, Timeouts};
use roceperf::oob::perftest::key::KeyRecord;
use roceperf::oob::perftest::msg::{self, BwReport, PeerVersion, SysData};
use roceperf::oob::perftest::script::ScriptOptions;
use roceperf::oob::perftest::session::{Action, Session, SessionConfig};
use roceperf::params::{Role, TestKind};
use std::io::{Read, Write};
use std::time::Duration;

/// The peer's bytes, then end of stream; what we write is dropped.
struct Peer<'a> {
    input: &'a [u8],
}

impl Read for Peer<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        // At most 61 bytes a read, so that messages also arrive split.
        let n = buf.len().min(self.input.len()).min(61);
        buf[..n].copy_from_slice(&self.input[..n]);
        self.input = &self.input[n..];
        Ok(n)
    }
}

impl Write for Peer<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl OobStream for Peer<'_> {
    fn set_read_timeout(&mut self, _: Option<Duration>) -> std::io::Result<()> {
        Ok(())
    }
    fn set_nonblocking(&mut self, _: bool) -> std::io::Result<()> {
        Ok(())
    }
    fn shutdown_write(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn our_key(i: u32) -> KeyRecord {
    KeyRecord {
        lid: 0,
        out_reads: 16,
        qpn: 0x11 + i,
        psn: 0xabcdef,
        rkey: 0x1234,
        vaddr: 0x5555_0000_1000,
        gid: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1],
        srqn: 0,
    }
}

/// Each block parser on the raw bytes, and re-emission of what it accepts.
fn parsers(b: &[u8]) {
    if let Ok(block) = <[u8; msg::VERSION_LEN]>::try_from(&b[..b.len().min(msg::VERSION_LEN)]) {
        if let Ok(v) = PeerVersion::parse(&block) {
            assert!(v.value >= 5.7 && !v.text.is_empty());
        }
    }
    if b.len() >= 108 {
        if let Ok(k) = KeyRecord::parse("keys", &b[..108]) {
            assert_eq!(KeyRecord::parse("keys", &k.encode()).unwrap(), k);
            // The fields are fixed-width lower-case hex: upper-case digits aside, the bytes come back.
            assert_eq!(
                k.encode().to_ascii_lowercase(),
                b[..108].to_ascii_lowercase()
            );
        }
    }
    for len in [binkey::BIN_KEY_LEN, binkey::BIN_KEY_LEN_TAIL] {
        if b.len() >= len {
            let k = binkey::parse("keys", &b[..len]).expect("any 56 or 64 bytes are a record");
            assert_eq!(
                binkey::parse("keys", &binkey::encode(&k, 0, len)).unwrap(),
                k
            );
        }
    }
    if let Some(m) = b.first_chunk::<{ msg::MTU_LEN }>() {
        if let Ok(bytes) = msg::parse_mtu("MTU", m) {
            assert_eq!(&msg::encode_mtu(bytes), m);
        }
    }
    if let Some(s) = b.first_chunk::<{ msg::SYSDATA_LEN }>() {
        if let Ok(v) = msg::parse_sysdata("page size", "page size", s) {
            assert_eq!(&msg::encode_sysdata(v), s);
        }
    }
    if b.len() >= 40 {
        let mut f = [[0u8; 8]; 5];
        for (i, field) in f.iter_mut().enumerate() {
            field.copy_from_slice(&b[i * 8..i * 8 + 8]);
        }
        assert_eq!(BwReport::decode(&f).encode(), f);
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&[test, flags, qps, size], peer)) = data.split_first_chunk::<4>() else {
        return;
    };
    parsers(peer);
    let test = TestKind::EVERY[usize::from(test) % TestKind::EVERY.len()];
    let role = if flags & 1 == 1 {
        Role::Client
    } else {
        Role::Server
    };
    let opts = ScriptOptions {
        size: [2, 64, 3000, 4096, 65536][usize::from(size) % 5],
        all_sizes: flags & 2 != 0,
        bidirectional: flags & 4 != 0,
        num_qps: 1 + usize::from(qps % 4),
        duration: flags & 8 != 0,
        sweep_max: if flags & 16 != 0 { 4096 } else { 1 << 23 },
        rdma_cm: flags & 32 != 0,
    };
    let timeouts = Timeouts {
        idle: Duration::from_secs(1),
        stall: Duration::from_secs(1),
        run: Some(Duration::from_secs(1)),
    };
    let mut chan = PerftestChannel::new(Peer { input: peer }, role == Role::Client, timeouts);
    chan.record();
    let cfg = SessionConfig {
        test,
        role,
        opts,
        iters: 5,
        sys: SysData {
            page_size: 4096,
            cache_line: 64,
        },
        mtu: 1024,
    };
    // Options perftest's dialect cannot express are refused before any byte: fine.
    let Ok(mut session) = Session::new(chan, &cfg, None) else {
        return;
    };
    for _ in 0..10_000 {
        match session.next() {
            Ok(Action::Finished) | Err(_) => break,
            Ok(Action::NeedLocalKeys { buffer_len }) => {
                assert!(buffer_len >= 4096);
                let keys = (0..opts.num_qps as u32).map(our_key).collect();
                session.set_local_keys(keys).unwrap();
            }
            Ok(Action::Connect) => {
                let peer = session.peer().expect("Connect comes after the key round");
                assert_eq!(peer.keys.len(), opts.num_qps);
                assert!(peer.mtu <= 1024 && peer.mtu >= 256);
            }
            Ok(Action::Run { size }) => session.set_report(BwReport {
                size,
                iters: 5,
                bw_peak: 1.0,
                bw_avg: 1.0,
                msg_rate: 0.1,
            }),
            Ok(Action::AwaitPeer) => {
                for _ in 0..4 {
                    if !matches!(session.poll_peer(), Ok(false)) {
                        break;
                    }
                }
            }
            Ok(Action::PostReceives { .. } | Action::CmConnect | Action::CmDisconnect) => {}
        }
    }
    // Every block we wrote reads back with our own parsers.
    for (ours, b) in session.channel().recorded() {
        if !ours {
            continue;
        }
        match b.len() {
            msg::VERSION_LEN => {
                PeerVersion::parse(b.as_slice().try_into().unwrap()).unwrap();
            }
            108 => {
                KeyRecord::parse("keys", b).unwrap();
            }
            msg::MTU_LEN => {
                msg::parse_mtu("MTU", b.as_slice().try_into().unwrap()).unwrap();
            }
            _ => {}
        }
    }
});
