#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what it needs, then format, lint, build and every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh test

export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}
cargo fmt --all -- --check
cargo clippy --all-targets --locked -- -D warnings
cargo test --all-targets --locked
cargo test --doc --locked
