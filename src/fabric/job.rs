//! One side of one pair test as a rank runs it: the single-pair binary (`roce_write_bw`, ...) started
//! as server or client with the rank's own test flags of the job's leg, `-p`, `--bind` and `--json`,
//! through the one child runner and worker loop (`crate::orchestrate`); how its failures read in
//! fabric.json. The pair runs exactly the code a two-host run does.

use super::args::{FabricOptions, Leg};
use crate::orchestrate::child::{Child, Ended, Launch, Stop};
use crate::orchestrate::control::{self, Side};
use crate::orchestrate::signals;
use crate::orchestrate::worker::Jobs;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// What rank 0 says about a pair test: the test and which leg of the rank's own flags.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairRun {
    /// `write_bw`, ...
    pub test: String,
    /// Which leg's flags.
    pub(crate) leg: Leg,
}

/// One side of a pair test, as rank 0 asks a rank to run it.
pub type Job = control::Job<PairRun>;
/// Rank 0's messages to a rank.
pub type ToWorker = control::ToWorker<PairRun>;

/// How a rank runs its jobs: its flags, where the binaries are, and its own soft address on lo.
#[derive(Debug, Clone)]
pub(crate) struct Runner {
    /// The rank's options (its test flags).
    pub options: FabricOptions,
    /// Where the roce_* binaries are.
    pub(crate) bin_dir: PathBuf,
    /// `--bind` for the soft transport, when this rank picked its own loopback address.
    pub bind: Option<String>,
}

/// The loopback address a rank uses for soft on lo: `base` + rank (127.0.0.10, .11, ... by default).
pub(crate) fn loopback_addr(base: std::net::Ipv4Addr, rank: usize) -> String {
    std::net::Ipv4Addr::from(u32::from(base).wrapping_add(rank as u32)).to_string()
}

impl Jobs for Runner {
    type Run = PairRun;

    fn command(&self, job: &Job, port: u16, json: &Path) -> Result<Launch, String> {
        let bin = self.bin_dir.join(format!("roce_{}", job.run.test));
        if !bin.exists() {
            return Err(format!(
                "{} not found (roce_fabric runs the roce_* binaries installed next to it; --bin-dir DIR names another place)",
                bin.display()
            ));
        }
        let mut args = self.options.leg_args(job.run.leg);
        args.extend(["-p".to_owned(), port.to_string()]);
        if let (Some(b), false) = (&self.bind, job.run.leg == Leg::Tcp) {
            args.extend(["--bind".to_owned(), b.clone()]);
        }
        args.extend(["--json".to_owned(), json.display().to_string()]);
        if let (Side::Client, Some(addr)) = (job.side, &job.server_addr) {
            args.push(addr.clone());
        }
        let mut launch = Launch::new(bin, args);
        if let Some(spec) = &job.impair {
            launch.env.push(("ROCEPERF_IMPAIR".into(), spec.clone()));
        }
        Ok(launch)
    }

    fn describe(&self, job: &Job, child: &Child, ended: &Ended) -> String {
        let bin = child.program().display();
        match ended {
            Ended::Killed(Stop::Cancelled) => "cancelled: its peer was lost".into(),
            Ended::Killed(Stop::Deadline) => format!(
                "killed after {} s without finishing (--pair-timeout)",
                job.timeout_ms / 1000
            ),
            Ended::Killed(Stop::Interrupted) => format!(
                "killed: this rank got {}",
                signals::received().unwrap_or("a signal")
            ),
            Ended::Lost(e) => format!("waiting for {bin}: {e}"),
            Ended::Exited(status) => child.tail().unwrap_or_else(|| match status.code() {
                Some(c) => format!("{bin} exited with code {c}"),
                None => format!("{bin} was killed by a signal"),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_runs_the_rank_s_own_flags_of_its_leg_with_port_bind_json_and_host() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("roce_write_lat"), "").unwrap();
        let args = [
            "write_lat",
            "--compare",
            "--transport",
            "soft",
            "-d",
            "lo",
            "-n",
            "10",
        ];
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let runner = Runner {
            options: super::super::args::parse(&args).unwrap(),
            bin_dir: dir.path().to_owned(),
            bind: Some("127.0.0.12".into()),
        };
        let mut job = Job {
            id: 1,
            run: PairRun {
                test: "write_lat".into(),
                leg: Leg::RoceV2,
            },
            side: Side::Client,
            port: Some(18517),
            peer: 2,
            server_addr: Some("127.0.0.12".into()),
            impair: Some("loss=1%".into()),
            timeout_ms: 30_000,
        };
        let l = runner.command(&job, 18517, Path::new("/j.json")).unwrap();
        assert_eq!(l.program, dir.path().join("roce_write_lat"));
        assert_eq!(
            l.args.join(" "),
            "--transport soft -d lo -n 10 --roce v2 -p 18517 --bind 127.0.0.12 --json /j.json 127.0.0.12"
        );
        assert_eq!(
            l.env,
            [("ROCEPERF_IMPAIR".to_owned(), "loss=1%".to_owned())]
        );
        job.run.leg = Leg::Tcp;
        job.side = Side::Server;
        let l = runner.command(&job, 18517, Path::new("/j.json")).unwrap();
        assert_eq!(
            l.args.join(" "),
            "-n 10 --transport tcp -p 18517 --json /j.json"
        );
        job.run.test = "read_lat".into();
        let err = runner.command(&job, 1, Path::new("/j")).unwrap_err();
        assert!(
            err.contains("roce_read_lat not found") && err.contains("--bin-dir"),
            "{err}"
        );
    }
}
