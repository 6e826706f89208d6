//! Value parsers for the flags clap cannot check by type (iterations, MTUs, percentiles; sizes are
//! parsed by `params::parse_size`, which `roce_compare` shares).
//!
//! Each error message says what is allowed.

use crate::params::parse_int;
pub(crate) use crate::params::parse_size;
use crate::transport::RoceMtu;

/// The most iterations `-n` and `--warmup` take: perftest's `-n` limit.
const MAX_ITERS: u64 = 1 << 32;

/// `-n`: 5 .. 2^32 iterations.
pub(crate) fn parse_iters(s: &str) -> Result<u64, String> {
    parse_count(s, 5, "iterations")
}

/// `--warmup`: 0 .. 2^32 iterations, bounded as `-n` is, so that a warm-up cannot outlast any run.
pub(crate) fn parse_warmup(s: &str) -> Result<u64, String> {
    parse_count(s, 0, "warm-up iterations")
}

fn parse_count(s: &str, min: u64, what: &str) -> Result<u64, String> {
    match parse_int(s.trim()) {
        Some(v) if (min..=MAX_ITERS).contains(&v) => Ok(v),
        Some(_) => Err(format!(
            "'{s}' is out of range; {what} are {min} .. {MAX_ITERS}"
        )),
        None => Err(format!("'{s}' is not a number of {what}")),
    }
}

pub(crate) fn parse_port(s: &str) -> Result<u16, String> {
    match s.trim().parse::<u16>() {
        // Port 0 would make the server listen on a port the system picks, which the client cannot know.
        Ok(0) => Err(
            "-p 0 would listen on a port the system picks, which the client cannot know; give both sides the same -p in 1..65535".into(),
        ),
        Ok(v) => Ok(v),
        Err(_) => Err(format!("'{s}' is not a TCP port; -p takes 1..65535")),
    }
}

pub(crate) fn parse_mtu(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(v) if RoceMtu::from_bytes(v).is_some() => Ok(v),
        _ => Err(format!(
            "'{s}' is not an MTU; use 256, 512, 1024, 2048 or 4096"
        )),
    }
}

pub(crate) use crate::params::parse_percentile;

/// `--cc-param name=value`, checked now: an unknown name or a bad value is a usage error that
/// names the parameter and lists the valid ones.
/// `--tcp-congestion`: a kernel congestion control's name as TCP_CONGESTION takes it (at most 15
/// bytes: TCP_CA_NAME_MAX with its NUL), letters, digits, `_` and `-`.
pub(crate) fn parse_tcp_congestion(s: &str) -> Result<String, String> {
    let name = s.trim();
    let ok = !name.is_empty()
        && name.len() < 16
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(name.to_string())
    } else {
        Err(format!(
            "{s:?} is not a TCP congestion control's name; give one the kernel lists in \
             /proc/sys/net/ipv4/tcp_available_congestion_control, such as cubic or reno"
        ))
    }
}

pub(crate) fn parse_cc_param(s: &str) -> Result<String, String> {
    crate::params::CcParams::default()
        .set(s)
        .map(|()| s.trim().to_string())
        .map_err(|e| e.to_string())
}

/// `--impair SPEC`, checked now so that a typo is a usage error before anything opens.
pub(crate) fn parse_impair(s: &str) -> Result<crate::transport::ImpairConfig, String> {
    crate::transport::ImpairConfig::parse_from(s, "--impair").map_err(|e| e.to_string())
}

/// `--flow_label`'s entries: 0 .. 2^20 - 1 each.
pub(crate) fn parse_flow_label(s: &str) -> Result<u32, String> {
    match parse_int(s.trim()) {
        Some(v) if v <= u64::from(crate::params::marks::FLOW_LABEL_MAX) => Ok(v as u32),
        Some(_) => Err(format!(
            "'{s}' is out of range; a flow label is 20 bits, 0 .. 1048575"
        )),
        None => Err(format!(
            "'{s}' is not a flow label; give numbers 0 .. 1048575, comma-separated"
        )),
    }
}
