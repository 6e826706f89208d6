//! roce_fabric's command line: its own options, the tests to run, and the test flags it passes through
//! to the single-pair binaries unchanged.
//!
//! The test flags are the binaries' to parse; `flags` knows just enough of them to pass them on.

use super::flags::{
    NOT_TCP, PER_RANK, REFUSED, canonical, flag_value, grouped, value_follows, without,
};
use super::rules::Rules;
use super::schedule::Pattern;
use crate::params::TestKind;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// Default TCP port of the coordinator (rank 0).
pub(crate) const DEFAULT_COORDINATOR_PORT: u16 = 18510;
/// Default first out-of-band port of the pair tests: a pair's port is this plus its server's rank.
pub(crate) const DEFAULT_BASE_PORT: u16 = 18515;
/// First address of the ranks' soft endpoints on lo: rank r binds 127.0.0.(10 + r).
pub(crate) const DEFAULT_LOOPBACK_BASE: std::net::Ipv4Addr = std::net::Ipv4Addr::new(127, 0, 0, 10);
/// Default time rank 0 waits for every rank to join.
pub(crate) const DEFAULT_JOIN_TIMEOUT: Duration = Duration::from_secs(60);

pub use crate::results::fabric::Leg;

/// Everything roce_fabric was asked to do.
#[derive(Debug, Clone)]
pub struct FabricOptions {
    /// The tests, in the order given.
    pub tests: Vec<TestKind>,
    /// Test flags passed through to the binaries, as given (no port, host or output flags).
    pub pass: Vec<String>,
    /// `--coordinator HOST[:PORT]`.
    pub coordinator: Option<String>,
    /// `--rank N` (overrides the launcher's).
    pub rank: Option<usize>,
    /// `--world-size N` (needed with `JOB_COMPLETION_INDEX` or `PMIX_RANK` alone).
    pub(crate) world_size: Option<usize>,
    /// Which pairs to test.
    pub pattern: Pattern,
    /// `--serial`: one pair at a time instead of a whole round at once.
    pub serial: bool,
    /// `--compare`: RoCE v1, RoCE v2 and TCP matrices in one job.
    pub compare: bool,
    /// `--results DIR` (rank 0 writes there).
    pub results: Option<PathBuf>,
    /// Outlier rules.
    pub rules: Rules,
    /// Retest flagged pairs alone (`--no-retest` turns it off).
    pub retest: bool,
    /// How long rank 0 waits for every rank, and a rank for rank 0.
    pub(crate) join_timeout: Duration,
    /// Longest one pair test may take before it is killed; None: from the test flags.
    pub(crate) pair_timeout: Option<Duration>,
    /// `--advertise ADDR`: the address peers reach this rank at.
    pub(crate) advertise: Option<String>,
    /// `--bin-dir DIR`: where the roce_* binaries are (default: next to roce_fabric).
    pub(crate) bin_dir: Option<PathBuf>,
    /// `--loopback-base ADDR`: for soft on lo, rank r binds ADDR + r (default 127.0.0.10).
    pub(crate) loopback_base: std::net::Ipv4Addr,
    /// First out-of-band port of the pair tests (`-p`).
    pub(crate) base_port: u16,
    /// `-h`/`--help`.
    pub help: bool,
    /// `-V`/`--version`.
    pub version: bool,
}

/// A command line roce_fabric cannot run.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

fn usage(msg: impl Into<String>) -> UsageError {
    UsageError(msg.into())
}

fn parse_num<T: std::str::FromStr>(flag: &str, v: &str) -> Result<T, UsageError> {
    v.parse()
        .map_err(|_| usage(format!("{flag} {v:?}: not a number")))
}

fn parse_secs(flag: &str, v: &str) -> Result<Duration, UsageError> {
    let s: f64 = parse_num(flag, v)?;
    if !(s.is_finite() && s > 0.0) {
        return Err(usage(format!(
            "{flag} {v}: give a number of seconds above zero"
        )));
    }
    Ok(Duration::from_secs_f64(s))
}

/// Parses a test name: `write_bw`, `roce_write_bw`; `all` is the six.
pub(crate) fn parse_tests(word: &str) -> Option<Vec<TestKind>> {
    if word == "all" {
        return Some(TestKind::ALL.to_vec());
    }
    TestKind::from_name(word.strip_prefix("roce_").unwrap_or(word)).map(|t| vec![t])
}

