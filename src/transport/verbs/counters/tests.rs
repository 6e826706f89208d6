use super::*;
use crate::params::parse_request;
use crate::transport::verbs::sysfs::tests::put;

const PORT: &str = "class/infiniband/mlx5_0/ports/1";

/// A ConnectX port as sysfs lays it out: a few `counters/`, a few `hw_counters/`, a non-counter file.
fn mlx5_tree() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let r = d.path();
    put(r, &format!("{PORT}/counters/port_xmit_data"), "1000\n");
    put(r, &format!("{PORT}/counters/port_rcv_data"), "2000\n");
    put(r, &format!("{PORT}/counters/port_xmit_packets"), "10\n");
    put(r, &format!("{PORT}/hw_counters/out_of_buffer"), "5\n");
    put(r, &format!("{PORT}/hw_counters/np_cnp_sent"), "0\n");
    put(r, &format!("{PORT}/hw_counters/rp_cnp_handled"), "7\n");
    put(r, &format!("{PORT}/hw_counters/resp_cqe_error"), "0\n");
    put(r, &format!("{PORT}/hw_counters/lifespan"), "20\n");
    put(r, &format!("{PORT}/state"), "4: ACTIVE\n");
    d
}

fn req(list: &str) -> CounterRequest {
    parse_request(list).unwrap()
}

fn names(pc: &PortCounters) -> Vec<&str> {
    pc.counters.iter().map(|c| c.name.as_str()).collect()
}

#[test]
fn named_counters_are_read_before_and_after_in_the_order_given() {
    let d = mlx5_tree();
    let list = "counters/port_xmit_data,hw_counters/out_of_buffer,counters/port_rcv_data";
    let pc = PortCounters::open(d.path(), "mlx5_0", 1, &req(list))
        .unwrap()
        .unwrap();
    assert_eq!(
        names(&pc),
        [
            "counters/port_xmit_data",
            "hw_counters/out_of_buffer",
            "counters/port_rcv_data"
        ]
    );
    let words: Vec<bool> = pc.counters.iter().map(|c| c.words).collect();
    assert_eq!(
        words,
        [true, false, true],
        "PortXmitData/PortRcvData count 4-byte words"
    );
    assert_eq!(pc.read().unwrap(), [1000, 5, 2000]);
    assert_eq!(pc.lifespan, Duration::from_millis(20));
    put(
        d.path(),
        &format!("{PORT}/counters/port_xmit_data"),
        "1250\n",
    );
    put(
        d.path(),
        &format!("{PORT}/hw_counters/out_of_buffer"),
        "9\n",
    );
    assert_eq!(pc.read().unwrap(), [1250, 9, 2000]);
    assert_eq!(pc.device, "mlx5_0");
    assert_eq!(pc.port, 1);
}

#[test]
fn a_name_the_port_lacks_is_refused_with_what_it_has() {
    let d = mlx5_tree();
    let refused = |port: u8, list: &str| {
        PortCounters::open(d.path(), "mlx5_0", port, &req(list))
            .unwrap_err()
            .to_string()
    };
    let e = refused(1, "hw_counters/np_cnp_snt");
    assert!(e.starts_with("-W hw_counters/np_cnp_snt: "), "{e}");
    assert!(e.contains("hw_counters/ has no np_cnp_snt"), "{e}");
    let has = "it has: np_cnp_sent, out_of_buffer, resp_cqe_error, rp_cnp_handled";
    assert!(e.contains(has), "{e}");
    // A directory the port lacks: the port's own directory is listed.
    let e = refused(1, "hw_cntrs/out_of_buffer");
    assert!(e.contains("it has: counters/, hw_counters/, state"), "{e}");
    // Another port, or device: nothing there, and the message says what to check.
    let e = refused(2, "counters/port_xmit_data");
    assert!(
        e.contains("nothing (is this the right device and port? -d, -i)"),
        "{e}"
    );
    let e = refused(1, "state");
    assert!(
        e.contains("is not a counter (it reads \"4: ACTIVE\")"),
        "{e}"
    );
}

