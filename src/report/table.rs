//! A comparison in the terminal: a side-by-side table, then a histogram per latency run.
//!
//! Everything fits in 100 columns.

use super::{fmt_size, histogram_text};
use crate::results::{CompareRun, CompareSet, Measured};
use crate::stats::{MIN_SAMPLES_BEYOND, withheld_reason};
use std::fmt::Write;

/// Widest output line.
pub(crate) const WIDTH: usize = 100;
/// Longest transport label always shown in full (more when the other columns leave room); longer
/// ones are cut with `…`.
const LABEL_MAX: usize = 20;

const HEADERS: [&str; 10] = [
    "test",
    "transport",
    "size",
    "median µs",
    "p99 µs",
    "p99.9 µs",
    "max µs",
    "Gb/s",
    "Mpps",
    "vs TCP",
];

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

/// The side-by-side table: one row per (test, transport, size), `-` where a figure does not apply.
pub(crate) fn side_by_side(set: &CompareSet) -> String {
    let repeated = set
        .runs
        .iter()
        .map(|r| r.repetitions_run())
        .max()
        .unwrap_or(0);
    let mut headers = HEADERS.to_vec();
    if repeated > 0 {
        headers.push(SPREAD_HEADER);
    }
    let mut withheld = false;
    let mut rows: Vec<Vec<String>> = Vec::new();
    for test in set.tests() {
        let runs: Vec<_> = set.runs.iter().filter(|r| r.test == test).collect();
        let mut sizes: Vec<u64> = runs
            .iter()
            .flat_map(|r| r.results.iter().map(|x| x.size))
            .collect();
        sizes.sort_unstable();
        sizes.dedup();
        for size in sizes {
            for run in &runs {
                let Some(r) = run.at(size) else { continue };
                let dash = || "-".to_string();
                let figures = r.figures();
                let (lat, bw) = (figures.latency(), figures.bandwidth());
                withheld |= lat.is_some_and(|l| l.p99_us.is_none() || l.p999_us.is_none());
                let mut row = vec![
                    test.name().to_owned(),
                    run.label.clone(),
                    fmt_size(size),
                    lat.map_or_else(dash, |l| num(l.median_us)),
                    lat.map_or_else(dash, |l| pct_cell(l.p99_us)),
                    lat.map_or_else(dash, |l| pct_cell(l.p999_us)),
                    lat.map_or_else(dash, |l| num(l.max_us)),
                    bw.map_or_else(dash, |b| num(b.gbps)),
                    bw.map_or_else(dash, |b| format!("{:.3}", b.mpps)),
                    set.ratio_to_tcp(run, size)
                        .map_or_else(dash, |x| format!("{x:.2}x")),
                ];
                if repeated > 0 {
                    let shown = lat.map_or_else(|| bw.map_or(0.0, |b| b.gbps), |l| l.median_us);
                    row.push(spread_cell(run, size, shown));
                }
                rows.push(row);
            }
        }
    }
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (i, (w, c)) in widths.iter_mut().zip(row).enumerate() {
            // The label's width is decided below, from what the other columns leave.
            if i != 1 {
                *w = (*w).max(c.chars().count());
            }
        }
    }
    // Labels get what the other columns leave of the line, and at least LABEL_MAX.
    let others: usize = widths.iter().sum::<usize>() - widths[1] + 2 * (widths.len() - 1);
    let label_max = WIDTH.saturating_sub(others).max(LABEL_MAX);
    for row in &mut rows {
        row[1] = cut(&row[1], label_max);
        widths[1] = widths[1].max(row[1].chars().count());
    }
    let mut out = String::new();
    let line = |out: &mut String, cells: &[&str]| {
        let mut text = String::new();
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            let pad = " ".repeat(w - c.chars().count());
            // Names left-aligned, numbers right-aligned so that digits line up.
            if i < 2 {
                let _ = write!(text, "{c}{pad}  ");
            } else {
                let _ = write!(text, "{pad}{c}  ");
            }
        }
        let _ = writeln!(out, "{}", text.trim_end());
    };
    line(&mut out, &headers);
    let total: usize = widths.iter().sum::<usize>() + 2 * (widths.len() - 1);
    let _ = writeln!(out, "{}", "-".repeat(total.min(WIDTH)));
    let mut last_test = None;
    for row in &rows {
        if last_test.is_some() && last_test != Some(&row[0]) {
            out.push('\n');
        }
        last_test = Some(&row[0]);
        let cells: Vec<&str> = row.iter().map(String::as_str).collect();
        line(&mut out, &cells);
    }
    out.push_str(
        "latency one-way (half the round trip; READ: the whole); Gb/s = 10^9 bit/s of payload;\n\
         vs TCP = times better than TCP (bandwidth / TCP's, TCP's median / median)\n",
    );
    out.push_str(&links(set));
    if withheld {
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
    if repeated > 0 {
        out.push_str(&wrap(
            &format!(
                "each row: the median of up to {repeated} repetitions (by bandwidth or median latency); \
                 {SPREAD_HEADER}: ± half the range (highest − lowest) of the repetitions' median \
                 latency or bandwidth, in % of the row's; compare.json holds every repetition's \
                 figures"
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
fn wrap(text: &str, width: usize) -> String {
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
                cut(&run.label, LABEL_MAX),
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

/// How each transport ran (device, addresses, GID, MTU, core and why), from the notes of its first
/// run; empty when no run has notes.
pub(crate) fn setups(set: &CompareSet) -> String {
    let mut out = String::new();
    let mut seen: Vec<&str> = Vec::new();
    for run in &set.runs {
        if run.notes.is_empty() || seen.contains(&run.label.as_str()) {
            continue;
        }
        seen.push(&run.label);
        if out.is_empty() {
            out.push_str("\nHow each transport ran (client side):\n");
        }
        out.push_str(&wrap(
            &format!("{}: {}", run.label, run.notes.join("; ")),
            WIDTH,
        ));
    }
    out
}

/// The whole terminal report: the table, how each transport ran, then the histograms.
pub(crate) fn render(set: &CompareSet) -> String {
    let mut out = side_by_side(set);
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

    #[test]
    fn table_has_a_row_per_transport_and_size_within_100_columns() {
        let set = set();
        let text = side_by_side(&set);
        for line in text.lines() {
            assert!(
                line.chars().count() <= WIDTH,
                "{} > {WIDTH}: {line}",
                line.chars().count()
            );
        }
        let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("write_")).collect();
        // 3 transports x (1 latency size + 3 bandwidth sizes).
        assert_eq!(rows.len(), 12, "{text}");
        let tcp_lat = rows
            .iter()
            .find(|l| l.starts_with("write_lat") && l.contains("TCP"))
            .unwrap();
        assert!(tcp_lat.ends_with("1.00x"), "{tcp_lat}");
        let v2_bw = rows
            .iter()
            .find(|l| l.contains("RoCE v2 (soft)") && l.contains("64 KiB"))
            .unwrap();
        assert!(v2_bw.ends_with("1.80x"), "{v2_bw}");
        assert!(v2_bw.contains("45.00"), "{v2_bw}");
        let header = text.lines().next().unwrap();
        for h in HEADERS {
            assert!(header.contains(h), "{header}");
        }
    }

    #[test]
    fn long_labels_are_cut_and_skips_are_explained() {
        let mut set = set();
        set.runs[0].label = "RoCE v1 (soft, veth pair in a namespace)".into();
        set.skipped.push(crate::results::Skipped {
            label: "RoCE v1 (verbs)".into(),
            reason: "no RDMA device".into(),
            failed: false,
        });
        let text = render(&set);
        assert!(text.contains("RoCE v1 (soft, veth…"), "{text}");
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
    }

    #[test]
    fn the_table_says_which_link_each_row_crossed() {
        let mut set = set();
        assert!(
            !side_by_side(&set).contains("link"),
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
    fn withheld_percentiles_are_na_and_the_table_says_why() {
        let mut set = set();
        assert!(
            !side_by_side(&set).contains("n/a"),
            "10,000 samples hold p99.9"
        );
        set.runs[0].results = vec![crate::results::testdata::lat(2, 1800, 1000)];
        let text = side_by_side(&set);
        let v1 = text
            .lines()
            .find(|l| l.starts_with("write_lat") && l.contains("RoCE v1"))
            .unwrap();
        let cells: Vec<&str> = v1
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        // test, transport, size, median, p99, p99.9, max, Gb/s, Mpps, vs TCP.
        assert_eq!(cells.len(), 10, "{v1}");
        assert!(cells[4].parse::<f64>().is_ok(), "p99 holds at 1,000: {v1}");
        assert_eq!(cells[5], "n/a", "{v1}");
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
        let header = text.lines().next().unwrap();
        assert!(header.ends_with(SPREAD_HEADER), "{header}");
        let v2 = text
            .lines()
            .find(|l| l.starts_with("write_bw") && l.contains("RoCE v2"))
            .unwrap();
        // 10 to 30 Gb/s around the shown 20: ± 10 / 20 = 50 %.
        assert!(v2.ends_with(" ±50%"), "{v2}");
        assert!(v2.contains(" 20.00 "), "the median repetition: {v2}");
        // Rows not repeated: a dash.
        let tcp = text
            .lines()
            .find(|l| l.starts_with("write_bw") && l.contains("TCP"))
            .unwrap();
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
}
