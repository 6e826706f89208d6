//! Unit tests of the command line: defaults, checks, and the messages that name flags.

use super::checks::DEFAULT_PERCENTILES;
use super::values::parse_size;
use super::*;
use crate::params::{IoKind, Metric, RoceVersion, Role, RunMode, TestKind, TransportKind};

const WBW: TestKind = TestKind::WRITE_BW;
const SLAT: TestKind = TestKind::SEND_LAT;

/// `test`'s options from the command line `args` (what follows the program name), whose syntax clap
/// must accept; the error is what the checks refuse. The unit tests of cli and app parse through it.
pub(crate) fn parse_raw(test: TestKind, args: &[&str]) -> Result<Options, Error> {
    Options::try_parse_from(test, [&["roce_test"], args].concat()).expect("clap accepts the syntax")
}

fn parse(test: TestKind, args: &[&str]) -> Result<Options, Error> {
    parse_raw(test, &[&["--transport", "tcp"], args].concat())
}

/// The error clap gives write_bw's command line `args` (the pacing tests use it too).
pub(super) fn clap_err(args: &[&str]) -> clap::Error {
    Options::try_parse_from(WBW, [&["roce_test"], args].concat()).expect_err("clap rejects")
}

#[test]
fn sizes_take_k_and_m_suffixes_and_hex() {
    assert_eq!(parse_size("64K"), Ok(65536));
    assert_eq!(parse_size("8M"), Ok(8 << 20));
    assert_eq!(parse_size("0x100"), Ok(256));
    assert_eq!(parse_size("2"), Ok(2));
    assert!(parse_size("0").unwrap_err().contains("out of range"));
    assert!(parse_size("4096M").unwrap_err().contains("out of range"));
    assert!(parse_size("big").unwrap_err().contains("not a size"));
}

#[test]
fn defaults_follow_perftest() {
    let o = parse(WBW, &[]).unwrap();
    assert_eq!(
        (o.role, o.port, o.sizes.clone(), o.mode),
        (Role::Server, 18515, vec![65536], RunMode::Iterations(5000))
    );
    assert_eq!((o.tx_depth, o.cq_mod), (128, None));
    let l = parse(SLAT, &["10.0.0.1"]).unwrap();
    assert_eq!(
        (l.role, l.sizes.clone(), l.tx_depth, l.host.as_deref()),
        (Role::Client, vec![2], 1, Some("10.0.0.1"))
    );
    assert_eq!(l.output.percentiles, DEFAULT_PERCENTILES.to_vec());
}

#[test]
fn all_sweeps_two_bytes_to_eight_mib() {
    let o = parse(WBW, &["-a", "-n", "5"]).unwrap();
    assert_eq!(o.sizes.first(), Some(&2));
    assert_eq!(o.sizes.last(), Some(&(8 << 20)));
    assert_eq!(o.sizes.len(), 23);
    assert_eq!(o.tx_depth, 5, "depth capped at iterations");
}

#[test]
fn duration_applies_the_margin_rule() {
    assert_eq!(
        parse(WBW, &["-D", "5"]).unwrap().mode,
        RunMode::Duration { secs: 5, margin: 1 }
    );
    assert_eq!(
        parse(WBW, &["-D", "1"]).unwrap().mode,
        RunMode::Duration { secs: 1, margin: 0 }
    );
    let e = parse(WBW, &["-D", "4", "-f", "2"]).unwrap_err();
    assert!(
        e.to_string().contains("greater than twice the margin"),
        "{e}"
    );
    assert!(matches!(
        parse(WBW, &["-D", "4", "-n", "10"]),
        Err(Error::Conflict {
            a: "-D",
            b: "-n",
            ..
        })
    ));
    assert!(matches!(
        parse(WBW, &["-f", "1"]),
        Err(Error::Invalid { flag: "-f", .. })
    ));
}

#[test]
fn flags_that_do_not_apply_are_errors_naming_them() {
    for (flag, args) in [
        ("-x", vec!["-x", "3"]),
        ("-d", vec!["-d", "eth0"]),
        ("--roce", vec!["--roce", "v2"]),
        ("-m", vec!["-m", "1024"]),
        ("-I", vec!["-I", "64"]),
        ("-i", vec!["-i", "1"]),
    ] {
        let e = parse(WBW, &args).unwrap_err();
        assert!(
            matches!(e, Error::NotApplicable { flag: f, .. } if f == flag),
            "{flag}: {e}"
        );
        assert!(e.to_string().contains("--transport tcp"), "{e}");
    }
    let e = parse(SLAT, &["-t", "16"]).unwrap_err();
    assert!(
        e.to_string().starts_with("-t does not apply to send_lat"),
        "{e}"
    );
    assert!(parse(SLAT, &["--output", "bandwidth"]).is_err());
    assert!(parse(WBW, &["--output", "latency"]).is_err());
    assert!(parse(WBW, &["--cpu_util"]).is_err());
}

