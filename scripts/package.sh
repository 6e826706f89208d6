#!/usr/bin/env bash
# Builds roceperf's packages: a .deb (dpkg-deb) and an .rpm (rpmbuild), each holding every binary in
# /usr/bin, their man pages and bash/zsh/fish completions (generated from the clap definitions by
# examples/manual, so they say what --help says) and the docs; versioned from Cargo.toml, depending
# on the C library only, rdma-core's libibverbs recommended (docs/packaging.md).
#
#   scripts/package.sh [OUT_DIR]       (default: target/packages)
#
# Both packagers come from Debian's archive (dpkg, and rpm, which ships rpmbuild; scripts/deps.sh
# test installs them in seconds): a fresh CI machine cannot afford compiling cargo-deb and
# cargo-generate-rpm. The script stages one tree per package (the binaries stripped, the pages
# gzipped) and fills in packaging/control.in and packaging/roceperf.spec.in. The release binaries
# are built once (nothing to do when scripts/ci-gate.sh or cargo build --release built them); the
# generator in the dev profile.
# Exit: 0 built (the two package paths are printed last); 2 a tool or a build failed.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/env.sh
roceperf_env

target=${CARGO_TARGET_DIR:-target}
out=${1:-$target/packages}
die() { echo "package: $*" >&2; exit 2; }
for tool in dpkg-deb dpkg rpmbuild strip gzip md5sum; do
    command -v "$tool" >/dev/null || die "$tool is missing: run 'bash scripts/deps.sh test' (dpkg, rpm, binutils)"
done

cargo build --release --locked --quiet --bins || die "the release build failed"
# The generator in the dev profile: the tests have built its dev-dependencies there already.
cargo build --locked --quiet --example manual || die "examples/manual did not build"

meta=$(cargo metadata --no-deps --format-version 1 --locked)
field() { jq -r --arg f "$1" '.packages[] | select(.name == "roceperf") | .[$f] // empty' <<<"$meta"; }
version=$(field version) summary=$(field description)
[[ -n $version && -n $summary ]] || die "cannot read the version and description from Cargo.toml (cargo metadata)"
bins=$(jq -r '.packages[] | select(.name == "roceperf") | .targets[] | select(.kind == ["bin"]) | .name' <<<"$meta" | sort)

work=$target/package-work
rm -rf "$work"
mkdir -p "$work" "$out"
rm -f "$out"/roceperf_*.deb "$out"/roceperf-*.rpm
# Where scripts/package-test.sh reads them too.
manual=$target/release/manual
rm -rf "$manual"
"$target/debug/examples/manual" "$manual" >/dev/null || die "examples/manual could not write $manual"
gzip -9n "$manual"/man1/*.1   # -n: no name or time stamp inside, so a rebuild gives the same bytes

# stage ROOT ZSH_DIR: the installed tree under ROOT; only zsh's vendor directory differs by distro.
stage() {
    local root=$1 b
    install -d -m 755 "$root"/usr/bin "$root"/usr/share/man/man1 "$root"/usr/share/bash-completion/completions \
        "$root$2" "$root"/usr/share/fish/vendor_completions.d "$root"/usr/share/doc/roceperf/schema
    for b in $bins; do
        # As dh_strip does: no debug info or local symbols; panics still name their file and line.
        strip --strip-unneeded --remove-section=.comment -o "$root/usr/bin/$b" "$target/release/$b" ||
            die "strip $target/release/$b failed (was it built?)"
        chmod 755 "$root/usr/bin/$b"
    done
    install -m 644 "$manual"/man1/*.1.gz "$root"/usr/share/man/man1/
    install -m 644 "$manual"/bash/* "$root"/usr/share/bash-completion/completions/
    install -m 644 "$manual"/zsh/* "$root$2"/
    install -m 644 "$manual"/fish/* "$root"/usr/share/fish/vendor_completions.d/
    install -m 644 README.md docs/*.md "$root"/usr/share/doc/roceperf/
    install -m 644 results/schema/*.json "$root"/usr/share/doc/roceperf/schema/
}
# fill TEMPLATE NAME=VALUE...: the template with each @NAME@ replaced.
fill() {
    local text kv
    text=$(<"$1"); shift
    for kv in "$@"; do text=${text//@${kv%%=*}@/${kv#*=}}; done
    printf '%s\n' "$text"
}

# ---- .deb
deb_root=$work/deb
stage "$deb_root" /usr/share/zsh/vendor-completions
install -d -m 755 "$deb_root/DEBIAN"
(cd "$deb_root" && find usr -type f -print0 | sort -z | xargs -0 md5sum) >"$deb_root/DEBIAN/md5sums"
chmod 644 "$deb_root/DEBIAN/md5sums"
arch=$(dpkg --print-architecture)
size=$(du -sk --exclude=DEBIAN "$deb_root" | cut -f1)
fill packaging/control.in VERSION="$version" ARCH="$arch" INSTALLED_SIZE="$size" SUMMARY="$summary" \
    >"$deb_root/DEBIAN/control"
deb=$out/roceperf_$version-1_$arch.deb
dpkg-deb --build --root-owner-group -Zxz "$deb_root" "$deb" >/dev/null || die "dpkg-deb --build failed"

# ---- .rpm
rpm_root=$(realpath "$work")/rpm-stage
stage "$rpm_root" /usr/share/zsh/site-functions
top=$(realpath "$work")/rpmbuild
mkdir -p "$top"
fill packaging/roceperf.spec.in VERSION="$version" SUMMARY="$summary" STAGE="$rpm_root" >"$top/roceperf.spec"
rpmbuild --quiet -bb --define "_topdir $top" --define "_rpmdir $top/RPMS" "$top/roceperf.spec" \
    >"$work/rpmbuild.log" 2>&1 || die "rpmbuild failed: $(tail -n 20 "$work/rpmbuild.log")"
rpm_arch=$(rpm --eval '%{_arch}')
mv "$top/RPMS/$rpm_arch"/roceperf-"$version"-1."$rpm_arch".rpm "$out/"
rm -rf "$work"
echo "$deb"
echo "$(dirname "$deb")/roceperf-$version-1.$rpm_arch.rpm"
