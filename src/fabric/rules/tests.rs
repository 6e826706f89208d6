use super::*;
use crate::fabric::cell::{Cell, Figures, Status};

fn bw_cell(gbps: f32) -> Cell {
    Cell {
        status: Status::Ok,
        round: 0,
        figures: Figures {
            size_bytes: 65536,
            bw_gbps: gbps,
            ..Figures::default()
        },
        error: None,
    }
}

fn grid(n: usize, value: impl Fn(usize, usize) -> f32) -> Grid {
    let mut g = Grid::new(n);
    for c in 0..n {
        for s in 0..n {
            if c != s {
                g.set(c, s, bw_cell(value(c, s)));
            }
        }
    }
    g
}

#[test]
fn parses_clusterkit_style_tolerances() {
    assert_eq!(Rules::parse_fraction("93%").unwrap(), 0.93);
    assert_eq!(Rules::parse_fraction("0.5").unwrap(), 0.5);
    assert!(Rules::parse_fraction("130%").is_err());
    assert_eq!(Rules::parse_factor("2.1x").unwrap(), 2.1);
    assert!(Rules::parse_factor("0.5").is_err());
}

#[test]
fn a_slow_pair_is_a_bad_pair() {
    let g = grid(4, |c, s| if (c, s) == (0, 1) { 50.0 } else { 100.0 });
    let limit = Rules::default().limit(&g, MatrixMetric::BwAvg).unwrap();
    assert_eq!(limit.reference, 100.0);
    let f = flagged(&g, &limit);
    assert_eq!(f, vec![(0, 1)]);
    let d = diagnose(&g, MatrixMetric::BwAvg, &f);
    assert!(d.bad_hosts.is_empty());
    assert_eq!(d.bad_pairs, vec![(0, 1)]);
}

#[test]
fn a_host_slow_with_every_peer_is_a_bad_host() {
    let g = grid(5, |c, s| if c == 3 || s == 3 { 60.0 } else { 100.0 });
    let limit = Rules::default().limit(&g, MatrixMetric::BwAvg).unwrap();
    let f = flagged(&g, &limit);
    assert_eq!(f.len(), 8);
    let d = diagnose(&g, MatrixMetric::BwAvg, &f);
    assert_eq!(
        d.bad_hosts,
        vec![BadHost {
            rank: 3,
            flagged_peers: 4,
            measured_peers: 4
        }]
    );
    assert!(d.bad_pairs.is_empty());
}
