#!/usr/bin/env bash
# The instruction-count gate: the soft datapath's user-space work, counted by callgrind, held to a
# committed baseline. Counts do not move with the machine's load, so this gate does not flake; it
# complements scripts/ci-gate.sh's same-run ratios (docs/ci-gate.md, "The instruction-count gate").
#
#   instructions.sh [--baseline FILE] [--json FILE] [--max-regression PCT] [--profile] [--update]
#   instructions.sh --judge FIGURES.json [--baseline FILE] [--max-regression PCT]
#
# Builds examples/soft_datapath_cost (release) and runs it under `valgrind --tool=callgrind` twice per
# mode, at N and 2N messages, so that set-up and tear-down cancel: per round trip = (I(2N) - I(N)) / N
# for the write, send and read ping-pongs (2 B, both sides), per message and per KiB for the bw stream
# (64 KiB WRITEs, 128 in flight). It prints a table against the baseline, writes the figures as JSON
# (schema results/schema/instructions.json) and fails when a figure is more than PCT % (default 5) above
# its baseline.
#
#   --baseline FILE        the baseline (default .ci/instructions.json)
#   --json FILE            where the figures go (default results/instructions.json)
#   --max-regression PCT   how much higher a figure may be than its baseline (default 5)
#   --profile              also print each mode's 10 costliest functions per round trip (or message)
#   --update               rewrite the baseline with the figures measured (exit 0 unless the run fails)
#   --judge FIGURES.json   measure nothing: judge a figures file written earlier against the baseline
#
# The baseline records rustc, valgrind and the CPU that callgrind simulates (valgrind answers CPUID with
# a fixed model per feature class, the same on an AMD EPYC and an Intel Xeon, so run-time dispatch such as
# crc32fast's and glibc's memcpy takes the same path on both). A figure is compared whatever differs; a
# difference is printed beside the verdict, since a new compiler may move counts by itself.
# Exit status: 0 pass, 1 a figure regressed by more than PCT %, 2 set-up (valgrind or jq missing, no
# baseline, the example failed, bad arguments).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/env.sh
roceperf_env

# The ping-pongs at N and 2N round trips; the stream at N and 2N messages of 64 KiB (about 8 s in all
# per ping-pong mode and 10 s for the stream on a busy 2-core machine).
LAT_N=10000
BW_N=1000
BW_SIZE=65536

baseline=.ci/instructions.json
json=results/instructions.json
limit=5
profile=0
update=0
judge=
usage() { sed -n '6,21p' "$0" | sed 's/^# \{0,1\}//'; }
while (($#)); do
    case $1 in
        --baseline) baseline=${2:?--baseline needs a FILE}; shift ;;
        --json) json=${2:?--json needs a FILE}; shift ;;
        --max-regression) limit=${2:?--max-regression needs a percentage}; shift ;;
        --profile) profile=1 ;;
        --update) update=1 ;;
        --judge) judge=${2:?--judge needs a FIGURES.json}; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "instructions: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
    shift
done
limit=${limit%\%}
if ! [[ $limit =~ ^[0-9]+([.][0-9]+)?$ ]]; then
    echo "instructions: --max-regression takes a percentage such as 5 or 2.5, not '$limit'" >&2
    exit 2
fi
if [[ -n $judge && $update$profile != 00 ]]; then
    echo "instructions: --judge measures nothing: no --update or --profile with it" >&2
    exit 2
fi
command -v jq >/dev/null 2>&1 || {
    echo "instructions: jq is missing; scripts/deps.sh test installs it" >&2
    exit 2
}

# check_doc FILE WHAT: FILE is a figures document of this schema, or the script stops (exit 2).
check_doc() {
    if [[ ! -f $1 ]]; then
        if [[ $2 == baseline ]]; then
            echo "instructions: no baseline at $1: record one with scripts/instructions.sh --update (or name one with --baseline FILE)" >&2
        else
            echo "instructions: $2 $1 does not exist" >&2
        fi
        exit 2
    fi
    if ! jq -e '.schema == "roceperf.instructions" and .schema_version == 1 and (.figures | type) == "array"' \
        "$1" >/dev/null 2>&1; then
        echo "instructions: $2 $1 is not a roceperf.instructions document, version 1 (results/schema/instructions.json)" >&2
        exit 2
    fi
}

