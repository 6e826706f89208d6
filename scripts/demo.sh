#!/usr/bin/env bash
# The main job on one machine: soft RoCE v1 and v2 over one host path (AF_PACKET, the same batching),
# TCP, and soft RoCE v2 over its UDP socket, all across a veth pair between two network namespaces,
# running write_lat at 2 B and write_bw at 64 KiB; each row beside the floor of its path (roce_ref,
# same run, same cores) and what the stack adds above it.
# The tables and histograms print here; compare.csv, compare.json, HdrHistogram logs, latency.svg and
# bandwidth.svg land in results/<timestamp>/. The AF_PACKET rows need root (CAP_SYS_ADMIN,
# CAP_NET_ADMIN, CAP_NET_RAW): without it they are skipped with a note saying so, and the rest runs on lo.
# Any roce_compare arguments pass through: scripts/demo.sh send_lat read_bw -a --link-speed 100G
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/env.sh
roceperf_env   # sbin on PATH; a rustup cargo, also the invoking user's under sudo
bash scripts/deps.sh demo
roceperf_give_back target results
cargo build --release --locked --bins >&2

if [[ $(id -u) -ne 0 ]]; then
    echo "demo: not root, so the AF_PACKET rows (RoCE v1 and v2 across a veth pair between network namespaces) will be skipped; run with sudo for all four" >&2
fi
status=0
target/release/roce_compare --local --results results "$@" || status=$?
latest=$(ls -1d results/[0-9]*/ 2>/dev/null | sort | tail -n 1)   # results/<timestamp>/, not results/schema/
if [[ -n $latest && -f $latest/compare.json ]]; then
    echo
    echo "Open ${latest}latency.svg and ${latest}bandwidth.svg; compare.csv and compare.json are next to them."
fi
exit "$status"
