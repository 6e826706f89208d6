//! What roce_fabric knows of the binaries' flags, to pass them through unparsed: which take a value
//! (so that `-s 1M` stays one flag and a test name is never mistaken for a value), their long names,
//! which may differ per rank, which the TCP leg drops, and which roce_fabric refuses.
//!
//! The binaries parse their flags where they always do; roce_fabric checks them once with
//! `--help` appended (clap parses every flag before it honours --help) before the run starts.

use std::collections::BTreeMap;

/// The binaries' flags that take no value (everything else starting with `-` takes one).
pub(crate) const NO_VALUE: &[&str] = &[
    "-a",
    "--all",
    "-F",
    "--CPU-freq",
    "-b",
    "--bidirectional",
    "--report_gbits",
    "--cpu_util",
    "-v",
    "-vv",
    "-vvv",
    "--verbose",
    "--ipv6",
    "--no-gso",
    "--validate",
];

/// Short flags of the binaries and their long names, so that `-s 1M` and `--size 1M` compare equal.
pub(crate) const SHORT: &[(&str, &str)] = &[
    ("-d", "--ib-dev"),
    ("-i", "--ib-port"),
    ("-x", "--gid-index"),
    ("-s", "--size"),
    ("-a", "--all"),
    ("-n", "--iters"),
    ("-D", "--duration"),
    ("-f", "--margin"),
    ("-q", "--qp"),
    ("-t", "--tx-depth"),
    ("-Q", "--cq-mod"),
    ("-m", "--mtu"),
    ("-I", "--inline_size"),
    ("-F", "--CPU-freq"),
    ("-b", "--bidirectional"),
    ("-v", "--verbose"),
    ("-u", "--qp-timeout"),
];

/// Flags that may differ from rank to rank (each host has its own device, GID index, cores): not part
/// of the parameter check, and kept from the rank's own command line when it runs a test.
pub(crate) const PER_RANK: &[&str] = &[
    "--ib-dev",
    "--ib-port",
    "--gid-index",
    "--cpu",
    "--bind",
    "--verbose",
];

/// Flags that do not apply to the TCP leg of `--compare` (the binaries refuse them with tcp).
pub(crate) const NOT_TCP: &[&str] = &[
    "--ib-dev",
    "--ib-port",
    "--gid-index",
    "--mtu",
    "--inline_size",
    "--roce",
    "--io",
    "--ipv6",
    "--no-gso",
    "--bind",
    "--qp-timeout",
    "--retry_count",
    "--oob",
    "--transport",
];

/// Test flags roce_fabric refuses, and why.
pub(crate) const REFUSED: &[(&str, &str)] = &[
    (
        "--json",
        "roce_fabric writes fabric.json under --results DIR",
    ),
    ("--csv", "roce_fabric writes fabric.csv under --results DIR"),
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
        "--max-median",
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
        "--max-p99.9",
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

/// The long name of a flag token (`-s` → `--size`, `--size=1M` → `--size`).
pub(crate) fn canonical(flag: &str) -> String {
    let name = flag.split('=').next().unwrap_or(flag);
    if let Some(rest) = name.strip_prefix('-').filter(|r| !r.starts_with('-')) {
        // `-s1M` is `-s` with a value; `-vv` is verbose.
        if rest.starts_with('v') && rest.chars().all(|c| c == 'v') {
            return "--verbose".into();
        }
        let short = &name[..2.min(name.len())];
        if let Some((_, long)) = SHORT.iter().find(|(s, _)| *s == short) {
            return (*long).to_owned();
        }
        return short.to_owned();
    }
    name.to_owned()
}

/// Whether the token at `i` is a flag followed by its value (`-s 1M`), rather than one carrying it
/// (`-s1M`, `--size=1M`), one with none (`--validate`), or an unknown flag followed by another flag
/// (left for the binary to refuse by name).
pub(crate) fn value_follows(args: &[String], i: usize) -> bool {
    takes_value(&args[i]) && args.get(i + 1).is_some_and(|next| !next.starts_with('-'))
}

fn takes_value(flag: &str) -> bool {
    if flag.contains('=') {
        return false;
    }
    if NO_VALUE.contains(&flag) {
        return false;
    }
    // `-s1M`: a short flag with its value attached.
    flag.len() <= 2 || flag.starts_with("--")
}

/// The value of a pass-through flag (`-d lo`, `--ib-dev=lo`), by its long name; the last one wins.
pub(crate) fn flag_value(pass: &[String], long: &str) -> Option<String> {
    let mut found = None;
    let mut i = 0;
    while i < pass.len() {
        let tok = &pass[i];
        let has_value = value_follows(pass, i);
        if canonical(tok) == long {
            found = Some(if let Some((_, v)) = tok.split_once('=') {
                v.to_owned()
            } else if has_value {
                pass.get(i + 1).cloned().unwrap_or_default()
            } else if tok.len() > 2 && !tok.starts_with("--") {
                tok[2..].to_owned()
            } else {
                String::new()
            });
        }
        i += if has_value { 2 } else { 1 };
    }
    found
}

/// The pass-through flags grouped as (long name → values), for the parameter check.
pub(crate) fn grouped(pass: &[String]) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut i = 0;
    while i < pass.len() {
        let tok = &pass[i];
        let has_value = value_follows(pass, i);
        let long = canonical(tok);
        let v = if let Some((_, v)) = tok.split_once('=') {
            v.to_owned()
        } else if has_value {
            pass.get(i + 1).cloned().unwrap_or_default()
        } else if tok.len() > 2 && !tok.starts_with("--") && !long.ends_with("verbose") {
            tok[2..].to_owned()
        } else {
            "on".to_owned()
        };
        out.entry(long).or_default().push(v);
        i += if has_value { 2 } else { 1 };
    }
    out
}

/// The pass-through flags without those named in `drop` (long names).
pub fn without(pass: &[String], drop: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < pass.len() {
        let n = if value_follows(pass, i) { 2 } else { 1 };
        if !drop.contains(&canonical(&pass[i]).as_str()) {
            out.extend(pass[i..(i + n).min(pass.len())].iter().cloned());
        }
        i += n;
    }
    out
}
