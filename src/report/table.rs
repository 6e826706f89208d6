//! A comparison in the terminal: what it measures, a table per test (each row beside the floor of its
//! host path, and against RoCE v1 on the same path), then a histogram per latency run.
//!
//! Everything fits in 100 columns.

use super::{fmt_size, histogram_text};
use crate::params::{Metric, RoceVersion, Verb};
use crate::results::{CompareRun, CompareSet, HostPath, Measured};
use crate::stats::{MIN_SAMPLES_BEYOND, withheld_reason};
use std::fmt::Write;

/// Widest output line.
pub(crate) const WIDTH: usize = 100;
/// Longest transport label always shown in full (more when the other columns leave room); longer
/// ones are cut with `…`.
const LABEL_MAX: usize = 20;
/// Longest label in a histogram's title (`RoCE v2 (soft, UDP socket)` is 26).
const TITLE_LABEL_MAX: usize = 30;

/// `12.35`: about four significant digits, as in the latency columns.
fn num(v: f64) -> String {
    let decimals = if v < 10.0 {
        3
    } else if v < 100.0 {
        2
    } else if v < 10_000.0 {
        1
    } else {
        0
    };
    format!("{v:.decimals$}")
}

/// `+1.234` or `-0.050`: what a median lies above its floor.
fn signed(v: f64) -> String {
    let n = num(v.abs());
    if v < 0.0 {
        format!("-{n}")
    } else {
        format!("+{n}")
    }
}

/// `87%`, `9.5%`: a share.
fn pct(share: f64) -> String {
    let p = 100.0 * share;
    if p < 10.0 {
        format!("{p:.1}%")
    } else {
        format!("{p:.0}%")
    }
}

/// `s` in at most `max` characters, cut with `…`; a label's ` @ …` tail (a loss sweep's rate) is
/// kept whole, since it is what tells the rows of one series apart.
fn cut(s: &str, max: usize) -> String {
    let len = s.chars().count();
    if len <= max {
        return s.to_owned();
    }
    if let Some(at) = s.rfind(" @ ") {
        let tail = &s[at..];
        let keep = max.saturating_sub(tail.chars().count());
        if keep >= 4 {
            return cut(&s[..at], keep) + tail;
        }
    }
    let mut t: String = s.chars().take(max - 1).collect();
    t.push('…');
    t
}

/// The header of the spread column, shown when a run was repeated (`--repeat N`).
const SPREAD_HEADER: &str = "spread";

/// A percentile's cell: `n/a` when withheld (fewer than 10 samples beyond it).
fn pct_cell(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".to_owned(), num)
}

/// The spread column's cell: half the range (highest − lowest) of the repetitions' headline figure,
/// in percent of the row's (`±4.1%`); `-` for a row not repeated.
fn spread_cell(run: &CompareRun, size: u64, shown: f64) -> String {
    match run.spread(size) {
        Some((lo, hi)) if shown > 0.0 => {
            let pct = (hi - lo) / 2.0 / shown * 100.0;
            let decimals = if pct < 10.0 { 1 } else { 0 };
            format!("±{pct:.decimals$}%")
        }
        _ => "-".to_owned(),
    }
}

/// How many repetitions the most repeated run took (0: none was repeated).
fn repetitions(set: &CompareSet) -> usize {
    set.runs
        .iter()
        .map(|r| r.repetitions_run())
        .max()
        .unwrap_or(0)
}

/// Whether a latency row has a percentile withheld (fewer than 10 samples beyond it).
fn any_withheld(set: &CompareSet) -> bool {
    set.runs.iter().flat_map(|r| &r.results).any(|r| {
        r.figures()
            .latency()
            .is_some_and(|l| l.p99_us.is_none() || l.p999_us.is_none())
    })
}

