//! Invalid flags and values are usage errors (exit 2) that name the flag; none of them starts a test.

use crate::common;
use common::{free_port, spawn};

fn usage_error(test: &str, args: &[&str], expect: &str) {
    let d = common::assert_refused(test, args, &[expect]);
    assert!(
        !d.stdout.contains("Waiting for client"),
        "{args:?} must not start a server"
    );
}

/// Each (binary, arguments after `--transport tcp`, text the error must hold) is a usage error.
fn tcp_usage_errors(cases: &[(&str, &[&str], &str)]) {
    for &(test, args, expect) in cases {
        let mut full = vec!["--transport", "tcp"];
        full.extend_from_slice(args);
        usage_error(test, &full, expect);
    }
}

#[test]
fn out_of_range_values_name_the_flag() {
    tcp_usage_errors(&[
        ("write_bw", &["-s", "0"], "-s"),
        ("write_bw", &["-s", "12Q"], "not a size"),
        ("write_bw", &["-n", "2"], "iterations are 5"),
        ("write_bw", &["-t", "0"], "--tx-depth"),
        ("write_bw", &["-p", "99999"], "--port"),
        ("send_lat", &["--percentiles", "99,200"], "percentile"),
        ("write_bw", &["--output", "everything"], "--output"),
        ("write_bw", &["--cpu", "4096"], "--cpu 4096"),
        ("write_bw", &["--tclass", "256"], "--tclass"),
        ("write_bw", &["-S", "16"], "--sl"),
        ("send_lat", &["--sl", "x"], "--sl"),
        ("write_bw", &["--flow_label", "7"], "--flow_label"),
    ]);
    // Soft and verbs take --flow_label; each entry is 20 bits.
    usage_error(
        "write_bw",
        &["-d", "lo", "--flow_label", "1,1048576"],
        "a flow label is 20 bits, 0 .. 1048575",
    );
    usage_error(
        "atomic_lat",
        &["-d", "lo", "--flow_label", "x"],
        "--flow_label",
    );
}

#[test]
fn repeated_and_unknown_flags_are_rejected() {
    tcp_usage_errors(&[
        (
            "write_bw",
            &["-s", "1", "-s", "2"],
            "cannot be used multiple times",
        ),
        ("write_bw", &["--frobnicate"], "--frobnicate"),
        ("write_bw", &["host1", "host2"], "host2"),
    ]);
}

#[test]
fn flags_that_do_not_apply_say_so() {
    tcp_usage_errors(&[
        (
            "write_bw",
            &["-x", "3"],
            "-x does not apply to --transport tcp",
        ),
        ("write_bw", &["--roce", "v2"], "--roce does not apply"),
        (
            "write_bw",
            &["-W", "counters/port_xmit_data"],
            "-W does not apply to --transport tcp",
        ),
        ("send_lat", &["-t", "8"], "-t does not apply to send_lat"),
        ("write_bw", &["--cpu_util"], "give -D too"),
        ("write_bw", &["-D", "4", "-f", "2"], "twice the margin"),
        (
            "write_bw",
            &["-a", "-s", "64"],
            "-a and -s cannot be used together",
        ),
    ]);
}

#[test]
fn soft_without_an_interface_is_a_usage_error_naming_d() {
    usage_error(
        "write_bw",
        &["--transport", "soft"],
        "no -d: the soft transport needs a network interface: -d lo",
    );
    usage_error("send_bw", &[], "-d lo");
    usage_error("send_bw", &[], "or --transport tcp for the TCP baseline");
    usage_error(
        "write_bw",
        &["-d", "lo", "--roce", "v1", "--io", "udp"],
        "cannot travel over a UDP socket",
    );
}

/// `-W` reads an RDMA NIC's counters: on soft (the six tests and the atomics alike) it is a usage
/// error that says where the soft transport's own counters are.
#[test]
fn report_counters_on_soft_is_a_usage_error_naming_the_transport() {
    for test in ["write_bw", "read_lat", "atomic_bw"] {
        usage_error(
            test,
            &["-d", "lo", "-W", "hw_counters/np_cnp_sent"],
            "-W does not apply to --transport soft",
        );
    }
    usage_error(
        "send_bw",
        &["-d", "lo", "--report-counters", "counters/port_xmit_data"],
        "counts its own packets instead (-v, and counters in --json)",
    );
    usage_error(
        "write_bw",
        &["--transport", "verbs", "-W", "counters/../../etc"],
        "is not a counter under the port's directory",
    );
}

