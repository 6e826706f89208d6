//! Deliberate, seeded impairment: what to do to packets ([`ImpairConfig`], parsed from `--impair` or
//! `ROCEPERF_IMPAIR`) and what was done ([`ImpairStats`]). [`super::fault`] does it, to any
//! [`Device`](super::device::Device).
//!
//! `tc netem` is the honest way to impair a link, but not every kernel has it (this one lacks
//! sch_netem), and it cannot tell a RoCE packet inside a GSO super-datagram. The soft transport
//! therefore impairs its own packets, one RoCE packet at a time, in each direction:
//! `loss=1%,burst=8,dup=0.1%,reorder=1%,delay=50us,corrupt=0.01%,rx:loss=0.5%,seed=7`. Decisions come
//! from a seeded generator, so a run is reproducible.

use std::fmt;

/// The environment variable the soft transport reads its impairment from when `--impair` is absent.
pub(crate) const IMPAIR_ENV: &str = "ROCEPERF_IMPAIR";

/// How long a reordered packet is held back when the spec does not say (`reorder_delay`).
pub(crate) const DEFAULT_REORDER_NS: u64 = 10_000;

/// What happens to the packets of one direction. Probabilities are per RoCE packet, 0.0..=1.0.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Impairment {
    /// Drop the packet (the long-run rate, with or without bursts).
    pub loss: f64,
    /// Gilbert–Elliott bursts: the mean length of a run of lost packets; 0 (or 1): independent losses.
    pub burst: f64,
    /// Send it twice.
    pub duplicate: f64,
    /// Hold it back by `reorder_ns`, so the packets after it overtake it.
    pub reorder: f64,
    /// How long a reordered packet is held back, ns (0: [`DEFAULT_REORDER_NS`]).
    pub reorder_ns: u64,
    /// Delay every packet by this much, ns.
    pub delay_ns: u64,
    /// Flip one bit of it (the receiver's ICRC check must catch it).
    pub corrupt: f64,
}

impl Impairment {
    /// True when nothing is impaired.
    pub fn is_none(&self) -> bool {
        self.loss == 0.0
            && self.duplicate == 0.0
            && self.reorder == 0.0
            && self.corrupt == 0.0
            && self.delay_ns == 0
    }

    /// How long a reordered packet is held back, ns.
    pub fn reorder_hold_ns(&self) -> u64 {
        if self.reorder_ns == 0 {
            DEFAULT_REORDER_NS
        } else {
            self.reorder_ns
        }
    }
}

/// The impairment of both directions and the seed: transmitted packets (the fields, as before
/// `rx:` existed) and received ones (`rx`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ImpairConfig {
    /// Drop a transmitted packet.
    pub loss: f64,
    /// Send a transmitted packet twice.
    pub duplicate: f64,
    /// Hold a transmitted packet back so later ones overtake it.
    pub reorder: f64,
    /// Flip one bit of a transmitted packet.
    pub corrupt: f64,
    /// Seed of the generators.
    pub seed: u64,
    /// Mean length of a burst of transmit losses (Gilbert–Elliott); 0: independent losses.
    pub burst: f64,
    /// How long a reordered transmitted packet is held back, ns (0: [`DEFAULT_REORDER_NS`]).
    pub reorder_ns: u64,
    /// Delay of every transmitted packet, ns.
    pub delay_ns: u64,
    /// What happens to received packets (`rx:` keys).
    pub rx: Impairment,
}

/// A malformed impairment spec; says where it came from and what is allowed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "{from}: {what}; expected comma-separated loss=P,burst=N,dup=P,reorder=P,reorder_delay=T,delay=T,corrupt=P,seed=N (rx: before a key impairs received packets) with P like 1% or 0.01 and T like 50us"
)]
pub struct ImpairParseError {
    /// `--impair` or `ROCEPERF_IMPAIR`.
    from: &'static str,
    /// What is wrong.
    what: String,
}

impl ImpairConfig {
    /// True when nothing is impaired in either direction.
    pub fn is_none(&self) -> bool {
        self.tx().is_none() && self.rx.is_none()
    }

    /// What happens to transmitted packets.
    pub fn tx(&self) -> Impairment {
        Impairment {
            loss: self.loss,
            burst: self.burst,
            duplicate: self.duplicate,
            reorder: self.reorder,
            reorder_ns: self.reorder_ns,
            delay_ns: self.delay_ns,
            corrupt: self.corrupt,
        }
    }

    /// Parses a spec such as `loss=1%,dup=0.5%,reorder=5%,rx:loss=1%,seed=7` (every key optional) as
    /// `ROCEPERF_IMPAIR` gives it.
    pub fn parse(spec: &str) -> Result<ImpairConfig, ImpairParseError> {
        ImpairConfig::parse_from(spec, IMPAIR_ENV)
    }

