//! `roce_compare --local`: every transport on this machine, across one link.
//!
//! With the privileges to make one, every leg crosses the same veth pair between two network
//! namespaces ([`LEGS`]): RoCE v1 and RoCE v2 over AF_PACKET with the same batching (one host path, so
//! what differs between the two rows is the protocol), TCP, and RoCE v2 over its unprivileged UDP
//! socket (GSO), named for that path. Without them, RoCE v2 over the UDP socket and TCP run on
//! loopback and the AF_PACKET legs (whose frames must cross a real, if virtual, link and need
//! CAP_NET_RAW) are skipped with a note that names the missing capability and how to get it. Each run
//! records the link it crossed and the path it took. [`Cores`] are the two sides' cores and why.

use super::error::{Error, Result};
use super::leg::{LegSpec, TestSpec, TransportChoice};
use super::run::{Leg, Plan};
use crate::params::{RoceVersion, TransportKind};
use crate::results::{HostPath, Skipped, path_label};
use std::process::Command;

/// Capabilities RoCE v1 across namespaces needs: bit number, name, and what for.
const V1_CAPS: [(u32, &str, &str); 3] = [
    (21, "CAP_SYS_ADMIN", "create network namespaces"),
    (12, "CAP_NET_ADMIN", "create and configure the veth pair"),
    (13, "CAP_NET_RAW", "open AF_PACKET sockets for RoCE frames"),
];

/// Server side address of the veth pair (namespace a); the client is .2 in namespace b.
pub(crate) const VETH_SERVER_IP: &str = "10.77.0.1";
const VETH_CLIENT_IP: &str = "10.77.0.2";
/// Link MTU of the veth pair.
pub(crate) const VETH_MTU: u32 = 9000;
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

/// Runs `ip ARGS`; the error names the command and what it printed, or a missing iproute2.
pub(crate) fn ip(args: &[&str]) -> Result<()> {
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
            ip(&[
                "-n",
                ns,
                "link",
                "set",
                VETH_DEV,
                "mtu",
                &VETH_MTU.to_string(),
            ])?;
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
        delete_netns(&[&self.server, &self.client]);
    }
}

/// Deletes network namespaces (and the veth ends in them), quietly: those that do not exist are
/// what a clean run leaves.
pub(crate) fn delete_netns(names: &[&str]) {
    for ns in names {
        let _ = Command::new("ip")
            .args(["netns", "del", ns])
            .stderr(std::process::Stdio::null())
            .status();
    }
}

impl Drop for NetnsPair {
    fn drop(&mut self) {
        self.delete();
    }
}

/// What `--local` records as the link of runs on loopback.
pub(crate) const LOOPBACK_LINK: &str = "lo";

/// One leg of `--local`: what it runs and the host path that takes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LocalLeg {
    /// `--transport`.
    transport: TransportChoice,
    /// `--roce`.
    roce: Option<RoceVersion>,
    /// The host path those flags make it take.
    path: HostPath,
    /// Flags both sides get beyond `--transport`, `--roce` and `-d`.
    flags: &'static [&'static str],
    /// It needs CAP_NET_RAW and a link between namespaces (AF_PACKET), so it is skipped on lo.
    needs_veth: bool,
}

/// The legs of `roce_compare --local`, in the order they run: RoCE v1 and v2 on one host path
/// (AF_PACKET, one frame per packet: `--no-gso` keeps v2's batching v1's), TCP, and RoCE v2 over its
/// UDP socket with GSO, the unprivileged path. One line a leg; the label says the path.
pub(crate) const LEGS: [LocalLeg; 4] = [
    LocalLeg {
        transport: TransportChoice::Soft,
        roce: Some(RoceVersion::V1),
        path: HostPath::AfPacket,
        flags: &["--io", "packet"],
        needs_veth: true,
    },
    LocalLeg {
        transport: TransportChoice::Soft,
        roce: Some(RoceVersion::V2),
        path: HostPath::AfPacket,
        flags: &["--io", "packet", "--no-gso"],
        needs_veth: true,
    },
    LocalLeg {
        transport: TransportChoice::Tcp,
        roce: None,
        path: HostPath::TcpSocket,
        flags: &[],
        needs_veth: false,
    },
    LocalLeg {
        transport: TransportChoice::Soft,
        roce: Some(RoceVersion::V2),
        path: HostPath::UdpGso,
        flags: &["--io", "udp"],
        needs_veth: false,
    },
];

