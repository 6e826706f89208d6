//! The fixed-size blocks of perftest's dialect: version string, system data, MTU, bandwidth report, done.
//!
//! Every block is sent with one `write()` and read with one exact read; sizes never vary with content.

use super::{PerftestError, Result, show_bytes};
use crate::oob::RunLength;

/// Size of the version block: perftest's `char version[16]`, NUL-padded.
pub const VERSION_LEN: usize = 16;
/// The version we announce: below 6.28, so no perftest runs its build-dependent negotiation with us
/// (from 6.28 on perftest negotiates parameters, but only with a peer that announces 6.28 too).
pub(crate) const OUR_VERSION: &str = "6.27";
/// perftest refuses peers below this version, and so do we.
pub(crate) const MIN_PEER_VERSION: f64 = 5.70;
/// Size of each system-data block (a big-endian `int`).
pub const SYSDATA_LEN: usize = 4;
/// Size of the MTU block (ASCII digit of `enum ibv_mtu` and a NUL) for peers from 5.31 on.
pub const MTU_LEN: usize = 2;
/// Size of each of the five report fields.
pub(crate) const REPORT_FIELD_LEN: usize = 8;
/// Number of report fields: size, iterations, peak, average, message rate.
pub(crate) const REPORT_FIELDS: usize = 5;
/// The closing block perftest up to 6.16 writes after the close barrier (`"done"` with its NUL); nobody
/// reads it. perftest 6.17+ writes nothing there.
pub const DONE: &[u8; 5] = b"done\0";

/// Our version block: `"6.27"` and NULs.
pub fn encode_version() -> [u8; VERSION_LEN] {
    let mut b = [0u8; VERSION_LEN];
    b[..OUR_VERSION.len()].copy_from_slice(OUR_VERSION.as_bytes());
    b
}

/// After the version's NUL, a roceperf peer's run length: this tag, `n` or `D`, and the count or
/// seconds (8 bytes, big-endian). perftest reads the block as a C string (`atof`) and never sees it;
/// two roceperf peers compare it, since some tests exchange nothing else that shows `-n` (send_bw).
const RUN_TAG: &[u8; 2] = b"rp";
/// Where the run length starts: after `"6.27"` and its NUL.
const RUN_AT: usize = OUR_VERSION.len() + 1;

/// Our version block with our run length after the NUL ([`RUN_TAG`]).
pub(crate) fn encode_version_with(run: RunLength) -> [u8; VERSION_LEN] {
    let mut b = encode_version();
    let (mode, value) = match run {
        RunLength::Iterations(n) => (b'n', n),
        RunLength::Seconds(s) => (b'D', s),
    };
    b[RUN_AT..RUN_AT + 2].copy_from_slice(RUN_TAG);
    b[RUN_AT + 2] = mode;
    b[RUN_AT + 3..].copy_from_slice(&value.to_be_bytes());
    b
}

/// The run length a roceperf peer put after its version's NUL; `None` for anything else.
fn run_after_nul(tail: &[u8]) -> Option<RunLength> {
    let [t0, t1, mode, value @ ..] = tail else {
        return None;
    };
    let value: [u8; 8] = value.try_into().ok()?;
    let value = u64::from_be_bytes(value);
    match ([*t0, *t1] == *RUN_TAG, *mode) {
        (true, b'n') => Some(RunLength::Iterations(value)),
        (true, b'D') => Some(RunLength::Seconds(value)),
        _ => None,
    }
}

/// The version a peer announced, as text and as perftest compares it (`atof`).
#[derive(Debug, Clone, PartialEq)]
pub struct PeerVersion {
    /// The text up to the first NUL, e.g. `6.06`.
    pub text: String,
    /// Its numeric value as `atof` reads it.
    pub value: f64,
    /// A roceperf peer's run length ([`encode_version_with`]); `None` from perftest.
    pub(crate) run: Option<RunLength>,
}

impl PeerVersion {
    /// Parses a version block. Errors: not a version string, or older than 5.70.
    pub fn parse(block: &[u8; VERSION_LEN]) -> Result<PeerVersion> {
        let end = block.iter().position(|&b| b == 0).unwrap_or(VERSION_LEN);
        let not_perftest = || PerftestError::NotPerftest(show_bytes(block));
        let text = std::str::from_utf8(&block[..end]).map_err(|_| not_perftest())?;
        // perftest uses atof: leading digits with at most one dot; we demand that and nothing else.
        let numeric = !text.is_empty()
            && text.bytes().all(|c| c.is_ascii_digit() || c == b'.')
            && text.bytes().filter(|&c| c == b'.').count() <= 1
            && text.as_bytes()[0].is_ascii_digit();
        // After the NUL: NULs (perftest's strncpy), or a roceperf peer's run length.
        let tail = block.get(end + 1..).unwrap_or_default();
        let run = run_after_nul(tail);
        if !numeric || (run.is_none() && tail.iter().any(|&b| b != 0)) {
            return Err(not_perftest());
        }
        let value: f64 = text.parse().map_err(|_| not_perftest())?;
        if value < MIN_PEER_VERSION {
            return Err(PerftestError::PeerTooOld(text.to_string()));
        }
        Ok(PeerVersion {
            text: text.to_string(),
            value,
            run,
        })
    }
}

