#!/usr/bin/env bash
# Builds roceperf's packages: a .deb (cargo-deb) and an .rpm (cargo-generate-rpm), each holding every
# binary in /usr/bin, their man pages and bash/zsh/fish completions (generated from the clap
# definitions by examples/manual, so they say what --help says) and the docs; versioned from
# Cargo.toml, depending on the C library only, rdma-core's libibverbs recommended (docs/packaging.md).
#
#   scripts/package.sh [OUT_DIR]       (default: target/packages)
#
# The packagers are installed with `cargo install --locked` at the versions pinned below when
# ~/.cargo/bin lacks them (once: several minutes of compiling). The release binaries are built once
# (nothing to do when scripts/ci-gate.sh or cargo build --release built them); the generator in the
# dev profile.
# Exit: 0 built (the two package paths are printed last); 2 a packager or a build failed.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/env.sh
roceperf_env

CARGO_DEB_VERSION=3.8.0
CARGO_GENERATE_RPM_VERSION=0.21.1

target=${CARGO_TARGET_DIR:-target}
out=${1:-$target/packages}
die() { echo "package: $*" >&2; exit 2; }

# packager SUBCOMMAND CRATE VERSION: installs cargo-SUBCOMMAND at VERSION unless that one is there.
packager() {
    local have
    have=$(cargo "$1" --version 2>/dev/null || true)
    [[ $have == *" $3"* ]] && return 0
    echo "package: installing $2 $3 with cargo install (once; ${have:-none} found)" >&2
    cargo install --locked --quiet --version "$3" "$2" || die "cargo install $2 $3 failed; see above"
}
packager deb cargo-deb "$CARGO_DEB_VERSION"
packager generate-rpm cargo-generate-rpm "$CARGO_GENERATE_RPM_VERSION"

cargo build --release --locked --quiet --bins || die "the release build failed"
# The generator in the dev profile: the tests have built its dev-dependencies there already.
cargo build --locked --quiet --example manual || die "examples/manual did not build"

# The man pages and completions, where Cargo.toml's package metadata takes them from.
manual=$target/release/manual
rm -rf "$manual"
"$target/debug/examples/manual" "$manual" >/dev/null || die "examples/manual could not write $manual"
gzip -9n "$manual"/man1/*.1   # -n: no name or time stamp inside, so a rebuild gives the same bytes

mkdir -p "$out"
version=$(cargo metadata --no-deps --format-version 1 --locked |
    sed -n 's/.*"name":"roceperf","version":"\([^"]*\)".*/\1/p')
[[ -n $version ]] || die "cannot read the package version from Cargo.toml (cargo metadata)"
rm -f "$out"/roceperf_*.deb "$out"/roceperf-*.rpm
cargo deb --no-build --quiet --output "$out" >/dev/null || die "cargo deb failed"
cargo generate-rpm --target-dir "$target" --output "$out" >/dev/null || die "cargo generate-rpm failed"
deb=$(ls "$out"/roceperf_"$version"-*.deb)
rpm=$(ls "$out"/roceperf-"$version"-*.rpm)
echo "$deb"
echo "$rpm"
