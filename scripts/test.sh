#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what it needs, then format, lint, build (the fuzz targets
# too) and every test. A test that cannot run on this machine (not root, a tool missing) records why in
# target/test-skips/; the list is printed at the end. ROCEPERF_STRICT=1 (CI) makes any skip a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/env.sh
roceperf_env
bash scripts/deps.sh test
roceperf_give_back target fuzz/Cargo.lock

skips=${CARGO_TARGET_DIR:-target}/test-skips
rm -rf "$skips"
report_skips() {
    local f n=0
    shopt -s nullglob
    for f in "$skips"/*.txt; do n=$((n + 1)); done
    if ((n)); then
        echo
        echo "test: $n test(s) skipped on this machine (run as root with scripts/deps.sh test's packages to run them):"
        for f in "$skips"/*.txt; do sed 's/^/  SKIPPED /' "$f"; done
    else
        echo "test: no test skipped"
    fi
}
trap 'report_skips; roceperf_chown_back' EXIT

export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}
cargo fmt --all -- --check
cargo clippy --all-targets --locked -- -D warnings
# The fuzz targets are their own workspace: built here (stable, no sanitizers) so that they keep compiling;
# scripts/fuzz.sh runs them.
bash scripts/fuzz.sh build
# --tests: the library's unit tests and the integration-test crate (the binaries have none: Cargo.toml).
# The many-rank fabric jobs (4 busy-polling ranks on this machine's cores) run apart, one at a time,
# so that they do not starve the timing-sensitive soft tests running beside them; so does the CI-sized
# congestion study, whose PFC run holds lossless only while no other test's busy-polling processes
# compete with its senders, switch and the kernel's delivery (docs/congestion.md, "The kernel's backlog
# is the cable": 23 headroom drops beside compare_local's runs, none alone). They run first: after the
# five minutes of the main run the study lost 140 and 537 frames where, run by hand, it lost none.
cargo test --test it --locked -- fabric_mpi fabric_slurm compare_congestion::a_short_study --test-threads=1
cargo test --tests --locked -- --skip fabric_mpi --skip fabric_slurm --skip compare_congestion::a_short_study
cargo test --doc --locked
# The same-run performance gate: a release build, then about 20 s of runs judged by ratios within them.
bash scripts/ci-gate.sh
# The instruction-count gate: the soft datapath's instructions under callgrind against .ci/instructions.json
# (about 30-40 s); counts do not move with the machine's load. Its figures stay in target/ (given back).
bash scripts/instructions.sh --json "${CARGO_TARGET_DIR:-target}/instructions.json"
# The packages (issue 31): the .deb and .rpm built with dpkg-deb and rpmbuild, the man pages and
# completions checked against --help, the .deb installed in a clean Debian root where a tcp and a soft
# pair run (about 1 minute warm; the root's first download about 3 minutes, cached after).
bash scripts/package-test.sh
