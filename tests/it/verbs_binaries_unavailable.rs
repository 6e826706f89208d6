//! `--transport verbs` through the six binaries where verbs cannot run: each cause has its own message,
//! exit code 2, and the binary says so before it waits for any peer. (The cases and the tricks that
//! produce them are those of tests/verbs_unavailable.rs, which checks the same messages at library level.)
#![cfg(feature = "verbs")]

use crate::common;
use crate::common::assert_contains;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn libibverbs_path() -> Option<PathBuf> {
    let out = Command::new("ldconfig").arg("-p").output().ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.trim_start().starts_with("libibverbs.so.1 ("))
        .and_then(|l| l.split("=> ").nth(1))
        .map(|p| PathBuf::from(p.trim()))
}

fn host_has_rdma() -> bool {
    Path::new("/sys/class/infiniband_verbs").exists()
}

/// Runs `cmd` with a 20 s limit; returns exit code, stdout and stderr.
fn run(cmd: &mut Command) -> (i32, String, String) {
    let mut child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("the binary waited instead of failing at once");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn port() -> String {
    common::free_port().to_string()
}

#[test]
fn missing_libibverbs_is_named_by_the_binaries() {
    let bin = common::bin("write_bw");
    let p = port();
    let (code, out, err) = match libibverbs_path() {
        None => run(Command::new(bin).args(["--transport", "verbs", "-p", &p])),
        Some(lib) => {
            let empty = tempfile::NamedTempFile::new().unwrap();
            let script = format!(
                "mount --bind {} {} && exec {bin} --transport verbs -p {p}",
                empty.path().display(),
                lib.display(),
            );
            let flags = [vec!["-m"], vec!["-r", "-m"]]
                .into_iter()
                .find(|f| matches!(Command::new("unshare").args(f).arg("true").status(), Ok(s) if s.success()));
            let Some(flags) = flags else {
                common::skip(
                    "libibverbs is installed and no mount namespace can be created to hide it",
                );
                return;
            };
            run(Command::new("unshare")
                .args(&flags)
                .args(["sh", "-c", &script]))
        }
    };
    assert_eq!(code, 2, "{err}");
    assert_contains(&err, "libibverbs is not installed");
    assert_contains(&err, "--transport soft");
    assert!(!out.contains("Waiting for client"), "{out}");
}

/// A sysfs tree with the host's network interfaces and, when `with_verbs`, an empty
/// `class/infiniband_verbs` (ib_uverbs loaded, no device): what the binaries see through `SYSFS_PATH`,
/// which they and libibverbs honour, whatever the host's own /sys has.
fn fake_sysfs(with_verbs: bool) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("class")).unwrap();
    if with_verbs {
        std::fs::create_dir_all(d.path().join("class/infiniband_verbs")).unwrap();
        std::fs::write(d.path().join("class/infiniband_verbs/abi_version"), "6\n").unwrap();
    }
    std::os::unix::fs::symlink("/sys/class/net", d.path().join("class/net")).unwrap();
    d
}

/// True (and says so) when rdma-core is not installed: the binaries then stop before any of this.
fn skip_without_libibverbs() -> bool {
    common::skip_unless(
        libibverbs_path().is_some(),
        "needs rdma-core (libibverbs1) installed",
    )
}

#[test]
fn kernel_without_rdma_is_named_by_the_binaries() {
    if skip_without_libibverbs() {
        return;
    }
    // A host with RDMA gets a sysfs without it; elsewhere the real one is the case itself.
    let sysfs = host_has_rdma().then(|| fake_sysfs(false));
    for test in ["read_lat", "send_bw"] {
        let mut cmd = Command::new(common::bin(test));
        cmd.args(["--transport", "verbs", "-d", "mlx5_0", "-p", &port()]);
        if let Some(d) = &sysfs {
            cmd.env("SYSFS_PATH", d.path());
        }
        let (code, out, err) = run(&mut cmd);
        assert_eq!(code, 2, "{err}");
        assert_contains(&err, "this kernel has no RDMA support");
        assert_contains(&err, "interfaces here: ");
        assert!(!out.contains("Waiting for client"), "{out}");
    }
}

/// The sysfs is faked, so this runs the same on hosts with RDMA devices.
#[test]
fn no_devices_lists_interfaces_for_soft_through_the_binaries() {
    if skip_without_libibverbs() {
        return;
    }
    let d = fake_sysfs(true);
    let (code, _, err) = run(Command::new(common::bin("write_lat"))
        .args(["--transport", "verbs", "-p", &port()])
        .env("SYSFS_PATH", d.path()));
    assert_eq!(code, 2, "{err}");
    assert_contains(&err, "no RDMA devices found");
    assert!(
        err.contains("--transport soft -d IFACE (interfaces here: "),
        "{err}"
    );
}

#[test]
fn verbs_flags_are_accepted_before_the_device_is_looked_up() {
    // -I, -t, -Q, -q, -b, -m, -x, --ipv6 all parse for verbs; the failure is the machine's, not a usage error.
    let (code, _, err) = run(Command::new(common::bin("write_bw")).args([
        "--transport",
        "verbs",
        "-I",
        "64",
        "-t",
        "64",
        "-Q",
        "8",
        "-q",
        "2",
        "-b",
        "-m",
        "1024",
        "-x",
        "1",
        "-p",
        &port(),
    ]));
    assert_eq!(code, 2, "{err}");
    assert_contains(&err, "setting up the verbs transport");
}
