#!/usr/bin/env bash
# Every ratio of issue 14 from one run: roceperf against the busy-polling floors of roce_ref (what the
# kernel path itself costs here), against its own --transport tcp, and against iperf3 and sockperf
# (secondary rows: sockperf's ping-pong sleeps in epoll and wakes per message, so it is no floor).
#
#   latency, 2 B, one-way median (p99 and p99.9 shown next to it):
#     soft v2 write/send/read_lat  <= 1.2 x  roce_ref udp-pingpong of the same datagrams on lo
#                                            (36 B WRITE, 20 B SEND, 32 B request + 24 B response READ;
#                                            read_lat is a whole round trip, so against the RTT)
#     soft v2 write/send/read_lat  <= 0.75 x roceperf --transport tcp, same test, same run
#     tcp write_lat                <= 1.1 x  roce_ref tcp-pingpong -s 26 (24-byte frame header + 2 B)
#     soft v1 AF_PACKET write_lat  <= 1.2 x  roce_ref packet-pingpong -s 76 across a veth pair
#   one host path for both RoCE versions (issue 28), across a veth pair at MTU 9000; RoCE v2 over
#   AF_PACKET with --no-gso moves as RoCE v1 does (single frames, the receive ring, and a TCX program
#   that keeps the kernel's IP/UDP receive off its frames):
#     soft v2 AF_PACKET write_lat and write_bw within 0.9-1.1 x soft v1 AF_PACKET's
#     each soft write_lat median <= its backend's floor + 0.5 us: roce_ref packet-pingpong of the
#     frame after its Ethernet header (v1: -s 76 = GRH 40 + BTH 12 + RETH 16 + 2 B + pad 2 + ICRC 4;
#     v2/IPv4: -s 64 = IPv4 20 + UDP 8 + the same 36), udp-pingpong -s 36 for the UDP socket
#   bandwidth, 64 KiB, Gb/s:
#     soft v2 write/send/read_bw   >= 1.0 x  tcp write_bw, on lo and across a veth pair (MTU 1500)
#     soft v1 and v2 AF_PACKET write_bw >= 0.5 x soft v2 UDP write_bw, same veth pair at MTU 9000
#       (v2 here with its virtio_net_hdr super-frames, as --io packet sends by default)
#     tcp write_bw                 >= 1.0 x  iperf3 -l 64K on lo
#   congestion signals (issue 29), soft v2 write_bw -m 1024 --validate across a veth pair whose ends
#   take no super-datagrams (the client's GSO sends are cut into packets at the device), 1 % of the
#   packets CE-marked on arrival by iptables' ECN target in the server's namespace, every run held to
#   the same offered rate (--rate_limit CE_RATE Gb/s, default 1: 122,000 packets a second, below what
#   one core sends here) so that the unmarked goodput is that rate, not what the CPU managed in that
#   run; each round runs unmarked, marked and unmarked again, and a marked run is taken against the
#   mean of the unmarked runs either side of it:
#     --cc dcqcn at the study's slow-link parameters (300 us timers) <= 0.8 x unmarked; --cc none
#     within 0.9-1.1 x unmarked; the paper's parameters (55 us) and ConnectX's defaults: info (at a
#     mark every ~820 us they recover between marks, see docs/congestion.md)
#   info and secondary rows: roce_ref's AF_PACKET stream against its UDP stream at RoCE's 4096 MTU,
#   each AF_PACKET write_bw against roce_ref packet-stream of its frame (v1 -s 4152, v2 -s 4140),
#   tcp write_bw against roce_ref tcp-stream, iperf3 against roce_ref tcp-stream, sockperf.
#
# Servers run on core SERVER_CPU and clients on CLIENT_CPU (--cpu for roceperf and roce_ref, taskset
# for the others). Each phase (lo; veth MTU 1500; veth MTU 9000) runs ROUNDS rounds of every run in
# turn; the table shows, per row, the medians over the rounds, the median of the rounds' ratios (each
# round's figure against its reference from the same round) and PASS or MISS against the target.
# This is a benchmark, not a test: it exits 0 unless something failed to run.
# The veth rows need root: two namespaces ($ROCEPERF_NETNS_PREFIX, default rpbench) joined by a veth
# pair from scripts/netns.sh, removed at the end. VETH=0 skips them.
#
#   scripts/bench.sh                      # defaults: DURATION=5 ROUNDS=3 SERVER_CPU=0 CLIENT_CPU=1
#   DURATION=2 ROUNDS=1 scripts/bench.sh  # quick look
#   PHASES=congestion scripts/bench.sh    # some phases only: lo, veth, veth9k, congestion
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-3}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
PORT=${BASE_PORT:-18600}
VETH=${VETH:-auto}
PHASES=${PHASES:-lo,veth,veth9k,congestion}
export ROCEPERF_NETNS_PREFIX=${ROCEPERF_NETNS_PREFIX:-rpbench}
BIN=${BIN:-target/release}   # BIN=DIR: another build's binaries (e.g. a baseline), roce_ref taken from there too
# A run that takes this long is stuck: it is killed and reported as failed.
LIMIT=$((DURATION * 2 + 60))

