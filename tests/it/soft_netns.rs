//! scripts/netns.sh itself: idempotent up and down, exec into each side, status, and the errors it
//! gives for a bad side, a missing pair, a bad prefix and (on kernels without it) netem. Needs root.

use std::path::PathBuf;
use std::process::{Command, Output};

fn netns(prefix: &str, args: &[&str]) -> Output {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/netns.sh");
    Command::new("bash")
        .arg(script)
        .args(args)
        .env("ROCEPERF_NETNS_PREFIX", prefix)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn up_exec_status_down_are_idempotent_and_errors_are_clear() {
    // SAFETY: geteuid has no preconditions.
    if crate::common::skip_unless(
        unsafe { libc::geteuid() } == 0,
        "needs root for network namespaces",
    ) {
        return;
    }
    let p = format!("rs{}", std::process::id() % 100_000);
    struct Down<'a>(&'a str);
    impl Drop for Down<'_> {
        fn drop(&mut self) {
            netns(self.0, &["down"]);
        }
    }
    let _cleanup = Down(&p);
    for _ in 0..2 {
        let up = netns(&p, &["up", "--mtu", "4000"]);
        assert!(up.status.success(), "{}", text(&up));
        assert!(
            text(&up).contains("exec a"),
            "says how to run a command: {}",
            text(&up)
        );
    }
    let a = netns(&p, &["exec", "a", "ip", "-br", "addr", "show", "veth0"]);
    assert!(
        text(&a).contains("10.77.0.1/24") && text(&a).contains("fd77::1/64"),
        "{}",
        text(&a)
    );
    let b = netns(&p, &["exec", "b", "ip", "link", "show", "veth0"]);
    assert!(text(&b).contains("mtu 4000"), "{}", text(&b));
    let st = netns(&p, &["status"]);
    assert!(
        text(&st).contains(&format!("{p}a")) && text(&st).contains("10.77.0.2"),
        "{}",
        text(&st)
    );
    let bad_side = netns(&p, &["exec", "c", "true"]);
    assert_eq!(bad_side.status.code(), Some(2));
    assert!(text(&bad_side).contains("use a or b"));
    let netem = netns(&p, &["netem", "--loss", "1%"]);
    assert!(netem.status.success(), "{}", text(&netem));
    if text(&netem).contains("iptables") {
        // No netem in this kernel: loss falls back to a random DROP of arriving RoCE v2 datagrams,
        // and what netem alone can do is refused with the alternative named.
        let rules = netns(&p, &["exec", "a", "iptables-legacy", "-S", "INPUT"]);
        assert!(
            text(&rules).contains("--dport 4791") && text(&rules).contains("0.0099"),
            "{}",
            text(&rules)
        );
        let reorder = netns(&p, &["netem", "--reorder", "5%"]);
        assert_eq!(reorder.status.code(), Some(2));
        assert!(
            text(&reorder).contains("ROCEPERF_IMPAIR"),
            "{}",
            text(&reorder)
        );
        let bad = netns(&p, &["netem", "--loss", "lots"]);
        assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
        assert!(text(&bad).contains("percentage"), "{}", text(&bad));
    }
    for _ in 0..2 {
        assert!(netns(&p, &["down"]).status.success());
    }
    let gone = netns(&p, &["exec", "a", "true"]);
    assert_eq!(gone.status.code(), Some(2));
    assert!(text(&gone).contains("netns.sh up"), "{}", text(&gone));
    let bad = netns("no spaces", &["status"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad).contains("ROCEPERF_NETNS_PREFIX"));
}
