#!/usr/bin/env bash
# Priority-latency benchmark of terrapin-switch: the `make demo` reserved run
# without Mininet and the controller, for iterating on the switch's latency.
#
#   bash toolchain/bench/prio-latency.sh            (as root)
#   RUNS=5 SECONDS_RUN=20 SWITCH_ARGS="--tx sendmmsg" bash toolchain/bench/prio-latency.sh
#
# Hosts a1, a2, a3 and b1 (namespaces tdevla1.. tdevlb1, MTU 4500, no
# offloads) hang off terrapin-switch (namespace tdevlsw) running
# bench/prio_fwd.p4, every port paced at RATE (default 100 Mbit/s), 8
# priority queues of 64 packets. a2 and a3 each send iperf3 UDP at the line
# rate (4,400-byte datagrams) to b1, so b1's port is offered twice what it
# carries; a1 sends the demo's video (30 frames/s, 8–21.7 kB frames in
# ≤ 4,500-byte packets sent back to back, token bucket ρ = 1,125,000 B/s,
# σ = 27,000 B, SCHED_FIFO) marked EF, which the program puts in queue 6.
# Every process runs in a session of its own, as Mininet starts them (so each
# is its own scheduling autogroup, where a thread's nice value counts only
# within its group). Prints per run the video's frame latency (last packet's kernel receive
# time − frame start) against the demo's bound (BOUND_MS, 2.581 = (σ + L_max
# + control burst)/C) and the switch's deepest queue 6, with the latest
# frames packet by packet.
#
# TRACE=1 records scheduler events with ftrace and stops at the first frame
# over the bound; the trace is left in $OUT/trace.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BIN=${BIN:-$ROOT/build/bin}
RUNS=${RUNS:-1}
SECONDS_RUN=${SECONDS_RUN:-20}
RATE=${RATE:-100M}
BOUND_MS=${BOUND_MS:-2.581}
SWITCH_ARGS=${SWITCH_ARGS:-}
FLOOD_BPS=${FLOOD_BPS:-100M}
TRACE=${TRACE:-0}
OUT=${OUT:-$ROOT/build/bench/prio-latency}
P4C=${P4C:-$BIN/terrapin-p4c}
mkdir -p "$OUT"

if [[ $EUID -ne 0 ]]; then echo "prio-latency: needs root (namespaces, AF_PACKET)" >&2; exit 1; fi
if [[ ${BUILD:-1} == 1 ]]; then (cd toolchain && go build -o "$BIN/" ./cmd/terrapin-trafgen ./cmd/terrapin-switch); fi
"$P4C" --target bmv2 --arch v1model -o "$OUT/prio_fwd.json" toolchain/bench/prio_fwd.p4

NS_SW=tdevlsw
HOSTS=(a1 a2 a3 b1)
declare -A PORT=([a1]=1 [a2]=2 [a3]=3 [b1]=4)
declare -A ADDR=([a1]=10.77.0.1 [a2]=10.77.0.2 [a3]=10.77.0.3 [b1]=10.77.0.10)
declare -A MAC=([a1]=02:77:00:00:00:01 [a2]=02:77:00:00:00:02 [a3]=02:77:00:00:00:03 [b1]=02:77:00:00:00:10)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  PIDS=()
  for ns in $NS_SW "${HOSTS[@]/#/tdevl}"; do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
}
trap cleanup EXIT
trap 'echo "prio-latency: interrupted" >&2; exit 130' INT
trap 'exit 143' TERM
cleanup
T=/sys/kernel/tracing
if [[ $TRACE == 1 ]]; then
  [[ -d $T/events ]] || mount -t tracefs nodev $T
  # The receiver stops the trace through these (a namespace's /sys has no tracefs).
  exec 7>>$T/trace_marker 8>>$T/tracing_on
fi

ip netns add $NS_SW
ip -n $NS_SW link set lo up
SW_IFS=()
for h in "${HOSTS[@]}"; do
  ns=tdevl$h p=${PORT[$h]}
  ip netns add "$ns"
  ip link add "eth0" netns "$ns" address "${MAC[$h]}" type veth peer name "s$p" netns $NS_SW
  for side in "$ns eth0" "$NS_SW s$p"; do
    set -- $side
    ip -n "$1" link set "$2" mtu 4500 up
    ip netns exec "$1" ethtool -K "$2" tx off rx off tso off gso off gro off >/dev/null 2>&1 || true
  done
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "${ADDR[$h]}/24" dev eth0
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
  SW_IFS+=(-i "$p@s$p" --port-rate "$p:$RATE")
done
for h in "${HOSTS[@]}"; do
  for o in "${HOSTS[@]}"; do
    [[ $h == "$o" ]] || ip -n "tdevl$h" neigh replace "${ADDR[$o]}" lladdr "${MAC[$o]}" dev eth0
  done
done

