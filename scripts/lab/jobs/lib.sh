# helpers sourced by the guest jobs (bash)
up() { cut -d' ' -f1 /proc/uptime; }
log() { echo "job[$(up)]: $*"; }

# wait until something listens on TCP port $1 (perftest OOB port), max ~30 s;
# gives up early if process $2 (the server) has exited
wait_listen() {
    local hex; hex=$(printf '%04X' "$1")
    for _ in $(seq 1 300); do
        grep -q ":$hex 00000000:0000 0A" /proc/net/tcp /proc/net/tcp6 2>/dev/null && return 0
        [ -n "${2:-}" ] && ! kill -0 "$2" 2>/dev/null && return 1
        sleep 0.1
    done
    return 1
}

# rxe0 on veth0 (10.0.0.1), rxe1 on veth1 (10.0.0.2), both in the initial net namespace (rxe in
# other namespaces not tried). Both addresses are local to this one kernel, so:
#  - accept_local=1 / rp_filter=0: veth1 must accept frames whose source address is local. Seen
#    without this and without the rules below: rxe0's packets left on veth0 but nothing came back,
#    rxe0's completer_retry_err counter grew and ib_write_bw hung.
#  - policy rules (local table moved to pref 100): locally generated traffic to the other address
#    leaves through the veth instead of lo, so the perftest TCP exchange (port 18515) crosses the
#    veth too and one capture on veth0 holds both it and the RoCEv2 frames.
setup_veth_rxe() {
    local mtu=${1:-1500}
    modprobe rdma_rxe
    ip link add veth0 type veth peer name veth1
    ip link set veth0 mtu "$mtu"; ip link set veth1 mtu "$mtu"
    ip addr add 10.0.0.1/24 dev veth0
    ip addr add 10.0.0.2/24 dev veth1
    # no checksum offload: frames captured on the veth then carry final checksums
    ethtool -K veth0 tx off rx off >/dev/null 2>&1 || true
    ethtool -K veth1 tx off rx off >/dev/null 2>&1 || true
    ip link set veth0 up; ip link set veth1 up
    for i in all default veth0 veth1; do
        echo 1 > /proc/sys/net/ipv4/conf/$i/accept_local
        echo 0 > /proc/sys/net/ipv4/conf/$i/rp_filter
    done
    ip rule add pref 10 iif lo to 10.0.0.2 table 10
    ip rule add pref 11 iif lo to 10.0.0.1 table 11
    ip route add 10.0.0.2 dev veth0 src 10.0.0.1 table 10
    ip route add 10.0.0.1 dev veth1 src 10.0.0.2 table 11
    ip rule add pref 100 table local
    ip rule del pref 0 table local
    ip neigh replace 10.0.0.2 lladdr "$(cat /sys/class/net/veth1/address)" dev veth0 nud permanent
    ip neigh replace 10.0.0.1 lladdr "$(cat /sys/class/net/veth0/address)" dev veth1 nud permanent
    rdma link add rxe0 type rxe netdev veth0
    rdma link add rxe1 type rxe netdev veth1
}

show_gids() {   # one line per non-zero GID: dev index gid type ndev
    local d f i
    for d in /sys/class/infiniband/*; do
        for f in $(grep -l -v '^0000:0000:0000:0000:0000:0000:0000:0000$' $d/ports/1/gids/* 2>/dev/null); do
            i=${f##*/}
            echo "$(basename $d) port1 gid[$i] $(<$f) type=\"$(<$d/ports/1/gid_attrs/types/$i)\" ndev=$(<$d/ports/1/gid_attrs/ndevs/$i)"
        done
    done
}

# run_pair NAME SERVER_CMD CLIENT_CMD: server in background, client in foreground.
# With >=2 vCPUs the server is pinned to CPU 1 and the client to CPU 0 (perftest times with
# rdtsc; a process migrating between vCPUs whose TSCs disagree gets garbage, e.g. 0.00 MB/s).
run_pair() {
    local name=$1 srv=$2 cli=$3 t0 t1 ps="" pc=""
    if [ "$(nproc)" -ge 2 ] && [ -z "${NOPIN:-}" ]; then ps="taskset -c 1"; pc="taskset -c 0"; fi
    log "== $name"
    echo "server: $ps $srv"; echo "client: $pc $cli"
    t0=$(up)
    $ps timeout 300 $srv > /tmp/$name.srv 2>&1 &
    local spid=$!
    case " $srv " in
        *" -R "*) sleep 3 ;;      # rdma_cm: nothing listens on TCP; give the server time
        *) wait_listen 18515 $spid || log "server did not listen" ;;
    esac
    $pc timeout 300 $cli > /tmp/$name.cli 2>&1; local crc=$?
    wait $spid; local src=$?
    t1=$(up)
    echo "--- server output (rc=$src)"; cat /tmp/$name.srv
    echo "--- client output (rc=$crc)"; cat /tmp/$name.cli
    awk -v a="$t0" -v b="$t1" -v n="$name" 'BEGIN{printf "TIME %s %.2f s\n", n, b-a}'
}

# capture_pair FILTER NAME TOOL "ARGS": run_pair of perftest's TOOL, server on rxe1, client on rxe0 (to
# 10.0.0.2), with tcpdump on veth0 keeping what matches FILTER in /mnt/pcap/NAME.pcap.
capture_pair() {
    local filter=$1 name=$2 tool=$3 args=$4 td
    local S="-d rxe1 -x 1" C="-d rxe0 -x 1"
    tcpdump -Z root --immediate-mode -i veth0 -s 0 -U -w /tmp/$name.pcap "$filter" > /tmp/$name.tcpdump 2>&1 &
    td=$!
    sleep 0.5
    run_pair $name "$tool $S $args" "$tool $C $args 10.0.0.2"
    sleep 1
    kill -INT $td; wait $td
    grep -v listening /tmp/$name.tcpdump
    # tcpdump drops what is still queued in the kernel when stopped: flag an incomplete pcap
    awk '/packets captured/{c=$1} /received by filter/{r=$1} END{if (c!=r) print "CAPTURE INCOMPLETE: " c " of " r}' /tmp/$name.tcpdump
    mkdir -p /mnt/pcap
    cp /tmp/$name.pcap /mnt/pcap/
}

# --- for the jobs of scripts/interop-rxe.sh and scripts/perftest-oob-lab.sh: one guest on the host's bridge

# rxe_up: kernel Soft-RoCE on eth0 (10.9.0.2/24): rxe0, GID index 1 = ::ffff:10.9.0.2, RoCE v2.
rxe_up() {
    modprobe rdma_rxe
    ip addr add 10.9.0.2/24 dev eth0
    ethtool -K eth0 tx off >/dev/null 2>&1 || true
    ip link set eth0 up
    rdma link add rxe0 type rxe netdev eth0
    log "rxe up"
    show_gids
}

# connect_retry CMD...: run a client until its TCP connect succeeds (the host side may not listen yet);
# prints its output and returns its exit code.
connect_retry() {
    local try rc
    for try in $(seq 1 300); do
        "$@" > /tmp/cli.out 2>&1; rc=$?
        grep -qi "couldn't connect\|connection refused\|unable to init the socket\|unable to open file descriptor" /tmp/cli.out || break
        sleep 0.3
    done
    cat /tmp/cli.out; return $rc
}
