//! Value parsers for the flags clap cannot check by type (sizes, iterations, MTUs, percentiles).
//!
//! Each error message says what is allowed.

/// Parses `-s` values: decimal or 0x hex, with an optional K or M suffix (×1024, ×1024²).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.chars().last() {
        Some('K') | Some('k') => (&t[..t.len() - 1], 1024u64),
        Some('M') | Some('m') => (&t[..t.len() - 1], 1024 * 1024),
        _ => (t, 1),
    };
    let v = parse_int(num).ok_or_else(|| {
        format!("'{s}' is not a size; use bytes, optionally with K or M, e.g. 65536, 64K, 1M")
    })?;
    let v = v
        .checked_mul(mult)
        .filter(|v| (1..=u64::from(u32::MAX / 2)).contains(v))
        .ok_or_else(|| {
            format!(
                "'{s}' is out of range; sizes are 1 .. {} bytes",
                u32::MAX / 2
            )
        })?;
    Ok(v)
}

fn parse_int(s: &str) -> Option<u64> {
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()
    } else {
        s.parse().ok()
    }
}

pub(crate) fn parse_iters(s: &str) -> Result<u64, String> {
    match parse_int(s.trim()) {
        Some(v) if (5..=1u64 << 32).contains(&v) => Ok(v),
        Some(_) => Err(format!(
            "'{s}' is out of range; iterations are 5 .. 4294967296"
        )),
        None => Err(format!("'{s}' is not a number of iterations")),
    }
}

pub(crate) fn parse_mtu(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(v) if [256, 512, 1024, 2048, 4096].contains(&v) => Ok(v),
        _ => Err(format!(
            "'{s}' is not an MTU; use 256, 512, 1024, 2048 or 4096"
        )),
    }
}

pub(crate) fn parse_percentile(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 100.0 => Ok(v),
        _ => Err(format!(
            "'{s}' is not a percentile; use numbers in (0, 100], e.g. 50,99,99.9"
        )),
    }
}
