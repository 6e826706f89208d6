#!/usr/bin/env bash
# The packages' test, run by scripts/test.sh after the release build: builds them with package.sh, then
#   manual  every man page renders with `man -l` and lists exactly the long flags its binary's --help
#           lists; every bash completion loads, and completes a flag (roce_write_bw --dur: --duration)
#   deb     the binaries need only the C library (objdump -p: no libibverbs); the .deb installs with
#           dpkg -i into a clean Debian root (mmdebstrap --variant=minbase, plus man-db to read the
#           page), where a tcp pair and a soft pair run from /usr/bin and `man roce_write_bw` lists
#           what --help lists
#   rpm     the .rpm's metadata, requirements and file list (rpm -qip, -qp --requires, -qlp), and its
#           binaries, unpacked with rpm2cpio | cpio, run a tcp pair
#
#   scripts/package-test.sh [--keep-root]
#
# The clean root is made once and cached as a tarball in /var/cache/roceperf/ (about 3 minutes from
# Debian's mirror, 180 MB; ROCEPERF_DEBIAN_MIRROR overrides the mirror); each run unpacks a fresh copy under
# /tmp and removes it. Needs root (chroot, mounts): otherwise the test is skipped and listed by
# scripts/test.sh, or fails under ROCEPERF_STRICT=1 (CI).
# Exit: 0 pass; 1 a check failed; 2 the test could not run.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/env.sh
roceperf_env

target=${CARGO_TARGET_DIR:-target}
mirror=${ROCEPERF_DEBIAN_MIRROR:-http://deb.debian.org/debian}
cache=/var/cache/roceperf
fail() { echo "package-test: FAIL: $*" >&2; exit 1; }
die() { echo "package-test: cannot run: $*" >&2; exit 2; }

if [[ $(id -u) != 0 ]]; then
    reason="scripts/package-test.sh needs root (chroot and mounts for the clean root)"
    [[ ${ROCEPERF_STRICT:-} == 1 ]] && die "$reason, and ROCEPERF_STRICT=1 allows no skip"
    mkdir -p "$target/test-skips"
    echo "package-test: $reason" >"$target/test-skips/package-test.txt"
    echo "SKIPPED package-test: $reason" >&2
    exit 0
fi
for tool in man mmdebstrap rpm rpmbuild rpm2cpio cpio objdump dpkg-deb; do
    command -v "$tool" >/dev/null || die "$tool is missing: bash scripts/deps.sh test installs it"
done

start=$SECONDS
built=$(bash scripts/package.sh "$target/packages") || fail "scripts/package.sh could not build the packages (above)"
deb=$(realpath "$(sed -n 1p <<<"$built")") rpm=$(realpath "$(sed -n 2p <<<"$built")")
version=${deb##*/roceperf_}; version=${version%%-*}
echo "package-test: built $deb and $rpm in $((SECONDS - start)) s"

work=$(mktemp -d /tmp/roceperf-package-test.XXXXXX)
root=$work/root
unmount_root() {
    local m
    for m in dev sys proc; do
        if mountpoint -q "$root/$m" 2>/dev/null; then umount -l "$root/$m" || true; fi
    done
}
cleanup() {
    unmount_root
    # --one-file-system: a mount left behind is never recursed into.
    rm -rf --one-file-system "$work"
}
trap cleanup EXIT

# ------------------------------------------------------------------ flags
# The long flags an option list defines: clap's --help indents option lines by 2 (with a short flag)
# or 6, its prose (after_help) not at all, and option descriptions deeper. A man page indents tags
# and prose alike by 7, so only its option sections are read: every section (a line at column 0)
# but the prose ones, up to roce_gate's other inputs' sections.
help_flags() { sed -nE 's/^ {2,6}(-[A-Za-z0-9?], )?(--[A-Za-z0-9][A-Za-z0-9_-]*).*/\2/p' | sort -u; }
man_flags() {
    awk '/^WHEN A FILE IS A / { stop = 1 }
         /^[A-Z]/ { keep = $0 !~ /^(NAME|SYNOPSIS|DESCRIPTION|SUBCOMMANDS|NOTES|VERSION|SEE ALSO)$/ }
         keep && !stop' |
        sed -nE 's/^ {7}(-[A-Za-z0-9?], )?(--[A-Za-z0-9][A-Za-z0-9_-]*).*/\2/p' | sort -u
}
# same_flags WHAT HELP_TEXT MAN_TEXT: the two lists agree and are not empty.
same_flags() {
    local help man
    help=$(help_flags <<<"$2")
    man=$(man_flags <<<"$3")
    [[ -n $help ]] || fail "$1: --help lists no long flag"
    [[ $help == "$man" ]] || fail "$1: the man page's flags differ from --help's (< --help, > man):
$(diff <(echo "$help") <(echo "$man") | grep '^[<>]')"
}

# ------------------------------------------------------------------ manual
manual=$target/release/manual
pages=0
for page in "$manual"/man1/*.1.gz; do
    name=${page##*/}; name=${name%.1.gz}
    cmd=("$target/release/$name")
    if [[ $name == roce_ref-* ]]; then cmd=("$target/release/roce_ref" "${name#roce_ref-}"); fi
    rendered=$(MANWIDTH=200 man -l "$page" 2>"$work/man.err") || fail "man -l $page: $(cat "$work/man.err")"
    [[ -s $work/man.err ]] && fail "man -l $page warned: $(cat "$work/man.err")"
    same_flags "$name" "$("${cmd[@]}" --help)" "$rendered"
    pages=$((pages + 1))
done
completions=0
for file in "$manual"/bash/*; do
    name=${file##*/}
    bash -c 'source "$1" && complete -p "$2" >/dev/null' _ "$file" "$name" ||
        fail "$file does not load in bash or registers no completion for $name"
    completions=$((completions + 1))
