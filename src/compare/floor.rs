//! Each row's floor: `roce_ref` over the host path the row took, moving the bytes the row's packets
//! carry, run right after the row by the same machinery (server and client, the same namespaces and
//! cores), so that the table can say what the path costs and what the stack adds above it.
//!
//! [`REFERENCES`] is the one table of what holds each path: a ping-pong for latency rows (one packet
//! each way, the sizes of the row's request and answer), a stream for bandwidth rows (frames of the
//! row's fullest packet, converted to the payload those frames would carry). The frame sizes come
//! from [`super::ceiling`]'s arithmetic.

use super::ceiling::{TCP_FRAME_HEADER, datagram_len, packet_len};
use crate::params::{Metric, RoceVersion, TestKind, TransportKind, Verb};
use crate::results::{Floor, HostPath};
use crate::wire::{Encapsulation, Opcode};
use serde::{Deserialize, Serialize};

/// The reference binary, beside the test binaries.
pub(crate) const REF_BINARY: &str = "roce_ref";

/// A `roce_ref` reference (its subcommand).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum RefMode {
    /// `udp-pingpong`: one datagram each way on connected UDP sockets.
    UdpPingpong,
    /// `tcp-pingpong`: one message each way, TCP_NODELAY.
    TcpPingpong,
    /// `packet-pingpong`: one raw Ethernet frame each way on AF_PACKET sockets.
    PacketPingpong,
    /// `udp-stream`: UDP GSO super-datagrams one way, received with GRO.
    UdpStream,
    /// `tcp-stream`: writes of one size one way.
    TcpStream,
    /// `packet-stream`: `sendmmsg` batches of raw frames one way.
    PacketStream,
}

impl RefMode {
    /// The subcommand: `packet-pingpong`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            RefMode::UdpPingpong => "udp-pingpong",
            RefMode::TcpPingpong => "tcp-pingpong",
            RefMode::PacketPingpong => "packet-pingpong",
            RefMode::UdpStream => "udp-stream",
            RefMode::TcpStream => "tcp-stream",
            RefMode::PacketStream => "packet-stream",
        }
    }

    /// AF_PACKET modes bind an interface (`-d`) and find the server by broadcast; the others take a
    /// port and the server's address.
    fn is_packet(self) -> bool {
        matches!(self, RefMode::PacketPingpong | RefMode::PacketStream)
    }

    fn is_stream(self) -> bool {
        matches!(
            self,
            RefMode::UdpStream | RefMode::TcpStream | RefMode::PacketStream
        )
    }
}

/// What holds each host path: its ping-pong (latency rows) and its stream (bandwidth rows). An RDMA
/// NIC has no host path to hold it to (the wire ceiling does).
pub(crate) const REFERENCES: [(HostPath, RefMode, RefMode); 3] = [
    (
        HostPath::AfPacket,
        RefMode::PacketPingpong,
        RefMode::PacketStream,
    ),
    (HostPath::UdpGso, RefMode::UdpPingpong, RefMode::UdpStream),
    (
        HostPath::TcpSocket,
        RefMode::TcpPingpong,
        RefMode::TcpStream,
    ),
];

/// Where an AF_PACKET client sends its first frame: the broadcast address finds the server.
const BROADCAST: &str = "ff:ff:ff:ff:ff:ff";

/// One floor run, as both sides build their command line from it (and as a two-host comparison
/// sends it to its server).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct FloorJob {
    /// The reference.
    pub(crate) mode: RefMode,
    /// `-s`: bytes of each message (or frame after its Ethernet header).
    pub(crate) size: u32,
    /// `--reply-size` of a ping-pong whose answer differs from its request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) reply_size: Option<u32>,
    /// `-D` of a stream; None: roce_ref's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) duration: Option<u64>,
}

