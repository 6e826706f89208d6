#!/usr/bin/env bash
# The CI performance gate: one short comparison on this machine, judged by ratios within it.
#
#   ci-gate.sh [RESULTS_DIR]      (default: a temporary directory, removed at the end)
#
# Runs `roce_compare --local write_lat write_bw` (1 s per run, 3 interleaved repetitions: about 20 s;
# across a veth pair between two namespaces as root, else on lo) and gates its compare.json with
# roce_gate on same-run ratios of soft RoCE v2 to TCP. Both transports share the machine and the
# minute, so a slow or busy runner moves both and the ratios hold where absolute numbers flake.
# docs/ci-gate.md says how the limits were chosen: the median-latency ratio catches a 2x slowdown of
# the soft datapath; the bandwidth floor catches a collapse. A transport whose run failed fails too.
# Exit status: 0 pass, 1 a gate failed (or a run failed), 2 the comparison could not run.
set -euo pipefail
cd "$(dirname "$0")/.."

# Soft RoCE v2's median write latency at most this many times TCP's (normally 1.1-1.5x).
MAX_P50_RATIO=${ROCEPERF_GATE_MAX_P50_RATIO:-1.9}
# Soft RoCE v2's write bandwidth at least this many times TCP's (0.33-1.85x seen on a busy machine).
MIN_BW_RATIO=${ROCEPERF_GATE_MIN_BW_RATIO:-0.2}

out=${1:-}
if [[ -z $out ]]; then
  out=$(mktemp -d -t roceperf-gate.XXXXXX)
  trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"

cargo build --release --locked --bins --quiet
bin=target/release

start=$SECONDS
status=0
"$bin/roce_compare" --local write_lat write_bw -D 1 --repeat 3 --results "$out" || status=$?
if [[ $status -ne 0 ]]; then
  echo "ci-gate: roce_compare --local exited with $status" >&2
  exit 2
fi
compare=$(ls -1d "$out"/*/compare.json | tail -n 1)
echo "ci-gate: comparison ran in $((SECONDS - start)) s: $compare"

gate=0
"$bin/roce_gate" --max-ratio "soft-v2/tcp:p50=$MAX_P50_RATIO" \
  --min-ratio "soft-v2/tcp:bw=$MIN_BW_RATIO" "$compare" || gate=$?

# A repetition or a transport that failed is a failure of the gate, not a gap in it.
if grep -q '"failed": true' "$compare"; then
  echo "ci-gate: FAIL: a run failed; see the notes under the table above" >&2
  [[ $gate -ne 0 ]] || gate=1
fi
exit "$gate"
