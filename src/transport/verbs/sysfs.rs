//! What the kernel says through sysfs: RDMA support, RDMA devices, GID tables, network interfaces.
//!
//! The root is a parameter so tests run on recorded trees. The GID table is read here rather than
//! through `ibv_query_gid_table` because sysfs carries the type and netdev of every slot on every
//! rdma-core version (perftest's fallback reads the same files).

use super::gid::{GidEntry, GidType};
use crate::transport::Gid;
use std::fs;
use std::path::{Path, PathBuf};

/// A sysfs tree (`/sys` on a real host).
#[derive(Debug, Clone)]
pub(crate) struct Sysfs {
    root: PathBuf,
}

impl Default for Sysfs {
    /// `/sys`, or `$SYSFS_PATH` when set: libibverbs honours that variable too, so both read one tree.
    fn default() -> Self {
        match std::env::var_os("SYSFS_PATH") {
            Some(p) if !p.is_empty() => Sysfs::at(p),
            _ => Sysfs::at("/sys"),
        }
    }
}

impl Sysfs {
    /// A tree rooted at `root` (for tests: a recorded copy).
    pub(crate) fn at(root: impl Into<PathBuf>) -> Sysfs {
        Sysfs { root: root.into() }
    }

    /// The tree's root.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// True when the kernel has the RDMA userspace interface (ib_uverbs): `class/infiniband_verbs`.
    pub(crate) fn has_uverbs(&self) -> bool {
        self.path("class/infiniband_verbs").is_dir()
    }

    /// Network interfaces under `class/net`, sorted, loopback last (it is rarely what a user wants
    /// but it is what works on any machine).
    pub(crate) fn net_interfaces(&self) -> Vec<String> {
        let mut v = list_dir(&self.path("class/net"));
        v.sort_by_key(|n| (n == "lo", n.clone()));
        v
    }

    /// The GID table of `dev` port `port`; unreadable or unknown-type slots are skipped.
    pub(crate) fn gid_table(&self, dev: &str, port: u8) -> Vec<GidEntry> {
        let base = self.path(&format!("class/infiniband/{dev}/ports/{port}"));
        let mut out = Vec::new();
        for name in list_dir(&base.join("gids")) {
            let Ok(index) = name.parse::<u32>() else {
                continue;
            };
            let Some(gid) = read(&base.join("gids").join(&name)).and_then(|t| parse_gid(&t)) else {
                continue;
            };
            // The kernel refuses to read the type of an unused slot (EINVAL); such slots are zero.
            let kind = read(&base.join("gid_attrs/types").join(&name))
                .and_then(|t| GidType::from_sysfs(&t));
            let entry = GidEntry {
                index,
                gid,
                kind: kind.unwrap_or(GidType::RoceV1),
                netdev: read(&base.join("gid_attrs/ndevs").join(&name))
                    .map(|s| s.trim().to_string()),
            };
            if kind.is_some() || entry.is_zero() {
                out.push(entry);
            }
        }
        out.sort_by_key(|e| e.index);
        out
    }

    /// The directory of `dev` port `port` (`class/infiniband/<dev>/ports/<port>`), whose files `-W` names.
    pub(crate) fn port_dir(&self, dev: &str, port: u8) -> PathBuf {
        self.path(&format!("class/infiniband/{dev}/ports/{port}"))
    }

    /// The network interface behind `dev` port `port`: the first its GID table names, else the first
    /// under the device's `device/net/` (a port whose GIDs are not populated yet).
    pub(crate) fn port_netdev(&self, dev: &str, port: u8) -> Option<String> {
        self.netdevs_of(dev, port).into_iter().next().or_else(|| {
            list_dir(&self.path(&format!("class/infiniband/{dev}/device/net")))
                .into_iter()
                .next()
        })
    }

    /// The network interfaces a device's GIDs belong to (what `-d` would name for `--transport soft`).
    pub(crate) fn netdevs_of(&self, dev: &str, port: u8) -> Vec<String> {
        let mut v: Vec<String> = self
            .gid_table(dev, port)
            .into_iter()
            .filter_map(|e| e.netdev)
            .collect();
        v.sort();
        v.dedup();
        v
    }
}

fn read(p: &Path) -> Option<String> {
    fs::read_to_string(p).ok()
}

