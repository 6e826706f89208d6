#!/bin/bash
# Pair our perftest-dialect stub (tests/it/perftest_oob_stub.rs, `lab_stub`: out-of-band only, fake QP keys)
# on the host with REAL perftest in the rxe lab guest, over a bridge in a private network namespace, for
# the six tests in both roles. Proves that our barrier tables pair with real perftest: the real peer
# fails on the data path (nothing answers our fake QP), so the judgement is the OOB steps up to the run
# (and the whole exchange where perftest's side needs no data path: write_bw, read_bw and read_lat
# servers).
#   scripts/perftest-oob-lab.sh [OUTDIR]        (default /tmp/roceperf-perftest-oob-lab)
# Host: netns rxelab-oob, br0 10.9.0.1/24, tap0. Guest: eth0 10.9.0.2, rxe0 on eth0, GID index 1.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
LABDIR=$REPO/scripts/lab
OUT=$(mkdir -p "${1:-/tmp/roceperf-perftest-oob-lab}" && cd "${1:-/tmp/roceperf-perftest-oob-lab}" && pwd)
NS=rxelab-oob
TESTS=${TESTS:-"write_bw read_bw send_bw write_lat read_lat send_lat"}
SIZE=${SIZE:-64}; ITERS=${ITERS:-5}
PT_TIMEOUT=${PT_TIMEOUT:-30}   # perftest waits for RDMA traffic from our fake QP forever: cut it off

. "$LABDIR/host-net.sh"
lab_guest_ready
# the stub: an ignored test (perftest_oob_stub::lab_stub) in the integration-test binary
BIN=$(cd "$REPO" && cargo test --test it --no-run --message-format=json 2>/dev/null |
      sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -1)
[ -x "$BIN" ] || { echo "could not build the stub test binary" >&2; exit 2; }

lab_net_up $NS "$OUT/oob_lab.pcap" 'tcp port 18515 or udp port 4791'

mkdir -p "$OUT/job"
cp "$LABDIR/jobs/lib.sh" "$OUT/job/lib.sh"   # rxe_up, connect_retry, log
cat > "$OUT/job/oob.sh" <<'JOB'
# guest: real perftest on rxe0 (eth0 10.9.0.2); per test: server first (our stub is the client), then
# client (our stub is the server on 10.9.0.1).
. /mnt/lib.sh
log start
rxe_up
ib_write_bw --version
for t in ${TESTS//,/ }; do
    args="-d rxe0 -x 1 -F -s $SIZE -n $ITERS"
    log "== perftest server: ib_$t $args"
    timeout $PT_TIMEOUT ib_$t $args > /tmp/srv.out 2>&1; rc=$?
    cat /tmp/srv.out; log "PERFTEST RESULT $t server rc=$rc"
    log "== perftest client: ib_$t $args 10.9.0.1"
    connect_retry timeout $PT_TIMEOUT ib_$t $args 10.9.0.1; rc=$?
    log "PERFTEST RESULT $t client rc=$rc"
done
log end
JOB

JOB_ENV="TESTS=${TESTS// /,} SIZE=$SIZE ITERS=$ITERS PT_TIMEOUT=$PT_TIMEOUT" SMP=1 \
QEMU_EXTRA="-netdev tap,id=n0,ifname=tap0,script=no,downscript=no -device virtio-net-pci,netdev=n0,mac=52:54:00:00:09:02" \
    ip netns exec $NS bash "$LABDIR/20-run-vm.sh" "$OUT/job/oob.sh" "$OUT/guest" 1200 > "$OUT/guest.run.log" 2>&1 &
VMPID=$!

: > "$OUT/host.log"
for t in $TESTS; do
    for role in client server; do
        addr=10.9.0.2:18515; [ $role = server ] && addr=10.9.0.1:18515
        echo "== stub $t $role ($addr)" >> "$OUT/host.log"
        STUB_ROLE=$role STUB_TEST=$t STUB_ADDR=$addr STUB_GID_IP=10.9.0.1 STUB_SIZE=$SIZE STUB_ITERS=$ITERS \
        STUB_RUN_TIMEOUT_S=${STUB_RUN_TIMEOUT_S:-20} \
            timeout 200 ip netns exec $NS "$BIN" --ignored --exact perftest_oob_stub::lab_stub --nocapture >> "$OUT/host.log" 2>&1 || true
    done
done
wait $VMPID || true
lab_capture_stop
grep -E 'STUB RESULT' "$OUT/host.log" || true
grep -E 'PERFTEST RESULT' "$OUT/guest/job.log" || true
