#!/usr/bin/env bash
# SD-Fabric's own PTF suite (../shared/realworld/fabric-tna), unmodified, on terrapin-switch or
# p4lang's simple_switch_grpc, with SD-Fabric's program compiled by terrapin-p4c (make fabric-ptf).
#
# For each profile: compiles p4src/v1model/fabric_v1model.p4 with upstream's flags for it
# (upstream-Makefile) into build/fabric-ptf/<profile>/, starts the switch as upstream starts
# stratum_bmv2 (device id 1, CPU port 255, ports 1-4 as in ptf/run/bmv2/port_map.veth.json, here
# on veth pairs fptf<N>s (switch) / fptf<N>t (PTF)), and runs upstream's ptf_runner.py from the
# shared directory, as ptf/run/bmv2/Makefile calls it, with the profile's own test selection from
# Makefile.profiles, less the tests fabric-ptf/excluded.txt lists for that switch. The switch is
# stopped and the veths deleted when the run ends, fails or is interrupted.
#
#   PROFILE=fabric|fabric-int|fabric-upf|fabric-upf-int|all (or several, space-separated)
#   SWITCH=terrapin|bmv2|both
#   TEST="test.FabricBridgingTest ..."     PTF test specs instead of the profile's selection
#   PTF_ARGS="--default-timeout 5"         more PTF flags (handed on by ptf_runner.py)
#   TERRAPIN_SWITCH_ARGS="--io afpacket"   more terrapin-switch flags
#
# Prints "fabric-ptf[<profile>/<switch>]: N passed, M failed, K skipped, E excluded (S s)" per
# run and ends with one "N passed, M failed, K skipped" line. Logs in
# build/fabric-ptf/<profile>/<switch>/ (ptf_runner.log, switch.log, ptf.log, ptf.pcap, xunit/).
# Needs root (veths, raw sockets).

set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

FABRIC=${FABRIC_TNA:-$(cd "$ROOT/.." && pwd)/shared/realworld/fabric-tna}
VENV=$ROOT/build/venv-fabric-ptf
PY=$VENV/bin/python
HELPER=("$PY" "$ROOT/fabric-ptf/fabric_ptf.py" --fabric "$FABRIC")
OUT=$ROOT/build/fabric-ptf
P4C=$ROOT/build/bin/terrapin-p4c

# Upstream's values (ptf/run/bmv2: stratum_entrypoint.sh, Makefile, port_map.veth.json).
DEVICE_ID=1
CPU_PORT=255
PORTS=(1 2 3 4)
# Ports no other suite or run here uses (ptf-tests: 198xx; make run: 9559+, 9090+, 9700+).
GRPC_PORT=${FABRIC_PTF_GRPC_PORT:-28559}
THRIFT_PORT=${FABRIC_PTF_THRIFT_PORT:-29090}
IFP=fptf
# One test that hangs (a lost packet-in with no timeout) must not hold the run: PTF ends it.
TEST_CASE_TIMEOUT=${FABRIC_PTF_TEST_TIMEOUT:-600}

switch_pid=""
runner_pid=""

say() { printf '\033[1m[fabric-ptf]\033[0m %s\n' "$*"; }

made_veths=0

cleanup() {
    stop_runner
    stop_switch
    # Only veths this run made: a run refused by the lock leaves the other run's alone.
    ((made_veths)) || return 0
    for p in "${PORTS[@]}"; do
        ip link del "${IFP}${p}s" 2>/dev/null
    done
}
trap cleanup EXIT
trap 'echo "fabric-ptf: interrupted" >&2; exit 130' INT TERM

make_veths() {
    made_veths=1
    for p in "${PORTS[@]}"; do
        ip link del "${IFP}${p}s" 2>/dev/null
        ip link add "${IFP}${p}s" type veth peer name "${IFP}${p}t" || return 1
        for end in s t; do
            local dev="${IFP}${p}${end}"
            sysctl -qw "net.ipv6.conf.${dev}.disable_ipv6=1" >/dev/null 2>&1
            # Frames are built whole by the tests; nothing should be offloaded or rewritten.
            ethtool -K "$dev" tx off rx off tso off gso off gro off >/dev/null 2>&1
            ip link set "$dev" up || return 1
        done
    done
}

