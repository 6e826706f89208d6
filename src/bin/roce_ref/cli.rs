//! Command line: the clap definitions, and [`Config`], their checked and resolved form.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

use clap::error::ErrorKind;
use clap::{Args, CommandFactory, Parser, Subcommand};

pub use crate::mode::{Mode, Pattern, Proto};

const ABOUT: &str = "roce_ref: minimal busy-polling UDP, TCP and AF_PACKET references: the floors roceperf's numbers are held to";

const LONG_ABOUT: &str = concat!(
    "roce_ref: minimal busy-polling UDP, TCP and AF_PACKET references: the floors roceperf's numbers are held to.\n\n",
    "Like perftest: start the server with no PEER, then the client with the server's address (udp, tcp) ",
    "or MAC (packet), giving both the same options (the client's hello is checked against the server's, ",
    "and the first difference is named). --local runs both sides in this process instead, server on ",
    "core 0 and client on core 1. Each side is pinned to one core and spins on non-blocking sockets: no ",
    "epoll, no sleep.\n\n",
    "Ping-pong modes send one message and spin until the answer arrives, -n times after --warmup; the ",
    "latency is one-way, half the round trip (as roceperf's write_lat and send_lat), median, p99 and ",
    "p99.9 from an HDR histogram. Stream modes send for --warmup-ms plus -D seconds; the receiver ",
    "measures Gb/s of payload from the end of the warm-up to the last byte, and the client prints what ",
    "the receiver measured.\n\n",
    "Exit codes: 0 done, 1 a failure while running (a peer that went silent), 2 a usage or setup error."
);

const AFTER_HELP: &str = "\
Examples:
  server$ roce_ref udp-pingpong -s 36              client$ roce_ref udp-pingpong -s 36 127.0.0.1
  roce_ref tcp-stream --local --json
  ip netns exec rpa roce_ref packet-pingpong -d veth0
  ip netns exec rpb roce_ref packet-pingpong -d veth0 ff:ff:ff:ff:ff:ff";

/// `roce_ref MODE [OPTIONS] [PEER]`.
#[derive(Debug, Parser)]
#[command(name = "roce_ref", version, about = ABOUT, long_about = LONG_ABOUT, after_help = AFTER_HELP)]
pub struct Cli {
    /// What to measure.
    #[command(subcommand)]
    pub mode: ModeCmd,
}

/// The six references.
#[derive(Debug, Subcommand)]
pub enum ModeCmd {
    /// UDP ping-pong on connected sockets (default -s 36: the UDP payload of a RoCE v2 2-byte WRITE)
    #[command(name = "udp-pingpong")]
    UdpPingpong(PingArgs),
    /// TCP ping-pong, TCP_NODELAY, spinning on recv (default -s 26: roceperf tcp's 24-byte header + 2 B)
    #[command(name = "tcp-pingpong")]
    TcpPingpong(PingArgs),
    /// AF_PACKET ping-pong of raw Ethernet frames (default -s 76: a RoCE v1 2-byte WRITE after the
    /// Ethernet header); needs CAP_NET_RAW
    #[command(name = "packet-pingpong")]
    PacketPingpong(PingArgs),
    /// UDP stream: UDP GSO super-datagrams (or sendmmsg with --no-gso), received with UDP GRO and recvmmsg
    /// (default -s 1472: a full 1500-byte IPv4 packet)
    #[command(name = "udp-stream")]
    UdpStream(StreamArgs),
    /// TCP stream of -s byte writes and reads (default 64K), TCP_NODELAY
    #[command(name = "tcp-stream")]
    TcpStream(StreamArgs),
    /// AF_PACKET stream: sendmmsg/recvmmsg batches of raw frames (default -s 1500: an MTU-1500 frame's
    /// payload); needs CAP_NET_RAW
    #[command(name = "packet-stream")]
    PacketStream(StreamArgs),
}

