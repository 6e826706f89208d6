//! SVG plots of latency percentiles and of bandwidth by message size.
//!
//! Drawn with plotters' SVG backend (no font libraries needed: text stays `<text>` elements that the
//! viewer lays out).
//!
//! * [`latency_svg`]: percentile curves of several latency histograms overlaid, the x axis on the usual
//!   HdrHistogram scale log10(1 / (1 - p)) so that 90 %, 99 %, 99.9 % ... are equally spaced and the tail
//!   gets as much room as the body;
//! * [`bandwidth_svg`]: bandwidth against message size, the size axis in powers of two.

use crate::stats::value_at_percentile;
use hdrhistogram::Histogram;
use plotters::chart::MeshStyle;
use plotters::coord::CoordTranslate;
use plotters::prelude::*;

/// Plot size in pixels.
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

/// Points drawn per percentile curve.
const CURVE_POINTS: usize = 400;

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

/// `50%`, `99.9%`: the percentile at x = log10(1 / (1 - p)).
pub(crate) fn percentile_tick(x: f64) -> String {
    if x.abs() < 1e-9 {
        return "0%".into();
    }
    let pct = 100.0 * (1.0 - 10f64.powf(-x));
    let decimals = (x.round() as i64 - 2).max(0) as usize;
    format!("{pct:.decimals$}%")
}