port_in_use() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

wait_for_port() {
    local port=$1 deadline=$((SECONDS + 60))
    while ((SECONDS < deadline)); do
        port_in_use "$port" && return 0
        kill -0 "$switch_pid" 2>/dev/null || return 1
        sleep 0.2
    done
    return 1
}

# Stops the switch: SIGTERM, then SIGKILL if it has not gone within 10 s.
stop_switch() {
    [[ -n "$switch_pid" ]] || return 0
    kill "$switch_pid" 2>/dev/null
    local deadline=$((SECONDS + 10))
    while kill -0 "$switch_pid" 2>/dev/null && ((SECONDS < deadline)); do
        sleep 0.1
    done
    if kill -0 "$switch_pid" 2>/dev/null; then
        echo "fabric-ptf: switch $switch_pid ignored SIGTERM for 10 s; killing it" >&2
        kill -9 "$switch_pid" 2>/dev/null
    fi
    wait "$switch_pid" 2>/dev/null
    switch_pid=""
}

# ptf_runner.py and the ptf it starts run in a session of their own (setsid): the whole group is
# ended here, so no PTF process outlives an interrupted run.
stop_runner() {
    [[ -n "$runner_pid" ]] || return 0
    kill -TERM -- "-$runner_pid" 2>/dev/null || kill -TERM "$runner_pid" 2>/dev/null
    local deadline=$((SECONDS + 5))
    while kill -0 -- "-$runner_pid" 2>/dev/null && ((SECONDS < deadline)); do
        sleep 0.1
    done
    kill -KILL -- "-$runner_pid" 2>/dev/null
    wait "$runner_pid" 2>/dev/null
    runner_pid=""
}

total_passed=0
total_failed=0
total_skipped=0
summaries=()

# compile PROFILE: bmv2.json and p4info.txt in build/fabric-ptf/PROFILE, as p4src/v1model/build.sh.
compile() {
    local profile=$1 dir=$OUT/$1 flags
    mkdir -p "$dir"
    flags=$("${HELPER[@]}" flags "$profile") || return 1
    local start=${EPOCHREALTIME/./}
    # shellcheck disable=SC2086
    if ! "$P4C" --arch v1model $flags -I "$FABRIC/p4src" -o "$dir/bmv2.json" \
        --p4runtime-files "$dir/p4info.txt" "$FABRIC/p4src/v1model/fabric_v1model.p4" \
        >"$dir/compile.log" 2>&1; then
        echo "fabric-ptf[$profile]: terrapin-p4c failed (log: ${dir#"$ROOT"/}/compile.log)"
        tail -n 20 "$dir/compile.log" | sed 's/^/  /'
        return 1
    fi
    local us=$((${EPOCHREALTIME/./} - start))
    printf 'fabric-ptf[%s]: compiled by terrapin-p4c%s in %d.%03d s\n' "$profile" "${flags:+ $flags}" \
        $((us / 1000000)) $((us / 1000 % 1000))
}