tmp=$(mktemp -d -t roceperf-instructions.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# ---------------------------------------------------------------- measure
if [[ -z $judge ]]; then
    command -v valgrind >/dev/null 2>&1 || {
        echo "instructions: valgrind is missing; scripts/deps.sh test installs it" >&2
        exit 2
    }
    [[ $update == 1 ]] || check_doc "$baseline" baseline
    start=$SECONDS
    cargo build --release --locked --example soft_datapath_cost --quiet
    example=${CARGO_TARGET_DIR:-target}/release/examples/soft_datapath_cost

    # The CPU as a program sees it: natively, and under valgrind (what the counted code paths chose).
    cat >"$tmp/cpu.rs" <<'EOF'
fn main() {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::__cpuid;
        #[allow(unused_unsafe)]
        let leaf = |l: u32| unsafe { __cpuid(l) };
        let text = |regs: &[u32]| {
            let b: Vec<u8> = regs.iter().flat_map(|r| r.to_le_bytes()).collect();
            String::from_utf8_lossy(&b).trim_matches(|c: char| c == '\0' || c == ' ').to_string()
        };
        let v = leaf(0);
        let mut brand = Vec::new();
        for l in 0x8000_0002u32..=0x8000_0004 {
            let r = leaf(l);
            brand.extend([r.eax, r.ebx, r.ecx, r.edx]);
        }
        let mut features = Vec::new();
        macro_rules! f { ($($n:tt),*) => { $(if is_x86_feature_detected!($n) { features.push($n) })* } }
        f!("sse4.1", "pclmulqdq", "avx", "avx2", "avx512f", "vpclmulqdq");
        println!("{} {}\t{}", text(&[v.ebx, v.edx, v.ecx]), text(&brand), features.join(" "));
    }
    #[cfg(not(target_arch = "x86_64"))]
    println!("{}\t", std::env::consts::ARCH);
}
EOF
    rustc --edition 2021 -O -A warnings -o "$tmp/cpu" "$tmp/cpu.rs"
    IFS=$'\t' read -r cpu_host _ < <("$tmp/cpu")
    IFS=$'\t' read -r cpu_seen cpu_features < <(valgrind -q "$tmp/cpu")

    # count MODE SIZE N: the instructions of one run (callgrind's total), its profile kept in $tmp.
    count() {
        local out=$tmp/$1.$3
        if ! SDC_UNTIMED=1 valgrind --tool=callgrind --callgrind-out-file="$out.cg" \
            "$example" "$1" "$3" "$2" >"$out.log" 2>&1; then
            echo "instructions: soft_datapath_cost $1 $3 $2 failed under callgrind:" >&2
            tail -n 20 "$out.log" >&2
            exit 2
        fi
        sed -n 's/^==[0-9]*== Collected : \([0-9]*\)$/\1/p' "$out.log"
    }
    runs=()
    figures=()
    for mode in write send read bw; do
        if [[ $mode == bw ]]; then n=$BW_N size=$BW_SIZE; else n=$LAT_N size=2; fi
        one=$(count "$mode" "$size" "$n")
        two=$(count "$mode" "$size" $((2 * n)))
        runs+=("$(jq -cn --arg m "$mode" --argjson s "$size" --argjson n "$n" --argjson a "$one" --argjson b "$two" \
            '{mode: $m, size: $s, messages: [$n, 2 * $n], instructions: [$a, $b]}')")
        if [[ $mode == bw ]]; then
            figures+=("$(jq -cn --arg m "$mode" --argjson s "$size" --argjson v "$(((two - one) * 10 / n))" \
                '{mode: $m, size: $s, unit: "message", instructions: ($v / 10)}')")
            figures+=("$(jq -cn --arg m "$mode" --argjson s "$size" --argjson v "$(((two - one) * 10240 / n / size))" \
                '{mode: $m, size: $s, unit: "KiB", instructions: ($v / 10)}')")
        else
            figures+=("$(jq -cn --arg m "$mode" --argjson s "$size" --argjson v "$(((two - one) * 10 / n))" \
                '{mode: $m, size: $s, unit: "round trip", instructions: ($v / 10)}')")
        fi
    done
    if commit=$(git rev-parse --short HEAD 2>/dev/null); then
        git diff --quiet HEAD 2>/dev/null || commit="$commit+changes"
    else
        commit=unknown   # not a git checkout
    fi
    mkdir -p "$(dirname "$json")"
    printf '%s\n' "${runs[@]}" | jq -s --slurpfile f <(printf '%s\n' "${figures[@]}") \
        --arg commit "$commit" --arg at "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
        --arg rustc "$(rustc --version)" --arg valgrind "$(valgrind --version)" \
        --arg host "$cpu_host" --arg seen "$cpu_seen" --arg features "$cpu_features" \
        '{schema: "roceperf.instructions", schema_version: 1, commit: $commit, measured_at: $at,
          rustc: $rustc, valgrind: $valgrind,
          cpu: {host: $host, simulated: $seen, features: ($features | split(" ") | map(select(. != "")))},
          figures: $f, runs: .}' >"$json.tmp"
    mv "$json.tmp" "$json"
    echo "instructions: counted in $((SECONDS - start)) s under callgrind; figures in $json"
    judge=$json

    # Each mode's costliest functions, from the difference of its two runs' profiles.
    if [[ $profile == 1 ]]; then
        command -v callgrind_annotate >/dev/null 2>&1 || {
            echo "instructions: callgrind_annotate is missing (valgrind's package ships it)" >&2
            exit 2
        }
        functions() { # functions FILE: "Ir<TAB>function" per function, all of them
            callgrind_annotate --threshold=100 --auto=no "$1" | awk '
                /^-+$/ { rule++ } rule >= 5 && /^ *[0-9,]+ / {
                    n = $1; gsub(",", "", n); sub(/^ *[0-9,]+ +(\([ 0-9.]+%\) +)?/, ""); sub(/ \[[^]]*\]$/, ""); sub(/^\?\?\?:/, "")
                    print n "\t" $0 }'
        }
        for mode in write send read bw; do
            if [[ $mode == bw ]]; then n=$BW_N unit=message; else n=$LAT_N unit="round trip"; fi
            echo
            echo "$mode: the 10 costliest functions per $unit (I(2N) - I(N)) / N, N = $n"
            awk -F'\t' -v n="$n" 'NR == FNR { one[$2] = $1; next } { d[$2] = $1 - one[$2] }
                END { for (f in d) printf "%10.1f  %s\n", d[f] / n, f }' \
                <(functions "$tmp/$mode.$n.cg") <(functions "$tmp/$mode.$((2 * n)).cg") | sort -rn | awk 'NR <= 10'
        done
    fi
