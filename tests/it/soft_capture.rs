//! What the soft transport puts on the wire, judged by outsiders: tcpdump captures every packet of a
//! run, tshark must decode each one as RoCE (v1) or RRoCE (v2), and every ICRC must verify under an
//! implementation written here from roce-wire.md §5.2 alone (crc32fast, no roceperf wire code).
//! Needs root, tcpdump and tshark; says so and returns when one is missing.

use crate::soft_support;
use crate::vectors::read_pcap;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use roceperf::params::RoceVersion;
use roceperf::transport::soft::endpoint::{SoftConfig, SoftEndpoint};
use roceperf::transport::soft::io::impair::ImpairConfig;
use soft_support::endpoints::{connect, exchange, exchange_across, udp_cfg, veth_packet_cfg};
use soft_support::{NetnsPair, is_root};

fn have(tool: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Root, tcpdump and tshark; otherwise records the skip (see `common::skip`).
#[track_caller]
pub(crate) fn can_run() -> bool {
    !crate::common::skip_unless(
        is_root() && have("tcpdump") && have("tshark"),
        "needs root, tcpdump and tshark (apt-get install -y tcpdump tshark)",
    )
}

/// A running tcpdump writing to a temporary pcap.
pub(crate) struct Capture {
    child: Child,
    stderr: BufReader<std::process::ChildStderr>,
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Capture {
    pub(crate) fn start(netns: Option<&str>, iface: &str, filter: &str) -> Capture {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.pcap");
        let mut cmd = match netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, "tcpdump"]);
                c
            }
            None => Command::new("tcpdump"),
        };
        cmd.args([
            "-i",
            iface,
            "--immediate-mode",
            "-B",
            "65536",
            "-U",
            "-n",
            "-s",
            "0",
            "-w",
        ])
        .arg(&path)
        .arg(filter);
        let mut child = cmd
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("start tcpdump");
        // tcpdump says "listening on ..." once the capture is open; only then is nothing missed.
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        while err.read_line(&mut line).unwrap() > 0 && !line.contains("listening on") {
            line.clear();
        }
        assert!(
            line.contains("listening on"),
            "tcpdump did not start: {line}"
        );
        Capture {
            child,
            stderr: err,
            path,
            _dir: dir,
        }
    }

    /// Stops tcpdump (SIGINT flushes the file) and returns the pcap path.
    pub(crate) fn finish(mut self) -> (PathBuf, tempfile::TempDir) {
        std::thread::sleep(std::time::Duration::from_millis(200));
        // SAFETY: signalling the child we spawned, by its pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        self.child.wait().unwrap();
        let mut stats = String::new();
        let _ = std::io::Read::read_to_string(&mut self.stderr, &mut stats);
        eprintln!("tcpdump: {}", stats.trim().replace('\n', "; "));
        (self.path.clone(), self._dir)
    }
}

/// roce-wire.md §5.2, written out independently: CRC-32 over eight 0xFF bytes and the masked headers.
fn icrc_verifies(f: &[u8]) -> Result<(), String> {
    let ethertype = u16::from_be_bytes([f[12], f[13]]);
    let net = &f[14..];
    let be16 = |o: usize| u16::from_be_bytes([net[o], net[o + 1]]) as usize;
    // Where the IP/GRH payload ends (the ICRC is its last 4 bytes), from the length field.
    let end = match ethertype {
        0x8915 | 0x86dd => 40 + be16(4),
        0x0800 => be16(2),
        t => return Err(format!("ethertype {t:#06x} is not RoCE")),
    };
    let mut b = net[..end - 4].to_vec();
    match ethertype {
        // GRH or IPv6: traffic class, flow label, hop limit; then (IPv6) the UDP checksum.
        0x8915 | 0x86dd => {
            b[0] |= 0x0f;
            b[1..4].fill(0xff);
            b[7] = 0xff;
        }
        // IPv4: TOS, TTL, header checksum.
        _ => {
            b[1] = 0xff;
            b[8] = 0xff;
            b[10..12].fill(0xff);
        }
    }
    let bth = match ethertype {
        0x8915 => 40,
        0x0800 => 28,
        _ => 48,
    };
    if ethertype != 0x8915 {
        b[bth - 2..bth].fill(0xff); // UDP checksum
    }
    b[bth + 4] = 0xff; // BTH byte 4: FECN, BECN, reserved
    let mut h = crc32fast::Hasher::new();
    h.update(&[0xff; 8]);
    h.update(&b);
    let want = h.finalize().to_le_bytes();
    if want == net[end - 4..end] {
        Ok(())
    } else {
        Err(format!(
            "ICRC {:02x?} on the wire, {:02x?} computed",
            &net[end - 4..end],
            want
        ))
    }
}

/// tshark's protocol column and protocol stack for every frame.
fn tshark(path: &Path) -> Vec<(String, String)> {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(path)
        .args([
            "--disable-heuristic",
            "rpcrdma_infiniband",
            "-T",
            "fields",
            "-e",
            "_ws.col.Protocol",
            "-e",
            "frame.protocols",
        ])
        .output()
        .expect("run tshark");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let (p, s) = l.split_once('\t').unwrap_or((l, ""));
            (p.to_string(), s.to_string())
        })
        .collect()
}

