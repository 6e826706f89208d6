//! PFC on the soft transport, through the binaries: a soft `roce_write_bw --io packet --no-gso -S 3
//! --validate` pair between two namespaces, and a raw AF_PACKET socket in the server's namespace
//! playing the switch: it sends PFC frames out of the server's veth towards the client, first for
//! priority 5 (not the data's), then for priority 3 (the data's, `-S 3`), each 0xffff quanta re-sent
//! every few hundred microseconds, then a resume. A second AF_PACKET socket on the client's veth
//! records, in the kernel's order and with its timestamps, the pause frames arriving and the RoCE
//! frames leaving. Needs root; says so and returns without it. The tshark test needs tshark only.
//!
//! How the frames in flight are bounded: the client can only stop what it has not yet sent once it
//! has read a pause frame, and what it sends before that is bounded by its requester's window
//! (`max_unacked_psns`, 1024 PSNs: `--no-gso` frames are one PSN each). So within each stretch of
//! time that the captured pause frames cover without a gap (each covers 0xffff quanta at 10 Gb/s,
//! 3.36 ms, from its arrival), at most one window of data frames may leave; without PFC the same
//! stretch carries as many frames as the link takes.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use roceperf::wire::MacAddr;
use roceperf::wire::pfc::{PAUSE_FRAME_LEN, PauseRepr, link_speed_mbps, quanta_to_ns};

use crate::common::schema::assert_valid_file;
use crate::soft_support::{NetnsPair, is_root};

/// The "switch port" the pause frames come from.
const SWITCH: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x5e]);
/// The client's requester window: what may leave after a pause arrived and before it was read.
const WINDOW: usize = 1024;
/// An AF_PACKET socket bound to `veth0` of the calling thread's network namespace, every protocol.
fn veth_socket() -> OwnedFd {
    let all = (libc::ETH_P_ALL as u16).to_be() as i32;
    // SAFETY: plain socket(2); the descriptor is owned below.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, all) };
    assert!(
        fd >= 0,
        "AF_PACKET socket: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: a descriptor just returned to us and owned nowhere else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: a NUL-terminated name.
    let ifindex = unsafe { libc::if_nametoindex(c"veth0".as_ptr()) };
    assert!(ifindex > 0, "no veth0 in the namespace");
    // SAFETY: all-zero is a valid sockaddr_ll.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
    sll.sll_ifindex = ifindex as i32;
    // SAFETY: sll is a sockaddr_ll of the size passed.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            &sll as *const _ as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "bind veth0: {}", std::io::Error::last_os_error());
    fd
}

fn set_int(fd: &OwnedFd, opt: libc::c_int, v: libc::c_int) {
    // SAFETY: an int option of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            opt,
            &v as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(
        rc,
        0,
        "setsockopt {opt}: {}",
        std::io::Error::last_os_error()
    );
}

/// What the client's veth saw, at the kernel's timestamp (ns).
#[derive(Debug, Clone, Copy)]
enum Seen {
    /// A RoCE v2 frame the client sent, with its priority tag's PCP.
    Data { pcp: Option<u8> },
    /// A pause frame that arrived: its priority (one per frame here) and quanta.
    Pause { prio: u8, quanta: u16 },
}

/// Classifies one captured frame (its first bytes) by direction.
fn classify(f: &[u8], outgoing: bool) -> Option<Seen> {
    let be16 = |at: usize| Some(u16::from_be_bytes([*f.get(at)?, *f.get(at + 1)?]));
    if !outgoing {
        let repr = PauseRepr::parse(f).ok()?;
        let prio = (0..8).find(|&p| repr.quanta_for(p).is_some())?;
        return Some(Seen::Pause {
            prio,
            quanta: repr.quanta_for(prio)?,
        });
    }
    let (ethertype, ip, pcp) = match be16(12)? {
        0x8100 => (be16(16)?, 18, Some(f[14] >> 5)),
        t => (t, 14, None),
    };
    let ihl = usize::from(f.get(ip)? & 0xf) * 4;
    (ethertype == 0x0800 && *f.get(ip + 9)? == 17 && be16(ip + ihl + 2)? == 4791)
        .then_some(Seen::Data { pcp })
}

/// Records what `fd` takes until `stop`, counting data frames in `data` as they leave.
fn capture(fd: OwnedFd, stop: Arc<AtomicBool>, data: Arc<AtomicU64>) -> Vec<(i64, Seen)> {
    set_int(&fd, libc::SO_RCVBUFFORCE, 64 << 20);
    set_int(&fd, libc::SO_TIMESTAMPNS, 1);
    let tv = libc::timeval {
        tv_sec: 0,
        tv_usec: 50_000,
    };
    // SAFETY: a timeval of the size passed.
    unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            &tv as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    let mut seen = Vec::new();
    let mut buf = [0u8; 128];
    let mut control = [0u64; 16];
    while !stop.load(Ordering::Relaxed) {
        // SAFETY: all-zero is a valid sockaddr_ll and msghdr; every pointer below outlives the call.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_name = (&mut sll as *mut libc::sockaddr_ll).cast();
        msg.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as u32;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control);
        // SAFETY: msg describes live buffers of the sizes given.
        let n = unsafe { libc::recvmsg(fd.as_raw_fd(), &mut msg, 0) };
        if n < 0 {
            continue; // the receive timeout: look at the stop flag again
        }
        let mut at = None;
        // SAFETY: walking the control messages the kernel wrote into `control`, as cmsg(3) does.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                    let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                    at = Some(ts.tv_sec * 1_000_000_000 + ts.tv_nsec);
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        let outgoing = sll.sll_pkttype == libc::PACKET_OUTGOING;
        let len = (n as usize).min(buf.len());
        if let (Some(at), Some(s)) = (at, classify(&buf[..len], outgoing)) {
            if matches!(s, Seen::Data { .. }) {
                data.fetch_add(1, Ordering::Relaxed);
            }
            seen.push((at, s));
        }
    }
    seen
}

