//! `roce_compare --local`: every transport on this machine, across one link.
//!
//! With the privileges to make one, RoCE v2 (soft, UDP), RoCE v1 (soft, AF_PACKET) and TCP all cross
//! the same veth pair between two network namespaces, so the rows compare transports and not links.
//! Without them, RoCE v2 and TCP run on loopback and RoCE v1 (whose frames must cross a real, if
//! virtual, link) is skipped with a note that names the missing capability and how to get it. Each
//! run records the link it crossed.

use super::error::{Error, Result};
use super::leg::{LegSpec, TestSpec, TransportChoice};
use super::run::{Leg, Plan};
use crate::params::RoceVersion;
use crate::results::Skipped;
use std::process::Command;

/// Capabilities RoCE v1 across namespaces needs: bit number, name, and what for.
const V1_CAPS: [(u32, &str, &str); 3] = [
    (21, "CAP_SYS_ADMIN", "create network namespaces"),
    (12, "CAP_NET_ADMIN", "create and configure the veth pair"),
    (
        13,
        "CAP_NET_RAW",
        "open AF_PACKET sockets for RoCE v1 frames",
    ),
];

/// Server side address of the veth pair (namespace a); the client is .2 in namespace b.
pub(crate) const VETH_SERVER_IP: &str = "10.77.0.1";
const VETH_CLIENT_IP: &str = "10.77.0.2";
/// Link MTU of the veth pair.
const VETH_MTU: &str = "9000";
/// The veth end's name in both namespaces.
pub(crate) const VETH_DEV: &str = "veth0";

/// The effective capability mask of this process (`CapEff` in /proc/self/status).
pub(crate) fn effective_caps() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_cap_eff(&status)
}

fn parse_cap_eff(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("CapEff:"))?;
    u64::from_str_radix(line["CapEff:".len()..].trim(), 16).ok()
}

/// The capabilities (of `caps`) RoCE v1 across namespaces needs but lacks, with what each is for;
/// None when nothing is missing.
pub(crate) fn missing_v1_privileges(caps: u64) -> Option<String> {
    let missing: Vec<String> = V1_CAPS
        .iter()
        .filter(|(bit, _, _)| caps & (1 << bit) == 0)
        .map(|(_, name, why)| format!("{name} (to {why})"))
        .collect();
    (!missing.is_empty()).then(|| missing.join(", "))
}

/// Two network namespaces joined by a veth pair (as scripts/netns.sh makes them), deleted on drop.
pub(crate) struct NetnsPair {
    /// Namespace of the server (10.77.0.1).
    pub server: String,
    /// Namespace of the client (10.77.0.2).
    pub client: String,
}

fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip").args(args).output().map_err(|source| {
        if source.kind() == std::io::ErrorKind::NotFound {
            Error::IpMissing
        } else {
            Error::Io {
                action: "cannot run ip",
                source,
            }
        }
    })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(Error::Ip {
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        })
    }
}

impl NetnsPair {
    /// Creates `<prefix>a` and `<prefix>b` with `veth0` in each (10.77.0.1/24 and 10.77.0.2/24, MTU
    /// 9000).
    pub(crate) fn up(prefix: &str) -> Result<NetnsPair> {
        let pair = NetnsPair {
            server: format!("{prefix}a"),
            client: format!("{prefix}b"),
        };
        pair.delete();
        ip(&["netns", "add", &pair.server])?;
        ip(&["netns", "add", &pair.client])?;
        ip(&[
            "link",
            "add",
            VETH_DEV,
            "netns",
            &pair.server,
            "type",
            "veth",
            "peer",
            "name",
            VETH_DEV,
            "netns",
            &pair.client,
        ])?;
        for (ns, addr) in [
            (&pair.server, VETH_SERVER_IP),
            (&pair.client, VETH_CLIENT_IP),
        ] {
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
            // Room for a 4096-byte RoCE MTU, as RoCE v2 gets on lo: compare encapsulations, not MTUs.
            ip(&["-n", ns, "link", "set", VETH_DEV, "mtu", VETH_MTU])?;
            ip(&[
                "-n",
                ns,
                "addr",
                "add",
                &format!("{addr}/24"),
                "dev",
                VETH_DEV,
            ])?;
            ip(&["-n", ns, "link", "set", VETH_DEV, "up"])?;
        }
        Ok(pair)
    }

    /// How the runs across this pair name their link: `veth (netns rpc42a<->rpc42b, MTU 9000)`.
    pub(crate) fn link(&self) -> String {
        format!(
            "veth (netns {}<->{}, MTU {VETH_MTU})",
            self.server, self.client
        )
    }

    fn delete(&self) {
        for ns in [&self.server, &self.client] {
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .stderr(std::process::Stdio::null())
                .status();
        }
    }
}

impl Drop for NetnsPair {
    fn drop(&mut self) {
        self.delete();
    }
}

/// What `--local` records as the link of runs on loopback.
pub(crate) const LOOPBACK_LINK: &str = "lo";

