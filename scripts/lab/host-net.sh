# Sourced by the scripts that run jobs in the rxe lab guest (interop-rxe.sh, perftest-oob-lab.sh,
# verbs-rxe.sh, perftest-trace.sh):
# the host side of the lab's network and its capture. Needs root.
#
#   lab_net_up NS PCAP FILTER   namespace NS with bridge br0 (10.9.0.1/24) and tap0 for the guest, and
#                               tcpdump on br0 writing PCAP (log next to it); removed again on exit
#   lab_capture_stop            ends the capture, so PCAP is complete before it is checked
#   lab_guest_ready             builds the guest into $LAB (host packages, then kernel + initramfs from
#                               Debian packages) unless it is there already

lab_net_down() {
    lab_capture_stop
    ip netns del "$LAB_NS" 2>/dev/null || true
}

lab_capture_stop() {
    if [ -n "${LAB_TDPID:-}" ]; then
        sleep 0.5
        kill -INT "$LAB_TDPID" 2>/dev/null && wait "$LAB_TDPID" 2>/dev/null || true
        LAB_TDPID=
    fi
}

lab_net_up() {
    LAB_NS=$1
    local pcap=$2 filter=$3
    trap lab_net_down EXIT
    ip netns del "$LAB_NS" 2>/dev/null || true
    ip netns add "$LAB_NS"
    ip -n "$LAB_NS" link set lo up
    ip -n "$LAB_NS" link add br0 type bridge
    ip -n "$LAB_NS" addr add 10.9.0.1/24 dev br0
    ip -n "$LAB_NS" tuntap add tap0 mode tap
    ip -n "$LAB_NS" link set tap0 master br0
    ip -n "$LAB_NS" link set tap0 up
    ip -n "$LAB_NS" link set br0 up
    ip netns exec "$LAB_NS" ethtool -K br0 tx off >/dev/null 2>&1 || true   # final checksums in the capture
    # The host's soft endpoint sends UDP GSO super-datagrams; a NIC without segmentation offload cuts
    # them into wire packets (IPv4 segment k with IP ID k) before they leave. br0 does the same with no
    # GSO allowed, so the capture and the guest see exactly the packets such a wire would carry.
    ip -n "$LAB_NS" link set br0 gso_max_segs 1
    # -B: a 64 MiB capture buffer; with the default 2 MiB the bandwidth bursts (up to 512 frames at
    # once) lost ~17 % of the frames on this busy 2-core host ("packets dropped by kernel" in
    # tcpdump.log), and the ICRC check only covers what was captured.
    ip netns exec "$LAB_NS" tcpdump -Z root --immediate-mode -B 65536 -i br0 -s 0 -U -w "$pcap" \
        "$filter" > "$(dirname "$pcap")/tcpdump.log" 2>&1 &
    LAB_TDPID=$!
    sleep 1
}

lab_guest_ready() {
    local here
    here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
    export LAB=${LAB:-/var/tmp/roceperf-rxelab}
    [ -f "$LAB/guest/initramfs.cpio.gz" ] && [ -f "$LAB/guest/vmlinuz" ] && return 0
    echo "lab: no guest in $LAB/guest yet; building it (host packages, then Debian's kernel and packages)" >&2
    bash "$here/rxelab.sh" deps && bash "$here/rxelab.sh" build
}