/// What the comparison measures and what it does not, in a few lines above its table: a soft
/// comparison ranks the host's paths unless rows share one, and says nothing of RDMA NICs.
pub(crate) fn what_it_measures(set: &CompareSet) -> String {
    let paths: Vec<HostPath> = set.runs.iter().filter_map(|r| r.path).collect();
    let soft = paths.iter().any(|p| *p != HostPath::RdmaNic);
    let nic = paths.contains(&HostPath::RdmaNic);
    // The paths RoCE v1 shares with another RoCE version: there the rows differ by protocol.
    let mut shared: Vec<&str> = Vec::new();
    for v1 in set.runs.iter().filter(|r| r.roce == Some(RoceVersion::V1)) {
        let others = set
            .runs
            .iter()
            .filter(|r| r.roce.is_some() && r.roce != v1.roce);
        if let Some(p) = v1
            .path
            .filter(|p| others.clone().any(|r| r.path == Some(*p)))
            && !shared.contains(&p.short())
        {
            shared.push(p.short());
        }
    }
    let protocol = match shared.as_slice() {
        [] => "No two RoCE versions share a host path here, so no row's difference is the \
               protocol's alone."
            .to_string(),
        paths => format!(
            "RoCE v1 and v2 over {} take one host path: their rows differ by protocol (headers, \
             ICRC coverage, addressing).",
            paths.join(" and ")
        ),
    };
    let text = match (soft, nic) {
        (true, _) => format!(
            "What this measures: roceperf's userspace RoCE (soft) and TCP through this host's \
             network stack. {protocol} Rows of different paths differ first by what the host \
             charges for each path, so each row stands beside the floor of its own path \
             (roce_ref, same run, same cores) and what the stack adds above it: compare those, \
             not the raw figures across paths. It tells nothing of RDMA NICs; on real NICs run \
             `roce_compare --server -d mlx5_0` on one host and `roce_compare HOST -d mlx5_0` on \
             the other."
        ),
        (false, true) => format!(
            "What this measures: RoCE through the RDMA NICs (verbs) between two hosts, and TCP \
             through the kernel. {protocol} The wire ceilings (--link-speed, or the port's own) \
             say how close each came to what its headers allow."
        ),
        (false, false) => return String::new(),
    };
    wrap(&text, WIDTH) + "\n"
}

/// The title above a test's rows: what its figures are.
fn title(test: crate::params::TestKind) -> String {
    match (test.metric, test.verb) {
        (Metric::Latency, Verb::Read | Verb::Atomic) => {
            format!("{test}: latency of the whole round trip, µs")
        }
        (Metric::Latency, _) => format!("{test}: one-way latency (half the round trip), µs"),
        (Metric::Bandwidth, _) => format!("{test}: payload Gb/s and million messages/s"),
    }
}

/// One test's header and rows: the transport, the size, then the figures.
fn grid(set: &CompareSet, test: crate::params::TestKind) -> (Vec<String>, Vec<Vec<String>>) {
    let runs: Vec<&CompareRun> = set.runs.iter().filter(|r| r.test == test).collect();
    let wire = set.wire.is_some();
    let mut header: Vec<&str> = vec!["transport", "size"];
    match test.metric {
        Metric::Latency => header.extend(["median", "p99", "p99.9", "max", "floor", "+stack"]),
        Metric::Bandwidth => {
            header.extend(["Gb/s", "Mpps", "floor", "of floor"]);
            if wire {
                header.extend(["wire", "of wire"]);
            }
        }
    }
    header.push("÷v1");
    let repeated = repetitions(set) > 0;
    if repeated {
        header.push(SPREAD_HEADER);
    }
    let mut sizes: Vec<u64> = runs
        .iter()
        .flat_map(|r| r.results.iter().map(|x| x.size))
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    let dash = || "-".to_string();
    let mut rows = Vec::new();
    for size in sizes {
        for run in &runs {
            let Some(r) = run.at(size) else { continue };
            let figures = r.figures();
            let floor = run.floor_at(size);
            let mut row = vec![run.label.clone(), fmt_size(size)];
            if let Some(l) = figures.latency() {
                row.push(num(l.median_us));
                row.extend([l.p99_us, l.p999_us].map(pct_cell));
                row.push(num(l.max_us));
                row.push(floor.and_then(|f| f.median_us).map_or_else(dash, num));
                row.push(floor.and_then(|f| f.above_us).map_or_else(dash, signed));
            }
            if let Some(b) = figures.bandwidth() {
                row.extend([num(b.gbps), format!("{:.3}", b.mpps)]);
                row.push(floor.and_then(|f| f.gbps).map_or_else(dash, num));
                row.push(floor.and_then(|f| f.share).map_or_else(dash, pct));
                if wire {
                    let c = run.ceiling_at(size);
                    row.push(c.map_or_else(dash, |c| num(c.gbps)));
                    row.push(c.map_or_else(dash, |c| pct(c.share)));
                }
            }
            row.push(
                set.ratio_to_v1(run, size)
                    .map_or_else(dash, |x| format!("{x:.2}")),
            );
            if repeated {
                let shown = figures.latency().map_or_else(
                    || figures.bandwidth().map_or(0.0, |b| b.gbps),
                    |l| l.median_us,
                );
                row.push(spread_cell(run, size, shown));
            }
            rows.push(row);
        }
    }
    (header.into_iter().map(str::to_owned).collect(), rows)
}

