//! The few messages the two sides exchange: message types, the hello that checks both sides run the
//! same options, and the receiver's result.
//!
//! Datagram modes (UDP, AF_PACKET) start every message with a type byte, so each side recognises what
//! is meant for it (on `lo` an AF_PACKET socket also receives its own frames) and a stream's receiver
//! finds the end marker. TCP sends the hello and the result as they are and the payload bare.

use crate::cli::Mode;

/// A client's hello (client to server).
pub const HELLO: u8 = 0xa1;
/// The server's answer to a hello.
pub const HELLO_ACK: u8 = 0xa2;
/// A ping-pong request (client to server).
pub const PING: u8 = 0xa3;
/// A ping-pong answer (server to client).
pub const PONG: u8 = 0xa4;
/// Stream payload (client to server).
pub const DATA: u8 = 0xa5;
/// The client is done (client to server).
pub const END: u8 = 0xa6;
/// What the server measured, the answer to END (server to client).
pub const RESULT: u8 = 0xa7;

const MAGIC: &[u8; 4] = b"rref";
const VERSION: u8 = 1;

/// Bytes of an encoded [`Hello`].
pub const HELLO_LEN: usize = 24;
/// Bytes of an encoded hello answer.
pub const ACK_LEN: usize = 11;
/// Bytes of an encoded [`Measured`] result.
pub const RESULT_LEN: usize = 25;

/// The options both sides must share, as the client announces them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    /// The reference being run.
    pub mode: Mode,
    /// -s.
    pub size: u32,
    /// --reply-size (ping-pong; equal to `size` for streams).
    pub reply_size: u32,
    /// --warmup-ms (streams; 0 for ping-pong).
    pub warmup_ms: u32,
}

/// A difference between the client's hello and the server's options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mismatch {
    /// Which option (1 mode, 2 -s, 3 --reply-size, 4 --warmup-ms).
    pub field: u8,
    /// The client's value.
    pub client: u32,
    /// The server's value.
    pub server: u32,
}

impl Mismatch {
    /// "the server runs -s 36, the client -s 20: give both sides the same options".
    pub fn describe(&self) -> String {
        let show = |v: u32| match self.field {
            1 => Mode::from_code(v as u8)
                .map_or_else(|| format!("mode {v}"), |m| m.name().to_string()),
            _ => v.to_string(),
        };
        let flag = match self.field {
            1 => "",
            2 => "-s ",
            3 => "--reply-size ",
            4 => "--warmup-ms ",
            _ => "option ",
        };
        format!(
            "the server runs {flag}{}, the client {flag}{}: give both sides the same options",
            show(self.server),
            show(self.client)
        )
    }
}

impl Hello {
    /// The hello of `mode` with these options.
    pub fn new(mode: Mode, size: usize, reply_size: usize, warmup_ms: u32) -> Hello {
        Hello {
            mode,
            size: size as u32,
            reply_size: reply_size as u32,
            warmup_ms,
        }
    }

    /// The message: type, magic, version, mode code, then the three values big-endian.
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[0] = HELLO;
        b[1..5].copy_from_slice(MAGIC);
        b[5] = VERSION;
        b[6] = self.mode.code();
        b[8..12].copy_from_slice(&self.size.to_be_bytes());
        b[12..16].copy_from_slice(&self.reply_size.to_be_bytes());
        b[16..20].copy_from_slice(&self.warmup_ms.to_be_bytes());
        b
    }

    /// A hello from `b`; None when it is not one of ours (or another version's).
    pub fn decode(b: &[u8]) -> Option<Hello> {
        if b.len() < HELLO_LEN || b[0] != HELLO || &b[1..5] != MAGIC || b[5] != VERSION {
            return None;
        }
        Some(Hello {
            mode: Mode::from_code(b[6])?,
            size: be32(&b[8..12]),
            reply_size: be32(&b[12..16]),
            warmup_ms: be32(&b[16..20]),
        })
    }

    /// The first option in which `client` (this hello's sender) differs from `server`.
    pub fn first_difference(client: &Hello, server: &Hello) -> Option<Mismatch> {
        let pairs = [
            (
                1,
                u32::from(client.mode.code()),
                u32::from(server.mode.code()),
            ),
            (2, client.size, server.size),
            (3, client.reply_size, server.reply_size),
            (4, client.warmup_ms, server.warmup_ms),
        ];
        pairs
            .into_iter()
            .find(|(_, c, s)| c != s)
            .map(|(field, client, server)| Mismatch {
                field,
                client,
                server,
            })
    }
}

/// The server's answer to a hello: status 0 (go) or the differing field with both values.
pub fn encode_ack(mismatch: Option<Mismatch>) -> [u8; ACK_LEN] {
    let mut b = [0u8; ACK_LEN];
    b[0] = HELLO_ACK;
    if let Some(m) = mismatch {
        b[1] = m.field;
        b[3..7].copy_from_slice(&m.client.to_be_bytes());
        b[7..11].copy_from_slice(&m.server.to_be_bytes());
    }
    b
}