#[test]
fn soft_defaults_to_v2_over_udp_and_v1_over_packet() {
    let o = parse_raw(WBW, &["-d", "lo"]).unwrap();
    assert_eq!(o.transport, TransportKind::Soft);
    assert_eq!(
        (o.device.roce, o.device.io),
        (Some(RoceVersion::V2), Some(IoKind::Udp))
    );
    assert!(
        o.transport_reason
            .to_string()
            .contains("-d lo is not an RDMA device")
    );
    let o = parse_raw(WBW, &["-d", "lo", "--roce", "v1"]).unwrap();
    assert_eq!(
        (o.device.roce, o.device.io),
        (Some(RoceVersion::V1), Some(IoKind::Packet))
    );
    let o = parse_raw(SLAT, &["--transport", "soft", "-d", "lo", "-I", "64"]).unwrap();
    assert_eq!(
        o.device.inline_size,
        Some(64),
        "-I is accepted on soft (a no-op)"
    );
}

#[test]
fn soft_flag_combinations_that_cannot_work_are_named() {
    let e = parse_raw(WBW, &["-d", "lo", "--roce", "v1", "--io", "udp"]).unwrap_err();
    assert!(e.to_string().contains("--io packet"), "{e}");
    let e = parse_raw(WBW, &["--transport", "soft"]).unwrap_err();
    assert!(
        matches!(e, Error::Missing { flag: "-d", .. }) && e.to_string().contains("-d lo"),
        "{e}"
    );
    let e = parse_raw(WBW, &["-d", "lo", "-i", "1"]).unwrap_err();
    assert!(matches!(e, Error::NotApplicable { flag: "-i", .. }), "{e}");
    let e = parse(WBW, &["--io", "udp"]).unwrap_err();
    assert!(
        matches!(e, Error::NotApplicable { flag: "--io", .. }),
        "{e}"
    );
    let e = parse(WBW, &["--bind", "127.0.0.1"]).unwrap_err();
    assert!(
        matches!(e, Error::NotApplicable { flag: "--bind", .. }),
        "{e}"
    );
    let e = parse(WBW, &["--no-gso"]).unwrap_err();
    assert!(
        matches!(
            e,
            Error::NotApplicable {
                flag: "--no-gso",
                ..
            }
        ),
        "{e}"
    );
    let e = parse_raw(WBW, &["-d", "lo", "--roce", "v1", "--no-gso"]).unwrap_err();
    assert!(e.to_string().contains("AF_PACKET"), "{e}");
    let o = parse_raw(WBW, &["-d", "lo", "--no-gso"]).unwrap();
    assert!(o.device.no_gso && o.device.io == Some(IoKind::Udp));
    let o = parse_raw(WBW, &["-d", "lo", "--io", "packet", "--no-gso"]).unwrap();
    assert!(
        o.device.no_gso && o.device.io == Some(IoKind::Packet),
        "RoCE v2 super-frames"
    );
}

#[test]
fn verbs_is_chosen_explicitly_and_keeps_verbs_flags() {
    let o = parse_raw(
        WBW,
        &[
            "--transport",
            "verbs",
            "-d",
            "mlx5_0",
            "-I",
            "128",
            "-x",
            "3",
        ],
    )
    .unwrap();
    assert_eq!(o.transport, TransportKind::Verbs);
    assert_eq!(
        (o.device.inline_size, o.device.gid_index),
        (Some(128), Some(3))
    );
    assert_eq!(o.device.io, None);
}

/// `-W` is perftest's on verbs, the default set when absent; the other transports refuse it by name.
#[test]
fn report_counters_are_verbs_only_and_default_to_the_congestion_set() {
    use crate::params::CounterRequest;
    let verbs = |extra: &[&str]| {
        parse_raw(
            WBW,
            &[&["--transport", "verbs", "-d", "mlx5_0"], extra].concat(),
        )
        .unwrap()
        .report_counters
    };
    assert_eq!(verbs(&[]), Some(CounterRequest::default()));
    let w = verbs(&["-W", "counters/port_xmit_data,hw_counters/out_of_buffer"]).unwrap();
    assert!(!w.default_set);
    assert_eq!(
        w.named,
        ["counters/port_xmit_data", "hw_counters/out_of_buffer"]
    );
    let long = verbs(&["--report-counters", "default,ethtool/rx_prio3_pause"]).unwrap();
    assert!(long.default_set && long.named == ["ethtool/rx_prio3_pause"]);
    assert_eq!(verbs(&["-W", "none"]), Some(CounterRequest::none()));
    assert_eq!(parse(WBW, &[]).unwrap().report_counters, None);
    let soft = parse_raw(WBW, &["-d", "lo", "-W", "hw_counters/np_cnp_sent"]).unwrap_err();
    let text = soft.to_string();
    assert!(
        text.starts_with("-W does not apply to --transport soft"),
        "{text}"
    );
    assert!(text.contains("counts its own packets"), "{text}");
    let tcp = parse(WBW, &["-W", "counters/port_xmit_data"]).unwrap_err();
    assert!(
        tcp.to_string()
            .starts_with("-W does not apply to --transport tcp")
    );
    for bad in ["", "a,,b", "/sys/class/x", "counters/../x", "none,default"] {
        let e = clap_err(&["--transport", "verbs", "-W", bad]).to_string();
        assert!(
            e.contains("-W") || e.contains("--report-counters"),
            "{bad}: {e}"
        );
    }
}