/// `header` and `rows` as aligned lines within [`WIDTH`]: names left, numbers right, the label cut
/// to what the other columns leave (at least [`LABEL_MAX`]).
fn lay_out(header: &[String], rows: &mut [Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows.iter() {
        for (i, (w, c)) in widths.iter_mut().zip(row).enumerate() {
            // The label's width is decided below, from what the other columns leave.
            if i != 0 {
                *w = (*w).max(c.chars().count());
            }
        }
    }
    let others: usize = widths.iter().sum::<usize>() - widths[0] + 2 * (widths.len() - 1);
    let label_max = WIDTH.saturating_sub(others).max(LABEL_MAX);
    for row in rows.iter_mut() {
        row[0] = cut(&row[0], label_max);
        widths[0] = widths[0].max(row[0].chars().count());
    }
    let mut out = String::new();
    let line = |out: &mut String, cells: &[String]| {
        let mut text = String::new();
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            let pad = " ".repeat(w - c.chars().count());
            // Names left-aligned, numbers right-aligned so that digits line up.
            if i == 0 {
                let _ = write!(text, "{c}{pad}  ");
            } else {
                let _ = write!(text, "{pad}{c}  ");
            }
        }
        let _ = writeln!(out, "{}", text.trim_end());
    };
    line(&mut out, header);
    let total: usize = widths.iter().sum::<usize>() + 2 * (widths.len() - 1);
    let _ = writeln!(out, "{}", "-".repeat(total.min(WIDTH)));
    for row in rows.iter() {
        line(&mut out, row);
    }
    out
}

/// The tables, a title and rows per test, then what their columns mean and what limits them.
pub(crate) fn side_by_side(set: &CompareSet) -> String {
    let mut out = String::new();
    for (i, test) in set.tests().into_iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let (header, mut rows) = grid(set, test);
        let _ = writeln!(out, "{}", title(test));
        out.push_str(&lay_out(&header, &mut rows));
    }
    out.push_str(&legend(set));
    out.push_str(&floor_notes(set));
    out.push_str(&ceilings(set));
    out.push_str(&links(set));
    if any_withheld(set) {
        out.push_str(&wrap(
            &format!(
                "n/a: withheld, fewer than {MIN_SAMPLES_BEYOND} samples beyond the percentile \
                 (p99 {}, p99.9 {}); run more iterations (-n) or longer (-D)",
                withheld_reason(99.0),
                withheld_reason(99.9)
            ),
            WIDTH,
        ));
    }
    let n = repetitions(set);
    if n > 0 {
        out.push_str(&wrap(
            &format!(
                "each row: the median of up to {n} repetitions (by bandwidth or median latency), \
                 with the floor measured beside it; {SPREAD_HEADER}: ± half the range (highest − \
                 lowest) of the repetitions' median latency or bandwidth, in % of the row's; \
                 compare.json holds every repetition's figures"
            ),
            WIDTH,
        ));
    }
    for s in &set.skipped {
        let what = if s.failed { "failed" } else { "skipped" };
        out.push_str(&wrap(&format!("{what} {}: {}", s.label, s.reason), WIDTH));
    }
    out
}

/// What the columns mean.
fn legend(set: &CompareSet) -> String {
    let mut text = String::from(
        "floor = roce_ref over the row's own host path, same link, cores and run: a ping-pong of \
         the row's packets (latency), a stream of its frames (bandwidth, as the payload they \
         carry); +stack = median - floor: what the stack adds; of floor = Gb/s / floor. \
         ÷v1 = the row's median or Gb/s / RoCE v1's on the same host path; '-' across paths, \
         where the paths' floors differ: compare +stack and of floor instead.",
    );
    if set.wire.is_some() {
        text.push_str(
            " wire = the protocol's goodput ceiling at the port below; of wire = Gb/s / wire.",
        );
    }
    format!("\n{}", wrap(&text, WIDTH))
}

