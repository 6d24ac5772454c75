#!/usr/bin/env bash
# PTF tests of the Terrapin P4 program (make ptf).
#
# Creates veth pairs trptptf<N>s (switch side) / trptptf<N>t (test side) for ports 1..4, runs
# every test in ptf-tests/tests against build/bin/terrapin-switch and against p4lang's
# simple_switch_grpc (scripts/bmv2-bin.sh says where: PATH, else build/oracle/bin from
# `make bmv2`), then removes the veths (also on failure). Ends with one "N passed, M failed"
# line. Needs root (veths, raw sockets).
#
#   PTF_TESTS="dp_routing dp_arp.GatewayArpIsAnswered" bash ptf-tests/run.sh   # a subset
#   PTF_SWITCHES="bmv2" bash ptf-tests/run.sh                   # one switch (make ptf SWITCH=bmv2)
#   PTF_LOGDIR=/tmp/x bash ptf-tests/run.sh                                   # logs elsewhere
#   TERRAPIN_SWITCH_ARGS="--io afpacket" bash ptf-tests/run.sh             # extra terrapin-switch flags
#
# Without PTF_SWITCHES both switches run; BMv2 missing is then a printed note, not a failure.
# A switch named in PTF_SWITCHES that is missing counts its tests as failed.

set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

PORTS=(1 2 3 4)
RATE_LIMITED_PORT=4
RATE_LIMITED_BPS=1000000
# BMv2 limits queues in packets/s, not bytes/s: the queue tests send frames of this size, so
# RATE_LIMITED_BPS / 8 / RATE_LIMITED_FRAME packets/s is the same rate for those frames.
RATE_LIMITED_FRAME=1000
GRPC_PORT_TERRAPIN=19850
GRPC_PORT_BMV2=19851
THRIFT_PORT_BMV2=19852
# PTF_P4INFO / PTF_P4JSON run the tests against another build of the program
# (ptf-tests/mutants.py uses them to show that each behaviour's test fails without it).
P4INFO="${PTF_P4INFO:-$ROOT/build/p4/terrapin.p4info.txtpb}"
P4JSON="${PTF_P4JSON:-$ROOT/build/p4/terrapin.json}"
PTF="$ROOT/build/venv/bin/ptf"
LOGDIR="${PTF_LOGDIR:-$ROOT/build/ptf}"
mkdir -p "$LOGDIR"

switch_pid=""