metric() { # name queue: a sample of b1's port (4)
  { ip netns exec $NS_SW curl -s http://127.0.0.1:19510/metrics || true; } |
    awk -v n="$1" -v q="$2" '$1 ~ "^"n"\\{port=\"4\"" && $1 ~ "queue=\""q"\"" {print $2}'
}

echo "# $(nproc) cores, $(uname -r); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# switch args: ${SWITCH_ARGS:-(none)}"
for run in $(seq 1 "$RUNS"); do
  setsid ip netns exec $NS_SW "$BIN/terrapin-switch" "$OUT/prio_fwd.json" "${SW_IFS[@]}" --cpu-port 255 \
    --priority-queues 8 --queue-capacity 64 --grpc-server-addr 127.0.0.1:19511 \
    --metrics-addr 127.0.0.1:19510 $SWITCH_ARGS >"$OUT/switch.log" 2>&1 &
  SW=$!
  PIDS+=($SW)
  sleep 1
  kill -0 $SW 2>/dev/null || { echo "switch failed to start:"; cat "$OUT/switch.log"; exit 1; }
  if [[ -n ${CHRT:-} ]]; then # experiment: "PATTERN:POLICYARGS ..." e.g. "tp-tx:f:5 tp-rx:f:4"
    for spec in $CHRT; do
      IFS=: read -r name policy prio <<<"$spec"
      for t in /proc/$SW/task/*; do
        if [[ $(cat $t/comm) == $name* ]]; then chrt -$policy -p "$prio" ${t##*/} >/dev/null; fi
      done
    done
  fi
  setsid ip netns exec tdevlb1 iperf3 -s -1 -p 5201 >/dev/null 2>&1 &
  PIDS+=($!)
  setsid ip netns exec tdevlb1 iperf3 -s -1 -p 5202 >/dev/null 2>&1 &
  PIDS+=($!)
  setsid ip netns exec tdevlb1 "$BIN/terrapin-trafgen" video-recv --seconds $((SECONDS_RUN + 4)) --bound-ms "$BOUND_MS" \
    $([[ $TRACE == 1 ]] && echo --trace-marker-fd 7 --trace-stop-fd 8) >"$OUT/recv.txt" 2>&1 &
  RECV=$!
  PIDS+=($RECV)
  sleep 1
  setsid ip netns exec tdevla2 iperf3 -c 10.77.0.10 -u -b "$FLOOD_BPS" -l 4400 -t $((SECONDS_RUN + 2)) -p 5201 >/dev/null 2>&1 &
  PIDS+=($!)
  setsid ip netns exec tdevla3 iperf3 -c 10.77.0.10 -u -b "$FLOOD_BPS" -l 4400 -t $((SECONDS_RUN + 2)) -p 5202 >/dev/null 2>&1 &
  PIDS+=($!)
  sleep 1
  if [[ $TRACE == 1 ]]; then
    echo 0 >$T/tracing_on
    echo >$T/trace
    echo 65536 >$T/buffer_size_kb
    echo mono >$T/trace_clock
    echo 'sched:sched_switch sched:sched_wakeup sched:sched_waking irq:softirq_entry irq:softirq_exit net:net_dev_xmit net:netif_rx' >$T/set_event
    echo 1 >$T/tracing_on
  fi
  steal0=$(awk 'NR == 1 {print $9}' /proc/stat)
  setsid -w ip netns exec tdevla1 "$BIN/terrapin-trafgen" video-send --dst 10.77.0.10 --seconds "$SECONDS_RUN"
  wait $RECV || true
  # CPU time the hypervisor gave to others while this VM wanted it (ms).
  steal=$(( ($(awk 'NR == 1 {print $9}' /proc/stat) - steal0) * 1000 / $(getconf CLK_TCK) ))
  depth=$(metric terrapin_queue_depth_max 6)
  drops=$(metric terrapin_queue_drops_total 6)
  { ip netns exec $NS_SW curl -s http://127.0.0.1:19510/metrics || true; } >"$OUT/metrics-$run.txt"
  if [[ $TRACE == 1 ]]; then
    echo 0 >$T/tracing_on
    cat $T/trace >"$OUT/trace.txt"
    echo >$T/set_event
    echo 1408 >$T/buffer_size_kb
  fi
  kill -INT $SW; wait $SW || true
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  PIDS=()
  echo "run $run: $(head -1 "$OUT/recv.txt") max_qdepth6=${depth:-?} drops6=${drops:-?} load=$(cut -d' ' -f1 /proc/loadavg) steal_ms=$steal"
  tail -n +2 "$OUT/recv.txt"
  # The switch's own view: per port, how long frames waited in the receive
  # ring and how late the pacer woke; queue 6's delay on b1's port.
  awk '
    /^terrapin_(port_rx_delay|port_pacer_late|queue_delay)_seconds_(bucket|max)/ {
      split($1, a, "{"); name = a[1]; lab = a[2]; sub(/,?le="[^"]*"/, "", lab); sub(/}$/, "", lab)
      if (name ~ /_max$/) { max[substr(name, 1, length(name) - 4) " " lab] = $2 * 1000; next }
      le = $1; sub(/.*le="/, "", le); sub(/".*/, "", le); key = name; sub(/_bucket$/, "", key); key = key " " lab
      if (le == "0.0002") c200[key] = $2; if (le == "0.001") c1m[key] = $2; if (le == "+Inf") tot[key] = $2
    }
    END {
      for (k in tot) if (tot[k] > 0 && (k ~ /port_/ || k ~ /port="4",queue="6"/))
        printf "    %-70s n=%d >0.2ms=%d >1ms=%d max=%.3fms\n", k, tot[k], tot[k] - c200[k], tot[k] - c1m[k], max[k]
    }' "$OUT/metrics-$run.txt" | sed 's/terrapin_//; s/_seconds//' | sort
done
