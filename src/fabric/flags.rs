//! What roce_fabric knows of the binaries' flags, to pass them through unparsed: which take a value
//! (so that `-s 1M` stays one flag and a test name is never mistaken for a value), their long names
//! (so that `-s 1M` and `--size=1M` compare equal), which may differ per rank and which the TCP leg
//! leaves out. All of it is read from the binaries' own clap definition (`cli::args`: its arg groups
//! `PER_HOST` and `ROCE_SETUP` mark the last two), so a flag added there is known here; only the flags
//! roce_fabric refuses are a list of its own, each with why.
//!
//! The binaries parse their flags where they always do; roce_fabric checks them once with `--help`
//! appended (clap parses every flag before it honours --help) before the run starts.

use crate::cli::args::{Args, PER_HOST, ROCE_SETUP};
use clap::CommandFactory;
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// Test flags roce_fabric refuses (by long name), and why.
pub(crate) const REFUSED: &[(&str, &str)] = &[
    (
        "--json",
        "roce_fabric writes fabric.json under --results DIR",
    ),
    ("--csv", "roce_fabric writes fabric.csv under --results DIR"),
    (
        "--persist",
        "roce_fabric starts a server for each pair's run, which serves that one client",
    ),
    (
        "--min-bw",
        "judge the matrix afterwards: roce_gate fabric.json --min-bw ...",
    ),
    (
        "--min-msg-rate",
        "judge the matrix afterwards with roce_gate fabric.json",
    ),
    (
        "--max-p50",
        "judge the matrix afterwards with roce_gate fabric.json",
    ),
    (
        "--max-p99",
        "judge the matrix afterwards: roce_gate fabric.json --max-p99 ...",
    ),
    (
        "--max-p999",
        "judge the matrix afterwards with roce_gate fabric.json",
    ),
    (
        "--max-max",
        "judge the matrix afterwards with roce_gate fabric.json",
    ),
    (
        "--baseline",
        "compare matrices with roce_gate fabric.json --baseline old/fabric.json",
    ),
    (
        "--max-regression",
        "compare matrices with roce_gate fabric.json --baseline ...",
    ),
    (
        "--junit",
        "roce_gate fabric.json --junit FILE writes JUnit for the matrix",
    ),
    (
        "--github",
        "roce_gate fabric.json --github annotates the matrix",
    ),
];

/// One flag of the binaries, as their clap definition has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Flag {
    /// `--size`.
    pub(crate) long: String,
    /// Other long spellings (`--max-median`).
    aliases: Vec<String>,
    /// `s`.
    short: Option<char>,
    /// Whether it takes a value (`-s 1M`) rather than standing alone (`--validate`, `-vv`).
    takes_value: bool,
    /// Names this host's own resources: may differ from rank to rank.
    pub(crate) per_host: bool,
    /// Chooses or tunes RoCE: the TCP leg leaves it out.
    pub(crate) roce_setup: bool,
}

/// The binaries' flags.
#[derive(Debug)]
pub(crate) struct Known {
    flags: Vec<Flag>,
}

/// The binaries' flags, read once from their clap definition.
pub(crate) fn known() -> &'static Known {
    static KNOWN: OnceLock<Known> = OnceLock::new();
    KNOWN.get_or_init(|| Known::of(Args::command()))
}

impl Known {
    /// The flags of `cmd`, with the groups that mark them.
    fn of(mut cmd: clap::Command) -> Known {
        cmd.build();
        let members = |group: &str| -> Vec<clap::Id> {
            cmd.get_groups()
                .find(|g| g.get_id() == group)
                .map(|g| g.get_args().cloned().collect())
                .unwrap_or_default()
        };
        let (per_host, roce_setup) = (members(PER_HOST), members(ROCE_SETUP));
        let flags = cmd
            .get_arguments()
            .filter_map(|a| {
                Some(Flag {
                    long: format!("--{}", a.get_long()?),
                    aliases: a
                        .get_all_aliases()
                        .unwrap_or_default()
                        .iter()
                        .map(|n| format!("--{n}"))
                        .collect(),
                    short: a.get_short(),
                    takes_value: a.get_action().takes_values(),
                    per_host: per_host.contains(a.get_id()),
                    roce_setup: roce_setup.contains(a.get_id()),
                })
            })
            .collect();
        Known { flags }
    }

