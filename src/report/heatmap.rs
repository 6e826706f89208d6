//! A fabric matrix as an SVG heatmap (plotters' SVG backend: text stays `<text>`, no font library
//! needed): one square per (client, server), coloured from worst (red) to best (green), flagged pairs
//! outlined, failed and not-run pairs grey with a mark.

use crate::results::fabric::{Matrix, PairState, fmt_value};
use plotters::prelude::*;

/// Largest square side in pixels (smaller for big matrices).
const MAX_CELL: u32 = 48;

fn shade(t: f64) -> RGBColor {
    // Worst (0) red → amber → green (1).
    let t = t.clamp(0.0, 1.0);
    let (r, g) = if t < 0.5 {
        (215.0, 48.0 + 2.0 * t * 150.0)
    } else {
        (215.0 - (t - 0.5) * 2.0 * 170.0, 198.0)
    };
    RGBColor(r as u8, g as u8, 60)
}

/// The heatmap of one matrix of a run of `ranks` ranks, as SVG text.
pub(crate) fn heatmap_svg(m: &Matrix, ranks: usize) -> String {
    let metric = m.metric;
    let n = ranks.max(1);
    let cell = (MAX_CELL as usize).min((900 / n).max(2)) as u32;
    let margin = 70u32;
    let side = cell * n as u32;
    // Wide enough for the title and the legend lines however few ranks there are.
    let size = ((side + margin + 30).max(480), side + margin + 80);
    let values: Vec<f64> = m.cells().map(|(_, _, v)| v).collect();
    let lo = values.iter().copied().fold(f64::MAX, f64::min);
    let hi = values.iter().copied().fold(f64::MIN, f64::max);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        let _ = root.fill(&WHITE);
        let font = ("sans-serif", 14).into_font();
        let small = ("sans-serif", (cell as i32 / 3).clamp(7, 11)).into_font();
        let _ = root.draw(&Text::new(m.title(), (10, 8), font.clone()));
        let _ = root.draw(&Text::new(
            format!(
                "{} [{}]; row = client rank, column = server rank",
                metric.title(),
                metric.unit()
            ),
            (10, 28),
            small.clone(),
        ));
        let (x0, y0) = (margin as i32, (margin + 10) as i32);
        let c = cell as i32;
        let label_every = (n / 32).max(1);
        for i in (0..n).step_by(label_every) {
            let _ = root.draw(&Text::new(
                i.to_string(),
                (x0 + i as i32 * c + c / 3, y0 - 14),
                small.clone(),
            ));
            let _ = root.draw(&Text::new(
                i.to_string(),
                (x0 - 30, y0 + i as i32 * c + c / 3),
                small.clone(),
            ));
        }
        for row in 0..n {
            for col in 0..n {
                let (x, y) = (x0 + col as i32 * c, y0 + row as i32 * c);
                let value = m.value(row, col);
                let state = m.state(row, col);
                let fill = match value {
                    Some(v) => {
                        let mut t = if hi > lo { (v - lo) / (hi - lo) } else { 1.0 };
                        if !metric.higher_is_better() {
                            t = 1.0 - t;
                        }
                        shade(t)
                    }
                    None => match state {
                        None => RGBColor(245, 245, 245),
                        Some(_) => RGBColor(160, 160, 160),
                    },
                };
                let _ = root.draw(&Rectangle::new(
                    [(x, y), (x + c - 1, y + c - 1)],
                    fill.filled(),
                ));
                if m.is_flagged(row, col) {
                    let _ = root.draw(&Rectangle::new(
                        [(x + 1, y + 1), (x + c - 2, y + c - 2)],
                        BLACK.stroke_width(2),
                    ));
                }
                match (value, state) {
                    (Some(v), _) if c >= 36 => {
                        let text = fmt_value(v);
                        let _ = root.draw(&Text::new(text, (x + 3, y + c / 2 - 5), small.clone()));
                    }
                    (None, Some(PairState::Failed)) => {
                        let _ = root.draw(&Text::new("x", (x + c / 3, y + c / 4), small.clone()));
                    }
                    (None, Some(_)) => {
                        let _ = root.draw(&Text::new("-", (x + c / 3, y + c / 4), small.clone()));
                    }
                    _ => {}
                }
            }
        }
        let range = if values.is_empty() {
            "no values".to_owned()
        } else {
            format!(
                "red: worst {}, green: best {} {}",
                fmt_value(if metric.higher_is_better() { lo } else { hi }),
                fmt_value(if metric.higher_is_better() { hi } else { lo }),
                metric.unit()
            )
        };
        let y = (side + margin + 30) as i32;
        let _ = root.draw(&Text::new(range, (10, y), small.clone()));
        let marks = "outlined: flagged; grey x: failed; grey -: not run (rank missing or lost)";
        let _ = root.draw(&Text::new(marks, (10, y + 18), small));
        let _ = root.present();
    }
    svg
}