/// The percentile curves of `series` overlaid; `title` goes on top. Returns the SVG text.
pub(crate) fn latency_svg(title: &str, series: &[LatencySeries]) -> Result<String, String> {
    let drawn: Vec<&LatencySeries> = series.iter().filter(|s| !s.histogram.is_empty()).collect();
    if drawn.is_empty() {
        return Err("no latency samples to plot".into());
    }
    // Up to the percentile whose tail still holds one sample of the largest run: 1000 samples reach
    // 99.9 %, 10^6 reach 99.9999 %.
    let most = drawn.iter().map(|s| s.histogram.len()).max().unwrap_or(1) as f64;
    let x_max = most.log10().ceil().clamp(2.0, 6.0);
    let curves: Vec<Vec<(i32, f64)>> = drawn
        .iter()
        .map(|s| {
            (0..=CURVE_POINTS)
                .map(|i| {
                    let x = x_max * i as f64 / CURVE_POINTS as f64;
                    let pct = 100.0 * (1.0 - 10f64.powf(-x));
                    let ns = if i == CURVE_POINTS {
                        s.histogram.max()
                    } else {
                        value_at_percentile(s.histogram, pct)
                    };
                    (milli(x), ns as f64 / 1000.0)
                })
                .collect()
        })
        .collect();
    // Latency on a log axis too: transports that differ by a factor of three stay apart at the median,
    // and a tail 100x the median still fits.
    let y_values = || curves.iter().flatten().map(|p| p.1.max(0.001));
    let y_max = y_values().fold(0.0, f64::max) * 1.25;
    let y_min = y_values().fold(f64::INFINITY, f64::min) * 0.8;
    let mut ticks = vec![0, milli(2f64.log10())];
    ticks.extend((1..=x_max as i32).map(|d| d * 1000));

    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let mut chart = styled(&root, title)
            .build_cartesian_2d(
                (0..milli(x_max)).with_key_points(ticks),
                (y_min..y_max)
                    .log_scale()
                    .with_key_points(ticks_1_2_5(y_min, y_max)),
            )
            .map_err(|e| e.to_string())?;
        let mut mesh = chart.configure_mesh();
        mesh.x_desc("percentile (log scale of 1/(1-p))")
            .y_desc("one-way latency (µs, log scale)")
            .x_label_formatter(&|x| percentile_tick(f64::from(*x) / MILLI))
            .y_label_formatter(&|y| fmt_axis(*y));
        house_mesh(&mut mesh).draw().map_err(|e| e.to_string())?;
        for (i, (s, points)) in drawn.iter().zip(curves).enumerate() {
            draw_line(&mut chart, points, COLORS[i % COLORS.len()], s.label)?;
        }
        draw_legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

/// Bandwidth (Gb/s) against message size, one curve per series, the size axis in powers of two.
pub(crate) fn bandwidth_svg(title: &str, series: &[BandwidthSeries]) -> Result<String, String> {
    let all: Vec<(u64, f64)> = series
        .iter()
        .flat_map(|s| s.points.iter().copied())
        .collect();
    if all.is_empty() {
        return Err("no bandwidth results to plot".into());
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
    let single_size = all.iter().all(|p| p.0 == all[0].0);

    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let mut chart = styled(&root, title)
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
            let color = COLORS[i % COLORS.len()];
            let mut points: Vec<(i32, f64)> = s
                .points
                .iter()
                .map(|&(sz, g)| (milli(log2(sz)), g))
                .collect();
            points.sort_by_key(|p| p.0);
            // Markers: a single-size run is a point, not an invisible zero-length line; with one size
            // the points also carry their value, as there is no curve to read against the axis.
            let radius = if single_size { 6 } else { 4 };
            draw_marked_line(&mut chart, &points, color, s.label, radius)?;
            if single_size {
                chart
                    .draw_series(points.iter().map(|&(x, y)| {
                        EmptyElement::at((x, y))
                            + Text::new(format!("{y:.2} Gb/s"), (12, -8), ("sans-serif", 15))
                    }))
                    .map_err(|e| e.to_string())?;
            }
        }
        draw_legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

/// The frame every chart shares: title, margins and room for the axis labels.
pub(crate) fn styled<'a, 'b, DB: DrawingBackend>(
    root: &'a DrawingArea<DB, plotters::coord::Shift>,
    title: &'b str,
) -> ChartBuilder<'a, 'b, DB> {
    let mut b = ChartBuilder::on(root);
    b.caption(title, ("sans-serif", 22))
        .margin(20)
        .margin_right(50)
        .x_label_area_size(50)
        .y_label_area_size(70);
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

/// One curve: a line of `color` with its legend entry.
pub(crate) fn draw_line<DB: DrawingBackend, CT: CoordTranslate<From = (i32, f64)>>(
    chart: &mut ChartContext<'_, DB, CT>,
    points: Vec<(i32, f64)>,
    color: RGBColor,
    label: &str,
) -> Result<(), String> {
    chart
        .draw_series(LineSeries::new(points, color.stroke_width(2)))
        .map_err(|e| e.to_string())?
        .label(label)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(3)));
    Ok(())
}

/// [`draw_line`] with a dot of `radius` at each point: the measured values on the curve.
pub(crate) fn draw_marked_line<DB: DrawingBackend, CT: CoordTranslate<From = (i32, f64)>>(
    chart: &mut ChartContext<'_, DB, CT>,
    points: &[(i32, f64)],
    color: RGBColor,
    label: &str,
    radius: i32,
) -> Result<(), String> {
    draw_line(chart, points.to_vec(), color, label)?;
    chart
        .draw_series(
            points
                .iter()
                .map(|&p| Circle::new(p, radius, color.filled())),
        )
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// The legend box at `position`.
pub(crate) fn draw_legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    position: SeriesLabelPosition,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 15))
        .draw()
        .map_err(|e| e.to_string())
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
    }

    #[test]
    fn latency_plot_is_valid_svg_with_every_series_and_tick() {
        let mut a = new_latency_histogram();
        let mut b = new_latency_histogram();
        for i in 0..10_000u64 {
            a.record(1000 + i % 500).unwrap();
            b.record(5000 + (i * 7) % 3000).unwrap();
        }
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
                "RoCE v2 (soft)",
                "TCP",
                "50%",
                "90%",
                "99%",
                "99.9%",
                "99.99%",
            ],
        );
        assert!(t.iter().any(|x| x.contains("µs")));
        let doc = roxmltree::Document::parse(&svg).unwrap();
        // Two curves of CURVE_POINTS + 1 points each, plus legend lines.
        let long_lines = doc
            .descendants()
            .filter(|n| n.has_tag_name("polyline"))
            .filter(|n| {
                n.attribute("points")
                    .is_some_and(|p| p.split(' ').count() > CURVE_POINTS)
            })
            .count();
        assert_eq!(long_lines, 2);
        assert!(latency_svg("x", &[]).is_err());
    }

    #[test]
    fn bandwidth_plot_labels_sizes_in_binary_units() {
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
        let doc = roxmltree::Document::parse(&svg).unwrap();
        assert_eq!(
            doc.descendants()
                .filter(|n| n.has_tag_name("circle"))
                .count(),
            4
        );
        assert!(bandwidth_svg("x", &[]).is_err());
        // Several sizes: curves, no value labels.
        assert!(!t.iter().any(|x| x.ends_with(" Gb/s")), "{t:?}");
    }

    #[test]
    fn single_size_bandwidth_points_carry_their_value() {
        let svg = bandwidth_svg(
            "write_bw",
            &[
                BandwidthSeries {
                    label: "RoCE v2 (soft)",
                    points: vec![(65536, 38.791)],
                },
                BandwidthSeries {
                    label: "TCP",
                    points: vec![(65536, 21.3)],
                },
            ],
        )
        .unwrap();
        assert_texts(&svg, &["38.79 Gb/s", "21.30 Gb/s", "64 KiB"]);
    }
}
