#!/usr/bin/env bash
# roceperf's TCP baseline and soft RoCE v2 against the standard tools, on loopback, in one script:
#   roce_write_bw  --transport tcp -s 64K  vs  iperf3            (average bandwidth, Gb/s)
#   roce_write_lat --transport tcp -s 2    vs  sockperf ping-pong (median one-way latency, usec)
#   roce_write_bw / roce_write_lat --transport soft --roce v2 -d lo against the same two references
# Servers run on core SERVER_CPU and clients on CLIENT_CPU (taskset for the reference tools, --cpu for
# roceperf). Each comparison runs ROUNDS times, alternating tools; the table shows the medians and ratios.
# Targets: tcp bandwidth ratio >= 0.95, latency ratio <= 1.05; soft v2 bandwidth >= 1.0, latency <= 0.8.
#
#   scripts/bench.sh                      # defaults: DURATION=5 ROUNDS=3 SERVER_CPU=0 CLIENT_CPU=1
#   DURATION=10 ROUNDS=5 scripts/bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-3}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
PORT=${BASE_PORT:-18600}
BIN=target/release

need() { # need <command> <debian package>
    command -v "$1" >/dev/null 2>&1 && return 0
    echo "bench.sh: installing $2 (for $1)" >&2
    if [ "$(id -u)" -eq 0 ]; then apt-get install -y "$2" >/dev/null; else sudo apt-get install -y "$2" >/dev/null; fi
}
need iperf3 iperf3
need sockperf sockperf
need taskset util-linux

echo "bench.sh: building release binaries" >&2
cargo build --release --quiet --bins


median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# Each function takes the port to use.

# roceperf write_bw: average Gb/s measured by the client (--output prints just that number).
# roce_bw <port> <transport args...>: tcp, or soft RoCE v2 over UDP on lo (-d lo).
roce_bw() {
    local p=$1; shift
    "$BIN/roce_write_bw" "$@" -p "$p" --cpu "$SERVER_CPU" -s 64K -D "$DURATION" --report_gbits --output=bandwidth >/dev/null &
    local spid=$!
    sleep 0.3
    "$BIN/roce_write_bw" "$@" -p "$p" --cpu "$CLIENT_CPU" -s 64K -D "$DURATION" --report_gbits --output=bandwidth 127.0.0.1
    wait "$spid"
}

# iperf3 (its default 128 KiB writes): receiver Gb/s.
iperf_bw() {
    local p=$1
    taskset -c "$SERVER_CPU" iperf3 -s -1 -p "$p" >/dev/null 2>&1 &
    local spid=$!
    sleep 0.5
    taskset -c "$CLIENT_CPU" iperf3 -c 127.0.0.1 -p "$p" -t "$DURATION" -f g |
        awk '/receiver/ { for (i = 2; i <= NF; i++) if ($i == "Gbits/sec") print $(i - 1) }'
    wait "$spid"
}

# roceperf write_lat: t_typical (the median, column 5 of perftest's latency row) on the client.
roce_lat() {
    local p=$1; shift
    "$BIN/roce_write_lat" "$@" -p "$p" --cpu "$SERVER_CPU" -s 2 -D "$DURATION" >/dev/null &
    local spid=$!
    sleep 0.3
    "$BIN/roce_write_lat" "$@" -p "$p" --cpu "$CLIENT_CPU" -s 2 -D "$DURATION" 127.0.0.1 |
        awk 'found && $1 ~ /^[0-9]+$/ { print $5; exit } /#bytes/ { found = 1 }'
    wait "$spid"
}

# sockperf ping-pong with its smallest message (14 bytes: its own header): median one-way usec.
sockperf_lat() {
    local p=$1
    taskset -c "$SERVER_CPU" sockperf sr --tcp -i 127.0.0.1 -p "$p" >/dev/null 2>&1 &
    local spid=$!
    sleep 0.5
    taskset -c "$CLIENT_CPU" sockperf pp --tcp -i 127.0.0.1 -p "$p" -t "$DURATION" -m 14 2>&1 |
        awk '/percentile 50.000 =/ { print $NF }'
    kill "$spid" 2>/dev/null || true
    wait "$spid" 2>/dev/null || true
}

rb=() ; ib=() ; rl=() ; sl=() ; vb=() ; vl=()
for r in $(seq 1 "$ROUNDS"); do
    echo "bench.sh: round $r of $ROUNDS (${DURATION} s per run)" >&2
    # Each run gets a fresh port (sockperf cannot rebind a port still in TIME_WAIT).
    rb+=("$(roce_bw $((PORT + 6 * r)) --transport tcp)");      ib+=("$(iperf_bw $((PORT + 6 * r + 1)))")
    rl+=("$(roce_lat $((PORT + 6 * r + 2)) --transport tcp)"); sl+=("$(sockperf_lat $((PORT + 6 * r + 3)))")
    vb+=("$(roce_bw $((PORT + 6 * r + 4)) --transport soft --roce v2 -d lo)")
    vl+=("$(roce_lat $((PORT + 6 * r + 5)) --transport soft --roce v2 -d lo)")
done

RB=$(printf '%s\n' "${rb[@]}" | median); IB=$(printf '%s\n' "${ib[@]}" | median)
RL=$(printf '%s\n' "${rl[@]}" | median); SL=$(printf '%s\n' "${sl[@]}" | median)
VB=$(printf '%s\n' "${vb[@]}" | median); VL=$(printf '%s\n' "${vl[@]}" | median)
echo "bench.sh: runs  roceperf tcp bw: ${rb[*]}  iperf3: ${ib[*]}  roceperf tcp lat: ${rl[*]}  sockperf: ${sl[*]}  soft v2 bw: ${vb[*]}  soft v2 lat: ${vl[*]}" >&2

awk -v rb="$RB" -v ib="$IB" -v rl="$RL" -v sl="$SL" -v vb="$VB" -v vl="$VL" -v d="$DURATION" -v n="$ROUNDS" 'BEGIN {
    printf "%-44s %12s %12s %8s  %s\n", "comparison (loopback, median of " n " runs of " d " s)", "roceperf", "reference", "ratio", "target"
    printf "%-44s %12.3f %12.3f %8.3f  %s  %s\n", "tcp write_bw 64 KiB [Gb/s] / iperf3", rb, ib, (ib > 0 ? rb / ib : 0), ">= 0.95", (ib > 0 && rb / ib >= 0.95 ? "ok" : "MISSED")
    printf "%-44s %12.3f %12.3f %8.3f  %s  %s\n", "tcp write_lat 2 B median [usec] / sockperf", rl, sl, (sl > 0 ? rl / sl : 0), "<= 1.05", (sl > 0 && rl / sl <= 1.05 ? "ok" : "MISSED")
    printf "%-44s %12.3f %12.3f %8.3f  %s  %s\n", "soft v2 write_bw 64 KiB [Gb/s] / iperf3", vb, ib, (ib > 0 ? vb / ib : 0), ">= 1.0", (ib > 0 && vb / ib >= 1.0 ? "ok" : "MISSED")
    printf "%-44s %12.3f %12.3f %8.3f  %s  %s\n", "soft v2 write_lat 2 B median [usec] / sockperf", vl, sl, (sl > 0 ? vl / sl : 0), "<= 0.8", (sl > 0 && vl / sl <= 0.8 ? "ok" : "MISSED")
}'
