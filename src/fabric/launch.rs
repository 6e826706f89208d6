//! Who this process is in the job: rank and size from the launcher's environment (Slurm, Open MPI,
//! MPICH/PMI, PMIx, a Kubernetes Indexed Job) or flags, and where rank 0 (the coordinator) listens.

use super::args::DEFAULT_COORDINATOR_PORT;
use crate::orchestrate::control::hostname;

/// What started the ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Launcher {
    /// `--rank` and `--world-size`.
    Flags,
    /// Open MPI's `mpirun` (`OMPI_COMM_WORLD_RANK`).
    OpenMpi,
    /// A PMI-1/2 launcher: MPICH's Hydra, `srun --mpi=pmi2` (`PMI_RANK`).
    Pmi,
    /// A PMIx launcher (`PMIX_RANK`).
    Pmix,
    /// Slurm's `srun` (`SLURM_PROCID`).
    Slurm,
    /// A Kubernetes Indexed Job (`JOB_COMPLETION_INDEX`).
    Kubernetes,
}

impl Launcher {
    /// `slurm`, `openmpi`, ...
    pub(crate) fn name(self) -> &'static str {
        match self {
            Launcher::Flags => "flags",
            Launcher::OpenMpi => "openmpi",
            Launcher::Pmi => "pmi",
            Launcher::Pmix => "pmix",
            Launcher::Slurm => "slurm",
            Launcher::Kubernetes => "kubernetes",
        }
    }
}

/// This rank's place in the job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Place {
    /// This rank, 0..size.
    pub rank: usize,
    /// Ranks in the job.
    pub size: usize,
    /// Where rank and size came from.
    pub launcher: Launcher,
    /// Rank 0's address and port.
    pub coordinator: (String, u16),
    /// How the coordinator address was found, for messages.
    pub(crate) coordinator_source: String,
}

/// Why rank, size or coordinator cannot be found.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub(crate) struct LaunchError(pub String);

fn num(env: &dyn Fn(&str) -> Option<String>, var: &str) -> Result<Option<usize>, LaunchError> {
    match env(var) {
        None => Ok(None),
        Some(v) => v
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| LaunchError(format!("{var}={v:?} is not a number"))),
    }
}

/// Finds rank and size: `--rank`/`--world-size` first, then Open MPI, PMI, PMIx, Slurm and Kubernetes
/// (an `mpirun` inside a Slurm allocation inherits `SLURM_PROCID` from the batch script, so MPI's own
/// variables win).
pub(crate) fn rank_and_size(
    env: &dyn Fn(&str) -> Option<String>,
    rank_flag: Option<usize>,
    size_flag: Option<usize>,
) -> Result<(usize, usize, Launcher), LaunchError> {
    let sources: [(Launcher, &str, Option<&str>); 5] = [
        (
            Launcher::OpenMpi,
            "OMPI_COMM_WORLD_RANK",
            Some("OMPI_COMM_WORLD_SIZE"),
        ),
        (Launcher::Pmi, "PMI_RANK", Some("PMI_SIZE")),
        (Launcher::Pmix, "PMIX_RANK", None),
        (Launcher::Slurm, "SLURM_PROCID", Some("SLURM_NTASKS")),
        (Launcher::Kubernetes, "JOB_COMPLETION_INDEX", None),
    ];
    let (rank, env_size, launcher, rank_var) = match rank_flag {
        Some(r) => (r, None, Launcher::Flags, "--rank"),
        None => {
            let mut found = None;
            for (launcher, rvar, svar) in sources {
                if let Some(r) = num(env, rvar)? {
                    let mut size = match svar {
                        Some(s) => num(env, s)?,
                        None => None,
                    };
                    if launcher == Launcher::Slurm {
                        size = num(env, "SLURM_STEP_NUM_TASKS")?.or(size);
                    }
                    if launcher == Launcher::Pmix {
                        size = num(env, "OMPI_COMM_WORLD_SIZE")?;
                    }
                    found = Some((r, size, launcher, rvar));
                    break;
                }
            }
            found.ok_or_else(|| {
                LaunchError(
                    "no rank: run roce_fabric under srun or mpirun (or as a Kubernetes Indexed Job with \
                     --world-size), or give --rank and --world-size"
                        .into(),
                )
            })?
        }
    };
    let size = match (env_size, size_flag) {
        (Some(e), Some(f)) if e != f => {
            return Err(LaunchError(format!(
                "--world-size {f} disagrees with the launcher's {e} ranks"
            )));
        }
        (Some(e), _) => e,
        (None, Some(f)) => f,
        (None, None) => {
            return Err(LaunchError(format!(
                "{rank_var} gives this rank but nothing gives the number of ranks: add --world-size N"
            )));
        }
    };
    if size < 2 {
        return Err(LaunchError(format!(
            "the job has {size} rank; a fabric test needs at least 2"
        )));
    }
    if rank >= size {
        return Err(LaunchError(format!(
            "rank {rank} from {rank_var} is not below the job's {size} ranks"
        )));
    }
    Ok((rank, size, launcher))
}