cleanup() {
    cleanup_switch
    for p in "${PORTS[@]}"; do
        ip link del "trptptf${p}s" 2>/dev/null
    done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

make_veths() {
    for p in "${PORTS[@]}"; do
        ip link del "trptptf${p}s" 2>/dev/null
        ip link add "trptptf${p}s" type veth peer name "trptptf${p}t" || return 1
        for end in s t; do
            local dev="trptptf${p}${end}"
            sysctl -qw "net.ipv6.conf.${dev}.disable_ipv6=1" >/dev/null 2>&1
            # Frames are built whole by the tests; nothing should be offloaded or rewritten.
            ethtool -K "$dev" tx off rx off tso off gso off gro off >/dev/null 2>&1
            ip link set "$dev" up || return 1
        done
    done
}

wait_for_port() {
    local port=$1 deadline=$((SECONDS + 30))
    while ((SECONDS < deadline)); do
        if port_in_use "$port"; then
            return 0
        fi
        if ! kill -0 "$switch_pid" 2>/dev/null; then
            return 1
        fi
        sleep 0.2
    done
    return 1
}

total_passed=0
total_failed=0

# Counts a run's results from PTF's unittest lines ("name ... ok|FAIL|ERROR").
tally() {
    local log=$1 label=$2 expected=$3
    local ok fail err
    ok=$(grep -cE ' \.\.\. ok$' "$log")
    fail=$(grep -cE ' \.\.\. FAIL$' "$log")
    err=$(grep -cE ' \.\.\. ERROR$' "$log")
    local failed=$((fail + err))
    # Tests that never reported (PTF crashed part-way) count as failed.
    local missing=$((expected - ok - failed))
    if ((missing > 0)); then
        failed=$((failed + missing))
    fi
    echo "ptf[$label]: $ok passed, $failed failed (log: ${log#"$ROOT"/})"
    grep -E ' \.\.\. (FAIL|ERROR)$' "$log" | sed "s/^/  [$label] /"
    total_passed=$((total_passed + ok))
    total_failed=$((total_failed + failed))
}

run_suite() {
    local label=$1 grpc_port=$2
    shift 2
    local switch_cmd=("$@")
    local log="$LOGDIR/ptf-$label.log"
    local switch_log="$LOGDIR/switch-$label.log"
    # shellcheck disable=SC2206
    local selection=(${PTF_TESTS:-})
    local expected
    expected=$("$PTF" --test-dir ptf-tests/tests --pypath ptf-tests/lib --log-file "$LOGDIR/ptf-list.log" \
        --list-test-names \
        "${selection[@]}" 2>/dev/null | grep -cE '^[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z0-9_]+$')

    if port_in_use "$grpc_port"; then
        echo "ptf[$label]: 127.0.0.1:$grpc_port is already taken by another process;" \
             "counting its $expected tests as failed"
        total_failed=$((total_failed + expected))
        return
    fi
    "${switch_cmd[@]}" >"$switch_log" 2>&1 &
    switch_pid=$!
    # give_up WHY: the switch cannot be tested; its tests count as failed.
    give_up() {
        echo "ptf[$label]: $1 (log: ${switch_log#"$ROOT"/}); counting its $expected tests as failed"
        tail -n 20 "$switch_log" | sed "s/^/  [$label] /"
        total_failed=$((total_failed + expected))
        cleanup_switch
    }
    if ! wait_for_port "$grpc_port"; then
        give_up "the switch did not start serving P4Runtime on :$grpc_port"
        return
    fi
    if [[ "$label" == bmv2 ]] && ! shape_bmv2_port >>"$switch_log" 2>&1; then
        give_up "could not rate-limit port $RATE_LIMITED_PORT through simple_switch_CLI"
        return
    fi

    local ifaces=()
    for p in "${PORTS[@]}"; do
        ifaces+=(-i "$p@trptptf${p}t")
    done
    local figures="$LOGDIR/figures-$label.txt"
    rm -f "$figures"
    local params="grpc_addr='127.0.0.1:$grpc_port';p4info='$P4INFO';json='$P4JSON'"
    params+=";figures_file='$figures'"
    params+=";switch='$label';rate_limited_port=$RATE_LIMITED_PORT;rate_limited_bps=$RATE_LIMITED_BPS"
    params+=";rate_limited_frame=$RATE_LIMITED_FRAME"
    [[ "$label" == bmv2 ]] && params+=";bmv2_cli='$BMV2_CLI';thrift_port=$THRIFT_PORT_BMV2"
    "$PTF" --test-dir ptf-tests/tests --pypath ptf-tests/lib "${ifaces[@]}" \
        --qlen 1000 --log-file "$LOGDIR/ptf-$label.debug.log" \
        --test-params "$params" "${selection[@]}" >"$log" 2>&1
    cleanup_switch
    tally "$log" "$label" "$expected"
    if [[ -s "$figures" ]]; then
        echo "ptf[$label] measured:"
        sed "s/^/  /" "$figures"
    fi
}

# Stops the switch we started: SIGTERM, then SIGKILL if it has not gone within 10 s (a
# switch that hangs must not keep the gRPC port from the next run).
cleanup_switch() {
    if [[ -n "$switch_pid" ]]; then
        kill "$switch_pid" 2>/dev/null
        local deadline=$((SECONDS + 10))
        while kill -0 "$switch_pid" 2>/dev/null && ((SECONDS < deadline)); do
            sleep 0.1
        done
        if kill -0 "$switch_pid" 2>/dev/null; then
            echo "switch $switch_pid ignored SIGTERM for 10 s; killing it" >&2
            kill -9 "$switch_pid" 2>/dev/null
        fi
        wait "$switch_pid" 2>/dev/null
        switch_pid=""
    fi
}

# simple_switch has no --port-rate: BMv2's runtime CLI limits each of the port's priority queues
# to a packet rate (docs/bmv2.md), the same rate as terrapin-switch's for the tests' frames.
shape_bmv2_port() {
    local pps=$((RATE_LIMITED_BPS / 8 / RATE_LIMITED_FRAME)) out
    out=$(echo "set_queue_rate $pps $RATE_LIMITED_PORT" | "$BMV2_CLI" --thrift-port "$THRIFT_PORT_BMV2" 2>&1)
    local rc=$?
    echo "$out"
    ((rc == 0)) && ! grep -qE 'Invalid|Error' <<<"$out"
}

port_in_use() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

main() {
    if [[ $EUID -ne 0 ]]; then
        echo "ptf-tests/run.sh needs root (veth pairs, raw sockets)" >&2
        echo "0 passed, 1 failed"
        exit 1
    fi
    for f in "$P4INFO" "$P4JSON" "$PTF"; do
        if [[ ! -e "$f" ]]; then
            echo "missing $f (run make toolchain p4 and make setup first)" >&2
            echo "0 passed, 1 failed"
            exit 1
        fi
    done
    if ! make_veths; then
        echo "could not create the trptptf veth pairs" >&2
        echo "0 passed, 1 failed"
        exit 1
    fi

    local switch_ifaces=()
    for p in "${PORTS[@]}"; do
        switch_ifaces+=(-i "$p@trptptf${p}s")
    done
    local switches="${PTF_SWITCHES:-terrapin bmv2}"

    if [[ " $switches " == *" terrapin "* ]]; then
        run_suite terrapin "$GRPC_PORT_TERRAPIN" \
            "$ROOT/build/bin/terrapin-switch" "${switch_ifaces[@]}" --no-p4 ${TERRAPIN_SWITCH_ARGS:-} -- \
            --grpc-server-addr "127.0.0.1:$GRPC_PORT_TERRAPIN" --cpu-port 255 --priority-queues 8 \
            --port-rate "$RATE_LIMITED_PORT:$RATE_LIMITED_BPS"
    fi
    if [[ " $switches " == *" bmv2 "* ]]; then
        local bmv2
        # scripts/bmv2-bin.sh says on stderr what is missing and how to build it.
        if bmv2=$(bash scripts/bmv2-bin.sh simple_switch_grpc) &&
            BMV2_CLI=$(bash scripts/bmv2-bin.sh simple_switch_CLI); then
            run_suite bmv2 "$GRPC_PORT_BMV2" \
                "$bmv2" "${switch_ifaces[@]}" --no-p4 --thrift-port "$THRIFT_PORT_BMV2" -- \
                --grpc-server-addr "127.0.0.1:$GRPC_PORT_BMV2" --cpu-port 255 --priority-queues 8
        elif [[ -n "${PTF_SWITCHES:-}" ]]; then
            echo "ptf[bmv2]: BMv2 is not installed; counting it as failed"
            total_failed=$((total_failed + 1))
        else
            echo "ptf[bmv2]: not run: BMv2 is not installed (make bmv2)"
        fi
    fi

    echo "$total_passed passed, $total_failed failed"
    ((total_failed == 0))
}

main "$@"