/// Options of every mode.
#[derive(Debug, Args)]
pub struct CommonArgs {
    /// The server: an IP address or host name (udp, tcp), or its MAC address (packet;
    /// ff:ff:ff:ff:ff:ff finds it by broadcast). Given, this process is the client
    #[arg(value_name = "PEER")]
    pub peer: Option<String>,
    /// Message size in bytes, with an optional K or M suffix: UDP payload, TCP message (stream: bytes
    /// per write and read), or AF_PACKET payload after the 14-byte Ethernet header [default: per mode]
    #[arg(short, long, value_parser = parse_size, value_name = "BYTES")]
    pub size: Option<u32>,
    /// UDP or TCP port of the server
    #[arg(short, long, default_value_t = 18700)]
    pub port: u16,
    /// Interface the AF_PACKET socket binds to (packet modes, where it is required)
    #[arg(short = 'd', long = "dev", value_name = "IFACE")]
    pub dev: Option<String>,
    /// Ethertype of the frames (packet modes) [default: 0x88b5, IEEE 802 local experimental]
    #[arg(long, value_parser = parse_ethertype, value_name = "HEX")]
    pub ethertype: Option<u16>,
    /// Address the server listens on (udp, tcp) [default: 0.0.0.0]
    #[arg(long, value_name = "ADDR")]
    pub bind: Option<IpAddr>,
    /// Core this side is pinned to [default: the last core for a server, the one before it for a
    /// client; 1 for the client of --local]
    #[arg(long, value_name = "N")]
    pub cpu: Option<usize>,
    /// Run both sides in this process: the server thread on --server-cpu, the client on --cpu
    #[arg(long)]
    pub local: bool,
    /// Core of the server thread with --local [default: 0]
    #[arg(long, value_name = "N")]
    pub server_cpu: Option<usize>,
    /// Seconds to run: ping-pong measures for this long instead of -n round trips; a stream sends
    /// for this long after its warm-up [default: 2 for streams]
    #[arg(short = 'D', long, value_name = "SECS")]
    pub duration: Option<f64>,
    /// Print one line of JSON instead of the summary
    #[arg(long)]
    pub json: bool,
    /// Seconds a client keeps retrying a server that is not up yet
    #[arg(long, default_value_t = 10.0, value_name = "SECS")]
    pub connect_timeout: f64,
}

/// Options of the ping-pong modes.
#[derive(Debug, Args)]
pub struct PingArgs {
    #[command(flatten)]
    /// Options of every mode.
    pub common: CommonArgs,
    /// Bytes the server answers with [default: -s]
    #[arg(long, value_parser = parse_size, value_name = "BYTES")]
    pub reply_size: Option<u32>,
    /// Round trips measured (unless -D)
    #[arg(short = 'n', long, default_value_t = 20_000, value_name = "N")]
    pub iters: u64,
    /// Round trips run first and left out of the results
    #[arg(long, default_value_t = 1_000, value_name = "N")]
    pub warmup: u64,
}

/// Options of the stream modes.
#[derive(Debug, Args)]
pub struct StreamArgs {
    #[command(flatten)]
    /// Options of every mode.
    pub common: CommonArgs,
    /// Datagrams or frames per sendmmsg and recvmmsg (udp, packet) [default: 64]
    #[arg(long, value_name = "N")]
    pub batch: Option<usize>,
    /// udp-stream: a sendmmsg of --batch datagrams per call instead of one UDP GSO super-datagram
    /// (up to 64 segments)
    #[arg(long)]
    pub no_gso: bool,
    /// packet-stream: hand frames straight to the driver (PACKET_QDISC_BYPASS)
    #[arg(long)]
    pub qdisc_bypass: bool,
    /// Milliseconds at the start of a stream that the receiver leaves out
    #[arg(long, default_value_t = 200, value_name = "MS")]
    pub warmup_ms: u32,
}

/// The options only one pattern has.
enum Specific {
    Ping(PingRest),
    Stream(StreamRest),
}

struct PingRest {
    reply_size: Option<u32>,
    iters: u64,
    warmup: u64,
}

struct StreamRest {
    batch: Option<usize>,
    no_gso: bool,
    qdisc_bypass: bool,
    warmup_ms: u32,
}