    /// The flag spelled `--name` (or an alias of it).
    pub(crate) fn long(&self, name: &str) -> Option<&Flag> {
        self.flags
            .iter()
            .find(|f| f.long == name || f.aliases.iter().any(|a| a == name))
    }

    fn short(&self, c: char) -> Option<&Flag> {
        self.flags.iter().find(|f| f.short == Some(c))
    }

    /// The flags in one of the binaries' arg groups, as `-d`, or `--cpu` when they have no short name.
    pub(crate) fn names(&self, pick: impl Fn(&Flag) -> bool) -> Vec<String> {
        self.flags
            .iter()
            .filter(|f| pick(f))
            .map(|f| f.short.map_or_else(|| f.long.clone(), |c| format!("-{c}")))
            .collect()
    }
}

/// The long name of a flag token (`-s` → `--size`, `--size=1M` → `--size`, `-vv` → `--verbose`); an
/// unknown short flag stays as it is (`-Z`).
pub(crate) fn canonical(flag: &str) -> String {
    let name = flag.split('=').next().unwrap_or(flag);
    let Some(rest) = name.strip_prefix('-').filter(|r| !r.starts_with('-')) else {
        return known()
            .long(name)
            .map_or_else(|| name.to_owned(), |f| f.long.clone());
    };
    // `-s1M` is `-s` with a value; `-vv` is `-v` twice.
    match rest.chars().next().and_then(|c| known().short(c)) {
        Some(f) => f.long.clone(),
        None => name[..2.min(name.len())].to_owned(),
    }
}

/// Whether a flag token expects its value in the next token: it takes one and does not carry it
/// (`-s1M`, `--size=1M`). An unknown flag is taken to (its name and value then reach the binary,
/// which names it).
fn takes_value(flag: &str) -> bool {
    if flag.contains('=') {
        return false;
    }
    if flag.starts_with("--") {
        return known().long(flag).is_none_or(|f| f.takes_value);
    }
    let mut chars = flag.chars().skip(1);
    match (chars.next(), chars.next()) {
        (Some(c), None) => known().short(c).is_none_or(|f| f.takes_value),
        _ => false,
    }
}

/// Whether the token at `i` is a flag followed by its value (`-s 1M`), rather than one carrying it
/// (`-s1M`, `--size=1M`), one with none (`--validate`), or an unknown flag followed by another flag
/// (left for the binary to refuse by name).
pub(crate) fn value_follows(args: &[String], i: usize) -> bool {
    takes_value(&args[i]) && args.get(i + 1).is_some_and(|next| !next.starts_with('-'))
}

/// One flag of a pass-through list: its long name, its value (None: it has none), and how many
/// tokens it spans.
struct Item {
    long: String,
    value: Option<String>,
    len: usize,
}

/// The flags of a pass-through list, in order.
fn items(pass: &[String]) -> Vec<Item> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < pass.len() {
        let tok = &pass[i];
        let follows = value_follows(pass, i);
        let long = canonical(tok);
        let value = if let Some((_, v)) = tok.split_once('=') {
            Some(v.to_owned())
        } else if follows {
            pass.get(i + 1).cloned()
        } else if !tok.starts_with("--")
            && tok.len() > 2
            && known().long(&long).is_some_and(|f| f.takes_value)
        {
            Some(tok[2..].to_owned())
        } else {
            None
        };
        let len = if follows { 2 } else { 1 };
        out.push(Item { long, value, len });
        i += len;
    }
    out
}

/// The value of a pass-through flag (`-d lo`, `--ib-dev=lo`), by its long name; the last one wins
/// (empty for a flag without a value).
pub(crate) fn flag_value(pass: &[String], long: &str) -> Option<String> {
    items(pass)
        .into_iter()
        .rfind(|it| it.long == long)
        .map(|it| it.value.unwrap_or_default())
}

