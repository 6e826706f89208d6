#!/usr/bin/env bash
# Runs one cargo-fuzz target for N seconds: scripts/fuzz.sh [TARGET] [SECONDS] [extra libFuzzer args]
#   scripts/fuzz.sh all [SECONDS]     each target in turn, SECONDS each (default 60)
#   scripts/fuzz.sh build             only builds every target (what scripts/test.sh does on stable)
# Targets: wire_frame (whole Ethernet frames), wire_ib (BTH and extension headers), responder (an RC
# queue pair fed arbitrary packets, checking guarded memory), oob_roceperf (our out-of-band dialect's
# hello and framed JSON messages), oob_perftest (a perftest-dialect session fed a hostile peer, and its
# block parsers), results_read (result files through roce_gate's and roce_compare --from's readers),
# impair_spec (the --impair parser and the spec it prints back).
# Works on stable Rust: RUSTC_BOOTSTRAP=1 unlocks the nightly flags cargo-fuzz passes to rustc.
# The corpus (fuzz/corpus/TARGET, not in git) is seeded from the repository's own data: the wire targets
# from tests/data/vectors (the .hex frames and the rxe pcaps), responder from fuzz/seeds/responder,
# oob_roceperf from messages the main crate's own encoder writes (its unit tests' shapes), oob_perftest
# from the recorded perftest traces (tests/data/perftest_oob, the peer's side), results_read from
# tests/data and results/schema (JSON and CSV), impair_spec from every --impair spec in tests and docs.
# A crash leaves its input in fuzz/artifacts/TARGET/ and ends this script with libFuzzer's exit status.
set -euo pipefail
target=${1:-wire_frame}
secs=${2:-60}
shift $(( $# > 2 ? 2 : $# ))
repo=$(cd "$(dirname "$0")/.." && pwd)
targets=(wire_frame wire_ib responder oob_roceperf oob_perftest results_read impair_spec)

if [[ $target == build ]]; then
    # The fuzz workspace on stable, without cargo-fuzz and without sanitizers: every target compiles
    # and links against libFuzzer. CI runs this so a change to the library cannot break the targets.
    # Not --locked: fuzz/Cargo.lock follows the main crate's dependencies, which cargo adds to it here.
    cargo build --manifest-path "$repo/fuzz/Cargo.toml" --target-dir "$repo/target/fuzz-check" --bins
    exit 0
fi
if [[ $target == all ]]; then
    for t in "${targets[@]}"; do bash "$0" "$t" "$secs" "$@"; done
    exit 0
fi
[[ " ${targets[*]} " == *" $target "* ]] || { echo "fuzz: unknown target '$target'; use ${targets[*]}, all or build" >&2; exit 2; }

command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
corpus="$repo/fuzz/corpus/$target"
mkdir -p "$corpus"
if [[ $target == responder ]]; then
    cp -n "$repo"/fuzz/seeds/responder/* "$corpus/"
elif [[ $target != wire_frame && $target != wire_ib ]]; then
    python3 "$repo/scripts/fuzz_seeds.py" "$repo" "$target" "$corpus"
else
    python3 - "$repo/tests/data/vectors" "$corpus" "$target" <<'PY'
import pathlib, struct, sys
vec, out, target = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
frames = [bytes.fromhex(p.read_text().strip()) for p in sorted(vec.glob("*.hex"))]
for p in sorted((vec / "rxe").glob("*.pcap")):
    d = p.read_bytes(); at = 24
    while at + 16 <= len(d):
        n = struct.unpack_from("<I", d, at + 8)[0]; frames.append(d[at + 16:at + 16 + n]); at += 16 + n
if not frames:
    sys.exit(f"fuzz: no seed frames in {vec}")
def ib(f):  # BTH..pad: skip Ethernet and the network header, drop the ICRC
    et = f[12:14]
    off = {b"\x89\x15": 14 + 40, b"\x08\x00": 14 + 28, b"\x86\xdd": 14 + 48}.get(et)
    return f[off:-4] if off else None
for i, f in enumerate(frames):
    seed = f if target == "wire_frame" else ib(f)
    if seed:
        (out / f"seed-{i:03}").write_bytes(seed[:2048])
PY
fi
cd "$repo/fuzz"
sanitizer=${FUZZ_SANITIZER:-address}
RUSTC_BOOTSTRAP=1 cargo fuzz run -s "$sanitizer" "$target" "$corpus" -- \
    -max_total_time="$secs" -max_len=4200 -print_final_stats=1 "$@"
