#!/bin/bash
# Builds the Soft-RoCE guest from Debian packages: the distribution's kernel (linux-image-amd64, which
# ships rdma_rxe) and an initramfs holding busybox, rdma-core's libibverbs with the rxe provider,
# perftest, iproute2 (ip, rdma), tcpdump, ethtool and bash, with the kernel modules rdma_rxe needs
# (ib_core, ib_uverbs, udp_tunnel, ip6_udp_tunnel, crc32), virtio (pci, net, 9p) and veth.
#
# Every guest file comes from a package of the host's apt sources (apt-get download, dpkg-deb -x into a
# sysroot), not from what the host has installed: the host needs only apt, dpkg, kmod, cpio and gzip
# (00-host-deps.sh). The guest's libc is then the archive's, the same as a Debian host's, so binaries
# built on the host run in the guest (the scripts copy ours in). The package list and versions are
# written to the guest's /etc/lab-packages.txt.
#
# Output: $LAB/guest/vmlinuz, $LAB/guest/initramfs.cpio.gz (x86_64 guests).
set -euo pipefail
LAB=${LAB:-/var/tmp/roceperf-rxelab}
KPKG=${KPKG:-linux-image-amd64}          # metapackage; resolved to linux-image-6.1.0-NN-amd64
ARCH=amd64 TRIPLET=x86_64-linux-gnu
G=$LAB/guest
STAGE=$LAB/stage
ROOT=$STAGE/root
SYSROOT=$STAGE/sysroot
HERE=$(cd "$(dirname "$0")" && pwd)
t0=$(date +%s.%N)

# What the guest runs, by package; their dependencies are resolved by apt.
PKGS="busybox-static bash perftest libibverbs1 ibverbs-providers ibverbs-utils librdmacm1 iproute2 tcpdump
      ethtool kmod util-linux"
BINS="ib_write_bw ib_read_bw ib_send_bw ib_atomic_bw ib_write_lat ib_read_lat ib_send_lat ib_atomic_lat
      ibv_devices ibv_devinfo ibv_rc_pingpong ibv_ud_pingpong rdma ip tcpdump ethtool bash taskset"

mkdir -p "$G" "$STAGE/dl" "$STAGE/debs"
download() {   # download DIR PKG...: the candidate .deb of each package into DIR (cached)
    local dir=$1; shift
    ( cd "$dir" && apt-get download -q "$@" 2>&1 | grep -v -e unsandboxed -e '^Get:' || true )
}