/// The `--local` plan. With `netns` (two namespaces joined by a veth pair): RoCE v2 (soft), RoCE v1
/// (soft) and TCP all across that veth pair, so that every row measures the same link. Without it
/// (the error says why): RoCE v2 and TCP on lo, RoCE v1 skipped with that reason.
pub(crate) fn plan(tests: Vec<TestSpec>, netns: std::result::Result<&NetnsPair, &Error>) -> Plan {
    let v1_label = "RoCE v1 (soft)".to_string();
    let v2_label = "RoCE v2 (soft)".to_string();
    let (legs, skipped) = match netns {
        Ok(pair) => {
            let link = Some(pair.link());
            let across = |spec: LegSpec, label: String| Leg {
                spec,
                label,
                server_netns: Some(pair.server.clone()),
                client_netns: Some(pair.client.clone()),
                host: VETH_SERVER_IP.into(),
                link: link.clone(),
            };
            let legs = vec![
                across(
                    LegSpec::roce(TransportChoice::Soft, RoceVersion::V2, VETH_DEV),
                    v2_label,
                ),
                across(
                    LegSpec::roce(TransportChoice::Soft, RoceVersion::V1, VETH_DEV),
                    v1_label,
                ),
                across(LegSpec::tcp(), "TCP".into()),
            ];
            (legs, Vec::new())
        }
        Err(reason) => {
            let on_lo = |leg: Leg| Leg {
                link: Some(LOOPBACK_LINK.into()),
                ..leg
            };
            let legs = vec![
                on_lo(Leg {
                    spec: LegSpec::roce(TransportChoice::Soft, RoceVersion::V2, "lo"),
                    label: v2_label,
                    server_netns: None,
                    client_netns: None,
                    host: "127.0.0.1".into(),
                    link: None,
                }),
                on_lo(Leg::tcp("127.0.0.1")),
            ];
            let skipped = vec![Skipped {
                label: v1_label,
                reason: format!(
                    "RoCE v1 runs across a veth pair between two network namespaces: {reason}"
                ),
                failed: false,
            }];
            (legs, skipped)
        }
    };
    Plan {
        tests,
        legs,
        skipped,
        repeat: 1,
    }
}

/// Sets up the veth pair every transport crosses (RoCE v1 needs one), or says why it cannot be
/// (missing capability, missing `ip`).
pub(crate) fn netns_pair() -> Result<NetnsPair> {
    let caps = effective_caps().unwrap_or(0);
    if let Some(missing) = missing_v1_privileges(caps) {
        return Err(Error::Privileges { missing });
    }
    // Unique per process, so that two comparisons (or a test run) never tear down each other's pair.
    let prefix = format!("rpc{}", std::process::id());
    NetnsPair::up(&prefix)
}

/// Cores for the server and the client: the last two, so that neither shares with the other.
pub(crate) fn cores() -> (Option<usize>, Option<usize>) {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    if n >= 2 {
        (Some(n - 1), Some(n - 2))
    } else {
        (None, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capabilities_are_read_and_missing_ones_named() {
        let status = "Name:\tx\nCapInh:\t0000000000000000\nCapEff:\t0000000000003000\n";
        let caps = parse_cap_eff(status).unwrap();
        assert_eq!(caps, 0x3000);
        let missing = missing_v1_privileges(caps).unwrap();
        assert_eq!(missing, "CAP_SYS_ADMIN (to create network namespaces)");
        let why = Error::Privileges { missing }.to_string();
        assert!(why.starts_with("needs CAP_SYS_ADMIN (to create"), "{why}");
        assert!(why.contains("sudo"), "{why}");
        assert_eq!(missing_v1_privileges(0x1ff_ffff_ffff), None);
        assert!(missing_v1_privileges(0).unwrap().contains("CAP_NET_RAW"));
    }

    #[test]
    fn without_namespaces_v1_is_skipped_with_the_reason() {
        let err = Error::Privileges {
            missing: "CAP_NET_RAW".into(),
        };
        let p = plan(vec![], Err(&err));
        let labels: Vec<&str> = p.legs.iter().map(|l| l.label.as_str()).collect();
        assert_eq!(labels, ["RoCE v2 (soft)", "TCP"]);
        assert!(p.legs.iter().all(|l| l.link.as_deref() == Some("lo")));
        assert!(p.legs.iter().all(|l| l.host == "127.0.0.1"));
        assert_eq!(p.skipped.len(), 1);
        assert_eq!(p.skipped[0].label, "RoCE v1 (soft)");
        assert!(
            p.skipped[0]
                .reason
                .contains("namespaces: needs CAP_NET_RAW, which this process lacks"),
            "{}",
            p.skipped[0].reason
        );
        let pair = NetnsPair {
            server: "xa".into(),
            client: "xb".into(),
        };
        let p = plan(vec![], Ok(&pair));
        assert_eq!(p.legs[1].server_netns.as_deref(), Some("xa"));
        assert_eq!(p.legs[1].host, VETH_SERVER_IP);
        // Every transport crosses the same veth pair, and says so.
        let labels: Vec<&str> = p.legs.iter().map(|l| l.label.as_str()).collect();
        assert_eq!(labels, ["RoCE v2 (soft)", "RoCE v1 (soft)", "TCP"]);
        for leg in &p.legs {
            assert_eq!(leg.server_netns.as_deref(), Some("xa"));
            assert_eq!(leg.client_netns.as_deref(), Some("xb"));
            assert_eq!(leg.host, VETH_SERVER_IP);
            assert_eq!(leg.link.as_deref(), Some("veth (netns xa<->xb, MTU 9000)"));
        }
        assert_eq!(p.legs[0].spec.device.as_deref(), Some(VETH_DEV));
        assert_eq!(p.legs[2].spec, LegSpec::tcp());
        assert!(p.skipped.is_empty());
        std::mem::forget(pair);
    }
}
