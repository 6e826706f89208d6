#!/bin/bash
# roceperf --transport verbs over kernel Soft-RoCE (rdma_rxe) in the lab VM: build, stage, boot, judge.
#
#   scripts/verbs-rxe.sh [OUTDIR]        (default OUTDIR: $LAB/out/verbs-rxe)
#
# Needs root and the lab guest (scripts/lab/): built into $LAB on first use (`scripts/lab/rxelab.sh deps`:
# qemu and tools on the host; `scripts/lab/rxelab.sh build`: guest kernel + initramfs from Debian packages).
# Inside one guest: rxe0 on veth0 (10.0.0.1) and rxe1 on veth1 (10.0.0.2); every test runs its server on
# rxe1 and its client on rxe0, so RoCE v2 frames really cross the veth. Under TCG: function, not speed.
#
# MODE=smoke (default): the verbs_smoke example (SEND, SEND+imm, WRITE, WRITE+imm, READ with byte checks
#   a write_bw-shaped stream (-t window, -Q moderation, -b both ways), a wrong-rkey READ that must fail by
#   name, and a SEND to a vanished peer that must end in retry-exceeded), in several shapes (-q, -s, -I, -m).
# MODE=six: the six test binaries and the two atomic ones (both -A, --validate) with --transport verbs.
# MODE=rdma_cm: -R (issue 17): the six binaries with their queue pairs connected through librdmacm (our
#   dialect, --validate), and roce_write_bw -R --oob perftest against ib_write_bw -R, both roles, and
#   roce_send_{bw,lat} -R -c UD --oob perftest against ib_send_{bw,lat} -R -c UD (and send_bw -b), both roles.
# MODE=counters: -W (issue 29): roce_write_bw and roce_send_lat over rxe print rxe's hw_counters deltas
#   under each row (the default set, then a -W list, with --json into OUTDIR), and a name rxe lacks is
#   refused at set-up; the run fails unless rxe's packet counters moved.
# NETMTU=9000 gives the veths jumbo frames, so rxe's active MTU (and the path MTU) becomes 4096.
# ONLY=REGEX runs only the lines whose names match (e.g. ONLY=retry_exceeded_named).
# Exit: 0 when every line passed, 1 otherwise, 2 when the lab guest cannot be built.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
LABDIR=$ROOT/scripts/lab
export LAB=${LAB:-/var/tmp/roceperf-rxelab}
OUT=${1:-$LAB/out/verbs-rxe}
MODE=${MODE:-smoke}
PROFILE=${PROFILE:-debug}     # debug builds faster here; timing is meaningless under TCG anyway

