//! The peer's MAC address for AF_PACKET frames, when the peer did not send it.
//!
//! A roceperf peer puts its MAC in [`ConnInfo`](crate::transport::ConnInfo); a verbs peer or a real
//! perftest sends only its GID. For RoCE v2 the GID is an IP address, and the kernel's neighbour table
//! (ARP for IPv4, NDP for IPv6) knows the MAC behind it, or learns it as soon as something is sent
//! there: we send one empty UDP datagram to the discard port (9) of the peer and wait for the entry,
//! as `ip neigh` would show it. Setup time only; nothing here is on the datapath.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use super::netdev::NetDev;
use crate::transport::Param;
use crate::wire::MacAddr;

/// How long to wait for the kernel to resolve the peer.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(3);

/// The MAC of `peer` on `dev`, from the kernel's neighbour table, resolving it first if needed.
pub(crate) fn resolve(dev: &NetDev, local: IpAddr, peer: IpAddr) -> Result<MacAddr, String> {
    if let Some(mac) = lookup(dev, peer)? {
        return Ok(mac);
    }
    // Any packet to the peer makes the kernel resolve it; the discard port gets an empty datagram.
    let sock = std::net::UdpSocket::bind(SocketAddr::new(local, 0))
        .map_err(|e| format!("cannot open a UDP socket on {local} to resolve {peer}: {e}"))?;
    let deadline = Instant::now() + RESOLVE_TIMEOUT;
    let mut last_probe = Instant::now() - Duration::from_secs(1);
    while Instant::now() < deadline {
        if last_probe.elapsed() >= Duration::from_millis(500) {
            // Errors (no route, unreachable) show up as the missing entry below.
            let _ = sock.send_to(&[], SocketAddr::new(peer, 9));
            last_probe = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(10));
        if let Some(mac) = lookup(dev, peer)? {
            return Ok(mac);
        }
    }
    Err(format!(
        "the peer sent no MAC address and the kernel could not resolve {peer} on '{}' within {} s (`ip neigh show dev {}` lists what it knows); check that the peer is reachable on that interface, or use {} udp",
        dev.name,
        RESOLVE_TIMEOUT.as_secs(),
        dev.name,
        Param::Io
    ))
}

/// The complete neighbour entry for `peer` on `dev`, if the kernel has one.
fn lookup(dev: &NetDev, peer: IpAddr) -> Result<Option<MacAddr>, String> {
    match peer {
        IpAddr::V4(_) => {
            let table = std::fs::read_to_string("/proc/thread-self/net/arp").map_err(|e| {
                format!("cannot read /proc/thread-self/net/arp to find {peer}'s MAC: {e}")
            })?;
            Ok(parse_proc_arp(&table, peer, &dev.name))
        }
        IpAddr::V6(_) => {
            let out = std::process::Command::new("ip")
                .args(["-6", "neigh", "show", "to"])
                .arg(peer.to_string())
                .args(["dev", &dev.name])
                .output()
                .map_err(|e| {
                    format!(
                        "cannot run `ip -6 neigh` to find {peer}'s MAC ({e}); install iproute2, or use {} udp",
                        Param::Io
                    )
                })?;
            Ok(parse_ip_neigh(&String::from_utf8_lossy(&out.stdout)))
        }
    }
}

/// The MAC of `ip` on `dev` in `/proc/net/arp`, if its entry is complete (flag ATF_COM, 0x2).
fn parse_proc_arp(table: &str, ip: IpAddr, dev: &str) -> Option<MacAddr> {
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [addr, _hw_type, flags, mac, _mask, device] = f[..] else {
            return None;
        };
        let complete = u32::from_str_radix(flags.trim_start_matches("0x"), 16).ok()? & 0x2 != 0;
        (complete && device == dev && addr.parse::<IpAddr>().ok()? == ip)
            .then(|| mac.parse::<MacAddr>().ok())
            .flatten()
            .filter(|m| !m.is_zero())
    })
}

/// The MAC in `ip neigh show to ADDR dev DEV` output, unless the entry is FAILED or INCOMPLETE.
fn parse_ip_neigh(out: &str) -> Option<MacAddr> {
    out.lines().find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.iter().any(|w| *w == "FAILED" || *w == "INCOMPLETE") {
            return None;
        }
        let at = f.iter().position(|w| *w == "lladdr")?;
        f.get(at + 1)?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ARP: &str =
        "IP address       HW type     Flags       HW address            Mask     Device
10.9.0.2         0x1         0x2         52:54:00:00:09:02     *        br0
10.9.0.3         0x1         0x0         00:00:00:00:00:00     *        br0
10.77.0.2        0x1         0x2         aa:bb:cc:dd:ee:01     *        veth0
";

    #[test]
    fn proc_arp_gives_complete_entries_on_the_right_device() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(
            parse_proc_arp(ARP, ip("10.9.0.2"), "br0"),
            Some(MacAddr([0x52, 0x54, 0, 0, 9, 2]))
        );
        assert_eq!(
            parse_proc_arp(ARP, ip("10.9.0.3"), "br0"),
            None,
            "incomplete"
        );
        assert_eq!(
            parse_proc_arp(ARP, ip("10.77.0.2"), "br0"),
            None,
            "other device"
        );
        assert_eq!(parse_proc_arp(ARP, ip("10.1.1.1"), "br0"), None);
    }

    #[test]
    fn ip_neigh_output_is_read() {
        assert_eq!(
            parse_ip_neigh("fd77::2 lladdr 2e:1f:00:aa:bb:cc REACHABLE\n"),
            Some(MacAddr([0x2e, 0x1f, 0, 0xaa, 0xbb, 0xcc]))
        );
        assert_eq!(
            parse_ip_neigh("fd77::2 lladdr 2e:1f:00:aa:bb:cc STALE"),
            Some(MacAddr([0x2e, 0x1f, 0, 0xaa, 0xbb, 0xcc]))
        );
        assert_eq!(parse_ip_neigh("fd77::2 FAILED\n"), None);
        assert_eq!(parse_ip_neigh("fd77::2 INCOMPLETE\n"), None);
        assert_eq!(parse_ip_neigh(""), None);
        assert!("1:2:3:4:5".parse::<MacAddr>().is_err());
        assert!("01:02:03:04:05:06:07".parse::<MacAddr>().is_err());
    }
}
