#!/usr/bin/env bash
# Benchmark of terrapin-switch (a benchmark, not a test): forwarded packets/s
# at zero loss and at saturation, and one-way latency at 10/50/90% of the
# zero-loss rate, for 64/512/1500-byte frames, beside the same figures for
# the limits of this machine's I/O — an XDP program redirecting from one veth
# to the other (no user space: xdp-reflector), a minimal AF_XDP forwarder
# (afxdp-reflector) and a minimal AF_PACKET one (reflector) — and for p4lang's
# simple_switch_grpc running the same program, with the ratios; and p50/p99
# latency of every row at one fixed rate (FIXED_PPS, 10,000 frames/s).
#
#   make bench-switch            (or: bash toolchain/bench/bench-switch.sh)
#   SIZES=64 TRIAL=1s bash toolchain/bench/bench-switch.sh
#   DUTS="reflector switch-lpm" SIZES=64 bash toolchain/bench/bench-switch.sh
#   DUTS="switch-lpm bmv2" SIZES=64 bash toolchain/bench/bench-switch.sh
#
# PERF_OUT=FILE records a perf profile of terrapin-switch during its first size's runs.
# DUTS picks the rows (wire xdp-reflector afxdp-reflector reflector device-noP4
# switch-lpm switch-lpm-afpacket bmv2; default all). terrapin-switch runs with
# its default --io auto (AF_XDP on these veths); switch-lpm-afpacket is the
# same with --io afpacket. GEN_IO is the generator's and sink's I/O (default
# afxdp: AF_XDP sends faster than AF_PACKET's ~520,000 frames/s here, which
# the XDP reflector outruns; afpacket gives the earlier harness).
# bmv2 is simple_switch_grpc as scripts/bmv2-bin.sh finds it (PATH, else make
# bmv2's build/oracle); the row is left out, saying so, when there is neither.
# Needs root. Builds its own namespaces and veths (tdevb*), removed on exit,
# on Ctrl-C and on failure.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BIN=${BIN:-$ROOT/build/bin}
SIZES=${SIZES:-64,512,1500}
TRIAL=${TRIAL:-1s}
STEPS=${STEPS:-7}
DUTS=${DUTS:-wire xdp-reflector afxdp-reflector reflector device-noP4 switch-lpm switch-lpm-afpacket bmv2}
GEN_IO=${GEN_IO:-afxdp}        # generator and sink I/O (afxdp|afpacket)
FIXED_PPS=${FIXED_PPS:-10000}  # the rate of every row's fixed-rate latency run
RT_PRIORITY=${RT_PRIORITY:-10} # SCHED_FIFO priority of the switch-lpm-rt and bmv2-rt latency rows (0: none)
BMV2=${BMV2:-$(bash scripts/bmv2-bin.sh simple_switch_grpc 2>/dev/null || true)}  # PATH, else make bmv2's
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
  ip netns exec $NS_GEN "$TG" bench --tx "$2" --rx "$3" --label "$1" --sizes "$SIZES" --trial "$TRIAL" --steps "$STEPS" --tx-mode "$TX_MODE" --io "$GEN_IO" | tee -a "$OUT/results.txt"
}
fixed_rate() { # label tx rx: p50/p99 at FIXED_PPS, one trial per size
  ip netns exec $NS_GEN "$TG" bench --tx "$2" --rx "$3" --label "$1" --sizes "$SIZES" --trial "$TRIAL" --tx-mode "$TX_MODE" --io "$GEN_IO" --fixed-pps "$FIXED_PPS" | tee -a "$OUT/fixed.txt"
}
start_dut() { # command...
  ip netns exec $NS_SW "$@" >"$OUT/dut.log" 2>&1 &
  PIDS+=($!)
  sleep 1
  kill -0 "${PIDS[-1]}" 2>/dev/null || { echo "DUT failed to start:"; cat "$OUT/dut.log"; return 1; }
}
stop_dut() { # SIGTERM: simple_switch_grpc does not stop on SIGINT
  local p=${PIDS[-1]}; kill -TERM "$p"; wait "$p" || true; unset 'PIDS[-1]'
}
want() { [[ " $DUTS " == *" $1 "* ]]; }

: >"$OUT/results.txt"
: >"$OUT/fixed.txt"
echo "# machine: $(nproc) cores, $(uname -r); trial $TRIAL; sizes include FCS (veth frames are 4 bytes shorter)"
echo "# latency columns: p50/p99 one-way, generator send call to sink ring timestamp"
echo "# DUT forwarding threads at nice $NICE, transmit path $TX_MODE (AF_PACKET rows); generator and sink I/O $GEN_IO"
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
if want wire; then bench wire wa wb; fixed_rate wire wa wb; fi