    /// Parses a spec; errors name `source` (`--impair` or `ROCEPERF_IMPAIR`).
    pub fn parse_from(spec: &str, source: &'static str) -> Result<ImpairConfig, ImpairParseError> {
        let bad = |what: String| ImpairParseError { from: source, what };
        let mut tx = Impairment::default();
        let mut rx = Impairment::default();
        let mut seed = 1;
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| bad(format!("'{item}' has no '='")))?;
            let (dir, key) = match key.trim().split_once(':') {
                Some(("rx", k)) => (&mut rx, k),
                Some(("tx", k)) => (&mut tx, k),
                Some((d, _)) => return Err(bad(format!("unknown direction '{d}:' (tx: or rx:)"))),
                None => (&mut tx, key.trim()),
            };
            let value = value.trim();
            let prob = || {
                parse_probability(value)
                    .ok_or_else(|| bad(format!("'{value}' for {key} is not a probability")))
            };
            let time = || {
                parse_duration_ns(value)
                    .ok_or_else(|| bad(format!("'{value}' for {key} is not a time like 50us")))
            };
            match key {
                "seed" => {
                    seed = value
                        .parse()
                        .map_err(|_| bad(format!("seed '{value}' is not a number")))?
                }
                "loss" => dir.loss = prob()?,
                "duplicate" | "dup" => dir.duplicate = prob()?,
                "reorder" => dir.reorder = prob()?,
                "corrupt" => dir.corrupt = prob()?,
                "delay" => dir.delay_ns = time()?,
                "reorder_delay" => dir.reorder_ns = time()?,
                "burst" => {
                    dir.burst = value
                        .parse::<f64>()
                        .ok()
                        .filter(|b| b.is_finite() && *b >= 1.0)
                        .ok_or_else(|| {
                            bad(format!(
                                "burst '{value}' is not a mean burst length of at least 1 packet"
                            ))
                        })?
                }
                _ => return Err(bad(format!("unknown key '{key}'"))),
            }
        }
        for d in [&tx, &rx] {
            if d.burst > 1.0 && d.loss >= 1.0 {
                return Err(bad("burst needs a loss below 100%".into()));
            }
        }
        Ok(ImpairConfig {
            loss: tx.loss,
            duplicate: tx.duplicate,
            reorder: tx.reorder,
            corrupt: tx.corrupt,
            seed,
            burst: tx.burst,
            reorder_ns: tx.reorder_ns,
            delay_ns: tx.delay_ns,
            rx,
        })
    }

    /// Reads `ROCEPERF_IMPAIR`; `Ok(None)` when it is unset or empty.
    pub fn from_env() -> Result<Option<ImpairConfig>, ImpairParseError> {
        match std::env::var(IMPAIR_ENV) {
            Ok(v) if !v.trim().is_empty() => ImpairConfig::parse(&v).map(Some),
            _ => Ok(None),
        }
    }

    /// The spec that parses back to this configuration: the keys that are not at their default, then
    /// the seed (what the header prints and the results record).
    pub fn spec(&self) -> String {
        let mut items = Vec::new();
        for (prefix, d) in [("", self.tx()), ("rx:", self.rx)] {
            // (away from its default?, key, value).
            let keys = [
                (d.loss > 0.0, "loss", percent(d.loss)),
                (d.burst > 1.0, "burst", short(d.burst)),
                (d.duplicate > 0.0, "dup", percent(d.duplicate)),
                (d.reorder > 0.0, "reorder", percent(d.reorder)),
                (d.reorder_ns > 0, "reorder_delay", duration(d.reorder_ns)),
                (d.delay_ns > 0, "delay", duration(d.delay_ns)),
                (d.corrupt > 0.0, "corrupt", percent(d.corrupt)),
            ];
            for (set, key, v) in keys {
                if set {
                    items.push(format!("{prefix}{key}={v}"));
                }
            }
        }
        items.push(format!("seed={}", self.seed));
        items.join(",")
    }
}

impl fmt::Display for ImpairConfig {
    /// The spec, as [`ImpairConfig::spec`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.spec())
    }
}

/// `v` with up to six decimals and no trailing zeros, when that reads back as exactly `v`; else
/// the shortest text that does (so a printed spec reproduces the run, even `loss=1e-9`).
fn short(v: f64) -> String {
    let s = format!("{v:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.parse::<f64>() == Ok(v) {
        s.to_string()
    } else {
        v.to_string()
    }
}

/// A probability as a percentage (`1%`), or as the fraction itself where no short percentage reads
/// back as exactly it: six decimals of a percentage turned 1e-9 into `0%` and 0.999999999 into `100%`.
fn percent(p: f64) -> String {
    let pct = format!("{p_100:.6}", p_100 = p * 100.0);
    let pct = pct.trim_end_matches('0').trim_end_matches('.');
    match pct.parse::<f64>() {
        Ok(v) if v / 100.0 == p => format!("{pct}%"),
        _ => p.to_string(),
    }
}

fn duration(ns: u64) -> String {
    match ns {
        n if n % 1_000_000 == 0 => format!("{}ms", n / 1_000_000),
        n if n % 1_000 == 0 => format!("{}us", n / 1_000),
        n => format!("{n}ns"),
    }
}