need() { # need <command> <debian package>
    command -v "$1" >/dev/null 2>&1 && return 0
    echo "bench.sh: installing $2 (for $1)" >&2
    if [ "$(id -u)" -eq 0 ]; then apt-get install -y "$2" >/dev/null; else sudo apt-get install -y "$2" >/dev/null; fi
}
need iperf3 iperf3
need sockperf sockperf
need taskset util-linux
need jq jq
need /usr/bin/time time

echo "bench.sh: building release binaries" >&2
cargo build --release --quiet --bins

WORK=$(mktemp -d)
NETNS_UP=""
cleanup() {
    [[ -n $NETNS_UP ]] && bash scripts/netns.sh down >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT

FAILED=()
# Where the current phase runs: commands prefixed for the server's side (a) and the client's (b).
ON_A=() ON_B=() PEER_IP=127.0.0.1 DEV=lo

use_lo() { ON_A=() ON_B=() PEER_IP=127.0.0.1 DEV=lo; }
use_veth() { # use_veth <mtu> [netns.sh options]: (re)builds the namespaces with that MTU
    local mtu=$1; shift
    bash scripts/netns.sh up --mtu "$mtu" "$@" >/dev/null || return 1
    NETNS_UP=1
    ON_A=(ip netns exec "${ROCEPERF_NETNS_PREFIX}a") ON_B=(ip netns exec "${ROCEPERF_NETNS_PREFIX}b")
    PEER_IP=10.77.0.1 DEV=veth0
}

# run_pair <what> [pause]: the server command SRV on side a in the background, the client command CLI
# on side b; the client's stdout lands in $WORK/out. KILL_SERVER=1: the server never exits by itself.
run_pair() {
    local what=$1 pause=${2:-0} spid ok=1
    "${ON_A[@]}" timeout -k 5 "$LIMIT" "${SRV[@]}" >"$WORK/server.log" 2>&1 &
    spid=$!
    sleep "$pause"
    if ! "${ON_B[@]}" timeout -k 5 "$LIMIT" "${CLI[@]}" >"$WORK/out" 2>"$WORK/client.log"; then
        ok=0
        kill "$spid" 2>/dev/null || true
    fi
    if [[ ${KILL_SERVER:-0} == 1 ]]; then
        kill "$spid" 2>/dev/null || true
        wait "$spid" 2>/dev/null || true
    elif ! wait "$spid"; then
        ok=0
    fi
    if ((ok == 0)); then
        FAILED+=("$what")
        echo "bench.sh: FAILED to run: $what" >&2
        tail -n 3 "$WORK/client.log" "$WORK/server.log" | sed 's/^/    /' >&2
        return 1
    fi
}

# save <key> <jq filter> <file>: appends the figures the filter picks from the file to $WORK/<key>.
save() {
    local v
    if v=$(jq -er "$2" "$3" 2>/dev/null) && [[ -n $v && $v != *null* ]]; then
        echo "$v" >>"$WORK/$1"
    else
        FAILED+=("$1: no figures in the output")
        echo "bench.sh: no figures for $1" >&2
    fi
}

LAT_JQ='.results[0].latency | "\(.median_us) \(.percentiles["p99"]) \(.percentiles["p99.9"])"'

# roce_lat <key> <test> <args...>: a roceperf latency test at 2 B; median, p99, p99.9 of the client.
roce_lat() {
    local key=$1 test=$2; shift 2
    PORT=$((PORT + 1)); rm -f "$WORK/c.json"
    SRV=("$BIN/roce_$test" "$@" -s 2 -p "$PORT" --cpu "$SERVER_CPU" -D "$DURATION")
    CLI=("$BIN/roce_$test" "$@" -s 2 -p "$PORT" --cpu "$CLIENT_CPU" -D "$DURATION" --json "$WORK/c.json" "$PEER_IP")
    run_pair "roce_$test $* ($DEV)" && save "$key" "$LAT_JQ" "$WORK/c.json"
    return 0
}

# roce_bw <key> <test> <args...>: a roceperf bandwidth test at 64 KiB; the client's average Gb/s. Both
# sides run under GNU time: $WORK/<key>.res gets, per round, each side's CPU time per KiB and per packet
# of the measured window and its peak RSS (see the RESOURCES table). The server also takes the
# arguments in the array BW_SRV_EXTRA (ce_bw: its --json).
BW_SRV_EXTRA=()
roce_bw() {
    local key=$1 test=$2; shift 2
    PORT=$((PORT + 1)); rm -f "$WORK/c.json" "$WORK/s.time" "$WORK/c.time"
    SRV=(/usr/bin/time -f '%U %S %M' -o "$WORK/s.time" "$BIN/roce_$test" "$@" -s 64K -p "$PORT" --cpu "$SERVER_CPU" -D "$DURATION" "${BW_SRV_EXTRA[@]}")
    CLI=(/usr/bin/time -f '%U %S %M' -o "$WORK/c.time" "$BIN/roce_$test" "$@" -s 64K -p "$PORT" --cpu "$CLIENT_CPU" -D "$DURATION" --json "$WORK/c.json" "$PEER_IP")
    run_pair "roce_$test $* ($DEV)" && save "$key" '.results[0].bandwidth.avg_gbps' "$WORK/c.json" && resources "$key"
    return 0
}

# resources <key>: from the two GNU time files and the client's JSON, one line of
# "client_ns_per_KiB server_ns_per_KiB client_ns_per_packet server_ns_per_packet client_rss_MiB server_rss_MiB
#  client_sys_share server_sys_share" appended to $WORK/<key>.res. Packets are the messages of the measured
# window times the packets a 64 KiB message takes at the run's MTU (the tcp transport: its 64 KiB frames).
resources() {
    local key=$1 kib pkts
    [[ -s $WORK/s.time && -s $WORK/c.time ]] || return 0
    kib=$(jq -er '.results[0] | .iterations * .size_bytes / 1024' "$WORK/c.json") || return 0
    pkts=$(jq -er '.results[0].iterations * ((.results[0].size_bytes + (.test.mtu // 65536) - 1) / (.test.mtu // 65536) | floor)' "$WORK/c.json") || return 0
    ((${kib%.*} > 0)) || return 0
    read -r cu cs cm <"$WORK/c.time"
    read -r su ss sm <"$WORK/s.time"
    awk -v kib="$kib" -v p="$pkts" -v cu="$cu" -v cs="$cs" -v cm="$cm" -v su="$su" -v ss="$ss" -v sm="$sm" 'BEGIN {
        c = cu + cs; s = su + ss
        printf "%.0f %.0f %.0f %.0f %.1f %.1f %.0f %.0f\n", c * 1e9 / kib, s * 1e9 / kib, c * 1e9 / p, s * 1e9 / p,
            cm / 1024, sm / 1024, (c > 0 ? 100 * cs / c : 0), (s > 0 ? 100 * ss / s : 0) }' >>"$WORK/$key.res"
}

