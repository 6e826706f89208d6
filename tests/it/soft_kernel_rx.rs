//! RoCE v2 over AF_PACKET keeps the kernel's IP/UDP receive off its frames: with the TCX ingress
//! program attached, a UDP socket bound to the receiver's address and port 4791 gets nothing while
//! RoCE traffic completes, UDP to another port or address still arrives, and the program is gone
//! once the endpoint is; without the capabilities to load it, the sink socket takes over and the
//! header says why. Across a veth pair between two network namespaces; needs root.

use crate::soft_support;

use std::net::{SocketAddr, UdpSocket};
use std::process::Command;
use std::time::Duration;

use roceperf::params::RoceVersion;
use roceperf::transport::soft::endpoint::{SoftConfig, SoftEndpoint};
use roceperf::transport::soft::io::kernel_rx::KernelRx;
use soft_support::endpoints::{connect, exchange, veth_packet_cfg};
use soft_support::{CAP_BPF, CAP_NET_ADMIN, CAP_SYS_ADMIN, NetnsPair, is_root};

/// A RoCE v2 AF_PACKET endpoint on veth0 at `ip`, with the guard `kernel_rx`.
fn v2_cfg(ip: &str, kernel_rx: KernelRx) -> SoftConfig {
    let mut c = veth_packet_cfg(RoceVersion::V2);
    c.bind = Some(ip.parse().unwrap());
    c.kernel_rx = Some(kernel_rx);
    c
}

/// A non-blocking UDP socket bound to `at` (opened in whichever namespace the caller's thread is).
fn bound(at: &str) -> std::io::Result<UdpSocket> {
    let s = UdpSocket::bind(at)?;
    s.set_nonblocking(true)?;
    Ok(s)
}

/// The datagrams waiting on `s` after a moment for stragglers.
fn drain(s: &UdpSocket) -> Vec<Vec<u8>> {
    std::thread::sleep(Duration::from_millis(100));
    let mut got = Vec::new();
    let mut buf = [0u8; 9000];
    while let Ok(n) = s.recv(&mut buf) {
        got.push(buf[..n].to_vec());
    }
    got
}

/// Sends `text` from side b to each of `to` through an ordinary UDP socket.
fn send_from_b(pair: &NetnsPair, to: &[&str], text: &'static [u8]) {
    let to: Vec<SocketAddr> = to.iter().map(|a| a.parse().unwrap()).collect();
    pair.in_ns('b', move || {
        for dst in to {
            let any = if dst.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" };
            UdpSocket::bind(any).unwrap().send_to(text, dst).unwrap();
        }
    });
}

/// UDP datagrams the kernel's UDP receive has seen in the calling thread's namespace, of IPv4 or
/// IPv6 (delivered, to no port, or in error): what a frame that climbed the stack leaves behind.
fn udp_seen(v6: bool) -> u64 {
    let (file, keys) = if v6 {
        ("snmp6", ["Udp6InDatagrams", "Udp6NoPorts", "Udp6InErrors"])
    } else {
        ("snmp", ["InDatagrams", "NoPorts", "InErrors"])
    };
    let text = std::fs::read_to_string(format!("/proc/thread-self/net/{file}")).unwrap();
    if v6 {
        // One "name value" a line.
        return text
            .lines()
            .filter_map(|l| l.split_once(char::is_whitespace))
            .filter(|(k, _)| keys.contains(k))
            .map(|(_, v)| v.trim().parse::<u64>().unwrap())
            .sum();
    }
    // Two "Udp:" lines, names then values.
    let mut udp = text.lines().filter(|l| l.starts_with("Udp:"));
    let (names, values) = (udp.next().unwrap(), udp.next().unwrap());
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .filter(|(k, _)| keys.contains(k))
        .map(|(_, v)| v.parse::<u64>().unwrap())
        .sum()
}

