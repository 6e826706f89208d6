//! Packet-rate measurements of the I/O backends (ignored by default: run them on a quiet machine).
//!
//! `cargo test --release --test soft_io_rate -- --ignored --nocapture --test-threads 1`
//!
//! A sender thread pinned to core 0 and a receiver pinned to core 1 (when there are two) move
//! datagrams for ROCEPERF_RATE_SECS seconds (default 1) and print the received packet rate and
//! payload bandwidth. Nothing about speed is asserted: the tests only check that what arrives is what
//! was sent.

use crate::soft_support;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use roceperf::transport::soft::io::batch::{RxBatch, TxBatch};
use roceperf::transport::soft::io::gso::GsoTxBatch;
use roceperf::transport::soft::io::packet::{PacketConfig, PacketSocket};
use roceperf::transport::soft::io::udp::{UdpConfig, UdpSocket};
use roceperf::transport::soft::netdev::NetDev;
use soft_support::{NetnsPair, is_root, pin};

fn secs() -> Duration {
    soft_support::secs_from_env("ROCEPERF_RATE_SECS", 1.0)
}

#[derive(Clone, Copy, Debug)]
enum Send {
    /// sendmmsg of `batch` datagrams.
    Mmsg,
    /// one sendmsg with UDP_SEGMENT carrying `batch` datagrams.
    Gso,
}

struct Figures {
    packets: u64,
    bytes: u64,
    elapsed: Duration,
    syscalls: u64,
}

fn report(what: &str, f: &Figures) {
    let s = f.elapsed.as_secs_f64();
    println!(
        "{what:<58} {:>8.3} Mpps {:>7.2} Gb/s  ({} packets, {:.1} packets/recv syscall)",
        f.packets as f64 / s / 1e6,
        f.bytes as f64 * 8.0 / s / 1e9,
        f.packets,
        f.packets as f64 / f.syscalls.max(1) as f64
    );
}

/// Runs a UDP sender and receiver on lo between 127.0.0.11 and 127.0.0.12.
fn udp_run(size: usize, batch: usize, send: Send, gro: bool) -> Figures {
    let a_ip: IpAddr = "127.0.0.11".parse().unwrap();
    let b_ip: IpAddr = "127.0.0.12".parse().unwrap();
    let port = soft_support::endpoints::free_port("127.0.0.12");
    let rx_cfg = UdpConfig {
        port,
        gro,
        socket_buffer: 32 << 20,
        ..UdpConfig::default()
    };
    // UDP_SEGMENT needs checksums on (the kernel refuses GSO with SO_NO_CHECK).
    let tx_cfg = UdpConfig {
        port,
        zero_checksum: matches!(send, Send::Mmsg),
        ..UdpConfig::default()
    };
    let rx_sock = UdpSocket::bind_scoped(b_ip, 0, &rx_cfg).unwrap();
    let tx_sock = UdpSocket::bind_scoped(a_ip, 0, &tx_cfg).unwrap();
    let dst = SocketAddr::new(b_ip, port);
    let stop = Arc::new(AtomicBool::new(false));
    let stop_tx = stop.clone();
    let sender = std::thread::spawn(move || {
        pin(0);
        let mut tx = TxBatch::new(batch, size);
        // The datapath's own GSO batch: it fills each super-datagram up to 64 segments / 64 KiB.
        let mut gso = GsoTxBatch::new(batch.min(32), size);
        while !stop_tx.load(Ordering::Relaxed) {
            match send {
                Send::Mmsg => {
                    while !tx.is_full() {
                        tx.push(dst, |b| {
                            b[..size].fill(0x5a);
                            size
                        });
                    }
                    tx_sock.send_batch(&mut tx).unwrap();
                }
                Send::Gso => {
                    let fill = |b: &mut [u8]| {
                        b[..size].fill(0x5a);
                        Some(size)
                    };
                    while gso.try_push(dst, fill).is_some() {}
                    tx_sock.send_gso_batch(&mut gso).unwrap();
                }
            }
        }
    });
    pin(1);
    let slot = if gro { 65_536 } else { size + 64 };
    let mut rx = RxBatch::new(64, slot);
    let (mut packets, mut bytes, mut syscalls) = (0u64, 0u64, 0u64);
    let start = Instant::now();
    let dur = secs();
    while start.elapsed() < dur {
        let n = rx_sock.recv_batch(&mut rx).unwrap();
        if n == 0 {
            continue;
        }
        syscalls += 1;
        for i in 0..n {
            let d = rx.datagram(i);
            assert!(!d.truncated);
            assert_eq!(d.data[0], 0x5a);
            let seg = d.gro_segment.map(usize::from).unwrap_or(d.data.len());
            packets += d.data.len().div_ceil(seg) as u64;
            bytes += d.data.len() as u64;
        }
    }
    let elapsed = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    sender.join().unwrap();
    assert!(packets > 0, "nothing arrived");
    Figures {
        packets,
        bytes,
        elapsed,
        syscalls,
    }
}