/// Why rows have no floor: one line per transport, test and reason, with the sizes it concerns.
fn floor_notes(set: &CompareSet) -> String {
    let mut seen: Vec<(String, Vec<u64>)> = Vec::new();
    for run in &set.runs {
        for r in &run.results {
            let why = match run.floor_at(r.size) {
                Some(f) if f.median_us.is_some() || f.gbps.is_some() => continue,
                Some(f) => f.note.clone().unwrap_or_else(|| "no floor".into()),
                // A run read from its own file, or a loss sweep: nothing to say per row.
                None => continue,
            };
            let key = format!("{}, {}: {why}", run.label, run.test);
            match seen.iter_mut().find(|(k, _)| *k == key) {
                Some((_, sizes)) => sizes.push(r.size),
                None => seen.push((key, vec![r.size])),
            }
        }
    }
    let mut out = String::new();
    for (key, sizes) in seen {
        let at = match sizes.as_slice() {
            [one] => fmt_size(*one),
            [first, .., last] => format!("{} .. {}", fmt_size(*first), fmt_size(*last)),
            [] => String::new(),
        };
        let (who, why) = key.split_once(": ").unwrap_or((&key, ""));
        out.push_str(&wrap(&format!("no floor for {who} at {at}: {why}"), WIDTH));
    }
    out
}

/// The wire's ceilings per protocol at the comparison's port, per bandwidth test and size, so that
/// the table says what the protocols would differ by there; or how to get them.
fn ceilings(set: &CompareSet) -> String {
    let Some(port) = &set.wire else {
        let bw = set.runs.iter().any(|r| r.test.metric == Metric::Bandwidth);
        return if bw {
            wrap(
                "wire: give --link-speed (e.g. 100G) to see each protocol's goodput ceiling on a \
                 port of that speed, and each result as a share of it",
                WIDTH,
            )
        } else {
            String::new()
        };
    };
    let mut out = wrap(
        &format!(
            "wire ceilings at {} Gb/s, MTU {} ({}): headers and ICRC per packet, packets per \
             message, Ethernet's framing, TCP/IP's headers; ACKs ride the other direction",
            port.speed_gbps, port.mtu, port.source
        ),
        WIDTH,
    );
    for test in set.tests() {
        let mut lines: Vec<(u64, Vec<String>)> = Vec::new();
        for run in set.runs.iter().filter(|r| r.test == test) {
            for c in &run.ceilings {
                let item = format!("{} {}", c.protocol, num(c.gbps));
                match lines.iter_mut().find(|(s, _)| *s == c.size) {
                    Some((_, items)) if !items.contains(&item) => items.push(item),
                    Some(_) => {}
                    None => lines.push((c.size, vec![item])),
                }
            }
        }
        lines.sort_by_key(|(s, _)| *s);
        for (size, items) in lines {
            let text = format!("{test} {}: {} Gb/s", fmt_size(size), items.join(", "));
            for line in wrap(&text, WIDTH - 2).lines() {
                let _ = writeln!(out, "  {line}");
            }
        }
    }
    out
}

/// Which link the rows crossed: one line when every run crossed the same one, else a line per link
/// naming its runs; empty when no run records its link (a comparison of files that do not say).
fn links(set: &CompareSet) -> String {
    let links = set.links();
    let mut out = String::new();
    match links.as_slice() {
        [] => {}
        [(Some(link), _)] => out.push_str(&wrap(&format!("link: every row crossed {link}"), WIDTH)),
        _ => {
            out.push_str(
                "links differ, so rows that crossed different links are not like for like:\n",
            );
            for (link, labels) in &links {
                let labels = labels.join(", ");
                out.push_str(&wrap(
                    &match link {
                        Some(link) => format!("{labels} crossed {link}"),
                        None => format!("{labels}: link not recorded"),
                    },
                    WIDTH,
                ));
            }
        }
    }
    out
}

