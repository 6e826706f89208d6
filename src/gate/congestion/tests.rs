use super::*;
use crate::results::congestion::testdata::{doc, victim};

fn verdicts(r: &GateReport) -> Vec<(String, String, Verdict)> {
    r.checks
        .iter()
        .map(|c| (c.subject.clone(), c.what.clone(), c.verdict))
        .collect()
}

fn v(s: &str, w: &str, verdict: Verdict) -> (String, String, Verdict) {
    (s.into(), w.into(), verdict)
}

#[test]
fn the_issues_targets_are_the_defaults() {
    let r = judge(&doc(), &CongestionGate::default(), Path::new("c.json"));
    assert_eq!(
        verdicts(&r),
        [
            v("lossy-gbn", "run ended well", Verdict::Pass),
            v("lossy-gbn", "validated", Verdict::Pass),
            v("ecn-dcqcn", "run ended well", Verdict::Pass),
            v("ecn-dcqcn", "validated", Verdict::Pass),
            v("ecn-dcqcn", "goodput of the bottleneck", Verdict::Pass),
            v("ecn-dcqcn", "Jain's index, steady state", Verdict::Pass),
            v("ecn-dcqcn", "victim p99 ÷ idle p99", Verdict::Pass),
            v("ecn-dcqcn", "switch drops", Verdict::Pass),
            v("pfc", "switch drops", Verdict::Skip),
            v("pfc-dcqcn", "switch drops", Verdict::Skip),
        ]
    );
    assert_eq!(r.exit_code(), 0);
    let victim = &r.checks[6];
    assert_eq!(victim.measured, "1.67x (20.0 / 12.0 µs)");
    assert_eq!(victim.limit, "<= 3x");
    assert_eq!(r.checks[4].measured, "91.0% (1.820 Gb/s)");
}

#[test]
fn each_miss_fails_with_its_reason() {
    let mut d = doc();
    let ecn = d
        .runs
        .iter_mut()
        .find(|r| r.discipline == Discipline::EcnDcqcn)
        .unwrap();
    ecn.totals.drops = Some(3);
    ecn.totals.headroom_drops = Some(1);
    ecn.totals.goodput_fraction = Some(0.85);
    ecn.totals.jain_steady = None;
    ecn.totals.steady_basis =
        "second half (never converged): less than one interval after it".into();
    ecn.victim = Some(victim(500, 40));
    ecn.outcome.ok = false;
    ecn.outcome.error = Some("the victim exited 1".into());
    ecn.ran.validate = false;
    let r = judge(&d, &CongestionGate::default(), Path::new("c.json"));
    assert_eq!(r.exit_code(), 1);
    let msgs: Vec<&str> = r
        .checks
        .iter()
        .filter(|c| c.verdict == Verdict::Fail)
        .map(|c| c.message.as_str())
        .collect();
    assert_eq!(
        msgs,
        [
            "ecn-dcqcn: the victim exited 1",
            "ecn-dcqcn: the run did not check its bytes (--validate); rerun with it",
            "ecn-dcqcn: the flows delivered 85.0% of the bottleneck, under 90%",
            "ecn-dcqcn: no steady-state fairness (second half (never converged): less than one \
             interval after it)",
            "ecn-dcqcn: the victim's p99 under load is withheld: it needs 1,000 samples (10 beyond \
             it), it has 500; run longer (-D)",
            "ecn-dcqcn: the switch dropped 4 packets (1 in PFC headroom)",
        ]
    );
}

#[test]
fn a_target_given_replaces_the_defaults_and_one_on_a_missing_discipline_fails() {
    let g = CongestionGate {
        min_goodput: vec![parse_target("lossy-gbn=80%").unwrap()],
        no_drop: vec![Discipline::Pfc],
        ..CongestionGate::default()
    };
    let r = judge(&doc(), &g, Path::new("c.json"));
    let tail: Vec<_> = verdicts(&r).into_iter().skip(4).collect();
    assert_eq!(
        tail,
        [
            // lossy-gbn delivered 75 %.
            v("lossy-gbn", "goodput of the bottleneck", Verdict::Fail),
            v("ecn-dcqcn", "Jain's index, steady state", Verdict::Pass),
            v("ecn-dcqcn", "victim p99 ÷ idle p99", Verdict::Pass),
            v("pfc", "switch drops", Verdict::Fail),
        ]
    );
    assert!(
        r.checks[7]
            .message
            .contains("run it with --disciplines pfc")
    );
    let only_always = CongestionGate {
        no_defaults: true,
        ..CongestionGate::default()
    };
    assert_eq!(
        judge(&doc(), &only_always, Path::new("c.json"))
            .checks
            .len(),
        4
    );
    // Without a victim the default victim target is skipped, a named one fails.
    let mut quiet = doc();
    quiet.setup.victim_size_bytes = None;
    let r = judge(&quiet, &CongestionGate::default(), Path::new("c.json"));
    assert_eq!(r.checks[6].verdict, Verdict::Skip);
    let named = CongestionGate {
        max_victim_p99: vec![parse_target("ecn-dcqcn=3").unwrap()],
        ..CongestionGate::default()
    };
    let r = judge(&quiet, &named, Path::new("c.json"));
    assert_eq!(r.checks[6].verdict, Verdict::Fail);
}

#[test]
fn targets_parse_as_fractions_percentages_and_ratios() {
    let t = parse_target("ecn-dcqcn=90%").unwrap();
    assert_eq!(t.discipline, Discipline::EcnDcqcn);
    assert!((t.value - 0.9).abs() < 1e-12);
    assert_eq!(parse_target("pfc=3x").unwrap().value, 3.0);
    assert_eq!(parse_target("pfc=0.95").unwrap().value, 0.95);
    assert!(
        parse_target("pfc")
            .unwrap_err()
            .contains("DISCIPLINE=VALUE")
    );
    assert!(
        parse_target("red=1")
            .unwrap_err()
            .contains("not a discipline")
    );
    assert!(
        parse_target("pfc=fast")
            .unwrap_err()
            .contains("not a number")
    );
}
