#!/bin/bash
# Record real perftest out-of-band (TCP 18515) exchanges over kernel Soft-RoCE in the lab VM and extract
# them into tests/data/perftest_oob/*.trace, the byte traces the `--oob perftest` tests replay.
#   scripts/perftest-trace.sh [OUTDIR]      (default OUTDIR: /tmp/roceperf-perftest-trace)
# Needs root and the rxe lab guest (scripts/lab/, built on first use), and tshark on the host.
# Each trace line is `<dir> <hex payload of one TCP segment>`, dir = c2s (client to server) or s2c,
# in capture order; perftest writes every message with one write(), so one segment is one message.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
LABDIR=$REPO/scripts/lab
OUT=${1:-/tmp/roceperf-perftest-trace}
DATA=$REPO/tests/data/perftest_oob
mkdir -p "$DATA"
# one line per TCP segment with payload, retransmissions dropped (same direction and sequence number
# seen before: under TCG the guest does retransmit now and then)
extract() {
    tshark -r "$1" -Y 'tcp.len>0' -T fields -e tcp.srcport -e tcp.dstport -e tcp.seq_raw -e tcp.payload 2>/dev/null |
        awk '!seen[$1 " " $3]++ {print ($2 == 18515 ? "c2s" : "s2c"), $4}'
}
if [ "${EXTRACT_ONLY:-}" ]; then   # EXTRACT_ONLY=1 scripts/perftest-trace.sh PCAP NAME: one pcap
    extract "$1" > "$DATA/$2.trace"; echo "$2: $(wc -l < "$DATA/$2.trace") messages"; exit 0
fi
. "$LABDIR/host-net.sh"
lab_guest_ready
mkdir -p "$OUT/job" "$DATA"
cp "$LABDIR/jobs/lib.sh" "$OUT/job/lib.sh"
cat > "$OUT/job/trace.sh" <<'JOB'
# guest side: two rxe devices on a veth pair, real perftest server (rxe1) and client (rxe0),
# tcpdump of the OOB TCP port only (the RoCE frames are not needed here and -a would make them big).
. /mnt/lib.sh
log start
setup_veth_rxe
log "rxe up"
show_gids
echo "perftest version: $(ib_write_bw --version 2>&1 | tr '\n' ' ')"
grep '^perftest ' /etc/lab-packages.txt || true   # the guest's package versions
capx() { capture_pair 'tcp port 18515' "$@"; }  # capx NAME TOOL "ARGS"
capx send_lat_64B_x5        ib_send_lat  "-s 64 -n 5 -F"
capx write_lat_64B_x5       ib_write_lat "-s 64 -n 5 -F"
capx read_lat_64B_x5        ib_read_lat  "-s 64 -n 5 -F"
capx send_lat_all_x5        ib_send_lat  "-a -n 5 -F"
capx write_lat_all_x5       ib_write_lat "-a -n 5 -F"
capx read_lat_all_x5        ib_read_lat  "-a -n 5 -F"
capx write_bw_all_x5        ib_write_bw  "-a -n 5 -F"
capx read_bw_all_x5         ib_read_bw   "-a -n 5 -F"
capx send_bw_all_x5         ib_send_bw   "-a -n 5 -F"
capx write_bw_bidir_64B_x5  ib_write_bw  "-b -s 64 -n 5 -F"
capx read_bw_bidir_64B_x5   ib_read_bw   "-b -s 64 -n 5 -F"
capx send_bw_bidir_64B_x5   ib_send_bw   "-b -s 64 -n 5 -F"
capx write_bw_2qp_64B_x5    ib_write_bw  "-q 2 -s 64 -n 5 -F"
ls -la /mnt/pcap
log end
JOB
bash "$LABDIR/20-run-vm.sh" "$OUT/job/trace.sh" "$OUT/run" "${TIMEOUT_S:-900}"
grep -E 'perftest version|rc=|CAPTURE INCOMPLETE|TIME' "$OUT/run/job.log" || true
for p in "$OUT"/run/pcap/*.pcap; do
    name=$(basename "$p" .pcap)
    extract "$p" > "$DATA/$name.trace"
    echo "$name: $(wc -l < "$DATA/$name.trace") messages"
done