# ref <key> <mode> <args...>: a roce_ref floor; one-way median, p99, p99.9 or the receiver's Gb/s.
ref() {
    local key=$1 mode=$2 peer=$PEER_IP filter='.gbps'; shift 2
    [[ $mode == packet-* ]] && peer=ff:ff:ff:ff:ff:ff
    [[ $mode == *-pingpong ]] && filter='"\(.median_us) \(.p99_us) \(.p99_9_us)"'
    PORT=$((PORT + 1))
    SRV=("$BIN/roce_ref" "$mode" "$@" -p "$PORT" --cpu "$SERVER_CPU" -D "$DURATION" --json)
    CLI=("$BIN/roce_ref" "$mode" "$@" -p "$PORT" --cpu "$CLIENT_CPU" -D "$DURATION" --json "$peer")
    run_pair "roce_ref $mode $* ($DEV)" && save "$key" "$filter" "$WORK/out"
    return 0
}

# iperf3 -l 64K: the receiver's Gb/s.
iperf() {
    local key=$1
    PORT=$((PORT + 1))
    SRV=(taskset -c "$SERVER_CPU" iperf3 -s -1 -p "$PORT")
    CLI=(taskset -c "$CLIENT_CPU" iperf3 -c "$PEER_IP" -p "$PORT" -t "$DURATION" -l 64K -J)
    run_pair "iperf3 ($DEV)" 0.5 && save "$key" '.end.sum_received.bits_per_second / 1e9' "$WORK/out"
    return 0
}