/// A hello answer: Ok to go on, Err with the server's objection; None when `b` is not an answer.
pub fn decode_ack(b: &[u8]) -> Option<Result<(), Mismatch>> {
    if b.len() < ACK_LEN || b[0] != HELLO_ACK {
        return None;
    }
    Some(match b[1] {
        0 => Ok(()),
        field => Err(Mismatch {
            field,
            client: be32(&b[3..7]),
            server: be32(&b[7..11]),
        }),
    })
}

/// What a receiver counted in its measured window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Measured {
    /// Payload bytes.
    pub bytes: u64,
    /// Nanoseconds the window lasted.
    pub ns: u64,
    /// Messages: datagrams, frames, TCP reads, or a ping-pong server's answers.
    pub messages: u64,
}

impl Measured {
    /// The RESULT message.
    pub fn encode(&self) -> [u8; RESULT_LEN] {
        let mut b = [0u8; RESULT_LEN];
        b[0] = RESULT;
        b[1..9].copy_from_slice(&self.bytes.to_be_bytes());
        b[9..17].copy_from_slice(&self.ns.to_be_bytes());
        b[17..25].copy_from_slice(&self.messages.to_be_bytes());
        b
    }

    /// A RESULT message's figures; None when `b` is not one.
    pub fn decode(b: &[u8]) -> Option<Measured> {
        if b.len() < RESULT_LEN || b[0] != RESULT {
            return None;
        }
        Some(Measured {
            bytes: be64(&b[1..9]),
            ns: be64(&b[9..17]),
            messages: be64(&b[17..25]),
        })
    }
}

/// Where the last datagram starts in a UDP GRO buffer of `len` bytes made of `size`-byte datagrams.
///
/// GRO only glues datagrams of one size, except that the last may be shorter: that is where an END
/// sent right after the data ends up, so the receiver looks at that one's type byte.
pub fn last_segment(len: usize, size: usize) -> usize {
    if size == 0 || len <= size {
        0
    } else if !len.is_multiple_of(size) {
        len - len % size
    } else {
        len - size
    }
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn be64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Pattern, Proto};

    #[test]
    fn hello_round_trips_and_rejects_strangers() {
        let h = Hello::new(Mode::new(Proto::Packet, Pattern::Stream), 1500, 1500, 200);
        let b = h.encode();
        assert_eq!(Hello::decode(&b), Some(h));
        assert_eq!(Hello::decode(&b[..HELLO_LEN - 1]), None);
        let mut other = b;
        other[5] = VERSION + 1;
        assert_eq!(Hello::decode(&other), None, "another version is not ours");
        other = b;
        other[0] = PING;
        assert_eq!(Hello::decode(&other), None);
    }

    #[test]
    fn first_difference_names_the_option_and_both_values() {
        let m = Mode::new(Proto::Udp, Pattern::PingPong);
        let server = Hello::new(m, 36, 36, 0);
        assert_eq!(Hello::first_difference(&server, &server), None);
        let client = Hello::new(m, 20, 36, 0);
        let d = Hello::first_difference(&client, &server).unwrap();
        assert_eq!((d.field, d.client, d.server), (2, 20, 36));
        assert_eq!(
            d.describe(),
            "the server runs -s 36, the client -s 20: give both sides the same options"
        );
        let tcp = Hello::new(Mode::new(Proto::Tcp, Pattern::PingPong), 20, 36, 0);
        let d = Hello::first_difference(&tcp, &server).unwrap();
        assert!(
            d.describe()
                .contains("runs udp-pingpong, the client tcp-pingpong")
        );
    }

    #[test]
    fn ack_carries_the_objection() {
        assert_eq!(decode_ack(&encode_ack(None)), Some(Ok(())));
        let m = Mismatch {
            field: 3,
            client: 24,
            server: 32,
        };
        assert_eq!(decode_ack(&encode_ack(Some(m))), Some(Err(m)));
        assert_eq!(decode_ack(&[PONG; ACK_LEN]), None);
    }

    #[test]
    fn result_round_trips() {
        let r = Measured {
            bytes: 1 << 40,
            ns: 2_000_000_123,
            messages: 77,
        };
        assert_eq!(Measured::decode(&r.encode()), Some(r));
        assert_eq!(Measured::decode(&[RESULT; 3]), None);
    }

    #[test]
    fn last_segment_finds_a_short_tail_or_the_last_full_datagram() {
        assert_eq!(last_segment(1472, 1472), 0, "one datagram");
        assert_eq!(last_segment(1, 1472), 0, "a lone END");
        assert_eq!(last_segment(3 * 1472, 1472), 2 * 1472);
        assert_eq!(
            last_segment(3 * 1472 + 1, 1472),
            3 * 1472,
            "END glued behind"
        );
        assert_eq!(last_segment(10, 0), 0);
    }
}
