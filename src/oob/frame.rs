//! roceperf's own dialect as bytes, without I/O: the hello, and each message framed as a 4-byte
//! big-endian length and a JSON envelope `{"kind": ..., "body": ...}`. The channel reads and writes;
//! this says what the bytes mean, so the fuzzer can feed it a hostile peer's (`read_peer_stream`).

use super::{Error, Failure, Result, Step, TestParams};
use crate::transport::ConnInfo;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// First bytes of the hello each side sends.
pub(crate) const MAGIC: &[u8; 8] = b"roceperf";

/// Version of this out-of-band protocol; both sides must speak the same. Version 2: the parameters
/// no longer carry `report_gbits` (display options are each side's own). Version 3: an abort says
/// whether the test failed or its setup did ([`Abort`]). Version 4: a size's results say whether a
/// signal cut the size short on the side that sent them (`results::SizeReport`).
pub(crate) const PROTOCOL_VERSION: u16 = 4;

/// Bytes of the hello: magic, version (u16 big-endian), two reserved bytes.
pub(crate) const HELLO_LEN: usize = 12;

/// Largest message accepted; anything longer is garbage (a results message with histograms is far smaller).
const MAX_MESSAGE: u32 = 64 << 20;

/// One framed message: its kind and a JSON body.
#[derive(Serialize, Deserialize)]
struct Envelope<T> {
    kind: String,
    body: T,
}

/// The body of an `abort` message: why this side stopped, and what kind of failure that was.
#[derive(Serialize, Deserialize)]
pub(crate) struct Abort {
    pub(crate) reason: String,
    pub(crate) failure: Failure,
}

/// The hello's flag byte (its first reserved byte) when a `--persist` server queued the client: a
/// [`Queued`] message follows, and the server's plain hello when the client's turn comes.
pub(crate) const QUEUED: u8 = 1;

/// Offset of the flag byte in the hello.
pub(crate) const FLAGS: usize = 10;

/// Whom a `--persist` server serves while a client waits, and the client's place in the queue.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Queued {
    /// The client being served (its out-of-band address).
    pub(crate) serving: String,
    /// 1: next.
    pub(crate) place: u64,
}

/// The hello of a client a `--persist` server queued.
pub(crate) fn queued_hello() -> [u8; HELLO_LEN] {
    let mut h = hello();
    h[FLAGS] = QUEUED;
    h
}

/// Our hello.
pub(crate) fn hello() -> [u8; HELLO_LEN] {
    let mut h = [0u8; HELLO_LEN];
    h[..8].copy_from_slice(MAGIC);
    h[8..10].copy_from_slice(&PROTOCOL_VERSION.to_be_bytes());
    h
}

/// Checks the peer's hello: our magic and our protocol version.
pub(crate) fn check_hello(h: &[u8; HELLO_LEN], peer: &str) -> Result<()> {
    if &h[..8] != MAGIC {
        return Err(Error::Garbage {
            peer: peer.to_string(),
            detail: format!(
                "expected the hello {:?}, got bytes {}",
                String::from_utf8_lossy(MAGIC),
                hex(h)
            ),
        });
    }
    let theirs = u16::from_be_bytes([h[8], h[9]]);
    if theirs != PROTOCOL_VERSION {
        return Err(Error::Version {
            peer: peer.to_string(),
            theirs,
            ours: PROTOCOL_VERSION,
        });
    }
    Ok(())
}

/// One message of `kind` with its length in front.
pub(crate) fn encode<T: Serialize>(kind: Step, body: &T) -> Vec<u8> {
    let json = serde_json::to_vec(&Envelope {
        kind: kind.name().to_string(),
        body,
    })
    .expect("our messages always serialise");
    let mut frame = Vec::with_capacity(4 + json.len());
    frame.extend_from_slice(&(json.len() as u32).to_be_bytes());
    frame.extend_from_slice(&json);
    frame
}

/// The length a message announces, or the error for one that cannot be a message.
pub(crate) fn message_len(len: [u8; 4], kind: Step, peer: &str) -> Result<usize> {
    let len = u32::from_be_bytes(len);
    if len == 0 || len > MAX_MESSAGE {
        return Err(Error::Garbage {
            peer: peer.to_string(),
            detail: format!("a {len}-byte message announced while waiting for {kind}"),
        });
    }
    Ok(len as usize)
}