/// Breaks `text` at spaces into lines of at most `width` columns, continuation lines indented by
/// two; a word longer than a line (a path) is cut.
pub(crate) fn wrap(text: &str, width: usize) -> String {
    const INDENT: &str = "  ";
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    let room = |lines: &Vec<String>| width - if lines.is_empty() { 0 } else { INDENT.len() };
    for word in text.split_whitespace() {
        let mut word: Vec<char> = word.chars().collect();
        loop {
            let used = line.chars().count();
            let sep = usize::from(used > 0);
            if used + sep + word.len() <= room(&lines) {
                if sep == 1 {
                    line.push(' ');
                }
                line.extend(word.iter());
                break;
            }
            if used == 0 {
                let cut = room(&lines);
                line.extend(word.drain(..cut));
            }
            lines.push(std::mem::take(&mut line));
        }
    }
    if !line.is_empty() {
        lines.push(line);
    }
    let mut out = String::new();
    for (i, l) in lines.iter().enumerate() {
        if i > 0 {
            out.push_str(INDENT);
        }
        out.push_str(l);
        out.push('\n');
    }
    out
}

/// A log-bucket histogram per latency run, each under a title line: at its smallest size only when it
/// swept several (the other sizes' histograms are in the .hlog files), so a sweep stays readable.
pub(crate) fn histograms(set: &CompareSet) -> String {
    let mut out = String::new();
    for run in &set.runs {
        let sizes = run.results.len();
        if let Some(r) = run.results.first()
            && let Measured::Latency { histogram, stats } = &r.measured
        {
            let _ = writeln!(
                out,
                "\n{} {}, {}: {} samples, median {} µs, max {} µs",
                run.test,
                cut(&run.label, TITLE_LABEL_MAX),
                fmt_size(r.size),
                stats.samples,
                num(stats.median_us),
                num(stats.max_us)
            );
            out.push_str(&histogram_text::render(histogram, WIDTH));
            if sizes > 1 {
                let _ = writeln!(
                    out,
                    "  ({} more sizes up to {}: see the .hlog files)",
                    sizes - 1,
                    fmt_size(run.results[sizes - 1].size)
                );
            }
        }
    }
    out
}

/// How the comparison ran (what chose its cores and run options), then how each transport ran
/// (device, addresses, GID, MTU, core and why), from the notes of its first run; empty when there
/// are no notes.
pub(crate) fn setups(set: &CompareSet) -> String {
    let mut out = String::new();
    if !set.notes.is_empty() {
        out.push_str("\nHow this comparison ran:\n");
        for n in &set.notes {
            out.push_str(&wrap(n, WIDTH));
        }
    }
    let mut seen: Vec<&str> = Vec::new();
    for run in &set.runs {
        if run.notes.is_empty() || seen.contains(&run.label.as_str()) {
            continue;
        }
        if seen.is_empty() {
            out.push_str("\nHow each transport ran (client side):\n");
        }
        seen.push(&run.label);
        out.push_str(&wrap(
            &format!("{}: {}", run.label, run.notes.join("; ")),
            WIDTH,
        ));
    }
    out
}

