//! The congested link through real namespaces (`compare::congestion::topology` and the
//! `roce_switch` binary): what each discipline does to frames, asserted in frames and bytes, never
//! in time. Lossy: a sender above the rate loses exactly what the switch counts as dropped. ECN: a
//! sender below the rate gets no mark; above it the receiver sees exactly the CE marks the switch
//! counted, and only once the queue passed Kmin. PFC: pause frames reach the sender's veth when the
//! queue passes Xoff and a resume follows. PFC with ECN on the data's priority (the congestion
//! study's switch) drops nothing of another priority, a TCP connect among it, while the data holds
//! the queue above Kmax. A soft roceperf pair completes `--validate` through the
//! lossy and the ECN switch. Needs root and ethtool; says so and returns without them.

use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use roceperf::compare::congestion::topology::{SwitchSpec, Topology, TopologySpec};
use roceperf::results::switch::SwitchStats;
use roceperf::wire::pfc::{MAC_CONTROL_ETHERTYPE, PauseRepr};

use crate::common::{self, Side};
use crate::soft_support::is_root;

/// One congested link at a time: their switches and senders share the machine's two cores.
static ONE: Mutex<()> = Mutex::new(());
const PORT: u16 = 5000;
/// Datagrams of a blast, and their payload.
const BLAST: usize = 3000;
const PAYLOAD: usize = 1400;

/// Root and ethtool, or a recorded skip.
fn can_run() -> bool {
    let ethtool = std::process::Command::new("ethtool")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    !common::skip_unless(is_root(), "needs root for network namespaces and AF_PACKET")
        && !common::skip_unless(ethtool, "needs ethtool (bash scripts/deps.sh test)")
}

/// A fresh topology with a unique prefix.
fn topology() -> Topology {
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let prefix = format!(
        "sw{}x{}",
        std::process::id() % 100_000,
        SEQ.fetch_add(1, Ordering::Relaxed)
    );
    Topology::up(&prefix, &TopologySpec::default()).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs `f` on a thread inside namespace `ns`; sockets it opens stay there.
fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("open {path}: {e}"));
        // SAFETY: setns on this thread only, with a namespace fd we hold open.
        let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns({path}): {}", std::io::Error::last_os_error());
        f()
    })
    .join()
    .expect("namespace thread panicked")
}

fn set_int(fd: i32, level: i32, opt: i32, v: i32) {
    // SAFETY: v lives across the call and its size is passed.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            &v as *const i32 as *const libc::c_void,
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "setsockopt: {}", std::io::Error::last_os_error());
}

/// The receiver's UDP socket: TOS of each datagram reported, a big buffer.
fn receiver(t: &Topology) -> UdpSocket {
    in_ns(&t.receiver().netns, || {
        let s = UdpSocket::bind(("0.0.0.0", PORT)).unwrap();
        set_int(s.as_raw_fd(), libc::IPPROTO_IP, libc::IP_RECVTOS, 1);
        set_int(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            64 << 20,
        );
        s
    })
}

/// A sender's UDP socket in the senders' namespace, its datagrams carrying `tos`.
fn sender(t: &Topology, tos: i32) -> UdpSocket {
    sender_in(&t.senders().netns, tos)
}

/// A UDP socket in namespace `ns`, its datagrams carrying `tos`.
fn sender_in(ns: &str, tos: i32) -> UdpSocket {
    in_ns(ns, move || {
        let s = UdpSocket::bind(("0.0.0.0", 0)).unwrap();
        set_int(s.as_raw_fd(), libc::IPPROTO_IP, libc::IP_TOS, tos);
        set_int(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUFFORCE,
            64 << 20,
        );
        s
    })
}

/// Datagrams received until `quiet` passes without one, and how many arrived CE-marked.
fn drain(rx: &UdpSocket, quiet: Duration) -> (usize, usize) {
    rx.set_read_timeout(Some(quiet)).unwrap();
    let (mut n, mut ce) = (0, 0);
    let mut buf = vec![0u8; 9000];
    let mut control = [0u8; 64];
    loop {
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr() as *mut libc::c_void,
            iov_len: buf.len(),
        };
        // SAFETY: all-zero is a valid msghdr; its pointers are set to live buffers below.
        let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
        h.msg_iov = &mut iov;
        h.msg_iovlen = 1;
        h.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        h.msg_controllen = control.len() as _;
        // SAFETY: h points at live buffers of the lengths given.
        let rc = unsafe { libc::recvmsg(rx.as_raw_fd(), &mut h, 0) };
        if rc < 0 {
            return (n, ce);
        }
        n += 1;
        // SAFETY: the kernel wrote h's control buffer; CMSG_* stay within msg_controllen.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&h);
            while !c.is_null() {
                if (*c).cmsg_level == libc::IPPROTO_IP && (*c).cmsg_type == libc::IP_TOS {
                    ce += usize::from(*libc::CMSG_DATA(c) & 3 == 3);
                }
                c = libc::CMSG_NXTHDR(&h, c);
            }
        }
    }
}

