# Guest job for scripts/verbs-rxe.sh: roceperf with --transport verbs over kernel Soft-RoCE (rxe).
# Runs inside the lab VM (scripts/lab/), with /mnt holding our binaries and:
#   /mnt/tests.txt   one test per line: NAME<TAB>SERVER_CMD<TAB>CLIENT_CMD   (server on rxe1 10.0.0.2,
#                    client on rxe0 10.0.0.1; the server must listen on TCP 18515, as perftest does)
#   /mnt/errors.txt  one case per line: NAME<TAB>EXPECTED_EXIT<TAB>EXPECTED_TEXT<TAB>CMD
# Prints PASS/FAIL per line and a summary "verbs-rxe: N passed, M failed".
. /mnt/lib.sh
export LD_LIBRARY_PATH=/mnt/lib   # libgcc_s staged by verbs-rxe.sh
log start
setup_veth_rxe "${MTU:-1500}"
modprobe rdma_ucm 2>/dev/null || true   # /dev/infiniband/rdma_cm, for -R (librdmacm)
log "rxe up"
rdma link show
show_gids
pass=0; fail=0
verdict() {   # verdict NAME OK(0|1) DETAIL
    if [ "$2" = 0 ]; then echo "PASS $1 $3"; pass=$((pass+1)); else echo "FAIL $1 $3"; fail=$((fail+1)); fi
}

while IFS="$(printf '\t')" read -r name want text cmd; do
    [ -z "$name" ] && continue
    case $name in \#*) continue ;; esac
    log "== error case $name"
    echo "\$ $cmd"
    out=$($cmd 2>&1 < /dev/null); rc=$?
    echo "$out" | sed 's/^/    /'
    ok=1
    if [ "$rc" = "$want" ] && printf '%s' "$out" | grep -qF -- "$text"; then ok=0; fi
    verdict "$name" $ok "(exit $rc, expected $want and '$text')"
done < /mnt/errors.txt

# pair NAME SERVER_CMD CLIENT_CMD: like lib.sh's run_pair (server pinned to CPU 1, client to CPU 0),
# but judged by both exit codes.
pair() {
    local name=$1 srv=$2 cli=$3 ps="" pc=""
    if [ "$(nproc)" -ge 2 ]; then ps="taskset -c 1"; pc="taskset -c 0"; fi
    log "== $name"
    echo "server: $srv"; echo "client: $cli"
    $ps timeout 300 $srv > /tmp/$name.srv 2>&1 < /dev/null &
    local spid=$!
    case " $srv " in
        # rdma_cm's exchange (-R with perftest's dialect) listens on no TCP port. Our server prints its
        # banner (line-buffered) right before rdma_listen: wait for it, since a REQ before it gets REJ
        # "invalid service ID" and perftest's client gives up at once. ib_*'s banner sits in a stdio
        # buffer; our client retries a REJ anyway.
        *"ib_"*" -R "*) sleep 3 ;;
        *" -R "*perftest*)
            for _ in $(seq 1 600); do grep -q "Waiting for client" /tmp/$name.srv && break; sleep 0.1; done
            sleep 1 ;;
        *) wait_listen 18515 $spid || log "server did not listen" ;;
    esac
    $pc timeout 300 $cli > /tmp/$name.cli 2>&1 < /dev/null; local crc=$?
    wait $spid; local src=$?
    echo "--- server output (rc=$src)"; cat /tmp/$name.srv
    echo "--- client output (rc=$crc)"; cat /tmp/$name.cli
    verdict "$name" $(( (src != 0) | (crc != 0) )) "(server rc=$src, client rc=$crc)"
}

while IFS="$(printf '\t')" read -r name srv cli; do
    [ -z "$name" ] && continue
    case $name in \#*) continue ;; esac
    pair "$name" "$srv" "$cli"
done < /mnt/tests.txt

rdma statistic show link rxe0/1 2>/dev/null | head -5
echo "verbs-rxe: $pass passed, $fail failed"
log end
