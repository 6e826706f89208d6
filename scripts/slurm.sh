#!/usr/bin/env bash
# A real single-node Slurm on this machine, to run roce_fabric under srun as on a cluster:
# installs slurmctld, slurmd and munge from Debian when missing, writes a minimal slurm.conf for this
# host (one node, 8 CPUs declared so that `srun -n 4` fits on a small VM), starts munged, slurmctld and
# slurmd in a scratch directory, runs the command, and stops the daemons again (also on failure).
#
#   scripts/slurm.sh                      srun -n 4 roce_fabric write_bw over soft on lo, then the matrix
#   scripts/slurm.sh -- srun -n 4 hostname   any command, with SLURM_CONF pointing at the scratch Slurm
#
# Needs root (the daemons run as root; nothing in /etc is changed). BIN_DIR names where roce_fabric is
# (default target/release, else target/debug); SLURM_DIR keeps the scratch directory (default: a fresh
# one under /tmp, removed at the end); SLURM_PORT the first of slurmctld's and slurmd's two ports
# (default 16817); RESULTS where the default run writes (default results/fabric-slurm-<timestamp>).
# Prints how long Slurm took to come up.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
[[ $(id -u) == 0 ]] || { echo "slurm.sh: needs root (it starts slurmctld, slurmd and munged)" >&2; exit 2; }

need=()
command -v slurmctld >/dev/null 2>&1 || need+=(slurmctld)
command -v slurmd >/dev/null 2>&1 || need+=(slurmd)
command -v srun >/dev/null 2>&1 || need+=(slurm-client)
command -v munged >/dev/null 2>&1 || need+=(munge)
if ((${#need[@]})); then
    echo "slurm.sh: installing ${need[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if [[ -z ${BIN_DIR:-} ]]; then
    BIN_DIR=$here/target/release
    [[ -x $BIN_DIR/roce_fabric ]] || BIN_DIR=$here/target/debug
fi
keep=${SLURM_DIR:+1}
dir=${SLURM_DIR:-$(mktemp -d /tmp/roceperf-slurm.XXXXXX)}
mkdir -p "$dir/spool" "$dir/state"
port=${SLURM_PORT:-16817}
node=$(hostname -s)
cpus=$(nproc); ((cpus >= 8)) || cpus=8

slurmd_pid= slurmctld_pid= munged_pid=
alive() { [[ -e /proc/$1 ]] && ! grep -qE '^[0-9]+ \(.*\) Z' "/proc/$1/stat" 2>/dev/null; }
stop() { # stop PID: SIGTERM, SIGKILL after 5 s
    [[ -n $1 ]] || return 0
    kill "$1" 2>/dev/null || return 0
    for _ in $(seq 50); do alive "$1" || break; sleep 0.1; done
    alive "$1" && kill -9 "$1" 2>/dev/null
    wait "$1" 2>/dev/null || true
}
cleanup() {
    # Finished steps report to slurmctld through munge: let them, then stop slurmd, slurmctld, munged.
    if [[ -n $slurmctld_pid ]]; then
        for _ in $(seq 100); do [[ -z $(squeue -h 2>/dev/null) ]] && break; sleep 0.1; done
    fi
    stop "$slurmd_pid"
    stop "$slurmctld_pid"
    stop "$munged_pid"
    [[ -n $keep ]] || rm -rf "$dir"
}
trap cleanup EXIT

# munge: its own socket and key in the scratch directory, so that a system munged is left alone.
[[ -s /etc/munge/munge.key ]] && cp /etc/munge/munge.key "$dir/munge.key" || dd if=/dev/urandom of="$dir/munge.key" bs=1024 count=1 status=none
chmod 400 "$dir/munge.key"
munged --force --foreground --socket="$dir/munge.socket" --key-file="$dir/munge.key" \
    --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munge.seed" \
    >"$dir/munged.out" 2>&1 &
munged_pid=$!

cat >"$dir/slurm.conf" <<CONF
ClusterName=roceperf
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
SchedulerType=sched/builtin
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=fabric Nodes=$node Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$dir/slurm.conf

start=$(date +%s%N)
for _ in $(seq 100); do [[ -S $dir/munge.socket ]] && break; sleep 0.1; done
slurmctld -D -f "$SLURM_CONF" >"$dir/slurmctld.out" 2>&1 &
slurmctld_pid=$!
slurmd -D -f "$SLURM_CONF" -N "$node" >"$dir/slurmd.out" 2>&1 &
slurmd_pid=$!
up=
for _ in $(seq 300); do
    if sinfo -h -o %t 2>/dev/null | grep -qE '^(idle|mix|alloc)'; then up=1; break; fi
    sleep 0.1
done
if [[ -z $up ]]; then
    echo "slurm.sh: Slurm did not come up within 30 s; logs in $dir" >&2
    tail -n 20 "$dir"/slurmctld.log "$dir"/slurmd.log >&2 || true
    keep=1
    exit 2
fi
ms=$((($(date +%s%N) - start) / 1000000))
echo "slurm.sh: single-node Slurm up in $((ms / 1000)).$((ms % 1000 / 100)) s (node $node, $cpus CPUs declared)" >&2

if [[ ${1:-} == -- ]]; then
    shift
    "$@"
else
    out=${RESULTS:-$here/results/fabric-slurm-$(date -u +%Y%m%d-%H%M%S)}
    srun -n 4 "$BIN_DIR/roce_fabric" write_bw --transport soft -d lo -n 200 --warmup 10 --validate --results "$out"
fi
