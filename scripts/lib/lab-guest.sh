# Appended to the lab's jobs/lib.sh for the guest jobs of interop-rxe.sh and perftest-oob-lab.sh.

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
