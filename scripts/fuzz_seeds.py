#!/usr/bin/env python3
"""Seeds a fuzz corpus from the repository's own data: scripts/fuzz_seeds.py REPO TARGET CORPUS.

oob_roceperf: our hello and framed messages; oob_perftest: each recorded perftest trace's peer side,
after the four configuration bytes the target reads (test, flags, queue pairs, size); results_read:
the result files in tests/data and results/schema, after the byte that picks the file's name;
impair_spec: every --impair spec written in tests, scripts and docs.
"""
import json, pathlib, re, struct, sys

repo, target, out = pathlib.Path(sys.argv[1]), sys.argv[2], pathlib.Path(sys.argv[3])
seeds = []
if target == "oob_roceperf":
    def frame(kind, body):
        j = json.dumps({"kind": kind, "body": body}, separators=(",", ":")).encode()
        return struct.pack(">I", len(j)) + j
    hello = b"roceperf" + struct.pack(">H", 3) + b"\0\0"
    msgs = [frame("barrier", 0), frame("barrier", 2**64 - 1), frame("results", None),
            frame("abort", {"reason": "no device", "failure": "setup"}),
            frame("conn", {"qps": []}), frame("params", {"test": "write_bw"})]
    seeds = [hello + m for m in msgs] + [hello + b"".join(msgs), b"6.27" + bytes(12)]
elif target == "oob_perftest":
    tests = ["send_bw", "write_bw", "read_bw", "send_lat", "write_lat", "read_lat"]
    sizes = {"2B": 0, "64B": 1, "3000B": 2, "4096B": 3}
    for p in sorted((repo / "tests/data/perftest_oob").glob("*.trace")):
        name = p.stem.removeprefix("stub_client_vs_ib_").removesuffix("_server")
        test = next((i for i, t in enumerate(tests) if name.startswith(t)), None)
        if test is None:
            continue
        lines = [l.split(" ", 1) for l in p.read_text().splitlines() if l.strip()]
        flags = (2 if "_all" in name else 0) | (4 if "bidir" in name else 0)
        qps = 1 if "2qp" in name else 0
        size = next((v for k, v in sizes.items() if f"_{k}" in name), 4)
        for client in (0, 1):
            peer = "s2c" if client else "c2s"
            body = b"".join(bytes.fromhex(h) for d, h in lines if d == peer)
            seeds.append(bytes([test, flags | client, qps, size]) + body)
elif target == "results_read":
    files = [p for p in sorted((repo / "tests/data").rglob("*")) if p.suffix in (".json", ".csv")]
    files += sorted((repo / "results/schema").glob("*.json"))
    for p in files:
        data = p.read_bytes()
        if len(data) <= 64 << 10:
            seeds.append(bytes([1 if p.suffix == ".json" else 2]) + data)
            seeds.append(bytes([0]) + data)
elif target == "impair_spec":
    found = set()
    for base in ("tests", "scripts", "docs", "src"):
        for p in (repo / base).rglob("*"):
            if p.is_file() and p.suffix in (".rs", ".sh", ".md"):
                found.update(re.findall(r"(?:--impair[= ]|ROCEPERF_IMPAIR=)['\"]?([a-z_:=0-9.%,]+=[a-z_:=0-9.%,]+)",
                                        p.read_text(errors="replace")))
    seeds = [s.encode() for s in sorted(found)]
else:
    sys.exit(f"fuzz_seeds: no seeds for {target}")
if not seeds:
    sys.exit(f"fuzz_seeds: no seeds found for {target} in {repo}")
out.mkdir(parents=True, exist_ok=True)
for i, s in enumerate(seeds):
    (out / f"seed-{i:03}").write_bytes(s)
print(f"fuzz_seeds: {len(seeds)} seeds for {target}")