impl ModeCmd {
    /// The mode, the options every mode has, and the rest.
    fn split(self) -> (Mode, CommonArgs, Specific) {
        use Pattern::{PingPong, Stream};
        let ping = |proto, a: PingArgs| {
            let rest = PingRest {
                reply_size: a.reply_size,
                iters: a.iters,
                warmup: a.warmup,
            };
            (Mode::new(proto, PingPong), a.common, Specific::Ping(rest))
        };
        let stream = |proto, a: StreamArgs| {
            let rest = StreamRest {
                batch: a.batch,
                no_gso: a.no_gso,
                qdisc_bypass: a.qdisc_bypass,
                warmup_ms: a.warmup_ms,
            };
            (Mode::new(proto, Stream), a.common, Specific::Stream(rest))
        };
        match self {
            ModeCmd::UdpPingpong(a) => ping(Proto::Udp, a),
            ModeCmd::TcpPingpong(a) => ping(Proto::Tcp, a),
            ModeCmd::PacketPingpong(a) => ping(Proto::Packet, a),
            ModeCmd::UdpStream(a) => stream(Proto::Udp, a),
            ModeCmd::TcpStream(a) => stream(Proto::Tcp, a),
            ModeCmd::PacketStream(a) => stream(Proto::Packet, a),
        }
    }
}

/// Which side this process plays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// Waits for one client, serves one run, exits.
    Server,
    /// Connects to the server at this address or MAC.
    Client(Peer),
    /// Both sides, as threads of this process.
    Local,
}

/// Where a client finds its server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// UDP or TCP: the server's address and port.
    Addr(SocketAddr),
    /// AF_PACKET: the server's MAC (broadcast finds it).
    Mac([u8; 6]),
}

/// The broadcast MAC, which makes a packet client find its server.
pub const BROADCAST: [u8; 6] = [0xff; 6];

/// The ethertype of the packet modes by default: IEEE 802's "local experimental" 1, which no stack claims.
pub const DEFAULT_ETHERTYPE: u16 = 0x88b5;

/// The checked options of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Which reference.
    pub mode: Mode,
    /// Server, client or both.
    pub role: Role,
    /// Bytes per message (see `-s`).
    pub size: usize,
    /// Bytes of a ping-pong answer (the stream modes: equal to `size`).
    pub reply_size: usize,
    /// Measured round trips (ping-pong without -D).
    pub iters: u64,
    /// Round trips left out first (ping-pong).
    pub warmup: u64,
    /// -D: how long to measure (ping-pong) or send after the warm-up (stream).
    pub duration: Option<Duration>,
    /// Milliseconds a stream's receiver leaves out at the start.
    pub warmup_ms: u32,
    /// UDP or TCP port.
    pub port: u16,
    /// The address a UDP or TCP server listens on.
    pub bind: IpAddr,
    /// Interface of the packet modes.
    pub dev: Option<String>,
    /// Ethertype of the packet modes.
    pub ethertype: u16,
    /// Core this side (the client with --local) is pinned to.
    pub cpu: Option<usize>,
    /// Core of --local's server thread.
    pub server_cpu: usize,
    /// One line of JSON instead of the summary.
    pub json: bool,
    /// How long a client retries a server that is not up.
    pub connect_timeout: Duration,
    /// Messages per sendmmsg/recvmmsg (udp and packet streams).
    pub batch: usize,
    /// udp-stream sends GSO super-datagrams.
    pub gso: bool,
    /// packet-stream sets PACKET_QDISC_BYPASS.
    pub qdisc_bypass: bool,
}

/// A usage error: clap's kind and a message naming the flag.
pub type UsageError = (ErrorKind, String);

/// Parses the process's arguments; on a usage error prints it and exits with code 2.
pub fn parse() -> Config {
    let cli = Cli::parse();
    match Config::from_cli(cli) {
        Ok(cfg) => cfg,
        Err((kind, msg)) => Cli::command().error(kind, msg).exit(),
    }
}