/// Splits `HOST[:PORT]` (`[v6]:PORT` for IPv6).
pub(crate) fn split_host_port(text: &str, default_port: u16) -> Result<(String, u16), LaunchError> {
    let bad = || LaunchError(format!("--coordinator {text:?}: use HOST or HOST:PORT"));
    if let Some(rest) = text.strip_prefix('[') {
        let (host, tail) = rest.split_once(']').ok_or_else(bad)?;
        let port = match tail.strip_prefix(':') {
            Some(p) => p.parse().map_err(|_| bad())?,
            None if tail.is_empty() => default_port,
            None => return Err(bad()),
        };
        return Ok((host.to_owned(), port));
    }
    match text.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => Ok((h.to_owned(), p.parse().map_err(|_| bad())?)),
        _ if text.is_empty() => Err(bad()),
        _ => Ok((text.to_owned(), default_port)),
    }
}

/// The first host of a Slurm hostlist: `node[07-10,12],gpu1` → `node07`; `rack1-[3-4]-ib` → `rack1-3-ib`.
pub(crate) fn slurm_first_host(list: &str) -> Option<String> {
    // The first element at bracket depth 0.
    let mut depth = 0;
    let mut end = list.len();
    for (i, c) in list.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                end = i;
                break;
            }
            _ => {}
        }
    }
    let first = list[..end].trim();
    // Each bracket group becomes its first number (keeping its zero padding).
    let mut out = String::new();
    let mut rest = first;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let close = rest[open..].find(']')? + open;
        let inner = &rest[open + 1..close];
        let first_range = inner.split(',').next()?;
        out.push_str(first_range.split('-').next()?.trim());
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    (!out.is_empty()).then_some(out)
}

/// Every host of a Slurm hostlist, in order: `cn[07-08,10],gpu1` → cn07, cn08, cn10, gpu1.
pub(crate) fn slurm_hosts(list: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    for (i, c) in list
        .char_indices()
        .chain(std::iter::once((list.len(), ',')))
    {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                let item = list[start..i].trim();
                if !item.is_empty() {
                    out.extend(expand(item)?);
                }
                start = i + 1;
            }
            _ => {}
        }
    }
    Some(out)
}

/// One hostlist item with bracket ranges expanded (`a[1-2]b[3,5]` → a1b3, a1b5, a2b3, a2b5).
fn expand(item: &str) -> Option<Vec<String>> {
    let Some(open) = item.find('[') else {
        return Some(vec![item.to_owned()]);
    };
    let close = item[open..].find(']')? + open;
    let (head, inner, tail) = (&item[..open], &item[open + 1..close], &item[close + 1..]);
    let tails = expand(tail)?;
    let mut out = Vec::new();
    for range in inner.split(',') {
        let (lo, hi) = range.split_once('-').unwrap_or((range, range));
        let width = lo.len();
        let (a, b): (u64, u64) = (lo.trim().parse().ok()?, hi.trim().parse().ok()?);
        if b < a || b - a > 100_000 {
            return None;
        }
        for k in a..=b {
            for t in &tails {
                out.push(format!("{head}{k:0width$}{t}"));
            }
        }
    }
    Some(out)
}

/// The host each rank is placed on, where the launcher says: Slurm's step nodelist and tasks per node
/// (`2(x3),1`) under its default block distribution, or this host when every rank is local. Used to
/// name a rank that never joined.
pub(crate) fn expected_hosts(
    env: &dyn Fn(&str) -> Option<String>,
    launcher: Launcher,
    size: usize,
) -> Vec<Option<String>> {
    let local = |var: &str| env(var).and_then(|v| v.trim().parse::<usize>().ok()) == Some(size);
    match launcher {
        Launcher::Slurm => {
            let nodes = ["SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST"]
                .iter()
                .find_map(|v| env(v))
                .and_then(|l| slurm_hosts(&l));
            let tasks = ["SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"]
                .iter()
                .find_map(|v| env(v));
            let cyclic = env("SLURM_DISTRIBUTION").is_some_and(|d| d.starts_with("cyclic"));
            let (Some(nodes), Some(tasks), false) = (nodes, tasks, cyclic) else {
                return vec![None; size];
            };
            let mut per_node = Vec::new();
            for part in tasks.split(',') {
                let (count, times) = match part.split_once("(x") {
                    Some((c, t)) => (
                        c.parse::<usize>().ok(),
                        t.trim_end_matches(')').parse::<usize>().ok(),
                    ),
                    None => (part.parse().ok(), Some(1)),
                };
                let (Some(c), Some(t)) = (count, times) else {
                    return vec![None; size];
                };
                per_node.extend(std::iter::repeat_n(c, t));
            }
            let mut hosts: Vec<Option<String>> = nodes
                .iter()
                .zip(per_node)
                .flat_map(|(h, c)| std::iter::repeat_n(Some(h.clone()), c))
                .collect();
            hosts.resize(size, None);
            hosts
        }
        Launcher::OpenMpi | Launcher::Pmix if local("OMPI_COMM_WORLD_LOCAL_SIZE") => {
            vec![Some(hostname()); size]
        }
        Launcher::Pmi if local("MPI_LOCALNRANKS") => vec![Some(hostname()); size],
        _ => vec![None; size],
    }
}

