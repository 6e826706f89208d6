#!/usr/bin/env bash
# Installs, only when missing, the system packages roceperf needs for a purpose:
#   build  cargo's C side: cmake and libclang-dev (the `verbs` feature builds rdma-mummy-sys with them)
#   demo   build + iproute2 (roce_compare --local runs RoCE v1 across a veth pair between namespaces)
#   test   the test suite: build + tshark (independent RoCE decoder), iproute2 (network namespaces), tcpdump,
#          libibverbs1 (the verbs tests check its error paths on this kernel), iptables (impairment
#          without netem), openmpi-bin (roce_fabric under mpirun), slurmctld, slurmd, slurm-client and
#          munge (roce_fabric under srun, scripts/slurm.sh)
#   bench  the benchmarks: test + iperf3, sockperf (the baselines we report ratios against)
# Usage: scripts/deps.sh build|demo|test|bench
set -euo pipefail

purpose=${1:-test}
need=()
want() { # want <command-or-file> <debian-package>
    if [[ $1 == /* ]]; then [[ -e $1 ]] || need+=("$2"); else command -v "$1" >/dev/null 2>&1 || need+=("$2"); fi
}

command -v cargo >/dev/null 2>&1 || { echo "deps: cargo is not installed; install Rust from your distribution or rustup first" >&2; exit 2; }
want cc gcc
want cmake cmake
# bindgen needs libclang; Debian ships it versioned, so look for any libclang.so.
if ! ls /usr/lib/llvm-*/lib/libclang*.so* /usr/lib/x86_64-linux-gnu/libclang*.so* >/dev/null 2>&1; then need+=(libclang-dev); fi
case $purpose in
    build|demo|test|bench) ;;
    *) echo "deps: unknown purpose '$purpose'; use build, demo, test or bench" >&2; exit 2 ;;
esac
if [[ $purpose == demo ]]; then
    want ip iproute2
fi
if [[ $purpose == test || $purpose == bench ]]; then
    want tshark tshark
    want ip iproute2
    want tcpdump tcpdump
    # netns.sh's loss/duplication fallback on kernels without netem (this one has none).
    want iptables-legacy iptables
    # The verbs tests need libibverbs present (they then hide it, or meet this kernel's missing RDMA).
    [[ -e /usr/lib/x86_64-linux-gnu/libibverbs.so.1 || -e /usr/lib64/libibverbs.so.1 ]] || need+=(libibverbs1 ibverbs-providers)
    # roce_fabric's launchers: Open MPI's mpirun and a single-node Slurm.
    want mpirun openmpi-bin
    want slurmctld slurmctld
    want slurmd slurmd
    want srun slurm-client
    want munged munge
fi
if [[ $purpose == bench ]]; then
    want iperf3 iperf3
    want sockperf sockperf
    want taskset util-linux
fi

if ((${#need[@]})); then
    echo "deps: installing ${need[*]}" >&2
    sudo=()
    if [[ $(id -u) != 0 ]]; then
        command -v sudo >/dev/null 2>&1 || { echo "deps: need root (or sudo) to apt-get install ${need[*]}" >&2; exit 2; }
        sudo=(sudo)
    fi
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -qq
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