/// Sends one datagram and waits for it (ARP resolved through the switch), then `count` more,
/// `gap` apart (none: as fast as the socket takes them). Returns the datagrams received after the
/// first one, and how many of them were CE-marked.
fn send_and_count(
    t: &Topology,
    tos: i32,
    count: usize,
    gap: Option<Duration>,
    rx: &UdpSocket,
) -> (usize, usize) {
    let tx = sender(t, tos);
    let to = (t.receiver().addr, PORT);
    tx.send_to(b"hello", to).unwrap();
    assert_eq!(
        drain(rx, Duration::from_secs(2)).0,
        1,
        "the first datagram crosses the switch (ARP through it)"
    );
    let payload = vec![0x5a; PAYLOAD];
    for _ in 0..count {
        tx.send_to(&payload, to).unwrap();
        if let Some(g) = gap {
            std::thread::sleep(g);
        }
    }
    drain(rx, Duration::from_millis(1500))
}

/// Starts the switch of `spec` in `t`, logs in `dir`.
fn start(
    t: &Topology,
    spec: &SwitchSpec,
    dir: &std::path::Path,
) -> roceperf::compare::congestion::topology::RunningSwitch {
    t.start_switch_at(env!("CARGO_BIN_EXE_roce_switch").into(), spec, dir)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The stats, checked against results/schema/switch.schema.json.
fn stop(sw: roceperf::compare::congestion::topology::RunningSwitch) -> SwitchStats {
    let path = sw.stats_path().to_owned();
    let stats = sw.stop().unwrap_or_else(|e| panic!("{e}"));
    common::schema::assert_valid_file("switch.schema", &path);
    stats
}

fn kernel_drops(s: &SwitchStats) -> u64 {
    s.ports.iter().map(|p| p.rx_kernel_drops).sum()
}

#[test]
fn lossy_drops_what_exceeds_the_buffer_and_the_receiver_gets_the_rest() {
    if !can_run() {
        return;
    }
    let _one = common::one_at_a_time(&ONE);
    let t = topology();
    // Waking for every frame and departure, then (--batch-us 500) sleeping 500 µs while frames are
    // queued: those that arrive meanwhile are read late and queued at their kernel stamps.
    for batch_us in [None, Some(500)] {
        lossy_blast(&t, batch_us);
    }
}

/// A blast at a 0.1 Gb/s port with a 100 kB buffer: what crossed, what dropped, the queue.
fn lossy_blast(t: &Topology, batch_us: Option<u64>) {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = SwitchSpec::new("lossy", 0.1);
    spec.buffer = Some(100_000);
    spec.sample_us = Some(500);
    spec.batch_us = batch_us;
    let sw = start(t, &spec, dir.path());
    let rx = receiver(t);
    let (got, ce) = send_and_count(t, 0, BLAST, None, &rx);
    let s = stop(sw);
    let e = &s.egress;
    assert!(
        e.dropped_packets > 0,
        "--batch-us {batch_us:?}: a blast above 0.1 Gb/s overflows 100 kB: {e:?}"
    );
    assert_eq!(
        got as u64 + e.dropped_packets + kernel_drops(&s),
        BLAST as u64,
        "every datagram arrived or was dropped at the switch: {e:?}"
    );
    assert_eq!(e.headroom_drops + e.marked_packets, 0);
    assert_eq!(ce, 0);
    assert_eq!(e.offered_packets, e.forwarded_packets + e.dropped_packets);
    assert!(
        e.max_queue_bytes <= 100_000 && e.max_queue_bytes > 90_000,
        "{e:?}"
    );
    // It forwarded thousands of frames: that took CPU, and no more than the whole run on every core.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    assert!(
        s.cpu_s > 0.0 && s.cpu_s <= (s.duration_s + 5.0) * cores,
        "cpu_s {} over {} s",
        s.cpu_s,
        s.duration_s
    );
    // The queue sampled every 500 µs: within the buffer, in time order, full at some point.
    let q = &s.queue_samples;
    assert!(q.len() > 10, "{q:?}");
    assert!(q.windows(2).all(|w| w[0][0] < w[1][0]), "{q:?}");
    assert!(q.iter().all(|&[_, b]| b <= 100_000));
    assert!(q.iter().any(|&[_, b]| b > 50_000), "{q:?}");
    // Each forwarded datagram is an Ethernet + IPv4 + UDP frame around its payload.
    assert!(
        e.forwarded_bytes >= got as u64 * (PAYLOAD as u64 + 42),
        "{e:?}"
    );
}

