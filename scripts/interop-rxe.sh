#!/bin/bash
# Interop with kernel Soft-RoCE (issue 8), unattended, from a clean checkout:
#   scripts/interop-rxe.sh [OUTDIR]            (default /tmp/roceperf-interop-rxe; exit 0 = all passed)
# What it runs (host = this machine in netns rxelab-interop, br0 10.9.0.1/24; guest = the rxe lab VM,
# eth0 10.9.0.2, rxe0 on eth0, GID index 1 = ::ffff:10.9.0.2, RoCE v2):
#   A. roceperf vs roceperf: for each of the six tests, both host roles, with --validate:
#        guest: roce_<test> --transport verbs -d rxe0 -x 1 ...         (libibverbs + rxe provider)
#        host:  roce_<test> --transport soft --roce v2 $HOST_SOFT_ARGS ... (our userspace RoCE on br0)
#   B. roceperf vs real perftest (--oob perftest): for each test, both host roles:
#        guest: ib_<test> -d rxe0 -x 1 -F                               (Debian perftest 6.06)
#        host:  roce_<test> --oob perftest --transport soft --roce v2 $HOST_SOFT_ARGS
#      and the two sides' figures are compared (BW average / t_typical within FIG_TOL %).
#   C. the capture of br0 (RoCE v2 + TCP 18515) is checked frame by frame for ICRC
#      (../shared/lab/rxe/30-verify-icrc.py) and decoded with tshark (summary + verbose) into OUTDIR.
# Pass/fail per run lands in OUTDIR/results.txt ("PASS|FAIL phase test host-role detail").
# Needs: the lab guest (bash ../shared/lab/rxe/rxelab.sh deps && bash ../shared/lab/rxe/rxelab.sh build),
# root (netns, tap), and the six roce_* binaries (built here with cargo build --release --bins).
# Knobs: TESTS, SIZE, ITERS, HOST_SOFT_ARGS (how the soft transport finds br0), PHASES ("A B").
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
LABDIR=${LABDIR:-$(cd "$REPO/../shared/lab/rxe" 2>/dev/null && pwd || echo /work/shared/lab/rxe)}
OUT=$(mkdir -p "${1:-/tmp/roceperf-interop-rxe}" && cd "${1:-/tmp/roceperf-interop-rxe}" && pwd)
NS=rxelab-interop
TESTS=${TESTS:-"write_bw read_bw send_bw write_lat read_lat send_lat"}
PHASES=${PHASES:-"A B"}
SIZE=${SIZE:-4096}; ITERS=${ITERS:-200}
HOST_SOFT_ARGS=${HOST_SOFT_ARGS:-"--transport soft --roce v2 -d br0"}

[ -f "${LAB:-/var/tmp/roceperf-rxelab}/guest/initramfs.cpio.gz" ] || {
    bash "$LABDIR/rxelab.sh" deps && bash "$LABDIR/rxelab.sh" build; }
(cd "$REPO" && cargo build --release --bins)
mkdir -p "$OUT/guest"
for t in $TESTS; do
    b="$REPO/target/release/roce_$t"
    [ -x "$b" ] || { echo "interop-rxe: $b missing: the roce_* binaries are not built yet" >&2; exit 2; }
    cp "$b" "$OUT/guest/"          # the guest shares the host's glibc; it runs /mnt/roce_<test>
done
# The guest image carries only what perftest needs; our binaries also want libgcc_s (unwinding).
mkdir -p "$OUT/guest/lib"
for f in "$OUT"/guest/roce_*; do
    ldd "$f" | awk '/=> \//{print $3}' | grep -E 'libgcc_s|libstdc' | xargs -r cp -L -t "$OUT/guest/lib/"
done

