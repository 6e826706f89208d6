//! A congestion study on the console: one table of what each discipline delivered and cost, one of
//! its victim's latency against the idle bottleneck, both within 100 columns; and its rate plots.

use super::svg::{COLORS, draw_line, figure, house_mesh, styled};
use super::table::WIDTH;
use crate::results::congestion::figures::interval_rates;
use crate::results::congestion::{CongestionDoc, DisciplineRun, Victim};
use plotters::prelude::*;
use std::fmt::Write;

/// `1,234`, `-` for not measured.
fn count(v: Option<u64>) -> String {
    v.map_or_else(|| "-".into(), crate::stats::thousands)
}

/// `v` with `d` decimals, `-` for none.
fn fixed(v: Option<f64>, d: usize) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.d$}"))
}

/// `12.3 MB` of bytes (10^6), `-` for none.
fn megabytes(v: Option<u64>) -> String {
    v.map_or_else(|| "-".into(), |b| format!("{:.1}", b as f64 / 1e6))
}

/// CNPs as `sent/handled`.
fn cnps(run: &DisciplineRun) -> String {
    match (run.totals.cnps_sent, run.totals.cnps_handled) {
        (None, None) => "-".into(),
        (s, h) => format!("{}/{}", count(s), count(h)),
    }
}

/// Pause frames (switch sent / senders counted) and the switch's paused time.
fn pauses(run: &DisciplineRun) -> String {
    let t = &run.totals;
    match (t.pause_frames_sent, t.pause_frames_received) {
        (None, None) => "-".into(),
        (s, r) => format!(
            "{}/{} {}ms",
            count(s),
            count(r),
            fixed(t.paused_ms_switch.or(t.paused_ms_senders), 0)
        ),
    }
}

/// [`lay_out`] within [`WIDTH`] columns: when the rows are wider, the columns are split into groups
/// that fit, each a table of its own that repeats the first (the discipline), so a study's large
/// counts (drops, CNPs, pause frames in the millions) never push a line past the terminal.
fn lay_out_within(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let width = |c: usize| {
        rows.iter()
            .filter_map(|r| r.get(c))
            .map(|s| s.chars().count())
            .max()
            .unwrap_or(0)
    };
    let first = width(0);
    let mut groups: Vec<Vec<usize>> = vec![vec![]];
    let mut used = first;
    for c in 1..cols {
        let w = 2 + width(c);
        let group = groups.last_mut().expect("one group at least");
        if used + w > WIDTH && !group.is_empty() {
            groups.push(vec![c]);
            used = first + w;
        } else {
            group.push(c);
            used += w;
        }
    }
    let tables: Vec<String> = groups
        .iter()
        .map(|g| {
            let part: Vec<Vec<String>> = rows
                .iter()
                .map(|r| {
                    std::iter::once(0)
                        .chain(g.iter().copied())
                        .filter_map(|c| r.get(c).cloned())
                        .collect()
                })
                .collect();
            lay_out(&part)
        })
        .collect();
    tables.join("\n")
}