fn list_dir(p: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(p)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Parses sysfs's `fe80:0000:0000:0000:c8d1:02ff:fe3a:9b01` (or any IPv6 text) into bytes.
pub(crate) fn parse_gid(text: &str) -> Option<Gid> {
    text.trim().parse().ok()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Writes `text` to `rel` under `root`, making its directories (a fake tree's file).
    pub(crate) fn put(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }

    /// A recorded rxe0 tree: the lab's `show_gids` output written back as files.
    fn rxe_tree() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        let p = "class/infiniband/rxe0/ports/1";
        put(
            r,
            &format!("{p}/gids/0"),
            "fe80:0000:0000:0000:c8d1:02ff:fe3a:9b01\n",
        );
        put(r, &format!("{p}/gid_attrs/types/0"), "RoCE v2\n");
        put(r, &format!("{p}/gid_attrs/ndevs/0"), "veth0\n");
        put(
            r,
            &format!("{p}/gids/1"),
            "0000:0000:0000:0000:0000:ffff:0a00:0001\n",
        );
        put(r, &format!("{p}/gid_attrs/types/1"), "RoCE v2\n");
        put(r, &format!("{p}/gid_attrs/ndevs/1"), "veth0\n");
        put(
            r,
            &format!("{p}/gids/2"),
            "0000:0000:0000:0000:0000:0000:0000:0000\n",
        );
        put(r, "class/infiniband_verbs/abi_version", "6\n");
        for n in ["lo", "veth0", "eth0"] {
            put(r, &format!("class/net/{n}/mtu"), "1500\n");
        }
        d
    }

    #[test]
    fn reads_a_recorded_gid_table() {
        let d = rxe_tree();
        let s = Sysfs::at(d.path());
        let t = s.gid_table("rxe0", 1);
        assert_eq!(t.len(), 3);
        assert_eq!(t[1].address(), "::ffff:10.0.0.1");
        assert_eq!(t[1].kind, GidType::RoceV2);
        assert_eq!(t[1].netdev.as_deref(), Some("veth0"));
        assert!(t[2].is_zero());
        assert_eq!(s.netdevs_of("rxe0", 1), vec!["veth0"]);
        assert!(s.has_uverbs());
    }

    /// Issue 18: `-x N` is the kernel's index N (`gids/N`, what `show_gids` and perftest's `-x` use), and
    /// the table the messages print names each entry by that same index, across unused slots, a slot
    /// whose type the kernel does not say, and indices past 9 (which sort before 2 as file names).
    #[test]
    fn gid_index_is_the_kernel_index_the_printed_table_shows() {
        use crate::transport::verbs::gid::{GidPolicy, format_table, select};
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        let p = "class/infiniband/mlx5_0/ports/1";
        let slots: [(u32, &str, Option<&str>); 7] = [
            (
                0,
                "fe80:0000:0000:0000:0ac0:ebff:fe10:0001",
                Some("IB/RoCE v1"),
            ),
            (
                1,
                "fe80:0000:0000:0000:0ac0:ebff:fe10:0001",
                Some("RoCE v2"),
            ),
            (2, "0000:0000:0000:0000:0000:0000:0000:0000", None),
            (3, "0000:0000:0000:0000:0000:0000:0000:0000", None),
            (4, "fd00:0000:0000:0000:0000:0000:0000:0004", Some("bogus")),
            (
                10,
                "0000:0000:0000:0000:0000:ffff:c0a8:0a0b",
                Some("IB/RoCE v1"),
            ),
            (
                11,
                "0000:0000:0000:0000:0000:ffff:c0a8:0a0b",
                Some("RoCE v2"),
            ),
        ];
        for (i, gid, kind) in slots {
            put(r, &format!("{p}/gids/{i}"), &format!("{gid}\n"));
            if let Some(k) = kind {
                put(r, &format!("{p}/gid_attrs/types/{i}"), &format!("{k}\n"));
            }
        }
        let table = Sysfs::at(r).gid_table("mlx5_0", 1);
        let indices: Vec<u32> = table.iter().map(|e| e.index).collect();
        assert_eq!(indices, [0, 1, 2, 3, 10, 11], "slot 4 has no known type");
        let printed = format_table(&table);
        for e in table.iter().filter(|e| !e.is_zero()) {
            let policy = GidPolicy {
                index: Some(e.index),
                ..Default::default()
            };
            let chosen = select(&table, &policy).unwrap().entry;
            assert_eq!(chosen, *e);
            let line = format!("gid[{}] {} {}", e.index, e.address(), e.kind);
            assert!(printed.contains(&line), "{line} in {printed}");
        }
        let x11 = GidPolicy {
            index: Some(11),
            ..Default::default()
        };
        assert_eq!(
            select(&table, &x11).unwrap().entry.address(),
            "::ffff:192.168.10.11"
        );
        for missing in [4, 5, 12] {
            let policy = GidPolicy {
                index: Some(missing),
                ..Default::default()
            };
            assert!(select(&table, &policy).is_err(), "-x {missing}");
        }
    }

    #[test]
    fn lists_interfaces_loopback_last() {
        let d = rxe_tree();
        assert_eq!(
            Sysfs::at(d.path()).net_interfaces(),
            vec!["eth0", "veth0", "lo"]
        );
    }

    #[test]
    fn missing_tree_means_no_rdma() {
        let d = tempfile::tempdir().unwrap();
        let s = Sysfs::at(d.path());
        assert!(!s.has_uverbs());
        assert!(s.gid_table("mlx5_0", 1).is_empty());
    }
}