#[test]
fn ecn_marks_nothing_below_the_rate_and_marks_above_kmin_what_the_receiver_sees() {
    if !can_run() {
        return;
    }
    let _one = common::one_at_a_time(&ONE);
    let t = topology();
    let dir = tempfile::tempdir().unwrap();
    let mut spec = SwitchSpec::new("ecn", 0.1);
    spec.buffer = Some(400_000);
    spec.red = Some((20_000, 80_000, 0.2));
    let rx = receiver(&t);
    // ~6 Mb/s into 0.1 Gb/s: the queue never holds a frame ahead of the next.
    let sw = start(&t, &spec, dir.path());
    let (got, ce) = send_and_count(&t, 0x02, 200, Some(Duration::from_millis(2)), &rx);
    let s = stop(sw);
    assert_eq!((got, ce), (200, 0), "{:?}", s.egress);
    assert_eq!(s.egress.marked_packets, 0);
    assert!(s.egress.max_queue_bytes < 20_000, "{:?}", s.egress);
    // A blast of ECT(0) datagrams: the switch marks some, every mark reaches the receiver (a bad
    // IPv4 checksum would be dropped by its kernel) and every datagram is accounted for.
    let marked_blast = |spec: &SwitchSpec| {
        let sw = start(&t, spec, dir.path());
        let (got, ce) = send_and_count(&t, 0x02, BLAST, None, &rx);
        let s = stop(sw);
        let e = &s.egress;
        assert!(e.marked_packets > 0, "{e:?}");
        assert_eq!(
            ce as u64, e.marked_packets,
            "every mark reached the receiver"
        );
        assert_eq!(
            got as u64 + e.dropped_packets + kernel_drops(&s),
            BLAST as u64
        );
        s
    };
    // The queue passes Kmin and ECT(0) datagrams come out CE.
    let s = marked_blast(&spec);
    assert!(
        s.egress.max_queue_bytes >= 20_000,
        "marks only above Kmin: {:?}",
        s.egress
    );
    // Not-ECT datagrams are dropped RED-style above Kmin instead of marked.
    let sw = start(&t, &spec, dir.path());
    let (_, ce) = send_and_count(&t, 0, BLAST, None, &rx);
    let s = stop(sw);
    assert_eq!((ce, s.egress.marked_packets), (0, 0));
    assert!(s.egress.dropped_packets > 0, "{:?}", s.egress);
    // Decided at departure (--mark-at dequeue): the marks are written into frames already in the
    // queue, and reach the receiver as those made on arrival do.
    spec.mark_at = Some(roceperf::params::marks::MarkAt::Dequeue);
    marked_blast(&spec);
}