# ---------------------------------------------------------------- the tests (edit here)
S=rxe1; C=rxe0; SIP=10.0.0.2
SMOKE="/mnt/verbs_smoke"
# -u 18 (1.07 s ACK timeout) for the data tests: under TCG a window of 64 KiB WRITEs takes longer than
# perftest's 67 ms, and the resulting retransmissions of multi-packet messages have been seen to end in
# IBV_WC_REM_INV_REQ_ERR from the 6.1 kernel's rxe responder (not a roceperf check failing).
U="-u 18"
SMOKE_TESTS=(
    "smoke_q1_4k|$SMOKE server $U -d $S --tcp-port 18515 -q 1 -s 4096|$SMOKE client $U -d $C --tcp-port 18515 -q 1 -s 4096 $SIP"
    "smoke_q4_64k|$SMOKE server $U -d $S --tcp-port 18515 -q 4 -s 65536|$SMOKE client $U -d $C --tcp-port 18515 -q 4 -s 65536 $SIP"
    "smoke_inline_64|$SMOKE server $U -d $S --tcp-port 18515 -q 2 -s 64 -I 64|$SMOKE client $U -d $C --tcp-port 18515 -q 2 -s 64 -I 64 $SIP"
    "smoke_bidir_q2_t8_Q2|$SMOKE server $U -d $S --tcp-port 18515 -q 2 -s 8192 -t 8 -Q 2 -n 500 -b|$SMOKE client $U -d $C --tcp-port 18515 -q 2 -s 8192 -t 8 -Q 2 -n 500 -b $SIP"
    "retry_exceeded_named|$SMOKE server -d $S --tcp-port 18515 -q 1 -s 64 --scenario retry|$SMOKE client -d $C --tcp-port 18515 -q 1 -s 64 --scenario retry $SIP"
    "smoke_mtu256_x1|$SMOKE server $U -d $S -x 1 -m 256 --tcp-port 18515 -q 1 -s 3000|$SMOKE client $U -d $C -x 1 -m 256 --tcp-port 18515 -q 1 -s 3000 $SIP"
)
SIX=(send_bw write_bw read_bw send_lat write_lat read_lat atomic_bw atomic_lat)
six_tests() {   # the test binaries, perftest-style arguments
    for t in "${SIX[@]}"; do
        echo "$t|/mnt/roce_$t --transport verbs $U -d $S -n 500 --validate|/mnt/roce_$t --transport verbs $U -d $C -n 500 --validate $SIP"
    done
    echo "write_bw_q4_bidir|/mnt/roce_write_bw --transport verbs $U -d $S -q 4 -b -n 300|/mnt/roce_write_bw --transport verbs $U -d $C -q 4 -b -n 300 $SIP"
    echo "send_bw_inline_t16_Q4|/mnt/roce_send_bw --transport verbs $U -d $S -s 64 -I 64 -t 16 -Q 4 -n 500|/mnt/roce_send_bw --transport verbs $U -d $C -s 64 -I 64 -t 16 -Q 4 -n 500 $SIP"
    echo "read_bw_m1024_q2|/mnt/roce_read_bw --transport verbs $U -d $S -m 1024 -q 2 -n 300 --validate|/mnt/roce_read_bw --transport verbs $U -d $C -m 1024 -q 2 -n 300 --validate $SIP"
    echo "write_lat_4k_mtu1024|/mnt/roce_write_lat --transport verbs $U -d $S -s 4096 -n 300 --validate|/mnt/roce_write_lat --transport verbs $U -d $C -s 4096 -n 300 --validate $SIP"
    echo "write_lat_auto|/mnt/roce_write_lat $U -d $S -n 300|/mnt/roce_write_lat $U -d $C -n 300 $SIP"
    # Atomics on rxe's responder: every original and every word checked, both operations.
    echo "atomic_bw_cas_q2|/mnt/roce_atomic_bw --transport verbs $U -d $S -A CMP_AND_SWAP -q 2 -n 500 --validate|/mnt/roce_atomic_bw --transport verbs $U -d $C -A CMP_AND_SWAP -q 2 -n 500 --validate $SIP"
    echo "atomic_bw_bidir_t16|/mnt/roce_atomic_bw --transport verbs $U -d $S -b -t 16 -Q 4 -n 500 --validate|/mnt/roce_atomic_bw --transport verbs $U -d $C -b -t 16 -Q 4 -n 500 --validate $SIP"
    echo "atomic_lat_cas|/mnt/roce_atomic_lat --transport verbs $U -d $S -A CMP_AND_SWAP -n 300 --validate|/mnt/roce_atomic_lat --transport verbs $U -d $C -A CMP_AND_SWAP -n 300 --validate $SIP"
}
rdma_cm_tests() {   # -R through librdmacm: ours against ours, then against perftest's -R, both roles
    for t in "${SIX[@]}"; do
        echo "rdma_cm_$t|/mnt/roce_$t --transport verbs -R $U -d $S -n 300 --validate|/mnt/roce_$t --transport verbs -R $U -d $C -n 300 --validate $SIP"
    done
    echo "rdma_cm_q3_write_bw|/mnt/roce_write_bw --transport verbs -R $U -d $S -q 3 -n 300 --validate|/mnt/roce_write_bw --transport verbs -R $U -d $C -q 3 -n 300 --validate $SIP"
    echo "rdma_cm_vs_ib_write_bw_server|ib_write_bw -R -d $S -x 1 -F -n 300|/mnt/roce_write_bw --transport verbs -R --oob perftest $U -d $C -n 300 $SIP"
    echo "rdma_cm_vs_ib_write_bw_client|/mnt/roce_write_bw --transport verbs -R --oob perftest $U -d $S -n 300|ib_write_bw -R -d $C -x 1 -F -n 300 $SIP"
    echo "rdma_cm_vs_ib_send_lat_server|ib_send_lat -R -d $S -x 1 -F -n 300|/mnt/roce_send_lat --transport verbs -R --oob perftest $U -d $C -n 300 $SIP"
    # -R -c UD in perftest's dialect: its messages on an RC queue pair (TCP port space), the test's UD
    # queue pairs resolved by SIDR (UDP port space); latency and -b send a first datagram with the QPN.
    local ud="-c UD -s 1024 -n 300"
    # ... and in our dialect, verbs on both sides (the UDP port space only).
    for t in send_bw send_lat; do
        echo "rdma_cm_ud_ours_$t|/mnt/roce_$t --transport verbs -R $ud $U -d $S|/mnt/roce_$t --transport verbs -R $ud $U -d $C $SIP"
    done
    for t in send_bw send_lat; do
        echo "rdma_cm_ud_vs_ib_${t}_server|ib_$t -R $ud -d $S -x 1 -F|/mnt/roce_$t --transport verbs -R --oob perftest $ud -d $C $SIP"
        echo "rdma_cm_ud_vs_ib_${t}_client|/mnt/roce_$t --transport verbs -R --oob perftest $ud -d $S|ib_$t -R $ud -d $C -x 1 -F $SIP"
    done
    echo "rdma_cm_ud_vs_ib_send_bw_bidir_server|ib_send_bw -R $ud -b -d $S -x 1 -F|/mnt/roce_send_bw --transport verbs -R --oob perftest $ud -b -d $C $SIP"
    echo "rdma_cm_ud_vs_ib_send_bw_bidir_client|/mnt/roce_send_bw --transport verbs -R --oob perftest $ud -b -d $S|ib_send_bw -R $ud -b -d $C -x 1 -F $SIP"
}
counters_tests() {   # -W: rxe's own counters around each size, both sides
    local w="-W hw_counters/sent_pkts,hw_counters/rcvd_pkts,hw_counters/duplicate_request,hw_counters/rcvd_seq_err"
    echo "counters_default_write_bw|/mnt/roce_write_bw --transport verbs $U -d $S -n 500 --json /mnt/counters-default-server.json|/mnt/roce_write_bw --transport verbs $U -d $C -n 500 --json /mnt/counters-default-client.json $SIP"
    echo "counters_W_write_bw_sweep|/mnt/roce_write_bw --transport verbs $U -d $S -n 5 --warmup 0 -a $w|/mnt/roce_write_bw --transport verbs $U -d $C -n 5 --warmup 0 -a $w --json /mnt/counters-W-client.json $SIP"
    echo "counters_W_send_lat|/mnt/roce_send_lat --transport verbs $U -d $S -n 300 $w|/mnt/roce_send_lat --transport verbs $U -d $C -n 300 $w $SIP"
}
# Error cases: NAME|EXPECTED_EXIT|TEXT THE MESSAGE MUST CONTAIN|COMMAND
ERRORS=(
    "unknown_device|2|RDMA devices here: rxe0, rxe1|$SMOKE devices -d mlx5_9"
    "interface_as_device|2|its RDMA device is rxe0 (-d rxe0)|$SMOKE devices -d veth0"
    "roce_v1_on_rxe|2|Soft-RoCE (rxe) implements v2 only|$SMOKE devices -d rxe0 --roce v1"
    "empty_gid_index|2|GID index 5 is empty|$SMOKE devices -d rxe0 -x 5"
    "auto_gid_is_ipv4_v2|0|GID index 1 ::ffff:10.0.0.1 RoCE v2 on veth0 (auto-selected|$SMOKE devices -d rxe0"
    "ipv6_gid|0|GID index 0 fe80:|$SMOKE devices -d rxe0 --ipv6"
)

