#!/usr/bin/env bash
# Benchmark of terrapin-switch (a benchmark, not a test): forwarded packets/s
# at zero loss and at saturation, and one-way latency at 10/50/90% of the
# zero-loss rate, for 64/512/1500-byte frames, beside the same figures for a
# minimal AF_PACKET forwarder (the I/O limit of this machine) and the ratio.
#
#   make bench-switch            (or: bash toolchain/bench/bench-switch.sh)
#   SIZES=64 TRIAL=1s bash toolchain/bench/bench-switch.sh
#   DUTS="reflector switch-lpm" SIZES=64 bash toolchain/bench/bench-switch.sh
#
# DUTS picks the rows (wire reflector device-noP4 switch-lpm; default all).
# Needs root. Builds its own namespaces and veths (tdevb*), removed on exit,
# on Ctrl-C and on failure.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BIN=${BIN:-$ROOT/build/bin}
SIZES=${SIZES:-64,512,1500}
TRIAL=${TRIAL:-1s}
STEPS=${STEPS:-7}
DUTS=${DUTS:-wire reflector device-noP4 switch-lpm}
SWITCH_ARGS=${SWITCH_ARGS:-}   # extra terrapin-switch options (tuning experiments)
NICE=${NICE:--10}              # forwarding-thread priority of every DUT (terrapin-switch --nice)
TX_MODE=${TX_MODE:-ring}       # transmit path of every DUT and the generator (ring|sendmmsg)
P4C=${P4C:-$BIN/terrapin-p4c}
OUT=${OUT:-$ROOT/build/bench}
mkdir -p "$OUT"

if [[ $EUID -ne 0 ]]; then echo "bench-switch: needs root (namespaces, AF_PACKET)" >&2; exit 1; fi
(cd toolchain && go build -o "$BIN/" ./cmd/terrapin-trafgen ./cmd/terrapin-switch)

NS_SW=tdevbsw NS_GEN=tdevbgen
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  PIDS=()
  # Deleting the namespaces removes their veths; a process still inside
  # (killed above) no longer holds them.
  ip netns pids $NS_SW 2>/dev/null | xargs -r kill 2>/dev/null || true
  ip netns pids $NS_GEN 2>/dev/null | xargs -r kill 2>/dev/null || true
  ip netns del $NS_SW 2>/dev/null || true
  ip netns del $NS_GEN 2>/dev/null || true
}
trap cleanup EXIT
# Ctrl-C or a kill: clean up, then exit with the signal's status.
trap 'echo "bench-switch: interrupted" >&2; exit 130' INT
trap 'exit 143' TERM
cleanup
ip netns add $NS_SW
ip netns add $NS_GEN
for ns in $NS_SW $NS_GEN; do
  ip netns exec $ns sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
done
# gen1 -> sw1 [DUT] sw2 -> gen2; wa <-> wb is a bare wire for the harness figure.
ip link add gen1 netns $NS_GEN type veth peer name sw1 netns $NS_SW
ip link add gen2 netns $NS_GEN type veth peer name sw2 netns $NS_SW
ip -n $NS_GEN link add wa type veth peer name wb
for l in gen1 gen2 wa wb; do ip -n $NS_GEN link set $l up; done
for l in sw1 sw2; do ip -n $NS_SW link set $l up; done

TG="$BIN/terrapin-trafgen"
bench() { # label tx rx
  ip netns exec $NS_GEN "$TG" bench --tx "$2" --rx "$3" --label "$1" --sizes "$SIZES" --trial "$TRIAL" --steps "$STEPS" --tx-mode "$TX_MODE" | tee -a "$OUT/results.txt"
}
start_dut() { # command...
  ip netns exec $NS_SW "$@" >"$OUT/dut.log" 2>&1 &
  PIDS+=($!)
  sleep 1
  kill -0 "${PIDS[-1]}" 2>/dev/null || { echo "DUT failed to start:"; cat "$OUT/dut.log"; return 1; }
}
stop_dut() {
  local p=${PIDS[-1]}; kill -INT "$p"; wait "$p" || true; unset 'PIDS[-1]'
}
want() { [[ " $DUTS " == *" $1 "* ]]; }

: >"$OUT/results.txt"
echo "# machine: $(nproc) cores, $(uname -r); trial $TRIAL; sizes include FCS (veth frames are 4 bytes shorter)"
echo "# latency columns: p50/p99 one-way, generator send call to sink ring timestamp"
echo "# DUT forwarding threads at nice $NICE, transmit path $TX_MODE"
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
if want wire; then bench wire wa wb; fi

if want reflector; then
  start_dut "$TG" reflect --in sw1 --out sw2 --nice "$NICE" --tx-mode "$TX_MODE"
  bench reflector gen1 gen2
  stop_dut
fi

if want device-noP4; then
  start_dut "$TG" forward --in sw1 --out sw2 --nice "$NICE" --tx-mode "$TX_MODE"
  bench device-noP4 gen1 gen2
  stop_dut
fi

# terrapin-switch with the IPv4 LPM program (const entries, so no controller
# is needed), compiled by terrapin-p4c.
if want switch-lpm; then
  JSON="$OUT/ipv4_lpm.json"
  if "$P4C" --target bmv2 --arch v1model -o "$JSON" toolchain/bench/ipv4_lpm.p4 >"$OUT/p4c.log" 2>&1; then
    if start_dut "$BIN/terrapin-switch" "$JSON" -i 1@sw1 -i 2@sw2 --grpc-server-addr 127.0.0.1:19501 --nice "$NICE" --tx "$TX_MODE" $SWITCH_ARGS; then
      bench switch-lpm gen1 gen2
      stop_dut
    fi
  else
    echo "switch-lpm: not measured: terrapin-p4c could not compile toolchain/bench/ipv4_lpm.p4 (see $OUT/p4c.log)"
  fi
fi
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

echo "# ratio to the reflector (zero-loss pps, saturation pps):"
awk '
  { for (i = 1; i <= NF; i++) { split($i, kv, "="); v[$1, $2, kv[1]] = kv[2] } labels[$1] = 1; sizes[$2] = 1 }
  END {
    for (l in labels) if (l != "reflector" && l != "wire") for (s in sizes)
      if (v["reflector", s, "zero_loss_pps"] > 0 && (l, s, "zero_loss_pps") in v)
        printf "%-12s %-11s zero_loss %.2f  saturation %.2f\n", l, s,
          v[l, s, "zero_loss_pps"] / v["reflector", s, "zero_loss_pps"], v[l, s, "sat_pps"] / v["reflector", s, "sat_pps"]
  }' "$OUT/results.txt" | sort
