use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use clap::Parser;
use clap::error::ErrorKind;

use super::*;

fn config(args: &[&str]) -> Result<Config, UsageError> {
    let cli = Cli::try_parse_from(std::iter::once("roce_ref").chain(args.iter().copied()))
        .map_err(|e| (e.kind(), e.to_string()))?;
    Config::from_cli(cli)
}

fn err(args: &[&str]) -> String {
    match config(args) {
        Ok(c) => panic!("{args:?} parsed as {c:?}"),
        Err((_, msg)) => msg,
    }
}

#[test]
fn server_and_client_like_perftest() {
    let s = config(&["udp-pingpong", "-s", "36"]).unwrap();
    assert_eq!(s.role, Role::Server);
    assert_eq!(s.mode, Mode::new(Proto::Udp, Pattern::PingPong));
    assert_eq!(
        (s.size, s.reply_size, s.iters, s.warmup),
        (36, 36, 20_000, 1_000)
    );
    assert_eq!(s.duration, None);
    let c = config(&["udp-pingpong", "-s", "36", "127.0.0.1"]).unwrap();
    let want = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 18700);
    assert_eq!(c.role, Role::Client(Peer::Addr(want)));
}

#[test]
fn sizes_default_per_mode_and_take_suffixes() {
    assert_eq!(config(&["udp-pingpong"]).unwrap().size, 36);
    assert_eq!(config(&["tcp-pingpong"]).unwrap().size, 26);
    assert_eq!(config(&["packet-pingpong", "-d", "lo"]).unwrap().size, 76);
    assert_eq!(config(&["udp-stream"]).unwrap().size, 1472);
    assert_eq!(config(&["packet-stream", "-d", "lo"]).unwrap().size, 1500);
    let t = config(&["tcp-stream", "-s", "64K"]).unwrap();
    assert_eq!(t.size, 65536);
    assert_eq!(
        t.duration,
        Some(Duration::from_secs(2)),
        "streams run 2 s by default"
    );
    assert_eq!(parse_size("1M"), Ok(1 << 20));
    assert_eq!(parse_size("2k"), Ok(2048));
    assert!(parse_size("12x").is_err());
    assert!(parse_size("8G").is_err());
    let r = config(&["udp-pingpong", "-s", "32", "--reply-size", "24"]).unwrap();
    assert_eq!((r.size, r.reply_size), (32, 24));
}

#[test]
fn packet_peers_are_macs_and_need_a_device() {
    let c = config(&["packet-pingpong", "-d", "veth0", "02:00:00:00:00:0a"]).unwrap();
    assert_eq!(c.role, Role::Client(Peer::Mac([2, 0, 0, 0, 0, 10])));
    assert_eq!(c.ethertype, DEFAULT_ETHERTYPE);
    assert!(err(&["packet-pingpong", "10.0.0.1"]).contains("needs -d/--dev"));
    assert!(
        err(&["packet-pingpong", "-d", "lo", "10.0.0.1"]).contains("PEER '10.0.0.1' is not a MAC")
    );
    assert_eq!(parse_mac("ff-ff-ff-ff-ff-ff"), Some(BROADCAST));
    assert_eq!(parse_mac("ff:ff:ff:ff:ff"), None);
    assert_eq!(parse_mac("ff:ff:ff:ff:ff:ff:00"), None);
    assert_eq!(parse_mac("fff:ff:ff:ff:ff:f"), None);
    let e = config(&["packet-stream", "-d", "lo", "--ethertype", "0x88b6"]).unwrap();
    assert_eq!(e.ethertype, 0x88b6);
    assert!(
        parse_ethertype("0x0100")
            .unwrap_err()
            .contains("802.3 length")
    );
}

#[test]
fn flags_of_other_modes_are_refused_by_name() {
    assert!(err(&["udp-pingpong", "-d", "lo"]).contains("-d/--dev applies to the packet modes"));
    assert!(err(&["tcp-stream", "--ethertype", "0x88b5"]).contains("--ethertype"));
    assert!(err(&["tcp-stream", "--no-gso"]).contains("--no-gso applies to udp-stream only"));
    assert!(err(&["tcp-stream", "--batch", "8"]).contains("--batch applies"));
    assert!(err(&["udp-stream", "--qdisc-bypass"]).contains("--qdisc-bypass"));
    assert!(err(&["packet-pingpong", "-d", "lo", "--bind", "0.0.0.0"]).contains("--bind applies"));
    assert!(
        err(&["udp-pingpong", "--server-cpu", "0"])
            .contains("--server-cpu applies to --local only")
    );
    assert!(err(&["udp-pingpong", "--local", "127.0.0.1"]).contains("drop PEER"));
    // Flags of the other pattern do not exist for this one: clap names them.
    let (kind, _) = config(&["udp-stream", "-n", "5"]).unwrap_err();
    assert_eq!(kind, ErrorKind::UnknownArgument);
    let (kind, _) = config(&["udp-pingpong", "--warmup-ms", "5"]).unwrap_err();
    assert_eq!(kind, ErrorKind::UnknownArgument);
}

#[test]
fn values_out_of_range_name_their_flag() {
    assert!(err(&["udp-pingpong", "-s", "0"]).contains("-s/--size 0 is out of range"));
    assert!(err(&["udp-pingpong", "-s", "70000"]).contains("1..=65507"));
    assert!(err(&["udp-pingpong", "--reply-size", "0"]).contains("--reply-size 0"));
    assert!(err(&["udp-pingpong", "-n", "0"]).contains("-n/--iters"));
    assert!(err(&["udp-stream", "--batch", "0"]).contains("--batch 0"));
    assert!(err(&["udp-stream", "-D", "0"]).contains("-D/--duration"));
    assert!(err(&["udp-stream", "-D", "nan"]).contains("-D/--duration"));
    assert!(err(&["udp-stream", "--connect-timeout=-1"]).contains("--connect-timeout"));
    assert!(err(&["udp-pingpong", "not a host name"]).contains("PEER 'not a host name'"));
    let (kind, msg) = config(&["udp-pingpong", "-s", "abc"]).unwrap_err();
    assert_eq!(kind, ErrorKind::ValueValidation);
    assert!(msg.contains("'abc' is not a size"), "{msg}");
}

#[test]
fn local_runs_both_sides_on_cores_0_and_1() {
    let l = config(&["tcp-stream", "--local"]).unwrap();
    assert_eq!(l.role, Role::Local);
    assert_eq!((l.server_cpu, l.cpu), (0, Some(1)));
    let want = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 18700);
    assert_eq!(l.local_peer(), Peer::Addr(want));
    let p = config(&[
        "packet-pingpong",
        "--local",
        "-d",
        "lo",
        "--cpu",
        "0",
        "--server-cpu",
        "1",
    ])
    .unwrap();
    assert_eq!((p.server_cpu, p.cpu), (1, Some(0)));
    assert_eq!(p.local_peer(), Peer::Mac(BROADCAST));
    let b = config(&["udp-pingpong", "--local", "--bind", "127.0.0.2", "-p", "9"]).unwrap();
    assert_eq!(b.local_peer(), Peer::Addr("127.0.0.2:9".parse().unwrap()));
}

#[test]
fn mode_codes_round_trip() {
    for m in Mode::ALL {
        assert_eq!(Mode::from_code(m.code()), Some(m));
    }
    assert_eq!(Mode::from_code(0), None);
    assert_eq!(Mode::from_code(7), None);
}

#[test]
fn help_mentions_every_mode() {
    let help = Cli::command().render_long_help().to_string();
    for m in Mode::ALL {
        assert!(help.contains(m.name()), "{}", m.name());
    }
}
