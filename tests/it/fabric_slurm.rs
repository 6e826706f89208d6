//! roce_fabric under a real single-node Slurm (scripts/slurm.sh: Debian's slurmctld, slurmd and munge,
//! up in about a second): `srun -n 4 roce_fabric ...` fills the matrix. Needs root for the daemons.

use crate::common::assert_contains;
use crate::fabric_support::*;
use std::process::Command;

#[test]
fn srun_four_ranks_fill_the_matrix() {
    if crate::common::skip_unless(is_root(), "needs root for slurmctld, slurmd and munged") {
        return;
    }
    let job = Job::new(4, "slurm");
    let (slurm_port, _) = ports(2);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/slurm.sh");
    let args = job.args("send_lat --transport tcp -n 100 --warmup 10 --no-retest");
    let out = run(
        Command::new("bash")
            .arg(script)
            .args(["--", "srun", "-n", "4", FABRIC])
            .args(&args)
            .env("SLURM_PORT", slurm_port.to_string())
            .env("NO_COLOR", "1"),
        300,
    );
    let (_, stderr) = expect_code(&out, 0);
    assert_contains(&stderr, "single-node Slurm up in");
    let doc = fabric_json(&job.results);
    assert_eq!(doc["launcher"], "slurm");
    let pairs = first_pairs(&doc);
    assert_eq!(pairs.len(), 12);
    assert!(pairs.iter().all(|p| p.2 == "ok"), "{pairs:?}");
}
