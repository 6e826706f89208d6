//! What a live comparison runs: the test, the transport leg, and both sides' command lines.
//!
//! [`TestSpec`] is the test, [`LegSpec`] the transport; together they are a run's job ([`CompareRun`]
//! in the control protocol). Both sides of a run on this host and the two-host control server build
//! the `roce_<test>` command lines here ([`Sides`]), so the two sides of a run can never disagree on a
//! flag, and word their failures here.

use super::error::Error;
use super::floor::{FloorJob, REF_BINARY};
use crate::orchestrate::child::{Child, Ended, Launch, SpawnError, exit_text};
use crate::orchestrate::control::{Job, Side};
use crate::orchestrate::worker::Jobs;
use crate::params::{RoceVersion, TestKind, TransportKind};
use crate::results::default_label;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Which message sizes a test runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Sizes {
    /// The test's own default (2 B for latency, 64 KiB for bandwidth).
    Default,
    /// One size (`-s`).
    One(u64),
    /// Every size from 2 B to 8 MiB (`-a`).
    All,
}

/// The run options a user sets on the single binaries, passed to every run that takes them.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub(crate) struct Tuning {
    /// `-q`, queue pairs (bandwidth tests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qps: Option<u32>,
    /// `-t`, operations in flight per queue pair (bandwidth tests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tx_depth: Option<u32>,
    /// `--warmup`, iterations run before measuring.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<u64>,
    /// `--percentiles` (latency tests); empty: the binaries' own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub percentiles: Vec<f64>,
}

impl Tuning {
    /// The flags of these options that `test` takes: `-q` and `-t` only bandwidth tests,
    /// `--percentiles` only latency tests.
    fn args(&self, test: TestKind) -> Vec<String> {
        let bandwidth = test.metric == crate::params::Metric::Bandwidth;
        let mut a = Vec::new();
        if let (Some(q), true) = (self.qps, bandwidth) {
            a.extend(["-q".into(), q.to_string()]);
        }
        if let (Some(t), true) = (self.tx_depth, bandwidth) {
            a.extend(["-t".into(), t.to_string()]);
        }
        if let Some(w) = self.warmup {
            a.extend(["--warmup".into(), w.to_string()]);
        }
        if !self.percentiles.is_empty() && !bandwidth {
            let p: Vec<String> = self.percentiles.iter().map(f64::to_string).collect();
            a.extend(["--percentiles".into(), p.join(",")]);
        }
        a
    }
}

/// One test as every transport runs it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct TestSpec {
    /// Which test.
    pub test: TestKind,
    /// Message sizes.
    pub sizes: Sizes,
    /// `-n`; None: the binary's default.
    pub iters: Option<u64>,
    /// `-D` seconds; None: count iterations.
    pub duration: Option<u64>,
    /// `-q`, `-t`, `--warmup`, `--percentiles` as the user set them.
    #[serde(default)]
    pub tuning: Tuning,
}

/// Bytes per second below which even the soft transport on a loaded machine is considered hung.
const SLOWEST_BYTES_PER_SEC: f64 = 20e6;

impl TestSpec {
    /// The sizes this spec runs, in order.
    pub(crate) fn size_list(&self) -> Vec<u64> {
        match self.sizes {
            Sizes::Default => vec![self.test.default_size()],
            Sizes::One(s) => vec![s],
            Sizes::All => crate::params::all_sizes(),
        }
    }

    /// How long one run (server and client) may take before both are killed: generous, since a
    /// timeout only exists to turn a hang into a clear failure.
    pub(crate) fn timeout(&self) -> Duration {
        let sizes = self.size_list();
        let per_size = match self.duration {
            Some(secs) => sizes.iter().map(|_| secs as f64 + 5.0).sum::<f64>(),
            None => {
                let iters = self.iters.unwrap_or_else(|| self.test.default_iters()) as f64;
                sizes
                    .iter()
                    .map(|&s| 2.0 + iters * s as f64 / SLOWEST_BYTES_PER_SEC)
                    .sum()
            }
        };
        Duration::from_secs_f64(30.0 + per_size)
    }

