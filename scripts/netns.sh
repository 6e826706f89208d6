#!/usr/bin/env bash
# Two "hosts" on one machine: network namespaces <prefix>a and <prefix>b joined by a veth pair.
#
#   netns.sh up [--loss P] [--delay D] [--duplicate P] [--reorder P] [--corrupt P] [--mtu M] [--wire-segments] [--tcp]
#   netns.sh netem [--loss P] [--delay D] [--duplicate P] [--reorder P] [--corrupt P]   (change impairments)
#   netns.sh exec a|b CMD...       run CMD inside namespace a or b
#   netns.sh status                show the namespaces, addresses and qdiscs
#   netns.sh down                  delete both namespaces (and with them the veth pair)
#
# Inside each namespace the veth end is called veth0 (so `-d veth0` works on both sides):
#   a: 10.77.0.1/24  fd77::1/64        b: 10.77.0.2/24  fd77::2/64   (IPv6 without DAD: usable at once)
# Impairments are tc netem on both veth ends, so they hit both directions: P as in netem ("1%"),
# D a delay ("100us", "1ms"). --reorder needs a delay to reorder anything; without --delay it adds 1ms.
# On a kernel without netem, --loss and --duplicate fall back to iptables in each namespace (UDP port
# 4791, so RoCE v2 through a UDP socket, and with --tcp the TCP baseline too, so both meet the same
# drop: random DROP on arrival, INPUT, so the sender sees no error, and TEE of what leaves, OUTPUT,
# to the peer for a copy);
# AF_PACKET frames (RoCE v1, --io packet) bypass iptables. --delay, --reorder and --corrupt have no
# such fallback: use roceperf's own --impair loss=1%,dup=1%,reorder=5% instead.
# --tcp: the iptables loss also hits TCP (every port but --tcp-spare PORT, default 18515, the
# out-of-band channel's), for a TCP baseline across the same lossy link. Super-packets (GSO/TSO) are
# dropped as a whole by iptables: add --wire-segments so every loss decision is about one packet.
# --wire-segments: the veth ends take no GSO super-datagrams (gso_max_segs 1, gso_max_size 256: only a
# super-frame of tiny packets, under 256 bytes in all, crosses whole), so the kernel cuts them
# into the packets a NIC without segmentation offload would send, and captures show each one.
#
# Names come from $ROCEPERF_NETNS_PREFIX (default "rp"): namespaces rpa and rpb. Tests pick a unique
# prefix each so that parallel runs do not clash. Every command is idempotent: `up` on an existing
# pair rebuilds it, `down` on a missing one does nothing. Needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN).
set -euo pipefail

prefix="${ROCEPERF_NETNS_PREFIX:-rp}"
ns_a="${prefix}a"
ns_b="${prefix}b"
dev=veth0
ip4_a=10.77.0.1 ip4_b=10.77.0.2 ip6_a=fd77::1 ip6_b=fd77::2

die() { echo "netns.sh: $*" >&2; exit 2; }

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 2; }

need_root() {
  [[ $(id -u) -eq 0 ]] || die "needs root to create network namespaces and veth pairs (CAP_SYS_ADMIN, CAP_NET_ADMIN): run it with sudo"
  command -v ip >/dev/null || die "the 'ip' command is missing: apt-get install -y iproute2"
}

[[ ${#prefix} -le 12 && $prefix =~ ^[A-Za-z0-9_-]+$ ]] ||
  die "ROCEPERF_NETNS_PREFIX='$prefix' must be 1-12 characters of [A-Za-z0-9_-]"

ns_exists() { ip netns list | awk '{print $1}' | grep -qx "$1"; }

ns_of() {
  case "$1" in
    a) echo "$ns_a" ;;
    b) echo "$ns_b" ;;
    *) die "unknown side '$1': use a or b" ;;
  esac
}