/// The pass-through flags grouped as (long name → values, `on` for a flag without one), for the
/// parameter check.
pub(crate) fn grouped(pass: &[String]) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for it in items(pass) {
        out.entry(it.long)
            .or_default()
            .push(it.value.unwrap_or_else(|| "on".into()));
    }
    out
}

/// The pass-through flags without those whose long name `drop` picks.
pub(crate) fn without(pass: &[String], drop: impl Fn(&str) -> bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    for it in items(pass) {
        if !drop(&it.long) {
            out.extend(pass[i..i + it.len].iter().cloned());
        }
        i += it.len;
    }
    out
}

/// Whether a flag (by long name) may differ from rank to rank.
pub(crate) fn per_host(long: &str) -> bool {
    known().long(long).is_some_and(|f| f.per_host)
}

/// Whether the TCP leg of `--compare` leaves a flag (by long name) out: what only RoCE takes, and
/// `--transport`, which the leg sets itself.
pub(crate) fn not_for_tcp(long: &str) -> bool {
    long == "--transport" || known().long(long).is_some_and(|f| f.roce_setup)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(args: &str) -> Vec<String> {
        args.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn names_and_values_come_from_the_binaries_clap_definition() {
        assert_eq!(canonical("-s"), "--size");
        assert_eq!(canonical("-s1M"), "--size");
        assert_eq!(canonical("--size=1M"), "--size");
        assert_eq!(canonical("-vvv"), "--verbose");
        assert_eq!(canonical("--max-median"), "--max-p50");
        assert_eq!(canonical("-Z"), "-Z");
        assert_eq!(canonical("--bogus"), "--bogus");
        let pass = v("-s 1M --validate -n 5 --out_json write_lat -vv -x1 --bogus value");
        assert!(value_follows(&pass, 0));
        assert!(!value_follows(&pass, 2), "--validate takes none");
        assert!(!value_follows(&pass, 5), "--out_json takes none either");
        assert!(!value_follows(&pass, 7) && !value_follows(&pass, 8));
        assert!(value_follows(&pass, 9), "an unknown flag keeps its value");
        let g = grouped(&pass);
        assert_eq!(g["--size"], ["1M"]);
        assert_eq!(g["--validate"], ["on"]);
        assert_eq!(g["--gid-index"], ["1"]);
        assert_eq!(g["--verbose"], ["on"]);
        assert_eq!(g["--bogus"], ["value"]);
        assert_eq!(flag_value(&pass, "--iters").as_deref(), Some("5"));
        assert_eq!(flag_value(&pass, "--validate").as_deref(), Some(""));
        assert_eq!(flag_value(&pass, "--roce"), None);
    }

    #[test]
    fn the_groups_say_what_differs_per_host_and_what_tcp_leaves_out() {
        let names = known().names(|f| f.per_host);
        assert_eq!(
            names,
            ["-d", "-i", "-x", "-e", "--cpu", "-v", "--bind", "-W"]
        );
        for f in [
            "--ib-dev",
            "--gid-index",
            "--cpu",
            "--events",
            "--bind",
            "--verbose",
        ] {
            assert!(per_host(f), "{f}");
        }
        assert!(!per_host("--size"));
        for f in [
            "--ib-dev",
            "--mtu",
            "--roce",
            "--io",
            "--oob",
            "--transport",
            "--report-counters",
        ] {
            assert!(not_for_tcp(f), "{f}");
        }
        for f in ["--iters", "--cpu", "--validate", "--connection"] {
            assert!(!not_for_tcp(f), "{f}");
        }
        let pass = v("--transport soft -d lo -m 1024 --io packet -n 10 --cpu 3");
        assert_eq!(without(&pass, not_for_tcp), v("-n 10 --cpu 3"));
    }

    #[test]
    fn every_refused_flag_is_one_of_the_binaries() {
        for (f, _) in REFUSED {
            assert_eq!(known().long(f).map(|k| k.long.as_str()), Some(*f));
        }
    }
}