/// Side a at `a_ip` (and b at `b_ip`) with the TCX guard, sending single frames or super-frames
/// (`gso`): what the kernel's UDP receive sees on both sides during RoCE traffic, what a UDP socket
/// on a's RoCE address and port gets, and what arrives elsewhere (`others`, addresses of side a
/// that must still get UDP).
fn tcx_keeps_the_stack_off(
    a_ip: &'static str,
    b_ip: &'static str,
    others: [&'static str; 2],
    gso: bool,
) {
    // MTU 9000: frames of a 4096-byte MTU are longer than a page, which an AF_PACKET sender hands
    // over with only the Ethernet header in the linear part; the program must look past it.
    let pair = NetnsPair::up(&["--mtu", "9000"]);
    // A second address on side a: the program drops only what is sent to the endpoint's own.
    let extra = Command::new("ip")
        .args([
            "-n",
            &pair.ns('a'),
            "addr",
            "add",
            "10.77.0.3/24",
            "dev",
            "veth0",
        ])
        .status()
        .unwrap();
    assert!(extra.success());
    let cfg = move |ip| SoftConfig {
        gso,
        ..v2_cfg(ip, KernelRx::Tcx)
    };
    let mut a = pair.in_ns('a', move || SoftEndpoint::open(cfg(a_ip)).unwrap());
    let mut b = pair.in_ns('b', move || SoftEndpoint::open(cfg(b_ip)).unwrap());
    let port_of = |ip: &str| {
        if ip.contains(':') {
            format!("[{ip}]:4791")
        } else {
            format!("{ip}:4791")
        }
    };
    let (roce_port, b_port) = (port_of(a_ip), port_of(b_ip));
    let header = a.setup_notes().join("\n");
    assert!(
        header.contains(&format!(
            "kernel IP/UDP receive skipped for frames to {roce_port} (a TCX ingress program drops them after this socket's copy)"
        )),
        "{header}"
    );
    // No sink holds the port, so anyone may bind it; with the program in place it gets nothing.
    let watch = roce_port.clone();
    let (on_roce, on_others) = pair.in_ns('a', move || {
        let others: Vec<UdpSocket> = others.iter().map(|o| bound(o).unwrap()).collect();
        (bound(&watch).unwrap(), others)
    });
    let on_b = pair.in_ns('b', move || bound(&b_port).unwrap());
    let v6 = a_ip.contains(':');
    let seen = || {
        [
            pair.in_ns('a', move || udp_seen(v6)),
            pair.in_ns('b', move || udp_seen(v6)),
        ]
    };
    let before = seen();
    connect(&mut a, &mut b);
    // Side b receives the 200 KB WRITE, side a the 30 KB READ's responses: frames both under and
    // over a page.
    exchange(&mut a, &mut b);
    let (to_a, to_b) = (b.counters().tx_packets, a.counters().tx_packets);
    assert!(to_a >= 8 && to_b >= 50, "{to_a} packets to a, {to_b} to b");
    assert_eq!(
        seen(),
        before,
        "the kernel's UDP receive saw RoCE frames (sides a, b)"
    );
    assert_eq!(
        drain(&on_b).len(),
        0,
        "the kernel's UDP on side b received RoCE frames"
    );
    send_from_b(&pair, &[&roce_port], b"stray");
    send_from_b(&pair, &others, b"passes");
    assert_eq!(
        drain(&on_roce).len(),
        0,
        "the kernel's UDP received RoCE frames (or the stray datagram) sent to {roce_port}"
    );
    for (s, at) in on_others.iter().zip(others) {
        assert_eq!(drain(s), [b"passes".to_vec()], "UDP to {at} must pass");
    }
    // The link closes with the endpoint: the kernel's UDP receives again.
    drop(a);
    send_from_b(&pair, &[&roce_port], b"after");
    assert_eq!(
        drain(&on_roce),
        [b"after".to_vec()],
        "the program outlived its endpoint"
    );
}

#[test]
fn v2_over_af_packet_ipv4_frames_skip_the_kernel_udp_receive() {
    if crate::common::skip_unless(is_root(), "needs root for namespaces, AF_PACKET and BPF") {
        return;
    }
    // Port 4792 of our address, and 4791 of another address of ours.
    let others = ["10.77.0.1:4792", "10.77.0.3:4791"];
    for gso in [false, true] {
        tcx_keeps_the_stack_off("10.77.0.1", "10.77.0.2", others, gso);
    }
}

#[test]
fn v2_over_af_packet_ipv6_frames_skip_the_kernel_udp_receive() {
    if crate::common::skip_unless(is_root(), "needs root for namespaces, AF_PACKET and BPF") {
        return;
    }
    // The IPv6 program passes IPv4 to the same port, and another IPv6 port.
    let others = ["10.77.0.1:4791", "[fd77::1]:4792"];
    for gso in [false, true] {
        tcx_keeps_the_stack_off("fd77::1", "fd77::2", others, gso);
    }
}

#[test]
fn without_the_capabilities_for_bpf_a_sink_socket_takes_the_frames_and_the_header_says_why() {
    if crate::common::skip_unless(is_root(), "needs root for namespaces, AF_PACKET and BPF") {
        return;
    }
    let pair = NetnsPair::up(&[]);
    let mut a = pair.in_ns('a', || {
        // What loading a BPF program needs; CAP_NET_RAW stays.
        soft_support::drop_capabilities(&[CAP_NET_ADMIN, CAP_SYS_ADMIN, CAP_BPF]);
        SoftEndpoint::open(v2_cfg("10.77.0.1", KernelRx::Tcx)).unwrap()
    });
    let header = a.setup_notes().join("\n");
    assert!(
        header.contains(
            "frames to 10.77.0.1:4791 also climb the kernel's IP/UDP receive, into a socket that drops them (no TCX ingress program: loading one needs CAP_BPF and CAP_NET_ADMIN (run as root))"
        ),
        "{header}"
    );
    // Asked for by configuration (or ROCEPERF_KERNEL_RX=sink), the sink runs without trying TCX.
    let mut b = pair.in_ns('b', || {
        SoftEndpoint::open(v2_cfg("10.77.0.2", KernelRx::Sink)).unwrap()
    });
    let header = b.setup_notes().join("\n");
    assert!(
        header.contains("(no TCX ingress program: ROCEPERF_KERNEL_RX=sink asked for the socket)"),
        "{header}"
    );
    // The sink holds the port, and the RoCE traffic completes beside it.
    let taken = pair.in_ns('a', || bound("10.77.0.1:4791").map(drop));
    assert_eq!(
        taken.map_err(|e| e.kind()),
        Err(std::io::ErrorKind::AddrInUse)
    );
    connect(&mut a, &mut b);
    exchange(&mut a, &mut b);
}

#[test]
fn a_bad_kernel_rx_word_is_a_setup_error_that_names_the_choices() {
    let port = crate::common::free_port().to_string();
    let done = crate::common::spawn_env(
        "write_lat",
        &["--transport", "soft", "-d", "lo", "-p", &port, "-n", "5"],
        &[("ROCEPERF_KERNEL_RX", "xdp")],
    )
    .wait(20, "a server with ROCEPERF_KERNEL_RX=xdp");
    done.assert_ended(
        2,
        &["ROCEPERF_KERNEL_RX=xdp", "use tcx", "sink", "or off"],
        "ROCEPERF_KERNEL_RX=xdp",
    );
}

#[test]
fn v2_without_super_frames_moves_as_v1_does() {
    if crate::common::skip_unless(is_root(), "needs root for namespaces and AF_PACKET") {
        return;
    }
    let pair = NetnsPair::up(&["--mtu", "9000"]);
    // The backend line up to the guard: how frames move, which must be the same words for both.
    let batching = |ep: &SoftEndpoint| {
        let line = ep.setup_notes()[0].clone();
        let over = line.split(" over ").nth(1).unwrap().to_string();
        over.split(';').next().unwrap().to_string()
    };
    let (v1, v2, v2_super) = pair.in_ns('a', || {
        let v1 = SoftEndpoint::open(veth_packet_cfg(RoceVersion::V1)).unwrap();
        let mut single = v2_cfg("10.77.0.1", KernelRx::Tcx);
        single.gso = false; // --no-gso
        let v2 = SoftEndpoint::open(single).unwrap();
        let v2_super = SoftEndpoint::open(v2_cfg("10.77.0.1", KernelRx::Off)).unwrap();
        (v1, v2, v2_super)
    });
    assert!(
        batching(&v1).contains("single frames, a receive ring of"),
        "{}",
        batching(&v1)
    );
    assert_eq!(batching(&v2), batching(&v1));
    assert!(
        batching(&v2_super).contains("virtio_net_hdr super-frames"),
        "{}",
        batching(&v2_super)
    );
}
