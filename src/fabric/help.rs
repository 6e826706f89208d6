//! roce_fabric --help.

/// roce_fabric --help.
pub(crate) const HELP: &str = "\
roce_fabric: the roceperf tests between every pair of N hosts, launched by srun, mpirun or a
Kubernetes Indexed Job. Each rank runs the single-pair binaries (roce_write_bw, ...) against the peers
rank 0 assigns; rank 0 gathers an n x n matrix per test and names the slow hosts and pairs.

Usage: roce_fabric [FABRIC OPTIONS] TEST... [TEST FLAGS]

  TEST           send_bw write_bw read_bw send_lat write_lat read_lat, or all
  TEST FLAGS     any flag of the single-pair binaries (-d, -s, -n, -D, --transport, --roce, --validate,
                 ...), passed to them unchanged; -d, -i, -x, --cpu and --bind may differ per rank

Fabric options:
  --coordinator HOST[:PORT]  where rank 0 listens [default: from the launcher; 127.0.0.1 on one host;
                             port 18510]
  --rank N, --world-size N   rank and size when no launcher gives them (--world-size with a Kubernetes
                             Indexed Job's JOB_COMPLETION_INDEX)
  --pattern all|ring|bisection  which pairs [default: all: n-1 rounds of n/2 pairs, both directions]
  --pairs FILE               pairs to test, one 'CLIENT SERVER' rank pair per line
  --serial                   one pair at a time instead of a whole round at once
  --compare                  RoCE v1, RoCE v2 and TCP matrices in one job
  --results DIR              where rank 0 writes fabric.json, fabric.csv and heatmaps
                             [default: results/fabric-<timestamp>]
  --lat-factor X             flag a pair whose median latency is over X times the lowest [default: 2.1]
  --bw-fraction P            flag a pair whose bandwidth is under P of the highest [default: 93%]
  --no-retest                do not retest flagged pairs alone
  --join-timeout SECS        how long rank 0 waits for every rank [default: 60]
  --pair-timeout SECS        longest one pair test may take [default: from -n/-D, at least 30]
  --advertise ADDR           the address the other ranks reach this rank at [default: as rank 0 sees it;
                             127.0.0.(10+rank) for soft on lo]
  --bin-dir DIR              where the roce_* binaries are [default: next to roce_fabric]
  --loopback-base ADDR       soft on lo: rank r binds ADDR + r, so that two jobs on one host do not
                             meet [default: 127.0.0.10]
  -p, --port N               first out-of-band port of the pair tests; a pair uses N + its server's rank
                             [default: 18515]
  -h, --help, -V, --version

Examples:
  srun -N 16 --ntasks-per-node=1 roce_fabric write_bw -s 1M -d mlx5_0 --results /shared/fabric
  mpirun -np 16 --map-by node roce_fabric write_lat --transport soft -d eth0
  mpirun --oversubscribe -np 4 roce_fabric write_bw --transport soft -d lo -n 200   (one host)

Rank and size come from SLURM_PROCID/SLURM_NTASKS, OMPI_COMM_WORLD_RANK/_SIZE, PMI_RANK/PMI_SIZE,
PMIX_RANK or JOB_COMPLETION_INDEX. Check the matrix with roce_gate fabric.json --min-bw ... --no-flagged.

Exit status: 0 every pair ran, 1 a pair failed or a rank was lost (the matrix is still written), 2 usage
or setup error, or ranks that disagree on the version or a parameter.";