impl FloorJob {
    /// The arguments of one side (after the binary's name): `host` is the client's server (None on
    /// the server), `device` the interface an AF_PACKET reference binds.
    pub(crate) fn args(
        &self,
        port: u16,
        cpu: Option<usize>,
        device: Option<&str>,
        host: Option<&str>,
    ) -> Vec<String> {
        let mut a = vec![self.mode.name().to_owned()];
        a.extend(self.shape(device));
        if !self.mode.is_packet() {
            a.extend(["-p".into(), port.to_string()]);
        }
        if let Some(c) = cpu {
            a.extend(["--cpu".into(), c.to_string()]);
        }
        a.push("--json".into());
        if let Some(h) = host {
            a.push(if self.mode.is_packet() { BROADCAST } else { h }.to_owned());
        }
        a
    }

    /// What shapes the traffic: `-d`, `-s`, `--reply-size`, `-D`.
    fn shape(&self, device: Option<&str>) -> Vec<String> {
        let mut a = Vec::new();
        if let (true, Some(d)) = (self.mode.is_packet(), device) {
            a.extend(["-d".into(), d.to_owned()]);
        }
        a.extend(["-s".into(), self.size.to_string()]);
        if let Some(r) = self.reply_size {
            a.extend(["--reply-size".into(), r.to_string()]);
        }
        if let Some(d) = self.duration {
            a.extend(["-D".into(), d.to_string()]);
        }
        a
    }

    /// The reference as the table and files name it: `roce_ref packet-pingpong -d veth0 -s 76`.
    pub(crate) fn describe(&self, device: Option<&str>) -> String {
        let mut words = vec![REF_BINARY.to_owned(), self.mode.name().to_owned()];
        words.extend(self.shape(device));
        words.join(" ")
    }
}

/// How a reference's figure becomes the row's floor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Scale {
    /// A one-way latency (SEND, WRITE: half the round trip, as roce_ref reports).
    OneWay,
    /// The whole round trip (READ, atomics).
    RoundTrip,
    /// A stream of frames of `frame` bytes that each carry `payload` bytes of the row's messages.
    Payload {
        /// Bytes of the row's payload per frame.
        payload: u64,
        /// Bytes roce_ref counts per frame.
        frame: u64,
    },
}

/// A row's floor at one size: the run, and what its figure means for the row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct FloorPlan {
    /// What runs.
    pub(crate) job: FloorJob,
    /// How its figure becomes the floor.
    pub(crate) scale: Scale,
}

/// What carries a row's RoCE packets, for their sizes (TCP's are [`tcp_sizes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Carrier {
    /// RoCE frames after their Ethernet header (AF_PACKET).
    Frames(Encapsulation),
    /// RoCE v2 datagrams (a UDP socket's payload).
    Datagrams,
}

impl Carrier {
    fn bytes(self, op: Opcode, payload: u64) -> u64 {
        match self {
            Carrier::Frames(e) => packet_len(e, op, payload),
            Carrier::Datagrams => datagram_len(op, payload),
        }
    }
}

/// A ping-pong's request and answer of `verb` at `size`: (opcode, payload) each.
fn exchange(verb: Verb, size: u64) -> [(Opcode, u64); 2] {
    match verb {
        Verb::Write => [(Opcode::RC_RDMA_WRITE_ONLY, size); 2],
        Verb::Send => [(Opcode::RC_SEND_ONLY, size); 2],
        Verb::Read => [
            (Opcode::RC_RDMA_READ_REQUEST, 0),
            (Opcode::RC_RDMA_READ_RESPONSE_ONLY, size),
        ],
        Verb::Atomic => [
            (Opcode::RC_FETCH_ADD, 0),
            (Opcode::RC_ATOMIC_ACKNOWLEDGE, 0),
        ],
    }
}

/// roceperf's TCP frames of `verb` at `size`: the request and the answer of a ping-pong, the frame
/// and payload of a stream.
fn tcp_sizes(verb: Verb, size: u64) -> ([u64; 2], (u64, u64)) {
    let h = TCP_FRAME_HEADER;
    match verb {
        Verb::Write | Verb::Send => ([h + size, h + size], (size, h + size)),
        Verb::Read => ([h, h + size], (size, h + size)),
        // The request carries a 16-byte operand block; the atomic's figure is its 8-byte word.
        Verb::Atomic => ([h + 16, h], (8, h + 16)),
    }
}