fn judge(path: &Path) -> (usize, usize) {
    let frames = read_pcap(path);
    let decoded = tshark(path);
    assert_eq!(frames.len(), decoded.len());
    let (mut v1, mut v2) = (0, 0);
    for (i, (f, (col, stack))) in frames.iter().zip(&decoded).enumerate() {
        assert!(
            stack.contains("infiniband"),
            "frame {i} not decoded as InfiniBand: {stack}"
        );
        assert!(!stack.contains("malformed"), "frame {i}: {stack}");
        match col.as_str() {
            "RoCE" => v1 += 1,
            "RRoCE" => v2 += 1,
            other => panic!("frame {i} decoded as {other} ({stack})"),
        }
        icrc_verifies(f).unwrap_or_else(|e| panic!("frame {i}: {e}"));
    }
    (v1, v2)
}

#[test]
fn udp_v2_on_loopback_decodes_as_rroce_with_valid_icrcs() {
    if !can_run() {
        return;
    }
    // Port 4791 (what tshark decodes as RRoCE) on addresses no other test uses.
    let cap = Capture::start(None, "lo", "udp port 4791 and host 127.0.9.1");
    // lo never cuts GSO super-datagrams, so a capture on it would show 64 KiB batches (GSO on the
    // wire is judged below, across a veth that segments): send single packets here.
    let single = |ip| SoftConfig {
        gso: false,
        ..udp_cfg(ip, 4791)
    };
    let mut a = SoftEndpoint::open(single("127.0.9.1")).unwrap();
    let mut b = SoftEndpoint::open(single("127.0.9.2")).unwrap();
    connect(&mut a, &mut b);
    exchange(&mut a, &mut b);
    let (path, _dir) = cap.finish();
    let (v1, v2) = judge(&path);
    assert_eq!(v1, 0);
    let sent = a.counters().tx_packets + b.counters().tx_packets;
    assert_eq!(
        v2 as u64, sent,
        "every packet sent was captured and checked"
    );
}

/// A namespace pair whose veth takes no super-frames (`netns.sh up --wire-segments`: the kernel
/// cuts them as it would for a NIC without segmentation offload), and a capture of `filter` on side
/// a's veth0.
fn capture_on_a_segmenting_veth(filter: &str) -> (NetnsPair, Capture) {
    let pair = NetnsPair::up(&["--mtu", "9000", "--wire-segments"]);
    let cap = Capture::start(Some(&pair.ns('a')), "veth0", filter);
    (pair, cap)
}

#[test]
fn packet_v1_and_v2_across_veth_decode_as_roce_and_rroce_with_valid_icrcs() {
    if !can_run() {
        return;
    }
    // RoCE v2 over AF_PACKET leaves in super-frames, which a plain veth carries whole: this one
    // takes none, and every packet is judged as the wire carries it.
    let (pair, cap) = capture_on_a_segmenting_veth("ether proto 0x8915 or udp port 4791");
    let mut sent = 0;
    for version in [RoceVersion::V1, RoceVersion::V2] {
        let open = move |bind: &'static str| {
            move || {
                let mut c = veth_packet_cfg(version);
                c.bind = (version == RoceVersion::V2).then(|| bind.parse().unwrap());
                SoftEndpoint::open(c).unwrap()
            }
        };
        let (a, b) = exchange_across(&pair, open);
        sent += a.counters().tx_packets + b.counters().tx_packets;
    }
    let (path, _dir) = cap.finish();
    let (v1, v2) = judge(&path);
    assert!(v1 > 50 && v2 > 50, "v1 {v1}, v2 {v2}");
    assert_eq!(
        (v1 + v2) as u64,
        sent,
        "every packet sent was captured and checked"
    );
}

/// UDP GSO as a NIC without segmentation offload puts it on the wire: the veth takes no super-datagrams
/// (`netns.sh up --wire-segments`), so the kernel cuts them, giving IPv4 segment k the IP ID k. Every
/// packet must still decode and carry the ICRC for its own header, ID included.
#[test]
fn udp_gso_segments_on_the_wire_carry_icrcs_for_their_ip_ids() {
    if !can_run() {
        return;
    }
    let (pair, cap) = capture_on_a_segmenting_veth("udp port 4791");
    let open = |bind: &'static str| {
        move || {
            let mut c = SoftConfig::new("veth0", RoceVersion::V2);
            c.buffer_len = 1 << 20;
            c.impair = Some(ImpairConfig::default());
            c.bind = Some(bind.parse().unwrap());
            assert!(c.gso, "GSO is the UDP backend's default");
            SoftEndpoint::open(c).unwrap()
        }
    };
    let (a, b) = exchange_across(&pair, open);
    let sent = a.counters().tx_packets + b.counters().tx_packets;
    let batches = a.counters().tx_batches + b.counters().tx_batches;
    let (path, _dir) = cap.finish();
    let frames = read_pcap(&path);
    let (v1, v2) = judge(&path);
    assert_eq!(
        (v1, v2 as u64),
        (0, sent),
        "every packet, cut apart, was checked"
    );
    let ids: Vec<u16> = frames
        .iter()
        .map(|f| u16::from_be_bytes([f[14 + 4], f[14 + 5]]))
        .collect();
    assert!(
        ids.iter().any(|&id| id >= 2),
        "super-datagrams of several packets were cut up ({sent} packets in {batches} sends): IDs {ids:?}"
    );
}
