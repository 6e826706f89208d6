//! `scripts/deps.sh` against fake machines: a fake file-system tree (`DEPS_ROOT`) and fake `apt-get`,
//! `apt-cache`, `sudo`, `id`, `getent`, `dpkg-architecture`, `uname`, `cargo`, `rustc` and `rustup` on an
//! otherwise empty PATH, each of which logs how it was called. Each test checks exactly which packages
//! the script decides to install (or that it stops, saying why), for one machine state.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Command;

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/deps.sh");

/// The logging stub every fake command is: one line `NAME ARGS` in $FAKE_LOG, then BODY.
fn stub(name: &str, body: &str) -> String {
    format!("#!/bin/bash\necho \"{name} $*\" >> \"$FAKE_LOG\"\n{body}\n")
}

/// A fake machine: what is installed, who runs the script.
struct Host {
    dir: tempfile::TempDir,
    uid: u32,
    sudo_user: Option<&'static str>,
}

/// What one run of deps.sh did.
#[derive(Debug)]
struct Run {
    code: i32,
    stderr: String,
    log: Vec<String>,
}

impl Run {
    /// The packages of the `apt-get install` call (empty when apt-get install was not called).
    fn installed(&self) -> BTreeSet<String> {
        self.log
            .iter()
            .filter_map(|l| l.strip_prefix("apt-get "))
            .filter(|l| l.split_whitespace().any(|w| w == "install"))
            .flat_map(|l| l.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
            .filter(|w| w != "install" && !w.starts_with('-'))
            .collect()
    }

    fn called(&self, prefix: &str) -> bool {
        self.log.iter().any(|l| l.starts_with(prefix))
    }
}

fn set(packages: &[&str]) -> BTreeSet<String> {
    packages.iter().map(|p| p.to_string()).collect()
}

impl Host {
    /// An empty machine run by root: no tools, no files, only bash (and `env`).
    fn empty() -> Host {
        let host = Host {
            dir: tempfile::tempdir().unwrap(),
            uid: 0,
            sudo_user: None,
        };
        for d in ["bin", "root", "home", "state"] {
            std::fs::create_dir_all(host.dir.path().join(d)).unwrap();
        }
        std::os::unix::fs::symlink(which("env"), host.dir.path().join("bin/env")).unwrap();
        host.exe("bin/apt-get", &stub("apt-get", ""));
        host.exe(
            "bin/id",
            &stub("id", "read -r uid < \"$FAKE_STATE/uid\"; echo \"$uid\""),
        );
        host.exe(
            "bin/getent",
            &stub(
                "getent",
                "while IFS= read -r l; do [[ $l == \"$2:\"* ]] && { echo \"$l\"; exit 0; }; done < \"$FAKE_STATE/passwd\"; exit 2",
            ),
        );
        host.exe(
            "bin/uname",
            &stub("uname", "read -r m < \"$FAKE_STATE/machine\"; echo \"$m\""),
        );
        host.write("state/machine", "x86_64\n");
        host.write("state/passwd", "root:x:0:0:root:/root:/bin/bash\n");
        host
    }

    /// Debian 12 on x86_64 with the build's packages: gcc, libc6-dev, cmake, make, libclang-dev
    /// (libclang1-14 + libclang-common-14-dev) and a current rustup toolchain with rustfmt and clippy.
    fn debian12_build() -> Host {
        let h = Host::empty();
        h.dpkg_architecture("x86_64-linux-gnu");
        h.tools(&["cc", "c++", "cmake", "make"]);
        h.libc("x86_64-linux-gnu");
        h.libclang_runtime(14, "x86_64-linux-gnu");
        h.clang_headers(14);
        h.files(&["root/usr/lib/llvm-14/lib/libclang.so"]); // libclang-14-dev's symlink
        h.files(&["root/etc/ssl/certs/ca-certificates.crt"]);
        h.rust_in("bin", "1.95.0");
        h.components(&["rustfmt", "clippy"]);
        h
    }