impl LocalLeg {
    /// `RoCE v2 (soft, AF_PACKET)`, `TCP`.
    pub(crate) fn label(&self) -> String {
        let transport = match self.transport {
            TransportChoice::Tcp => TransportKind::Tcp,
            _ => TransportKind::Soft,
        };
        path_label(transport, self.roce, self.path)
    }

    /// The leg over `device`, the client connecting to `host`.
    fn leg(&self, device: &str, host: &str) -> Leg {
        let mut spec = match (self.transport, self.roce) {
            (TransportChoice::Tcp, _) | (_, None) => LegSpec::tcp(),
            (t, Some(v)) => LegSpec::roce(t, v, device),
        };
        spec.extra = self.flags.iter().map(|f| f.to_string()).collect();
        Leg {
            spec,
            label: self.label(),
            server_netns: None,
            client_netns: None,
            host: host.into(),
            link: None,
            path: Some(self.path),
        }
    }
}

/// The `--local` plan. With `netns` (two namespaces joined by a veth pair): every leg of [`LEGS`]
/// across that veth pair, so that every row crosses the same link. Without it (the error says why):
/// the legs that need no veth on lo, the others skipped with that reason.
pub(crate) fn plan(tests: Vec<TestSpec>, netns: std::result::Result<&NetnsPair, &Error>) -> Plan {
    let mut legs = Vec::new();
    let mut skipped = Vec::new();
    for l in LEGS {
        match netns {
            Ok(pair) => legs.push(Leg {
                server_netns: Some(pair.server.clone()),
                client_netns: Some(pair.client.clone()),
                link: Some(pair.link()),
                ..l.leg(VETH_DEV, VETH_SERVER_IP)
            }),
            Err(_) if !l.needs_veth => legs.push(Leg {
                link: Some(LOOPBACK_LINK.into()),
                ..l.leg("lo", "127.0.0.1")
            }),
            Err(reason) => skipped.push(Skipped {
                label: l.label(),
                reason: format!(
                    "AF_PACKET runs across a veth pair between two network namespaces: {reason}"
                ),
                failed: false,
            }),
        }
    }
    Plan {
        tests,
        legs,
        skipped,
        repeat: 1,
        floors: true,
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

/// The cores of a local comparison's two sides, and what chose them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cores {
    /// The server's core; None: the binaries' default.
    pub(crate) server: Option<usize>,
    /// The client's core; None: the binaries' default.
    pub(crate) client: Option<usize>,
    /// What chose them: `--server-cpu`/`--client-cpu`, or roce_compare's default.
    chosen: [CoreChoice; 2],
}

/// What chose a side's core.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CoreChoice {
    /// The user, with the side's flag.
    Flag,
    /// roce_compare: the last two cores this process may use, server last.
    Default,
    /// Nobody: one core only, the binaries pick.
    Binaries,
}

impl Cores {
    /// The cores for `server` and `client` as the user gave them (`--server-cpu`, `--client-cpu`),
    /// else the last two this process may use (server last), so that neither shares with the other
    /// and both keep away from core 0, where most interrupts land.
    pub(crate) fn choose(server: Option<usize>, client: Option<usize>) -> Cores {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        let default = |user: Option<usize>, pick: usize| match user {
            Some(c) => (Some(c), CoreChoice::Flag),
            None if n >= 2 => (Some(n - 1 - pick), CoreChoice::Default),
            None => (None, CoreChoice::Binaries),
        };
        let (server, s) = default(server, 0);
        let (client, c) = default(client, 1);
        Cores {
            server,
            client,
            chosen: [s, c],
        }
    }

    /// What chose side `i` (0 server, 1 client) as words: `core 1 chosen with --server-cpu`.
    fn why(&self, i: usize) -> String {
        let (core, flag, which) = match i {
            0 => (self.server, "--server-cpu", "the last core"),
            _ => (self.client, "--client-cpu", "the second-to-last core"),
        };
        let core = core.map_or_else(
            || "the binaries' default core".into(),
            |c| format!("core {c}"),
        );
        match self.chosen[i] {
            CoreChoice::Flag => format!("{core} chosen with {flag}"),
            CoreChoice::Default => format!("{core} by roce_compare's default ({which}; {flag})"),
            CoreChoice::Binaries => {
                format!("{core}: this process may use one core only; choose one with {flag}")
            }
        }
    }