/// The two system-data values perftest swaps; each side keeps the larger of each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SysData {
    /// perftest's `cycle_buffer`: the page size, the window sub-page messages wrap around in.
    pub page_size: u32,
    /// Cache line size: the stride of sub-line messages within the window.
    pub cache_line: u32,
}

impl SysData {
    /// This machine's values (page size from `sysconf`, cache line 64 as perftest assumes on x86).
    pub fn local() -> SysData {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        SysData {
            page_size: if page > 0 { page as u32 } else { 4096 },
            cache_line: 64,
        }
    }

    /// The values both sides use after the exchange: the larger of each.
    pub fn agree(self, peer: SysData) -> SysData {
        SysData {
            page_size: self.page_size.max(peer.page_size),
            cache_line: self.cache_line.max(peer.cache_line),
        }
    }
}

/// Encodes one system-data int (big-endian, as perftest's `hton_int`).
pub fn encode_sysdata(value: u32) -> [u8; SYSDATA_LEN] {
    value.to_be_bytes()
}

/// Parses one system-data int; `field` names it in errors. Zero or above 1 GiB is refused.
pub fn parse_sysdata(step: &str, field: &'static str, b: &[u8; SYSDATA_LEN]) -> Result<u32> {
    let v = u32::from_be_bytes(*b);
    if v == 0 || v > 1 << 30 {
        return Err(PerftestError::Malformed {
            step: step.to_string(),
            field,
            detail: format!("{v} is not a plausible size"),
            shown: show_bytes(b),
        });
    }
    Ok(v)
}

/// Path MTU in bytes to libibverbs' `enum ibv_mtu` (1 = 256 ... 5 = 4096); the largest not above `bytes`.
pub(crate) fn mtu_enum(bytes: u32) -> u8 {
    match bytes {
        4096.. => 5,
        2048..4096 => 4,
        1024..2048 => 3,
        512..1024 => 2,
        _ => 1,
    }
}

/// `enum ibv_mtu` to bytes.
pub(crate) fn mtu_bytes(e: u8) -> u32 {
    128 << e
}

/// Encodes the MTU block: the enum's ASCII digit and a NUL, e.g. `"3\0"` for 1024.
pub fn encode_mtu(bytes: u32) -> [u8; MTU_LEN] {
    [b'0' + mtu_enum(bytes), 0]
}

/// Parses the MTU block strictly: one digit 1..5, then NUL. Returns bytes.
pub fn parse_mtu(step: &str, b: &[u8; MTU_LEN]) -> Result<u32> {
    if b[1] != 0 || !(b'1'..=b'5').contains(&b[0]) {
        return Err(PerftestError::Malformed {
            step: step.to_string(),
            field: "MTU",
            detail: "expected one ASCII digit 1..5 (ibv_mtu 256..4096) and a NUL".to_string(),
            shown: show_bytes(b),
        });
    }
    Ok(mtu_bytes(b[0] - b'0'))
}

/// perftest's bandwidth report (`struct bw_report_data` without the per-port fields), 40 bytes on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct BwReport {
    /// Message size in bytes (`-s`; with `-a` the last size).
    pub size: u64,
    /// Iterations (`-n`), times the number of QPs as perftest counts them.
    pub iters: u64,
    /// Peak bandwidth, in the sender's unit (MiB/s, or Gb/s with --report_gbits).
    pub bw_peak: f64,
    /// Average bandwidth, same unit.
    pub bw_avg: f64,
    /// Message rate in Mpps.
    pub msg_rate: f64,
}

impl BwReport {
    /// The five 8-byte fields in exchange order, each big-endian (doubles byte-swapped as perftest does).
    pub fn encode(&self) -> [[u8; REPORT_FIELD_LEN]; REPORT_FIELDS] {
        [
            self.size.to_be_bytes(),
            self.iters.to_be_bytes(),
            self.bw_peak.to_bits().to_be_bytes(),
            self.bw_avg.to_bits().to_be_bytes(),
            self.msg_rate.to_bits().to_be_bytes(),
        ]
    }

    /// Decodes the five fields. Any bit pattern is accepted: a unidirectional perftest server sends
    /// uninitialised memory here, and the client must ignore it.
    pub fn decode(f: &[[u8; REPORT_FIELD_LEN]; REPORT_FIELDS]) -> BwReport {
        BwReport {
            size: u64::from_be_bytes(f[0]),
            iters: u64::from_be_bytes(f[1]),
            bw_peak: f64::from_bits(u64::from_be_bytes(f[2])),
            bw_avg: f64::from_bits(u64::from_be_bytes(f[3])),
            msg_rate: f64::from_bits(u64::from_be_bytes(f[4])),
        }
    }
}

