#!/usr/bin/env bash
# The congestion study of docs/congestion.md (issue 30): `roce_compare --congestion` with 2, 4 and 8
# flows, every discipline, and one Markdown table of all of it for the document. Run it as root on a
# quiet machine (nothing else running: the endpoints busy-poll, and on two cores every other process
# takes time from them; the table records the load average before and after).
#
#   sudo scripts/congestion-study.sh                    # results/congestion-study/<timestamp>/
#   sudo FLOWS="4" D=20 scripts/congestion-study.sh /tmp/study
#   sudo EXTRA="--bottleneck 2 --disciplines ecn-dcqcn,pfc" scripts/congestion-study.sh
#
# Settings (environment): FLOWS (default "2 4 8"), D seconds per discipline (12: with the idle victim
# and each run's set-up the whole study takes about 5 minutes), PROFILE (release), EXTRA (more
# roce_compare flags), NO_BUILD=1 (use the binaries as built), TABLE_ONLY=1 (no run: OUT/study.md
# again from OUT's files, e.g. after editing this table).
# Writes OUT/flows-N/ (roce_compare's congestion.json, .csv, plots and its console output, and
# roce_gate's verdict on it) and OUT/study.md (the table). Needs jq (scripts/deps.sh test).
# Exit: 0 the study ran (a discipline that failed or missed a target is in the table, not an error);
# 2 not root, jq missing, a build or a roce_compare set-up error.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PROFILE=${PROFILE:-release}
FLOWS=${FLOWS:-"2 4 8"}
D=${D:-12}
EXTRA=${EXTRA:-}
OUT=${1:-$ROOT/results/congestion-study/$(date -u +%Y%m%d-%H%M%S)}

if [[ $(id -u) != 0 && -z ${TABLE_ONLY:-} ]]; then
    echo "congestion-study: needs root (network namespaces and AF_PACKET): run it with sudo" >&2
    exit 2
fi
command -v jq >/dev/null || { echo "congestion-study: needs jq: bash scripts/deps.sh test" >&2; exit 2; }
if [[ -z ${NO_BUILD:-}${TABLE_ONLY:-} ]]; then
    if [[ $PROFILE == release ]]; then
        (cd "$ROOT" && cargo build --release --bins -q) || exit 2
    else
        (cd "$ROOT" && cargo build --bins -q) || exit 2
    fi
fi
BIN=$ROOT/target/$PROFILE
mkdir -p "$OUT"
load() { cut -d' ' -f1-3 /proc/loadavg; }
load_before=$(load)
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
t0=$SECONDS

for n in $FLOWS; do
    [[ -n ${TABLE_ONLY:-} ]] && break
    dir=$OUT/flows-$n
    mkdir -p "$dir"
    echo "congestion-study: $n flows, ${D} s per discipline -> $dir" >&2
    # shellcheck disable=SC2086 # EXTRA is flags, split on purpose
    if ! "$BIN/roce_compare" --congestion --flows "$n" -D "$D" $EXTRA --results "$dir" \
            >"$dir/console.txt" 2>"$dir/stderr.txt"; then
        cat "$dir/stderr.txt" >&2
        echo "congestion-study: roce_compare failed with $n flows; its output is in $dir" >&2
        exit 2
    fi
    json=$(find "$dir" -name congestion.json | sort | tail -n 1)
    ln -sf "${json#"$dir"/}" "$dir/congestion.json"
    "$BIN/roce_gate" "$json" >"$dir/gate.txt" 2>&1 && echo 0 >"$dir/gate.rc" || echo $? >"$dir/gate.rc"
done

took=$((SECONDS - t0))
load_after=$(load)
if [[ -n ${TABLE_ONLY:-} ]]; then
    read -r started took load_before load_after <"$OUT/run.txt"
else
    echo "$started $took ${load_before// /,} ${load_after// /,}" >"$OUT/run.txt"
fi
first=$(find "$OUT" -name congestion.json -path '*/flows-*/*/*' | sort | head -n 1)
{
    echo "Study of $started ($took s): \`roce_compare --congestion --flows N -D $D${EXTRA:+ $EXTRA}\`"
    echo "for N in $FLOWS (\`scripts/congestion-study.sh\`, $PROFILE binaries)."
    jq -r '"Host: \(.provenance.host // "?"), kernel \(.provenance.kernel // "?"), \(.setup.host_cores) cores, \(.provenance.cpu_model // "?"); commit \(.provenance.commit // "?")."' "$first"
    echo "Load average (1, 5, 15 min) before: $load_before; after: $load_after."
    jq -r '.setup | "Bottleneck \(.bottleneck_gbps) Gb/s, buffer \(.buffer_bytes) B, ECN Kmin \(.kmin_bytes) B Kmax \(.kmax_bytes) B Pmax \(.pmax), PFC priority \(.pfc_prio) Xoff \(.xoff_bytes) B Xon \(.xon_bytes) B; bulk \(.size_bytes) B WRITEs, victim \(.victim_size_bytes // "none") B write_lat."' "$first"
    jq -r '"Placement: " + ([.setup.placement[] | "\(.role) on " + (if .core == null then "any core" else "core \(.core)" end)] | join("; ")) + "."' "$first"
    echo
    echo "| flows | discipline | of rate | Jain steady | drops | retx MB | CNPs s/h | pauses s/r | paused ms | converge s | victim p50 / p99 µs | p99 ÷ idle |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
    for n in $FLOWS; do
        dir=$OUT/flows-$n
        jq -r --arg n "$n" '
            def r(x; d): if x == null then "–" else (x * pow(10; d) | round / pow(10; d) | tostring) end;
            .idle_victim as $idle
            | (.runs[] |
                if .outcome.ok | not then
                    "| \($n) | \(.discipline) | failed: \(.outcome.error // "?" | gsub("\\|"; "/")) ||||||||||"
                else
                    .totals as $t
                    | "| \($n) | \(.discipline) | \(r($t.goodput_fraction * 100; 0)) % | \(r($t.jain_steady; 3)) | \($t.drops) | \(r($t.retransmitted_bytes / 1e6; 1)) | \($t.cnps_sent)/\($t.cnps_handled) | \($t.pause_frames_sent)/\($t.pause_frames_received // "–") | \(r($t.paused_ms_switch; 0)) | \(r(.convergence.time_s; 2)) | \(r(.victim.p50_us; 1)) / \(r(.victim.p99_us; 0)) | \(if .victim.p99_us != null and $idle.p99_us != null then r(.victim.p99_us / $idle.p99_us; 2) else "–" end) |"
                end),
              "| \($n) | idle victim | | | | | | | | | \(r($idle.p50_us; 1)) / \(r($idle.p99_us; 0)) | \(if $idle.p99_us == null then "–" else "1" end) |"
        ' "$dir/congestion.json"
    done
    echo
    echo "roce_gate on each (issue 30's targets; exit 0 all met, 1 a target missed):"
    for n in $FLOWS; do
        echo "- $n flows: exit $(cat "$OUT/flows-$n/gate.rc")"
        grep -i 'fail' "$OUT/flows-$n/gate.txt" | sed 's/^/  - /' || true
    done
    echo
    echo "Notes the runs wrote (the reasons behind a \"–\" are in flows-N/console.txt):"
    for n in $FLOWS; do
        jq -r --arg n "$n" '.notes[] | "- \($n) flows: \(.)"' "$OUT/flows-$n/congestion.json"
    done
} >"$OUT/study.md"
cat "$OUT/study.md"
echo "congestion-study: $OUT/study.md ($took s)" >&2
