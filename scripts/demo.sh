#!/usr/bin/env bash
# The main job on one machine: RoCE v2 (soft, loopback), RoCE v1 (soft, a veth pair between two network
# namespaces) and the TCP baseline side by side, running write_lat at 2 B and write_bw at 64 KiB.
# The table and histograms print here; compare.csv, compare.json, HdrHistogram logs, latency.svg and
# bandwidth.svg land in results/<timestamp>/. RoCE v1 needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN,
# CAP_NET_RAW): without it, it is skipped with a note saying so.
# Any roce_compare arguments pass through: scripts/demo.sh send_lat read_bw -a
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/env.sh
roceperf_env   # sbin on PATH; a rustup cargo, also the invoking user's under sudo
bash scripts/deps.sh demo
roceperf_give_back target results
cargo build --release --locked --bins >&2

if [[ $(id -u) -ne 0 ]]; then
    echo "demo: not root, so RoCE v1 (veth pair between network namespaces) will be skipped; run with sudo for all three" >&2
fi
status=0
target/release/roce_compare --local --results results "$@" || status=$?
latest=$(ls -1d results/[0-9]*/ 2>/dev/null | sort | tail -n 1)   # results/<timestamp>/, not results/schema/
if [[ -n $latest && -f $latest/compare.json ]]; then
    echo
    echo "Open ${latest}latency.svg and ${latest}bandwidth.svg; compare.csv and compare.json are next to them."
fi
exit "$status"