fi

# ---------------------------------------------------------------- judge
check_doc "$judge" figures
if [[ $update == 1 ]]; then
    mkdir -p "$(dirname "$baseline")"
    cp "$judge" "$baseline"
    jq -r '.figures[] | "  \(.mode) \(.size) B: \(.instructions) instructions per \(.unit)"' "$baseline"
    echo "instructions: baseline $baseline rewritten; commit it with the change that moved the counts (docs/ci-gate.md says when that is legitimate)"
    exit 0
fi
check_doc "$baseline" baseline

# What the two documents were measured with, where it differs: printed, not judged.
notes=$(jq -r --slurpfile b "$baseline" '
    ($b[0]) as $b
    | [["rustc", .rustc, $b.rustc], ["valgrind", .valgrind, $b.valgrind],
       ["the CPU callgrind simulates", .cpu.simulated, $b.cpu.simulated],
       ["its features", (.cpu.features | join(" ")), ($b.cpu.features | join(" "))]]
    | .[] | select(.[1] != .[2])
    | "note: \(.[0]) differs: \(.[1]) here, \(.[2]) in the baseline"' "$judge")

jq -r '"instructions: \(.rustc), \(.valgrind), callgrind simulating \(.cpu.simulated) on \(.cpu.host) (\(.commit))"' "$judge"
# One row per figure: mode, size, unit, now, baseline ("-" when the baseline has none).
jq -r --slurpfile b "$baseline" '
    .figures[] as $f
    | [$f.mode, $f.size, $f.unit, $f.instructions,
       (first($b[0].figures[] | select(.mode == $f.mode and .size == $f.size and .unit == $f.unit)
              | .instructions) // "-")]
    | @tsv' "$judge" >"$tmp/rows"

status=0
awk -F'\t' -v limit="$limit" -v baseline="$baseline" '
    function group(x,    s, i, out) {   # 8083.2 -> 8,083.2
        s = sprintf("%.1f", x); i = index(s, ".")
        out = substr(s, i)
        s = substr(s, 1, i - 1)
        while (length(s) > 3) { out = "," substr(s, length(s) - 2) out; s = substr(s, 1, length(s) - 3) }
        return s out
    }
    BEGIN {
        printf "%-6s %-8s %-12s %14s %14s %9s %8s  %s\n", "mode", "size", "per", "instructions", "baseline", "change", "limit", "verdict"
    }
    {
        size = ($2 >= 1024 && $2 % 1024 == 0) ? ($2 / 1024 " KiB") : ($2 " B")
        if ($5 == "-") {
            printf "%-6s %-8s %-12s %14s %14s %9s %8s  %s\n", $1, size, $3, group($4), "-", "-", "+" limit "%", "NEW (no baseline)"
            next
        }
        matched++
        change = ($4 - $5) / $5 * 100
        verdict = change > limit ? "FAIL" : "PASS"
        printf "%-6s %-8s %-12s %14s %14s %+8.1f%% %8s  %s\n", $1, size, $3, group($4), group($5), change, "+" limit "%", verdict
        if (change > limit) {
            fails = fails sprintf("FAIL: %s %s: %s instructions per %s against %s in %s, %.1f%% more, above the limit of %s%%\n", $1, size, group($4), $3, group($5), baseline, change, limit)
            failed++
        } else if (change < -limit) {
            gains = gains sprintf("%s %s: %.1f%% fewer instructions per %s than the baseline: record the gain with --update so that the gate keeps it\n", $1, size, -change, $3)
        }
    }
    END {
        printf "%s%s", gains, fails
        if (!matched) { printf "instructions: %s shares no figure with these: a wrong baseline\n", baseline > "/dev/stderr"; exit 2 }
        if (failed) exit 1
    }' "$tmp/rows" || status=$?
[[ -n $notes ]] && printf '%s\n' "$notes"
if ((status == 1)); then
    [[ -n $notes ]] && echo "The tools or the simulated CPU differ from the baseline's: if the change above is theirs, not the code's, re-record it with --update (docs/ci-gate.md)."
    echo "What a failing mode spends per round trip (or message): scripts/instructions.sh --profile"
fi

exit "$status"
