#!/bin/bash
# Installs the host packages that build and boot the Soft-RoCE (rxe) lab guest, and that the scripts
# pairing this host with it use (tcpdump, tshark, ethtool, python3 for the ICRC check). The guest's own
# programs (rdma-core, perftest, iproute2 ...) are not installed here: 10-build-initramfs.sh downloads
# their packages. Debian or Ubuntu on x86_64, as root (or with sudo).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
sudo=(); [ "$(id -u)" = 0 ] || sudo=(sudo)
t0=$(date +%s.%N)
"${sudo[@]}" apt-get update -q
"${sudo[@]}" apt-get install -y -q --no-install-recommends \
    qemu-system-x86 \
    iproute2 tcpdump ethtool kmod cpio gzip python3 \
    tshark
t1=$(date +%s.%N)
awk -v a="$t0" -v b="$t1" 'BEGIN{printf "host-deps: %.1f s\n", b-a}'