/// The host of the first `tcp://` address in Open MPI's `OMPI_MCA_orte_hnp_uri`
/// (`2052587520.0;tcp://192.0.2.2:46489;tcp6://[fd00::2]:45799` → `192.0.2.2`).
fn ompi_hnp_host(uri: &str) -> Option<String> {
    let tcp = uri.split(';').find_map(|p| p.strip_prefix("tcp://"))?;
    let first = tcp.split(',').next()?;
    Some(first.rsplit_once(':').map_or(first, |(h, _)| h).to_owned())
}

/// Where rank 0 listens: `--coordinator`, else what the launcher tells: loopback when every rank is on
/// this host, the first host of the Slurm step (where srun places rank 0), `mpirun`'s host for Open
/// MPI (rank 0's under the default mapping), `SLURM_LAUNCH_NODE_IPADDR` as the last Slurm resort.
pub(crate) fn coordinator(
    env: &dyn Fn(&str) -> Option<String>,
    launcher: Launcher,
    size: usize,
    flag: Option<&str>,
) -> Result<((String, u16), String), LaunchError> {
    let port = DEFAULT_COORDINATOR_PORT;
    if let Some(f) = flag {
        return Ok((split_host_port(f, port)?, "--coordinator".into()));
    }
    let local = |src: &str| -> Result<((String, u16), String), LaunchError> {
        Ok((("127.0.0.1".to_owned(), port), src.to_owned()))
    };
    let eq = |var: &str, n: usize| env(var).and_then(|v| v.trim().parse::<usize>().ok()) == Some(n);
    match launcher {
        Launcher::Flags => local("the default for --rank/--world-size: every rank on this host"),
        Launcher::OpenMpi | Launcher::Pmix if eq("OMPI_COMM_WORLD_LOCAL_SIZE", size) => {
            local("OMPI_COMM_WORLD_LOCAL_SIZE: every rank on this host")
        }
        Launcher::OpenMpi | Launcher::Pmix => env("OMPI_MCA_orte_hnp_uri")
            .as_deref()
            .and_then(ompi_hnp_host)
            .map(|h| ((h, port), "OMPI_MCA_orte_hnp_uri: mpirun's host".to_owned()))
            .ok_or_else(|| {
                LaunchError(
                    "the ranks span several hosts and Open MPI does not say where rank 0 runs: give \
                     --coordinator HOST[:PORT] (rank 0's host)"
                        .into(),
                )
            }),
        Launcher::Pmi if eq("MPI_LOCALNRANKS", size) => local("MPI_LOCALNRANKS: every rank on this host"),
        Launcher::Slurm if eq("SLURM_STEP_NUM_NODES", 1) || eq("SLURM_JOB_NUM_NODES", 1) => {
            local("SLURM_STEP_NUM_NODES=1: every rank on this host")
        }
        Launcher::Slurm => {
            for var in ["SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"] {
                if let Some(h) = env(var).as_deref().and_then(slurm_first_host) {
                    return Ok(((h, port), format!("{var}: the step's first host runs rank 0")));
                }
            }
            env("SLURM_LAUNCH_NODE_IPADDR")
                .map(|h| ((h, port), "SLURM_LAUNCH_NODE_IPADDR".to_owned()))
                .ok_or_else(|| LaunchError("Slurm names no host: give --coordinator HOST[:PORT]".into()))
        }
        Launcher::Pmi | Launcher::Kubernetes => Err(LaunchError(format!(
            "the {} launcher does not say where rank 0 runs: give --coordinator HOST[:PORT] (for an Indexed \
             Job: <job>-0.<headless service>)",
            launcher.name()
        ))),
    }
}

/// Rank, size and coordinator, from flags and the environment.
pub(crate) fn place(
    env: &dyn Fn(&str) -> Option<String>,
    rank_flag: Option<usize>,
    size_flag: Option<usize>,
    coordinator_flag: Option<&str>,
) -> Result<Place, LaunchError> {
    let (rank, size, launcher) = rank_and_size(env, rank_flag, size_flag)?;
    let (coordinator, coordinator_source) = coordinator(env, launcher, size, coordinator_flag)?;
    Ok(Place {
        rank,
        size,
        launcher,
        coordinator,
        coordinator_source,
    })
}

#[cfg(test)]
mod tests;