/// What the switch sent.
#[derive(Debug, Default)]
struct Sent {
    other_pauses: u64,
    data_pauses: u64,
}

fn send(fd: &OwnedFd, frame: &[u8]) {
    // SAFETY: a live buffer of the length given, on a socket bound to veth0.
    let n = unsafe { libc::send(fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
    assert_eq!(
        n,
        frame.len() as isize,
        "{}",
        std::io::Error::last_os_error()
    );
}

fn pfc(prio: u8, quanta: u16) -> [u8; PAUSE_FRAME_LEN] {
    let mut f = [0u8; PAUSE_FRAME_LEN];
    PauseRepr::priority(SWITCH, prio, quanta).emit(&mut f);
    f
}

/// Sends `prio`'s longest pause every 300 µs for `ms`, then its resume; how many pauses.
fn pause_for(fd: &OwnedFd, prio: u8, ms: u64) -> u64 {
    let end = Instant::now() + Duration::from_millis(ms);
    let mut n = 0;
    while Instant::now() < end {
        send(fd, &pfc(prio, 0xffff));
        n += 1;
        std::thread::sleep(Duration::from_micros(300));
    }
    send(fd, &pfc(prio, 0));
    n
}

/// The switch's schedule, once `data` shows the client sending: priority 5 for 150 ms (not the
/// data's), a malformed MAC Control frame, 50 ms of nothing, priority 3 for 300 ms.
fn switch(fd: OwnedFd, data: Arc<AtomicU64>) -> Sent {
    let deadline = Instant::now() + Duration::from_secs(60);
    while data.load(Ordering::Relaxed) < 2_000 {
        assert!(Instant::now() < deadline, "the client never sent");
        std::thread::sleep(Duration::from_millis(1));
    }
    let other_pauses = pause_for(&fd, 5, 150);
    let mut bad = pfc(3, 0xffff);
    bad[15] = 0x02; // MAC Control opcode 0x0102: neither PFC nor pause
    send(&fd, &bad);
    std::thread::sleep(Duration::from_millis(50));
    let data_pauses = pause_for(&fd, 3, 300);
    Sent {
        other_pauses,
        data_pauses,
    }
}

/// A stretch of time that `prio`'s pauses cover without a gap: from the first pause's place in the
/// capture (its index: it reached the client's socket then, whatever its timestamp says) until
/// the last one's time runs out.
#[derive(Debug, Clone, Copy)]
struct Stretch {
    first: usize,
    from: i64,
    to: i64,
}

/// The stretches `prio`'s captured pauses cover, each pause for its quanta at 10 Gb/s (veth's
/// speed) less `MARGIN` from its timestamp (the kernel stamps it on arrival and may deliver it a
/// little later: the margin keeps the stretch inside what the client saw), cut at the resume.
fn covered(seen: &[(i64, Seen)], prio: u8) -> Vec<Stretch> {
    const MARGIN: i64 = 1_000_000;
    let life = quanta_to_ns(0xffff, link_speed_mbps(Some(10_000))) as i64 - MARGIN;
    let mut out: Vec<Stretch> = Vec::new();
    for (i, &(at, s)) in seen.iter().enumerate() {
        let Seen::Pause { prio: p, quanta } = s else {
            continue;
        };
        if p != prio {
            continue;
        }
        match out.last_mut() {
            Some(last) if quanta == 0 => last.to = last.to.min(at),
            _ if quanta == 0 => {}
            Some(last) if at <= last.to => last.to = at + life,
            _ => out.push(Stretch {
                first: i,
                from: at,
                to: at + life,
            }),
        }
    }
    out
}

/// Data frames of stretch `s` that left while a pause the client had already been handed still
/// held it: after that pause in the capture (the kernel hands a frame to every packet socket at
/// once, ours and the client's) and before its time ran out counted from its arrival stamp. A
/// frame that left while the next pause was stamped but not yet delivered (a loaded machine's
/// softirq can lag by milliseconds) is not one: the client could not know of it.
fn data_in(seen: &[(i64, Seen)], s: &Stretch, prio: u8) -> usize {
    const MARGIN: i64 = 1_000_000;
    let life = quanta_to_ns(0xffff, link_speed_mbps(Some(10_000))) as i64 - MARGIN;
    let mut latest: Option<i64> = None;
    let mut n = 0;
    for &(at, d) in &seen[s.first..] {
        match d {
            Seen::Pause { prio: p, quanta } if p == prio => {
                latest = (quanta > 0).then_some(at);
            }
            Seen::Data { .. } if at < s.to && latest.is_some_and(|l| at < l + life) => n += 1,
            _ => {}
        }
    }
    n
}

fn data_between(seen: &[(i64, Seen)], from: i64, to: i64) -> usize {
    seen.iter()
        .filter(|(at, s)| matches!(s, Seen::Data { .. }) && (from..to).contains(at))
        .count()
}

#[test]
fn a_pfc_pause_for_the_data_priority_holds_the_sender_and_others_do_not() {
    if crate::common::skip_unless(is_root(), "needs root for network namespaces and AF_PACKET") {
        return;
    }
    let pair = NetnsPair::up(&[]);
    let (stop, data) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    let tap = pair.in_ns('b', veth_socket);
    let port = pair.in_ns('a', veth_socket);
    let capturing = {
        let (stop, data) = (stop.clone(), data.clone());
        std::thread::spawn(move || capture(tap, stop, data))
    };
    let switching = {
        let data = data.clone();
        std::thread::spawn(move || switch(port, data))
    };
    let dir = tempfile::tempdir().unwrap();
    let (sj, cj) = (dir.path().join("s.json"), dir.path().join("c.json"));
    // -D 3 outlasts the switch's schedule; -u 18 (a 1.07 s ACK timeout) outlasts its 300 ms pause,
    // which would otherwise expire the retransmission timer (PFC's known cost, docs/congestion.md).
    let (sjs, cjs) = (sj.display().to_string(), cj.display().to_string());
    fn args(json: &str) -> Vec<&str> {
        let mut a = crate::common::argv(
            "-d veth0 --io packet --no-gso -S 3 -s 65536 -D 3 -u 18 --validate -v --json",
        );
        a.push(json);
        a
    }
    let (s, c) = pair.run_pair("write_bw", args(&sjs), args(&cjs));
    let sent = switching.join().expect("the switch thread");
    stop.store(true, Ordering::Relaxed);
    let seen = capturing.join().expect("the capture thread");
    crate::common::assert_both_ok("write_bw -S 3 under PFC pauses", &s, &c);

    // The client counted what the switch sent, under mlx5's names, and the schema takes them.
    let doc = assert_valid_file("result", &cj);
    let pfc = &doc["test"]["counters"]["pfc"];
    assert_eq!(pfc["rx_prio3_pause"], sent.data_pauses, "{pfc}");
    assert_eq!(pfc["rx_prio5_pause"], sent.other_pauses, "{pfc}");
    assert_eq!(
        (&pfc["rx_prio3_resume"], &pfc["rx_prio5_resume"]),
        (&1.into(), &1.into())
    );
    assert_eq!(pfc["rx_pause_malformed"], 1, "{pfc}");
    assert!(
        pfc.get("rx_prio0_pause").is_none(),
        "only priorities that saw a frame: {pfc}"
    );
    let held_us = pfc["rx_prio3_pause_duration"].as_u64().unwrap();
    assert!(
        pfc["rx_prio5_pause_duration"].as_u64().unwrap() > 0,
        "{pfc}"
    );
    let mut stray = doc.clone();
    stray["test"]["counters"]["pfc"]["rx_prio8_pause"] = 1.into();
    let validator = jsonschema::validator_for(&crate::common::schema::schema("result")).unwrap();
    assert!(!validator.is_valid(&stray), "the schema accepts priority 8");
    // Nothing was lost: the pauses held frames, they did not drop them (no PSN gap reached the
    // server). A timer may still fire under a long pause and resend what was held: PFC's cost.
    let counters = &doc["test"]["counters"];
    assert_eq!(counters["naks_received"]["psn_sequence"], 0, "{counters}");
    let server = crate::common::json_file(&sj);
    assert!(
        server["test"]["counters"].get("pfc").is_none(),
        "the server saw no pause frame"
    );
    let out = format!("{}{}", c.stdout, c.stderr);
    crate::common::assert_contains(
        &out,
        "PFC: pause frames for priority 3 hold data, for priority 6 CNPs; quanta of 512 bit times at 10000 Mb/s (the interface's speed)",
    );
    crate::common::assert_contains(&out, "PFC pause frames received: prio3 pause");

    // The wire: data carries priority 3; priority 5's pauses did not hold it...
    assert!(
        seen.iter()
            .all(|(_, s)| !matches!(s, Seen::Data { pcp } if *pcp != Some(3)))
    );
    let other = covered(&seen, 5);
    let (a_start, a_end) = (other[0].from, other.last().unwrap().to);
    assert!(
        data_between(&seen, a_start + 50_000_000, a_end) > 0,
        "data stopped under priority 5's pauses ({other:?})"
    );
    let held = covered(&seen, 3);
    let covered_ns: i64 = held.iter().map(|s| s.to - s.from).sum();
    // ...and priority 3's did: within each stretch the pauses covered, at most one window left
    // while a pause the client had been handed held it (what one transmission had started when
    // the pause reached it).
    for s in &held {
        let n = data_in(&seen, s, 3);
        assert!(
            n <= WINDOW,
            "{n} data frames left under a delivered pause within {:.1} ms of pause ({s:?}; at most \
             {WINDOW} were in flight; {} by timestamp alone)",
            (s.to - s.from) as f64 / 1e6,
            data_between(&seen, s.from, s.to)
        );
    }
    let under: usize = held.iter().map(|s| data_in(&seen, s, 3)).sum();
    let free = data_between(&seen, a_start, a_end);
    assert!(
        covered_ns >= 20_000_000,
        "the pauses covered only {covered_ns} ns of 300 ms: {held:?}"
    );
    // The client held priority 3 for some of that time, and not beyond it: it times each pause
    // from when it reads the frame (a poll after its arrival; later when the machine's load
    // keeps it off the CPU), so each stretch may end on the client up to a pause's length after
    // the wire's (a bound per stretch: one for the whole run fails once there are ~70 of them).
    let pause_ns = quanta_to_ns(0xffff, link_speed_mbps(Some(10_000)));
    let slack_ns = held.len() as u64 * pause_ns;
    assert!(
        held_us > 0 && held_us * 1000 <= covered_ns as u64 + slack_ns,
        "held {held_us} µs, covered {covered_ns} ns + {} stretch(es) × {pause_ns} ns: {held:?}\n{out}",
        held.len()
    );
    eprintln!(
        "pfc: {} + {} pauses sent; priority 3 held the client {held_us} µs, the wire covered {} ms \
         in {} stretch(es) with at most {} data frames under a delivered pause each ({under} in all); {free} left \
         under priority 5's pauses",
        sent.data_pauses,
        sent.other_pauses,
        covered_ns / 1_000_000,
        held.len(),
        held.iter().map(|s| data_in(&seen, s, 3)).max().unwrap_or(0),
    );
    // After the resume, data flows again.
    let resumed = held.last().unwrap().to;
    assert!(
        data_between(&seen, resumed, i64::MAX) > 0,
        "no data after the resume"
    );
}

/// tshark reads what `PauseRepr::emit` writes as MAC Control: PFC with its class-enable vector and
/// the priority's time, and 802.3x pause with its one time.
#[test]
fn tshark_decodes_the_pause_frames_the_wire_code_writes() {
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("pause.pcap");
    let mut global = [0u8; PAUSE_FRAME_LEN];
    PauseRepr {
        src: SWITCH,
        kind: roceperf::wire::pfc::PauseKind::Global { quanta: 0x1234 },
    }
    .emit(&mut global);
    crate::vectors::write_pcap(&pcap, &[pfc(3, 0xffff).to_vec(), global.to_vec()]);
    let text = crate::wire_tshark::tshark_fields(
        &pcap,
        &[
            "_ws.col.Protocol",
            "eth.dst",
            "macc.opcode",
            "macc.cbfc.enbv",
            "macc.cbfc.pause_time.c3",
            "macc.cbfc.pause_time.c2",
            "macc.pause_time",
        ],
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        [
            "MAC CTRL|01:80:c2:00:00:01|0x0101|0x0008|65535|0|",
            "MAC CTRL|01:80:c2:00:00:01|0x0001||||4660",
        ],
        "{text}"
    );
}
