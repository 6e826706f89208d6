//! A fabric matrix as an SVG heatmap, written by hand (rectangles and text, so that its parts carry
//! ids a reader or a test can find): one square per (client, server), coloured on an absolute scale
//! against the matrix's median (fixed breakpoints, so a 21 % spread looks like 21 %, not like red
//! against green), a colour bar with that scale, axis titles, rank:host labels, flagged pairs outlined,
//! failed and not-run pairs grey with a mark.

use crate::results::fabric::{Host, Matrix, PairState, fmt_value};
use std::fmt::Write;

/// Largest square side in pixels (smaller for big matrices).
const MAX_CELL: usize = 96;
/// The colour scale: (a value's ratio to the median, where worse is below 1; colour), from worst.
const STOPS: [(f64, (u8, u8, u8)); 5] = [
    (0.50, (200, 40, 40)),
    (0.75, (235, 130, 50)),
    (0.90, (240, 210, 70)),
    (0.97, (160, 205, 90)),
    (1.00, (50, 160, 80)),
];

/// A cell's colour for its ratio to the median (1 = the median; below, worse).
pub(crate) fn shade(ratio: f64) -> (u8, u8, u8) {
    let r = if ratio.is_finite() { ratio } else { 0.0 };
    if r <= STOPS[0].0 {
        return STOPS[0].1;
    }
    for w in STOPS.windows(2) {
        let ((a, ca), (b, cb)) = (w[0], w[1]);
        if r <= b {
            let t = (r - a) / (b - a);
            let mix =
                |x: u8, y: u8| (f64::from(x) + t * (f64::from(y) - f64::from(x))).round() as u8;
            return (mix(ca.0, cb.0), mix(ca.1, cb.1), mix(ca.2, cb.2));
        }
    }
    STOPS[STOPS.len() - 1].1
}

/// `v` against `median` as a ratio where below 1 is worse: v/median for bandwidth, median/v for
/// latency.
fn ratio(v: f64, median: f64, higher_is_better: bool) -> f64 {
    if higher_is_better {
        v / median
    } else {
        median / v
    }
}