# ---------------------------------------------------------------- build and stage
. "$LABDIR/host-net.sh"
lab_guest_ready || { echo "verbs-rxe: could not build the lab guest in $LAB/guest" >&2; exit 2; }
mkdir -p "$OUT"
rm -f "$OUT"/verbs_smoke "$OUT"/roce_* "$OUT/tests.txt" "$OUT/errors.txt"
cargo_flags=(); [ "$PROFILE" = release ] && cargo_flags=(--release)
( cd "$ROOT" && cargo build "${cargo_flags[@]}" --example verbs_smoke )
cp "$ROOT/target/$PROFILE/examples/verbs_smoke" "$OUT/"
if [ "$MODE" = six ] || [ "$MODE" = rdma_cm ] || [ "$MODE" = counters ]; then
    ( cd "$ROOT" && cargo build "${cargo_flags[@]}" --bins )
    for t in "${SIX[@]}"; do cp "$ROOT/target/$PROFILE/roce_$t" "$OUT/"; done
    case $MODE in
        six) mapfile -t TESTS < <(six_tests) ;;
        rdma_cm) mapfile -t TESTS < <(rdma_cm_tests) ;;
        counters) mapfile -t TESTS < <(counters_tests) ;;
    esac
    # The binaries name an unknown device and list the real ones, before waiting for any peer.
    ERRORS+=("roce_unknown_device|2|RDMA devices here: rxe0, rxe1|/mnt/roce_write_bw --transport verbs -d mlx5_9")
    ERRORS+=("roce_auto_unknown_name_is_soft|2|auto chose soft|/mnt/roce_write_bw -d mlx5_9")
    # A counter rxe does not have: refused before the peer is contacted, with the names rxe has.
    [ "$MODE" = counters ] && ERRORS+=("counters_unknown_name|2|hw_counters/ has no np_cnp_snt; it has:|/mnt/roce_write_bw --transport verbs -d $C -W hw_counters/np_cnp_snt $SIP")
    [ "$MODE" = rdma_cm ] && ERRORS+=("rdma_cm_nobody_listens|2|REJ \"invalid service ID\" (reason 8)|/mnt/roce_write_bw --transport verbs -R --oob perftest -d $C -p 19999 --connect-timeout 3 $SIP")