    /// The flags every side of this test gets: sizes, iterations or duration, and the tuning.
    fn args(&self) -> Vec<String> {
        let mut a = Vec::new();
        match self.sizes {
            Sizes::Default => {}
            Sizes::One(s) => a.extend(["-s".into(), s.to_string()]),
            Sizes::All => a.push("-a".into()),
        }
        if let Some(n) = self.iters {
            a.extend(["-n".into(), n.to_string()]);
        }
        if let Some(d) = self.duration {
            a.extend(["-D".into(), d.to_string()]);
        }
        a.extend(self.tuning.args(self.test));
        a
    }
}

/// `--transport` as the binaries spell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum TransportChoice {
    /// verbs for an RDMA device, soft for a network interface.
    Auto,
    /// The userspace RoCE stack.
    Soft,
    /// The kernel TCP stack.
    Tcp,
}

/// A transport leg: what moves the bytes and over which device. The same on both sides.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LegSpec {
    /// `--transport`.
    pub transport: TransportChoice,
    /// `--roce`; None for TCP.
    pub roce: Option<RoceVersion>,
    /// `-d`; None for TCP.
    pub device: Option<String>,
    /// Further flags both sides get (a loss sweep's `--recovery`, `--impair`, `--validate`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra: Vec<String>,
    /// Both sides run under SCHED_FIFO at this priority (a congestion study's victim, which sleeps
    /// on events: `-e`); a local run's only, refused from a peer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fifo: Option<u8>,
}

impl LegSpec {
    /// RoCE `version` over `device`, with `transport` (soft, or auto to let the binary pick verbs).
    pub(crate) fn roce(transport: TransportChoice, version: RoceVersion, device: &str) -> LegSpec {
        LegSpec {
            transport,
            roce: Some(version),
            device: Some(device.to_owned()),
            extra: Vec::new(),
            fifo: None,
        }
    }

    /// The TCP baseline.
    pub(crate) fn tcp() -> LegSpec {
        LegSpec {
            transport: TransportChoice::Tcp,
            roce: None,
            device: None,
            extra: Vec::new(),
            fifo: None,
        }
    }

    /// The label shown before the run says which transport it got: `RoCE v2 (soft)`, `RoCE v1`, `TCP`.
    pub(crate) fn label(&self) -> String {
        match (self.transport, self.roce) {
            (TransportChoice::Tcp, _) => "TCP".into(),
            (TransportChoice::Soft, r) => default_label(TransportKind::Soft, r),
            (TransportChoice::Auto, Some(r)) => format!("RoCE {r}"),
            (TransportChoice::Auto, None) => "RoCE".into(),
        }
    }

    /// Checks what a peer sent before it reaches a command line: a device is an interface or RDMA
    /// device name, nothing else.
    pub(crate) fn validate(&self) -> Result<(), Error> {
        if let Some(d) = &self.device {
            let ok = !d.is_empty()
                && d.len() <= 64
                && !d.starts_with('-')
                && d.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_.:@-".contains(c));
            if !ok {
                return Err(Error::BadDevice(d.clone()));
            }
        }
        if !self.extra.is_empty() {
            return Err(Error::ExtraFlags(self.extra.clone()));
        }
        Ok(())
    }

    fn args(&self) -> Vec<String> {
        let mut a = vec![
            "--transport".to_owned(),
            match self.transport {
                TransportChoice::Auto => "auto",
                TransportChoice::Soft => "soft",
                TransportChoice::Tcp => "tcp",
            }
            .to_owned(),
        ];
        if let Some(r) = self.roce {
            a.extend(["--roce".into(), r.name().to_owned()]);
        }
        if let Some(d) = &self.device {
            a.extend(["-d".into(), d.clone()]);
        }
        a.extend(self.extra.iter().cloned());
        a
    }
}

/// The file name of a test's binary: `roce_write_lat`.
pub(crate) fn binary_name(test: TestKind) -> String {
    format!("roce_{}", test.name())
}

/// The arguments of one side of a run (after the binary's name). `host` is None on the server.
pub(crate) fn side_args(
    spec: &TestSpec,
    leg: &LegSpec,
    port: u16,
    cpu: Option<usize>,
    json: &Path,
    host: Option<&str>,
) -> Vec<String> {
    let mut a = vec!["-p".to_owned(), port.to_string()];
    a.extend(leg.args());
    a.extend(spec.args());
    if let Some(c) = cpu {
        a.extend(["--cpu".into(), c.to_string()]);
    }
    a.extend(["--json".into(), json.display().to_string()]);
    if let Some(h) = host {
        a.push(h.to_owned());
    }
    a
}

