//! The six references: what carries the messages (UDP, TCP, AF_PACKET) and how they move.

/// What carries the messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    /// A UDP socket.
    Udp,
    /// A TCP connection.
    Tcp,
    /// An AF_PACKET socket sending raw Ethernet frames.
    Packet,
}

/// How the messages move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    /// One message out, one back, timed.
    PingPong,
    /// One direction as fast as it goes.
    Stream,
}

/// One of the six references.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mode {
    /// What carries the messages.
    pub proto: Proto,
    /// How they move.
    pub pattern: Pattern,
}

impl Mode {
    /// Every mode, in the order of their wire codes.
    pub const ALL: [Mode; 6] = [
        Mode::new(Proto::Udp, Pattern::PingPong),
        Mode::new(Proto::Tcp, Pattern::PingPong),
        Mode::new(Proto::Packet, Pattern::PingPong),
        Mode::new(Proto::Udp, Pattern::Stream),
        Mode::new(Proto::Tcp, Pattern::Stream),
        Mode::new(Proto::Packet, Pattern::Stream),
    ];

    /// The mode of `proto` and `pattern`.
    pub const fn new(proto: Proto, pattern: Pattern) -> Mode {
        Mode { proto, pattern }
    }

    /// The subcommand name, e.g. `udp-pingpong`.
    pub fn name(self) -> &'static str {
        match (self.proto, self.pattern) {
            (Proto::Udp, Pattern::PingPong) => "udp-pingpong",
            (Proto::Tcp, Pattern::PingPong) => "tcp-pingpong",
            (Proto::Packet, Pattern::PingPong) => "packet-pingpong",
            (Proto::Udp, Pattern::Stream) => "udp-stream",
            (Proto::Tcp, Pattern::Stream) => "tcp-stream",
            (Proto::Packet, Pattern::Stream) => "packet-stream",
        }
    }

    /// The code the hello carries (1..=6).
    pub fn code(self) -> u8 {
        Mode::ALL.iter().position(|m| *m == self).unwrap_or(0) as u8 + 1
    }

    /// The mode of a hello's code.
    pub fn from_code(code: u8) -> Option<Mode> {
        Mode::ALL.get(usize::from(code).checked_sub(1)?).copied()
    }

    /// `-s` when none is given: the size that makes this reference the floor of a roceperf figure.
    pub fn default_size(self) -> u32 {
        match (self.proto, self.pattern) {
            // BTH 12 + RETH 16 + 2 B padded to 4 + ICRC 4: a 2-byte RoCE v2 WRITE's UDP payload.
            (Proto::Udp, Pattern::PingPong) => 36,
            // roceperf's tcp transport frames a 2-byte WRITE as a 24-byte header and its payload.
            (Proto::Tcp, Pattern::PingPong) => 26,
            // GRH 40 + the 36 bytes above: a 2-byte RoCE v1 WRITE after its Ethernet header.
            (Proto::Packet, Pattern::PingPong) => 76,
            (Proto::Udp, Pattern::Stream) => 1472,
            (Proto::Tcp, Pattern::Stream) => 65536,
            (Proto::Packet, Pattern::Stream) => 1500,
        }
    }

    /// The largest `-s`: a UDP datagram over IPv4, or a frame's payload below the 64 KiB skb limit.
    pub fn max_size(self) -> u32 {
        match self.proto {
            Proto::Udp => 65_507,
            Proto::Tcp => 1 << 30,
            Proto::Packet => 65_535 - 14,
        }
    }
}