#[test]
fn pfc_pauses_the_sender_above_xoff_and_resumes_it_below_xon() {
    if !can_run() {
        return;
    }
    let _one = common::one_at_a_time(&ONE);
    let t = topology();
    let dir = tempfile::tempdir().unwrap();
    let mut spec = SwitchSpec::new("pfc", 0.1);
    spec.buffer = Some(200_000);
    spec.pfc = Some((50_000, 20_000));
    // A capture of what reaches the sender's veth, opened before the switch runs.
    let dev = t.senders().dev;
    let cap = in_ns(&t.senders().netns, move || capture(dev));
    let sw = start(&t, &spec, dir.path());
    let rx = receiver(&t);
    // DSCP 24 (TOS 0x60): priority 3, the lossless one. The kernel's sender ignores pause
    // frames (the soft endpoint honours them), so the buffer's headroom overflows too.
    let (got, _) = send_and_count(&t, 0x60, BLAST, None, &rx);
    let s = stop(sw);
    let pauses = read_pauses(&cap);
    let first_pause = pauses
        .iter()
        .position(|&q| q == 0xffff)
        .unwrap_or_else(|| panic!("no pause among {pauses:?}: {:?}", s.pfc));
    assert!(
        pauses[first_pause..].contains(&0),
        "a resume follows the pause: {pauses:?}"
    );
    assert!(
        s.pfc.pause_frames_sent >= 1 && s.pfc.resume_frames_sent >= 1,
        "{:?}",
        s.pfc
    );
    assert_eq!(
        pauses.len() as u64,
        s.pfc.pause_frames_sent + s.pfc.resume_frames_sent,
        "every PFC frame the switch counted reached the sender"
    );
    assert!(s.pfc.paused_ns > 0);
    assert!(s.egress.max_queue_bytes > 50_000, "{:?}", s.egress);
    assert_eq!(
        s.egress.dropped_packets, s.egress.headroom_drops,
        "priority 3 is dropped only past the headroom"
    );
    assert_eq!(
        got as u64 + s.egress.dropped_packets + kernel_drops(&s),
        BLAST as u64
    );
}

#[test]
fn pfc_ecn_on_the_datas_priority_lets_other_priorities_through_a_queue_above_kmax() {
    if !can_run() {
        return;
    }
    let _one = common::one_at_a_time(&ONE);
    let t = topology();
    let dir = tempfile::tempdir().unwrap();
    // roce_compare --congestion's switch: PFC and ECN on priority 3. At 10 Mb/s the burst below
    // (about 360 kB, under Xoff: no pause) takes ~290 ms to drain, all of it above Kmax.
    let mut spec = SwitchSpec::new("pfc-ecn", 0.01);
    spec.buffer = Some(600_000);
    spec.red = Some((5_000, 20_000, 0.2));
    spec.pfc = Some((500_000, 250_000));
    spec.pfc_prio = Some(3);
    spec.ecn_prio = Some(3);
    let sw = start(&t, &spec, dir.path());
    let rx = receiver(&t);
    let to = (t.receiver().addr, PORT);
    let (r_ns, v_ns) = (t.receiver().netns, t.victim().netns);
    let listener = in_ns(&r_ns, || {
        std::net::TcpListener::bind(("0.0.0.0", PORT)).unwrap()
    });
    // ARP resolved first from both namespaces, so the burst and the victim's frames are what the
    // queue holds.
    let data = sender(&t, 0x62); // DSCP 24 (priority 3), ECT(0): RoCE's data
    let victim = sender_in(&v_ns, 0); // Not-ECT, priority 0: a control connection's
    data.send_to(b"hello", to).unwrap();
    victim.send_to(b"hello", to).unwrap();
    assert_eq!(
        drain(&rx, Duration::from_secs(2)).0,
        2,
        "ARP through the switch"
    );
    let payload = vec![0x5a; PAYLOAD];
    for _ in 0..250 {
        data.send_to(&payload, to).unwrap();
    }
    // The victim's connect and datagrams find the queue above Kmax: with RED on every priority
    // each SYN (and each retry) and each datagram was dropped; confined to priority 3, they wait.
    for _ in 0..20 {
        victim.send_to(&payload[..100], to).unwrap();
    }
    let addr = std::net::SocketAddr::from((
        t.receiver().addr.parse::<std::net::Ipv4Addr>().unwrap(),
        PORT,
    ));
    let connected = in_ns(&v_ns, move || {
        std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map(|_| ())
    });
    let (got, ce) = drain(&rx, Duration::from_millis(1500));
    drop(listener);
    let s = stop(sw);
    let e = &s.egress;
    assert!(
        connected.is_ok(),
        "the victim's TCP connect: {connected:?}; {e:?}"
    );
    assert_eq!(e.dropped_packets, 0, "nothing dropped: {e:?}");
    assert_eq!(got, 270, "every datagram arrived: {e:?}");
    assert!(e.max_queue_bytes > 200_000, "{e:?}");
    assert!(
        e.marked_packets > 0 && ce as u64 == e.marked_packets,
        "{ce} CE of {e:?}"
    );
    assert_eq!(s.pfc.pause_frames_sent, 0, "below Xoff: {:?}", s.pfc);
    assert_eq!(s.ecn_prio, Some(3));
}

