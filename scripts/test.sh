#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what it needs, then format, lint, build and every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh test

export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}
cargo fmt --all -- --check
cargo clippy --all-targets --locked -- -D warnings
# --tests: the library's unit tests and the integration-test crate (the binaries have none: Cargo.toml).
cargo test --tests --locked
cargo test --doc --locked
# The same-run performance gate: a release build, then about 20 s of runs judged by ratios within them.
bash scripts/ci-gate.sh