/// The floor of a row at `size`: `transport` and `roce` over `path`, the RoCE MTU `mtu` its run used,
/// `duration` its `-D` (a stream's length). Err: why the row has no floor, as its note says it.
pub(crate) fn plan(
    path: HostPath,
    (transport, roce): (TransportKind, Option<RoceVersion>),
    test: TestKind,
    size: u64,
    mtu: u32,
    duration: Option<u64>,
) -> Result<FloorPlan, String> {
    let Some(&(_, pingpong, stream)) = REFERENCES.iter().find(|r| r.0 == path) else {
        return Err(
            "no host path to hold it to: the NIC moves the packets (its wire ceiling applies)"
                .into(),
        );
    };
    // None: TCP.
    let carrier = match (path, transport, roce) {
        (_, TransportKind::Tcp, _) => None,
        (HostPath::AfPacket, _, Some(RoceVersion::V1)) => Some(Carrier::Frames(Encapsulation::V1)),
        (HostPath::AfPacket, _, _) => Some(Carrier::Frames(Encapsulation::V2v4)),
        _ => Some(Carrier::Datagrams),
    };
    let verb = test.verb;
    let mtu = u64::from(mtu.max(256));
    let (job, scale) = match test.metric {
        Metric::Latency => {
            let [request, answer] = match carrier {
                None => tcp_sizes(verb, size).0,
                Some(_) if verb != Verb::Atomic && size > mtu => {
                    return Err(format!(
                        "no floor: a {size}-byte message takes {} packets, roce_ref's ping-pong one",
                        size.div_ceil(mtu)
                    ));
                }
                Some(c) => exchange(verb, size).map(|(op, payload)| c.bytes(op, payload)),
            };
            let scale = match verb {
                Verb::Send | Verb::Write => Scale::OneWay,
                Verb::Read | Verb::Atomic => Scale::RoundTrip,
            };
            let job = FloorJob {
                mode: pingpong,
                size: bytes(request, pingpong)?,
                reply_size: (answer != request)
                    .then(|| bytes(answer, pingpong))
                    .transpose()?,
                duration: None,
            };
            (job, scale)
        }
        Metric::Bandwidth => {
            let (payload, frame) = if let Some(c) = carrier {
                // The row's fullest packet: the whole message, or a full-MTU middle packet.
                let (op, payload) = match (verb, size > mtu) {
                    (Verb::Write, false) => (Opcode::RC_RDMA_WRITE_ONLY, size),
                    (Verb::Write, true) => (Opcode::RC_RDMA_WRITE_MIDDLE, mtu),
                    (Verb::Send, false) => (Opcode::RC_SEND_ONLY, size),
                    (Verb::Send, true) => (Opcode::RC_SEND_MIDDLE, mtu),
                    (Verb::Read, false) => (Opcode::RC_RDMA_READ_RESPONSE_ONLY, size),
                    (Verb::Read, true) => (Opcode::RC_RDMA_READ_RESPONSE_MIDDLE, mtu),
                    (Verb::Atomic, _) => (Opcode::RC_FETCH_ADD, 0),
                };
                let counted = if verb == Verb::Atomic { 8 } else { payload };
                (counted, c.bytes(op, payload))
            } else {
                tcp_sizes(verb, size).1
            };
            let job = FloorJob {
                mode: stream,
                size: bytes(frame, stream)?,
                reply_size: None,
                duration,
            };
            (job, Scale::Payload { payload, frame })
        }
    };
    debug_assert_eq!(job.mode.is_stream(), test.metric == Metric::Bandwidth);
    Ok(FloorPlan { job, scale })
}

