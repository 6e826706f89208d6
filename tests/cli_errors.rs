//! Invalid flags and values are usage errors (exit 2) that name the flag; none of them starts a test.

mod common;
use common::{free_port, spawn};

fn usage_error(test: &str, args: &[&str], expect: &str) {
    let d = spawn(test, args).wait(20, &format!("{test} {args:?}"));
    assert_eq!(d.code(), 2, "{args:?}: {}", d.stderr);
    assert!(
        d.stderr.contains(expect),
        "{args:?}: expected {expect:?} in {}",
        d.stderr
    );
    assert!(
        !d.stdout.contains("Waiting for client"),
        "{args:?} must not start a server"
    );
}

#[test]
fn out_of_range_values_name_the_flag() {
    usage_error("write_bw", &["--transport", "tcp", "-s", "0"], "-s");
    usage_error(
        "write_bw",
        &["--transport", "tcp", "-s", "12Q"],
        "not a size",
    );
    usage_error(
        "write_bw",
        &["--transport", "tcp", "-n", "2"],
        "iterations are 5",
    );
    usage_error("write_bw", &["--transport", "tcp", "-t", "0"], "--tx-depth");
    usage_error("write_bw", &["--transport", "tcp", "-p", "99999"], "--port");
    usage_error(
        "send_lat",
        &["--transport", "tcp", "--percentiles", "99,200"],
        "percentile",
    );
    usage_error(
        "write_bw",
        &["--transport", "tcp", "--output", "everything"],
        "--output",
    );
    usage_error(
        "write_bw",
        &["--transport", "tcp", "--cpu", "4096"],
        "--cpu 4096",
    );
}

#[test]
fn repeated_and_unknown_flags_are_rejected() {
    usage_error(
        "write_bw",
        &["--transport", "tcp", "-s", "1", "-s", "2"],
        "cannot be used multiple times",
    );
    usage_error(
        "write_bw",
        &["--transport", "tcp", "--frobnicate"],
        "--frobnicate",
    );
    usage_error(
        "write_bw",
        &["--transport", "tcp", "host1", "host2"],
        "host2",
    );
}

#[test]
fn flags_that_do_not_apply_say_so() {
    usage_error(
        "write_bw",
        &["--transport", "tcp", "-x", "3"],
        "-x does not apply to --transport tcp",
    );
    usage_error(
        "write_bw",
        &["--transport", "tcp", "--roce", "v2"],
        "--roce does not apply",
    );
    usage_error(
        "send_lat",
        &["--transport", "tcp", "-t", "8"],
        "-t does not apply to send_lat",
    );
    usage_error(
        "write_bw",
        &["--transport", "tcp", "--cpu_util"],
        "give -D too",
    );
    usage_error(
        "write_bw",
        &["--transport", "tcp", "-D", "4", "-f", "2"],
        "twice the margin",
    );
    usage_error(
        "write_bw",
        &["--transport", "tcp", "-a", "-s", "64"],
        "-a and -s cannot be used together",
    );
}

#[test]
fn soft_without_an_interface_is_a_usage_error_naming_d() {
    usage_error(
        "write_bw",
        &["--transport", "soft"],
        "the soft transport needs a network interface: -d lo",
    );
    usage_error("send_bw", &[], "-d lo");
    usage_error(
        "write_bw",
        &["-d", "lo", "--roce", "v1", "--io", "udp"],
        "cannot travel over a UDP socket",
    );
}

#[test]
fn an_unknown_interface_is_a_setup_error_naming_it() {
    let d = spawn(
        "write_bw",
        &["-d", "nosuchif0", "-p", &free_port().to_string()],
    )
    .wait(20, "unknown interface");
    assert_eq!(d.code(), 2, "{}", d.stderr);
    assert!(d.stderr.contains("nosuchif0"), "{}", d.stderr);
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
