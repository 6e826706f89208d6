#!/usr/bin/env bash
# Installs, only when missing, the system packages roceperf needs for a purpose, and checks the Rust
# toolchain (Debian and Ubuntu, x86_64 and arm64; as root, as a user with sudo, or under `sudo bash`):
#   build  cargo's C side, for the `verbs` feature's rdma-mummy-sys: a C compiler and the C library's
#          headers (gcc, libc6-dev), cmake with make, and a libclang that bindgen can load with clang's own
#          headers (libclang-dev); the CA certificates cargo's downloads need; a rustc new enough for
#          edition 2024 (1.85)
#   demo   build + iproute2 (roce_compare --local runs RoCE v1 across a veth pair between namespaces)
#   test   the test suite: build + rustfmt and clippy, g++ (the fuzz targets link libFuzzer), tshark
#          (independent RoCE decoder), iproute2 (network namespaces), tcpdump, ethtool (what -W's
#          SIOCETHTOOL reading is checked against), libibverbs1 (the verbs
#          tests check its error paths on this kernel), iptables (impairment without netem), setpriv,
#          openmpi-bin (roce_fabric under mpirun), slurmctld, slurmd, slurm-client and munge (roce_fabric
#          under srun, scripts/slurm.sh), valgrind and jq (scripts/instructions.sh: callgrind's counts, their JSON),
#          prometheus (its promtool checks every --metrics file; its server scrapes roce_fabric --watch)
#          man-db, mmdebstrap, rpm, rpm2cpio, cpio and binutils (scripts/package.sh: rpmbuild, strip;
#          scripts/package-test.sh: man -l, a clean Debian root, the .rpm read and unpacked, objdump -p)
#   bench  the benchmarks: test + iperf3, sockperf (the secondary baselines); bench.sh reads the JSON
#          results with test's jq
# Usage: scripts/deps.sh build|demo|test|bench
# Exit: 0 ready; 2 something this script cannot install (no root or sudo, no Rust or too old a Rust:
# it prints the command that gets one).
# For its own tests, every file-system path it looks at is under $DEPS_ROOT (default: /).
set -euo pipefail
here=${BASH_SOURCE[0]%/*}; [[ $here == "${BASH_SOURCE[0]}" ]] && here=.
. "$here/lib/env.sh"
roceperf_env

purpose=${1:-test}
case $purpose in
    build|demo|test|bench) ;;
    *) echo "deps: unknown purpose '$purpose'; use build, demo, test or bench" >&2; exit 2 ;;
esac
root=${DEPS_ROOT:-}
rust_min=1.85   # the first rustc with edition 2024 (Cargo.toml)

# Debian's multiarch triplet: where the C library and the shared libraries live.
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || true)
if [[ -z $multiarch ]]; then
    case $(uname -m) in
        x86_64) multiarch=x86_64-linux-gnu ;;
        aarch64|arm64) multiarch=aarch64-linux-gnu ;;
        *) multiarch=$(uname -m)-linux-gnu ;;
    esac
fi
libdirs=("$root/usr/lib/$multiarch" "$root/usr/lib64" "$root/usr/lib" "$root/usr/local/lib")

need=()
add() { [[ " ${need[*]} " == *" $1 "* ]] || need+=("$1"); }
want() { # want <command> <debian-package>
    command -v "$1" >/dev/null 2>&1 || add "$2"
}
exists() { # exists GLOB...: true when any of the patterns matches a file
    local f
    for f in "$@"; do [[ -e $f ]] && return 0; done
    return 1
}

# libclang as clang-sys (bindgen) loads it: libclang.so, libclang-N.so, libclang.so.M or libclang-N.so.M,
# never libclang-cpp (a different library, which llvm-N-dev and clang-format pull in and clang-sys skips),
# and clang's resource headers (stddef.h ...) for the same LLVM version, without which the header parse
# fails. libclang-dev brings both (libclang1-N and libclang-common-N-dev).
libclang_ok() {
    local f dir ver found=1
    shopt -s nullglob
    if [[ -n ${LIBCLANG_PATH:-} ]]; then   # the user's choice, as clang-sys honours it
        for f in "$LIBCLANG_PATH" "$LIBCLANG_PATH"/libclang{,-*}.so{,.*}; do
            [[ -f $f && $f != *-cpp.* ]] && found=0
        done
    fi
    for dir in "$root"/usr/lib/llvm-*; do
        ver=${dir##*/llvm-}
        exists "$dir"/lib/clang/*/include/stddef.h || continue
        for f in "$dir"/lib/libclang{,-*}.so{,.*} "$root/usr/lib/$multiarch"/libclang-"$ver".so{,.*}; do
            [[ -e $f && $f != *-cpp.* ]] && found=0
        done
    done
    # Unversioned layouts (no /usr/lib/llvm-N: other distributions, or a clang built into /usr/local).
    if exists "$root"/usr/lib/clang/*/include/stddef.h "$root"/usr/local/lib/clang/*/include/stddef.h; then
        for dir in "${libdirs[@]}"; do
            for f in "$dir"/libclang.so{,.*}; do [[ -e $f ]] && found=0; done
        done
    fi
    shopt -u nullglob
    return $found
}

want cc gcc
# gcc only recommends the C library's headers and start files; without them nothing links.
if ! [[ -e $root/usr/include/stdio.h ]] || ! exists "$root/usr/lib/$multiarch/crt1.o" "$root/usr/lib64/crt1.o"; then
    add libc6-dev
fi
want cmake cmake
want make make   # cmake only recommends it
# cargo fetches the crates over HTTPS and trusts the system's certificate store.
[[ -e $root/etc/ssl/certs/ca-certificates.crt ]] || add ca-certificates
libclang_ok || add libclang-dev
if [[ $purpose == demo ]]; then
    want ip iproute2
    # roce_compare --congestion turns the veths' offloads off so that the switch queues real frames.
    want ethtool ethtool
fi
if [[ $purpose == test || $purpose == bench ]]; then
    want c++ g++
    want tshark tshark
    want ip iproute2
    want tcpdump tcpdump
    # -W reads a netdev's statistics through SIOCETHTOOL; its test compares them with `ethtool -S`;
    # the congested link's topology (tests/it/switch.rs) turns the veths' offloads off with it.
    want ethtool ethtool
    # netns.sh's loss/duplication fallback on kernels without netem.
    want iptables-legacy iptables
    # The verbs tests need libibverbs present (they then hide it, or meet this kernel's missing RDMA).
    exists "$root/usr/lib/$multiarch/libibverbs.so.1" "$root/usr/lib64/libibverbs.so.1" || { add libibverbs1; add ibverbs-providers; }
    # The CAP_NET_RAW test drops to user nobody; Debian 13 and later ship setpriv on its own.
    if ! command -v setpriv >/dev/null 2>&1; then
        if apt-cache show setpriv >/dev/null 2>&1; then add setpriv; else add util-linux; fi
    fi
    # roce_fabric's launchers: Open MPI's mpirun and a single-node Slurm.
    want mpirun openmpi-bin
    want slurmctld slurmctld
    want slurmd slurmd
    want srun slurm-client
    want munged munge
    # The instruction-count gate (scripts/instructions.sh): callgrind counts, jq reads and writes the figures.
    want valgrind valgrind
    want jq jq
    # --metrics files checked by promtool, and roce_fabric --watch scraped by a real server: both in
    # Debian's prometheus package (started by the test itself, never through systemd).
    want promtool prometheus
    want prometheus prometheus
    # The packages' test (scripts/package-test.sh): man pages rendered, the .deb installed in a clean
    # root that mmdebstrap makes, the .rpm's metadata read and its files unpacked, the binaries' links;
    # scripts/package.sh builds with dpkg-deb (dpkg, essential), rpmbuild and strip.
    want man man-db
    want mmdebstrap mmdebstrap
    want rpm rpm
    want rpmbuild rpm
    want rpm2cpio rpm2cpio
    want cpio cpio
    want objdump binutils
    want strip binutils
fi
if [[ $purpose == bench ]]; then
    want iperf3 iperf3
    want sockperf sockperf
    want taskset util-linux
fi

if ((${#need[@]})); then
    echo "deps: installing ${need[*]}" >&2
    sudo=()
    if [[ $(id -u) != 0 ]]; then
        command -v sudo >/dev/null 2>&1 || { echo "deps: need root (or sudo) to apt-get install ${need[*]}" >&2; exit 2; }
        sudo=(sudo)
    fi
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# ---------------------------------------------------------------- Rust
get_rust="curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal --component rustfmt,clippy"
if ! command -v cargo >/dev/null 2>&1 || ! command -v rustc >/dev/null 2>&1; then
    echo "deps: no Rust toolchain (cargo, rustc) found${SUDO_USER:+ for $SUDO_USER or root}. Install one with rustup:" >&2
    echo "    $get_rust" >&2
    echo "then open a new shell (or: . \"\$HOME/.cargo/env\") and run this again." >&2
    exit 2
fi
version=$(rustc --version 2>/dev/null | { read -r _ v _; echo "${v:-0}"; })
IFS=.- read -r major minor _ <<<"$version"
IFS=. read -r min_major min_minor <<<"$rust_min"
if ((major < min_major || (major == min_major && ${minor:-0} < min_minor))); then
    echo "deps: rustc $version ($(command -v rustc)) is older than $rust_min, the first that builds edition 2024 (Cargo.toml)." >&2
    if command -v rustup >/dev/null 2>&1; then
        echo "    rustup update stable && rustup default stable" >&2
    else
        echo "Distribution packages of Rust are older; install a current toolchain with rustup:" >&2
        echo "    $get_rust" >&2
        echo "and make sure ~/.cargo/bin comes first on PATH." >&2
    fi
    exit 2
fi
if [[ $purpose == test || $purpose == bench ]]; then
    components=()
    cargo fmt --version >/dev/null 2>&1 || components+=(rustfmt)
    cargo clippy --version >/dev/null 2>&1 || components+=(clippy)
    if ((${#components[@]})); then
        if ! command -v rustup >/dev/null 2>&1; then
            echo "deps: cargo ${components[*]/rustfmt/fmt} missing and there is no rustup to add it; install the" \
                "distribution's ${components[*]/clippy/rust-clippy} packages, or Rust with rustup:" >&2
            echo "    $get_rust" >&2
            exit 2
        fi
        echo "deps: adding the Rust components ${components[*]}" >&2
        if [[ -n ${RUSTUP_HOME:-} && $(id -u) == 0 && -n ${SUDO_USER:-} ]]; then
            # The toolchain is the invoking user's: add to it as that user, so it stays theirs.
            sudo -u "$SUDO_USER" -H env PATH="$PATH" rustup component add "${components[@]}"
        else
            rustup component add "${components[@]}"
        fi
    fi
fi