    /// `debian12_build` plus what the tests need.
    fn debian12_test() -> Host {
        let h = Host::debian12_build();
        h.tools(&[
            "tshark",
            "ip",
            "tcpdump",
            "ethtool",
            "iptables-legacy",
            "setpriv",
            "mpirun",
            "slurmctld",
            "slurmd",
            "srun",
            "munged",
            "valgrind",
            "jq",
            "promtool",
            "prometheus",
            "man",
            "mmdebstrap",
            "rpm",
            "rpmbuild",
            "rpm2cpio",
            "cpio",
            "objdump",
            "strip",
        ]);
        h.files(&["root/usr/lib/x86_64-linux-gnu/libibverbs.so.1"]);
        h
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Removes the files `rels` (what a fresh machine lacks).
    fn remove(&self, rels: &[&str]) {
        for rel in rels {
            std::fs::remove_file(self.path(rel)).unwrap();
        }
    }

    fn write(&self, rel: &str, text: &str) {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
    }

    fn exe(&self, rel: &str, text: &str) {
        self.write(rel, text);
        std::fs::set_permissions(self.path(rel), std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn files(&self, rels: &[&str]) {
        for r in rels {
            self.write(r, "");
        }
    }

    /// Commands that only need to exist (`command -v`).
    fn tools(&self, names: &[&str]) {
        for n in names {
            self.exe(&format!("bin/{n}"), &stub(n, ""));
        }
    }

    fn dpkg_architecture(&self, triplet: &str) {
        self.exe(
            "bin/dpkg-architecture",
            &stub("dpkg-architecture", &format!("echo {triplet}")),
        );
    }

    /// libc6-dev: the headers and the start files.
    fn libc(&self, triplet: &str) {
        self.files(&[
            "root/usr/include/stdio.h",
            &format!("root/usr/include/{triplet}/bits/types.h"),
            &format!("root/usr/lib/{triplet}/crt1.o"),
        ]);
    }

    /// libclang1-N as Debian lays it out: the library in the multiarch directory, `libclang.so.1` in
    /// LLVM's own.
    fn libclang_runtime(&self, n: u32, triplet: &str) {
        self.files(&[
            &format!("root/usr/lib/{triplet}/libclang-{n}.so.{n}.0.6"),
            &format!("root/usr/lib/{triplet}/libclang-{n}.so.1"),
            &format!("root/usr/lib/llvm-{n}/lib/libclang.so.1"),
            &format!("root/usr/lib/llvm-{n}/lib/libclang-{n}.so.1"),
        ]);
    }

    /// libclang-cpp14 (pulled in by llvm-14-dev, clang-format and others): not what bindgen loads.
    fn libclang_cpp(&self, n: u32, triplet: &str) {
        self.files(&[
            &format!("root/usr/lib/{triplet}/libclang-cpp.so.{n}"),
            &format!("root/usr/lib/llvm-{n}/lib/libclang-cpp.so.{n}"),
            &format!("root/usr/lib/llvm-{n}/lib/libclang-cpp.so"),
        ]);
    }

    /// libclang-common-N-dev: clang's resource headers.
    fn clang_headers(&self, n: u32) {
        self.files(&[&format!(
            "root/usr/lib/llvm-{n}/lib/clang/{n}.0.6/include/stddef.h"
        )]);
    }

    /// A rustup-style toolchain (cargo, rustc, rustup) of `version` in `dir` (relative to the host).
    fn rust_in(&self, dir: &str, version: &str) {
        self.exe(
            &format!("{dir}/rustc"),
            &stub(
                "rustc",
                &format!("echo \"rustc RUSTUP_HOME=${{RUSTUP_HOME:-}}\" >> \"$FAKE_LOG\"; echo 'rustc {version} (fake 2026-01-01)'"),
            ),
        );
        self.exe(
            &format!("{dir}/cargo"),
            &stub(
                "cargo",
                "case $1 in fmt) [[ -e $FAKE_STATE/rustfmt ]] ;; clippy) [[ -e $FAKE_STATE/clippy ]] ;; esac",
            ),
        );
        self.exe(&format!("{dir}/rustup"), &stub("rustup", ""));
    }

    /// Installed rustup components.
    fn components(&self, names: &[&str]) {
        for n in names {
            self.write(&format!("state/{n}"), "");
        }
    }

    /// A user (not root) who has sudo.
    fn user_with_sudo(mut self) -> Host {
        self.uid = 1000;
        self.sudo();
        self
    }

    fn sudo(&self) {
        // Logs, drops sudo's own options (-u USER, -H), runs the rest.
        self.exe(
            "bin/sudo",
            &stub(
                "sudo",
                "while [[ $1 == -* ]]; do [[ $1 == -u ]] && shift; shift; done; exec \"$@\"",
            ),
        );
    }

    /// `sudo bash scripts/deps.sh` by `user`, whose rustup toolchain is in ~user/.cargo/bin.
    fn under_sudo_by(mut self, user: &'static str) -> Host {
        self.uid = 0;
        self.sudo_user = Some(user);
        self.sudo();
        let home = self.path(&format!("home/{user}"));
        std::fs::create_dir_all(home.join(".rustup")).unwrap();
        let passwd = format!(
            "root:x:0:0:root:/root:/bin/bash\n{user}:x:1000:1000::{}:/bin/bash\n",
            home.display()
        );
        self.write("state/passwd", &passwd);
        self
    }

    /// Runs deps.sh for `purpose`, which must succeed.
    fn run_ok(&self, purpose: &str) -> Run {
        let run = self.run(purpose);
        ok(&run);
        run
    }

    fn run(&self, purpose: &str) -> Run {
        let log = self.path("state/log");
        let _ = std::fs::remove_file(&log);
        self.write("state/uid", &format!("{}\n", self.uid));
        let mut cmd = Command::new(which("bash"));
        cmd.arg(SCRIPT)
            .arg(purpose)
            .env_clear()
            .env("PATH", self.path("bin"))
            .env("HOME", self.path("home/self"))
            .env("DEPS_ROOT", self.path("root"))
            .env("FAKE_LOG", &log)
            .env("FAKE_STATE", self.path("state"));
        if let Some(user) = self.sudo_user {
            cmd.env("SUDO_USER", user)
                .env("SUDO_UID", "1000")
                .env("SUDO_GID", "1000");
        }
        let out = cmd.output().unwrap();
        Run {
            code: out.status.code().unwrap_or(-1),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            log: std::fs::read_to_string(&log)
                .unwrap_or_default()
                .lines()
                .map(str::to_owned)
                .collect(),
        }
    }
}

/// The real path of a system tool the fakes need (the test's own PATH is searched).
fn which(name: &str) -> PathBuf {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/bin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{name} not found"))
}

fn ok(run: &Run) {
    assert_eq!(run.code, 0, "{run:#?}");
}

#[test]
fn a_complete_debian_host_installs_nothing() {
    for (host, purpose) in [
        (Host::debian12_build(), "build"),
        (Host::debian12_test(), "test"),
    ] {
        let run = host.run_ok(purpose);
        assert!(run.installed().is_empty(), "{purpose}: {run:#?}");
        assert!(!run.called("apt-get"), "{purpose}: {run:#?}");
        assert!(!run.called("rustup"), "{purpose}: {run:#?}");
    }
}

/// The machine: llvm-14-dev (or clang-format) brought libclang-cpp14, which clang-sys skips;
/// no libclang-dev. A glob for libclang*.so* took it for libclang.
#[test]
fn libclang_cpp_alone_is_not_libclang() {
    let host = Host::debian12_build();
    host.remove(&["root/usr/lib/llvm-14/lib/libclang.so"]);
    for f in [
        "root/usr/lib/x86_64-linux-gnu/libclang-14.so.14.0.6",
        "root/usr/lib/x86_64-linux-gnu/libclang-14.so.1",
        "root/usr/lib/llvm-14/lib/libclang.so.1",
        "root/usr/lib/llvm-14/lib/libclang-14.so.1",
    ] {
        std::fs::remove_file(host.path(f)).unwrap();
    }
    host.libclang_cpp(14, "x86_64-linux-gnu");
    let run = host.run_ok("build");
    assert_eq!(run.installed(), set(&["libclang-dev"]), "{run:#?}");
    // Also without clang's headers (llvm-14-dev does not bring them).
    std::fs::remove_dir_all(host.path("root/usr/lib/llvm-14/lib/clang")).unwrap();
    assert_eq!(host.run("build").installed(), set(&["libclang-dev"]));
}

/// libclang1-14 without libclang-common-14-dev: the library loads but cannot parse a header that
/// includes <stddef.h>.
#[test]
fn libclang_without_clangs_headers_is_not_enough() {
    let host = Host::debian12_build();
    std::fs::remove_dir_all(host.path("root/usr/lib/llvm-14/lib/clang")).unwrap();
    let run = host.run_ok("build");
    assert_eq!(run.installed(), set(&["libclang-dev"]), "{run:#?}");
}

/// What clang-sys loads at run time is enough: libclang-14.so.1 (no -dev symlink) and the headers.
#[test]
fn versioned_libclang_with_its_headers_is_enough() {
    let host = Host::debian12_build();
    host.remove(&[
        "root/usr/lib/llvm-14/lib/libclang.so",
        "root/usr/lib/llvm-14/lib/libclang.so.1",
        "root/usr/lib/llvm-14/lib/libclang-14.so.1",
    ]);
    host.libclang_cpp(14, "x86_64-linux-gnu");
    let run = host.run_ok("build");
    assert!(run.installed().is_empty(), "{run:#?}");
}

/// Headers of one LLVM and the library of another do not pair up.
#[test]
fn libclang_and_headers_of_different_llvm_versions_do_not_count() {
    let host = Host::empty();
    host.dpkg_architecture("x86_64-linux-gnu");
    host.tools(&["cc", "cmake", "make"]);
    host.libc("x86_64-linux-gnu");
    host.rust_in("bin", "1.95.0");
    host.libclang_runtime(14, "x86_64-linux-gnu");
    host.files(&["root/etc/ssl/certs/ca-certificates.crt"]);
    host.clang_headers(16);
    let run = host.run_ok("build");
    assert_eq!(run.installed(), set(&["libclang-dev"]), "{run:#?}");
}

/// The other fresh-machine gaps: cmake and gcc installed with --no-install-recommends come without
/// make and without the C library's headers.
#[test]
fn cmake_without_make_and_gcc_without_libc_headers() {
    let host = Host::debian12_build();
    host.remove(&["bin/make", "root/usr/include/stdio.h"]);
    let run = host.run_ok("build");
    assert_eq!(run.installed(), set(&["make", "libc6-dev"]), "{run:#?}");
    // The start files alone missing is libc6-dev too.
    host.files(&["root/usr/include/stdio.h"]);
    host.remove(&["root/usr/lib/x86_64-linux-gnu/crt1.o"]);
    assert_eq!(host.run("build").installed(), set(&["make", "libc6-dev"]));
}

/// A bare machine with Rust only: everything the build needs, and for the tests what they need too.
#[test]
fn a_bare_machine_gets_every_package_per_purpose() {
    let host = Host::empty();
    host.dpkg_architecture("x86_64-linux-gnu");
    host.rust_in("bin", "1.95.0");
    host.components(&["rustfmt", "clippy"]);
    let build = [
        "gcc",
        "libc6-dev",
        "cmake",
        "make",
        "libclang-dev",
        "ca-certificates",
    ];
    assert_eq!(host.run("build").installed(), set(&build));
    let mut demo = build.to_vec();
    demo.extend(["iproute2", "ethtool"]);
    assert_eq!(host.run("demo").installed(), set(&demo));
    let mut test = demo.clone();
    test.extend([
        "g++",
        "tshark",
        "tcpdump",
        "iptables",
        "libibverbs1",
        "ibverbs-providers",
        "util-linux",
        "openmpi-bin",
        "slurmctld",
        "slurmd",
        "slurm-client",
        "munge",
        "valgrind",
        "jq",
        "prometheus",
        "man-db",
        "mmdebstrap",
        "rpm",
        "rpm2cpio",
        "cpio",
        "binutils",
    ]);
    let run = host.run_ok("test");
    assert_eq!(run.installed(), set(&test), "{run:#?}");
    assert!(run.called("apt-get update"), "{run:#?}");
    let mut bench = test.clone();
    bench.extend(["iperf3", "sockperf"]);
    assert_eq!(host.run("bench").installed(), set(&bench));
}

/// Debian 13 ships setpriv as a package of its own.
#[test]
fn setpriv_comes_from_its_own_package_where_there_is_one() {
    let host = Host::debian12_test();
    host.remove(&["bin/setpriv"]);
    host.exe("bin/apt-cache", &stub("apt-cache", "[[ $2 == setpriv ]]"));
    assert_eq!(host.run("test").installed(), set(&["setpriv"]));
    host.remove(&["bin/apt-cache"]);
    assert_eq!(host.run("test").installed(), set(&["util-linux"]));
}

/// A user with sudo whose PATH lacks /usr/sbin: iptables-legacy and ip are there all the same, and
/// what is missing is installed through sudo.
#[test]
fn a_user_with_sudo_sees_sbin_and_installs_through_sudo() {
    let host = Host::debian12_test().user_with_sudo();
    for t in ["iptables-legacy", "ip"] {
        std::fs::remove_file(host.path(&format!("bin/{t}"))).unwrap();
        host.exe(&format!("root/usr/sbin/{t}"), &stub(t, ""));
    }
    let run = host.run_ok("test");
    assert!(run.installed().is_empty(), "{run:#?}");
    host.remove(&["bin/tcpdump"]);
    let run = host.run_ok("test");
    assert_eq!(run.installed(), set(&["tcpdump"]), "{run:#?}");
    assert!(
        run.called("sudo env DEBIAN_FRONTEND=noninteractive apt-get install"),
        "{run:#?}"
    );
}

#[test]
fn a_user_without_sudo_is_told_what_to_install() {
    let mut host = Host::debian12_build();
    host.uid = 1000;
    host.remove(&["bin/make"]);
    let run = host.run("build");
    assert_eq!(run.code, 2, "{run:#?}");
    assert!(
        run.stderr
            .contains("need root (or sudo) to apt-get install make"),
        "{run:#?}"
    );
    assert!(!run.called("apt-get"), "{run:#?}");
}

/// arm64: the libraries live under aarch64-linux-gnu; found there (nothing to install), and from
/// `uname -m` where dpkg-architecture (dpkg-dev) is absent.
#[test]
fn arm64_paths() {
    let host = Host::empty();
    host.tools(&["cc", "cmake", "make"]);
    host.libc("aarch64-linux-gnu");
    host.files(&["root/etc/ssl/certs/ca-certificates.crt"]);
    host.libclang_runtime(14, "aarch64-linux-gnu");
    host.clang_headers(14);
    host.rust_in("bin", "1.95.0");
    host.write("state/machine", "aarch64\n");
    let run = host.run_ok("build");
    assert!(run.installed().is_empty(), "{run:#?}");
    assert!(run.called("uname"), "{run:#?}");
    host.dpkg_architecture("aarch64-linux-gnu");
    assert!(host.run("build").installed().is_empty());
    // The x86_64 triplet's files do not stand in for arm64's.
    host.dpkg_architecture("x86_64-linux-gnu");
    assert_eq!(host.run("build").installed(), set(&["libc6-dev"]));
}

/// Debian 12's packaged Rust is 1.63: the script says so and how to get a current one.
#[test]
fn too_old_a_rustc_stops_with_the_rustup_command() {
    let host = Host::debian12_build();
    host.rust_in("bin", "1.63.0");
    host.remove(&["bin/rustup"]);
    let run = host.run("build");
    assert_eq!(run.code, 2, "{run:#?}");
    assert!(
        run.stderr.contains("rustc 1.63.0") && run.stderr.contains("older than 1.85"),
        "{run:#?}"
    );
    assert!(run.stderr.contains("sh.rustup.rs"), "{run:#?}");
    // With rustup present, the advice is rustup's.
    host.rust_in("bin", "1.84.1");
    let run = host.run("build");
    assert_eq!(run.code, 2, "{run:#?}");
    assert!(run.stderr.contains("rustup update stable"), "{run:#?}");
    host.rust_in("bin", "1.85.0");
    ok(&host.run("build"));
}

#[test]
fn no_rust_at_all_stops_with_the_rustup_command() {
    let host = Host::debian12_build();
    for t in ["cargo", "rustc", "rustup"] {
        std::fs::remove_file(host.path(&format!("bin/{t}"))).unwrap();
    }
    let run = host.run("build");
    assert_eq!(run.code, 2, "{run:#?}");
    assert!(run.stderr.contains("no Rust toolchain"), "{run:#?}");
    assert!(run.stderr.contains("sh.rustup.rs"), "{run:#?}");
}

/// The user's own rustup toolchain in ~/.cargo/bin counts even when the shell's PATH lacks it.
#[test]
fn rustup_toolchain_in_home_is_found() {
    let host = Host::debian12_build();
    for t in ["cargo", "rustc", "rustup"] {
        std::fs::remove_file(host.path(&format!("bin/{t}"))).unwrap();
    }
    host.rust_in("home/self/.cargo/bin", "1.95.0");
    let run = host.run_ok("build");
    assert!(run.called("rustc --version"), "{run:#?}");
}

/// `sudo bash scripts/deps.sh test`: sudo's PATH has no ~/.cargo/bin; the invoking user's toolchain is
/// used (RUSTUP_HOME at their ~/.rustup), and a missing component is added as that user.
#[test]
fn under_sudo_the_invoking_users_rustup_toolchain_is_used() {
    let host = Host::debian12_test().under_sudo_by("alice");
    for t in ["cargo", "rustc", "rustup"] {
        std::fs::remove_file(host.path(&format!("bin/{t}"))).unwrap();
    }
    host.rust_in("home/alice/.cargo/bin", "1.95.0");
    host.remove(&["state/clippy"]);
    let run = host.run_ok("test");
    assert!(run.installed().is_empty(), "{run:#?}");
    let rustup_home = format!(
        "rustc RUSTUP_HOME={}",
        host.path("home/alice/.rustup").display()
    );
    assert!(run.log.contains(&rustup_home), "{run:#?}");
    assert!(
        run.called("sudo -u alice -H env PATH=") && run.called("rustup component add clippy"),
        "{run:#?}"
    );
}

/// A root user's own toolchain without rustfmt and clippy: `rustup component add` both.
#[test]
fn missing_rustfmt_and_clippy_are_added_for_the_tests_only() {
    let host = Host::debian12_test();
    host.remove(&["state/clippy", "state/rustfmt"]);
    let run = host.run_ok("build");
    assert!(!run.called("rustup"), "{run:#?}");
    let run = host.run_ok("test");
    assert!(
        run.log
            .contains(&"rustup component add rustfmt clippy".to_string()),
        "{run:#?}"
    );
    // Without rustup (a distribution's Rust), the script says what to install and stops.
    host.remove(&["bin/rustup"]);
    let run = host.run("test");
    assert_eq!(run.code, 2, "{run:#?}");
    assert!(run.stderr.contains("no rustup"), "{run:#?}");
}

#[test]
fn an_unknown_purpose_is_a_usage_error() {
    let run = Host::debian12_build().run("everything");
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("unknown purpose 'everything'"),
        "{run:#?}"
    );
}