/// write_lat at 2 B, 100 iterations: the test the unit tests run.
#[cfg(test)]
pub(crate) fn sample_test() -> TestSpec {
    TestSpec {
        test: TestKind::new(crate::params::Verb::Write, crate::params::Metric::Latency),
        sizes: Sizes::One(2),
        iters: Some(100),
        duration: None,
        tuning: Tuning::default(),
    }
}

/// One side of one run, as a job of the control protocol: the test and the transport leg, or the
/// floor of that leg's path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct CompareRun {
    /// The test.
    pub test: TestSpec,
    /// The transport.
    pub leg: LegSpec,
    /// Instead of the test: `roce_ref` over the leg's path, its floor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub floor: Option<FloorJob>,
}

/// How this host runs the sides of a comparison's runs: `roce_<test>` from `bin_dir`.
#[derive(Debug, Clone)]
pub(crate) struct Sides {
    /// Where the `roce_<test>` binaries are.
    pub(crate) bin_dir: PathBuf,
    /// Core of the side's datapath; None: the binary's default.
    pub(crate) cpu: Option<usize>,
    /// Network namespace the side runs in.
    pub(crate) netns: Option<String>,
    /// The jobs come from a peer (`roce_compare --server`): each is checked before it reaches a
    /// command line, and only server sides run.
    pub(crate) from_peer: bool,
    /// `-d` on this host, which replaces a peer's device name for RoCE runs.
    pub(crate) device: Option<String>,
}

impl Jobs for Sides {
    type Run = CompareRun;

    fn command(&self, job: &Job<CompareRun>, port: u16, json: &Path) -> Result<Launch, String> {
        let CompareRun { test, leg, floor } = &job.run;
        let mut leg = leg.clone();
        if self.from_peer {
            leg.validate().map_err(|e| e.to_string())?;
            if leg.fifo.is_some() {
                return Err(
                    "roce_compare --server does not raise a peer's run to real-time priority"
                        .into(),
                );
            }
            if job.side != Side::Server || job.impair.is_some() {
                return Err(
                    "roce_compare --server runs the server side of a run, unimpaired".into(),
                );
            }
            if leg.device.is_some() && self.device.is_some() {
                leg.device.clone_from(&self.device);
            }
        }
        let host = job
            .server_addr
            .as_deref()
            .filter(|_| job.side == Side::Client);
        let (program, args) = match floor {
            Some(f) => (
                REF_BINARY.to_owned(),
                f.args(port, self.cpu, leg.device.as_deref(), host),
            ),
            None => (
                binary_name(test.test),
                side_args(test, &leg, port, self.cpu, json, host),
            ),
        };
        Ok(Launch {
            program: self.bin_dir.join(program),
            args,
            netns: self.netns.clone(),
            env: Vec::new(),
            // A floor runs as its row's sides do.
            fifo: leg.fifo,
            // The binaries pin themselves (--cpu).
            cpu: None,
        })
    }

    fn describe(&self, job: &Job<CompareRun>, child: &Child, ended: &Ended) -> String {
        let what = format!("{} {}", job.side.name(), child.name());
        let tail = child.tail().map(|t| format!(": {t}")).unwrap_or_default();
        match ended {
            Ended::Exited(s) => Error::Exited {
                what,
                status: exit_text(*s),
                tail,
            },
            Ended::Killed(_) | Ended::Lost(_) => Error::Killed { what, tail },
        }
        .to_string()
    }