if want xdp-reflector; then
  # A veth delivers XDP-redirected frames only when its peer runs NAPI: an
  # XDP program there, which the AF_XDP sink has.
  if [[ $GEN_IO == afxdp ]]; then
    start_dut "$TG" xdp-reflect --in sw1 --out sw2
    bench xdp-reflector gen1 gen2
    fixed_rate xdp-reflector gen1 gen2
    stop_dut
  else
    echo "xdp-reflector: not measured: needs GEN_IO=afxdp (its sink's XDP program lets gen2 take redirected frames)"
  fi
fi

if want afxdp-reflector; then
  start_dut "$TG" reflect --io afxdp --in sw1 --out sw2 --nice "$NICE"
  bench afxdp-reflector gen1 gen2
  fixed_rate afxdp-reflector gen1 gen2
  stop_dut
fi

if want reflector; then
  start_dut "$TG" reflect --io afpacket --in sw1 --out sw2 --nice "$NICE" --tx-mode "$TX_MODE"
  bench reflector gen1 gen2
  fixed_rate reflector gen1 gen2
  stop_dut
fi

if want device-noP4; then
  start_dut "$TG" forward --in sw1 --out sw2 --nice "$NICE" --tx-mode "$TX_MODE"
  bench device-noP4 gen1 gen2
  fixed_rate device-noP4 gen1 gen2
  stop_dut
fi

# terrapin-switch, then p4lang's simple_switch_grpc, with the IPv4 LPM program
# (const entries, so no controller is needed) compiled by terrapin-p4c: one
# JSON, the same table entries, the same run.
JSON="$OUT/ipv4_lpm.json"
compiled=0
if want switch-lpm || want switch-lpm-afpacket || want bmv2; then
  if "$P4C" --target bmv2 --arch v1model -o "$JSON" toolchain/bench/ipv4_lpm.p4 >"$OUT/p4c.log" 2>&1; then
    compiled=1
  else
    echo "switch-lpm, bmv2: not measured: terrapin-p4c could not compile toolchain/bench/ipv4_lpm.p4 (see $OUT/p4c.log)"
  fi
fi
if want switch-lpm && ((compiled)); then
  if start_dut "$BIN/terrapin-switch" "$JSON" -i 1@sw1 -i 2@sw2 --grpc-server-addr 127.0.0.1:19501 --nice "$NICE" --tx "$TX_MODE" -L info --log-console $SWITCH_ARGS; then
    grep -o 'io=[a-z/]*' "$OUT/dut.log" | sort | uniq -c | sed 's/^/# switch-lpm port I\/O: /'
    # PERF_OUT=FILE: perf record (call graphs) of the switch's threads, kernel work in their
    # context included, for PERF_SECONDS from the start of its first size's saturation trial
    # and zero-loss search (perf report -i FILE --no-children --sort sym).
    perf_pid=""
    if [[ -n ${PERF_OUT:-} ]]; then
      perf record -g -p "${PIDS[-1]}" -o "$PERF_OUT" -- sleep "${PERF_SECONDS:-5}" >"$OUT/perf.log" 2>&1 &
      perf_pid=$!
    fi
    bench switch-lpm gen1 gen2
    [[ -z $perf_pid ]] || wait "$perf_pid" || true
    fixed_rate switch-lpm gen1 gen2
    stop_dut
  fi
fi
if want switch-lpm-afpacket && ((compiled)); then
  if start_dut "$BIN/terrapin-switch" "$JSON" -i 1@sw1 -i 2@sw2 --grpc-server-addr 127.0.0.1:19501 --nice "$NICE" --tx "$TX_MODE" --io afpacket $SWITCH_ARGS; then
    bench switch-lpm-afpacket gen1 gen2
    fixed_rate switch-lpm-afpacket gen1 gen2
    stop_dut
  fi
fi
# BMv2 as its performance docs configure it (make bmv2: -O3, logging macros and
# the event logger compiled out), at the forwarding threads' priority; its
# notification socket is named so as not to meet another BMv2's.
if want bmv2 && ((compiled)); then
  if [[ -x "$BMV2" ]]; then
    if start_dut nice -n "$NICE" "$BMV2" "$JSON" -i 1@sw1 -i 2@sw2 --device-id 0 \
         --notifications-addr "ipc:///tmp/$NS_SW-notifications.ipc" -- --grpc-server-addr 127.0.0.1:19502; then
      bench bmv2 gen1 gen2
      fixed_rate bmv2 gen1 gen2
      stop_dut
    fi
    rm -f "/tmp/$NS_SW-notifications.ipc"
  else
    echo "bmv2: not measured: no simple_switch_grpc on PATH or in build/oracle (make bmv2)"
  fi