/// Right-aligned columns after a left-aligned first one, each as wide as its widest cell.
fn lay_out(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (c, cell) in r.iter().enumerate() {
            if c == 0 {
                let _ = write!(line, "{cell:<w$}", w = widths[0]);
            } else {
                let _ = write!(line, "  {cell:>w$}", w = widths[c]);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The discipline table: goodput and its share of the bottleneck, fairness, losses and repairs, the
/// congestion signals, and time to converge.
fn main_table(doc: &CongestionDoc) -> String {
    let mut rows = vec![
        [
            "discipline",
            "Gb/s",
            "of rate",
            "Jain",
            "steady",
            "drops",
            "retx MB",
            "marks",
            "CNPs s/h",
            "pauses s/r time",
            "converge",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for run in &doc.runs {
        let t = &run.totals;
        if !run.outcome.ok {
            rows.push(vec![
                run.discipline.name().into(),
                "failed".into(),
                String::new(),
            ]);
            continue;
        }
        rows.push(vec![
            run.discipline.name().into(),
            format!("{:.2}", t.goodput_gbps),
            t.goodput_fraction
                .map_or_else(|| "-".into(), |f| format!("{:.0}%", f * 100.0)),
            fixed(t.jain, 3),
            fixed(t.jain_steady, 3),
            count(t.drops),
            megabytes(t.retransmitted_bytes),
            count(t.marks),
            cnps(run),
            pauses(run),
            run.convergence
                .time_s
                .map_or_else(|| "never".into(), |s| format!("{s:.2} s")),
        ]);
    }
    lay_out_within(&rows)
}

/// A victim's p50, p99, p99.9 in µs, `n/a` where withheld.
fn victim_cells(v: Option<&Victim>) -> [String; 3] {
    let cell = |x: Option<f64>| x.map_or_else(|| "n/a".into(), |x| format!("{x:.1}"));
    match v {
        Some(v) => [cell(v.p50_us), cell(v.p99_us), cell(v.p99_9_us)],
        None => ["-".into(), "-".into(), "-".into()],
    }
}

/// The victim's latency per discipline, and on the idle bottleneck.
fn victim_table(doc: &CongestionDoc) -> Option<String> {
    let size = doc.setup.victim_size_bytes?;
    let mut rows = vec![
        vec![
            format!("victim write_lat {} (µs)", super::fmt_size(size)),
            "p50".into(),
            "p99".into(),
            "p99.9".into(),
            "p99 ÷ idle".into(),
        ],
        {
            let mut r = vec!["idle bottleneck".to_string()];
            r.extend(victim_cells(doc.idle_victim.as_ref()));
            let held = doc.idle_victim.as_ref().and_then(|v| v.p99_us).is_some();
            r.push(if held { "1.00" } else { "-" }.into());
            r
        },
    ];
    for run in &doc.runs {
        let mut r = vec![run.discipline.name().to_string()];
        r.extend(victim_cells(run.victim.as_ref()));
        r.push(fixed(doc.victim_p99_vs_idle(run), 2));
        rows.push(r);
    }
    Some(lay_out_within(&rows))
}

/// The whole report: what ran, the tables, the reasons behind nulls, and the notes.
pub(crate) fn render(doc: &CongestionDoc) -> String {
    let s = &doc.setup;
    // A threshold in KiB to one decimal (40000 B: 39.1 KiB), a power of two as fmt_size says it.
    let size = |b: u64| {
        if b.is_power_of_two() || b < 1024 {
            super::fmt_size(b)
        } else {
            format!("{:.1} KiB", b as f64 / 1024.0)
        }
    };
    let head = format!(
        "congestion: {} flows of write_bw {} into a {} Gb/s bottleneck, {} s per discipline; \
         buffer {}, ECN Kmin {} Kmax {} Pmax {}, PFC priority {} Xoff {} Xon {}",
        s.flows,
        size(s.size_bytes),
        s.bottleneck_gbps,
        s.duration_s,
        size(s.thresholds.buffer_bytes),
        size(s.thresholds.kmin_bytes),
        size(s.thresholds.kmax_bytes),
        s.thresholds.pmax,
        s.pfc_prio,
        size(s.thresholds.xoff_bytes),
        size(s.thresholds.xon_bytes),
    );
    let mut out = super::table::wrap(&head, WIDTH);
    out.push('\n');
    out.push_str(&main_table(doc));
    if let Some(v) = victim_table(doc) {
        out.push('\n');
        out.push_str(&v);
    }
    let mut said = Vec::new();
    for run in &doc.runs {
        let d = run.discipline.name();
        if let Some(e) = &run.outcome.error {
            said.push(format!("{d}: {e}"));
        }
        if let Some(r) = &run.convergence.reason {
            said.push(format!("{d}: converge: {r}"));
        }
        if run.totals.jain_steady.is_some() && run.totals.steady_basis != "converged" {
            said.push(format!(
                "{d}: steady Jain over the {}",
                run.totals.steady_basis
            ));
        }
    }
    said.extend(doc.notes.iter().cloned());
    if !said.is_empty() {
        out.push('\n');
        for line in said {
            out.push_str(&super::table::wrap(&line, WIDTH));
        }
    }
    out
}

/// Each flow's goodput over time (one curve per flow, its series' intervals), and the fair share
/// (the bottleneck ÷ the flows) as a line. Returns the SVG text.
pub(crate) fn rate_svg(doc: &CongestionDoc, run: &DisciplineRun) -> Result<String, String> {
    let series = run
        .series
        .as_ref()
        .filter(|s| !s.t_ms.is_empty())
        .ok_or_else(|| format!("{}: no per-flow series to plot", run.discipline))?;
    let curves: Vec<Vec<(i32, f64)>> = series
        .bytes
        .iter()
        .map(|flow| {
            series
                .t_ms
                .iter()
                .zip(interval_rates(&series.t_ms, flow))
                .map(|(&t, g)| (t.round() as i32, g))
                .collect()
        })
        .collect();
    let fair = doc.setup.bottleneck_gbps / f64::from(doc.setup.flows.max(1));
    let y_max = curves
        .iter()
        .flatten()
        .map(|p| p.1)
        .fold(fair, f64::max)
        .max(1e-3)
        * 1.15;
    let x_max = series.t_ms.last().copied().unwrap_or(1.0).round() as i32;
    let mut legend: Vec<(String, RGBColor)> = (0..curves.len())
        .map(|i| (format!("flow {i}"), COLORS[i % COLORS.len()]))
        .collect();
    legend.push((format!("fair share ({fair:.2} Gb/s)"), BLACK));
    let title = format!(
        "{}: goodput per flow, {} ms intervals",
        run.discipline, series.interval_ms
    );
    figure(&legend, |area| {
        let mut chart = styled(area, &title)
            .build_cartesian_2d(0..x_max.max(1), 0.0..y_max)
            .map_err(|e| e.to_string())?;
        let mut mesh = chart.configure_mesh();
        mesh.x_desc("time (s)")
            .y_desc("goodput (Gb/s)")
            .x_label_formatter(&|ms| format!("{}", f64::from(*ms) / 1000.0));
        house_mesh(&mut mesh).draw().map_err(|e| e.to_string())?;
        for (i, c) in curves.iter().enumerate() {
            draw_line(&mut chart, c.clone(), COLORS[i % COLORS.len()])?;
        }
        draw_line(&mut chart, vec![(0, fair), (x_max, fair)], BLACK)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::congestion::testdata::doc;

    #[test]
    fn the_tables_fit_100_columns_and_say_what_each_discipline_did() {
        let text = render(&doc());
        for line in text.lines() {
            assert!(
                line.chars().count() <= WIDTH,
                "{} > {WIDTH}: {line}",
                line.len()
            );
        }
        let ecn = text
            .lines()
            .find(|l| l.starts_with("ecn-dcqcn") && l.contains('%'))
            .unwrap();
        let cells: Vec<&str> = ecn.split_whitespace().collect();
        assert_eq!(
            cells[..10],
            [
                "ecn-dcqcn",
                "1.82",
                "91%",
                "1.000",
                "0.999",
                "0",
                "0.0",
                "950",
                "238/238",
                "0/0"
            ],
            "{ecn}"
        );
        assert!(ecn.ends_with("0.30 s"), "{ecn}");
        let lossy = text
            .lines()
            .find(|l| l.starts_with("lossy-gbn") && l.contains('%'))
            .unwrap();
        assert!(
            lossy.contains(" 7,000 ") && lossy.contains(" 100.0 "),
            "{lossy}"
        );
        assert!(text.contains("victim write_lat 64 B (µs)"), "{text}");
        let idle = text
            .lines()
            .find(|l| l.starts_with("idle bottleneck"))
            .unwrap();
        assert!(
            idle.contains("n/a"),
            "p99.9 of 2,000 samples is withheld: {idle}"
        );
        let ecn_victim = text
            .lines()
            .filter(|l| l.starts_with("ecn-dcqcn"))
            .nth(1)
            .unwrap();
        // p99 20 µs against the idle 12 µs.
        assert!(ecn_victim.ends_with(" 1.67"), "{ecn_victim}");
        assert!(text.contains("lossy-gbn: steady Jain over the second half (never converged)"));
    }

    #[test]
    fn a_study_s_large_counts_split_the_table_rather_than_pass_100_columns() {
        let mut d = doc();
        for run in &mut d.runs {
            let t = &mut run.totals;
            t.drops = Some(12_345_678);
            t.marks = Some(9_876_543);
            t.cnps_sent = Some(1_234_567);
            t.cnps_handled = Some(1_234_560);
            t.pause_frames_sent = Some(123_456);
            t.pause_frames_received = Some(123_450);
            t.paused_ms_switch = Some(12_345.0);
            t.retransmitted_bytes = Some(98_765_432_100);
        }
        let text = render(&d);
        for line in text.lines() {
            assert!(line.chars().count() <= WIDTH, "{line}");
        }
        // Both parts name the discipline: every column is still read against its row.
        let ecn: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("ecn-dcqcn"))
            .collect();
        assert!(
            ecn.len() >= 3,
            "two parts of the table and the victim's row:\n{text}"
        );
        assert!(
            ecn[0].contains("12,345,678") && ecn[0].contains("1,234,567/1,234,560"),
            "{text}"
        );
        assert!(ecn[1].contains("123,456/123,450 12345ms"), "{text}");
        assert_eq!(
            text.lines().filter(|l| l.starts_with("discipline")).count(),
            2,
            "{text}"
        );
    }

    #[test]
    fn rates_are_plotted_per_flow_with_the_fair_share() {
        let d = doc();
        let svg = rate_svg(&d, &d.runs[1]).unwrap();
        // Two flows in the series' colours (the fair share's black line is not a series).
        crate::report::svg::tests::assert_legend_covers_nothing(&svg, 2);
        crate::report::svg::tests::assert_texts(
            &svg,
            &["flow 0", "flow 1", "fair share (1.00 Gb/s)"],
        );
        let mut bare = d.runs[1].clone();
        bare.series = None;
        assert!(rate_svg(&d, &bare).is_err());
    }
}