fn esc(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn hex((r, g, b): (u8, u8, u8)) -> String {
    format!("#{r:02x}{g:02x}{b:02x}")
}

/// `2:cn07`, the host cut to 14 characters; the rank alone when the host is unknown.
fn label(rank: usize, hosts: &[Host]) -> String {
    match hosts.get(rank).map(|h| h.host.as_str()) {
        Some(h) if h != "?" && !h.is_empty() => {
            let short: String = h.chars().take(14).collect();
            format!("{rank}:{short}")
        }
        _ => rank.to_string(),
    }
}

/// The heatmap of one matrix of a run of `ranks` ranks on `hosts`, as SVG text.
pub(crate) fn heatmap_svg(m: &Matrix, ranks: usize, hosts: &[Host]) -> String {
    let metric = m.metric;
    let n = ranks.max(1);
    let cell = MAX_CELL.min((720 / n).max(3));
    let side = cell * n;
    let labels_every = (n * 14).div_ceil(side).max(1);
    let label_w = (0..n).map(|r| label(r, hosts).len()).max().unwrap_or(1) * 7 + 12;
    let (x0, y0) = (label_w + 30, 120);
    let bar_x = x0 + side + 40;
    let width = (bar_x + 150).max(x0 + 420);
    let height = y0 + side.max(260) + 80;
    let values: Vec<f64> = m.cells().map(|(_, _, v)| v).collect();
    let med = crate::stats::median(&values);
    let hib = metric.higher_is_better();
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif">"#
    );
    let _ = writeln!(
        s,
        r#"<rect width="{width}" height="{height}" fill="white"/>"#
    );
    let _ = writeln!(
        s,
        r#"<text id="title" x="10" y="22" font-size="16">{}</text>"#,
        esc(&m.title())
    );
    let scale = match med {
        Some(md) => format!(
            "{} [{}]{}; colour: ratio to the median, {} {}",
            metric.title(),
            metric.unit(),
            m.size_bytes
                .map(|b| format!(" at {}", crate::report::fmt_size(b)))
                .unwrap_or_default(),
            fmt_value(md),
            metric.unit()
        ),
        None => format!("{} [{}]; no values", metric.title(), metric.unit()),
    };
    let _ = writeln!(
        s,
        r#"<text id="subtitle" x="10" y="42" font-size="12">{}</text>"#,
        esc(&scale)
    );
    // Axis titles: servers across the top, clients down the left.
    let _ = writeln!(
        s,
        r#"<text id="x-title" x="{}" y="{}" font-size="13" text-anchor="middle">server (rank:host)</text>"#,
        x0 + side / 2,
        y0 - 62
    );
    let _ = writeln!(
        s,
        r#"<text id="y-title" x="14" y="{}" font-size="13" text-anchor="middle" transform="rotate(-90 14 {})">client (rank:host)</text>"#,
        y0 + side / 2,
        y0 + side / 2
    );
    let small = (cell / 4).clamp(8, 11);
    for i in (0..n).step_by(labels_every) {
        let text = esc(&label(i, hosts));
        let cx = x0 + i * cell + cell / 2;
        let _ = writeln!(
            s,
            r#"<text class="col-label" x="{cx}" y="{}" font-size="{small}" transform="rotate(-45 {cx} {})">{text}</text>"#,
            y0 - 6,
            y0 - 6
        );
        let _ = writeln!(
            s,
            r#"<text class="row-label" x="{}" y="{}" font-size="{small}" text-anchor="end">{text}</text>"#,
            x0 - 6,
            y0 + i * cell + cell / 2 + small / 3
        );
    }
    for row in 0..n {
        for col in 0..n {
            let (x, y) = (x0 + col * cell, y0 + row * cell);
            let value = m.value(row, col);
            let state = m.state(row, col);
            let fill = match (value, med) {
                (Some(v), Some(md)) => hex(shade(ratio(v, md, hib))),
                _ if state.is_none() => "#f5f5f5".to_owned(),
                _ => "#a0a0a0".to_owned(),
            };
            let stroke = if m.is_flagged(row, col) {
                r#" stroke="black" stroke-width="3""#
            } else {
                r#" stroke="white" stroke-width="1""#
            };
            let _ = writeln!(
                s,
                r#"<rect class="cell" data-client="{row}" data-server="{col}" x="{x}" y="{y}" width="{cell}" height="{cell}" fill="{fill}"{stroke}/>"#
            );
            let mark = match (value, state) {
                (Some(v), _) if cell >= 40 => Some(fmt_value(v)),
                (None, Some(PairState::Failed)) => Some("x".into()),
                (None, Some(_)) => Some("-".into()),
                _ => None,
            };
            if let Some(t) = mark {
                let _ = writeln!(
                    s,
                    r#"<text x="{}" y="{}" font-size="{small}" text-anchor="middle">{}</text>"#,
                    x + cell / 2,
                    y + cell / 2 + small / 3,
                    esc(&t)
                );
            }
        }
    }
    colour_bar(&mut s, bar_x, y0, side.max(260), med.is_some(), m);
    let ly = y0 + side.max(260) + 30;
    let _ = writeln!(
        s,
        r#"<text id="legend" x="10" y="{ly}" font-size="11">black outline: flagged; grey x: failed; grey -: not run (rank missing or lost); light: no pair</text>"#
    );
    s.push_str("</svg>\n");
    s
}

/// The colour bar: the scale from the worst stop (bottom) to the median and above (top), labelled with
/// each stop's percentage of the median.
fn colour_bar(s: &mut String, x: usize, y: usize, h: usize, has_values: bool, m: &Matrix) {
    let _ = writeln!(s, r#"<g id="colour-bar">"#);
    let what = if m.metric.higher_is_better() {
        format!("{} / median", m.metric.title())
    } else {
        format!("median / {}", m.metric.title())
    };
    let _ = writeln!(
        s,
        r#"<text class="bar-title" x="{x}" y="{}" font-size="11">{}</text>"#,
        y - 8,
        esc(&what)
    );
    let steps = 40;
    let (lo, hi) = (0.45, 1.0);
    for i in 0..steps {
        // Top: the median (and better); bottom: worse than the lowest stop.
        let r = hi - (hi - lo) * (i as f64 + 0.5) / steps as f64;
        let _ = writeln!(
            s,
            r#"<rect x="{x}" y="{}" width="18" height="{}" fill="{}"/>"#,
            y + i * h / steps,
            h / steps + 1,
            hex(shade(r))
        );
    }
    if has_values {
        for (r, _) in STOPS {
            let at = y + ((hi - r) / (hi - lo) * h as f64) as usize;
            let text = if r >= 1.0 {
                "100% and better".to_owned()
            } else if r <= STOPS[0].0 {
                format!("{:.0}% or worse", r * 100.0)
            } else {
                format!("{:.0}%", r * 100.0)
            };
            let _ = writeln!(
                s,
                r#"<text class="bar-label" x="{}" y="{}" font-size="11">{text}</text>"#,
                x + 24,
                at + 4
            );
        }
    }
    s.push_str("</g>\n");
}

#[cfg(test)]
mod tests;
