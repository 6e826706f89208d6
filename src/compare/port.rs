//! The port a comparison's wire ceilings are worked out for, and the ceilings themselves.
//!
//! A run on a NIC has a line rate: an RDMA device's (`/sys/class/infiniband/<dev>/ports/1/rate`) or a
//! physical interface's (`/sys/class/net/<dev>/speed`). A veth pair or lo has none (a veth reports a
//! made-up 10000 Mb/s; only an interface with a `device` behind it counts), so there the ceilings are
//! worked out only at the speed the user names (`--link-speed 100G`), to say what v1, v2 and TCP
//! would differ by on such a port. [`attach`] gives every bandwidth row its protocol's ceiling.

use super::ceiling::{self, Protocol};
use crate::params::{Metric, RoceVersion, TransportKind};
use crate::results::{CompareSet, WireCeiling, WirePort};
use crate::wire::Encapsulation;
use std::path::Path;

/// The link MTU ceilings assume when the runs' link has no Ethernet MTU to go by (lo's is 65536).
pub(crate) const DEFAULT_MTU: u32 = 9000;

/// `--link-speed`: `100G`, `25g`, `400Gb/s`, `2.5G`, `800M` (10^9 or 10^6 bit/s); Gb/s.
pub(crate) fn parse_speed(s: &str) -> Result<f64, String> {
    let t = s.trim().to_ascii_lowercase();
    let t = t
        .strip_suffix("b/s")
        .or_else(|| t.strip_suffix("bps"))
        .or_else(|| t.strip_suffix("bit/s"))
        .unwrap_or(&t);
    let (num, scale) = match t.strip_suffix('g') {
        Some(n) => (n, 1.0),
        None => match t.strip_suffix('m') {
            Some(n) => (n, 1e-3),
            None => (t, 1.0),
        },
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v * scale <= 10_000.0 => Ok(v * scale),
        _ => Err(format!(
            "'{s}' is not a link speed; write Gb/s as 100G, 25G or 2.5G (or 800M for Mb/s)"
        )),
    }
}

/// The line rate and MTU of `device` as sysfs under `root` (`/sys` normally) reports them: an RDMA
/// device's port 1 and the interface behind it, or a physical interface; None for a virtual one
/// (lo, veth), a port that is down, or a name sysfs does not know.
pub(crate) fn probe(root: &Path, device: &str) -> Option<WirePort> {
    let read = |p: &Path| std::fs::read_to_string(root.join(p)).ok();
    let ib = Path::new("class/infiniband").join(device);
    if let Some(rate) = read(&ib.join("ports/1/rate")) {
        // "100 Gb/sec (4X EDR)"
        let gbps: f64 = rate.split_whitespace().next()?.parse().ok()?;
        let netdev = std::fs::read_dir(root.join(&ib).join("device/net"))
            .ok()?
            .flatten()
            .next()?
            .file_name();
        let mtu = read(&Path::new("class/net").join(&netdev).join("mtu"))?;
        return Some(WirePort {
            speed_gbps: gbps,
            mtu: mtu.trim().parse().ok()?,
            source: format!(
                "/sys/class/infiniband/{device}/ports/1/rate, MTU of {}",
                netdev.to_string_lossy()
            ),
        });
    }
    let net = Path::new("class/net").join(device);
    // A virtual interface has no device behind it, whatever speed it claims.
    if !root.join(&net).join("device").exists() {
        return None;
    }
    let mbps: i64 = read(&net.join("speed"))?.trim().parse().ok()?;
    let mtu: u32 = read(&net.join("mtu"))?.trim().parse().ok()?;
    (mbps > 0).then(|| WirePort {
        speed_gbps: mbps as f64 / 1000.0,
        mtu,
        source: format!("/sys/class/net/{device}/speed and mtu"),
    })
}

/// The protocol a run's packets use on the wire: RoCE v1, v2 over IPv4 (what the comparison's runs
/// use), or TCP.
fn protocol(transport: TransportKind, roce: Option<RoceVersion>) -> Protocol {
    match (transport, roce) {
        (TransportKind::Tcp, _) => Protocol::Tcp,
        (_, Some(RoceVersion::V1)) => Protocol::Roce(Encapsulation::V1),
        _ => Protocol::Roce(Encapsulation::V2v4),
    }
}

