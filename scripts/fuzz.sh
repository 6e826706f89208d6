#!/usr/bin/env bash
# Runs one cargo-fuzz target for N seconds: scripts/fuzz.sh [TARGET] [SECONDS] [extra libFuzzer args]
# Targets: wire_frame (whole Ethernet frames), wire_ib (BTH and extension headers).
# Works on stable Rust: RUSTC_BOOTSTRAP=1 unlocks the nightly flags cargo-fuzz passes to rustc.
# The corpus is seeded from shared/vectors (the .hex frames and the rxe pcaps).
set -euo pipefail
target=${1:-wire_frame}
secs=${2:-60}
shift $(( $# > 2 ? 2 : $# ))
repo=$(cd "$(dirname "$0")/.." && pwd)
shared=${ROCEPERF_SHARED:-}
for cand in "$shared" "$repo/../shared" /work/shared; do
    if [ -n "$cand" ] && [ -d "$cand/vectors" ]; then shared=$cand; break; fi
done
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
corpus="$repo/fuzz/corpus/$target"
mkdir -p "$corpus"
if [ -d "$shared/vectors" ]; then
    python3 - "$shared/vectors" "$corpus" "$target" <<'PY'
import pathlib, struct, sys
vec, out, target = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
frames = [bytes.fromhex(p.read_text().strip()) for p in sorted(vec.glob("*.hex"))]
for p in sorted((vec / "rxe").glob("*.pcap")):
    d = p.read_bytes(); at = 24
    while at + 16 <= len(d):
        n = struct.unpack_from("<I", d, at + 8)[0]; frames.append(d[at + 16:at + 16 + n]); at += 16 + n
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