impl Config {
    /// Checks and resolves parsed options.
    pub fn from_cli(cli: Cli) -> Result<Config, UsageError> {
        let (mode, common, specific) = cli.mode.split();
        let name = mode.name();
        let invalid = |msg: String| (ErrorKind::ValueValidation, msg);
        let conflict = |msg: String| (ErrorKind::ArgumentConflict, msg);
        let packet = mode.proto == Proto::Packet;

        if packet {
            if common.dev.is_none() {
                return Err((
                    ErrorKind::MissingRequiredArgument,
                    format!(
                        "{name} needs -d/--dev IFACE: the interface its AF_PACKET socket binds to (a veth end, or lo)"
                    ),
                ));
            }
            if common.bind.is_some() {
                return Err(conflict(format!(
                    "--bind applies to the udp and tcp modes, not {name} (it binds to -d/--dev)"
                )));
            }
        } else {
            if common.dev.is_some() {
                return Err(conflict(format!(
                    "-d/--dev applies to the packet modes only; {name} goes where the routing table sends PEER"
                )));
            }
            if common.ethertype.is_some() {
                return Err(conflict(format!(
                    "--ethertype applies to the packet modes only, not {name}"
                )));
            }
        }
        if common.local && common.peer.is_some() {
            return Err(conflict(format!(
                "--local runs both sides in this process: drop PEER '{}'",
                common.peer.as_deref().unwrap_or_default()
            )));
        }
        if !common.local && common.server_cpu.is_some() {
            return Err(conflict(
                "--server-cpu applies to --local only (a server started alone takes --cpu)".into(),
            ));
        }

        let size = common.size.unwrap_or_else(|| mode.default_size());
        check_size("-s/--size", size, mode)?;
        let (mut reply_size, mut iters, mut warmup) = (size, 0, 0);
        let (mut batch, mut gso, mut qdisc_bypass, mut warmup_ms) = (1, false, false, 0);
        match specific {
            Specific::Ping(a) => {
                reply_size = a.reply_size.unwrap_or(size);
                check_size("--reply-size", reply_size, mode)?;
                if a.iters == 0 {
                    return Err(invalid("-n/--iters must be at least 1".into()));
                }
                (iters, warmup) = (a.iters, a.warmup);
            }
            Specific::Stream(a) => {
                if a.no_gso && mode.proto != Proto::Udp {
                    return Err(conflict(format!(
                        "--no-gso applies to udp-stream only, not {name}"
                    )));
                }
                if a.qdisc_bypass && !packet {
                    return Err(conflict(format!(
                        "--qdisc-bypass applies to packet-stream only, not {name}"
                    )));
                }
                if a.batch.is_some() && mode.proto == Proto::Tcp {
                    return Err(conflict("--batch applies to udp-stream and packet-stream; tcp-stream moves -s bytes per call".into()));
                }
                batch = a.batch.unwrap_or(64);
                if !(1..=1024).contains(&batch) {
                    return Err(invalid(format!("--batch {batch} is out of range 1..=1024")));
                }
                (gso, qdisc_bypass, warmup_ms) = (!a.no_gso, a.qdisc_bypass, a.warmup_ms);
            }
        }
        let duration = match common.duration {
            Some(d) if !(d.is_finite() && d > 0.0 && d <= 86_400.0) => {
                return Err(invalid(format!(
                    "-D/--duration {d} must be a number of seconds above 0 (at most a day)"
                )));
            }
            Some(d) => Some(Duration::from_secs_f64(d)),
            None if mode.pattern == Pattern::Stream => Some(Duration::from_secs(2)),
            None => None,
        };
        let ct = common.connect_timeout;
        if !(ct.is_finite() && (0.0..=86_400.0).contains(&ct)) {
            return Err(invalid(format!(
                "--connect-timeout {ct} must be a number of seconds from 0 to a day"
            )));
        }
        let bind = common.bind.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        let role = match (&common.peer, common.local) {
            (_, true) => Role::Local,
            (None, false) => Role::Server,
            (Some(p), false) => Role::Client(resolve_peer(p, mode, common.port)?),
        };
        Ok(Config {
            mode,
            role,
            size: size as usize,
            reply_size: reply_size as usize,
            iters,
            warmup,
            duration,
            warmup_ms,
            port: common.port,
            bind,
            dev: common.dev,
            ethertype: common.ethertype.unwrap_or(DEFAULT_ETHERTYPE),
            cpu: common.cpu.or(if common.local { Some(1) } else { None }),
            server_cpu: common.server_cpu.unwrap_or(0),
            json: common.json,
            connect_timeout: Duration::from_secs_f64(ct),
            batch,
            gso,
            qdisc_bypass,
        })
    }

