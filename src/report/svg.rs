//! SVG plots of latency percentiles and of bandwidth by message size.
//!
//! Drawn with plotters' SVG backend (no font libraries needed: text stays `<text>` elements that the
//! viewer lays out).
//!
//! * [`latency_svg`]: percentile curves of several latency histograms overlaid, the x axis on the usual
//!   HdrHistogram scale log10(1 / (1 - p)) so that 90 %, 99 %, 99.9 % ... are equally spaced and the tail
//!   gets as much room as the body; each curve ends at the highest percentile that holds (10 samples
//!   beyond it), and the axis at the highest of those;
//! * [`bandwidth_svg`]: bandwidth against message size, the size axis in powers of two; one message size
//!   is drawn as bars labelled with their value, several as lines.
//!
//! Every figure ([`figure`]) puts its legend in a band below the chart, outside the plot area, so that
//! it never covers a point, a bar or a curve, whatever the data.

use crate::stats::{held_value_at_percentile, samples_needed, thousands};
use hdrhistogram::Histogram;
use plotters::chart::MeshStyle;
use plotters::coord::CoordTranslate;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Chart size in pixels, without the legend band below it.
pub(crate) const SIZE: (u32, u32) = (960, 640);

/// Line colours, in series order (colour-blind-safe Tableau 10).
pub(crate) const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// The legend frame's colour (also how a test finds the frame in the SVG).
pub(crate) const LEGEND_BORDER: RGBColor = RGBColor(150, 150, 150);

/// One latency distribution to overlay.
pub(crate) struct LatencySeries<'a> {
    /// Legend text, e.g. "RoCE v2 (soft)".
    pub label: &'a str,
    /// One-way latencies in ns.
    pub histogram: &'a Histogram<u64>,
}

/// One bandwidth curve.
pub(crate) struct BandwidthSeries<'a> {
    /// Legend text.
    pub label: &'a str,
    /// (message size in bytes, Gb/s), any order.
    pub points: Vec<(u64, f64)>,
}

/// Points drawn per percentile curve over the whole axis.
const CURVE_POINTS: usize = 400;

/// Left edge of the plot area: the chart's margin plus its y label area ([`styled`]).
const PLOT_LEFT: i32 = 20 + 70;
/// Room the chart keeps right of the plot area ([`styled`]).
const PLOT_RIGHT_MARGIN: i32 = 50;
/// Height of one legend line, px.
const LEGEND_LINE: i32 = 22;
/// Legend text size, px.
const LEGEND_FONT: i32 = 15;

/// x axes are integers in thousandths of their unit (decades of 1/(1-p), or powers of two): plotters'
/// key-point wrapper keeps a label formatter only over integer axes.
const MILLI: f64 = 1000.0;

fn milli(x: f64) -> i32 {
    (x * MILLI).round() as i32
}

/// 1-2-5 values between `lo` and `hi` (0.1, 0.2, 0.5, 1, 2, 5, 10, ...): round labels for a log axis.
fn ticks_1_2_5(lo: f64, hi: f64) -> Vec<f64> {
    let mut decade = 10f64.powi(lo.log10().floor() as i32);
    let mut out = Vec::new();
    while decade <= hi {
        for m in [1.0, 2.0, 5.0] {
            let v = m * decade;
            if v >= lo && v <= hi {
                out.push(v);
            }
        }
        decade *= 10.0;
    }
    out
}