cleanup() {
    [ -n "${TDPID:-}" ] && kill -INT "$TDPID" 2>/dev/null && wait "$TDPID" 2>/dev/null
    ip netns del $NS 2>/dev/null || true
}
trap cleanup EXIT
ip netns del $NS 2>/dev/null || true
ip netns add $NS
ip -n $NS link set lo up
ip -n $NS link add br0 type bridge
ip -n $NS addr add 10.9.0.1/24 dev br0
ip -n $NS tuntap add tap0 mode tap
ip -n $NS link set tap0 master br0
ip -n $NS link set tap0 up
ip -n $NS link set br0 up
ip netns exec $NS ethtool -K br0 tx off >/dev/null 2>&1 || true   # final checksums in the capture
ip netns exec $NS tcpdump -Z root --immediate-mode -i br0 -s 0 -U -w "$OUT/interop.pcap" \
    'udp port 4791 or tcp port 18515' > "$OUT/tcpdump.log" 2>&1 &
TDPID=$!
sleep 1

mkdir -p "$OUT/job"
cp "$LABDIR/jobs/lib.sh" "$OUT/job/lib.sh"
cat > "$OUT/job/interop.sh" <<'JOB'
# guest: per phase, per test: first the guest serves (host is client), then the guest is client.
. /mnt/lib.sh
export LD_LIBRARY_PATH=/mnt/lib   # libgcc_s staged by interop-rxe.sh
log start
modprobe rdma_rxe
ip addr add 10.9.0.2/24 dev eth0
ethtool -K eth0 tx off >/dev/null 2>&1 || true
ip link set eth0 up
rdma link add rxe0 type rxe netdev eth0
log "rxe up"; show_gids
connect_retry() {   # run a client until its TCP connect succeeds (the host side may not listen yet)
    for try in $(seq 1 300); do
        timeout 120 "$@" > /tmp/cli.out 2>&1; rc=$?
        grep -qi "couldn't connect\|connection refused\|unable to init the socket" /tmp/cli.out || break
        sleep 0.3
    done
    cat /tmp/cli.out; return $rc
}
for phase in ${PHASES//,/ }; do
  for t in ${TESTS//,/ }; do
    case $phase in
      A) cmd="/mnt/roce_$t --transport verbs -d rxe0 -x 1 --validate -s $SIZE -n $ITERS" ;;
      B) cmd="ib_$t -d rxe0 -x 1 -F -s $SIZE -n $ITERS" ;;
    esac
    log "== $phase $t guest server: $cmd"
    timeout 120 $cmd; log "GUEST RESULT $phase $t server rc=$?"
    log "== $phase $t guest client: $cmd 10.9.0.1"
    connect_retry $cmd 10.9.0.1; log "GUEST RESULT $phase $t client rc=$?"
  done
done
log end
JOB
JOB_ENV="TESTS=${TESTS// /,} PHASES=${PHASES// /,} SIZE=$SIZE ITERS=$ITERS" SMP=2 \
QEMU_EXTRA="-netdev tap,id=n0,ifname=tap0,script=no,downscript=no -device virtio-net-pci,netdev=n0,mac=52:54:00:00:09:02" \
    ip netns exec $NS bash "$LABDIR/20-run-vm.sh" "$OUT/job/interop.sh" "$OUT/guest" 3600 > "$OUT/guest.run.log" 2>&1 &
VMPID=$!

: > "$OUT/results.txt"
host_run() {   # host_run PHASE TEST ROLE: our soft binary in the namespace
    local phase=$1 t=$2 role=$3 bin="$REPO/target/release/roce_$t" args log rc
    args="$HOST_SOFT_ARGS -s $SIZE -n $ITERS"
    [ "$phase" = A ] && args="$args --validate"
    [ "$phase" = B ] && args="$args --oob perftest"
    log="$OUT/host_${phase}_${t}_${role}.log"
    if [ "$role" = client ]; then
        # the guest boots under TCG: wait for its server long enough, then retry a refused connection
        args="$args --connect-timeout 180"
        for _ in $(seq 1 300); do
            set +e; timeout 120 ip netns exec $NS "$bin" $args 10.9.0.2 > "$log" 2>&1; rc=$?; set -e
            grep -qi "connection refused" "$log" || break
            sleep 0.3
        done
    else
        set +e; timeout 120 ip netns exec $NS "$bin" $args > "$log" 2>&1; rc=$?; set -e
    fi
    echo "$( [ $rc = 0 ] && echo PASS || echo FAIL ) $phase $t host-$role rc=$rc log=$log" | tee -a "$OUT/results.txt"
}
for phase in $PHASES; do
    for t in $TESTS; do
        host_run "$phase" "$t" client    # guest serves
        host_run "$phase" "$t" server    # guest is the client
    done
