//! `-c RC|UC|UD`: which tests and transports a connection type can run, and what UD does to sizes.
//!
//! The path MTU that caps a UD message is only known once the device is open (and the peer's offer
//! arrived); what the command line alone can tell is checked here, the rest where the run plan meets
//! the endpoint (`app::plan::Plan::fit_datagrams`).

use super::Error;
use super::args::Args;
use crate::params::{ConnType, TestKind, TransportKind};

/// The largest UD message when no MTU is known yet: the largest RoCE path MTU.
const MAX_UD_SIZE: u64 = 4096;

/// The connection type, after checking that the test and the transport can run it.
pub(crate) fn connection(
    test: TestKind,
    transport: TransportKind,
    a: &Args,
) -> Result<ConnType, Error> {
    let conn = a.connection.unwrap_or_default();
    let flag = match conn {
        ConnType::Rc => return Ok(conn),
        ConnType::Uc => "-c UC",
        ConnType::Ud => "-c UD",
    };
    if transport == TransportKind::Tcp {
        return Err(Error::NotApplicable {
            flag,
            what: "--transport tcp".into(),
            why: "a TCP byte stream is reliable and has no datagrams, so it cannot follow UC or UD; use --transport soft or verbs (or -c RC)",
        });
    }
    if let Some(why) = conn.refuses(test) {
        return Err(Error::NotApplicable {
            flag,
            what: test.to_string(),
            why,
        });
    }
    if a.rdma_cm
        && let Some(why) = rdma_cm_refuses(conn)
    {
        return Err(Error::Conflict {
            a: "-R",
            b: flag,
            why,
        });
    }
    if conn == ConnType::Ud
        && let (Some(size), Some(mtu)) = (a.size, a.mtu)
        && size > u64::from(mtu)
    {
        return Err(Error::Invalid {
            flag: "-s",
            why: too_big(size, u64::from(mtu), "-m"),
        });
    }
    Ok(conn)
}

/// Why `-R` cannot connect queue pairs of type `conn` here, if it cannot. (`-R` on a transport
/// without a CM is refused where the transport is chosen.)
fn rdma_cm_refuses(conn: ConnType) -> Option<&'static str> {
    match conn {
        // perftest: "UC is not supported in librdmacm" (rdma_cm has no UC port space).
        ConnType::Uc => Some(
            "rdma_cm connects RC (and UD) queue pairs only, and perftest refuses UC with -R too; use -c RC with -R, or -c UC without -R",
        ),
        // UD services are resolved in both dialects on both soft (SIDR itself) and verbs
        // (librdmacm's UDP port space); in perftest's, its messages ride an RC queue pair beside
        // the UD ones.
        _ => None,
    }
}

/// What a UD size over the MTU is told: it names -s and the MTU and where the MTU comes from.
pub(crate) fn too_big(size: u64, mtu: u64, source: &str) -> String {
    format!(
        "-s {size} is larger than the MTU ({mtu} bytes, {source}): a UD datagram carries at most one MTU; use -s {mtu} or less, or -c UC/RC for larger messages"
    )
}

/// `-a` with UD sweeps 2 B up to the MTU, as perftest does; `-m` caps it now, the device's MTU later.
pub(crate) fn ud_sweep(a: &Args) -> Vec<u64> {
    let top = a.mtu.map_or(MAX_UD_SIZE, u64::from);
    (1..=23).map(|e| 1u64 << e).filter(|&s| s <= top).collect()
}

#[cfg(test)]
mod tests {
    use crate::cli::{Error, Options};
    use crate::params::ConnType;

    fn parse(test: &str, args: &[&str]) -> Result<Options, Error> {
        crate::cli::tests::parse_raw(test.parse().unwrap(), args)
    }

    #[test]
    fn rdma_cm_refuses_uc_naming_both_flags_and_what_to_use() {
        let soft = ["--transport", "soft", "-d", "lo"];
        let verbs = ["--transport", "verbs", "-d", "rxe0"];
        let perftest = ["--transport", "soft", "-d", "lo", "--oob", "perftest"];
        let verbs_perftest = ["--transport", "verbs", "-d", "rxe0", "--oob", "perftest"];
        for (test, c, on) in [
            ("write_bw", "UC", &soft[..]),
            ("send_lat", "UC", &soft[..]),
            ("write_lat", "UC", &verbs[..]),
            ("send_bw", "UC", &verbs_perftest[..]),
        ] {
            let e = parse(test, &[on, &["-R", "-c", c]].concat())
                .unwrap_err()
                .to_string();
            assert!(e.contains("-R") && e.contains(&format!("-c {c}")), "{e}");
            assert!(e.contains("-c RC with -R"), "{e}");
        }
        for on in [&soft[..], &verbs[..], &perftest[..], &verbs_perftest[..]] {
            for (test, c) in [("send_bw", "RC"), ("send_bw", "UD"), ("send_lat", "UD")] {
                let ok = parse(test, &[on, &["-R", "-c", c]].concat()).unwrap();
                assert!(ok.rdma_cm, "{test} -R -c {c} runs on {on:?}");
                assert_eq!(ok.connection.to_string(), c);
            }
        }
    }

    #[test]
    fn tcp_cannot_follow_uc_or_ud_and_says_which_flags() {
        for c in ["UC", "UD"] {
            let e = parse("send_bw", &["--transport", "tcp", "-c", c])
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(&format!("-c {c}")) && e.contains("--transport tcp"),
                "{e}"
            );
        }
        let rc = parse("send_bw", &["--transport", "tcp", "-c", "RC"]).unwrap();
        assert_eq!(rc.connection, ConnType::Rc);
    }

    #[test]
    fn reads_refuse_unreliable_types_and_ud_refuses_writes() {
        let d = ["--transport", "soft", "-d", "lo"];
        for test in ["read_bw", "read_lat"] {
            for c in ["UC", "UD"] {
                let e = parse(test, &[&d[..], &["-c", c]].concat()).unwrap_err();
                assert!(
                    e.to_string()
                        .contains(&format!("-c {c} does not apply to {test}")),
                    "{e}"
                );
            }
        }
        let e = parse("write_bw", &[&d[..], &["-c", "UD"]].concat()).unwrap_err();
        assert!(e.to_string().contains("UD carries only SENDs"), "{e}");
        assert_eq!(
            parse("write_lat", &[&d[..], &["-c", "uc"]].concat())
                .unwrap()
                .connection,
            ConnType::Uc
        );
    }

    #[test]
    fn ud_sizes_stay_within_the_mtu() {
        let d = ["--transport", "soft", "-d", "lo", "-c", "UD"];
        let e = parse("send_bw", &[&d[..], &["-s", "2048", "-m", "1024"]].concat()).unwrap_err();
        let e = e.to_string();
        assert!(
            e.contains("-s 2048") && e.contains("MTU (1024 bytes, -m)"),
            "{e}"
        );
        let o = parse("send_lat", &[&d[..], &["-a", "-m", "1024"]].concat()).unwrap();
        assert_eq!(
            (o.sizes[0], *o.sizes.last().unwrap(), o.sizes.len()),
            (2, 1024, 10)
        );
        let o = parse("send_bw", &d).unwrap();
        assert!(
            !o.size_given,
            "the default size is capped to the MTU later, not refused"
        );
    }
}