/// An AF_PACKET socket on `dev` that sees every frame arriving there.
fn capture(dev: &'static str) -> std::os::fd::OwnedFd {
    use std::os::fd::FromRawFd;
    let proto = (libc::ETH_P_ALL as u16).to_be();
    // SAFETY: plain socket creation; ownership goes to OwnedFd at once.
    let fd = unsafe {
        let raw = libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK,
            i32::from(proto),
        );
        assert!(raw >= 0, "AF_PACKET: {}", std::io::Error::last_os_error());
        std::os::fd::OwnedFd::from_raw_fd(raw)
    };
    let name = std::ffi::CString::new(dev).unwrap();
    // SAFETY: all-zero is a valid sockaddr_ll; name is NUL-terminated.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = proto;
    // SAFETY: as above.
    sll.sll_ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) } as i32;
    // SAFETY: sll is a valid sockaddr_ll of the size passed.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "bind: {}", std::io::Error::last_os_error());
    set_int(
        fd.as_raw_fd(),
        libc::SOL_SOCKET,
        libc::SO_RCVBUFFORCE,
        64 << 20,
    );
    fd
}

/// Priority 3's time in each PFC frame the capture holds, in order.
fn read_pauses(fd: &std::os::fd::OwnedFd) -> Vec<u16> {
    let mut buf = [0u8; 10_000];
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        // SAFETY: buf is a live buffer of the length passed.
        let n = unsafe {
            libc::recv(
                fd.as_raw_fd(),
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            break;
        }
        let f = &buf[..n as usize];
        if f.len() >= 14 && u16::from_be_bytes([f[12], f[13]]) == MAC_CONTROL_ETHERTYPE {
            let p = PauseRepr::parse(f).unwrap_or_else(|e| panic!("a bad pause frame: {e:?}"));
            out.push(p.quanta_for(3).expect("the frame names priority 3"));
        }
    }
    out
}

/// A soft `roce_write_bw` pair, server in the receiver's namespace and client in the senders',
/// through the switch of `spec`, with `--validate`; returns the switch's stats and the server's
/// soft counters.
fn soft_pair_through(spec: SwitchSpec) -> (SwitchStats, serde_json::Value) {
    let t = topology();
    let dir = tempfile::tempdir().unwrap();
    let sw = start(&t, &spec, dir.path());
    let sj = dir.path().join("s.json");
    let args = [
        "-d",
        "veth0",
        "--io",
        "packet",
        "--no-gso",
        "-s",
        "65536",
        "-n",
        "200",
        "--validate",
    ];
    let mut server = args.to_vec();
    let sjs = sj.display().to_string();
    server.extend(["--json", &sjs]);
    let (r, s) = (t.receiver().netns, t.senders().netns);
    let (sd, cd) = common::pair_on(
        "write_bw",
        Side {
            ns: Some(&r),
            args: server,
        },
        Side {
            ns: Some(&s),
            args: args.to_vec(),
        },
        t.receiver().addr,
    );
    let stats = stop(sw);
    common::assert_both_ok(
        &format!("a soft pair through the {} switch", spec.discipline),
        &sd,
        &cd,
    );
    (stats, common::json_file(&sj)["test"]["counters"].clone())
}

#[test]
fn a_soft_pair_validates_through_the_lossy_and_the_ecn_switch() {
    if !can_run() {
        return;
    }
    let _one = common::one_at_a_time(&ONE);
    let mut lossy = SwitchSpec::new("lossy", 0.3);
    lossy.buffer = Some(256_000);
    let (s, _) = soft_pair_through(lossy);
    assert!(
        s.egress.forwarded_bytes >= 200 * 65_536,
        "every WRITE crossed the bottleneck: {:?}",
        s.egress
    );
    let mut ecn = SwitchSpec::new("ecn", 0.3);
    ecn.red = Some((4_000, 32_000, 0.2));
    let (s, counters) = soft_pair_through(ecn);
    assert!(s.egress.forwarded_bytes >= 200 * 65_536, "{:?}", s.egress);
    assert!(s.egress.marked_packets > 0, "{:?}", s.egress);
    let seen = counters["np_ecn_marked_roce_packets"].as_u64().unwrap();
    assert!(
        seen > 0 && seen <= s.egress.marked_packets,
        "the server counted {seen} of {} marks",
        s.egress.marked_packets
    );
}
