//! Pacing vocabulary: perftest's rate limiter (`--rate_limit`, `--rate_units`, `--rate_limit_type`,
//! `--burst_size`) and its latency gap, with perftest's units and defaults.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// `--rate_units`: perftest's letters, with perftest's meanings.
// Each variant is a rate, and says so: `MibPerSec` reads better than `Mib` where it is used.
#[allow(clippy::enum_variant_names)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum RateUnits {
    /// `M`: MiB/s of payload (2^20 bytes/s; perftest's `MEGA_BYTE_PS`).
    #[serde(rename = "MiB/s")]
    MibPerSec,
    /// `g`: Gb/s of payload (10^9 bit/s), perftest's default.
    #[default]
    #[serde(rename = "Gb/s")]
    GbPerSec,
    /// `p`: messages per second (perftest says packets: one message is one work request).
    #[serde(rename = "msg/s")]
    MsgPerSec,
}

impl RateUnits {
    /// The three units.
    pub const ALL: [RateUnits; 3] = [
        RateUnits::MibPerSec,
        RateUnits::GbPerSec,
        RateUnits::MsgPerSec,
    ];

    /// perftest's letter: `M`, `g` or `p`.
    pub(crate) fn letter(&self) -> &'static str {
        match self {
            RateUnits::MibPerSec => "M",
            RateUnits::GbPerSec => "g",
            RateUnits::MsgPerSec => "p",
        }
    }

    /// The unit as printed: `MiB/s`, `Gb/s`, `msg/s`.
    pub(crate) fn symbol(&self) -> &'static str {
        match self {
            RateUnits::MibPerSec => "MiB/s",
            RateUnits::GbPerSec => "Gb/s",
            RateUnits::MsgPerSec => "msg/s",
        }
    }

    /// `rate` in these units, as messages of `size` bytes per second.
    pub(crate) fn msgs_per_sec(&self, rate: f64, size: u64) -> f64 {
        let size = size.max(1) as f64;
        match self {
            RateUnits::MibPerSec => rate * 1_048_576.0 / size,
            RateUnits::GbPerSec => rate * 1e9 / (8.0 * size),
            RateUnits::MsgPerSec => rate,
        }
    }
}

impl fmt::Display for RateUnits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.symbol())
    }
}

// `--rate_units M|g|p`.
value_enum!(RateUnits by letter {
    MibPerSec => "MiB/s of payload (2^20 bytes/s)",
    GbPerSec => "Gb/s of payload (10^9 bit/s)",
    MsgPerSec => "messages per second",
});

/// `--rate_limit_type`: who paces. roceperf implements `SW`; the others need a NIC's pacer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RateLimitType {
    /// Software: roceperf's own pacer in the bandwidth loop.
    #[serde(rename = "SW")]
    Sw,
    /// The QP's static rate (an InfiniBand path attribute).
    #[serde(rename = "HW")]
    Hw,
    /// Packet pacing (`IBV_QP_RATE_LIMIT`).
    #[serde(rename = "PP")]
    Pp,
}

impl RateLimitType {
    /// The three types.
    pub const ALL: [RateLimitType; 3] = [RateLimitType::Sw, RateLimitType::Hw, RateLimitType::Pp];

    /// `SW`, `HW` or `PP`.
    pub fn name(&self) -> &'static str {
        match self {
            RateLimitType::Sw => "SW",
            RateLimitType::Hw => "HW",
            RateLimitType::Pp => "PP",
        }
    }
}

impl fmt::Display for RateLimitType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

// `--rate_limit_type SW|HW|PP`.
value_enum!(RateLimitType {
    Sw => "roceperf's own pacer (every transport)",
    Hw => "the QP's static rate (refused: no transport here offers it)",
    Pp => "NIC packet pacing (refused: no transport here offers it)",
});

/// A run's rate limit: what the user asked for, in the user's units.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RateLimit {
    /// `--rate_limit`, in `units`.
    pub value: f64,
    /// `--rate_units`.
    pub units: RateUnits,
    /// `--rate_limit_type` (always `SW` once a run starts).
    #[serde(rename = "type")]
    pub kind: RateLimitType,
    /// `--burst_size`: messages released back to back per pacing period.
    pub burst_size: u32,
}

impl RateLimit {
    /// The limit in messages per second at message size `size`.
    pub(crate) fn msgs_per_sec(&self, size: u64) -> f64 {
        self.units.msgs_per_sec(self.value, size)
    }
}

/// Parses `--rate_limit`: a positive number (perftest takes a float).
pub(crate) fn parse_rate(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!(
            "'{s}' is not a rate; give a positive number in --rate_units (default g: Gb/s), e.g. 2.5"
        )),
    }
}

/// Parses `--latency_gap`: microseconds as perftest counts them (`10`), or with a unit (`500ns`,
/// `10us`, `1ms`) for gaps finer than a microsecond.
pub(crate) fn parse_gap(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let err = || {
        format!(
            "'{s}' is not a gap; give microseconds as perftest does (10), or a number with ns, us or ms (500ns)"
        )
    };
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().map_err(|_| err())?;
    let ns = match unit {
        "" | "us" => n.checked_mul(1_000),
        "ns" => Some(n),
        "ms" => n.checked_mul(1_000_000),
        _ => None,
    }
    .filter(|&ns| ns <= 10_000_000_000)
    .ok_or_else(err)?;
    Ok(Duration::from_nanos(ns))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_follow_perftest() {
        // perftest: M is MiB/s (rate / size * 1048576), g is Gb/s (rate / (size * 8) * 1e9), p is pps.
        assert_eq!(RateUnits::MibPerSec.msgs_per_sec(64.0, 65536), 1024.0);
        assert_eq!(RateUnits::GbPerSec.msgs_per_sec(1.0, 1000), 125_000.0);
        assert_eq!(RateUnits::MsgPerSec.msgs_per_sec(5000.0, 123), 5000.0);
        assert_eq!(RateUnits::default(), RateUnits::GbPerSec);
        let l = RateLimit {
            value: 2.0,
            units: RateUnits::GbPerSec,
            kind: RateLimitType::Sw,
            burst_size: 8,
        };
        let v = serde_json::to_value(l).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"value": 2.0, "units": "Gb/s", "type": "SW", "burst_size": 8})
        );
    }

    #[test]
    fn rates_and_gaps_parse_and_say_what_to_type() {
        assert_eq!(parse_rate("2.5"), Ok(2.5));
        assert!(parse_rate("0").unwrap_err().contains("positive"));
        assert!(parse_rate("-1").is_err() && parse_rate("fast").is_err());
        assert_eq!(parse_gap("10"), Ok(Duration::from_micros(10)));
        assert_eq!(parse_gap("500ns"), Ok(Duration::from_nanos(500)));
        assert_eq!(parse_gap("3ms"), Ok(Duration::from_millis(3)));
        assert_eq!(parse_gap("0"), Ok(Duration::ZERO));
        assert!(parse_gap("1s").unwrap_err().contains("microseconds"));
        assert!(parse_gap("-5").is_err() && parse_gap("11000ms").is_err());
    }
}
