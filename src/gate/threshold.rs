//! Threshold values with units, as typed on the command line: `90Gb/s`, `11000MiB/s`, `5us`, `1.2ms`,
//! `800ns`, `2Mpps`, `5%`.
//!
//! Every value keeps the text the user typed, so a report can say "below --min-bw 11000MiB/s" in the
//! user's own words while comparing in one canonical unit (Gb/s, µs, Mpps).

use std::fmt;

/// A bandwidth limit, compared in Gb/s (10^9 bit/s of payload).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Bandwidth {
    /// The limit in Gb/s.
    pub gbps: f64,
    /// What the user typed.
    pub text: String,
}

/// A latency limit, compared in microseconds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Latency {
    /// The limit in µs.
    pub us: f64,
    /// What the user typed.
    pub text: String,
}

/// A message-rate limit, compared in Mpps (10^6 messages/s).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MsgRate {
    /// The limit in Mpps.
    pub mpps: f64,
    /// What the user typed.
    pub text: String,
}

/// A relative change allowed against a baseline, in percent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Percent(pub f64);

/// A limit shows as the user typed it.
macro_rules! shown_as_typed {
    ($($ty:ident),+) => {$(
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.text)
            }
        }
    )+};
}

shown_as_typed!(Bandwidth, Latency, MsgRate);

impl fmt::Display for Percent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}%", self.0)
    }
}

/// Splits `"90 Gb/s"` into `(90.0, "Gb/s")`; the number must be finite and positive.
fn split_number(text: &str) -> Result<(f64, &str), String> {
    let t = text.trim();
    let end = t
        .char_indices()
        .find(|&(_, c)| !(c.is_ascii_digit() || c == '.'))
        .map_or(t.len(), |(i, _)| i);
    let (num, unit) = t.split_at(end);
    if num.is_empty() {
        return Err(format!("{text:?} does not start with a number"));
    }
    let value: f64 = num
        .parse()
        .map_err(|_| format!("{num:?} in {text:?} is not a number"))?;
    if !value.is_finite() || value <= 0.0 {
        return Err(format!("{text:?} must be greater than zero"));
    }
    Ok((value, unit.trim()))
}

/// Parses a bandwidth such as `90Gb/s`, `90Gbps`, `11000MiB/s`, `12.5GB/s`, `400Mb/s`.
///
/// `b` is bits and `B` bytes; `K`/`M`/`G`/`T` are powers of 10 and `Ki`/`Mi`/`Gi` powers of 2, so
/// `MiB/s` is perftest's "MB/sec" and `Gb/s` is `--report_gbits`.
pub(crate) fn parse_bandwidth(text: &str) -> Result<Bandwidth, String> {
    const HINT: &str = "use a rate such as 90Gb/s, 400Mb/s, 11000MiB/s or 12.5GB/s";
    let (value, unit) = split_number(text)?;
    let unit_body = unit
        .strip_suffix("/s")
        .or_else(|| unit.strip_suffix("ps"))
        .ok_or_else(|| format!("{text:?} has no rate unit; {HINT}"))?;
    // The last character is the quantity (b or B), the rest its prefix; "bit" spells b out.
    let (prefix, quantity) = match unit_body.strip_suffix("bit") {
        Some(prefix) => (prefix, "b"),
        None => {
            let last = unit_body.chars().last().map_or(0, char::len_utf8);
            unit_body.split_at(unit_body.len() - last)
        }
    };
    let bits_per_unit = match quantity {
        "b" => 1.0,
        "B" => 8.0,
        _ => return Err(format!("{text:?}: unknown unit {unit:?}; {HINT}")),
    };
    let scale = match prefix {
        "" => 1.0,
        // Lower-case prefixes are accepted: nobody means milli-bits by "mb/s".
        "k" | "K" => 1e3,
        "m" | "M" => 1e6,
        "g" | "G" => 1e9,
        "t" | "T" => 1e12,
        "Ki" => 1024.0,
        "Mi" => 1_048_576.0,
        "Gi" => 1_073_741_824.0,
        "Ti" => 1_099_511_627_776.0,
        _ => return Err(format!("{text:?}: unknown unit {unit:?}; {HINT}")),
    };
    Ok(Bandwidth {
        gbps: value * bits_per_unit * scale / 1e9,
        text: text.trim().to_owned(),
    })
}