/// `0.5`, `2`, `150`: an axis value without float noise.
fn fmt_axis(v: f64) -> String {
    let text = format!("{v:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// `50%`, `99.9%`, `99.96%`: the percentile at x = log10(1 / (1 - p)), with the decimals its decade
/// needs (so that a point between 99.9 % and 99.99 % never rounds to 100 %).
pub(crate) fn percentile_tick(x: f64) -> String {
    if x.abs() < 1e-9 {
        return "0%".into();
    }
    let pct = 100.0 * (1.0 - 10f64.powf(-x));
    let decimals = ((x - 1e-9).ceil() as i64 - 2).max(0) as usize;
    format!("{pct:.decimals$}%")
}

/// Where a latency curve of `samples` samples ends on the percentile axis: log10(1 / (1 - p)) of the
/// highest percentile with 10 samples beyond it, log10(n / 10); None when not even the median holds.
pub(crate) fn held_end(samples: u64) -> Option<f64> {
    (samples >= samples_needed(50.0)).then(|| (samples as f64 / 10.0).log10())
}

/// A figure: the chart of [`SIZE`], drawn by `draw` on its area, and below it, outside the plot area,
/// a legend band with one line per (label, colour). Returns the SVG text.
pub(crate) fn figure(
    legend: &[(String, RGBColor)],
    draw: impl FnOnce(&DrawingArea<SVGBackend, Shift>) -> Result<(), String>,
) -> Result<String, String> {
    let band = legend_band_height(legend.len());
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (SIZE.0, SIZE.1 + band)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let (chart, below) = root.split_vertically(SIZE.1);
        draw(&chart)?;
        draw_legend_band(&below, legend)?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

/// Height of the legend band for `entries` lines.
fn legend_band_height(entries: usize) -> u32 {
    if entries == 0 {
        0
    } else {
        (LEGEND_LINE * entries as i32 + 24) as u32
    }
}

/// The legend frame within its band: (left, top), (right, bottom), px; as wide as the longest label
/// needs (about 8 px a character at 15 px), within the plot area's width.
pub(crate) fn legend_frame(legend: &[(String, RGBColor)]) -> ((i32, i32), (i32, i32)) {
    let chars = legend
        .iter()
        .map(|(l, _)| l.chars().count())
        .max()
        .unwrap_or(0) as i32;
    let right_max = SIZE.0 as i32 - PLOT_RIGHT_MARGIN;
    let right = (PLOT_LEFT + 44 + chars * 8).min(right_max);
    (
        (PLOT_LEFT, 4),
        (right, 4 + LEGEND_LINE * legend.len() as i32 + 12),
    )
}

/// Draws the legend in `area` (the band below a chart): a frame, and per entry a square of its colour
/// and its label.
fn draw_legend_band(
    area: &DrawingArea<SVGBackend, Shift>,
    legend: &[(String, RGBColor)],
) -> Result<(), String> {
    if legend.is_empty() {
        return Ok(());
    }
    let (top_left, bottom_right) = legend_frame(legend);
    area.draw(&Rectangle::new([top_left, bottom_right], LEGEND_BORDER))
        .map_err(|e| e.to_string())?;
    let style =
        TextStyle::from(("sans-serif", LEGEND_FONT)).pos(Pos::new(HPos::Left, VPos::Center));
    for (i, (label, color)) in legend.iter().enumerate() {
        let y = top_left.1 + 6 + LEGEND_LINE * i as i32 + LEGEND_LINE / 2;
        let x = top_left.0 + 12;
        area.draw(&Rectangle::new(
            [(x, y - 7), (x + 14, y + 7)],
            color.filled(),
        ))
        .map_err(|e| e.to_string())?;
        area.draw(&Text::new(label.as_str(), (x + 24, y), style.clone()))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The percentile curves of `series` overlaid; `title` goes on top. Each curve ends at the highest
/// percentile its samples hold (10 beyond it), and the axis at the highest of those; a series whose
/// samples do not hold the median is left out. Returns the SVG text.
pub(crate) fn latency_svg(title: &str, series: &[LatencySeries]) -> Result<String, String> {
    let drawn: Vec<(&LatencySeries, f64)> = series
        .iter()
        .filter_map(|s| Some((s, held_end(s.histogram.len())?)))
        .collect();
    if drawn.is_empty() {
        return Err(format!(
            "no latency run holds a percentile to plot (the median needs {} samples)",
            samples_needed(50.0)
        ));
    }
    // The axis ends where the best-sampled curve does: 1,000 samples reach 99 %, 10^5 reach 99.99 %.
    let x_max = drawn.iter().map(|d| d.1).fold(0.0, f64::max).min(6.0);
    let curves: Vec<Vec<(i32, f64)>> = drawn
        .iter()
        .map(|(s, end)| {
            let end = end.min(x_max);
            (0..=CURVE_POINTS)
                .map(|i| x_max * i as f64 / CURVE_POINTS as f64)
                .take_while(|&x| x < end)
                .chain(std::iter::once(end))
                .filter_map(|x| {
                    let pct = 100.0 * (1.0 - 10f64.powf(-x));
                    let ns = held_value_at_percentile(s.histogram, pct)?;
                    Some((milli(x), ns as f64 / 1000.0))
                })
                .collect()
        })
        .collect();
    // Latency on a log axis too: transports that differ by a factor of three stay apart at the median,
    // and a tail 100x the median still fits.
    let y_values = || curves.iter().flatten().map(|p| p.1.max(0.001));
    let y_max = y_values().fold(0.0, f64::max) * 1.25;
    let y_min = y_values().fold(f64::INFINITY, f64::min) * 0.8;
    let mut ticks: Vec<i32> = [0.0, 2f64.log10()]
        .into_iter()
        .chain((1..=x_max.floor() as i32).map(f64::from))
        .filter(|&x| x <= x_max)
        .map(milli)
        .collect();
    // The axis' end gets its own label when it falls between decades, far enough from the last one.
    if x_max - x_max.floor() > 0.3 {
        ticks.push(milli(x_max));
    }
    let legend: Vec<(String, RGBColor)> = drawn
        .iter()
        .enumerate()
        .map(|(i, (s, end))| {
            let label = format!(
                "{}: {} samples, to p{}",
                s.label,
                thousands(s.histogram.len()),
                percentile_tick(end.min(x_max)).trim_end_matches('%')
            );
            (label, COLORS[i % COLORS.len()])
        })
        .collect();
    figure(&legend, |area| {
        let mut chart = styled(area, title)
            .build_cartesian_2d(
                (0..milli(x_max)).with_key_points(ticks),
                (y_min..y_max)
                    .log_scale()
                    .with_key_points(ticks_1_2_5(y_min, y_max)),
            )
            .map_err(|e| e.to_string())?;
        let mut mesh = chart.configure_mesh();
        mesh.x_desc(
            "percentile (log scale of 1/(1-p)); a curve ends at the last percentile with 10 samples beyond it",
        )
        .y_desc("one-way latency (µs, log scale)")
        .x_label_formatter(&|x| percentile_tick(f64::from(*x) / MILLI))
        .y_label_formatter(&|y| fmt_axis(*y));
        house_mesh(&mut mesh).draw().map_err(|e| e.to_string())?;
        for (i, points) in curves.into_iter().enumerate() {
            draw_line(&mut chart, points, COLORS[i % COLORS.len()])?;
        }
        Ok(())
    })
}

/// Bandwidth (Gb/s) by message size: one bar per series, labelled with its value, when every point
/// is of one size; else one curve per series, the size axis in powers of two.
pub(crate) fn bandwidth_svg(title: &str, series: &[BandwidthSeries]) -> Result<String, String> {
    let all: Vec<(u64, f64)> = series
        .iter()
        .flat_map(|s| s.points.iter().copied())
        .collect();
    if all.is_empty() {
        return Err("no bandwidth results to plot".into());
    }
    let legend: Vec<(String, RGBColor)> = series
        .iter()
        .enumerate()
        .map(|(i, s)| (s.label.to_owned(), COLORS[i % COLORS.len()]))
        .collect();
    if all.iter().all(|p| p.0 == all[0].0) {
        return bandwidth_bars(title, series, all[0].0, &legend);
    }
    let log2 = |size: u64| (size.max(1) as f64).log2();
    let lo = all.iter().map(|p| log2(p.0)).fold(f64::INFINITY, f64::min);
    let hi = all
        .iter()
        .map(|p| log2(p.0))
        .fold(f64::NEG_INFINITY, f64::max);
    let (x_lo, x_hi) = (lo.floor() - 0.5, hi.ceil() + 0.5);
    // A tick per power of two, thinned to at most 12.
    let first = lo.floor() as i64;
    let last = hi.ceil() as i64;
    let step = ((last - first) / 12 + 1).max(1);
    let ticks: Vec<i32> = (first..=last)
        .step_by(step as usize)
        .map(|e| e as i32 * 1000)
        .collect();
    let y_max = all.iter().map(|p| p.1).fold(0.0, f64::max).max(0.001) * 1.15;
    figure(&legend, |area| {
        let mut chart = styled(area, title)
            .build_cartesian_2d(
                (milli(x_lo)..milli(x_hi)).with_key_points(ticks),
                0.0..y_max,
            )
            .map_err(|e| e.to_string())?;
        let mut mesh = chart.configure_mesh();
        mesh.x_desc("message size (bytes, log2 scale)")
            .y_desc("bandwidth (Gb/s)")
            .x_label_formatter(&|x| {
                super::fmt_size(2f64.powf((f64::from(*x) / MILLI).round()) as u64)
            })
            .y_label_formatter(&|y| format!("{y}"));
        house_mesh(&mut mesh).draw().map_err(|e| e.to_string())?;
        for (i, s) in series.iter().enumerate() {
            let mut points: Vec<(i32, f64)> = s
                .points
                .iter()
                .map(|&(sz, g)| (milli(log2(sz)), g))
                .collect();
            points.sort_by_key(|p| p.0);
            draw_marked_line(&mut chart, &points, COLORS[i % COLORS.len()], 4)?;
        }
        Ok(())
    })
}

/// One bar per series at the one message size `size`, each labelled with its Gb/s above it and its
/// series (cut to the bar's room) below it.
fn bandwidth_bars(
    title: &str,
    series: &[BandwidthSeries],
    size: u64,
    legend: &[(String, RGBColor)],
) -> Result<String, String> {
    let bars: Vec<(usize, f64)> = series
        .iter()
        .enumerate()
        .filter_map(|(i, s)| Some((i, s.points.first()?.1)))
        .collect();
    let n = bars.len() as i32;
    let y_max = bars.iter().map(|b| b.1).fold(0.0, f64::max).max(0.001) * 1.15;
    // Bar i spans [i + 0.2, i + 0.8] in thousandths; its label sits at i + 0.5.
    let centres: Vec<i32> = (0..n).map(|i| i * 1000 + 500).collect();
    let room = (SIZE.0 as i32 - PLOT_LEFT - PLOT_RIGHT_MARGIN) / n.max(1);
    // The axis labels' sans-serif characters average under 7 px: `RoCE v2 (soft, UDP socket)` fits
    // under its bar when four share the chart.
    let max_chars = (room / 7).max(4) as usize;
    let names: Vec<String> = bars
        .iter()
        // The link a label names (`… over veth (…)`) is the legend's to say, in full.
        .map(|&(i, _)| {
            let label = series[i].label;
            cut_label(label.split(" over ").next().unwrap_or(label), max_chars)
        })
        .collect();
    let name_of = |x: &i32| names.get((x / 1000) as usize).cloned().unwrap_or_default();
    figure(legend, |area| {
        let mut chart = styled(area, title)
            .build_cartesian_2d((0..n * 1000).with_key_points(centres), 0.0..y_max)
            .map_err(|e| e.to_string())?;
        let mut mesh = chart.configure_mesh();
        mesh.disable_x_mesh()
            .x_desc(format!(
                "one bar per run, {} messages",
                super::fmt_size(size)
            ))
            .y_desc("bandwidth (Gb/s)")
            .x_label_formatter(&name_of)
            .y_label_formatter(&|y| format!("{y}"));
        house_mesh(&mut mesh).draw().map_err(|e| e.to_string())?;
        let above = TextStyle::from(("sans-serif", 15)).pos(Pos::new(HPos::Center, VPos::Bottom));
        for (slot, &(i, gbps)) in bars.iter().enumerate() {
            let x = slot as i32 * 1000;
            let color = COLORS[i % COLORS.len()];
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(x + 200, 0.0), (x + 800, gbps)],
                    color.filled(),
                )))
                .map_err(|e| e.to_string())?;
            chart
                .draw_series(std::iter::once(
                    EmptyElement::at((x + 500, gbps))
                        + Text::new(format!("{gbps:.2} Gb/s"), (0, -6), above.clone()),
                ))
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    })
}

/// `label` in at most `max` characters, cut with `…`.
fn cut_label(label: &str, max: usize) -> String {
    if label.chars().count() <= max {
        return label.to_owned();
    }
    let mut s: String = label.chars().take(max.saturating_sub(1)).collect();
    s.push('…');
    s
}

/// The frame every chart shares: title, margins and room for the axis labels.
pub(crate) fn styled<'a, 'b, DB: DrawingBackend>(
    root: &'a DrawingArea<DB, plotters::coord::Shift>,
    title: &'b str,
) -> ChartBuilder<'a, 'b, DB> {
    let mut b = ChartBuilder::on(root);
    b.caption(title, ("sans-serif", 22))
        .margin(20)
        .margin_right(PLOT_RIGHT_MARGIN)
        .x_label_area_size(50)
        .y_label_area_size(PLOT_LEFT - 20);
    b
}

/// The grid and label style every chart shares: faint light lines, the label fonts.
pub(crate) fn house_mesh<'m, 'a, 'b, X: Ranged, Y: Ranged, DB: DrawingBackend>(
    mesh: &'m mut MeshStyle<'a, 'b, X, Y, DB>,
) -> &'m mut MeshStyle<'a, 'b, X, Y, DB> {
    mesh.max_light_lines(1)
        .light_line_style(RGBColor(235, 235, 235))
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 16))
}

