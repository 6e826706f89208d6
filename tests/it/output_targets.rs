//! Writing a result never harms what the path names (issue 33, defect 1): `--json` to a device node
//! writes to the device and reports its error instead of replacing the node with a regular file, and
//! `--json` to a symbolic link fills the file the link names and keeps the link. The device node is made
//! by the test in a temporary directory, never the real `/dev`.
//!
//! An output path that cannot be written stops the run before the peer is contacted, and a write that
//! still fails at the end is told to the peer, so both sides exit 2 (issue 33, defect 3).

use crate::common::{self, Done, skip_unless};
use crate::soft_support::is_root;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

const RUN: [&str; 4] = ["-n", "200", "-s", "4096"];

/// Makes a character device node at `path` with the kernel's numbers (1, 7): what `/dev/full` is.
fn full_device(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path; mknod only creates the node.
    let made = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 7)) };
    assert_eq!(
        made,
        0,
        "mknod {}: {}",
        path.display(),
        std::io::Error::last_os_error()
    );
}

/// A temporary directory holding `full`, a device node as `/dev/full` (None, said, without root).
fn full_device_in_a_tempdir() -> Option<(tempfile::TempDir, std::path::PathBuf)> {
    if skip_unless(is_root(), "needs root to make a device node (mknod)") {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let node = dir.path().join("full");
    full_device(&node);
    Some((dir, node))
}

#[test]
fn json_to_a_device_node_reports_its_error_and_leaves_the_node() {
    let Some((dir, node)) = full_device_in_a_tempdir() else {
        return;
    };
    let json = node.to_str().unwrap();
    let (_server, client) =
        common::pair_with("write_bw", &RUN, &[&RUN[..], &["--json", json]].concat());
    client.assert_ended(
        2,
        &[json, "No space left on device"],
        "a client whose --json is a full device",
    );
    let kind = std::fs::symlink_metadata(&node).unwrap().file_type();
    assert!(
        kind.is_char_device(),
        "{} is no longer a device: {kind:?}",
        node.display()
    );
    assert!(!dir.path().join("full.partial").exists());
}

#[test]
fn json_through_a_symlink_fills_its_target_and_keeps_the_link() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("kept.json");
    let link = dir.path().join("latest.json");
    std::os::unix::fs::symlink("kept.json", &link).unwrap();
    let json = link.to_str().unwrap();
    let (server, client) =
        common::pair_with("write_bw", &RUN, &[&RUN[..], &["--json", json]].concat());
    common::assert_both_ok(
        "a client writing --json through a symlink",
        &server,
        &client,
    );
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let doc = common::json_file(&target);
    assert_eq!(doc["schema"], "roceperf.result", "{doc}");
    assert_eq!(doc["results"][0]["iterations"], 200, "{doc}");
}

/// Starts a TCP write_bw server with `server_extra`, then a client with `client_extra`; both as they
/// ended, the server killed when still running 3 s after the client ended (a client refused before
/// contacting it leaves it waiting).
fn pair_then_stop(server_extra: &[&str], client_extra: &[&str]) -> (Done, Done) {
    let port = common::free_port().to_string();
    let server = common::tcp_server("write_bw", &port, &[&RUN[..], server_extra].concat());
    let client = common::tcp_client("write_bw", &port, &[&RUN[..], client_extra].concat())
        .wait(60, "client");
    // A server that ran a test prints its table and exits; one never contacted waits on.
    let ran = server.wait_stdout("#bytes", 3);
    let server = if ran {
        server.wait(30, "server")
    } else {
        server.kill()
    };
    (server, client)
}

/// The client was refused before it contacted the server: exit 2 naming `path`, and the server never
/// saw a test.
#[track_caller]
fn refused_before_contact(server: &Done, client: &Done, texts: &[&str]) {
    client.assert_ended(2, texts, "a client with an unusable output");
    assert!(
        !server.stdout.contains("#bytes") && !client.stdout.contains("#bytes"),
        "the test ran before the output was found unusable:\nserver:\n{}\nclient:\n{}",
        server.stdout,
        client.stdout
    );
}

#[test]
fn unusable_output_paths_are_refused_before_the_peer_is_contacted() {
    // Issue 33, defect 3: these used to run the whole test, then the client exited 2 and the server 0.
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no/such/dir/r.json");
    let missing = missing.to_str().unwrap();
    let (s, c) = pair_then_stop(&[], &["--json", missing]);
    refused_before_contact(&s, &c, &[missing, "No such file or directory"]);
    let csv = dir.path().join("other.csv");
    std::fs::write(&csv, "a,b,c\n1,2,3\n").unwrap();
    let csv = csv.to_str().unwrap();
    let (s, c) = pair_then_stop(&[], &["--csv", csv]);
    refused_before_contact(&s, &c, &[csv, "its header does not match"]);
    assert_eq!(
        std::fs::read_to_string(csv).unwrap(),
        "a,b,c\n1,2,3\n",
        "the CSV was touched"
    );
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let under_file = file.join("results");
    let under_file = under_file.to_str().unwrap();
    let (s, c) = pair_then_stop(&[], &["--results", under_file]);
    refused_before_contact(&s, &c, &[under_file]);
    // A server checks its own outputs before it listens.
    let port = common::free_port().to_string();
    let d = common::assert_refused(
        "write_bw",
        &["--transport", "tcp", "-p", &port, "--json", missing],
        &[missing],
    );
    assert!(!d.stdout.contains("Waiting for client"), "{}", d.stdout);
}

#[test]
fn results_on_a_read_only_filesystem_are_refused_before_the_peer_is_contacted() {
    if skip_unless(is_root(), "needs root to mount a read-only tmpfs") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("ro");
    std::fs::create_dir(&mnt).unwrap();
    let m = mnt.to_str().unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", m])
        .status()
        .unwrap();
    if skip_unless(mounted.success(), "mount -t tmpfs is not allowed here") {
        return;
    }
    let results = mnt.join("results");
    let results = results.to_str().unwrap();
    let (s, c) = pair_then_stop(&[], &["--results", results]);
    let umounted = std::process::Command::new("umount")
        .arg(m)
        .status()
        .unwrap();
    refused_before_contact(&s, &c, &[results, "Read-only file system"]);
    assert!(umounted.success());
}

#[test]
fn a_write_that_fails_at_the_end_is_told_to_the_peer() {
    // Issue 33, defect 3: the side whose --json cannot take the bytes (a full device) exits 2, and so
    // does its peer, which is told why before either exits.
    let Some((_dir, node)) = full_device_in_a_tempdir() else {
        return;
    };
    let json = node.to_str().unwrap();
    for (server_extra, client_extra, failing) in [
        (&[][..], &["--json", json][..], "client"),
        (&["--json", json][..], &[][..], "server"),
    ] {
        let (s, c) = common::pair_with(
            "write_bw",
            &[&RUN[..], server_extra].concat(),
            &[&RUN[..], client_extra].concat(),
        );
        let (bad, told) = if failing == "client" {
            (&c, &s)
        } else {
            (&s, &c)
        };
        bad.assert_ended(2, &[json, "No space left on device"], failing);
        told.assert_ended(
            2,
            &["the peer", "stopped", json, "No space left on device"],
            "the peer of a side whose write failed",
        );
    }
}