    fn not_started(&self, _job: &Job<CompareRun>, err: SpawnError) -> String {
        Error::from(err).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::{Metric, Verb};

    fn wlat() -> TestSpec {
        TestSpec {
            test: TestKind::new(Verb::Write, Metric::Latency),
            sizes: Sizes::Default,
            iters: Some(200),
            duration: None,
            tuning: Tuning::default(),
        }
    }

    #[test]
    fn both_sides_get_the_same_flags_and_only_the_client_a_host() {
        let leg = LegSpec::roce(TransportChoice::Soft, RoceVersion::V2, "lo");
        let s = side_args(&wlat(), &leg, 18600, Some(1), Path::new("/t/s.json"), None);
        let c = side_args(
            &wlat(),
            &leg,
            18600,
            Some(0),
            Path::new("/t/c.json"),
            Some("127.0.0.1"),
        );
        assert_eq!(
            s.join(" "),
            "-p 18600 --transport soft --roce v2 -d lo -n 200 --cpu 1 --json /t/s.json"
        );
        assert_eq!(c.last().map(String::as_str), Some("127.0.0.1"));
        assert_eq!(c.len(), s.len() + 1);
        let all = TestSpec {
            sizes: Sizes::All,
            iters: None,
            duration: Some(2),
            ..wlat()
        };
        let a = side_args(&all, &LegSpec::tcp(), 1, None, Path::new("j"), None);
        assert_eq!(a.join(" "), "-p 1 --transport tcp -a -D 2 --json j");
        assert_eq!(binary_name(all.test), "roce_write_lat");
    }

    #[test]
    fn the_tuning_reaches_every_run_that_takes_it() {
        let tuning = Tuning {
            qps: Some(4),
            tx_depth: Some(64),
            warmup: Some(500),
            percentiles: vec![50.0, 99.9],
        };
        let lat = TestSpec {
            tuning: tuning.clone(),
            ..wlat()
        };
        let bw = TestSpec {
            test: TestKind::new(Verb::Write, Metric::Bandwidth),
            tuning,
            ..wlat()
        };
        let args = |spec: &TestSpec| {
            side_args(spec, &LegSpec::tcp(), 1, Some(3), Path::new("j"), None).join(" ")
        };
        // Latency tests take one queue pair and one operation in flight: -q and -t are left out.
        assert_eq!(
            args(&lat),
            "-p 1 --transport tcp -n 200 --warmup 500 --percentiles 50,99.9 --cpu 3 --json j"
        );
        assert_eq!(
            args(&bw),
            "-p 1 --transport tcp -n 200 -q 4 -t 64 --warmup 500 --cpu 3 --json j"
        );
    }

    #[test]
    fn a_floor_job_runs_roce_ref_with_the_sides_core() {
        let sides = Sides {
            bin_dir: PathBuf::from("/b"),
            cpu: Some(1),
            netns: Some("nsa".into()),
            from_peer: false,
            device: None,
        };
        let floor = crate::compare::floor::plan(
            crate::results::HostPath::AfPacket,
            (TransportKind::Soft, Some(RoceVersion::V1)),
            wlat().test,
            2,
            4096,
            None,
        )
        .unwrap()
        .job;
        let job = Job {
            id: 1,
            run: CompareRun {
                test: wlat(),
                leg: LegSpec::roce(TransportChoice::Soft, RoceVersion::V1, "veth0"),
                floor: Some(floor),
            },
            side: Side::Server,
            port: None,
            peer: 0,
            server_addr: None,
            impair: None,
            timeout_ms: 0,
        };
        let launch = sides.command(&job, 9, Path::new("j")).unwrap();
        assert_eq!(launch.program, PathBuf::from("/b/roce_ref"));
        assert_eq!(
            launch.args.join(" "),
            "packet-pingpong -d veth0 -s 76 --cpu 1 --json"
        );
        assert_eq!(launch.netns.as_deref(), Some("nsa"));
    }

    #[test]
    fn timeouts_grow_with_the_work() {
        let one = wlat().timeout();
        let all = TestSpec {
            sizes: Sizes::All,
            ..wlat()
        }
        .timeout();
        let dur = TestSpec {
            duration: Some(10),
            ..wlat()
        }
        .timeout();
        assert!(one >= Duration::from_secs(30) && all > one && dur > one);
    }

    #[test]
    fn labels_and_device_names() {
        assert_eq!(
            LegSpec::roce(TransportChoice::Soft, RoceVersion::V1, "veth0").label(),
            "RoCE v1 (soft)"
        );
        assert_eq!(
            LegSpec::roce(TransportChoice::Auto, RoceVersion::V2, "eth0").label(),
            "RoCE v2"
        );
        assert_eq!(LegSpec::tcp().label(), "TCP");
        for bad in ["", "-x", "eth0 --cpu 3", "a/b", "$(id)"] {
            let leg = LegSpec::roce(TransportChoice::Auto, RoceVersion::V2, bad);
            assert!(leg.validate().is_err(), "{bad}");
        }
        let ok = LegSpec::roce(TransportChoice::Auto, RoceVersion::V2, "mlx5_0");
        assert!(ok.validate().is_ok());
    }
}