# Parses impairment flags into the netem argument list in $netem_args.
parse_netem() {
  loss="" delay="" dup="" reorder="" corrupt=""
  mtu="" wire_segments="" tcp="" tcp_spare=18515
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --loss) loss="${2:?--loss needs a value such as 1%}"; shift 2 ;;
      --delay) delay="${2:?--delay needs a value such as 100us}"; shift 2 ;;
      --duplicate) dup="${2:?--duplicate needs a value such as 1%}"; shift 2 ;;
      --reorder) reorder="${2:?--reorder needs a value such as 25%}"; shift 2 ;;
      --corrupt) corrupt="${2:?--corrupt needs a value such as 0.1%}"; shift 2 ;;
      --mtu) mtu="${2:?--mtu needs a number of bytes}"; shift 2 ;;
      --wire-segments) wire_segments=1; shift ;;
      --tcp) tcp=1; shift ;;
      --tcp-spare) tcp_spare="${2:?--tcp-spare needs a port}"; shift 2 ;;
      -h|--help) usage ;;
      *) die "unknown option '$1' (see netns.sh --help)" ;;
    esac
  done
  if [[ -n $reorder && -z $delay ]]; then delay=1ms; fi
  netem_args=()
  [[ -n $delay ]] && netem_args+=(delay "$delay")
  [[ -n $loss ]] && netem_args+=(loss "$loss")
  [[ -n $dup ]] && netem_args+=(duplicate "$dup")
  [[ -n $reorder ]] && netem_args+=(reorder "$reorder")
  [[ -n $corrupt ]] && netem_args+=(corrupt "$corrupt")
  loss_p="" dup_p=""
  [[ -n $loss ]] && loss_p=$(probability "$loss")
  [[ -n $dup ]] && dup_p=$(probability "$dup")
  return 0
}

# "1%" -> 0.01 for iptables' statistic match.
probability() { awk -v p="${1%\%}" 'BEGIN { if (p !~ /^[0-9.]+$/ || p > 100) exit 1; printf "%.6f", p / 100 }' ||
  die "'$1' is not a percentage such as 1%"; }

# Loss and duplication of RoCE v2 over UDP with iptables, for kernels without netem.
apply_iptables() {
  local ipt ip6t ns peer4 peer6 rule
  ipt=$(command -v iptables-legacy || command -v iptables) ||
    die "this kernel has no netem qdisc and iptables is missing for the --loss/--duplicate fallback: apt-get install -y iptables"
  ip6t=$(command -v ip6tables-legacy || command -v ip6tables)
  for ns in "$ns_a" "$ns_b"; do
    if [[ $ns == "$ns_a" ]]; then peer4=$ip4_b peer6=$ip6_b; else peer4=$ip4_a peer6=$ip6_a; fi
    ip netns exec "$ns" "$ipt" -F OUTPUT
    ip netns exec "$ns" "$ip6t" -F OUTPUT
    ip netns exec "$ns" "$ipt" -F INPUT
    ip netns exec "$ns" "$ip6t" -F INPUT
    rule=(-p udp --dport 4791 -m statistic --mode random --probability)
    if [[ -n $loss_p ]]; then
      ip netns exec "$ns" "$ipt" -A INPUT "${rule[@]}" "$loss_p" -j DROP
      ip netns exec "$ns" "$ip6t" -A INPUT "${rule[@]}" "$loss_p" -j DROP
      if [[ -n $tcp ]]; then
        local trule=(-p tcp ! --dport "$tcp_spare" ! --sport "$tcp_spare" -m statistic --mode random --probability "$loss_p" -j DROP)
        ip netns exec "$ns" "$ipt" -A INPUT "${trule[@]}"
        ip netns exec "$ns" "$ip6t" -A INPUT "${trule[@]}"
      fi
    fi
    if [[ -n $dup_p ]]; then
      ip netns exec "$ns" "$ipt" -A OUTPUT "${rule[@]}" "$dup_p" -j TEE --gateway "$peer4"
      ip netns exec "$ns" "$ip6t" -A OUTPUT "${rule[@]}" "$dup_p" -j TEE --gateway "$peer6"
    fi
  done
  fallback="iptables on UDP 4791${tcp:+ and TCP but port $tcp_spare} (no netem in this kernel):${loss_p:+ drop $loss_p}${dup_p:+ duplicate $dup_p}"
}

