//! The congested link on one machine: four network namespaces around a switch.
//!
//! ```text
//!  {p}s  senders   veth0 10.77.30.2 ──── to-s ┐
//!  {p}v  victim    veth0 10.77.30.3 ──── to-v ┤ {p}w  roce_switch ── to-r ──── veth0 10.77.30.1  {p}r  receiver
//! ```
//!
//! One /24 (it is a switch, not a router). Every veth end has TSO, GSO, GRO and transmit
//! checksumming off, so the switch queues the frames a NIC would send (a GSO super-frame would make
//! the queue meaningless, and a frame whose checksum the kernel left to the NIC would arrive bad
//! after AF_PACKET). The MTU is 4200 by default: RoCE's 4096-byte MTU fits with its headers (4,156
//! bytes of IPv4 packet), and TCP's segments stay the same size as RoCE's packets, so both fill the
//! queue frame for frame alike; 9000 is there for jumbo runs. [`Topology::start_switch`] runs
//! `roce_switch` in `{p}w`; [`RunningSwitch::stop`] stops it with SIGTERM and reads its stats.

use crate::params::marks::MarkAt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::compare::local::{delete_netns, ip};
use crate::orchestrate::child::{Child, Launch, exe_dir};
use crate::results::switch::SwitchStats;

/// The interface of each endpoint namespace.
pub const HOST_DEV: &str = "veth0";
/// The switch's ports, towards the senders, the victim and the receiver.
pub const SWITCH_PORTS: [&str; 3] = ["to-s", "to-v", "to-r"];
/// Why the link or its switch could not be set up; the message names the command, namespace or
/// file and what to do.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TopologyError(String);

impl From<crate::compare::error::Error> for TopologyError {
    fn from(e: crate::compare::error::Error) -> TopologyError {
        TopologyError(e.to_string())
    }
}

impl From<crate::orchestrate::child::SpawnError> for TopologyError {
    fn from(e: crate::orchestrate::child::SpawnError) -> TopologyError {
        TopologyError(e.to_string())
    }
}

/// The topology's results.
pub type Result<T> = std::result::Result<T, TopologyError>;

/// How long the switch may take to open its ports.
const SWITCH_START: Duration = Duration::from_secs(10);
/// How long it may take to write its stats once asked to stop.
const SWITCH_STOP: Duration = Duration::from_secs(10);

/// How to build the link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologySpec {
    /// Every interface's MTU.
    pub mtu: u32,
}

impl Default for TopologySpec {
    fn default() -> TopologySpec {
        TopologySpec { mtu: 4200 }
    }
}

/// One endpoint namespace: its name, interface and address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// The namespace.
    pub netns: String,
    /// Its interface towards the switch.
    pub dev: &'static str,
    /// Its IPv4 address.
    pub addr: &'static str,
}

/// The four namespaces and three veth pairs, deleted on drop.
#[derive(Debug)]
pub struct Topology {
    prefix: String,
    mtu: u32,
}

/// The endpoints: (namespace suffix, address, the switch port it hangs off).
const HOSTS: [(char, &str, &str); 3] = [
    ('s', "10.77.30.2", SWITCH_PORTS[0]),
    ('v', "10.77.30.3", SWITCH_PORTS[1]),
    ('r', "10.77.30.1", SWITCH_PORTS[2]),
];