    /// The note a client's run gets about its core.
    pub(crate) fn client_note(&self) -> String {
        self.why(1)
    }

    /// The comparison's note about both sides' cores.
    pub(crate) fn note(&self) -> String {
        match (self.server, self.client, self.chosen) {
            (Some(s), Some(c), [CoreChoice::Default, CoreChoice::Default]) => format!(
                "server on core {s}, client on core {c}: roce_compare's default, the last two cores \
                 this process may use, so that the two sides never share one (--server-cpu, \
                 --client-cpu to choose)"
            ),
            _ => format!("server on {}; client on {}", self.why(0), self.why(1)),
        }
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
    fn without_namespaces_the_af_packet_legs_are_skipped_with_the_reason() {
        let err = Error::Privileges {
            missing: "CAP_NET_RAW".into(),
        };
        let p = plan(vec![], Err(&err));
        let labels: Vec<&str> = p.legs.iter().map(|l| l.label.as_str()).collect();
        assert_eq!(labels, ["TCP", "RoCE v2 (soft, UDP socket)"]);
        assert!(p.legs.iter().all(|l| l.link.as_deref() == Some("lo")));
        assert!(p.legs.iter().all(|l| l.host == "127.0.0.1"));
        assert_eq!(p.legs[1].spec.device.as_deref(), Some("lo"));
        let skipped: Vec<&str> = p.skipped.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(
            skipped,
            ["RoCE v1 (soft, AF_PACKET)", "RoCE v2 (soft, AF_PACKET)"]
        );
        assert!(
            p.skipped[0]
                .reason
                .contains("namespaces: needs CAP_NET_RAW, which this process lacks"),
            "{}",
            p.skipped[0].reason
        );
        assert!(p.floors);
    }

    #[test]
    fn as_root_v1_and_v2_take_one_path_across_the_veth_pair() {
        let pair = NetnsPair {
            server: "xa".into(),
            client: "xb".into(),
        };
        let p = plan(vec![], Ok(&pair));
        let labels: Vec<&str> = p.legs.iter().map(|l| l.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "RoCE v1 (soft, AF_PACKET)",
                "RoCE v2 (soft, AF_PACKET)",
                "TCP",
                "RoCE v2 (soft, UDP socket)"
            ]
        );
        // Every transport crosses the same veth pair, and says so.
        for leg in &p.legs {
            assert_eq!(leg.server_netns.as_deref(), Some("xa"));
            assert_eq!(leg.client_netns.as_deref(), Some("xb"));
            assert_eq!(leg.host, VETH_SERVER_IP);
            assert_eq!(leg.link.as_deref(), Some("veth (netns xa<->xb, MTU 9000)"));
        }
        // The two RoCE versions: one backend, the same batching; only --roce differs.
        let flags = |i: usize| p.legs[i].spec.extra.join(" ");
        assert_eq!(flags(0), "--io packet");
        assert_eq!(flags(1), "--io packet --no-gso");
        assert_eq!(p.legs[0].path, p.legs[1].path);
        assert_eq!(p.legs[0].spec.device.as_deref(), Some(VETH_DEV));
        assert_eq!(p.legs[2].spec, LegSpec::tcp());
        assert_eq!(flags(3), "--io udp");
        assert!(p.skipped.is_empty());
        std::mem::forget(pair);
    }

    #[test]
    fn the_cores_say_what_chose_them() {
        let c = Cores::choose(Some(3), Some(2));
        assert_eq!((c.server, c.client), (Some(3), Some(2)));
        assert_eq!(c.client_note(), "core 2 chosen with --client-cpu");
        let d = Cores::choose(None, Some(5));
        assert!(
            d.note()
                .ends_with("; client on core 5 chosen with --client-cpu"),
            "{}",
            d.note()
        );
        if std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2 {
            assert!(
                d.note().starts_with("server on core ")
                    && d.note()
                        .contains("by roce_compare's default (the last core; --server-cpu)"),
                "{}",
                d.note()
            );
            let both = Cores::choose(None, None);
            assert!(
                both.note()
                    .contains(": roce_compare's default, the last two cores")
            );
            assert!(
                both.client_note()
                    .ends_with("(the second-to-last core; --client-cpu)")
            );
        }
    }
}
