use super::*;
use std::collections::BTreeSet;

fn check_all_pairs(n: usize) {
    let steps = Pattern::AllPairs.steps(n).unwrap();
    let rounds = if n.is_multiple_of(2) { n - 1 } else { n };
    assert_eq!(steps.len(), 2 * rounds, "n = {n}");
    let mut seen = BTreeSet::new();
    for step in &steps {
        let mut busy = BTreeSet::new();
        for p in &step.pairs {
            assert!(
                busy.insert(p.client) && busy.insert(p.server),
                "n = {n}: a rank twice in a step"
            );
            assert!(seen.insert((p.client, p.server)), "n = {n}: {p:?} twice");
        }
        assert_eq!(step.pairs.len(), n / 2);
    }
    assert_eq!(seen.len(), n * (n - 1));
}

#[test]
fn circle_method_covers_every_pair_once_per_direction() {
    for n in 2..=17 {
        check_all_pairs(n);
    }
}

#[test]
fn ring_and_bisection() {
    let ring = Pattern::Ring.steps(5).unwrap();
    let pairs: BTreeSet<_> = ring
        .iter()
        .flat_map(|s| s.pairs.iter().map(|p| (p.client, p.server)))
        .collect();
    let want: BTreeSet<_> = (0..5)
        .flat_map(|i| [(i, (i + 1) % 5), ((i + 1) % 5, i)])
        .collect();
    assert_eq!(pairs, want);
    let bis = Pattern::Bisection.steps(6).unwrap();
    assert_eq!(bis.len(), 2);
    assert_eq!(
        bis[0].pairs,
        vec![
            Pair {
                client: 0,
                server: 3
            },
            Pair {
                client: 1,
                server: 4
            },
            Pair {
                client: 2,
                server: 5
            }
        ]
    );
}

#[test]
fn a_pairs_file_is_packed_into_disjoint_steps() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("pairs");
    std::fs::write(&f, "# client server\n0 1\n2 3\n1 0 # back\n0 2\n").unwrap();
    let p = Pattern::from_file(&f).unwrap();
    let steps = p.steps(4).unwrap();
    // 0>1 and 2>3 together; 1>0 waits for 0>1; 0>2 waits for 1>0 (rank 0 is busy there).
    assert_eq!(steps.len(), 3);
    assert_eq!(steps[0].pairs.len(), 2);
    assert!(p.steps(3).unwrap_err().contains("rank 3"));
    std::fs::write(&f, "0 0\n").unwrap();
    assert!(Pattern::from_file(&f).unwrap_err().contains("itself"));
}
