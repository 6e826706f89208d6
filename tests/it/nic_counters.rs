//! `-W`'s netdev half: the SIOCETHTOOL reading against a real veth pair (scripts/netns.sh), checked
//! against `ethtool -S`, and a fake RDMA port whose GID table names that veth. Needs root.

use crate::common::skip_unless;
use crate::soft_support::{NetnsPair, is_root};
use roceperf::params::{CounterRequest, parse_request};
use roceperf::transport::verbs::counters::PortCounters;
use roceperf::transport::verbs::ethtool::{self, is_pfc};
use std::path::Path;
use std::process::Command;

/// `ethtool -S IF` in namespace `ns`: (name, value) per line after "NIC statistics:".
fn ethtool_s(ns: &str, ifname: &str) -> Vec<(String, u64)> {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "ethtool", "-S", ifname])
        .output()
        .expect("run ethtool (scripts/deps.sh test installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .skip_while(|l| !l.starts_with("NIC statistics:"))
        .skip(1)
        .map(|l| {
            let (name, value) = l.trim().rsplit_once(": ").expect("name: value");
            (name.to_string(), value.parse().expect("a number"))
        })
        .collect()
}

/// A fake sysfs tree with an RDMA port `fake0` port 1 whose GID 0 belongs to `veth0`.
fn fake_port_on(root: &Path, netdev: &str) {
    let port = root.join("class/infiniband/fake0/ports/1");
    for (rel, text) in [
        (
            "gids/0",
            "fe80:0000:0000:0000:0000:00ff:fe00:0001\n".to_string(),
        ),
        ("gid_attrs/types/0", "RoCE v2\n".to_string()),
        ("gid_attrs/ndevs/0", format!("{netdev}\n")),
        ("hw_counters/np_cnp_sent", "0\n".to_string()),
    ] {
        let p = port.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

#[test]
fn veth_statistics_read_through_the_ioctl_match_ethtool_and_hold_no_pfc_counter() {
    if skip_unless(is_root(), "needs root for network namespaces") {
        return;
    }
    let pair = NetnsPair::up(&[]);
    let ns = pair.ns('a');
    let ours = pair.in_ns('a', || ethtool::stats("veth0").unwrap());
    let theirs = ethtool_s(&ns, "veth0");
    let names = |v: &[(String, u64)]| v.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(
        names(&ours),
        names(&theirs),
        "the same statistics, in the same order"
    );
    assert!(ours.iter().any(|(n, _)| n == "peer_ifindex"), "{ours:?}");
    assert!(
        ours.iter().any(|(n, _)| n == "rx_queue_0_xdp_packets"),
        "{ours:?}"
    );
    // peer_ifindex does not move between the two reads; the packet counters may, so only it is compared.
    let peer = |v: &[(String, u64)]| v.iter().find(|(n, _)| n == "peer_ifindex").unwrap().1;
    assert_eq!(peer(&ours), peer(&theirs));
    assert!(peer(&ours) > 0);
    assert!(
        !ours.iter().any(|(n, _)| is_pfc(n)),
        "veth has no PFC: {ours:?}"
    );

    // An RDMA port whose netdev is that veth: its statistics are -W ethtool/NAME, and the default
    // set finds no PFC counter there and says so.
    let tree = tempfile::tempdir().unwrap();
    fake_port_on(tree.path(), "veth0");
    let root = tree.path().to_path_buf();
    let (default, named, missing) = pair.in_ns('a', move || {
        let default = PortCounters::open(&root, "fake0", 1, &CounterRequest::default())
            .unwrap()
            .unwrap();
        let req = parse_request("ethtool/peer_ifindex,hw_counters/np_cnp_sent").unwrap();
        let named = PortCounters::open(&root, "fake0", 1, &req)
            .unwrap()
            .unwrap();
        let values = named.read().unwrap();
        let req = parse_request("ethtool/rx_prio3_pause").unwrap();
        let missing = PortCounters::open(&root, "fake0", 1, &req).unwrap_err();
        let names: Vec<String> = default.counters.iter().map(|c| c.name.clone()).collect();
        (
            (names, default.pfc_note.clone(), default.netdev.clone()),
            values,
            missing.to_string(),
        )
    });
    let (default_names, note, netdev) = default;
    assert_eq!(default_names, ["hw_counters/np_cnp_sent"]);
    assert_eq!(netdev.as_deref(), Some("veth0"));
    let note = note.expect("the default set says why it has no PFC counters");
    assert!(
        note.contains("veth0's driver has no rx_prio<N>_pause / tx_prio<N>_pause statistics"),
        "{note}"
    );
    assert_eq!(named, [peer(&theirs), 0]);
    assert!(
        missing.starts_with(
            "-W ethtool/rx_prio3_pause: veth0 has no statistic rx_prio3_pause; it has: "
        ),
        "{missing}"
    );
    assert!(missing.contains("rx_queue_0_xdp_packets"), "{missing}");
}