else
    TESTS=("${SMOKE_TESTS[@]}")
fi
# The guest image carries only what perftest needs; our binaries also want libgcc_s (unwinding).
mkdir -p "$OUT/lib"
for f in "$OUT"/verbs_smoke "$OUT"/roce_*; do
    [ -f "$f" ] || continue
    ldd "$f" | awk '/=> \//{print $3}' | grep -E 'libgcc_s|libstdc' | xargs -r cp -L -t "$OUT/lib/"
done
# 20-run-vm.sh copies lib.sh only from beside the job script; ours lives in scripts/.
cp "$LABDIR/jobs/lib.sh" "$OUT/lib.sh"
# ONLY=REGEX keeps the tests and error cases whose names match.
for t in "${TESTS[@]}"; do printf '%s\n' "$t" | tr '|' '\t'; done | grep -E "^(${ONLY:-.*})"$'\t' > "$OUT/tests.txt" || true
for e in "${ERRORS[@]}"; do printf '%s\n' "$e" | tr '|' '\t'; done | grep -E "^(${ONLY:-.*})"$'\t' > "$OUT/errors.txt" || true

# ---------------------------------------------------------------- run and judge
JOB_ENV="MTU=${NETMTU:-1500}" bash "$LABDIR/20-run-vm.sh" "$ROOT/scripts/verbs-rxe-job.sh" "$OUT" "${TIMEOUT:-900}" || true
[ -f "$OUT/job.log" ] || { echo "verbs-rxe: the guest wrote no job.log; see $OUT/console.log" >&2; exit 1; }
grep -E '^(PASS|FAIL) |^verbs-rxe: ' "$OUT/job.log"
grep -q '^verbs-rxe: [0-9]* passed, 0 failed' "$OUT/job.log"
if [ "$MODE" = counters ]; then   # the counters printed under the rows, and rxe's packets among them
    grep -E $'^\thw_counters/' "$OUT/job.log"
    grep -qE $'^\thw_counters/(sent|rcvd)_pkts=[1-9]' "$OUT/job.log" || { echo "verbs-rxe: no rxe packet counter moved under a row" >&2; exit 1; }
fi