/// One curve: a line of `color` (its legend entry is the figure's, below the chart).
pub(crate) fn draw_line<DB: DrawingBackend, CT: CoordTranslate<From = (i32, f64)>>(
    chart: &mut ChartContext<'_, DB, CT>,
    points: Vec<(i32, f64)>,
    color: RGBColor,
) -> Result<(), String> {
    chart
        .draw_series(LineSeries::new(points, color.stroke_width(2)))
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// [`draw_line`] with a dot of `radius` at each point: the measured values on the curve.
pub(crate) fn draw_marked_line<DB: DrawingBackend, CT: CoordTranslate<From = (i32, f64)>>(
    chart: &mut ChartContext<'_, DB, CT>,
    points: &[(i32, f64)],
    color: RGBColor,
    radius: i32,
) -> Result<(), String> {
    draw_line(chart, points.to_vec(), color)?;
    chart
        .draw_series(
            points
                .iter()
                .map(|&p| Circle::new(p, radius, color.filled())),
        )
        .map_err(|e| e.to_string())?;
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::stats::new_latency_histogram;

    /// The text of every `<text>` element, trimmed.
    fn texts(svg: &str) -> Vec<String> {
        let doc = roxmltree::Document::parse(svg).unwrap();
        doc.descendants()
            .filter(|n| n.has_tag_name("text"))
            .filter_map(|n| n.text().map(|t| t.trim().to_owned()))
            .collect()
    }

    /// Asserts that each of `wanted` is the whole text of a `<text>` element of `svg`; returns
    /// [`texts`].
    #[track_caller]
    pub(crate) fn assert_texts(svg: &str, wanted: &[&str]) -> Vec<String> {
        let t = texts(svg);
        for want in wanted {
            assert!(t.iter().any(|x| x == want), "{want:?} missing from {t:?}");
        }
        t
    }

    #[test]
    fn log_axis_ticks_are_round() {
        assert_eq!(ticks_1_2_5(1.5, 60.0), vec![2.0, 5.0, 10.0, 20.0, 50.0]);
        assert_eq!(fmt_axis(ticks_1_2_5(0.15, 0.3)[0]), "0.2");
    }

    #[test]
    fn percentile_ticks() {
        assert_eq!(percentile_tick(0.0), "0%");
        assert_eq!(percentile_tick(2f64.log10()), "50%");
        assert_eq!(percentile_tick(1.0), "90%");
        assert_eq!(percentile_tick(2.0), "99%");
        assert_eq!(percentile_tick(3.0), "99.9%");
        assert_eq!(percentile_tick(4.0), "99.99%");
        // Between decades, the next decade's decimals: never rounded up to 100 %.
        assert_eq!(percentile_tick(2500f64.log10()), "99.96%");
        assert_eq!(percentile_tick(3.999), "99.99%");
    }

    #[test]
    fn a_curve_ends_where_ten_samples_remain_beyond_it() {
        assert_eq!(held_end(19), None, "not even the median holds");
        assert!((held_end(20).unwrap() - 2f64.log10()).abs() < 1e-12);
        assert!((held_end(1000).unwrap() - 2.0).abs() < 1e-12, "p99");
        assert!((held_end(100_000).unwrap() - 4.0).abs() < 1e-12, "p99.99");
    }

    /// A histogram of `n` samples spread over 1 .. 3 µs with a 40 µs tail of 1 %.
    fn spread(n: u64) -> Histogram<u64> {
        let mut h = new_latency_histogram();
        for i in 0..n {
            let v = if i % 100 == 99 {
                40_000
            } else {
                1000 + (i * 7919) % 2000
            };
            h.record(v).unwrap();
        }
        h
    }

    /// A rectangle: (left, top, right, bottom), px.
    type Bbox = (f64, f64, f64, f64);

    fn num(n: roxmltree::Node, attr: &str) -> f64 {
        n.attribute(attr).unwrap().parse().unwrap()
    }

    /// The legend's frame, and the box of every plotted element (curve vertices, dots, bars): what
    /// the SVG holds, as a viewer draws it. The frame is the rect stroked in [`LEGEND_BORDER`]; a
    /// series-coloured rect inside it is a legend mark, and their count is returned too.
    fn legend_and_plotted(svg: &str) -> (Bbox, Vec<Bbox>, usize) {
        let doc = roxmltree::Document::parse(svg).unwrap();
        let hex = |c: RGBColor| format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2);
        let rect = |n: roxmltree::Node| {
            let (x, y) = (num(n, "x"), num(n, "y"));
            (x, y, x + num(n, "width"), y + num(n, "height"))
        };
        let frame = doc
            .descendants()
            .find(|n| n.has_tag_name("rect") && n.attribute("stroke") == Some(&hex(LEGEND_BORDER)))
            .map(rect)
            .expect("a legend frame");
        let inside = |b: Bbox| b.0 >= frame.0 && b.1 >= frame.1 && b.2 <= frame.2 && b.3 <= frame.3;
        let colors: Vec<String> = COLORS.iter().map(|c| hex(*c)).collect();
        let mut plotted = Vec::new();
        let mut marks = 0;
        for n in doc.descendants() {
            match n.tag_name().name() {
                // Axes and ticks are polylines too, in black: a series' line is in its colour.
                "polyline"
                    if n.attribute("stroke")
                        .is_some_and(|f| colors.iter().any(|c| c == f)) =>
                {
                    for p in n.attribute("points").unwrap().split_whitespace() {
                        let (x, y) = p.split_once(',').unwrap();
                        let (x, y): (f64, f64) = (x.parse().unwrap(), y.parse().unwrap());
                        plotted.push((x, y, x, y));
                    }
                }
                "circle" => {
                    let (x, y, r) = (num(n, "cx"), num(n, "cy"), num(n, "r"));
                    plotted.push((x - r, y - r, x + r, y + r));
                }
                "rect"
                    if n.attribute("fill")
                        .is_some_and(|f| colors.iter().any(|c| c == f)) =>
                {
                    let b = rect(n);
                    if inside(b) {
                        marks += 1;
                    } else {
                        plotted.push(b);
                    }
                }
                _ => {}
            }
        }
        (frame, plotted, marks)
    }

    /// Asserts that the legend of `svg` covers none of its `series` plotted elements and has a mark
    /// for each series.
    #[track_caller]
    pub(crate) fn assert_legend_covers_nothing(svg: &str, series: usize) {
        let (frame, plotted, marks) = legend_and_plotted(svg);
        assert_eq!(marks, series, "one legend mark per series");
        assert!(!plotted.is_empty());
        for b in &plotted {
            let apart = b.2 < frame.0 || b.0 > frame.2 || b.3 < frame.1 || b.1 > frame.3;
            assert!(apart, "legend {frame:?} covers a plotted element at {b:?}");
        }
        // Outside the chart: below its area altogether.
        assert!(frame.1 >= f64::from(SIZE.1), "{frame:?}");
    }

    #[test]
    fn latency_plot_ends_at_the_highest_percentile_that_holds() {
        let (a, b) = (spread(10_000), spread(1000));
        let svg = latency_svg(
            "write_lat 2 B",
            &[
                LatencySeries {
                    label: "RoCE v2 (soft)",
                    histogram: &a,
                },
                LatencySeries {
                    label: "TCP",
                    histogram: &b,
                },
            ],
        )
        .unwrap();
        let t = assert_texts(
            &svg,
            &[
                "write_lat 2 B",
                "RoCE v2 (soft): 10,000 samples, to p99.9",
                "TCP: 1,000 samples, to p99",
                "50%",
                "90%",
                "99%",
                "99.9%",
            ],
        );
        assert!(
            !t.iter().any(|x| x == "99.99%"),
            "one sample beyond it: {t:?}"
        );
        assert!(t.iter().any(|x| x.contains("µs")));
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let blue = format!("#{:02X}{:02X}{:02X}", COLORS[0].0, COLORS[0].1, COLORS[0].2);
        let orange = format!("#{:02X}{:02X}{:02X}", COLORS[1].0, COLORS[1].1, COLORS[1].2);
        let curves: Vec<Vec<f64>> = doc
            .descendants()
            .filter(|n| {
                n.has_tag_name("polyline")
                    && [&blue, &orange]
                        .iter()
                        .any(|c| n.attribute("stroke") == Some(c))
            })
            .map(|n| {
                n.attribute("points")
                    .unwrap()
                    .split_whitespace()
                    .map(|p| p.split_once(',').unwrap().0.parse().unwrap())
                    .collect()
            })
            .collect();
        assert_eq!(curves.len(), 2);
        // The 10,000-sample curve runs the whole axis, the 1,000-sample one two thirds of it (to p99).
        let last = |c: &Vec<f64>| *c.last().unwrap();
        let (x0, x_end) = (curves[0][0], last(&curves[0]));
        let two_thirds = x0 + (x_end - x0) * 2.0 / 3.0;
        assert!((last(&curves[1]) - two_thirds).abs() <= 2.0, "{curves:?}");
        assert!(curves[0].len() > CURVE_POINTS / 2);
        // Between decades the axis' end is labelled: 25,000 samples hold p99.96.
        let c = spread(25_000);
        let svg = latency_svg(
            "x",
            &[LatencySeries {
                label: "v2",
                histogram: &c,
            }],
        )
        .unwrap();
        assert_texts(&svg, &["99.9%", "99.96%", "v2: 25,000 samples, to p99.96"]);
        // Nothing that holds the median: no plot, and the error says what is needed.
        let few = spread(19);
        let err = latency_svg(
            "x",
            &[LatencySeries {
                label: "v2",
                histogram: &few,
            }],
        )
        .unwrap_err();
        assert!(err.contains("needs 20 samples"), "{err}");
        assert!(latency_svg("x", &[]).is_err());
    }

    #[test]
    fn no_legend_covers_a_curve_point_or_bar() {
        let (a, b) = (spread(10_000), spread(100_000));
        let lat = latency_svg(
            "write_lat",
            &[
                LatencySeries {
                    label: "RoCE v1 (soft)",
                    histogram: &a,
                },
                LatencySeries {
                    label: "TCP",
                    histogram: &b,
                },
            ],
        )
        .unwrap();
        assert_legend_covers_nothing(&lat, 2);
        let sweep = bandwidth_svg(
            "write_bw",
            &[
                BandwidthSeries {
                    label: "RoCE v1 (soft)",
                    points: vec![(4096, 20.0), (65536, 50.0)],
                },
                BandwidthSeries {
                    label: "TCP",
                    points: vec![(4096, 10.0), (65536, 25.0)],
                },
            ],
        )
        .unwrap();
        assert_legend_covers_nothing(&sweep, 2);
    }

    #[test]
    fn the_legend_that_covered_the_v2_point_now_covers_nothing() {
        // issue 28's bandwidth.svg: one size, long labels naming the link, the fastest run in the
        // middle. The old legend, inside the plot at its upper left and as wide as its longest label,
        // spanned the middle of the plot's top, where that point is.
        let link = " over veth (netns rpc4242a<->rpc4242b, MTU 9000)";
        let labels = ["RoCE v1 (soft)", "RoCE v2 (soft)", "TCP"].map(|l| format!("{l}{link}"));
        let gbps = [12.9, 29.7, 10.4];
        let series: Vec<BandwidthSeries> = labels
            .iter()
            .zip(gbps)
            .map(|(label, g)| BandwidthSeries {
                label,
                points: vec![(65536, g)],
            })
            .collect();
        let svg = bandwidth_svg("write_bw", &series).unwrap();
        let (_, plotted, _) = legend_and_plotted(&svg);
        // Where the old legend went: from the plot's top left, 8 px a character wide, a line a series.
        let old = (
            f64::from(PLOT_LEFT),
            0.0,
            f64::from(PLOT_LEFT) + 8.0 * labels[1].chars().count() as f64,
            f64::from(20 + 30 + LEGEND_LINE * 3 + 20),
        );
        let v2_bar = plotted[1];
        assert!(
            v2_bar.0 < old.2 && v2_bar.1 < old.3,
            "the case must be one the old placement collided with: {v2_bar:?} {old:?}"
        );
        assert_legend_covers_nothing(&svg, 3);
    }

    #[test]
    fn one_message_size_is_drawn_as_labelled_bars() {
        let svg = bandwidth_svg(
            "write_bw",
            &[
                BandwidthSeries {
                    label: "RoCE v2 (soft) over lo",
                    points: vec![(65536, 38.791)],
                },
                BandwidthSeries {
                    label: "TCP over lo",
                    points: vec![(65536, 21.3)],
                },
            ],
        )
        .unwrap();
        // Values above the bars, runs below them (the link is the legend's), the size on the axis.
        assert_texts(
            &svg,
            &[
                "38.79 Gb/s",
                "21.30 Gb/s",
                "RoCE v2 (soft)",
                "TCP",
                "RoCE v2 (soft) over lo",
                "one bar per run, 64 KiB messages",
            ],
        );
        let (_, plotted, marks) = legend_and_plotted(&svg);
        assert_eq!(marks, 2);
        assert_eq!(plotted.len(), 2, "two bars, no dot or line: {plotted:?}");
        // The faster run's bar is the taller one (SVG y grows downwards).
        assert!(plotted[0].1 < plotted[1].1, "{plotted:?}");
        assert!(
            (plotted[0].3 - plotted[1].3).abs() < 1.0,
            "bars share the axis"
        );
    }

    #[test]
    fn several_sizes_are_drawn_as_lines_in_binary_units() {
        let svg = bandwidth_svg(
            "write_bw",
            &[
                BandwidthSeries {
                    label: "RoCE v1 (soft)",
                    points: vec![(65536, 40.0), (4096, 20.0)],
                },
                BandwidthSeries {
                    label: "TCP",
                    points: vec![(4096, 10.0), (65536, 25.0)],
                },
            ],
        )
        .unwrap();
        let t = assert_texts(
            &svg,
            &[
                "RoCE v1 (soft)",
                "TCP",
                "4 KiB",
                "64 KiB",
                "bandwidth (Gb/s)",
            ],
        );
        let (_, plotted, marks) = legend_and_plotted(&svg);
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let circles = doc
            .descendants()
            .filter(|n| n.has_tag_name("circle"))
            .count();
        // Four dots, and two lines of two vertices each; no bar.
        assert_eq!((circles, plotted.len(), marks), (4, 4 + 4, 2));
        assert!(bandwidth_svg("x", &[]).is_err());
        // Curves, no value labels.
        assert!(!t.iter().any(|x| x.ends_with(" Gb/s")), "{t:?}");
    }
}
