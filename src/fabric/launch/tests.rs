use super::*;
use std::collections::HashMap;

fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
    let m: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k: &str| m.get(k).cloned()
}

#[test]
fn rank_and_size_from_each_launcher() {
    let e = env(&[("SLURM_PROCID", "3"), ("SLURM_NTASKS", "16")]);
    assert_eq!(
        rank_and_size(&e, None, None).unwrap(),
        (3, 16, Launcher::Slurm)
    );
    // mpirun inside an sbatch script: Open MPI's variables win over the inherited Slurm ones.
    let e = env(&[
        ("SLURM_PROCID", "0"),
        ("SLURM_NTASKS", "1"),
        ("OMPI_COMM_WORLD_RANK", "2"),
        ("OMPI_COMM_WORLD_SIZE", "4"),
    ]);
    assert_eq!(
        rank_and_size(&e, None, None).unwrap(),
        (2, 4, Launcher::OpenMpi)
    );
    let e = env(&[("PMI_RANK", "1"), ("PMI_SIZE", "2")]);
    assert_eq!(
        rank_and_size(&e, None, None).unwrap(),
        (1, 2, Launcher::Pmi)
    );
    let e = env(&[("PMIX_RANK", "1")]);
    assert!(
        rank_and_size(&e, None, None)
            .unwrap_err()
            .0
            .contains("--world-size")
    );
    assert_eq!(
        rank_and_size(&e, None, Some(8)).unwrap(),
        (1, 8, Launcher::Pmix)
    );
    let e = env(&[("JOB_COMPLETION_INDEX", "5")]);
    assert_eq!(
        rank_and_size(&e, None, Some(6)).unwrap(),
        (5, 6, Launcher::Kubernetes)
    );
    assert!(rank_and_size(&e, None, Some(5)).is_err());
    assert_eq!(
        rank_and_size(&env(&[]), Some(0), Some(2)).unwrap(),
        (0, 2, Launcher::Flags)
    );
    assert!(
        rank_and_size(&env(&[]), None, None)
            .unwrap_err()
            .0
            .contains("srun")
    );
    let e = env(&[("SLURM_PROCID", "0"), ("SLURM_NTASKS", "4")]);
    assert!(
        rank_and_size(&e, None, Some(5))
            .unwrap_err()
            .0
            .contains("disagrees")
    );
}

#[test]
fn slurm_hostlists() {
    assert_eq!(
        slurm_first_host("node[07-10,12],gpu1").as_deref(),
        Some("node07")
    );
    assert_eq!(slurm_first_host("gpu1,node[1-2]").as_deref(), Some("gpu1"));
    assert_eq!(
        slurm_first_host("rack1-[3-4]-ib").as_deref(),
        Some("rack1-3-ib")
    );
    assert_eq!(slurm_first_host("a[2,5]b[01-02]").as_deref(), Some("a2b01"));
    assert_eq!(slurm_first_host("vm").as_deref(), Some("vm"));
}

/// The host `launcher` names as the coordinator, with `vars` set, for a job of 4.
fn coordinator_host(launcher: Launcher, vars: &[(&str, &str)]) -> String {
    coordinator(&env(vars), launcher, 4, None).unwrap().0.0
}

#[test]
fn coordinator_from_the_launcher() {
    let e = env(&[
        ("SLURM_STEP_NUM_NODES", "4"),
        ("SLURM_STEP_NODELIST", "cn[003-006]"),
        ("SLURM_LAUNCH_NODE_IPADDR", "10.0.0.1"),
    ]);
    let ((h, p), _) = coordinator(&e, Launcher::Slurm, 4, None).unwrap();
    assert_eq!((h.as_str(), p), ("cn003", DEFAULT_COORDINATOR_PORT));
    assert_eq!(
        coordinator_host(
            Launcher::Slurm,
            &[("SLURM_STEP_NUM_NODES", "1"), ("SLURM_STEP_NODELIST", "vm")]
        ),
        "127.0.0.1"
    );
    assert_eq!(
        coordinator_host(Launcher::Slurm, &[("SLURM_LAUNCH_NODE_IPADDR", "10.0.0.1")]),
        "10.0.0.1"
    );
    let uri = "2052587520.0;tcp://192.0.2.2,10.1.1.1:46489;tcp6://[fd00::2]:45799";
    assert_eq!(
        coordinator_host(
            Launcher::OpenMpi,
            &[
                ("OMPI_MCA_orte_hnp_uri", uri),
                ("OMPI_COMM_WORLD_LOCAL_SIZE", "1"),
            ]
        ),
        "192.0.2.2"
    );
    assert_eq!(
        coordinator_host(
            Launcher::OpenMpi,
            &[
                ("OMPI_MCA_orte_hnp_uri", uri),
                ("OMPI_COMM_WORLD_LOCAL_SIZE", "4"),
            ]
        ),
        "127.0.0.1"
    );
    assert!(coordinator(&env(&[]), Launcher::Kubernetes, 4, None).is_err());
    let ((h, p), _) =
        coordinator(&env(&[]), Launcher::Kubernetes, 4, Some("job-0.svc:9000")).unwrap();
    assert_eq!((h.as_str(), p), ("job-0.svc", 9000));
    assert_eq!(
        split_host_port("[fd00::1]:7", 1).unwrap(),
        ("fd00::1".into(), 7)
    );
    assert_eq!(
        split_host_port("fd00::1", 1).unwrap(),
        ("fd00::1".into(), 1)
    );
}

#[test]
fn where_slurm_places_each_rank() {
    assert_eq!(
        slurm_hosts("cn[07-08,10],gpu1").unwrap(),
        ["cn07", "cn08", "cn10", "gpu1"]
    );
    assert_eq!(
        slurm_hosts("a[1-2]b[3,5]").unwrap(),
        ["a1b3", "a1b5", "a2b3", "a2b5"]
    );
    let e = env(&[
        ("SLURM_STEP_NODELIST", "cn[1-3]"),
        ("SLURM_STEP_TASKS_PER_NODE", "2(x2),1"),
    ]);
    let h = expected_hosts(&e, Launcher::Slurm, 5);
    assert_eq!(
        h,
        ["cn1", "cn1", "cn2", "cn2", "cn3"].map(|s| Some(s.to_owned()))
    );
    let cyclic = env(&[
        ("SLURM_STEP_NODELIST", "cn[1-3]"),
        ("SLURM_STEP_TASKS_PER_NODE", "1(x3)"),
        ("SLURM_DISTRIBUTION", "cyclic"),
    ]);
    assert_eq!(expected_hosts(&cyclic, Launcher::Slurm, 3), vec![None; 3]);
    assert_eq!(
        expected_hosts(&env(&[]), Launcher::Kubernetes, 2),
        vec![None; 2]
    );
}