fn parse_probability(v: &str) -> Option<f64> {
    let p = match v.strip_suffix('%') {
        Some(pct) => pct.trim().parse::<f64>().ok()? / 100.0,
        None => v.trim().parse::<f64>().ok()?,
    };
    (0.0..=1.0).contains(&p).then_some(p)
}

/// `50us`, `1ms`, `200ns`, `0.5ms`, `1s` to nanoseconds.
fn parse_duration_ns(v: &str) -> Option<u64> {
    let split = v.find(|c: char| c.is_ascii_alphabetic())?;
    let (num, unit) = v.split_at(split);
    let scale = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => return None,
    };
    let x: f64 = num.trim().parse().ok()?;
    (x.is_finite() && x >= 0.0 && x * scale < 1e13).then(|| (x * scale).round() as u64)
}

/// How many packets each impairment hit, in one direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct ImpairStats {
    /// Packets dropped.
    pub dropped: u64,
    /// Extra copies sent.
    pub duplicated: u64,
    /// Packets held back so later ones overtook them.
    pub reordered: u64,
    /// Packets with a flipped bit.
    pub corrupted: u64,
    /// Packets delayed by `delay`.
    pub delayed: u64,
}

impl ImpairStats {
    /// True when nothing was done.
    pub fn is_empty(&self) -> bool {
        *self == ImpairStats::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_percentages_fractions_and_seed() {
        let c =
            ImpairConfig::parse("loss=1%, duplicate=0.5%,reorder=0.05,corrupt=0,seed=42").unwrap();
        assert_eq!(
            (c.loss, c.duplicate, c.reorder, c.corrupt, c.seed),
            (0.01, 0.005, 0.05, 0.0, 42)
        );
        assert!(!c.is_none());
        assert!(ImpairConfig::parse("").unwrap().is_none());
        let e = ImpairConfig::parse("los=1%").unwrap_err().to_string();
        assert!(
            e.contains("unknown key 'los'") && e.contains(IMPAIR_ENV),
            "{e}"
        );
        assert!(ImpairConfig::parse("loss=150%").is_err());
        assert!(ImpairConfig::parse("loss").is_err());
    }

    #[test]
    fn directions_times_and_bursts_parse_and_print_back() {
        let spec = "loss=1%,burst=8,dup=0.1%,reorder=1%,reorder_delay=20us,delay=50us,corrupt=0.01%,rx:loss=0.5%,seed=7";
        let c = ImpairConfig::parse_from(spec, "--impair").unwrap();
        assert_eq!(
            (c.burst, c.delay_ns, c.reorder_ns, c.rx.loss, c.rx.duplicate),
            (8.0, 50_000, 20_000, 0.005, 0.0)
        );
        assert_eq!(c.spec(), spec);
        assert_eq!(ImpairConfig::parse(&c.spec()).unwrap(), c);
        assert_eq!(ImpairConfig::parse("tx:loss=2%").unwrap().loss, 0.02);
        assert_eq!(
            ImpairConfig::parse("delay=1ms").unwrap().delay_ns,
            1_000_000
        );
        assert_eq!(ImpairConfig::parse("").unwrap().spec(), "seed=1");
        let e = ImpairConfig::parse_from("up:loss=1%", "--impair")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--impair: unknown direction 'up:'"), "{e}");
        assert!(ImpairConfig::parse("burst=0.5").is_err());
        assert!(ImpairConfig::parse("loss=100%,burst=4").is_err());
        assert!(ImpairConfig::parse("delay=5").is_err());
        assert!(ImpairConfig::parse("rx:corrupt=1%").unwrap().rx.corrupt == 0.01);
    }

    #[test]
    fn a_printed_spec_reads_back_as_exactly_the_impairment() {
        // Found by fuzz/fuzz_targets/impair_spec.rs: six decimals of a percentage printed a tiny loss
        // as `loss=0%` (the header and the results said no loss), and a loss just below 100% as
        // `loss=100%`, which with a burst does not even parse.
        for spec in [
            "loss=0.0000001%,seed=1",
            "loss=99.9999999%,burst=2",
            "rx:dup=0.123456789,burst=1.00000001,loss=3%",
            "reorder=0.003,corrupt=7%,delay=1500ns",
        ] {
            let c = ImpairConfig::parse(spec).unwrap();
            let printed = c.spec();
            let back = ImpairConfig::parse(&printed)
                .unwrap_or_else(|e| panic!("{spec} printed as {printed}: {e}"));
            assert_eq!(back, c, "{spec} printed as {printed}");
        }
        let tiny = ImpairConfig::parse("loss=0.000000001").unwrap();
        assert_eq!(tiny.spec(), "loss=0.000000001,seed=1");
        assert_eq!(
            ImpairConfig::parse("loss=1%,dup=0.5%,corrupt=7%")
                .unwrap()
                .spec(),
            "loss=1%,dup=0.5%,corrupt=7%,seed=1"
        );
    }
}
