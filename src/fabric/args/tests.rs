use super::*;

fn v(args: &str) -> Vec<String> {
    args.split_whitespace().map(str::to_owned).collect()
}

#[test]
fn tests_fabric_flags_and_test_flags_are_told_apart() {
    let o = parse(&v(
        "write_bw -s 1M --results /r -d mlx5_0 send_lat --serial -p 19000 --validate -n 100",
    ))
    .unwrap();
    assert_eq!(
        o.tests.iter().map(|t| t.name()).collect::<Vec<_>>(),
        ["write_bw", "send_lat"]
    );
    assert_eq!(o.pass, v("-s 1M -d mlx5_0 --validate -n 100"));
    assert_eq!(o.results.as_deref(), Some(std::path::Path::new("/r")));
    assert!(o.serial);
    assert_eq!(o.base_port, 19000);
    assert_eq!(o.device().as_deref(), Some("mlx5_0"));
    let all = parse(&v("all --transport=tcp")).unwrap();
    assert_eq!(all.tests.len(), 6);
    assert_eq!(flag_value(&all.pass, "--transport").as_deref(), Some("tcp"));
}

#[test]
fn what_roce_fabric_refuses_says_why() {
    let e = |a: &str| parse(&v(a)).unwrap_err().to_string();
    assert!(e("write_bw 10.0.0.1").contains("no host argument"));
    assert!(e("write_bw --json x.json").contains("fabric.json"));
    assert!(e("write_bw --min-bw 10Gb/s").contains("roce_gate fabric.json"));
    assert!(e("-d lo").contains("no test given"));
    assert!(e("write_bw --compare --roce v2").contains("leave out --roce"));
    assert!(e("write_bw --pattern star").contains("ring, bisection or incast"));
    assert!(e("write_bw --incast-senders 2").contains("--pattern incast only"));
    assert!(e("write_bw --pattern ring --incast-receiver 1").contains("--incast-receiver applies"));
    assert!(e("write_bw --bw-fraction 120%").contains("between 0 and 100%"));
    assert!(e("write_bw --loopback-base 10.0.0.1").contains("127.0.0.0/8"));
    // An unknown flag followed by a flag stays alone: the binary names it in the preflight.
    let o = parse(&v("write_bw --bogus --join-timeout 1")).unwrap();
    assert_eq!(o.pass, v("--bogus"));
    assert_eq!(o.join_timeout, Duration::from_secs(1));
}

#[test]
fn the_parameter_check_sees_through_spellings_and_ignores_per_rank_flags() {
    let a = parse(&v("write_bw -s 1M -d mlx5_0 --cpu 3 -x 1")).unwrap();
    let b = parse(&v("write_bw --size=1M -d mlx5_1 -x 3")).unwrap();
    assert_eq!(a.shared_params(), b.shared_params());
    let c = parse(&v("write_bw -s 4K")).unwrap();
    assert_eq!(c.shared_params()["--size"], "4K");
    assert_ne!(a.shared_params(), c.shared_params());
    assert_ne!(
        a.shared_params(),
        parse(&v("write_bw -s 1M --serial"))
            .unwrap()
            .shared_params()
    );
}

#[test]
fn compare_legs_add_the_version_or_drop_what_tcp_refuses() {
    let o = parse(&v(
        "write_lat --compare --transport soft -d lo -m 1024 --io packet -n 10",
    ))
    .unwrap();
    assert_eq!(o.legs(), [Leg::RoceV1, Leg::RoceV2, Leg::Tcp]);
    assert_eq!(
        o.leg_args(Leg::RoceV1),
        v("--transport soft -d lo -m 1024 --io packet -n 10 --roce v1")
    );
    assert_eq!(o.leg_args(Leg::Tcp), v("-n 10 --transport tcp"));
    assert!(o.soft_on_loopback());
    assert!(
        !parse(&v("write_lat --transport tcp"))
            .unwrap()
            .soft_on_loopback()
    );
}

#[test]
fn pair_timeouts_follow_the_test_flags() {
    let d = parse(&v("write_bw -D 10"))
        .unwrap()
        .pair_timeout_for(crate::params::TestKind::from_name("write_bw").unwrap());
    assert_eq!(d, Duration::from_secs(45));
    let f = parse(&v("write_bw --pair-timeout 7"))
        .unwrap()
        .pair_timeout_for(crate::params::TestKind::from_name("write_bw").unwrap());
    assert_eq!(f, Duration::from_secs(7));
}

#[test]
fn roce_fabric_takes_every_format_flag_as_its_own() {
    assert!(crate::report::export::takes_format_files(&command()));
}

#[test]
fn an_incast_takes_its_receiver_and_senders_and_keeps_them_from_the_binaries() {
    let o = parse(&v(
        "write_bw --pattern incast -s 64K --incast-receiver 2 --incast-senders 3",
    ))
    .unwrap();
    assert_eq!(
        o.pattern,
        Pattern::Incast {
            receiver: 2,
            senders: Some(3)
        }
    );
    assert_eq!(o.pass, v("-s 64K"));
    assert_eq!(o.shared_params()["--pattern"], "incast 3>2");
    let o = parse(&v("write_bw --pattern incast")).unwrap();
    assert_eq!(
        o.pattern,
        Pattern::Incast {
            receiver: 0,
            senders: None
        }
    );
}

#[test]
fn watch_and_metrics_listen_are_fabric_options_and_listen_needs_watch() {
    let o = parse(&v(
        "write_bw --watch 30 --metrics-listen 127.0.0.1:9464 --metrics m.prom -n 10",
    ))
    .unwrap();
    assert_eq!(o.watch, Some(Duration::from_secs(30)));
    assert_eq!(o.metrics_listen, Some("127.0.0.1:9464".parse().unwrap()));
    assert_eq!(
        o.formats.metrics.as_deref(),
        Some(std::path::Path::new("m.prom"))
    );
    assert_eq!(o.pass, v("-n 10"));
    let e = |a: &str| parse(&v(a)).unwrap_err().to_string();
    assert!(e("write_bw --metrics-listen 127.0.0.1:9464").contains("--watch"));
    assert!(e("write_bw --watch 1 --metrics-listen 9464").contains("ADDR:PORT"));
    assert!(e("write_bw --watch 0").contains("above zero"));
}