#[test]
#[ignore = "measurement; run with --ignored --nocapture"]
fn udp_loopback_rates() {
    for size in [64usize, 1056, 4132] {
        for (send, gro) in [
            (Send::Mmsg, false),
            (Send::Gso, false),
            (Send::Gso, true),
            (Send::Mmsg, true),
        ] {
            let f = udp_run(size, 64, send, gro);
            let what = format!(
                "udp lo {size} B, send {send:?} x64, recv{}",
                if gro { "+GRO" } else { "" }
            );
            report(&what, &f);
        }
    }
}

#[test]
#[ignore = "measurement; run with --ignored --nocapture"]
fn packet_veth_rates() {
    if crate::common::skip_unless(is_root(), "needs root") {
        return;
    }
    // MTU 9000 so that a 4096-MTU RoCE frame fits, as on a jumbo-frame fabric.
    let pair = NetnsPair::up(&["--mtu", "9000"]);
    for size in [64usize, 1056, 4132] {
        let (rx_sock, a_mac) = pair.in_ns('a', || {
            let dev = NetDev::by_name("veth0").unwrap();
            let cfg = PacketConfig {
                socket_buffer: 32 << 20,
                ..PacketConfig::default()
            };
            (PacketSocket::open(&dev, &cfg).unwrap(), dev.mac.unwrap())
        });
        let tx_sock = pair.in_ns('b', || {
            let dev = NetDev::by_name("veth0").unwrap();
            let cfg = PacketConfig {
                qdisc_bypass: true,
                ..PacketConfig::default()
            };
            PacketSocket::open(&dev, &cfg).unwrap()
        });
        let stop = Arc::new(AtomicBool::new(false));
        let stop_tx = stop.clone();
        let frame_len = 14 + size;
        let sender = std::thread::spawn(move || {
            pin(0);
            let mut tx = TxBatch::new(64, frame_len);
            while !stop_tx.load(Ordering::Relaxed) {
                while !tx.is_full() {
                    tx.push_frame(|b| {
                        b[..6].copy_from_slice(a_mac.as_bytes());
                        b[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
                        b[12..14].copy_from_slice(&0x8915u16.to_be_bytes());
                        b[14..frame_len].fill(0x5a);
                        frame_len
                    });
                }
                tx_sock.send_batch(&mut tx).unwrap();
            }
        });
        pin(1);
        let mut rx = RxBatch::new(64, frame_len + 64);
        let (mut packets, mut bytes, mut syscalls) = (0u64, 0u64, 0u64);
        let start = Instant::now();
        while start.elapsed() < secs() {
            let n = rx_sock.recv_batch(&mut rx).unwrap();
            if n > 0 {
                syscalls += 1;
            }
            for i in 0..n {
                let f = rx.frame(i);
                assert_eq!(f.data[14], 0x5a);
                packets += 1;
                bytes += (f.data.len() - 14) as u64;
            }
        }
        let elapsed = start.elapsed();
        stop.store(true, Ordering::Relaxed);
        sender.join().unwrap();
        assert!(packets > 0);
        report(
            &format!("AF_PACKET veth {size} B (v1 frames), sendmmsg/recvmmsg x64"),
            &Figures {
                packets,
                bytes,
                elapsed,
                syscalls,
            },
        );
    }
}