    /// Where --local's client finds its server: the listening address (loopback when that is a
    /// wildcard) for udp and tcp, broadcast for packet.
    pub fn local_peer(&self) -> Peer {
        if self.mode.proto == Proto::Packet {
            return Peer::Mac(BROADCAST);
        }
        let ip = match self.bind {
            IpAddr::V4(a) if a.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(a) if a.is_unspecified() => IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
            other => other,
        };
        Peer::Addr(SocketAddr::new(ip, self.port))
    }
}

fn check_size(flag: &str, size: u32, mode: Mode) -> Result<(), UsageError> {
    let max = mode.max_size();
    // Datagram modes carry a message-type byte first; TCP needs a byte to move.
    if size == 0 || size > max {
        return Err((
            ErrorKind::ValueValidation,
            format!(
                "{flag} {size} is out of range for {}: 1..={max} bytes",
                mode.name()
            ),
        ));
    }
    Ok(())
}

/// A client's PEER: an address (resolved, with `port`) for udp and tcp, a MAC for packet.
fn resolve_peer(peer: &str, mode: Mode, port: u16) -> Result<Peer, UsageError> {
    if mode.proto == Proto::Packet {
        return parse_mac(peer).map(Peer::Mac).ok_or_else(|| {
            (
                ErrorKind::ValueValidation,
                format!("PEER '{peer}' is not a MAC address: {} takes the server's MAC, such as 02:00:00:00:00:01, or ff:ff:ff:ff:ff:ff to find it by broadcast", mode.name()),
            )
        });
    }
    let fail = |why: String| (ErrorKind::ValueValidation, format!("PEER '{peer}': {why}"));
    let mut addrs = (peer, port)
        .to_socket_addrs()
        .map_err(|e| fail(format!("not an address or a host name that resolves ({e})")))?;
    addrs
        .next()
        .map(Peer::Addr)
        .ok_or_else(|| fail("resolves to no address".into()))
}

/// `02:00:00:00:00:01` (or with dashes) as six bytes.
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = s.split([':', '-']);
    for byte in &mut mac {
        let part = parts.next()?;
        if part.is_empty() || part.len() > 2 {
            return None;
        }
        *byte = u8::from_str_radix(part, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

/// `36`, `64K`, `1M` (binary multiples) as bytes.
pub fn parse_size(s: &str) -> Result<u32, String> {
    let t = s.trim();
    let (digits, mult) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1u64 << 10),
        Some((i, 'm' | 'M')) => (&t[..i], 1 << 20),
        Some((i, 'g' | 'G')) => (&t[..i], 1 << 30),
        _ => (t, 1),
    };
    let bad =
        || format!("'{s}' is not a size: bytes, with an optional K, M or G suffix (64K = 65536)");
    let n: u64 = digits.parse().map_err(|_| bad())?;
    n.checked_mul(mult)
        .and_then(|v| u32::try_from(v).ok())
        .ok_or_else(|| format!("'{s}' is too large (at most 4G - 1 bytes)"))
}

/// `0x88b5` or `34997` as an ethertype, which must be at least 0x0600 (below it is an 802.3 length).
pub fn parse_ethertype(s: &str) -> Result<u16, String> {
    let t = s.trim();
    let v = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u16::from_str_radix(hex, 16),
        None => t.parse(),
    }
    .map_err(|_| format!("'{s}' is not an ethertype such as 0x88b5"))?;
    if v < 0x0600 {
        return Err(format!(
            "{v:#06x} is an 802.3 length, not an ethertype (use 0x0600 or above)"
        ));
    }
    Ok(v)
}

// The path spelled out (where `mod tests;` looks from here anyway), so that examples/manual, which
// compiles this file as a module of its own, resolves it the same way.
#[cfg(test)]
#[path = "cli/tests.rs"]
mod tests;