#[test]
fn the_default_set_reads_what_the_driver_has_and_skips_the_rest() {
    let d = mlx5_tree();
    let pc = PortCounters::open(d.path(), "mlx5_0", 1, &CounterRequest::default())
        .unwrap()
        .unwrap();
    // DEFAULT_HW's order, only those present; resp_cqe_error is not in the set.
    assert_eq!(
        names(&pc),
        [
            "hw_counters/np_cnp_sent",
            "hw_counters/rp_cnp_handled",
            "hw_counters/out_of_buffer"
        ]
    );
    assert_eq!(pc.read().unwrap(), [0, 7, 5]);
    // hw_counters/ values are cached this long (and up to a jiffy more): the end of a shorter size
    // waits it out.
    assert_eq!(pc.lifespan, Duration::from_millis(20));
    assert_eq!(pc.refresh_after(), Duration::from_millis(50));
    // No GID names a netdev in this tree: no PFC counters, and why.
    assert!(pc.netdev.is_none());
    let note = pc.pfc_note.as_deref().unwrap();
    assert!(note.contains("no network interface"), "{note}");
    // rxe names its own.
    let r = tempfile::tempdir().unwrap();
    let rxe = "class/infiniband/rxe0/ports/1/hw_counters";
    for (n, v) in [
        ("sent_pkts", "100"),
        ("rcvd_pkts", "90"),
        ("duplicate_request", "1"),
        ("out_of_seq_request", "2"),
        ("rcvd_seq_err", "3"),
        ("retry_exceeded_err", "0"),
        ("link_downed", "0"),
    ] {
        put(r.path(), &format!("{rxe}/{n}"), &format!("{v}\n"));
    }
    let pc = PortCounters::open(r.path(), "rxe0", 1, &CounterRequest::default())
        .unwrap()
        .unwrap();
    assert_eq!(
        names(&pc),
        [
            "hw_counters/duplicate_request",
            "hw_counters/sent_pkts",
            "hw_counters/rcvd_pkts",
            "hw_counters/out_of_seq_request",
            "hw_counters/rcvd_seq_err",
            "hw_counters/retry_exceeded_err"
        ]
    );
    // A driver with none of them (and no netdev): nothing to read, not an error.
    let empty = tempfile::tempdir().unwrap();
    put(
        empty.path(),
        &format!("{PORT}/counters/port_xmit_data"),
        "0\n",
    );
    assert!(
        PortCounters::open(empty.path(), "mlx5_0", 1, &CounterRequest::default())
            .unwrap()
            .is_none()
    );
}

#[test]
fn default_joins_a_list_and_none_reads_nothing() {
    let d = mlx5_tree();
    let pc = PortCounters::open(
        d.path(),
        "mlx5_0",
        1,
        &req("counters/port_xmit_packets,default,hw_counters/out_of_buffer"),
    )
    .unwrap()
    .unwrap();
    assert_eq!(
        names(&pc),
        [
            "counters/port_xmit_packets",
            "hw_counters/out_of_buffer",
            "hw_counters/np_cnp_sent",
            "hw_counters/rp_cnp_handled"
        ],
        "named first, then the default set without repeats"
    );
    assert!(
        PortCounters::open(d.path(), "mlx5_0", 1, &req("none"))
            .unwrap()
            .is_none()
    );
}

#[test]
fn an_ethtool_counter_needs_a_netdev_behind_the_port() {
    let d = mlx5_tree();
    let e = PortCounters::open(d.path(), "mlx5_0", 1, &req("ethtool/rx_prio3_pause"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("no network interface is known behind mlx5_0 port 1"),
        "{e}"
    );
    // The GID table names it; the device's net/ directory is the fallback.
    put(
        d.path(),
        &format!("{PORT}/gids/0"),
        "fe80:0000:0000:0000:0ac0:ebff:fe10:0001\n",
    );
    put(d.path(), &format!("{PORT}/gid_attrs/types/0"), "RoCE v2\n");
    put(
        d.path(),
        &format!("{PORT}/gid_attrs/ndevs/0"),
        "ens1f0np0\n",
    );
    assert_eq!(
        Sysfs::at(d.path()).port_netdev("mlx5_0", 1).as_deref(),
        Some("ens1f0np0")
    );
    put(
        d.path(),
        "class/infiniband/mlx5_1/device/net/ens1f1np1/ifindex",
        "5\n",
    );
    assert_eq!(
        Sysfs::at(d.path()).port_netdev("mlx5_1", 1).as_deref(),
        Some("ens1f1np1")
    );
}

#[test]
fn pfc_priorities_come_from_the_name() {
    assert_eq!(pfc_priority("rx_prio3_pause"), Some(3));
    assert_eq!(pfc_priority("tx_prio0_pause_duration"), Some(0));
    assert_eq!(pfc_priority("rx_discards_phy"), None);
    assert!(is_words("counters/port_rcv_data") && !is_words("counters/port_xmit_packets"));
}