/// Parses a latency such as `5us`, `5µs`, `1.2ms`, `800ns`, `0.001s`.
pub(crate) fn parse_latency(text: &str) -> Result<Latency, String> {
    let (value, unit) = split_number(text)?;
    let us_per_unit = match unit {
        "ns" => 1e-3,
        "us" | "µs" | "μs" | "usec" => 1.0,
        "ms" | "msec" => 1e3,
        "s" | "sec" => 1e6,
        "" => {
            return Err(format!(
                "{text:?} has no unit; write e.g. 5us, 1.2ms or 800ns"
            ));
        }
        _ => {
            return Err(format!(
                "{text:?}: unknown time unit {unit:?}; use ns, us (or µs), ms or s"
            ));
        }
    };
    Ok(Latency {
        us: value * us_per_unit,
        text: text.trim().to_owned(),
    })
}

/// Parses a message rate such as `2Mpps`, `500Kpps` or `250000pps`.
pub(crate) fn parse_msg_rate(text: &str) -> Result<MsgRate, String> {
    let (value, unit) = split_number(text)?;
    let scale = match unit {
        "pps" => 1e-6,
        "kpps" | "Kpps" => 1e-3,
        "Mpps" => 1.0,
        "Gpps" => 1e3,
        "" => return Err(format!("{text:?} has no unit; write e.g. 2Mpps or 500Kpps")),
        _ => {
            return Err(format!(
                "{text:?}: unknown rate unit {unit:?}; use pps, Kpps, Mpps or Gpps"
            ));
        }
    };
    Ok(MsgRate {
        mpps: value * scale,
        text: text.trim().to_owned(),
    })
}

/// Parses a percentage such as `5%` or `5` (both mean five percent).
pub(crate) fn parse_percent(text: &str) -> Result<Percent, String> {
    let t = text.trim();
    let num = t.strip_suffix('%').unwrap_or(t).trim();
    let value: f64 = num
        .parse()
        .map_err(|_| format!("{text:?} is not a percentage; write e.g. 5%"))?;
    if !value.is_finite() || value < 0.0 {
        return Err(format!("{text:?} must be zero or more percent"));
    }
    Ok(Percent(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn bandwidth_units() {
        for (text, gbps) in [
            ("90Gb/s", 90.0),
            ("90 Gb/s", 90.0),
            ("90Gbps", 90.0),
            ("90Gbit/s", 90.0),
            ("400Mb/s", 0.4),
            ("12.5GB/s", 100.0),
            ("11000MiB/s", 11000.0 * 1_048_576.0 * 8.0 / 1e9),
            ("1GiB/s", 8.589934592),
            ("1Tb/s", 1000.0),
            ("8000Kb/s", 0.008),
            ("90gbps", 90.0),
            ("400mb/s", 0.4),
        ] {
            let b = parse_bandwidth(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert!(close(b.gbps, gbps), "{text}: {} != {gbps}", b.gbps);
            assert_eq!(b.to_string(), text.trim());
        }
    }

    #[test]
    fn bandwidth_errors_say_what_to_write() {
        for bad in [
            "90", "90G", "fast", "-5Gb/s", "0Gb/s", "90Xb/s", "90Gz/s", "", "inf Gb/s", "5bµ/s",
        ] {
            let err = parse_bandwidth(bad).unwrap_err();
            assert!(err.contains(&format!("{bad:?}")), "{bad}: {err}");
        }
        assert!(parse_bandwidth("90").unwrap_err().contains("90Gb/s"));
    }

    #[test]
    fn latency_units() {
        for (text, us) in [
            ("5us", 5.0),
            ("5µs", 5.0),
            ("5μs", 5.0),
            ("1.2ms", 1200.0),
            ("800ns", 0.8),
            ("0.5s", 500_000.0),
            (" 7 us ", 7.0),
        ] {
            let l = parse_latency(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert!(close(l.us, us), "{text}: {} != {us}", l.us);
        }
        assert!(parse_latency("5").unwrap_err().contains("no unit"));
        assert!(parse_latency("5min").unwrap_err().contains("\"min\""));
        assert!(parse_latency("us").unwrap_err().contains("number"));
    }

    #[test]
    fn msg_rate_and_percent() {
        assert!(close(parse_msg_rate("2Mpps").unwrap().mpps, 2.0));
        assert!(close(parse_msg_rate("500Kpps").unwrap().mpps, 0.5));
        assert!(close(parse_msg_rate("1Gpps").unwrap().mpps, 1000.0));
        assert!(close(parse_msg_rate("250000pps").unwrap().mpps, 0.25));
        assert!(parse_msg_rate("2M").unwrap_err().contains("Mpps"));
        assert_eq!(parse_percent("5%").unwrap(), Percent(5.0));
        assert_eq!(parse_percent("2.5").unwrap(), Percent(2.5));
        assert_eq!(parse_percent("0%").unwrap(), Percent(0.0));
        assert!(parse_percent("-1%").is_err());
        assert!(parse_percent("five").unwrap_err().contains("5%"));
    }
}