done
wait $VMPID || true
sleep 0.5; kill -INT "$TDPID"; wait "$TDPID" || true; TDPID=
grep 'GUEST RESULT' "$OUT/guest/job.log" | sed 's/.*GUEST RESULT //' | while read -r phase t role rc; do
    echo "$( [ "$rc" = rc=0 ] && echo PASS || echo FAIL ) $phase $t guest-$role $rc"
done | tee -a "$OUT/results.txt"

# B: the figures on both sides agree. Both print perftest's result table: the row starting with the size;
# BW tests compare "BW average" (column 4), latency tests "t_typical" (column 5). TCG guests are noisy,
# so the tolerance is wide (FIG_TOL, default 25 %); a missing row is a failure.
figure() {   # figure FILE TEST: the figure from the first result row for $SIZE
    local col=4; case $2 in *_lat) col=5 ;; esac
    awk -v s="$SIZE" -v c=$col '$1 == s && NF >= c && $2 ~ /^[0-9]+$/ {print $c; exit}' "$1"
}
if [[ " $PHASES " == *" B "* ]]; then
    for t in $TESTS; do
        for role in client server; do
            grole=server; [ $role = server ] && grole=client
            awk -v a="== B $t guest $grole:" -v b="GUEST RESULT B $t $grole" \
                'index($0, a) {on=1} on {print} index($0, b) {on=0}' "$OUT/guest/job.log" > "$OUT/guest_B_${t}_${grole}.log"
            ours=$(figure "$OUT/host_B_${t}_${role}.log" "$t"); theirs=$(figure "$OUT/guest_B_${t}_${grole}.log" "$t")
            if [ "$t" = read_lat ]; then
                # ib_read_lat's server prints no figures (only the client measures); ours does the same.
                srv=$theirs; cli=$ours; [ $role = server ] && { srv=$ours; cli=$theirs; }
                v=FAIL; [ -z "$srv" ] && [[ "$cli" =~ ^[0-9.]+$ ]] && v=PASS
                echo "$v B-figures $t host-$role client=${cli:-none} server=${srv:-none} (only the client reports)" | tee -a "$OUT/results.txt"
                continue
            fi
            verdict=$(awk -v a="${ours:-x}" -v b="${theirs:-y}" -v tol="${FIG_TOL:-25}" 'BEGIN{
                if (a !~ /^[0-9.]+$/ || b !~ /^[0-9.]+$/) {print "FAIL"; exit}
                m = (a > b ? a : b); d = (a > b ? a - b : b - a)
                print ((m == 0 || 100 * d / m <= tol) ? "PASS" : "FAIL") }')
            echo "$verdict B-figures $t host-$role roceperf=${ours:-none} perftest=${theirs:-none}" | tee -a "$OUT/results.txt"
        done
    done
fi

# C: every RoCE frame on the bridge must carry a correct ICRC; decodes for the record
python3 "$LABDIR/30-verify-icrc.py" "$OUT/interop.pcap" | tee "$OUT/icrc-check.txt" && icrc=PASS || icrc=FAIL
echo "$icrc C icrc $OUT/interop.pcap" | tee -a "$OUT/results.txt"
tshark -r "$OUT/interop.pcap" > "$OUT/interop.summary.txt" 2>/dev/null || true
tshark -r "$OUT/interop.pcap" -V > "$OUT/interop.decode.txt" 2>/dev/null || true
! grep -q '^FAIL' "$OUT/results.txt"