#[test]
fn an_unknown_interface_is_a_setup_error_naming_it() {
    let d = spawn(
        "write_bw",
        &["-d", "nosuchif0", "-p", &free_port().to_string()],
    )
    .wait(20, "unknown interface");
    d.assert_usage_error("nosuchif0");
    assert!(
        d.stderr.contains("auto chose soft") && d.stderr.contains("RDMA devices here:"),
        "says why soft was tried and which RDMA devices exist: {}",
        d.stderr
    );
}

#[test]
fn help_and_version_exit_zero() {
    let h = spawn("write_bw", &["--help"]).wait(20, "--help");
    assert_eq!(h.code(), 0);
    assert!(
        h.stdout.contains("--report_gbits") && h.stdout.contains("--connect-timeout"),
        "{}",
        h.stdout
    );
    let v = spawn("write_bw", &["--version"]).wait(20, "--version");
    assert_eq!(v.code(), 0);
    assert!(v.stdout.contains(env!("CARGO_PKG_VERSION")));
}

#[test]
fn every_binary_s_dash_h_is_a_short_page_naming_it_and_dash_dash_help_keeps_every_flag() {
    let bins = [
        ("roce_send_bw", env!("CARGO_BIN_EXE_roce_send_bw")),
        ("roce_write_bw", env!("CARGO_BIN_EXE_roce_write_bw")),
        ("roce_read_bw", env!("CARGO_BIN_EXE_roce_read_bw")),
        ("roce_send_lat", env!("CARGO_BIN_EXE_roce_send_lat")),
        ("roce_write_lat", env!("CARGO_BIN_EXE_roce_write_lat")),
        ("roce_read_lat", env!("CARGO_BIN_EXE_roce_read_lat")),
        ("roce_atomic_bw", env!("CARGO_BIN_EXE_roce_atomic_bw")),
        ("roce_atomic_lat", env!("CARGO_BIN_EXE_roce_atomic_lat")),
        ("roce_compare", env!("CARGO_BIN_EXE_roce_compare")),
        ("roce_gate", env!("CARGO_BIN_EXE_roce_gate")),
        ("roce_fabric", env!("CARGO_BIN_EXE_roce_fabric")),
        ("roce_ref", env!("CARGO_BIN_EXE_roce_ref")),
        ("roce_switch", env!("CARGO_BIN_EXE_roce_switch")),
    ];
    let help = |bin: &str, flag: &str| {
        let o = std::process::Command::new(bin)
            .arg(flag)
            .env("COLUMNS", "100")
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{bin} {flag}");
        String::from_utf8(o.stdout).unwrap()
    };
    for (name, bin) in bins {
        let (short, long) = (help(bin, "-h"), help(bin, "--help"));
        assert!(
            short.starts_with(&format!("{name}: ")),
            "{name} -h names the binary first:\n{short}"
        );
        let lines = short.lines().count();
        assert!(lines <= 40, "{name} -h is {lines} lines:\n{short}");
        assert!(
            long.lines().count() > lines && long.contains("--help"),
            "{name} --help keeps every flag"
        );
        for text in [&short, &long] {
            for line in text.lines() {
                assert!(line.chars().count() <= 100, "{name}: {line}");
            }
        }
    }
}

#[test]
fn rdma_cm_with_uc_or_ud_is_a_usage_error_naming_both_flags() {
    // UC everywhere (as perftest). UD runs in both dialects on soft (soft_rdma_cm) and on verbs
    // through librdmacm's UDP port space (below: past the flags, to the missing device).
    for (test, c, extra) in [
        ("write_bw", "UC", &["--transport", "soft", "-d", "lo"][..]),
        (
            "send_bw",
            "UC",
            &["--transport", "verbs", "-d", "rxe0", "--oob", "perftest"][..],
        ),
    ] {
        let mut args = extra.to_vec();
        args.extend(["-R", "-c", c]);
        usage_error(
            test,
            &args,
            &format!("-R and -c {c} cannot be used together"),
        );
    }
    let port = free_port().to_string();
    let args = [
        "--transport",
        "verbs",
        "-d",
        "nosuchrdma0",
        "-R",
        "-c",
        "UD",
        "-p",
        &port,
    ];
    for oob in ["roceperf", "perftest"] {
        let mut with = args.to_vec();
        with.extend(["--oob", oob]);
        let d = spawn("send_bw", &with).wait(20, "verbs -R -c UD");
        assert_eq!(d.code(), 2, "{}", d.stderr);
        assert!(
            !d.stderr.contains("cannot be used together") && !d.stderr.contains("soft only"),
            "verbs resolves UD through librdmacm in the {oob} dialect: {}",
            d.stderr
        );
    }
}