#[test]
fn clap_rejects_bad_values_and_repeats() {
    for args in [
        vec!["-s", "0"],
        vec!["-n", "4"],
        vec!["-p", "70000"],
        vec!["-t", "0"],
        vec!["-s", "1", "-s", "2"],
        vec!["--transport", "carrier-pigeon"],
        vec!["--percentiles", "99,101"],
        vec!["a", "b"],
    ] {
        let e = clap_err(&args);
        assert_eq!(e.exit_code(), 2, "{args:?}");
    }
}

#[test]
fn p100_is_refused_as_the_maximum_it_is() {
    // No sample ever lies beyond p100, so it could never be printed.
    let e = clap_err(&["--percentiles", "99,100"]);
    assert_eq!(e.exit_code(), 2);
    let text = e.to_string();
    assert!(
        text.contains("p100 is the maximum") && text.contains("max"),
        "{text}"
    );
}

#[test]
fn percentiles_are_sorted_and_deduplicated() {
    let o = parse(SLAT, &["--percentiles", "99.9,50,99,50"]).unwrap();
    assert_eq!(o.output.percentiles, vec![50.0, 99.0, 99.9]);
}

#[test]
fn every_test_binary_takes_every_format_flag() {
    for test in TestKind::EVERY {
        let cmd = super::args::command_for(test);
        assert!(crate::report::export::takes_format_files(&cmd), "{test}");
    }
}

#[test]
fn each_binary_s_help_names_its_test_groups_its_flags_and_hides_what_does_not_apply() {
    for test in TestKind::EVERY {
        let short = super::args::command_for(test).render_help().to_string();
        let long = super::args::command_for(test)
            .render_long_help()
            .to_string();
        let first = short.lines().next().unwrap_or_default();
        assert!(
            first.starts_with(&format!("roce_{test}: ")) && first.contains("between two hosts"),
            "{first}"
        );
        assert!(short.lines().count() <= 40, "roce_{test} -h:\n{short}");
        for heading in ["Test:", "Transport:", "Output:"] {
            assert!(
                short.contains(heading),
                "roce_{test} -h lacks {heading}:\n{short}"
            );
        }
        for heading in [
            "Test:",
            "Transport:",
            "Soft transport:",
            "Output:",
            "Perftest compatibility:",
            "Gates (exit 1 when a result misses one):",
            "Examples",
        ] {
            assert!(long.contains(heading), "roce_{test} --help lacks {heading}");
        }
        for text in [&short, &long] {
            assert!(
                !text.contains("scripts/"),
                "roce_{test} points into the source tree"
            );
        }
        let (absent, present) = match test.metric {
            Metric::Bandwidth => (
                ["--percentiles", "--max-p99", "--latency_gap"],
                "--tx-depth",
            ),
            Metric::Latency => (
                ["--tx-depth", "--bidirectional", "--min-bw"],
                "--percentiles",
            ),
        };
        for flag in absent {
            assert!(!long.contains(flag), "roce_{test} --help lists {flag}");
        }
        assert!(long.contains(present), "roce_{test} --help lacks {present}");
    }
    // Hidden is not removed: a command line written for another binary still parses.
    assert!(parse(WBW, &["--percentiles", "99"]).is_ok());
}

#[test]
fn events_is_local_to_soft_and_tcp_and_refused_on_verbs() {
    assert!(parse(WBW, &["-e"]).unwrap().events);
    assert!(parse(WBW, &["--events"]).unwrap().events);
    assert!(!parse(WBW, &[]).unwrap().events);
    assert!(parse_raw(WBW, &["-d", "lo", "-e"]).unwrap().events);
    let verbs = parse_raw(WBW, &["--transport", "verbs", "-e"]).unwrap_err();
    assert_eq!(
        verbs.to_string(),
        "-e does not apply to --transport verbs: roceperf busy-polls a verbs completion queue (it \
         opens no completion channel); run --transport soft or tcp to sleep on events; drop it"
    );
}
