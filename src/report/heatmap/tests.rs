use super::*;
use crate::results::fabric::{Leg, MatrixMetric};

/// Three ranks: every pair at 10 Gb/s but 1 -> 0 at 7.9 (-21 %), and 2 -> 1 failed.
fn matrix() -> (Matrix, Vec<Host>) {
    let v = |x: f64| Some(x);
    let m = Matrix {
        leg: Leg::AsGiven,
        label: "tcp".into(),
        test: "write_bw".into(),
        metric: MatrixMetric::BwAvg,
        unit: "Gb/s".into(),
        size_bytes: Some(65536),
        judged: true,
        values: vec![
            vec![None, v(10.0), v(10.0)],
            vec![v(7.9), None, v(10.0)],
            vec![v(10.0), None, None],
        ],
        status: vec![
            vec![None, Some(PairState::Ok), Some(PairState::Ok)],
            vec![Some(PairState::Ok), None, Some(PairState::Ok)],
            vec![Some(PairState::Ok), Some(PairState::Failed), None],
        ],
        flagged: Some(vec![
            vec![false, false, false],
            vec![true, false, false],
            vec![false, false, false],
        ]),
        limit: None,
        incast: None,
    };
    let hosts = (0..3)
        .map(|rank| Host {
            rank,
            host: format!("cn0{rank}"),
            ..Host::default()
        })
        .collect();
    (m, hosts)
}

fn fill_of(doc: &roxmltree::Document, client: usize, server: usize) -> String {
    doc.descendants()
        .find(|n| {
            n.attribute("class") == Some("cell")
                && n.attribute("data-client") == Some(&client.to_string())
                && n.attribute("data-server") == Some(&server.to_string())
        })
        .and_then(|n| n.attribute("fill"))
        .unwrap_or_else(|| panic!("no cell {client},{server}"))
        .to_owned()
}

fn rgb(hex: &str) -> (u8, u8, u8) {
    let p = |i: usize| u8::from_str_radix(&hex[i..i + 2], 16).unwrap();
    (p(1), p(3), p(5))
}

#[test]
fn the_svg_has_a_colour_bar_axis_titles_and_rank_host_labels() {
    let (m, hosts) = matrix();
    let svg = heatmap_svg(&m, 3, &hosts);
    let doc = roxmltree::Document::parse(&svg).expect("well-formed SVG");
    let bar = doc
        .descendants()
        .find(|n| n.attribute("id") == Some("colour-bar"))
        .expect("a colour bar");
    let labels: Vec<String> = bar
        .descendants()
        .filter(|n| n.attribute("class") == Some("bar-label"))
        .filter_map(|n| n.text().map(str::to_owned))
        .collect();
    assert_eq!(
        labels,
        ["50% or worse", "75%", "90%", "97%", "100% and better"]
    );
    assert!(bar.descendants().filter(|n| n.has_tag_name("rect")).count() >= 20);
    let text = |id: &str| {
        doc.descendants()
            .find(|n| n.attribute("id") == Some(id))
            .and_then(|n| n.text())
            .unwrap_or_else(|| panic!("no {id}"))
            .to_owned()
    };
    assert_eq!(text("x-title"), "server (rank:host)");
    assert_eq!(text("y-title"), "client (rank:host)");
    assert!(text("subtitle").contains("ratio to the median, 10.00 Gb/s"));
    for class in ["row-label", "col-label"] {
        let l: Vec<&str> = doc
            .descendants()
            .filter(|n| n.attribute("class") == Some(class))
            .filter_map(|n| n.text())
            .collect();
        assert_eq!(l, ["0:cn00", "1:cn01", "2:cn02"], "{class}");
    }
    // The cells take at least half the canvas's width: no half-empty picture.
    let width: usize = doc
        .root_element()
        .attribute("width")
        .unwrap()
        .parse()
        .unwrap();
    let cells: Vec<_> = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("cell"))
        .collect();
    assert_eq!(cells.len(), 9);
    let x = |n: &roxmltree::Node, k: &str| -> usize { n.attribute(k).unwrap().parse().unwrap() };
    let span = cells
        .iter()
        .map(|c| x(c, "x") + x(c, "width"))
        .max()
        .unwrap()
        - cells.iter().map(|c| x(c, "x")).min().unwrap();
    assert!(2 * span >= width, "cells span {span} of {width} px");
}

#[test]
fn a_21_percent_shortfall_is_amber_not_red_against_the_median_green() {
    let (m, hosts) = matrix();
    let svg = heatmap_svg(&m, 3, &hosts);
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let median = rgb(&fill_of(&doc, 0, 1));
    let low = rgb(&fill_of(&doc, 1, 0));
    assert_eq!(median, STOPS[4].1, "the median is the scale's green");
    // 0.79 of the median: between the 75 % orange and the 90 % yellow, far from the 50 % red.
    assert_ne!(low, STOPS[0].1);
    assert!(low.1 >= 130 && low.0 >= 230, "{low:?}");
    // A relative scale would have painted it the worst colour; this one does only at half the median.
    assert_eq!(shade(0.5), STOPS[0].1);
    assert_eq!(shade(0.2), STOPS[0].1);
    assert_eq!(shade(1.3), STOPS[4].1);
    // Flagged and failed cells keep their marks.
    assert!(svg.contains(r#"data-client="1" data-server="0""#));
    assert_eq!(fill_of(&doc, 2, 1), "#a0a0a0");
    assert_eq!(fill_of(&doc, 0, 0), "#f5f5f5");
}

#[test]
fn latency_is_coloured_by_the_median_over_the_value() {
    let (mut m, hosts) = matrix();
    m.metric = MatrixMetric::LatMedian;
    m.values[1][0] = Some(20.0); // twice the median latency: half as good
    let doc_text = heatmap_svg(&m, 3, &hosts);
    let doc = roxmltree::Document::parse(&doc_text).unwrap();
    assert_eq!(rgb(&fill_of(&doc, 1, 0)), STOPS[0].1);
    assert!(doc_text.contains("median / median latency"));
}