# ---------------------------------------------------------------- kernel
KIMG=$(apt-cache depends "$KPKG" | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
[ -n "$KIMG" ] || { echo "cannot resolve kernel package from $KPKG (apt-get update?)" >&2; exit 1; }
KVER=${KIMG#linux-image-}
if [ ! -d "$STAGE/kroot/lib/modules/$KVER" ]; then
    ls "$STAGE"/dl/"$KIMG"_*.deb >/dev/null 2>&1 || download "$STAGE/dl" "$KIMG"
    rm -rf "$STAGE/kroot"; mkdir -p "$STAGE/kroot"
    dpkg-deb -x "$STAGE"/dl/"$KIMG"_*.deb "$STAGE/kroot"
fi
KROOT=$STAGE/kroot
cp "$KROOT/boot/vmlinuz-$KVER" "$G/vmlinuz"
echo "$KVER" > "$G/kver"
[ -f "$KROOT/lib/modules/$KVER/modules.dep" ] || depmod -b "$KROOT" "$KVER"

# ---------------------------------------------------------------- userspace packages into a sysroot
# Every package the list needs, recursively (Depends and Pre-Depends; <virtual> names dropped).
deps=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
        --no-replaces --no-enhances $PKGS 2>/dev/null | awk '/^[a-z0-9]/ {print $1}' | sort -u)
[ -n "$deps" ] || { echo "apt-cache knows none of: $PKGS (apt-get update?)" >&2; exit 1; }
missing=()
for p in $deps; do
    ls "$STAGE/debs/${p}"_*.deb >/dev/null 2>&1 || missing+=("$p")
done
((${#missing[@]} == 0)) || download "$STAGE/debs" "${missing[@]}"
rm -rf "$SYSROOT"; mkdir -p "$SYSROOT"
: > "$STAGE/packages.txt"
for p in $deps; do
    deb=$(ls "$STAGE/debs/${p}"_*.deb 2>/dev/null | sort -V | tail -1) || true
    [ -n "$deb" ] || { echo "no .deb downloaded for $p" >&2; exit 1; }
    dpkg-deb -x "$deb" "$SYSROOT"
    echo "$(dpkg-deb -f "$deb" Package) $(dpkg-deb -f "$deb" Version)" >> "$STAGE/packages.txt"
done
# Debian 12's packages still ship /bin, /lib ...; resolve both layouts below.
sys_resolve() {   # sys_resolve FILE: FILE with its symlinks followed inside the sysroot (absolute links too)
    local f=$1 t n=0
    while [ -L "$f" ] && [ $n -lt 20 ]; do
        t=$(readlink "$f")
        case $t in /*) f=$SYSROOT$t ;; *) f=$(dirname "$f")/$t ;; esac
        n=$((n + 1))
    done
    echo "$f"
}
sys_path() {   # sys_path NAME: the sysroot path of a command
    local d
    for d in usr/bin usr/sbin bin sbin; do
        [ -e "$SYSROOT/$d/$1" ] && { echo "$SYSROOT/$d/$1"; return 0; }
    done
    return 1
}
LOADER=
for f in "$SYSROOT"/lib64/ld-linux-x86-64.so.2 "$SYSROOT"/usr/lib64/ld-linux-x86-64.so.2 \
         "$SYSROOT"/lib/$TRIPLET/ld-linux-x86-64.so.2 "$SYSROOT"/usr/lib/$TRIPLET/ld-linux-x86-64.so.2; do
    f=$(sys_resolve "$f"); [ -f "$f" ] && { LOADER=$f; break; }
done
[ -n "$LOADER" ] || { echo "no dynamic loader in the sysroot (libc6 missing?)" >&2; exit 1; }
LIBPATH="$SYSROOT/lib/$TRIPLET:$SYSROOT/usr/lib/$TRIPLET:$SYSROOT/lib:$SYSROOT/usr/lib"

# ---------------------------------------------------------------- rootfs tree
rm -rf "$ROOT"
mkdir -p "$ROOT"/{bin,sbin,etc,proc,sys,dev,tmp,run,mnt,root,var/tmp,usr/bin,usr/sbin,lib64}
# usrmerge-like layout so /lib/x86_64-linux-gnu == /usr/lib/x86_64-linux-gnu
mkdir -p "$ROOT/usr/lib/$TRIPLET" "$ROOT/usr/lib/modules"
ln -s usr/lib "$ROOT/lib"

put() {   # put SYSROOT_FILE: copies it to the same place under /usr in the guest
    local f=$1 rel dst
    rel=${f#"$SYSROOT"/}; rel=${rel#usr/}
    dst=$ROOT/usr/$rel
    [ -e "$dst" ] && return 0
    mkdir -p "$(dirname "$dst")"; cp "$(sys_resolve "$f")" "$dst"
}
copy_with_libs() {   # copy_with_libs SYSROOT_ELF: the file and the shared libraries it needs
    local f=$1 lib
    put "$f"
    # The guest's own loader lists what the guest's libraries resolve to.
    "$LOADER" --library-path "$LIBPATH" --list "$f" 2>/dev/null | awk '/=> \//{print $3}' | while read -r lib; do
        case $lib in "$SYSROOT"/*) put "$lib" ;; *) echo "$f needs $lib from outside the sysroot" >&2; exit 1 ;; esac
    done
}

bb=$(sys_path busybox) || { echo "busybox missing from busybox-static" >&2; exit 1; }
cp "$(sys_resolve "$bb")" "$ROOT/bin/busybox"
for a in $("$ROOT/bin/busybox" --list); do
    [ -e "$ROOT/bin/$a" ] || ln -s busybox "$ROOT/bin/$a"
done
ln -sf ../bin/busybox "$ROOT/sbin/modprobe"   # the kernel's request_module() helper

for b in $BINS; do
    p=$(sys_path "$b") || { echo "no $b in the packages $PKGS" >&2; exit 1; }
    p=$(sys_resolve "$p")
    copy_with_libs "$p"
    rel=${p#"$SYSROOT"/}; rel=${rel#usr/}
    # reachable in PATH under its own name (/usr/bin, /usr/sbin come before busybox's /bin)
    [ -e "$ROOT/usr/bin/$b" ] || [ -e "$ROOT/usr/sbin/$b" ] || ln -sf "/usr/$rel" "$ROOT/usr/bin/$b"
done
cp -L "$LOADER" "$ROOT/lib64/"
# libibverbs' rxe provider (dlopen'ed, so the loader's list of the tools does not show it)
for f in "$SYSROOT"/usr/lib/$TRIPLET/libibverbs/librxe-*.so "$SYSROOT"/lib/$TRIPLET/libibverbs/librxe-*.so; do
    [ -e "$f" ] && copy_with_libs "$f"
done
ls "$ROOT"/usr/lib/$TRIPLET/libibverbs/librxe-*.so >/dev/null 2>&1 || { echo "no rxe provider in ibverbs-providers" >&2; exit 1; }
mkdir -p "$ROOT/etc/libibverbs.d"
cp "$SYSROOT/etc/libibverbs.d/rxe.driver" "$ROOT/etc/libibverbs.d/"

cat > "$ROOT/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
EOF
echo 'root:x:0:' > "$ROOT/etc/group"
printf '127.0.0.1 localhost\n' > "$ROOT/etc/hosts"
printf 'passwd: files\ngroup: files\nhosts: files\nservices: files\n' > "$ROOT/etc/nsswitch.conf"
for f in services protocols; do
    [ -e "$SYSROOT/etc/$f" ] && cp "$SYSROOT/etc/$f" "$ROOT/etc/"
done
cp "$STAGE/packages.txt" "$ROOT/etc/lab-packages.txt"

# ---------------------------------------------------------------- kernel modules
MODS="virtio_pci virtio_net veth 9p 9pnet_virtio crc32_generic crc32_pclmul rdma_rxe ib_uverbs rdma_ucm"
KMD=$KROOT/lib/modules/$KVER
DMD=$ROOT/usr/lib/modules/$KVER
mkdir -p "$DMD"
cp "$KMD"/modules.builtin* "$KMD"/modules.order "$DMD/"
for m in $MODS; do
    modprobe -d "$KROOT" -S "$KVER" --show-depends "$m" | awk '$1=="insmod"{print $2}' | while read -r ko; do
        rel=${ko#"$KMD"/}
        mkdir -p "$DMD/$(dirname "$rel")"; cp "$ko" "$DMD/$rel"
    done
done
depmod -b "$ROOT" "$KVER"

# ---------------------------------------------------------------- init
cp "$HERE/guest-init.sh" "$ROOT/init"
chmod 755 "$ROOT/init"

# ---------------------------------------------------------------- pack
( cd "$ROOT" && find . -print0 | cpio --null -o -H newc --quiet ) | gzip -1 > "$G/initramfs.cpio.gz"
t1=$(date +%s.%N)
du -sh "$ROOT" "$G/initramfs.cpio.gz" "$G/vmlinuz"
awk -v a="$t0" -v b="$t1" -v k="$KVER" -v n="$(wc -l < "$STAGE/packages.txt")" \
    'BEGIN{printf "build-initramfs: kernel %s, %d packages, %.1f s\n", k, n, b-a}'