/// True when 8 bytes look like the start of an ASCII key record (hex digits and colons), which is what a
/// peer at a barrier sends where we expect a report field.
pub(crate) fn looks_like_key(b: &[u8]) -> bool {
    !b.is_empty() && b.iter().all(|c| c.is_ascii_hexdigit() || *c == b':')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_block_is_text_and_nuls() {
        let b = encode_version();
        assert_eq!(&b[..5], b"6.27\0");
        assert!(b[4..].iter().all(|&x| x == 0));
        let v = PeerVersion::parse(&b).unwrap();
        assert_eq!(v.text, "6.27");
    }

    #[test]
    fn version_checks() {
        let mk = |s: &str| {
            let mut b = [0u8; 16];
            b[..s.len()].copy_from_slice(s.as_bytes());
            b
        };
        assert_eq!(PeerVersion::parse(&mk("6.06")).unwrap().value, 6.06);
        assert_eq!(PeerVersion::parse(&mk("6.29")).unwrap().value, 6.29);
        assert!(matches!(
            PeerVersion::parse(&mk("5.60")),
            Err(PerftestError::PeerTooOld(v)) if v == "5.60"
        ));
        assert!(matches!(
            PeerVersion::parse(&mk("GET / HTTP/1.1\r\n")),
            Err(PerftestError::NotPerftest(_))
        ));
        assert!(matches!(
            PeerVersion::parse(&[0u8; 16]),
            Err(PerftestError::NotPerftest(_))
        ));
        // Junk after the NUL means this is not a NUL-padded C string.
        let mut b = mk("6.06");
        b[10] = b'x';
        assert!(matches!(
            PeerVersion::parse(&b),
            Err(PerftestError::NotPerftest(_))
        ));
    }

    #[test]
    fn a_roceperf_peer_says_its_run_length_where_perftest_does_not_look() {
        let b = encode_version_with(RunLength::Iterations(1000));
        // What perftest's atof reads: "6.27", then the NUL.
        assert_eq!(&b[..5], b"6.27\0");
        assert_eq!(&b[5..8], b"rpn");
        assert_eq!(u64::from_be_bytes(b[8..].try_into().unwrap()), 1000);
        let v = PeerVersion::parse(&b).unwrap();
        assert_eq!(
            (v.text.as_str(), v.run),
            ("6.27", Some(RunLength::Iterations(1000)))
        );
        let timed = PeerVersion::parse(&encode_version_with(RunLength::Seconds(2))).unwrap();
        assert_eq!(timed.run, Some(RunLength::Seconds(2)));
        assert_eq!(PeerVersion::parse(&encode_version()).unwrap().run, None);
        // Another mode letter is junk after the NUL, as before.
        let mut b = encode_version_with(RunLength::Seconds(2));
        b[7] = b'x';
        assert!(matches!(
            PeerVersion::parse(&b),
            Err(PerftestError::NotPerftest(_))
        ));
    }

    #[test]
    fn sysdata_is_big_endian_and_max() {
        assert_eq!(encode_sysdata(4096), [0, 0, 0x10, 0]);
        assert_eq!(
            parse_sysdata("s", "page size", &[0, 0, 0, 0x40]).unwrap(),
            64
        );
        let e = parse_sysdata("page-size exchange", "page size", &[0, 0, 0, 0]).unwrap_err();
        assert!(e.to_string().contains("page size"), "{e}");
        let a = SysData {
            page_size: 4096,
            cache_line: 128,
        };
        let b = SysData {
            page_size: 65536,
            cache_line: 64,
        };
        assert_eq!(
            a.agree(b),
            SysData {
                page_size: 65536,
                cache_line: 128
            }
        );
    }

    #[test]
    fn mtu_enum_round_trip() {
        assert_eq!(encode_mtu(1024), *b"3\0");
        assert_eq!(encode_mtu(1500), *b"3\0");
        assert_eq!(encode_mtu(4096), *b"5\0");
        assert_eq!(encode_mtu(9000), *b"5\0");
        assert_eq!(encode_mtu(256), *b"1\0");
        assert_eq!(parse_mtu("m", b"4\0").unwrap(), 2048);
        for bad in [b"6\0", b"0\0", b"33", b"\0\0"] {
            let e = parse_mtu("MTU exchange", bad).unwrap_err();
            assert!(e.to_string().contains("MTU"), "{e}");
        }
    }

    #[test]
    fn report_fields_big_endian() {
        let r = BwReport {
            size: 3000,
            iters: 5,
            bw_peak: 6.71,
            bw_avg: 4.5,
            msg_rate: 0.0015,
        };
        let f = r.encode();
        assert_eq!(f[0], [0, 0, 0, 0, 0, 0, 0x0b, 0xb8]);
        assert_eq!(f[1], [0, 0, 0, 0, 0, 0, 0, 5]);
        assert_eq!(f[3], 4.5f64.to_bits().to_be_bytes());
        assert_eq!(BwReport::decode(&f), r);
        assert_eq!(f.iter().map(|x| x.len()).sum::<usize>(), 40);
    }
}
