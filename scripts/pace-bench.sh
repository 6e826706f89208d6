#!/bin/bash
# How close --rate_limit comes to its target: -D runs at several rates over soft RoCE v2 on lo and
# over TCP, the achieved rate each side measured against the target (the sender's over whole pacing
# periods; a send_bw receiver's over its own -D window, with the same --rate_limit). A benchmark,
# not a test: the figures depend on the machine, and a loaded one only lowers them.
#
#   scripts/pace-bench.sh            (PROFILE=release by default; D=10 seconds per run)
#   RATES="0.5 1 2" UNITS=g SIZE=65536 BURSTS="128 16" TRANSPORTS="soft tcp" scripts/pace-bench.sh
#
# Prints one line per run: transport, test, burst, target, achieved (sender, receiver), error in %.
# Exit: 0 when every sender is within 1 % of its target (below it only: it never exceeds), 1 otherwise.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PROFILE=${PROFILE:-release}
D=${D:-10}
RATES=${RATES:-"0.25 0.5 1 2"}
UNITS=${UNITS:-g}
SIZE=${SIZE:-65536}
BURSTS=${BURSTS:-"128 8"}
TRANSPORTS=${TRANSPORTS:-"soft tcp"}
TESTS=${TESTS:-"send_bw write_bw"}
if [ "$PROFILE" = release ]; then
    (cd "$ROOT" && cargo build --release --bins -q)
else
    (cd "$ROOT" && cargo build --bins -q)
fi
BIN=$ROOT/target/$PROFILE
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
port=$((20000 + RANDOM % 20000))
worst=0
printf '%-5s %-9s %6s %10s %14s %14s %9s\n' transport test burst target achieved received error%
for tr in $TRANSPORTS; do
    case $tr in
        soft) T=(--transport soft -d lo) ;;
        tcp) T=(--transport tcp) ;;
        *) echo "unknown transport $tr" >&2; exit 2 ;;
    esac
    for test in $TESTS; do
        for burst in $BURSTS; do
            for rate in $RATES; do
                port=$((port + 1))
                args=("${T[@]}" -p "$port" -s "$SIZE" -D "$D" --rate_limit "$rate" --rate_units "$UNITS" --burst_size "$burst")
                "$BIN/roce_$test" "${args[@]}" --cpu 0 --json "$TMP/s.json" > "$TMP/s.out" 2>&1 &
                spid=$!
                for _ in $(seq 100); do grep -q 'Waiting for client' "$TMP/s.out" && break; sleep 0.1; done
                "$BIN/roce_$test" "${args[@]}" --cpu 1 --json "$TMP/c.json" 127.0.0.1 > "$TMP/c.out" 2>&1 || {
                    echo "$tr $test $rate: client failed" >&2; cat "$TMP/c.out" >&2; exit 1; }
                wait "$spid"
                read -r achieved err < <(python3 -c "import json,sys; p=json.load(open(sys.argv[1]))['results'][0]['bandwidth']['pacing']; print(p['achieved'], p['error_pct'])" "$TMP/c.json")
                received=$(python3 -c "import json,sys; p=json.load(open(sys.argv[1]))['results'][0]['bandwidth'].get('pacing') or {}; print('%.6f' % p['achieved'] if p.get('measured_at')=='receiver' and 'achieved' in p else '-')" "$TMP/s.json")
                printf '%-5s %-9s %6s %10s %14.6f %14s %9.3f\n' "$tr" "$test" "$burst" "$rate" "$achieved" "$received" "$err"
                worst=$(python3 -c "import sys; print(max(float(sys.argv[1]), abs(float(sys.argv[2]))))" "$worst" "$err")
            done
        done
    done
done
echo "units: $UNITS ($SIZE-byte messages), -D $D; worst sender error ${worst} %"
python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) <= 1.0 else 1)" "$worst"
