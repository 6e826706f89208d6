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

#[test]
fn an_incast_is_one_step_of_senders_into_the_receiver() {
    let p = |receiver, senders| Pattern::Incast { receiver, senders };
    let pairs = |steps: Vec<Step>| -> Vec<(usize, usize)> {
        assert_eq!(steps.len(), 1, "one step");
        steps[0]
            .pairs
            .iter()
            .map(|p| (p.client, p.server))
            .collect()
    };
    // Every other rank by default; the first N others in rank order with --incast-senders N.
    assert_eq!(
        pairs(p(0, None).steps(4).unwrap()),
        [(1, 0), (2, 0), (3, 0)]
    );
    assert_eq!(pairs(p(2, Some(2)).steps(5).unwrap()), [(0, 2), (1, 2)]);
    assert_eq!(pairs(p(1, Some(1)).steps(2).unwrap()), [(0, 1)]);
    assert_eq!(p(3, Some(2)).describe(), "incast 2>3");
    assert_eq!(p(0, None).describe(), "incast all>0");
    // The flag that does not fit the job is named.
    let e = p(3, None).steps(3).unwrap_err();
    assert!(
        e.starts_with("--incast-receiver 3: the job has 3 ranks (0..2)"),
        "{e}"
    );
    let e = p(0, Some(3)).steps(3).unwrap_err();
    assert!(
        e.starts_with("--incast-senders 3: the job has 2 ranks besides"),
        "{e}"
    );
    assert!(
        p(0, Some(0))
            .steps(3)
            .unwrap_err()
            .starts_with("--incast-senders 0")
    );
    assert!(
        p(0, None)
            .steps(1)
            .unwrap_err()
            .contains("--incast-senders")
    );
}