apply_netem() {
  local ns t
  fallback=""
  for ns in "$ns_a" "$ns_b"; do
    ip -n "$ns" link show "$dev" >/dev/null 2>&1 || die "namespace $ns has no $dev; run 'netns.sh up' first"
    tc -n "$ns" qdisc del dev "$dev" root 2>/dev/null || true
    # Whatever an earlier iptables fallback added goes too.
    for t in iptables-legacy ip6tables-legacy; do
      command -v $t >/dev/null && { ip netns exec "$ns" $t -F OUTPUT; ip netns exec "$ns" $t -F INPUT; } 2>/dev/null || true
    done
    if [[ ${#netem_args[@]} -gt 0 ]]; then
      local err
      if ! err=$(tc -n "$ns" qdisc add dev "$dev" root netem "${netem_args[@]}" 2>&1); then
        if [[ $err == *"qdisc kind is unknown"* ]]; then
          if [[ -z $delay && -z $reorder && -z $corrupt ]]; then
            apply_iptables
            return 0
          fi
          die "this kernel ($(uname -r)) has no netem qdisc (CONFIG_NET_SCH_NETEM / module sch_netem), so --delay/--reorder/--corrupt cannot be applied (--loss and --duplicate alone fall back to iptables); use ROCEPERF_IMPAIR=loss=1%,duplicate=1%,reorder=5% in roceperf instead. The namespaces stay up without impairment ('netns.sh down' removes them)"
        fi
        die "tc qdisc add dev $dev root netem ${netem_args[*]} in $ns failed: $err"
      fi
    fi
  done
}

cmd_down() {
  need_root
  local ns
  for ns in "$ns_a" "$ns_b"; do
    if ns_exists "$ns"; then ip netns del "$ns"; fi
  done
}

cmd_up() {
  need_root
  parse_netem "$@"
  cmd_down
  ip netns add "$ns_a"
  ip netns add "$ns_b"
  # Create both ends directly inside their namespaces, so nothing ever appears in the host's.
  ip link add "$dev" netns "$ns_a" type veth peer name "$dev" netns "$ns_b"
  local ns ip4 ip6
  for side in a b; do
    ns=$(ns_of $side)
    if [[ $side == a ]]; then ip4=$ip4_a ip6=$ip6_a; else ip4=$ip4_b ip6=$ip6_b; fi
    ip -n "$ns" link set lo up
    [[ -n $mtu ]] && ip -n "$ns" link set "$dev" mtu "$mtu"
    # gso_max_segs catches super-datagrams that say how many packets they hold; gso_max_size the
    # ones that do not yet (AF_PACKET virtio_net_hdr super-frames) from 256 bytes up.
    [[ -n $wire_segments ]] && ip -n "$ns" link set "$dev" gso_max_segs 1 gso_max_size 256
    ip -n "$ns" addr add "$ip4/24" dev "$dev"
    ip -n "$ns" addr add "$ip6/64" dev "$dev" nodad
    ip -n "$ns" link set "$dev" up
  done
  apply_netem
  local impaired=""
  if [[ -n $fallback ]]; then impaired="; $fallback"
  elif [[ ${#netem_args[@]} -gt 0 ]]; then impaired="; netem: ${netem_args[*]}"; fi
  cat <<EOT
namespaces $ns_a ($ip4_a, $ip6_a) and $ns_b ($ip4_b, $ip6_b) joined by $dev${mtu:+ (MTU $mtu)}${wire_segments:+ (no GSO: wire-sized packets)}$impaired
run a command in each:
  $0 exec a roce_write_bw -d $dev --transport soft
  $0 exec b roce_write_bw -d $dev --transport soft $ip4_a
(or: ip netns exec $ns_a CMD)   tear down: $0 down
EOT
}

cmd_netem() {
  need_root
  parse_netem "$@"
  [[ -z $mtu ]] || die "--mtu only applies to 'up'"
  [[ -z $wire_segments ]] || die "--wire-segments only applies to 'up'"
  apply_netem
  echo "impairment on $ns_a/$dev and $ns_b/$dev: ${fallback:-netem ${netem_args[*]:-none}}"
}

cmd_exec() {
  need_root
  [[ $# -ge 2 ]] || die "usage: netns.sh exec a|b CMD..."
  local ns
  ns=$(ns_of "$1")
  shift
  ns_exists "$ns" || die "namespace $ns does not exist; run 'netns.sh up' first"
  exec ip netns exec "$ns" "$@"
}

cmd_status() {
  local ns
  for ns in "$ns_a" "$ns_b"; do
    if ns_exists "$ns"; then
      echo "== $ns"
      ip -n "$ns" -br addr show dev "$dev"
      tc -n "$ns" qdisc show dev "$dev"
    else
      echo "== $ns: absent"
    fi
  done
}

[[ $# -ge 1 ]] || usage
cmd="$1"
shift
case "$cmd" in
  up) cmd_up "$@" ;;
  down) cmd_down ;;
  netem) cmd_netem "$@" ;;
  exec) cmd_exec "$@" ;;
  status) cmd_status ;;
  -h|--help|help) usage ;;
  *) die "unknown command '$cmd': use up, down, netem, exec or status" ;;
esac