impl Topology {
    /// Makes `{prefix}s`, `{prefix}v`, `{prefix}w`, `{prefix}r` and the veth pairs, after deleting a
    /// stale set of the same prefix (a killed run's). Needs root and `ip` and `ethtool`.
    pub fn up(prefix: &str, spec: &TopologySpec) -> Result<Topology> {
        let t = Topology {
            prefix: prefix.to_owned(),
            mtu: spec.mtu,
        };
        t.delete();
        let sw = t.switch_ns();
        for ns in t.names() {
            ip(&["netns", "add", &ns])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            // IPv4 only: IPv6's neighbour discovery and MLD would queue at the bottleneck too.
            ip(&[
                "netns",
                "exec",
                &ns,
                "sh",
                "-c",
                "echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6; \
                 echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6",
            ])?;
        }
        let mtu = spec.mtu.to_string();
        for (side, addr, port) in HOSTS {
            let ns = t.ns(side);
            ip(&[
                "link", "add", HOST_DEV, "netns", &ns, "type", "veth", "peer", "name", port,
                "netns", &sw,
            ])?;
            for (n, dev) in [(&ns, HOST_DEV), (&sw, port)] {
                ip(&["-n", n, "link", "set", dev, "mtu", &mtu])?;
                offloads_off(n, dev)?;
                ip(&["-n", n, "link", "set", dev, "up"])?;
            }
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{addr}/24"),
                "dev",
                HOST_DEV,
            ])?;
        }
        Ok(t)
    }

    fn ns(&self, side: char) -> String {
        format!("{}{side}", self.prefix)
    }

    fn names(&self) -> [String; 4] {
        ['s', 'v', 'w', 'r'].map(|c| self.ns(c))
    }

    fn host(&self, side: char) -> Host {
        let (_, addr, _) = HOSTS
            .iter()
            .find(|(s, _, _)| *s == side)
            .copied()
            .unwrap_or(HOSTS[0]);
        Host {
            netns: self.ns(side),
            dev: HOST_DEV,
            addr,
        }
    }

    /// The senders' namespace (the bulk flows' clients).
    pub fn senders(&self) -> Host {
        self.host('s')
    }

    /// The victim's client namespace.
    pub fn victim(&self) -> Host {
        self.host('v')
    }

    /// The receiver's namespace: it serves the bulk flows and the victim, behind the bottleneck.
    pub fn receiver(&self) -> Host {
        self.host('r')
    }

    /// The switch's namespace.
    pub fn switch_ns(&self) -> String {
        self.ns('w')
    }

    /// Every interface's MTU.
    pub fn mtu(&self) -> u32 {
        self.mtu
    }

    /// How runs across it name their link.
    pub fn link(&self) -> String {
        format!(
            "veth through roce_switch (netns {}s,{}v -> {}w -> {}r, MTU {})",
            self.prefix, self.prefix, self.prefix, self.prefix, self.mtu
        )
    }

    /// Starts `roce_switch` in the switch's namespace, its ports towards the senders and the victim
    /// in, the receiver's out; logs and stats in `logs`. Returns once it switches.
    pub fn start_switch(&self, spec: &SwitchSpec, logs: &Path) -> Result<RunningSwitch> {
        let program = exe_dir()
            .map_err(|e| {
                TopologyError(format!(
                    "cannot find this program's directory, where roce_switch is: {e}"
                ))
            })?
            .join("roce_switch");
        self.start_switch_at(program, spec, logs)
    }

    /// [`Topology::start_switch`] with the `roce_switch` binary at `program` (a test's build).
    pub fn start_switch_at(
        &self,
        program: PathBuf,
        spec: &SwitchSpec,
        logs: &Path,
    ) -> Result<RunningSwitch> {
        let stats = logs.join(format!("{}-switch-{}.json", self.prefix, spec.discipline));
        let mut launch = Launch::new(program, spec.args(&stats));
        launch.netns = Some(self.switch_ns());
        launch.cpu = spec.cpu;
        let name = format!("{}-switch-{}", self.prefix, spec.discipline);
        let mut child = Child::spawn(&launch, logs, &name)?;
        let deadline = Instant::now() + SWITCH_START;
        loop {
            let out = std::fs::read_to_string(child.stdout_log()).unwrap_or_default();
            if out.contains("switching") {
                return Ok(RunningSwitch { child, stats });
            }
            if child.has_ended() {
                return Err(TopologyError(format!(
                    "roce_switch did not start: {}",
                    child.tail().unwrap_or_else(|| "it printed nothing".into())
                )));
            }
            if Instant::now() >= deadline {
                child.kill();
                return Err(TopologyError(format!(
                    "roce_switch did not start switching within {} s",
                    SWITCH_START.as_secs()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn delete(&self) {
        let names = self.names();
        delete_netns(&names.each_ref().map(String::as_str));
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        self.delete();
    }
}

/// Turns TSO, GSO, GRO and transmit checksumming off on `dev` in `ns`.
fn offloads_off(ns: &str, dev: &str) -> Result<()> {
    let args = [
        "netns", "exec", ns, "ethtool", "-K", dev, "tx", "off", "tso", "off", "gso", "off", "gro",
        "off",
    ];
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| TopologyError(format!("cannot run ip netns exec {ns} ethtool: {e}")))?;
    if out.status.success() {
        return Ok(());
    }
    Err(TopologyError(format!(
        "cannot turn TSO/GSO/GRO and transmit checksumming off on {dev} in {ns}: {}; install \
         ethtool (bash scripts/deps.sh demo)",
        String::from_utf8_lossy(&out.stderr).trim()
    )))
}

/// The switch's discipline and settings; what is `None` takes `roce_switch`'s default.
#[derive(Debug, Clone, PartialEq)]
pub struct SwitchSpec {
    /// `lossy`, `ecn` or `pfc`.
    pub discipline: &'static str,
    /// The bottleneck's rate, Gb/s.
    pub rate_gbps: f64,
    /// `--buffer`, bytes.
    pub buffer: Option<u64>,
    /// `--kmin`, `--kmax`, bytes, and `--pmax`.
    pub red: Option<(u64, u64, f64)>,
    /// `--xoff`, `--xon`, bytes.
    pub pfc: Option<(u64, u64)>,
    /// `--pfc-prio`.
    pub pfc_prio: Option<u8>,
    /// `--ecn-prio`.
    pub ecn_prio: Option<u8>,
    /// `--mark-at`; None: the switch's default (on arrival).
    pub mark_at: Option<MarkAt>,
    /// The core it runs on; None: wherever the scheduler puts it.
    pub cpu: Option<usize>,
    /// `--sample-us`.
    pub sample_us: Option<u64>,
    /// `--seed`.
    pub seed: Option<u64>,
    /// `--batch-us`; None: the switch's default (a wake-up per departure and per frame).
    pub batch_us: Option<u64>,
}

impl SwitchSpec {
    /// `discipline` at `rate_gbps`, everything else the switch's defaults.
    pub fn new(discipline: &'static str, rate_gbps: f64) -> SwitchSpec {
        SwitchSpec {
            discipline,
            rate_gbps,
            buffer: None,
            red: None,
            pfc: None,
            pfc_prio: None,
            ecn_prio: None,
            mark_at: None,
            cpu: None,
            sample_us: None,
            seed: None,
            batch_us: None,
        }
    }

    /// `roce_switch`'s command line, its stats to `stats`.
    pub fn args(&self, stats: &Path) -> Vec<String> {
        let mut a: Vec<String> = vec![
            "--port".into(),
            SWITCH_PORTS[0].into(),
            "--port".into(),
            SWITCH_PORTS[1].into(),
            "--egress".into(),
            SWITCH_PORTS[2].into(),
            "--discipline".into(),
            self.discipline.into(),
            "--rate".into(),
            self.rate_gbps.to_string(),
            "--stats".into(),
            stats.display().to_string(),
        ];
        let mut opt = |flag: &str, v: Option<String>| {
            if let Some(v) = v {
                a.push(flag.into());
                a.push(v);
            }
        };
        opt("--buffer", self.buffer.map(|b| b.to_string()));
        opt("--kmin", self.red.map(|r| r.0.to_string()));
        opt("--kmax", self.red.map(|r| r.1.to_string()));
        opt("--pmax", self.red.map(|r| r.2.to_string()));
        opt("--xoff", self.pfc.map(|p| p.0.to_string()));
        opt("--xon", self.pfc.map(|p| p.1.to_string()));
        opt("--pfc-prio", self.pfc_prio.map(|p| p.to_string()));
        opt("--ecn-prio", self.ecn_prio.map(|p| p.to_string()));
        opt("--sample-us", self.sample_us.map(|s| s.to_string()));
        opt("--seed", self.seed.map(|s| s.to_string()));
        opt("--mark-at", self.mark_at.map(|m| m.name().into()));
        opt("--batch-us", self.batch_us.map(|b| b.to_string()));
        a
    }
}

/// A switch running in the topology.
#[derive(Debug)]
pub struct RunningSwitch {
    child: Child,
    stats: PathBuf,
}

impl RunningSwitch {
    /// Where it writes its stats.
    pub fn stats_path(&self) -> &Path {
        &self.stats
    }

    /// Stops it with SIGTERM and reads the stats it wrote.
    pub fn stop(mut self) -> Result<SwitchStats> {
        let end = self.child.terminate(SWITCH_STOP);
        if !end.success() {
            return Err(TopologyError(format!(
                "roce_switch did not stop cleanly ({end:?}){}",
                self.child
                    .tail()
                    .map(|t| format!(": {t}"))
                    .unwrap_or_default()
            )));
        }
        SwitchStats::read(&self.stats).map_err(|e| TopologyError(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_switch_command_line_names_the_ports_and_only_the_settings_given() {
        let mut spec = SwitchSpec::new("ecn", 2.5);
        spec.red = Some((5_000, 200_000, 0.01));
        spec.sample_us = Some(100);
        let a = spec.args(Path::new("/tmp/x.json")).join(" ");
        assert_eq!(
            a,
            "--port to-s --port to-v --egress to-r --discipline ecn --rate 2.5 --stats /tmp/x.json \
             --kmin 5000 --kmax 200000 --pmax 0.01 --sample-us 100"
        );
        spec.ecn_prio = Some(3);
        let a = spec.args(Path::new("/tmp/x.json")).join(" ");
        assert!(
            a.ends_with("--pmax 0.01 --ecn-prio 3 --sample-us 100"),
            "{a}"
        );
        let t = Topology {
            prefix: "cg1".into(),
            mtu: 4200,
        };
        assert_eq!(
            (
                t.senders(),
                t.receiver().addr,
                t.victim().netns,
                t.switch_ns()
            ),
            (
                Host {
                    netns: "cg1s".into(),
                    dev: "veth0",
                    addr: "10.77.30.2"
                },
                "10.77.30.1",
                "cg1v".into(),
                "cg1w".into()
            )
        );
        std::mem::forget(t);
    }
}