/// Parses roce_fabric's arguments (without the program name).
pub fn parse(args: &[String]) -> Result<FabricOptions, UsageError> {
    let mut o = FabricOptions {
        tests: Vec::new(),
        pass: Vec::new(),
        coordinator: None,
        rank: None,
        world_size: None,
        pattern: Pattern::AllPairs,
        serial: false,
        compare: false,
        results: None,
        rules: Rules::default(),
        retest: true,
        join_timeout: DEFAULT_JOIN_TIMEOUT,
        pair_timeout: None,
        advertise: None,
        bin_dir: None,
        loopback_base: DEFAULT_LOOPBACK_BASE,
        base_port: DEFAULT_BASE_PORT,
        help: false,
        version: false,
    };
    let mut pattern: Option<String> = None;
    let mut pairs_file: Option<PathBuf> = None;
    let mut i = 0;
    while i < args.len() {
        let tok = args[i].as_str();
        i += 1;
        if !tok.starts_with('-') || tok == "-" {
            match parse_tests(tok) {
                Some(t) => o.tests.extend(t),
                None => {
                    return Err(usage(format!(
                        "unexpected argument {tok:?}: give test names (write_bw, send_lat, ... or all) and \
                         test flags; roce_fabric picks every peer itself, so there is no host argument"
                    )));
                }
            }
            continue;
        }
        let (name, inline) = match tok.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v.to_owned())),
            _ => (tok, None),
        };
        // `-p18600`: the short port flag with its value attached.
        let (name, inline) = if name.starts_with("-p") && name.len() > 2 && !name.starts_with("--")
        {
            ("-p", Some(name[2..].to_owned()))
        } else {
            (name, inline)
        };
        let value = |i: &mut usize| -> Result<String, UsageError> {
            if let Some(v) = inline.clone() {
                return Ok(v);
            }
            let v = args
                .get(*i)
                .ok_or_else(|| usage(format!("{name} needs a value")))?;
            *i += 1;
            Ok(v.clone())
        };
        match name {
            "-h" | "--help" => o.help = true,
            "-V" | "--version" => o.version = true,
            "--coordinator" => o.coordinator = Some(value(&mut i)?),
            "--rank" => o.rank = Some(parse_num(name, &value(&mut i)?)?),
            "--world-size" => o.world_size = Some(parse_num(name, &value(&mut i)?)?),
            "--pattern" => pattern = Some(value(&mut i)?),
            "--pairs" => pairs_file = Some(PathBuf::from(value(&mut i)?)),
            "--serial" => o.serial = true,
            "--compare" => o.compare = true,
            "--results" => o.results = Some(PathBuf::from(value(&mut i)?)),
            "--lat-factor" => {
                o.rules.lat_factor = Rules::parse_factor(&value(&mut i)?).map_err(usage)?
            }
            "--bw-fraction" => {
                o.rules.bw_fraction = Rules::parse_fraction(&value(&mut i)?).map_err(usage)?
            }
            "--no-retest" => o.retest = false,
            "--join-timeout" => o.join_timeout = parse_secs(name, &value(&mut i)?)?,
            "--pair-timeout" => o.pair_timeout = Some(parse_secs(name, &value(&mut i)?)?),
            "--advertise" => o.advertise = Some(value(&mut i)?),
            "--bin-dir" => o.bin_dir = Some(PathBuf::from(value(&mut i)?)),
            "--loopback-base" => {
                let v = value(&mut i)?;
                o.loopback_base = v
                    .parse()
                    .ok()
                    .filter(|a: &std::net::Ipv4Addr| a.is_loopback())
                    .ok_or_else(|| {
                        usage(format!(
                            "--loopback-base {v}: give an address in 127.0.0.0/8"
                        ))
                    })?;
            }
            "-p" | "--port" => o.base_port = parse_num(name, &value(&mut i)?)?,
            _ => {
                let long = canonical(tok);
                if let Some((_, why)) = REFUSED.iter().find(|(f, _)| *f == long) {
                    return Err(usage(format!("{tok} is not a roce_fabric flag: {why}")));
                }
                if long == "--results" {
                    unreachable!("--results is roce_fabric's own");
                }
                o.pass.push(tok.to_owned());
                if value_follows(args, i - 1) {
                    o.pass.push(args[i].clone());
                    i += 1;
                }
            }
        }
    }
    o.pattern = match (pattern.as_deref(), pairs_file) {
        (Some(_), Some(_)) => return Err(usage("give --pattern or --pairs, not both")),
        (_, Some(f)) => Pattern::from_file(&f).map_err(usage)?,
        (None | Some("all") | Some("all-pairs"), None) => Pattern::AllPairs,
        (Some("ring"), None) => Pattern::Ring,
        (Some("bisection"), None) => Pattern::Bisection,
        (Some(p), None) => {
            return Err(usage(format!(
                "--pattern {p}: use all (every pair, both directions), ring or bisection, or --pairs FILE"
            )));
        }
    };
    if o.help || o.version {
        return Ok(o);
    }
    if o.tests.is_empty() {
        return Err(usage(
            "no test given: name one or more of send_bw write_bw read_bw send_lat write_lat read_lat (or all)",
        ));
    }
    let mut seen = Vec::new();
    o.tests.retain(|t| {
        let new = !seen.contains(t);
        seen.push(*t);
        new
    });
    if o.compare && flag_value(&o.pass, "--roce").is_some() {
        return Err(usage(
            "--compare runs RoCE v1, v2 and TCP itself: leave out --roce",
        ));
    }
    if o.compare && flag_value(&o.pass, "--transport").as_deref() == Some("tcp") {
        return Err(usage(
            "--compare runs TCP itself: give the RoCE transport (auto, soft or verbs)",
        ));
    }
    if matches!(o.rank, Some(r) if o.world_size.is_some_and(|n| r >= n)) {
        return Err(usage("--rank must be below --world-size"));
    }
    Ok(o)
}

