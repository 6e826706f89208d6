# pace-verbs: --transport verbs over rxe (rxe1 server, rxe0 client): a paced write_bw, -b --report-both
# with --out_json, send_lat with --latency_gap, and a paced send_bw --run_infinitely stopped by SIGINT.
# Stage as scripts/verbs-rxe.sh does: roce_write_bw, roce_send_bw, roce_send_lat and libgcc_s (in lib/)
# in OUTDIR, then: bash scripts/lab/20-run-vm.sh scripts/lab/jobs/pace-verbs.sh OUTDIR. Under TCG:
# function, not speed (the achieved rates are rxe-in-TCG's).
. /mnt/lib.sh
export LD_LIBRARY_PATH=/mnt/lib
log start
setup_veth_rxe
log "rxe up"
U="-u 18"
run_pair paced_write_bw "/mnt/roce_write_bw --transport verbs $U -d rxe1 -s 4096 -n 300 --rate_limit 200 --rate_units p --burst_size 10 --out_json_file /mnt/paced-server.json" \
  "/mnt/roce_write_bw --transport verbs $U -d rxe0 -s 4096 -n 300 --rate_limit 200 --rate_units p --burst_size 10 --out_json_file /mnt/paced-client.json --json /mnt/paced-client-ours.json 10.0.0.2"
run_pair bidir_both "/mnt/roce_write_bw --transport verbs $U -d rxe1 -s 65536 -n 200 -b --report-both --out_json_file /mnt/both-server.json" \
  "/mnt/roce_write_bw --transport verbs $U -d rxe0 -s 65536 -n 200 -b --report-both --out_json_file /mnt/both-client.json 10.0.0.2"
run_pair gap_send_lat "/mnt/roce_send_lat --transport verbs $U -d rxe1 -n 50 --latency_gap 2000 --out_json_file /mnt/gap-server.json" \
  "/mnt/roce_send_lat --transport verbs $U -d rxe0 -n 50 --latency_gap 2000 --out_json_file /mnt/gap-client.json 10.0.0.2"
log "== endless_send_bw"
taskset -c 1 /mnt/roce_send_bw --transport verbs $U -d rxe1 -s 4096 --run_infinitely --report-interval 1 --rate_limit 0.01 --json-stream /mnt/inf-server.jsonl --json /mnt/inf-server.json > /tmp/inf.srv 2>&1 &
S=$!
wait_listen 18515 $S
taskset -c 0 /mnt/roce_send_bw --transport verbs $U -d rxe0 -s 4096 --run_infinitely --report-interval 1 --rate_limit 0.01 --json-stream /mnt/inf-client.jsonl --json /mnt/inf-client.json 10.0.0.2 > /tmp/inf.cli 2>&1 &
C=$!
# SIGINT only once the run is going (a background job of this shell ignores it until the run catches it).
for i in $(seq 600); do [ "$(grep -c '^ 4096 ' /tmp/inf.cli)" -ge 3 ] && break; sleep 1; done
kill -INT $C
wait $C; echo "client rc=$?"
wait $S; echo "server rc=$?"
echo "--- client"; cat /tmp/inf.cli; echo "--- server"; cat /tmp/inf.srv
for f in /mnt/*.json; do echo "== $f"; cat $f; done
wc -l /mnt/*.jsonl
log end