/// A message's JSON, received while waiting for `kind`: its body, or what the peer said instead
/// (an `abort` becomes [`Error::PeerAborted`]).
pub(crate) fn decode<T: DeserializeOwned>(buf: &[u8], kind: Step, peer: &str) -> Result<T> {
    let garbage = |detail| Error::Garbage {
        peer: peer.to_string(),
        detail,
    };
    let env: Envelope<serde_json::Value> = serde_json::from_slice(buf).map_err(|e| {
        garbage(format!(
            "an unreadable message while waiting for {kind}: {e}"
        ))
    })?;
    if env.kind == Step::Abort.name() {
        let (reason, failure) = match serde_json::from_value::<Abort>(env.body) {
            Ok(a) => (a.reason, a.failure),
            Err(_) => ("no reason given".to_string(), Failure::Setup),
        };
        return Err(Error::PeerAborted {
            peer: peer.to_string(),
            reason,
            failure,
        });
    }
    if env.kind != kind.name() {
        return Err(garbage(format!(
            "it sent {:?} while this side waited for {:?}",
            env.kind,
            kind.name()
        )));
    }
    serde_json::from_value(env.body)
        .map_err(|e| garbage(format!("a malformed {kind} message: {e}")))
}

/// `buf` decoded as a message of `kind`; what decodes must encode to a frame that decodes to the same.
fn round_trip<T>(buf: &[u8], kind: Step) -> std::result::Result<bool, String>
where
    T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let Ok(v) = decode::<T>(buf, kind, "peer") else {
        return Ok(false);
    };
    let frame = encode(kind, &v);
    let back = decode::<T>(&frame[4..], kind, "peer").map_err(|e| format!("{kind}: {e}"))?;
    if back != v {
        return Err(format!("{kind}: {v:?} re-encoded reads back as {back:?}"));
    }
    Ok(true)
}

/// Reads `data` as the bytes a peer sends on this dialect's channel: the hello, then framed
/// messages, each decoded as every kind this side waits for, `R` being what a results message
/// carries (the application's `Option<SizeResult>`: named by the caller, since oob sits below
/// results). How many messages decoded as some kind,
/// or the first whose re-encoding does not decode to the same value (the fuzzer's entry,
/// `fuzz/fuzz_targets/oob_roceperf.rs`; the channel's I/O is around these same functions).
pub fn read_peer_stream<R>(data: &[u8]) -> std::result::Result<usize, String>
where
    R: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let Some((h, mut rest)) = data.split_first_chunk::<HELLO_LEN>() else {
        return Ok(0);
    };
    if let Err(e) = check_hello(h, "peer")
        && e.to_string().is_empty()
    {
        return Err("an empty hello error".into());
    }
    let mut decoded = 0;
    while let Some((len, tail)) = rest.split_first_chunk::<4>() {
        let Ok(len) = message_len(*len, Step::Barrier, "peer") else {
            break;
        };
        let Some((buf, tail)) = tail.split_at_checked(len) else {
            break;
        };
        rest = tail;
        let any = round_trip::<TestParams>(buf, Step::Params)?
            | round_trip::<ConnInfo>(buf, Step::Conn)?
            | round_trip::<u64>(buf, Step::Barrier)?
            | round_trip::<R>(buf, Step::Results)?;
        if let Err(e @ Error::PeerAborted { .. }) = decode::<u64>(buf, Step::Barrier, "peer")
            && e.to_string().is_empty()
        {
            return Err("an empty abort".into());
        }
        decoded += usize::from(any);
    }
    Ok(decoded)
}

fn hex(b: &[u8]) -> String {
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_stream_of_our_own_messages_decodes_whole_and_junk_stops_it() {
        let mut stream = hello().to_vec();
        stream.extend(encode(Step::Barrier, &7u64));
        stream.extend(encode(Step::Results, &None::<u64>));
        stream.extend(encode(
            Step::Abort,
            &Abort {
                reason: "disk full".into(),
                failure: Failure::Test,
            },
        ));
        // The abort is no message of a waited kind: two decode.
        assert_eq!(read_peer_stream::<Option<u64>>(&stream), Ok(2));
        stream.extend([0, 0, 0, 0]);
        stream.extend(encode(Step::Barrier, &8u64));
        assert_eq!(
            read_peer_stream::<Option<u64>>(&stream),
            Ok(2),
            "a 0-byte message ends it"
        );
        assert_eq!(read_peer_stream::<Option<u64>>(b"roceperf"), Ok(0));
    }

    #[test]
    fn decode_names_what_the_peer_sent_instead() {
        let abort = encode(
            Step::Abort,
            &Abort {
                reason: "disk full".into(),
                failure: Failure::Test,
            },
        );
        let e = decode::<u64>(&abort[4..], Step::Barrier, "10.0.0.2:18515").unwrap_err();
        assert!(matches!(e, Error::PeerAborted { ref reason, .. } if reason == "disk full"));
        let e = decode::<u64>(&encode(Step::Conn, &1u64)[4..], Step::Barrier, "p").unwrap_err();
        assert!(e.to_string().contains("\"conn\""), "{e}");
        assert!(message_len([0, 0, 0, 0], Step::Params, "p").is_err());
        assert!(message_len([0xff; 4], Step::Params, "p").is_err());
        assert!(check_hello(&hello(), "p").is_ok());
    }
}