/// `n` as a `-s` of `mode`, or why roce_ref cannot send it: a UDP datagram holds at most 65507
/// bytes, a frame below the 64 KiB skb limit 65521.
fn bytes(n: u64, mode: RefMode) -> Result<u32, String> {
    let max: u64 = match mode {
        RefMode::UdpPingpong | RefMode::UdpStream => 65_507,
        RefMode::PacketPingpong | RefMode::PacketStream => 65_521,
        RefMode::TcpPingpong | RefMode::TcpStream => 1 << 30,
    };
    if n <= max {
        Ok(n as u32)
    } else {
        Err(format!(
            "no floor: roce_ref's {} sends at most {max} bytes at a time, this row {n}",
            mode.name()
        ))
    }
}

/// What a reference's client printed (its one line of `--json`), as the row's floor at `size`;
/// `figure` is the row's own (median µs, or Gb/s).
pub(crate) fn floor_of(
    plan: &FloorPlan,
    reference: String,
    size: u64,
    printed: &str,
    figure: f64,
) -> Floor {
    let line = printed
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'));
    let doc: Option<serde_json::Value> = line.and_then(|l| serde_json::from_str(l).ok());
    let value = |key: &str| doc.as_ref().and_then(|d| d[key].as_f64());
    let missing = |key: &str| {
        Floor::missing(
            size,
            format!("{reference} printed no {key}: {}", printed.trim()),
        )
    };
    match plan.scale {
        Scale::OneWay | Scale::RoundTrip => {
            let Some(median) = value("median_us") else {
                return missing("median_us");
            };
            let floor = if plan.scale == Scale::RoundTrip {
                2.0 * median
            } else {
                median
            };
            Floor::latency(size, reference, floor, figure)
        }
        Scale::Payload { payload, frame } => {
            let Some(gbps) = value("gbps") else {
                return missing("gbps");
            };
            Floor::bandwidth(
                size,
                reference,
                gbps * payload as f64 / frame as f64,
                figure,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOFT_V1: (TransportKind, Option<RoceVersion>) =
        (TransportKind::Soft, Some(RoceVersion::V1));
    const SOFT_V2: (TransportKind, Option<RoceVersion>) =
        (TransportKind::Soft, Some(RoceVersion::V2));
    const TCP: (TransportKind, Option<RoceVersion>) = (TransportKind::Tcp, None);

    fn job(
        path: HostPath,
        who: (TransportKind, Option<RoceVersion>),
        test: TestKind,
        size: u64,
    ) -> FloorPlan {
        plan(path, who, test, size, 4096, None).unwrap()
    }

    #[test]
    fn latency_floors_move_the_rows_packets_one_each_way() {
        // roce_ref's defaults are these floors: 76 (v1 frame), 36 (v2 datagram), 26 (TCP frame).
        let v1 = job(HostPath::AfPacket, SOFT_V1, TestKind::WRITE_LAT, 2);
        assert_eq!(
            v1.job.describe(Some("veth0")),
            "roce_ref packet-pingpong -d veth0 -s 76"
        );
        assert_eq!(v1.scale, Scale::OneWay);
        // RoCE v2 over the same path: IPv4 20 + UDP 8 instead of the GRH's 40.
        let v2 = job(HostPath::AfPacket, SOFT_V2, TestKind::WRITE_LAT, 2);
        assert_eq!(v2.job.size, 64);
        let udp = job(HostPath::UdpGso, SOFT_V2, TestKind::WRITE_LAT, 2);
        assert_eq!(udp.job.describe(None), "roce_ref udp-pingpong -s 36");
        let tcp = job(HostPath::TcpSocket, TCP, TestKind::WRITE_LAT, 2);
        assert_eq!(tcp.job.describe(None), "roce_ref tcp-pingpong -s 26");
        // READ: a 32-byte request, a 24-byte answer, and the whole round trip.
        let read = job(HostPath::UdpGso, SOFT_V2, TestKind::READ_LAT, 2);
        assert_eq!((read.job.size, read.job.reply_size), (32, Some(24)));
        assert_eq!(read.scale, Scale::RoundTrip);
        // Beyond one packet a ping-pong of one frame is no floor.
        let err = plan(
            HostPath::AfPacket,
            SOFT_V1,
            TestKind::WRITE_LAT,
            8192,
            4096,
            None,
        );
        assert_eq!(
            err.unwrap_err(),
            "no floor: a 8192-byte message takes 2 packets, roce_ref's ping-pong one"
        );
        let nic = plan(
            HostPath::RdmaNic,
            SOFT_V2,
            TestKind::WRITE_LAT,
            2,
            4096,
            None,
        );
        assert!(nic.unwrap_err().contains("the NIC moves the packets"));
    }

    #[test]
    fn bandwidth_floors_stream_full_packets_and_count_their_payload() {
        // 64 KiB at MTU 4096: middle packets, GRH 40 + BTH 12 + 4096 + ICRC 4 = 4152 (bench.sh's).
        let v1 = plan(
            HostPath::AfPacket,
            SOFT_V1,
            TestKind::WRITE_BW,
            65536,
            4096,
            Some(3),
        )
        .unwrap();
        assert_eq!(
            v1.job.describe(Some("veth0")),
            "roce_ref packet-stream -d veth0 -s 4152 -D 3"
        );
        assert_eq!(
            v1.scale,
            Scale::Payload {
                payload: 4096,
                frame: 4152
            }
        );
        let udp = job(HostPath::UdpGso, SOFT_V2, TestKind::WRITE_BW, 65536);
        assert_eq!(udp.job.size, 4112);
        let small = job(HostPath::UdpGso, SOFT_V2, TestKind::WRITE_BW, 2);
        assert_eq!(
            small.scale,
            Scale::Payload {
                payload: 2,
                frame: 36
            }
        );
        let tcp = job(HostPath::TcpSocket, TCP, TestKind::WRITE_BW, 65536);
        assert_eq!(tcp.job.describe(None), "roce_ref tcp-stream -s 65560");
        // 20 Gb/s of 4152-byte frames carry 20 x 4096 / 4152 Gb/s of payload; a row of 15 is
        // 15 / 19.73 of it.
        let f = floor_of(&v1, "r".into(), 65536, "{\"gbps\": 20.0}\n", 15.0);
        let floor = 20.0 * 4096.0 / 4152.0;
        assert!((f.gbps.unwrap() - floor).abs() < 1e-9);
        assert!((f.share.unwrap() - 15.0 / floor).abs() < 1e-9);
    }

    #[test]
    fn both_sides_get_their_command_line_and_the_client_the_server() {
        let v1 = job(HostPath::AfPacket, SOFT_V1, TestKind::WRITE_LAT, 2).job;
        let server = v1.args(18600, Some(1), Some("veth0"), None);
        assert_eq!(
            server.join(" "),
            "packet-pingpong -d veth0 -s 76 --cpu 1 --json"
        );
        let client = v1.args(18600, Some(0), Some("veth0"), Some("10.77.0.1"));
        assert_eq!(client.last().map(String::as_str), Some(BROADCAST));
        let tcp = job(HostPath::TcpSocket, TCP, TestKind::WRITE_LAT, 2).job;
        let client = tcp.args(18600, None, None, Some("10.77.0.1"));
        assert_eq!(
            client.join(" "),
            "tcp-pingpong -s 26 -p 18600 --json 10.77.0.1"
        );
    }

    #[test]
    fn a_floor_is_read_from_the_reference_output_or_says_why_not() {
        let read = job(HostPath::UdpGso, SOFT_V2, TestKind::READ_LAT, 2);
        let out = "retrying\n{\"mode\":\"udp-pingpong\",\"median_us\":1.5}\n";
        let f = floor_of(&read, "ref".into(), 2, out, 4.0);
        // The round trip: twice roce_ref's one-way median.
        assert_eq!((f.median_us, f.above_us), (Some(3.0), Some(1.0)));
        let f = floor_of(&read, "ref".into(), 2, "garbage", 4.0);
        assert_eq!(f.note.as_deref(), Some("ref printed no median_us: garbage"));
        assert_eq!(f.median_us, None);
    }
}