/// Gives every bandwidth row of `set` its protocol's goodput ceiling at `port` (and the row's share of
/// it), and records the port; a size the port's MTU cannot carry gets none.
pub(crate) fn attach(set: &mut CompareSet, port: WirePort) {
    for run in &mut set.runs {
        if run.test.metric != Metric::Bandwidth {
            continue;
        }
        let proto = protocol(run.transport, run.roce);
        run.ceilings = run
            .results
            .iter()
            .filter_map(|r| {
                let cost = ceiling::cost(proto, run.test.verb, r.size, port.mtu)?;
                let gbps = cost.goodput(port.speed_gbps, false);
                let measured = r.figures().bandwidth()?.gbps;
                Some(WireCeiling {
                    size: r.size,
                    protocol: proto.name(),
                    payload_mtu: cost.payload_mtu,
                    packets: cost.packets,
                    wire_bytes: cost.wire_bytes,
                    gbps,
                    share: measured / gbps,
                })
            })
            .collect();
    }
    set.wire = Some(port);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::testdata::set;

    #[test]
    fn link_speeds_are_read_as_a_person_writes_them() {
        assert_eq!(parse_speed("100G"), Ok(100.0));
        assert_eq!(parse_speed("25g"), Ok(25.0));
        assert_eq!(parse_speed("400Gb/s"), Ok(400.0));
        assert_eq!(parse_speed("2.5G"), Ok(2.5));
        assert_eq!(parse_speed("800M"), Ok(0.8));
        assert_eq!(parse_speed("40"), Ok(40.0));
        for bad in ["", "fast", "-1G", "0", "1e9G", "NaNG"] {
            assert!(parse_speed(bad).unwrap_err().contains("100G"), "{bad}");
        }
    }

    #[test]
    fn a_port_speed_comes_from_a_physical_nic_or_an_rdma_device_only() {
        let root = tempfile::tempdir().unwrap();
        let put = |rel: &str, text: &str| {
            let p = root.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        // A veth claims 10000 Mb/s but has no device behind it.
        put("class/net/veth0/speed", "10000\n");
        put("class/net/veth0/mtu", "9000\n");
        assert_eq!(probe(root.path(), "veth0"), None);
        put("class/net/eth0/speed", "25000\n");
        put("class/net/eth0/mtu", "1500\n");
        put("class/net/eth0/device/vendor", "0x15b3\n");
        let eth = probe(root.path(), "eth0").unwrap();
        assert_eq!((eth.speed_gbps, eth.mtu), (25.0, 1500));
        assert_eq!(eth.source, "/sys/class/net/eth0/speed and mtu");
        // A port that is down says -1.
        put("class/net/eth0/speed", "-1\n");
        assert_eq!(probe(root.path(), "eth0"), None);
        put(
            "class/infiniband/mlx5_0/ports/1/rate",
            "100 Gb/sec (4X EDR)\n",
        );
        put("class/infiniband/mlx5_0/device/net/ens1f0/ifindex", "3\n");
        put("class/net/ens1f0/mtu", "4200\n");
        let ib = probe(root.path(), "mlx5_0").unwrap();
        assert_eq!((ib.speed_gbps, ib.mtu), (100.0, 4200));
        assert!(ib.source.contains("MTU of ens1f0"), "{}", ib.source);
        assert_eq!(probe(root.path(), "nosuch"), None);
    }

    #[test]
    fn bandwidth_rows_get_their_protocols_ceiling_and_their_share() {
        let mut set = set();
        let port = WirePort {
            speed_gbps: 100.0,
            mtu: 9000,
            source: "--link-speed 100G".into(),
        };
        attach(&mut set, port.clone());
        assert_eq!(set.wire, Some(port));
        assert!(set.runs[0].ceilings.is_empty(), "latency rows get none");
        let v1 = set.runs[3].ceiling_at(65536).unwrap();
        assert_eq!(v1.protocol, "RoCE v1");
        // compare::ceiling's hand-worked 64 KiB WRITE at 100G, MTU 9000: 97.733 Gb/s for v1.
        assert!((v1.gbps - 97.733).abs() < 1e-3, "{}", v1.gbps);
        // The fixture's v1 row moves 50 Gb/s at 64 KiB.
        assert!((v1.share - 50.0 / v1.gbps).abs() < 1e-9);
        let tcp = set.runs[5].ceiling_at(65536).unwrap();
        assert_eq!((tcp.protocol.as_str(), tcp.payload_mtu), ("TCP/IPv4", 8948));
        assert_eq!(set.runs[4].ceilings.len(), 3, "every size");
    }
}