fi
# Latency again with real-time scheduling (RT_PRIORITY; 0 skips these rows):
# at nice -10 a forwarding thread that sleeps between frames waits for a CPU
# behind the generator and the sink on this 2-core machine, and the fixed-rate
# p99 is that wait. terrapin-switch --rt-priority makes its forwarding threads
# SCHED_FIFO within a CPU budget; BMv2 has no such option, so chrt runs the
# whole process SCHED_FIFO (safe at this rate: BMv2 then uses a quarter of a CPU).
if ((RT_PRIORITY > 0)) && ((compiled)); then
  if want switch-lpm && start_dut "$BIN/terrapin-switch" "$JSON" -i 1@sw1 -i 2@sw2 --grpc-server-addr 127.0.0.1:19501 \
       --nice "$NICE" --tx "$TX_MODE" --rt-priority "$RT_PRIORITY" $SWITCH_ARGS; then
    fixed_rate switch-lpm-rt gen1 gen2
    stop_dut
  fi
  if want bmv2 && [[ -x "$BMV2" ]] && start_dut chrt -f "$RT_PRIORITY" "$BMV2" "$JSON" -i 1@sw1 -i 2@sw2 --device-id 0 \
       --notifications-addr "ipc:///tmp/$NS_SW-notifications.ipc" -- --grpc-server-addr 127.0.0.1:19502; then
    fixed_rate bmv2-rt gen1 gen2
    stop_dut
    rm -f "/tmp/$NS_SW-notifications.ipc"
  fi
fi
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

for ref in reflector afxdp-reflector xdp-reflector; do
  echo "# ratio to the $ref (zero-loss pps, saturation pps):"
  awk -v ref="$ref" '
    { for (i = 1; i <= NF; i++) { split($i, kv, "="); v[$1, $2, kv[1]] = kv[2] } labels[$1] = 1; sizes[$2] = 1 }
    END {
      for (l in labels) if (l != ref && l != "wire") for (s in sizes)
        if (v[ref, s, "zero_loss_pps"] > 0 && (l, s, "zero_loss_pps") in v)
          printf "%-20s %-11s zero_loss %.2f  saturation %.2f\n", l, s,
            v[l, s, "zero_loss_pps"] / v[ref, s, "zero_loss_pps"], v[l, s, "sat_pps"] / v[ref, s, "sat_pps"]
    }' "$OUT/results.txt" | sort
done
# ratio REFERENCE DIGITS: terrapin-switch's rates over REFERENCE's, per frame size, at
# saturation and at zero loss.
ratio() {
  awk -v ref="$1" -v digits="$2" '
    { for (i = 1; i <= NF; i++) { split($i, kv, "="); v[$1, $2, kv[1]] = kv[2] } sizes[$2] = 1 }
    END {
      f = "%." digits "f"
      for (s in sizes) if (("switch-lpm", s, "sat_pps") in v && (ref, s, "sat_pps") in v) {
        zs = v["switch-lpm", s, "zero_loss_pps"]; zr = v[ref, s, "zero_loss_pps"]
        printf "ratio switch/%s %-11s saturation " f " (%d / %d pps)  zero_loss %s (%d / %d pps)\n", ref, s,
          v["switch-lpm", s, "sat_pps"] / v[ref, s, "sat_pps"], v["switch-lpm", s, "sat_pps"], v[ref, s, "sat_pps"],
          (zr > 0 ? sprintf(f, zs / zr) : "n/a"), zs, zr
      }
    }' "$OUT/results.txt" | sort -t= -k2 -n
}
# terrapin-switch (AF_XDP) against the AF_XDP reflector: the share of the I/O limit the pipeline
# and traffic manager leave; and against p4lang's BMv2 on the same program and run.
ratio afxdp-reflector 2
ratio bmv2 1
if [[ -s "$OUT/fixed.txt" ]]; then
  echo "# latency at $FIXED_PPS frames/s (p50/p99 one-way):"
  awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "lat" || kv[1] == "lost") f[kv[1]] = kv[2] }
         printf "latency at fixed rate %-10s %-11s p50/p99 %s  lost %s\n", $1, $2, f["lat"], f["lost"] }' "$OUT/fixed.txt"
fi