#[test]
fn warmup_is_bounded_like_n() {
    // Issue 33, defect 12: 2^64 - 1 warm-up iterations used to start a pair that never ended.
    tcp_usage_errors(&[
        (
            "write_bw",
            &["--warmup", "18446744073709551615"],
            "warm-up iterations are 0 .. 4294967296",
        ),
        ("send_lat", &["--warmup", "4294967297"], "--warmup"),
    ]);
}

/// Runs `bin` with `args`, some of them not UTF-8; what it printed, once it exited (within 20 s).
fn run_os(bin: &str, args: &[&std::ffi::OsStr]) -> common::Done {
    use std::process::{Command, Stdio};
    let mut child = Command::new(bin)
        .args(args)
        .env_remove("GITHUB_ACTIONS")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("{bin} {args:?}: still running after 20 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    common::Done {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn an_argument_that_is_not_utf8_is_named_by_its_flag() {
    // Issue 33, defect 11: clap said only "invalid UTF-8 was detected in one or more arguments", and
    // roce_gate and roce_fabric panicked.
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let bad = OsStr::from_bytes(b"eth\xff");
    let eq = |flag: &str| {
        let mut v = format!("{flag}=").into_bytes();
        v.extend_from_slice(b"\xff");
        std::ffi::OsString::from_vec(v)
    };
    use std::os::unix::ffi::OsStringExt;
    let write_bw = common::bin("write_bw");
    let gate = env!("CARGO_BIN_EXE_roce_gate");
    let compare = env!("CARGO_BIN_EXE_roce_compare");
    let fabric = env!("CARGO_BIN_EXE_roce_fabric");
    let s = OsStr::new;
    let ib_dev = eq("--ib-dev");
    for (bin, args, flag) in [
        (write_bw, vec![s("-d"), bad], "-d"),
        (write_bw, vec![ib_dev.as_os_str()], "--ib-dev"),
        (write_bw, vec![s("--transport"), s("tcp"), bad], "HOST"),
        (gate, vec![s("r.json"), s("--max-p99"), bad], "--max-p99"),
        (compare, vec![s("--local"), s("-d"), bad], "-d"),
        (fabric, vec![s("write_bw"), s("-d"), bad], "-d"),
    ] {
        let d = run_os(bin, &args);
        let what = format!("{bin} {args:?}");
        d.assert_ended(2, &[flag, "\\xFF", "not valid UTF-8"], &what);
        assert!(!d.stderr.contains("panicked"), "{what}: {}", d.stderr);
    }
    // A path need not be UTF-8: roce_gate reads it (here: finds it missing), a test binary takes it.
    let d = run_os(gate, &[bad, s("--max-p99"), s("1s")]);
    d.assert_ended(
        2,
        &["cannot read eth\u{fffd}"],
        "roce_gate with a file not named in UTF-8",
    );
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join(bad);
    let port = free_port().to_string();
    let d = run_os(
        write_bw,
        &[
            s("--transport"),
            s("tcp"),
            s("-p"),
            s(&port),
            s("--connect-timeout"),
            s("1"),
            s("--json"),
            json.as_os_str(),
            s("127.0.0.1"),
        ],
    );
    d.assert_ended(
        2,
        &["could not reach the server"],
        "--json not named in UTF-8",
    );
}

#[test]
fn congestion_control_flags_name_the_parameter_and_where_they_apply() {
    tcp_usage_errors(&[
        ("write_bw", &["--cc-param", "rp_bogus=1"], "rp_bogus"),
        (
            "write_bw",
            &["--cc-param", "rp_bogus=1"],
            "np_min_time_between_cnps",
        ),
        ("write_bw", &["--cc-param", "np_cnp_dscp=64"], "0 to 63"),
        ("write_bw", &["--cc", "cubic"], "--cc"),
        (
            "write_bw",
            &["--cc", "none"],
            "choose it with --tcp-congestion NAME",
        ),
        (
            "atomic_lat",
            &["--cc-param", "rp_ai_rate=10"],
            "--cc-param does not apply to --transport tcp",
        ),
    ]);
}