/// The whole terminal report: what it measures, the tables, how it ran, then the histograms.
pub(crate) fn render(set: &CompareSet) -> String {
    let mut out = what_it_measures(set);
    out.push_str(&side_by_side(set));
    out.push_str(&setups(set));
    out.push_str(&histograms(set));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::testdata::set;

    #[test]
    fn a_cut_label_keeps_its_rate() {
        assert_eq!(cut("RoCE v2 gbn @ 0.01%", 22), "RoCE v2 gbn @ 0.01%");
        assert_eq!(cut("RoCE v2 gbn-rxe @ 0.01%", 22), "RoCE v2 gbn-r… @ 0.01%");
        assert_eq!(cut("RoCE v1 (soft, veth pair)", 20), "RoCE v1 (soft, veth…");
    }

    /// The fixture as `--local` makes it: v1 and v2 over AF_PACKET, TCP over its socket, each with
    /// a floor at every size.
    fn local_set() -> CompareSet {
        use crate::results::{Floor, path_label};
        let mut set = set();
        for run in &mut set.runs {
            let path = match run.roce {
                Some(_) => HostPath::AfPacket,
                None => HostPath::TcpSocket,
            };
            run.path = Some(path);
            run.label = path_label(run.transport, run.roce, path);
            run.floors = run
                .results
                .iter()
                .map(|r| {
                    let f = r.figures();
                    match (f.latency(), f.bandwidth()) {
                        (Some(l), _) => Floor::latency(r.size, "ref".into(), 1.5, l.median_us),
                        (_, Some(b)) => Floor::bandwidth(r.size, "ref".into(), 60.0, b.gbps),
                        _ => unreachable!(),
                    }
                })
                .collect();
        }
        set
    }

    #[test]
    fn a_title_and_a_row_per_transport_and_size_for_each_test_within_100_columns() {
        let set = local_set();
        let text = side_by_side(&set);
        for line in text.lines() {
            assert!(
                line.chars().count() <= WIDTH,
                "{} > {WIDTH}: {line}",
                line.chars().count()
            );
        }
        assert!(
            text.starts_with("write_lat: one-way latency (half the round trip), µs\ntransport "),
            "{text}"
        );
        assert!(
            text.contains("\nwrite_bw: payload Gb/s and million messages/s\ntransport "),
            "{text}"
        );
        let rows: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("RoCE ") || l.starts_with("TCP "))
            .collect();
        // 3 transports x (1 latency size + 3 bandwidth sizes).
        assert_eq!(rows.len(), 12, "{text}");
        let v2_bw = rows
            .iter()
            .find(|l| l.starts_with("RoCE v2 (soft, AF_PACKET)") && l.contains("64 KiB"))
            .unwrap();
        // 45 Gb/s, 75% of its floor's 60, and 0.90 of v1's 50 on the same path.
        assert!(v2_bw.contains("45.00"), "{v2_bw}");
        assert!(v2_bw.contains(" 75% "), "{v2_bw}");
        assert!(v2_bw.ends_with("0.90"), "{v2_bw}");
        let v1_lat = rows.iter().find(|l| l.starts_with("RoCE v1")).unwrap();
        assert!(v1_lat.ends_with("1.00"), "{v1_lat}");
        assert!(
            v1_lat.contains(" 1.500  +"),
            "the floor and what lies above it: {v1_lat}"
        );
        // TCP took another path: no ratio to v1.
        let tcp_lat = rows.iter().find(|l| l.starts_with("TCP ")).unwrap();
        assert!(tcp_lat.ends_with(" -"), "{tcp_lat}");
        let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(words.contains("÷v1 = the row's median or Gb/s / RoCE v1's on the same host path"));
        assert!(!text.contains("vs TCP"), "{text}");
    }

    #[test]
    fn a_row_without_a_floor_says_why_once_for_its_sizes() {
        let mut set = local_set();
        for run in &mut set.runs[3..4] {
            run.floors = run
                .results
                .iter()
                .map(|r| crate::results::Floor::missing(r.size, "roce_ref failed"))
                .collect();
        }
        let text = side_by_side(&set);
        assert!(
            text.contains(
                "no floor for RoCE v1 (soft, AF_PACKET), write_bw at 4 KiB .. 64 KiB: roce_ref failed\n"
            ),
            "{text}"
        );
        let v1_bw = text
            .lines()
            .find(|l| l.starts_with("RoCE v1") && l.contains("16 KiB"))
            .unwrap();
        assert!(v1_bw.contains(" -  "), "{v1_bw}");
    }

    #[test]
    fn the_wire_columns_show_each_protocols_ceiling_or_say_how_to_get_them() {
        let mut set = local_set();
        let text = side_by_side(&set);
        assert!(!text.contains("of wire"), "{text}");
        assert!(
            text.contains("wire: give --link-speed (e.g. 100G)"),
            "{text}"
        );
        for run in &mut set.runs {
            run.ceilings = run
                .results
                .iter()
                .filter(|_| run.test.metric == Metric::Bandwidth)
                .map(|r| crate::results::WireCeiling {
                    size: r.size,
                    protocol: if run.roce.is_some() {
                        "RoCE vX"
                    } else {
                        "TCP/IPv4"
                    }
                    .into(),
                    payload_mtu: 4096,
                    packets: 1.0,
                    wire_bytes: 1.0,
                    gbps: 98.0,
                    share: r.figures().bandwidth().unwrap().gbps / 98.0,
                })
                .collect();
        }
        set.wire = Some(crate::results::WirePort {
            speed_gbps: 100.0,
            mtu: 9000,
            source: "--link-speed 100 Gb/s".into(),
        });
        let text = side_by_side(&set);
        let header = text.lines().find(|l| l.contains("of floor")).unwrap();
        assert!(header.contains("wire  of wire"), "{header}");
        assert!(
            text.contains("wire ceilings at 100 Gb/s, MTU 9000 (--link-speed 100 Gb/s)"),
            "{text}"
        );
        assert!(
            text.contains("  write_bw 64 KiB: RoCE vX 98.00, TCP/IPv4 98.00 Gb/s\n"),
            "{text}"
        );
        for line in text.lines() {
            assert!(line.chars().count() <= WIDTH, "{line}");
        }
    }

    #[test]
    fn the_header_says_what_a_soft_comparison_tells_and_what_to_run_on_nics() {
        assert_eq!(
            what_it_measures(&set()),
            "",
            "no paths: files that do not say"
        );
        let text = what_it_measures(&local_set());
        let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            words.contains(
                "RoCE v1 and v2 over AF_PACKET take one host path: their rows differ by protocol"
            ),
            "{text}"
        );
        assert!(words.contains("`roce_compare HOST -d mlx5_0`"), "{text}");
        assert!(render(&local_set()).starts_with("What this measures: "));
        // Two hosts, soft's defaults: v2 over its UDP socket, v1 over AF_PACKET.
        let mut two = local_set();
        for run in &mut two.runs {
            if run.roce == Some(RoceVersion::V2) {
                run.path = Some(HostPath::UdpGso);
            }
        }
        let words = what_it_measures(&two)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        assert!(
            words.contains("No two RoCE versions share a host path here"),
            "{words}"
        );
    }

    #[test]
    fn long_labels_are_cut_and_skips_are_explained() {
        let mut set = set();
        set.runs[0].label = "RoCE v1 (soft, veth pair in a namespace, with a long name)".into();
        set.skipped.push(crate::results::Skipped {
            label: "RoCE v1 (verbs)".into(),
            reason: "no RDMA device".into(),
            failed: false,
        });
        let text = render(&set);
        assert!(text.contains("…"), "{text}");
        assert!(text.contains("skipped RoCE v1 (verbs): no RDMA device"));
        for line in text.lines() {
            assert!(line.chars().count() <= WIDTH, "{line}");
        }
    }

    #[test]
    fn each_transport_says_once_how_it_ran() {
        let mut set = set();
        assert_eq!(setups(&set), "");
        set.runs[1].notes = vec!["udp socket 127.0.0.2:4791".into(), "core 0".into()];
        set.runs[4].notes = vec!["not shown: the label was seen".into()];
        let text = setups(&set);
        assert_eq!(
            text,
            "\nHow each transport ran (client side):\nRoCE v2 (soft): udp socket 127.0.0.2:4791; core 0\n"
        );
        assert!(render(&set).contains(&text));
        set.notes = vec!["cores: server: core 1 chosen with --server-cpu".into()];
        assert!(
            setups(&set).starts_with(
                "\nHow this comparison ran:\ncores: server: core 1 chosen with --server-cpu\n\nHow each transport ran"
            ),
            "{}",
            setups(&set)
        );
    }

    #[test]
    fn the_table_says_which_link_each_row_crossed() {
        let mut set = set();
        assert!(
            !side_by_side(&set).contains("\nlink"),
            "no link recorded, no line"
        );
        let veth = "veth (netns rpc7a<->rpc7b, MTU 9000)";
        for run in &mut set.runs {
            run.link = Some(veth.into());
        }
        let text = side_by_side(&set);
        assert!(
            text.contains(&format!("\nlink: every row crossed {veth}\n")),
            "{text}"
        );
        let reps = vec![set.runs[4].clone(), set.runs[4].clone()];
        set.runs[4] = crate::results::CompareRun::from_repetitions(reps).unwrap();
        assert!(
            side_by_side(&set).contains("each row: the median of up to 2 repetitions"),
            "{}",
            side_by_side(&set)
        );
        set.runs[1].link = Some("lo".into());
        set.runs[4].link = Some("lo".into());
        set.runs[2].link = None;
        let text = side_by_side(&set);
        assert!(
            text.contains(&format!(
                "links differ, so rows that crossed different links are not like for like:\n\
                 RoCE v1 (soft), TCP crossed {veth}\nRoCE v2 (soft) crossed lo\nTCP: link not recorded\n"
            )),
            "{text}"
        );
    }

    #[test]
    fn notes_wrap_within_100_columns() {
        let text = format!(
            "failed TCP, write_bw: {} /{}",
            "word ".repeat(40),
            "p".repeat(150)
        );
        let out = wrap(&text, WIDTH);
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines.len() >= 4, "{out}");
        assert!(lines.iter().all(|l| l.chars().count() <= WIDTH), "{out}");
        assert!(lines[1..].iter().all(|l| l.starts_with("  ")), "{out}");
        let rejoined: String = out.split_whitespace().collect();
        assert_eq!(rejoined, text.split_whitespace().collect::<String>());
        assert_eq!(wrap("short", WIDTH), "short\n");
    }

    #[test]
    fn a_sweep_shows_the_histogram_of_its_smallest_size() {
        let mut set = set();
        set.runs.truncate(1);
        let more = crate::results::testdata::lat(4096, 9000, 500);
        set.runs[0].results.push(more);
        let text = histograms(&set);
        let titles: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("write_lat"))
            .collect();
        assert_eq!(titles.len(), 1, "{text}");
        assert!(titles[0].contains(", 2 B:"), "{text}");
        assert!(
            text.contains("(1 more sizes up to 4 KiB: see the .hlog files)"),
            "{text}"
        );
    }

    #[test]
    fn one_histogram_per_latency_run() {
        let text = histograms(&set());
        let titles: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("write_lat"))
            .collect();
        assert_eq!(titles.len(), 3, "{text}");
        assert!(
            titles[2].contains("TCP, 2 B: 10000 samples"),
            "{}",
            titles[2]
        );
    }

    /// The first line starting with `label` in the table under the title of `test`.
    fn row_in<'a>(text: &'a str, test: &str, label: &str) -> &'a str {
        text.lines()
            .skip_while(|l| !l.starts_with(&format!("{test}:")))
            .find(|l| l.starts_with(label))
            .unwrap_or_else(|| panic!("no {label} row under {test}: {text}"))
    }

    #[test]
    fn withheld_percentiles_are_na_and_the_table_says_why() {
        let mut set = set();
        assert!(
            !side_by_side(&set).contains("n/a"),
            "10,000 samples hold p99.9"
        );
        set.runs[0].results = vec![crate::results::testdata::lat(2, 1800, 1000)];
        let text = side_by_side(&set);
        let v1 = row_in(&text, "write_lat", "RoCE v1");
        let cells: Vec<&str> = v1
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        // transport, size, median, p99, p99.9, max, floor, +stack, ÷v1.
        assert_eq!(cells.len(), 9, "{v1}");
        assert!(cells[3].parse::<f64>().is_ok(), "p99 holds at 1,000: {v1}");
        assert_eq!(cells[4], "n/a", "{v1}");
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            flat.contains(
                "n/a: withheld, fewer than 10 samples beyond the percentile (p99 needs 1,000 \
                 samples, p99.9 needs 10,000 samples)"
            ),
            "{text}"
        );
    }

    #[test]
    fn repeated_rows_show_the_spread_of_their_repetitions() {
        let mut set = set();
        assert!(!side_by_side(&set).contains(SPREAD_HEADER));
        let run = &set.runs[4];
        let reps = [30.0, 10.0, 20.0]
            .map(|g| crate::results::CompareRun {
                results: vec![crate::results::testdata::bw(65536, g)],
                ..run.clone()
            })
            .to_vec();
        set.runs[4] = crate::results::CompareRun::from_repetitions(reps).unwrap();
        let text = side_by_side(&set);
        let header = row_in(&text, "write_bw", "transport");
        assert!(header.ends_with(SPREAD_HEADER), "{header}");
        let v2 = row_in(&text, "write_bw", "RoCE v2");
        // 10 to 30 Gb/s around the shown 20: ± 10 / 20 = 50 %.
        assert!(v2.ends_with(" ±50%"), "{v2}");
        assert!(v2.contains(" 20.00 "), "the median repetition: {v2}");
        // Rows not repeated: a dash.
        let tcp = row_in(&text, "write_bw", "TCP");
        assert!(tcp.ends_with(" -"), "{tcp}");
        assert!(
            text.split_whitespace().collect::<Vec<_>>().join(" ").contains(
                "spread: ± half the range (highest − lowest) of the repetitions' median latency \
                 or bandwidth, in % of the row's"
            ),
            "{text}"
        );
        for line in text.lines() {
            assert!(line.chars().count() <= WIDTH, "{line}");
        }
    }
}
