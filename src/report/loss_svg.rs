//! SVG plots of a loss sweep: a figure (goodput, a latency percentile) against the loss rate, on a
//! log10 loss axis, one curve per transport and recovery. The loss-free point sits one decade left
//! of the smallest rate, labelled 0.

use super::svg::{COLORS, draw_marked_line, figure, house_mesh, styled};
use plotters::prelude::*;

/// One curve: its legend and (loss rate 0..1, value) points.
pub(crate) struct LossSeries<'a> {
    /// Legend text, e.g. "RoCE v2 sr".
    pub label: &'a str,
    /// (loss probability, value), any order; a 0 rate is drawn at the axis' left end.
    pub points: Vec<(f64, f64)>,
}

/// `y` against the loss rate (log x), one curve per series; `log_y` for latencies that span decades.
pub(crate) fn loss_svg(
    title: &str,
    y_desc: &str,
    series: &[LossSeries],
    log_y: bool,
) -> Result<String, String> {
    let rates: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .filter(|&r| r > 0.0)
        .collect();
    let ys: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .filter(|y| y.is_finite())
        .collect();
    if ys.is_empty() {
        return Err("nothing to plot".into());
    }
    // x in thousandths of a decade (plotters keeps label formatters only over integer axes).
    let lo = rates.iter().copied().fold(1e-4, f64::min).log10().floor();
    let hi = rates.iter().copied().fold(1e-2, f64::max).log10().ceil();
    let zero_at = lo - 1.0;
    let x = |r: f64| {
        let d = if r > 0.0 { r.log10() } else { zero_at };
        (d * 1000.0).round() as i32
    };
    let ticks: Vec<i32> = (zero_at as i32..=hi as i32).map(|d| d * 1000).collect();
    let zero_tick = (zero_at * 1000.0) as i32;
    let y_hi = ys.iter().copied().fold(0.0, f64::max).max(1e-3) * 1.15;
    let y_lo = ys
        .iter()
        .copied()
        .filter(|&y| y > 0.0)
        .fold(f64::INFINITY, f64::min)
        .min(y_hi)
        / 1.5;
    let legend: Vec<(String, RGBColor)> = series
        .iter()
        .enumerate()
        .map(|(i, s)| (s.label.to_owned(), COLORS[i % COLORS.len()]))
        .collect();
    // The legend goes below the chart (svg::figure), where it covers no curve.
    figure(&legend, |root| {
        let mut b = styled(root, title);
        b.y_label_area_size(80);
        let x_range = (zero_tick - 300..(hi * 1000.0) as i32 + 300).with_key_points(ticks);
        let fmt_x = move |v: &i32| {
            if *v == zero_tick {
                "0".to_string()
            } else {
                let pct = 10f64.powf(f64::from(*v) / 1000.0) * 100.0;
                let s = format!("{pct:.4}");
                format!("{}%", s.trim_end_matches('0').trim_end_matches('.'))
            }
        };
        macro_rules! draw {
            ($chart:expr) => {{
                let mut chart = $chart;
                let mut mesh = chart.configure_mesh();
                mesh.x_desc("packet loss rate, each direction (log scale)")
                    .y_desc(y_desc)
                    .x_label_formatter(&fmt_x);
                house_mesh(&mut mesh).draw().map_err(|e| e.to_string())?;
                for (i, s) in series.iter().enumerate() {
                    let color = COLORS[i % COLORS.len()];
                    let mut pts: Vec<(i32, f64)> = s
                        .points
                        .iter()
                        .filter(|p| p.1.is_finite() && (!log_y || p.1 > 0.0))
                        .map(|&(r, y)| (x(r), y))
                        .collect();
                    pts.sort_by_key(|p| p.0);
                    draw_marked_line(&mut chart, &pts, color, 4)?;
                }
            }};
        }
        if log_y {
            draw!(
                b.build_cartesian_2d(x_range, (y_lo..y_hi).log_scale())
                    .map_err(|e| e.to_string())?
            );
        } else {
            draw!(
                b.build_cartesian_2d(x_range, 0.0..y_hi)
                    .map_err(|e| e.to_string())?
            );
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn curves_are_drawn_with_a_zero_tick_and_percent_labels() {
        let a = LossSeries {
            label: "RoCE v2 sr",
            points: vec![(0.0, 10.0), (0.0001, 9.9), (0.01, 8.0), (0.05, 5.0)],
        };
        let b = LossSeries {
            label: "TCP",
            points: vec![(0.0, 12.0), (0.01, 9.0)],
        };
        let svg = loss_svg("write_bw 64 KiB", "goodput (Gb/s)", &[a, b], false).unwrap();
        crate::report::svg::tests::assert_legend_covers_nothing(&svg, 2);
        crate::report::svg::tests::assert_texts(
            &svg,
            &["0", "1%", "0.01%", "RoCE v2 sr", "TCP", "write_bw 64 KiB"],
        );
        let lat = LossSeries {
            label: "x",
            points: vec![(0.0, 20.0), (0.05, 67_000.0)],
        };
        assert!(loss_svg("p99", "µs", &[lat], true).is_ok());
        assert!(loss_svg("none", "y", &[], false).is_err());
    }
}
