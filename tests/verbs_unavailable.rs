//! Every way `--transport verbs` can be unavailable gets its own message and exit code 2.
//!
//! The binary under test is the `verbs_smoke` example (built by `cargo test`), which opens the
//! transport exactly as the test binaries do. Cases, as far as a machine allows:
//! - libibverbs missing: hidden in a private mount namespace (an empty file bind-mounted over
//!   libibverbs.so.1, so the run-time dlopen really fails), or really absent;
//! - kernel without RDMA: the real kernel here (no ib_uverbs), with rdma-core installed;
//! - no devices: libibverbs pointed by `SYSFS_PATH` at a tree with the uverbs ABI file and no device.
#![cfg(feature = "verbs")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn smoke_bin() -> PathBuf {
    // target/debug/deps/verbs_unavailable-HASH -> target/debug/examples/verbs_smoke
    let exe = std::env::current_exe().unwrap();
    let p = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples/verbs_smoke");
    assert!(
        p.exists(),
        "{} not built (cargo test builds examples)",
        p.display()
    );
    p
}

/// Where the dynamic loader finds libibverbs.so.1 on this machine, if anywhere.
fn libibverbs_path() -> Option<PathBuf> {
    let out = Command::new("ldconfig").arg("-p").output().ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.trim_start().starts_with("libibverbs.so.1 ("))
        .and_then(|l| l.split("=> ").nth(1))
        .map(|p| PathBuf::from(p.trim()))
}

fn run(cmd: &mut Command) -> (i32, String) {
    let Output { status, stderr, .. } = cmd.output().expect("spawn");
    (
        status.code().unwrap_or(-1),
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}

fn host_has_rdma() -> bool {
    Path::new("/sys/class/infiniband_verbs").exists()
}

#[test]
fn missing_libibverbs_is_named_with_the_fix() {
    let bin = smoke_bin();
    let (code, err) = match libibverbs_path() {
        None => run(Command::new(&bin).arg("devices")),
        Some(lib) => {
            let empty = tempfile::NamedTempFile::new().unwrap();
            let script = format!(
                "mount --bind {} {} && exec {} devices",
                empty.path().display(),
                lib.display(),
                bin.display()
            );
            // As root a mount namespace is enough; otherwise (CI runners) a user namespace grants it.
            let flags = [vec!["-m"], vec!["-r", "-m"]]
                .into_iter()
                .find(|f| matches!(Command::new("unshare").args(f).arg("true").status(), Ok(s) if s.success()));
            let Some(flags) = flags else {
                eprintln!(
                    "skipped: libibverbs is installed and no mount namespace can be created to hide it"
                );
                return;
            };
            run(Command::new("unshare")
                .args(&flags)
                .args(["sh", "-c", &script]))
        }
    };
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("libibverbs is not installed"), "{err}");
    assert!(
        err.contains("apt-get install rdma-core ibverbs-providers"),
        "{err}"
    );
    assert!(err.contains("--transport soft"), "{err}");
}

#[test]
fn kernel_without_rdma_is_named() {
    if host_has_rdma() {
        eprintln!("skipped: this kernel has RDMA (/sys/class/infiniband_verbs exists)");
        return;
    }
    let (code, err) = run(Command::new(smoke_bin()).args(["devices", "-d", "mlx5_0"]));
    assert_eq!(code, 2, "{err}");
    if libibverbs_path().is_none() {
        assert!(err.contains("libibverbs is not installed"), "{err}");
    } else {
        assert!(err.contains("this kernel has no RDMA support"), "{err}");
        assert!(
            err.contains("rdma link add rxe0 type rxe netdev IFACE"),
            "{err}"
        );
        assert!(err.contains("interfaces here: "), "{err}");
    }
}

#[test]
fn no_devices_lists_interfaces_for_soft() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("class/infiniband_verbs")).unwrap();
    std::fs::write(d.path().join("class/infiniband_verbs/abi_version"), "6\n").unwrap();
    std::os::unix::fs::symlink("/sys/class/net", d.path().join("class/net")).unwrap();
    let (code, err) = run(Command::new(smoke_bin())
        .args(["devices"])
        .env("SYSFS_PATH", d.path()));
    assert_eq!(code, 2, "{err}");
    if libibverbs_path().is_none() {
        assert!(err.contains("libibverbs is not installed"), "{err}");
        return;
    }
    if host_has_rdma() {
        // Newer libibverbs enumerate over netlink and may still see the real devices.
        eprintln!("note: host has RDMA; libibverbs said: {err}");
        return;
    }
    assert!(err.contains("no RDMA devices found"), "{err}");
    assert!(
        err.contains("--transport soft -d IFACE (interfaces here: "),
        "{err}"
    );
    assert!(err.contains("lo"), "{err}");
}