done
# complete NAME WORD...: what the bash completion offers for the last word.
complete_words() {
    bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*";
             COMP_POINT=${#COMP_LINE}; fn=$(complete -p "$1" | sed -E "s/.* -F ([^ ]+) .*/\1/");
             "$fn" "$1" "${!#}" "${COMP_WORDS[COMP_CWORD - 1]}"; printf "%s\n" "${COMPREPLY[@]}"' \
        _ "$manual/bash/$1" "$@"
}
[[ $(complete_words roce_write_bw --dur) == --duration ]] ||
    fail "bash completion of 'roce_write_bw --dur' gave '$(complete_words roce_write_bw --dur)', not --duration"
# roce_gate's completion offers the flags of its other inputs too (fabric.json's, congestion.json's).
[[ $(complete_words roce_gate --min-j) == --min-jain ]] ||
    fail "bash completion of 'roce_gate --min-j' gave '$(complete_words roce_gate --min-j)', not --min-jain"
echo "package-test: manual: $pages man pages render with --help's flags; $completions bash completions load"

# ------------------------------------------------------------------ what the binaries link
listing=$(dpkg-deb -c "$deb")
mapfile -t bins < <(sed -nE 's|.* \./usr/bin/([^ ]+)$|\1|p' <<<"$listing")
((${#bins[@]} == 13)) || fail "the .deb holds ${#bins[@]} binaries, not 13: ${bins[*]}"
for b in "${bins[@]}"; do
    for f in "usr/share/man/man1/$b.1.gz" "usr/share/bash-completion/completions/$b" \
        "usr/share/zsh/vendor-completions/_$b" "usr/share/fish/vendor_completions.d/$b.fish"; do
        grep -q " \./$f\$" <<<"$listing" || fail "the .deb lacks /$f"
    done
    needed=$(objdump -p "$target/release/$b" | awk '$1 == "NEEDED" { print $2 }')
    other=$(grep -vE '^(libc\.so\.6|libm\.so\.6|libgcc_s\.so\.1|ld-linux[-.a-z0-9_]*\.so\.[0-9])$' <<<"$needed" || true)
    [[ -z $other ]] || fail "$b links more than the C library: $(echo $other)"
done
depends=$(dpkg-deb -f "$deb" Depends)
[[ $(tr ',' '\n' <<<"$depends" | sed -E 's/^ *([^ ]+).*/\1/' | grep -vxE 'libc6|libgcc-s1' || true) == "" ]] ||
    fail "the .deb depends on more than the C library: $depends"
[[ $(dpkg-deb -f "$deb" Recommends) == *libibverbs1* ]] || fail "the .deb does not recommend libibverbs1"
[[ $(dpkg-deb -f "$deb" Version) == "$version"-* ]] || fail "the .deb's version is not Cargo.toml's $version"

# ------------------------------------------------------------------ deb in a clean root
suite=bookworm
if [[ -r /etc/os-release ]] && . /etc/os-release && [[ ${ID:-} == debian && -n ${VERSION_CODENAME:-} ]]; then
    suite=$VERSION_CODENAME   # the binaries need this host's C library or a newer one
fi
tarball=$cache/debian-$suite-minbase-man-db.tar
if [[ ! -s $tarball ]]; then
    mkdir -p "$cache"
    echo "package-test: making the clean $suite root once ($mirror, cached as $tarball)"
    t=$SECONDS
    mmdebstrap --quiet --variant=minbase --include=man-db "$suite" "$cache/.partial.tar" "$mirror" </dev/null ||
        die "mmdebstrap could not make a $suite root from $mirror"
    mv "$cache/.partial.tar" "$tarball"
    echo "package-test: root made in $((SECONDS - t)) s"
fi
mkdir "$root"
tar -C "$root" -xf "$tarball"
mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
mount --bind /dev "$root/dev"   # alone, not --rbind: nothing is mounted under it, so nothing propagates
cp "$deb" "$root/tmp/roceperf.deb"
root_cmd=(chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8)
in_root() { "${root_cmd[@]}" "$@"; }
in_root dpkg -i /tmp/roceperf.deb >"$work/dpkg.log" 2>&1 || fail "dpkg -i in the clean root: $(cat "$work/dpkg.log")"
# The installed files against the package's md5sums (package.sh writes them; dpkg-deb does not).
verify=$(in_root dpkg --verify roceperf 2>&1) && [[ -z $verify ]] || fail "dpkg --verify roceperf in the clean root: $verify"
[[ -s $root/var/lib/dpkg/info/roceperf.md5sums ]] || fail "the .deb carries no md5sums"
for b in "${bins[@]}"; do
    missing=$(in_root ldd "/usr/bin/$b" | grep 'not found' || true)
    [[ -z $missing ]] || fail "/usr/bin/$b in the clean root: $missing"
done

# pair NAME RUN... -- ARGS: a server and a client of roce_write_bw (RUN prefixes the binary path),
# both must end 0 and the client must print its result row.
pair() {
    local name=$1 port; shift
    local run=() args=()
    while [[ $1 != -- ]]; do run+=("$1"); shift; done
    shift; args=("$@")
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null ||
        echo $((20000 + RANDOM % 20000)))
    timeout 90 "${run[@]}" "${args[@]}" -p "$port" >"$work/$name.server" 2>&1 &
    local server=$!
    if ! timeout 60 "${run[@]}" "${args[@]}" -p "$port" 127.0.0.1 >"$work/$name.client" 2>&1; then
        kill "$server" 2>/dev/null || true
        fail "$name pair: the client failed: $(cat "$work/$name.client")"
    fi
    wait "$server" || fail "$name pair: the server failed: $(cat "$work/$name.server")"
    grep -qE '^ *4096 +1000 ' "$work/$name.client" || fail "$name pair: no result row: $(cat "$work/$name.client")"
}
pair deb-tcp "${root_cmd[@]}" /usr/bin/roce_write_bw -- --transport tcp -s 4096 -n 1000
pair deb-soft "${root_cmd[@]}" /usr/bin/roce_write_bw -- -d lo --transport soft -s 4096 -n 1000
same_flags "man roce_write_bw in the clean root" "$(in_root /usr/bin/roce_write_bw --help)" \
    "$(in_root MANWIDTH=200 man roce_write_bw 2>/dev/null)"
echo "package-test: deb: installs in a clean $suite root (Depends: $depends); tcp and soft pairs ran; man matches --help"
unmount_root

# ------------------------------------------------------------------ rpm
info=$(rpm -qip "$rpm" 2>/dev/null)
grep -qE '^Name +: roceperf$' <<<"$info" || fail "rpm -qip: the name is not roceperf: $info"
grep -qE "^Version +: $version\$" <<<"$info" || fail "rpm -qip: the version is not Cargo.toml's $version: $info"
requires=$(rpm -qp --requires "$rpm" 2>/dev/null)
other=$(grep -vE '^(libc\.so\.6|libm\.so\.6|libgcc_s\.so\.1|ld-linux[-a-z0-9_.]*\.so\.[0-9])(\(|$)|^rpmlib\(|^rtld\(' <<<"$requires" || true)
[[ -z $other ]] || fail "the .rpm requires more than the C library: $(echo $other)"
rpm -qp --recommends "$rpm" 2>/dev/null | grep -q '^libibverbs' || fail "the .rpm does not recommend libibverbs"
files=$(rpm -qlp "$rpm" 2>/dev/null)
for b in "${bins[@]}"; do
    for f in "/usr/bin/$b" "/usr/share/man/man1/$b.1.gz" "/usr/share/bash-completion/completions/$b" \
        "/usr/share/zsh/site-functions/_$b" "/usr/share/fish/vendor_completions.d/$b.fish"; do
        grep -qx "$f" <<<"$files" || fail "the .rpm lacks $f"
    done
done
grep -qx /usr/share/doc/roceperf/README.md <<<"$files" || fail "the .rpm lacks the README"
mkdir "$work/rpm"
# Debian's rpm2cpio (4.18) exits 1 after writing a zstd payload whole: cpio's unpacking and the
# binaries' runs below are what show the payload is complete.
rpm2cpio "$rpm" >"$work/payload.cpio" || true
(cd "$work/rpm" && cpio -idm --quiet <"$work/payload.cpio") || fail "cpio could not unpack $rpm's payload"
for b in "${bins[@]}"; do
    "$work/rpm/usr/bin/$b" --version >/dev/null || fail "$b from the .rpm does not run"
done
pair rpm-tcp "$work/rpm/usr/bin/roce_write_bw" -- --transport tcp -s 4096 -n 1000
echo "package-test: rpm: metadata, requirements and $(wc -l <<<"$files") files checked; its binaries run a tcp pair"
echo "package-test: passed in $((SECONDS - start)) s"