# sockperf TCP ping-pong with its smallest message (14 bytes, its own header): one-way percentiles.
sockperf_lat() {
    local key=$1 v
    PORT=$((PORT + 1))
    SRV=(taskset -c "$SERVER_CPU" sockperf sr --tcp -i "$PEER_IP" -p "$PORT")
    CLI=(taskset -c "$CLIENT_CPU" sockperf pp --tcp -i "$PEER_IP" -p "$PORT" -t "$DURATION" -m 14)
    KILL_SERVER=1 run_pair "sockperf ($DEV)" 0.5 || return 0
    v=$(cat "$WORK/out" "$WORK/client.log" | awk '/percentile 50.000 =/ { m = $NF } /percentile 99.000 =/ { p = $NF }
        /percentile 99.900 =/ { q = $NF } END { if (m != "") print m, p, q }')
    if [[ -n $v ]]; then echo "$v" >>"$WORK/$key"; else FAILED+=("$key: no figures"); fi
    return 0
}

SKIPPED=""
# rounds <label> <body>: runs the function <body> ROUNDS times, saying which round it is. Every
# round runs every benchmark of the phase once, so a noisy moment costs each of them one sample.
rounds() {
    local r
    [[ ,$PHASES, == *,$3,* ]] || return 0
    for r in $(seq 1 "$ROUNDS"); do
        echo "bench.sh: $1, round $r of $ROUNDS" >&2
        "$2"
    done
}

lo_round() {
    ref lo_udp36 udp-pingpong -s 36
    roce_lat lo_soft_write_lat write_lat --transport soft --roce v2 -d lo
    roce_lat lo_tcp_write_lat write_lat --transport tcp
    ref lo_tcp26 tcp-pingpong -s 26
    ref lo_udp20 udp-pingpong -s 20
    roce_lat lo_soft_send_lat send_lat --transport soft --roce v2 -d lo
    roce_lat lo_tcp_send_lat send_lat --transport tcp
    ref lo_udp32 udp-pingpong -s 32 --reply-size 24
    roce_lat lo_soft_read_lat read_lat --transport soft --roce v2 -d lo
    roce_lat lo_tcp_read_lat read_lat --transport tcp
    sockperf_lat lo_sockperf
    roce_bw lo_tcp_write_bw write_bw --transport tcp
    roce_bw lo_soft_write_bw write_bw --transport soft --roce v2 -d lo
    iperf lo_iperf
    roce_bw lo_soft_send_bw send_bw --transport soft --roce v2 -d lo
    ref lo_tcp_stream tcp-stream -s 64K
    roce_bw lo_soft_read_bw read_bw --transport soft --roce v2 -d lo
}

veth_round() {
    ref veth_pkt76 packet-pingpong -d veth0 -s 76
    roce_lat veth_v1_write_lat write_lat --transport soft --roce v1 --io packet -d veth0
    roce_bw veth_tcp_write_bw write_bw --transport tcp
    roce_bw veth_soft_write_bw write_bw --transport soft --roce v2 -d veth0
    roce_bw veth_soft_send_bw send_bw --transport soft --roce v2 -d veth0
    roce_bw veth_soft_read_bw read_bw --transport soft --roce v2 -d veth0
}

# Congestion signals (issue 29): the same soft v2 write_bw with --validate, unmarked and with 1 % of
# its packets CE-marked, under DCQCN (the study's slow-link parameters, the paper's, ConnectX's
# defaults) and --cc none. What 1 % of marks costs depends on how often they come against DCQCN's
# timers, so on the packet rate (docs/congestion.md, "Goodput under 1 % CE marks"): the phase sends
# RoCE MTU 1024 packets, and with GSO, so that one core sends them without a system call each.
# The namespaces of this phase come up with netns.sh --wire-segments: the veth ends take no
# super-datagrams, so the kernel cuts the client's GSO sends into packets at the device, after the
# client's netfilter hooks, and each packet crosses the veth on its own (the receiving veth does no
# GRO). The marks are made where they arrive, in the server's namespace (a), as a switch before it
# would: there iptables sees packets, not ~20 KB super-datagrams of which 1 % would be 1/20 of 1 % of
# the packets.
#
# ce_marks <share> [codepoint]: the RoCE v2 packets arriving at the server's side marked at random,
# CE (3) as a switch marks, or ECT(0) (2), what they carry already: the unmarked runs take the same
# rule, so both pay the same host path. "off" removes the rule.
ce_marks() {
    "${ON_A[@]}" iptables -t mangle -F PREROUTING
    [[ $1 == off ]] && return 0
    "${ON_A[@]}" iptables -t mangle -A PREROUTING -p udp --dport 4791 -m statistic --mode random \
        --probability "$1" -j ECN --ecn-ip-ect "${2:-3}"
}

# Every run is held to the same offered rate, CE_RATE Gb/s of 1 KB packets (1 Gb/s: 122,000 packets
# a second, a mark every ~820 us), below what one core sends here, so that the unmarked goodput is
# that rate rather than what the CPU managed in that run.
CE_RATE=${CE_RATE:-1}
CE_MTU=1024
CE_BW=(write_bw --transport soft --roce v2 -d veth0 -m "$CE_MTU" --validate --rate_limit "$CE_RATE" --rate_units g)
# DCQCN's rate starts at, and never climbs past, the offered rate (rp_max_rate, as a NIC's line rate
# holds it): left at its default, the rate is the CPU's, a cut to half of that stays above the cap,
# and the cap hides every cut.
CE_MAX=(--cc-param "rp_max_rate=$(awk -v g="$CE_RATE" 'BEGIN { printf "%d", g * 1000 }')")
# DCQCN at the SIGCOMM'15 paper's timing (docs/congestion.md), as the virtual-time tests run it: alpha
# every 55 us with g = 1/256, the rate timer every 55 us, a 10 MB byte counter, F = 5, AI 40 and HAI
# 200 Mb/s, a CNP and a cut per 50 us at most, R_T <- R_C on every cut.
PAPER_CC=(--cc-param rp_dce_tcp_rtt=55 --cc-param rp_dce_tcp_g=1020 --cc-param rp_time_reset=55
    --cc-param rp_byte_reset=10485760 --cc-param rp_threshold=5 --cc-param rp_ai_rate=40
    --cc-param rp_hai_rate=200 --cc-param np_min_time_between_cnps=50
    --cc-param rp_rate_reduce_monitor_period=50 --cc-param rp_clamp_tgt_rate=1)
# DCQCN as roce_compare --congestion runs it on a slow link (CcParams::slow_link): the paper's rules
# with K, T, the least time between CNPs and between cuts at 300 us, R_AI 5 and R_HAI 25 Mb/s.
SLOW_CC=(--cc-param rp_dce_tcp_rtt=300 --cc-param rp_dce_tcp_g=1020 --cc-param rp_time_reset=300
    --cc-param rp_byte_reset=10000000 --cc-param rp_threshold=5 --cc-param rp_ai_rate=5
    --cc-param rp_hai_rate=25 --cc-param np_min_time_between_cnps=300
    --cc-param rp_rate_reduce_monitor_period=300 --cc-param rp_clamp_tgt_rate=1)
ce_round() {
    ce_unmarked
    ce_marks 0.01
    ce_bw ce_dcqcn_slow "${CE_BW[@]}" --cc dcqcn "${SLOW_CC[@]}" "${CE_MAX[@]}"
    ce_bw ce_dcqcn_paper "${CE_BW[@]}" --cc dcqcn "${PAPER_CC[@]}" "${CE_MAX[@]}"
    ce_bw ce_dcqcn "${CE_BW[@]}" --cc dcqcn "${CE_MAX[@]}"
    ce_bw ce_none "${CE_BW[@]}" --cc none
    ce_unmarked
    ce_marks off
    ce_pair ce_dcqcn_slow ce_dcqcn_paper ce_dcqcn ce_none
}

# ce_unmarked: one unmarked run (ECT(0) set by the same rule, so the same host path as the marked).
ce_unmarked() {
    ce_marks 0.01 2
    ce_bw ce_unmarked "${CE_BW[@]}"
}

# ce_bw <key> <test> <args...>: roce_bw, the server writing its JSON too; appends to $WORK/<key>.cc the
# run's "CE marks received, CNPs sent, CNPs handled, rate cuts, packets resent, sequence gaps NAKed"
# (both sides' counters; a packet lost on the way leaves a gap the server NAKs, where a resend after a
# retransmission timeout may only mean the ACK came late).
ce_bw() {
    local key=$1
    rm -f "$WORK/s.json"
    BW_SRV_EXTRA=(--json "$WORK/s.json")
    roce_bw "$@"
    BW_SRV_EXTRA=()
    [[ -s $WORK/s.json && -s $WORK/c.json ]] || return 0
    jq -sr '(.[0].test.counters) as $s | (.[1].test.counters) as $c |
        "\($s.np_ecn_marked_roce_packets) \($s.cc.np_cnp_sent // 0) \($c.cc.rp_cnp_handled // 0) \($c.cc.rp_rate_cuts // 0) \($c.retransmitted_packets) \($s.naks_sent.psn_sequence)"' \
        "$WORK/s.json" "$WORK/c.json" >>"$WORK/$key.cc" 2>/dev/null || true
}

# ce_pair <keys...>: each marked run of this round against the mean of this round's two unmarked runs
# (one before, one after), appended to <key>_pair; the CONGESTION rows take the median of these.
ce_pair() {
    local u k
    u=$(tail -n 2 "$WORK/ce_unmarked" 2>/dev/null | awk '{ s += $1; n++ } END { if (n == 2) print s / 2 }')
    for k in "$@"; do
        [[ -n $u && -s $WORK/$k ]] && tail -n 1 "$WORK/$k" | awk -v u="$u" '{ print $1 / u }' >>"$WORK/${k}_pair"
    done
    return 0
}

veth9k_round() {
    # Latency, 2 B: each soft row beside the floor of its path, at the size of its frame or datagram.
    ref v9k_pkt76 packet-pingpong -d veth0 -s 76
    roce_lat v9k_v1pkt_write_lat write_lat --transport soft --roce v1 --io packet -d veth0
    ref v9k_pkt64 packet-pingpong -d veth0 -s 64
    roce_lat v9k_v2pkt1_write_lat write_lat --transport soft --roce v2 --io packet --no-gso -d veth0
    ref v9k_udp36 udp-pingpong -s 36
    roce_lat v9k_udp_write_lat write_lat --transport soft --roce v2 --io udp -d veth0
    roce_bw v9k_udp_write_bw write_bw --transport soft --roce v2 --io udp -d veth0
    roce_bw v9k_v1pkt_write_bw write_bw --transport soft --roce v1 --io packet -d veth0
    roce_bw v9k_v2pkt1_write_bw write_bw --transport soft --roce v2 --io packet --no-gso -d veth0
    roce_bw v9k_v2pkt_write_bw write_bw --transport soft --roce v2 --io packet -d veth0
    # RoCE's 4096-byte MTU: BTH 12 + 4096 + ICRC 4 in UDP; GRH 40 + the same after Ethernet (v1),
    # IPv4 20 + UDP 8 + the same (v2).
    ref v9k_ref_udp udp-stream -s 4112
    ref v9k_ref_pkt packet-stream -d veth0 -s 4152
    ref v9k_ref_pkt4140 packet-stream -d veth0 -s 4140
}

use_lo
rounds "lo (${DURATION} s per run)" lo_round lo
if [[ $VETH == 0 ]]; then
    SKIPPED="VETH=0"
elif [[ $(id -u) != 0 ]]; then
    SKIPPED="needs root for scripts/netns.sh and AF_PACKET"
elif ! use_veth 1500; then
    SKIPPED="scripts/netns.sh up failed"
    FAILED+=("scripts/netns.sh up")
else
    rounds "veth MTU 1500" veth_round veth
    if [[ ,$PHASES, != *,congestion,* ]]; then
        :
    elif ! command -v iptables >/dev/null; then
        FAILED+=("iptables (apt-get install -y iptables) for the CONGESTION rows")
    elif use_veth 1500 --wire-segments; then
        rounds "veth MTU 1500 cut into packets at the device, CE marks" ce_round congestion
    else
        FAILED+=("scripts/netns.sh up --mtu 1500 --wire-segments")
    fi
    if use_veth 9000; then
        rounds "veth MTU 9000" veth9k_round veth9k
    else
        FAILED+=("scripts/netns.sh up --mtu 9000")
    fi
fi

# ---- the table ----

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print ""; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# figures <key> [scale]: the per-column medians over the rounds, each times scale.
figures() {
    local f=$WORK/$1 scale=${2:-1} cols i out=()
    [[ -s $f ]] || return 0
    cols=$(head -n 1 "$f" | wc -w)
    for i in $(seq 1 "$cols"); do
        out+=("$(cut -d' ' -f"$i" "$f" | median | awk -v s="$scale" '{ print $1 * s }')")
    done
    echo "${out[*]}"
}

show() { # show <figures...>: "9.81 / 12.1 / 302" (3 significant digits or more) or "24.10"
    if (($# == 0)); then echo "n/a"; else awk -v a="$*" 'BEGIN { n = split(a, v, " "); s = ""
        for (i = 1; i <= n; i++) s = s (i > 1 ? " / " : "") sprintf(v[i] >= 100 ? "%.0f" : v[i] >= 10 ? "%.1f" : "%.2f", v[i]); print s }'; fi
}

# ratio <ours key> <ref key> [ref scale]: the median over rounds of ours / reference, each from the same
# round (run back to back, so a round that the machine slowed counts against both); the ratio of the
# medians when the two did not run the same rounds.
ratio() {
    local a=$WORK/$1 b=$WORK/$2 scale=${3:-1}
    if [[ -s ${a}_pair ]]; then # paired with the runs either side of it (ce_pair): their ratios' median
        median <"${a}_pair" | awk '{ printf "%.2f", $1 }'
    elif [[ -s $a && -s $b && $(wc -l <"$a") -eq $(wc -l <"$b") ]]; then
        paste -d' ' <(cut -d' ' -f1 "$a") <(cut -d' ' -f1 "$b") |
            awk -v s="$scale" '$2 * s > 0 { print $1 / ($2 * s) }' | median | awk '{ printf "%.2f", $1 }'
    else
        awk -v a="$4" -v b="$5" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'
    fi
}

# diff <ours key> <ref key>: the median over rounds of ours - reference, each from the same round
# (microseconds for latency); the difference of the medians when the two did not run the same rounds.
diff_of() {
    local a=$WORK/$1 b=$WORK/$2
    if [[ -s $a && -s $b && $(wc -l <"$a") -eq $(wc -l <"$b") ]]; then
        paste -d' ' <(cut -d' ' -f1 "$a") <(cut -d' ' -f1 "$b") |
            awk '{ print $1 - $2 }' | median | awk '{ printf "%+.2f", $1 }'
    else
        awk -v a="$3" -v b="$4" 'BEGIN { printf "%+.2f", a - b }'
    fi
}

ROWS=0 MISSES=0 PASSES=0
# row <label> <ours key> <ref key> <op> <target> [ref scale]: op is <= or >= (a ratio's target),
# within (a ratio between LO-HI), diff<= (ours - reference, in the figures' unit, at most the
# target), info or secondary.
row() {
    local label=$1 ours=$2 theirs=$3 op=$4 target=$5 scale=${6:-1} o t ratio verdict tgt
    read -r -a o <<<"$(figures "$ours")"
    read -r -a t <<<"$(figures "$theirs" "$scale")"
    tgt="$op $target"
    case $op in
        info | secondary) tgt="-" ;;
        within) tgt="$target" ;;
        diff\<=) tgt="<= +$target" ;;
    esac
    if ((${#o[@]} == 0 || ${#t[@]} == 0)); then
        ratio="-"
        case "$ours $theirs" in
            *veth* | *v9k*) verdict=${SKIPPED:+skipped}; verdict=${verdict:-not run} ;;
            *) verdict="not run" ;;
        esac
    elif [[ $op == "diff<=" ]]; then
        ratio=$(diff_of "$ours" "$theirs" "${o[0]}" "${t[0]}")
        verdict=$(awk -v r="$ratio" -v g="$target" 'BEGIN { print (r + 0 <= g + 0) ? "PASS" : "MISS" }')
    else
        ratio=$(ratio "$ours" "$theirs" "$scale" "${o[0]}" "${t[0]}")
        case $op in
            "<=") verdict=$(awk -v r="$ratio" -v g="$target" 'BEGIN { print (r != "-" && r <= g) ? "PASS" : "MISS" }') ;;
            ">=") verdict=$(awk -v r="$ratio" -v g="$target" 'BEGIN { print (r != "-" && r >= g) ? "PASS" : "MISS" }') ;;
            within) verdict=$(awk -v r="$ratio" -v g="$target" 'BEGIN { split(g, b, "-")
                print (r != "-" && r >= b[1] && r <= b[2]) ? "PASS" : "MISS" }') ;;
            *) verdict=$op ;;
        esac
    fi
    [[ $verdict == MISS ]] && MISSES=$((MISSES + 1))
    [[ $verdict == PASS ]] && PASSES=$((PASSES + 1))
    [[ $op == "<=" || $op == ">=" || $op == within || $op == "diff<=" ]] && ROWS=$((ROWS + 1))
    printf "%-72s %-22s %-22s %6s  %-7s %s\n" "$label" "$(show "${o[@]}")" "$(show "${t[@]}")" "$ratio" "$tgt" "$verdict"
}

