#!/usr/bin/env bash
# The main job on one machine: a server and a client on loopback, pinned to different cores, running
# write_bw at 64 KiB and write_lat at 2 B over the TCP baseline. Results also land in results/.
# (When roce_compare exists this becomes the RoCE v1 / v2 / TCP side-by-side comparison.)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh build
cargo build --release --locked --bins >&2

bin=target/release
ncpu=$(nproc)
server_cpu=0
client_cpu=$((ncpu > 1 ? 1 : 0))
port=${ROCEPERF_DEMO_PORT:-18515}

run_pair() { # run_pair <binary> <args...>
    local b=$1; shift
    "$bin/$b" --transport tcp --cpu "$server_cpu" -p "$port" "$@" --results results &
    local server=$!
    "$bin/$b" --transport tcp --cpu "$client_cpu" -p "$port" "$@" --results results 127.0.0.1 || { wait "$server"; return 1; }
    wait "$server"
}

echo "== roce_write_bw over TCP on loopback: server on core $server_cpu, client on core $client_cpu =="
run_pair roce_write_bw -s 65536 -n 20000
echo
echo "== roce_write_lat over TCP on loopback =="
run_pair roce_write_lat -s 2 -n 10000
echo
echo "Results written under results/ (CSV and JSON)."
