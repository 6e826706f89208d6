# perftest-json: what perftest 26.04 writes with --out_json, in every mode whose document differs, over
# rxe (two rxe devices on a veth pair in one guest). Writes /mnt/json/<mode>-<role>.json.
#
# The guest's Debian perftest (6.06) predates perftest's JSON quoting fix, so the binaries come from
# OUTDIR: perftest built on the host from linux-rdma/perftest (the guest has the host's glibc), e.g.
#   git clone https://github.com/linux-rdma/perftest && cd perftest && ./autogen.sh &&
#   ./configure --disable-cuda && make   # needs libibverbs-dev librdmacm-dev libibumad-dev libpci-dev
#   cp ib_{write,send,read}_{bw,lat} OUTDIR/ && bash scripts/lab/20-run-vm.sh scripts/lab/jobs/perftest-json.sh OUTDIR
# tests/data/perftest_json/ holds the documents of perftest 26.04.17 (commit 00b55b6) made this way.
. /mnt/lib.sh
log start
setup_veth_rxe
log "rxe up"
J=/mnt/json
mkdir -p $J
pt() { # pt NAME BIN ARGS...: server on rxe1, client on rxe0, each writing its document
    local name=$1 bin=$2; shift 2
    run_pair $name "/mnt/$bin -d rxe1 -x 1 -F $* --out_json --out_json_file=$J/$name-server.json" \
        "/mnt/$bin -d rxe0 -x 1 -F $* --out_json --out_json_file=$J/$name-client.json 10.0.0.2"
}
pt write_bw ib_write_bw -s 65536 -n 1000
pt write_bw_gbits ib_write_bw -s 64 -n 1000 --report_gbits
pt send_bw ib_send_bw -s 65536 -n 1000
pt read_bw ib_read_bw -s 65536 -n 1000
pt write_bw_bidir_both ib_write_bw -s 65536 -n 1000 -b --report-both
pt write_bw_duration_cpu ib_write_bw -s 65536 -D 4 --cpu_util
pt write_bw_output_bw ib_write_bw -s 65536 -n 1000 --output=bandwidth
pt send_lat ib_send_lat -s 2 -n 1000
pt write_lat_duration ib_write_lat -s 2 -D 4
pt read_lat ib_read_lat -s 2 -n 1000
pt write_lat_output ib_write_lat -s 2 -n 1000 --output=latency
# --run_infinitely: the file as it stands while the run goes on (rewritten every -D seconds).
taskset -c 1 /mnt/ib_write_bw -d rxe1 -x 1 -F -s 65536 --run_infinitely -D 2 --out_json \
    --out_json_file=$J/write_bw_infinitely-server.json > /tmp/inf.srv 2>&1 &
S=$!
wait_listen 18515 $S
taskset -c 0 /mnt/ib_write_bw -d rxe0 -x 1 -F -s 65536 --run_infinitely -D 2 --out_json \
    --out_json_file=$J/write_bw_infinitely-client.json 10.0.0.2 > /tmp/inf.cli 2>&1 &
C=$!
sleep 9
kill -INT $C; sleep 1; kill -INT $S; sleep 1; kill -9 $C $S 2>/dev/null
ls -la $J
log end