# ce_counters: under the CONGESTION rows, per run the medians over the rounds of what the counters
# saw (ce_bw), and whether the unmarked runs reached CE_RATE (else the ratios compare what the CPU
# managed, not DCQCN against none).
ce_counters() {
    local k u f=()
    for k in ce_unmarked ce_dcqcn_slow ce_dcqcn_paper ce_dcqcn ce_none; do
        [[ -s $WORK/$k.cc ]] || continue
        ((${#f[@]})) || echo "  counters, medians per run: CE marks received / CNPs sent / CNPs handled / rate cuts / packets resent / gaps NAKed (lost)"
        read -r -a f <<<"$(figures "$k.cc")"
        ((${#f[@]} == 6)) && printf "    %-16s %s / %s / %s / %s / %s / %s\n" "$k" "${f[@]}"
    done
    u=$(figures ce_unmarked)
    [[ -n $u ]] && awk -v u="$u" -v r="$CE_RATE" 'BEGIN { if (u < 0.95 * r)
        printf "  the unmarked runs reached %.2f of %s Gb/s: the CPU held them, so the ratios above compare CPU-bound runs\n", u, r }'
    return 0
}

echo
echo "bench.sh: medians of $ROUNDS round(s) of $DURATION s; a ratio is the median of each round's ours / reference (run back to back);"
echo "  servers on core $SERVER_CPU, clients on core $CLIENT_CPU; [the link crossed]"
printf "%-72s %-22s %-22s %6s  %-7s %s\n" "LATENCY, us one-way (read_lat: round trip)" "ours med/p99/p99.9" "reference" "ratio" "target" "result"
row "soft v2 write_lat 2 B / roce_ref udp-pingpong 36 B [lo]" lo_soft_write_lat lo_udp36 "<=" 1.2
row "soft v2 send_lat 2 B / roce_ref udp-pingpong 20 B [lo]" lo_soft_send_lat lo_udp20 "<=" 1.2
row "soft v2 read_lat 2 B / roce_ref udp-pingpong 32+24 B RTT [lo]" lo_soft_read_lat lo_udp32 "<=" 1.2 2
row "soft v2 write_lat 2 B / roceperf tcp write_lat [lo]" lo_soft_write_lat lo_tcp_write_lat "<=" 0.75
row "soft v2 send_lat 2 B / roceperf tcp send_lat [lo]" lo_soft_send_lat lo_tcp_send_lat "<=" 0.75
row "soft v2 read_lat 2 B / roceperf tcp read_lat [lo]" lo_soft_read_lat lo_tcp_read_lat "<=" 0.75
row "tcp write_lat 2 B / roce_ref tcp-pingpong 26 B [lo]" lo_tcp_write_lat lo_tcp26 "<=" 1.1
row "soft v1 AF_PACKET write_lat 2 B / roce_ref packet-pingpong 76 B [veth]" veth_v1_write_lat veth_pkt76 "<=" 1.2
row "tcp write_lat 2 B / sockperf tcp ping-pong (epoll: not a floor) [lo]" lo_tcp_write_lat lo_sockperf secondary -
printf "%-72s %-22s %-22s %6s  %-7s %s\n" "ONE PATH, us one-way: v2 --io packet --no-gso moves as v1 [veth 9000]" "ours med/p99/p99.9" "reference" "ratio" "target" "result"
row "soft v2 AF_PACKET write_lat 2 B / soft v1 AF_PACKET write_lat 2 B" v9k_v2pkt1_write_lat v9k_v1pkt_write_lat within 0.9-1.1
row "soft v1 AF_PACKET write_lat 2 B - roce_ref packet-pingpong 76 B" v9k_v1pkt_write_lat v9k_pkt76 "diff<=" 0.5
row "soft v2 AF_PACKET write_lat 2 B - roce_ref packet-pingpong 64 B" v9k_v2pkt1_write_lat v9k_pkt64 "diff<=" 0.5
row "soft v2 UDP write_lat 2 B - roce_ref udp-pingpong 36 B" v9k_udp_write_lat v9k_udp36 "diff<=" 0.5
row "soft v2 AF_PACKET write_bw 64 KiB / soft v1 AF_PACKET write_bw (Gb/s)" v9k_v2pkt1_write_bw v9k_v1pkt_write_bw within 0.9-1.1
printf "%-72s %-22s %-22s %6s  %-7s %s\n" "BANDWIDTH, Gb/s, 64 KiB messages" "ours" "reference" "ratio" "target" "result"
row "soft v2 write_bw / roceperf tcp write_bw [lo]" lo_soft_write_bw lo_tcp_write_bw ">=" 1.0
row "soft v2 send_bw / roceperf tcp write_bw [lo]" lo_soft_send_bw lo_tcp_write_bw ">=" 1.0
row "soft v2 read_bw / roceperf tcp write_bw [lo]" lo_soft_read_bw lo_tcp_write_bw ">=" 1.0
row "soft v2 write_bw / roceperf tcp write_bw [veth 1500]" veth_soft_write_bw veth_tcp_write_bw ">=" 1.0
row "soft v2 send_bw / roceperf tcp write_bw [veth 1500]" veth_soft_send_bw veth_tcp_write_bw ">=" 1.0
row "soft v2 read_bw / roceperf tcp write_bw [veth 1500]" veth_soft_read_bw veth_tcp_write_bw ">=" 1.0
row "soft v1 AF_PACKET write_bw / soft v2 UDP write_bw [veth 9000]" v9k_v1pkt_write_bw v9k_udp_write_bw ">=" 0.5
row "soft v2 AF_PACKET (super-frames) write_bw / soft v2 UDP write_bw [veth 9000]" v9k_v2pkt_write_bw v9k_udp_write_bw ">=" 0.5
row "tcp write_bw / iperf3 -l 64K [lo]" lo_tcp_write_bw lo_iperf ">=" 1.0
row "roce_ref packet-stream 4152 B / udp-stream 4112 B [veth 9000]" v9k_ref_pkt v9k_ref_udp info -
row "soft v1 AF_PACKET write_bw / roce_ref packet-stream 4152 B [veth 9000]" v9k_v1pkt_write_bw v9k_ref_pkt info -
row "soft v2 AF_PACKET --no-gso write_bw / roce_ref packet-stream 4140 B [veth 9000]" v9k_v2pkt1_write_bw v9k_ref_pkt4140 info -
row "soft v2 UDP write_bw / roce_ref udp-stream 4112 B [veth 9000]" v9k_udp_write_bw v9k_ref_udp info -
row "tcp write_bw / roce_ref tcp-stream 64K [lo]" lo_tcp_write_bw lo_tcp_stream info -
row "iperf3 -l 64K / roce_ref tcp-stream 64K [lo]" lo_iperf lo_tcp_stream secondary -
printf "%-72s %-22s %-22s %6s  %-7s %s\n" "CONGESTION, Gb/s, 64 KiB write_bw -m $CE_MTU --validate --rate_limit ${CE_RATE}G, 1% of packets CE" "marked" "unmarked" "ratio" "target" "result"
echo "  [veth 1500, GSO sends cut into packets at the device, marked on arrival; every run the same path and rate]"
# ce_v <figure>: what virtual time gives at the default CE_RATE (the cc tests' marked_goodput at 1 Gb/s
# of 1 KB packets; docs/congestion.md), for the row's label; nothing at another rate.
ce_v() { [[ $CE_RATE == 1 ]] && echo "; virtual $1"; }
echo "  (each DCQCN row with what virtual time gives at 1 Gb/s; ConnectX's is the control for the pacer's host cost)"
row "soft v2 --cc dcqcn, study's slow link (300 us$(ce_v 0.61)) / unmarked" ce_dcqcn_slow ce_unmarked "<=" 0.8
row "soft v2 --cc dcqcn, the paper's (55 us$(ce_v 1.00)) / unmarked" ce_dcqcn_paper ce_unmarked info -
row "soft v2 --cc dcqcn, ConnectX's (firmware defaults$(ce_v 1.00)) / unmarked" ce_dcqcn ce_unmarked info -
row "soft v2 --cc none / unmarked" ce_none ce_unmarked within 0.9-1.1
ce_counters
echo "RESOURCES, 64 KiB bandwidth runs: CPU time (user+sys) per KiB and per packet of the measured window, each side (client | server); peak RSS; share of it in the kernel"
printf "%-44s %-20s %-20s %-20s %s\n" "run [link]" "ns/KiB c | s" "ns/packet c | s" "peak RSS MiB c | s" "sys % c | s"
resrow() { # resrow <label> <key>
    local f
    read -r -a f <<<"$(figures "$1.res" 2>/dev/null)"
    ((${#f[@]} == 8)) || return 0
    printf "%-44s %-20s %-20s %-20s %s\n" "$2" "${f[0]} | ${f[1]}" "${f[2]} | ${f[3]}" "${f[4]} | ${f[5]}" "${f[6]} | ${f[7]}"
}
resrow lo_tcp_write_bw "tcp write_bw [lo]"
resrow lo_soft_write_bw "soft v2 write_bw [lo]"
resrow lo_soft_send_bw "soft v2 send_bw [lo]"
resrow lo_soft_read_bw "soft v2 read_bw [lo]"
resrow veth_tcp_write_bw "tcp write_bw [veth 1500]"
resrow veth_soft_write_bw "soft v2 write_bw [veth 1500]"
resrow v9k_udp_write_bw "soft v2 UDP write_bw [veth 9000]"
resrow v9k_v1pkt_write_bw "soft v1 AF_PACKET write_bw [veth 9000]"
resrow v9k_v2pkt1_write_bw "soft v2 AF_PACKET --no-gso write_bw [veth 9000]"
resrow v9k_v2pkt_write_bw "soft v2 AF_PACKET super-frames write_bw [veth 9000]"
echo "  both sides busy-poll, so CPU time is about the run's length: per KiB it is the inverse of what the side moved,"
echo "  and the sys share says how much of it the kernel took. CPU counts the whole process (set-up, warm-up);"
echo "  the goal for peak RSS is the buffers (128 KiB per queue pair at 64 KiB) + 32 MiB."
echo "references: roce_ref (this repo) busy-polls pinned non-blocking sockets; udp-pingpong sizes are the UDP payloads"
echo "  of the RoCE v2 packets (BTH+RETH+ICRC), tcp-pingpong the tcp transport's 24-byte header + 2 B, packet-pingpong"
echo "  a RoCE v1 (76 B) or v2/IPv4 (64 B) frame after its Ethernet header; latency one-way = RTT/2 except read_lat"
echo "  (RTT, against the RTT). A diff<= row's figure is ours - reference in us, the median of each round's difference."
[[ -n $SKIPPED ]] && echo "veth rows skipped: $SKIPPED"
echo "bench.sh: $PASSES of $ROWS targets met, $MISSES missed, $((ROWS - PASSES - MISSES)) not run"
if ((${#FAILED[@]})); then
    echo "bench.sh: failed to run: ${FAILED[*]}" >&2
    exit 1
fi
exit 0
