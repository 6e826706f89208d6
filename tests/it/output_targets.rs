//! Writing a result never harms what the path names (issue 33, defect 1): `--json` to a device node
//! writes to the device and reports its error instead of replacing the node with a regular file, and
//! `--json` to a symbolic link fills the file the link names and keeps the link. The device node is made
//! by the test in a temporary directory, never the real `/dev`.

use crate::common::{self, skip_unless};
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

#[test]
fn json_to_a_device_node_reports_its_error_and_leaves_the_node() {
    if skip_unless(is_root(), "needs root to make a device node (mknod)") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let node = dir.path().join("full");
    full_device(&node);
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