impl FabricOptions {
    /// The legs this run has: the flags as given, or RoCE v1, RoCE v2 and TCP with `--compare`.
    pub fn legs(&self) -> Vec<Leg> {
        if self.compare {
            vec![Leg::RoceV1, Leg::RoceV2, Leg::Tcp]
        } else {
            vec![Leg::AsGiven]
        }
    }

    /// The test flags of one leg, as this rank passes them to a binary.
    pub(crate) fn leg_args(&self, leg: Leg) -> Vec<String> {
        match leg {
            Leg::AsGiven => self.pass.clone(),
            Leg::RoceV1 | Leg::RoceV2 => {
                let mut a = self.pass.clone();
                let v = if leg == Leg::RoceV1 { "v1" } else { "v2" };
                a.extend(["--roce".to_owned(), v.to_owned()]);
                a
            }
            Leg::Tcp => {
                let mut a = without(&self.pass, NOT_TCP);
                a.extend(["--transport".to_owned(), "tcp".to_owned()]);
                a
            }
        }
    }

    /// The device (`-d`) this rank tests with, if given.
    pub fn device(&self) -> Option<String> {
        flag_value(&self.pass, "--ib-dev")
    }

    /// Whether this rank runs the soft transport on the loopback interface, where every rank needs an
    /// address of its own (UDP port 4791 is taken once per address).
    pub(crate) fn soft_on_loopback(&self) -> bool {
        let transport = flag_value(&self.pass, "--transport");
        self.device().as_deref() == Some("lo")
            && matches!(transport.as_deref(), None | Some("auto") | Some("soft"))
            && flag_value(&self.pass, "--bind").is_none()
    }

    /// The parameters every rank must share, by name, for the check at the rendezvous.
    pub(crate) fn shared_params(&self) -> BTreeMap<String, String> {
        let mut m = BTreeMap::new();
        m.insert(
            "tests".into(),
            self.tests
                .iter()
                .map(|t| t.name())
                .collect::<Vec<_>>()
                .join(","),
        );
        m.insert("--pattern".into(), self.pattern.describe());
        m.insert("--serial".into(), self.serial.to_string());
        m.insert("--compare".into(), self.compare.to_string());
        m.insert("--lat-factor".into(), self.rules.lat_factor.to_string());
        m.insert("--bw-fraction".into(), self.rules.bw_fraction.to_string());
        m.insert("--no-retest".into(), (!self.retest).to_string());
        m.insert(
            "--pair-timeout".into(),
            self.pair_timeout
                .map_or("default".into(), |d| format!("{}s", d.as_secs_f64())),
        );
        m.insert("--port".into(), self.base_port.to_string());
        for (k, v) in grouped(&self.pass) {
            if !PER_RANK.contains(&k.as_str()) {
                m.insert(k, v.join(" "));
            }
        }
        m
    }

    /// How long one side of one pair test may run: `--pair-timeout`, or generous for the test flags.
    pub(crate) fn pair_timeout_for(&self, test: TestKind) -> Duration {
        if let Some(t) = self.pair_timeout {
            return t;
        }
        let g = grouped(&self.pass);
        let sizes = if g.contains_key("--all") { 23.0 } else { 1.0 };
        let per_size = match g
            .get("--duration")
            .and_then(|v| v.last()?.parse::<f64>().ok())
        {
            Some(d) => d + 5.0,
            None => {
                let iters = g
                    .get("--iters")
                    .and_then(|v| v.last()?.parse::<f64>().ok())
                    .unwrap_or(test.default_iters() as f64);
                // Up to 8 MiB messages at 20 MB/s, a loaded machine's soft transport at its slowest.
                let size = if g.contains_key("--all") {
                    8.0 * 1048576.0
                } else {
                    65536.0
                };
                2.0 + iters * size / 20e6
            }
        };
        Duration::from_secs_f64((30.0 + sizes * per_size).min(3600.0))
    }
}

#[cfg(test)]
mod tests;