# run_one PROFILE SWITCH: one profile's selection on one switch; adds to the totals.
run_one() {
    local profile=$1 switch=$2
    local label="$profile/$switch" dir=$OUT/$profile/$switch start=$SECONDS
    rm -rf "$dir" && mkdir -p "$dir"
    local p4info=$OUT/$profile/p4info.txt json=$OUT/$profile/bmv2.json

    # The test specs: the profile's own (or TEST), then ^name for each excluded test.
    local specs excl
    # shellcheck disable=SC2206
    specs=(${TEST:-$("${HELPER[@]}" selection "$profile")})
    mapfile -t excl < <("${HELPER[@]}" exclude "$switch" "$profile")
    local params="pltfm='bmv2';profile='$profile'"
    # The tests it will run (PTF prunes the same way): anything without a result counts failed.
    (cd "$dir" && PYTHONPATH="$FABRIC/ptf/tests/common" "$VENV/bin/ptf" --test-dir "$FABRIC/ptf/tests/unary" \
        --log-file "$dir/list.log" --list-test-names --test-params "$params" "${specs[@]}" "${excl[@]}" 2>/dev/null) |
        grep -E '^[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z0-9_]+$' >"$dir/expected.txt"
    local expected
    expected=$(wc -l <"$dir/expected.txt")

    # give_up WHY: nothing ran; every selected test counts as failed.
    give_up() {
        echo "fabric-ptf[$label]: $1; counting its $expected tests as failed"
        [[ -s "$dir/switch.log" ]] && tail -n 20 "$dir/switch.log" | sed "s/^/  [$label] /"
        total_failed=$((total_failed + (expected > 0 ? expected : 1)))
        summaries+=("fabric-ptf[$label]: 0 passed, $expected failed (not run: $1)")
        stop_switch
    }
    if port_in_use "$GRPC_PORT"; then
        give_up "127.0.0.1:$GRPC_PORT is already taken by another process"
        return
    fi

    local switch_cmd=() ifaces=()
    for p in "${PORTS[@]}"; do
        ifaces+=(-i "$p@${IFP}${p}s")
    done
    if [[ $switch == terrapin ]]; then
        # shellcheck disable=SC2206
        switch_cmd=("$ROOT/build/bin/terrapin-switch" --device-id "$DEVICE_ID" "${ifaces[@]}" --no-p4
            --thrift-port "$THRIFT_PORT" ${TERRAPIN_SWITCH_ARGS:-} --
            --grpc-server-addr "127.0.0.1:$GRPC_PORT" --cpu-port "$CPU_PORT")
    else
        local bmv2
        if ! bmv2=$(bash scripts/bmv2-bin.sh simple_switch_grpc); then
            give_up "simple_switch_grpc is not built (make bmv2)"
            return
        fi
        switch_cmd=("$bmv2" --device-id "$DEVICE_ID" "${ifaces[@]}" --no-p4 --thrift-port "$THRIFT_PORT" --
            --grpc-server-addr "127.0.0.1:$GRPC_PORT" --cpu-port "$CPU_PORT")
    fi
    echo "${switch_cmd[*]}" >"$dir/switch.cmd"
    "${switch_cmd[@]}" >"$dir/switch.log" 2>&1 &
    switch_pid=$!
    if ! wait_for_port "$GRPC_PORT"; then
        give_up "the switch did not start serving P4Runtime on 127.0.0.1:$GRPC_PORT"
        return
    fi

    # The port map: upstream's p4 ports, our interfaces (PTF's side of each pair).
    local port_map=$dir/port_map.json sep=""
    {
        echo "["
        for p in "${PORTS[@]}"; do
            printf '%s  {"p4_port": %d, "iface_name": "%s"}\n' "$sep" "$p" "${IFP}${p}t"
            sep=","
        done
        echo "]"
    } >"$port_map"

    # As ptf/run/bmv2/Makefile calls it (from tests/common there; here from the run's directory,
    # where PTF writes ptf.log and ptf.pcap), plus --xunit for the per-test results.
    local extra=()
    # shellcheck disable=SC2206
    extra=(--xunit --xunit-dir "$dir/xunit" --test-case-timeout "$TEST_CASE_TIMEOUT" ${PTF_ARGS:-})
    (cd "$dir" && PATH="$VENV/bin:$PATH" PYTHONDONTWRITEBYTECODE=1 exec setsid "$PY" -u \
        "$FABRIC/ptf/tests/common/ptf_runner.py" \
        --platform bmv2 \
        --port-map "$port_map" \
        --ptf-dir "$FABRIC/ptf/tests/unary" --cpu-port "$CPU_PORT" --device-id "$DEVICE_ID" \
        --grpc-addr "127.0.0.1:$GRPC_PORT" \
        --p4info "$p4info" \
        --pipeline-config "$json" \
        --profile "$profile" \
        "${specs[@]}" "${excl[@]}" "${extra[@]}" >"$dir/ptf_runner.log" 2>&1) &
    runner_pid=$!
    wait "$runner_pid"
    local rc=$?
    runner_pid=""
    stop_switch
    local seconds=$((SECONDS - start))

    local out
    out=$("${HELPER[@]}" report --label "$label" --xunit "$dir/xunit" --expected "$dir/expected.txt" \
        --switch "$switch" --profile "$profile" --seconds "$seconds")
    echo "$out"
    if ((rc != 0)) && ! grep -q ' failed, ' <<<"$out"; then
        echo "  ptf_runner.py exited $rc (log: ${dir#"$ROOT"/}/ptf_runner.log)"
    fi
    local head p f s
    head=$(head -n1 <<<"$out")
    read -r p f s <<<"$(sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped.*/\1 \2 \3/' <<<"$head")"
    # ptf_runner.py failing with no test failed (the pipeline refused, PTF crashed) is a failure.
    if ((rc != 0 && f == 0)); then
        f=1
        echo "  ptf_runner.py exited $rc with no failed test (log: ${dir#"$ROOT"/}/ptf_runner.log)"
        tail -n 15 "$dir/ptf_runner.log" | sed "s/^/  [$label] /"
    fi
    total_passed=$((total_passed + p))
    total_failed=$((total_failed + f))
    total_skipped=$((total_skipped + s))
    summaries+=("$head")
}

main() {
    if [[ $EUID -ne 0 ]]; then
        echo "fabric-ptf/run.sh needs root (veth pairs, raw sockets)" >&2
        echo "0 passed, 1 failed"
        exit 1
    fi
    local profiles=${PROFILE:-fabric}
    [[ $profiles == all ]] && profiles="fabric fabric-int fabric-upf fabric-upf-int"
    local switches=${SWITCH:-terrapin}
    [[ $switches == both ]] && switches="terrapin bmv2"
    local sw
    for sw in $switches; do
        if [[ $sw != terrapin && $sw != bmv2 ]]; then
            echo "fabric-ptf: SWITCH must be terrapin, bmv2 or both, not '$sw'" >&2
            echo "0 passed, 1 failed"
            exit 2
        fi
    done
    for f in "$P4C" "$PY" "$FABRIC/ptf/tests/common/ptf_runner.py"; do
        if [[ ! -e "$f" ]]; then
            echo "fabric-ptf: missing $f (make toolchain; bash fabric-ptf/setup.sh)" >&2
            echo "0 passed, 1 failed"
            exit 1
        fi
    done
    # One run at a time: a second would take the first's veths and ports.
    mkdir -p "$OUT"
    exec 9>"$OUT/.lock"
    if ! flock -n 9; then
        echo "fabric-ptf: another make fabric-ptf is running (lock: ${OUT#"$ROOT"/}/.lock)" >&2
        echo "0 passed, 1 failed"
        exit 1
    fi
    # A malformed exclusion list stops the run before anything starts.
    "${HELPER[@]}" exclude terrapin fabric >/dev/null || { echo "0 passed, 1 failed"; exit 1; }
    if ! make_veths; then
        echo "fabric-ptf: could not create the ${IFP} veth pairs" >&2
        echo "0 passed, 1 failed"
        exit 1
    fi

    local start=$SECONDS profile
    for profile in $profiles; do
        if ! compile "$profile"; then
            total_failed=$((total_failed + 1))
            summaries+=("fabric-ptf[$profile]: did not compile")
            continue
        fi
        for sw in $switches; do
            run_one "$profile" "$sw"
        done
    done

    echo
    echo "fabric-ptf summary ($((SECONDS - start)) s wall):"
    printf '  %s\n' "${summaries[@]}"
    echo "$total_passed passed, $total_failed failed, $total_skipped skipped"
    ((total_failed == 0))
}

main "$@"
