#!/usr/bin/env bash
# make test: every suite of the project, one after another, then one summary line
#   N passed, M failed
# Each suite's log goes to build/test-logs/SUITE.log; a suite that dies without reporting its own
# counts counts as one failure, so a crash can never pass silently.
#
# SUITES="go conformance" make test   runs a subset (names as printed below; "bmv2" names every
# suite that runs on p4lang's simple_switch_grpc). Those run after ours, on the BMv2 that
# scripts/bmv2-bin.sh finds (`make bmv2` builds it; .ci/run does): missing, each counts a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD

bash scripts/setup.sh || { echo "setup failed"; echo "0 passed, 1 failed"; exit 1; }
GO=$(cat build/go.path)
export PATH="$(dirname "$GO"):$PATH"
PY=$root/build/venv/bin/python
logs=$root/build/test-logs
rm -rf "$logs" && mkdir -p "$logs"

total_pass=0
total_fail=0
summary=()
# Everything the suites create on the host is named trpt… (scripts/leftovers.py); only that is
# judged for leftovers, against what was there before, so namespaces and switches that others
# create or remove beside the run are never counted.
footprint_before=$logs/footprint-before.json
"$PY" scripts/leftovers.py snapshot >"$footprint_before"

# record SUITE PASSED FAILED SECONDS
record() {
    total_pass=$((total_pass + $2))
    total_fail=$((total_fail + $3))
    summary+=("$(printf '%-26s %5d passed, %3d failed  (%ds)' "$1" "$2" "$3" "$4")")
    printf '%-26s %5d passed, %3d failed  (%ds)\n' "$1" "$2" "$3" "$4"
}

# run_counted SUITE CMD...: the command's last "N passed, M failed" line gives the counts; a
# non-zero exit adds a failure unless the counts already show one.
run_counted() {
    local name=$1 start=$SECONDS rc; shift
    "$@" >"$logs/$name.log" 2>&1
    rc=$?
    count_suite "$name" "$rc" "$start"
}

count_suite() { # SUITE EXIT-CODE START-SECONDS
    local name=$1 rc=$2 start=$3 log=$logs/$1.log p f line
    line=$(grep -aoE '[0-9]+ passed, [0-9]+ failed' "$log" | tail -n1)
    if [[ -n "$line" ]]; then
        read -r p _ f _ <<<"${line//,/}"
    else
        p=0; f=0
    fi
    if ((rc != 0 && f == 0)); then f=1; fi
    if ((rc != 0)); then
        echo "  $name failed (exit $rc); log: $log"
        # CI keeps only this output: every failure line first (an experiment's failed first run
        # scrolls out of the tail), then the tail.
        grep -aE 'FAIL|Error|error:' "$log" | grep -av 'make\[' | tail -n 30 | cut -c1-600 | sed 's/^/    ! /'
        tail -n 15 "$log" | sed 's/^/    /'
    fi
    record "$name" "$p" "$f" $((SECONDS - start))
}

# start_beside SUITE CMD... / finish_beside SUITE: a suite whose time is mostly waiting (SD-Fabric's
# PTF: packets that must not come, packet-in timeouts) runs in the background beside suites that
# only compute and measure no time (fuzzing, conformance, lint), and is counted when it ends.
declare -A beside_pid beside_start
start_beside() {
    local name=$1; shift
    beside_start[$name]=$SECONDS
    "$@" >"$logs/$name.log" 2>&1 &
    beside_pid[$name]=$!
}
finish_beside() {
    local name=$1 rc
    wait "${beside_pid[$name]}"
    rc=$?
    count_suite "$name" "$rc" "${beside_start[$name]}"
}

# await_bmv2: CI builds BMv2 at the idle priority beside the first suites (.ci/run passes its pid in
# TERRAPIN_BMV2_BUILD_PID); nothing that measures time, and nothing that would use BMv2, runs
# before it is done. Outside CI there is nothing to wait for.
await_bmv2() {
    local pid=${TERRAPIN_BMV2_BUILD_PID:-} began=$SECONDS next=$SECONDS
    [[ -n "$pid" ]] || return 0
    TERRAPIN_BMV2_BUILD_PID=
    while kill -0 "$pid" 2>/dev/null; do
        if ((SECONDS >= next)); then
            echo "waiting for the BMv2 build ($((SECONDS - began)) s so far): $(grep -a '\[bmv2' build/bmv2-build.log 2>/dev/null | tail -n1)"
            next=$((SECONDS + 60))
        fi
        sleep 1
    done
    if bash scripts/bmv2-bin.sh >/dev/null 2>&1; then
        echo "the BMv2 build is done (waited $((SECONDS - began)) s; log build/bmv2-build.log)"
    else
        echo "the BMv2 build failed; the BMv2 suites will fail. Its log's end:"
        tail -n 20 build/bmv2-build.log 2>/dev/null | sed 's/^/    /'
    fi
}

# go test -json → one result per top-level test (fuzz seed corpora included); go vet and gofmt
# count as one check each.
go_unit() {
    local vet=pass fmt=pass
    (cd toolchain && "$GO" vet ./...) || vet=fail
    [[ -z "$(cd toolchain && gofmt -l . | tee /dev/stderr)" ]] || fmt=fail
    (cd toolchain && "$GO" test -json -count=1 ./... 2>&1) |
        "$PY" scripts/count_go_tests.py --check "go vet=$vet" --check "gofmt=$fmt"
}

# Each fuzz target runs briefly with coverage guidance: a panic on any generated input fails it.
# Go 1.26's fuzz coordinator can fail a target with a bare "context deadline exceeded" when
# -fuzztime runs out (golang/go#75804, fixed in Go 1.27): no input failed and none is written.
# Such a run is tried once more; a failure that wrote a failing input, or any other failure,
# counts.
fuzz_once() { # PKG TARGET: 0 pass, 1 fail, 2 only the coordinator's deadline race
    local pkg=$1 target=$2 out rc corpus before after
    corpus=toolchain/${pkg#./}/testdata/fuzz/$target
    before=$(ls "$corpus" 2>/dev/null | wc -l)
    out=$(cd toolchain && "$GO" test -run '^$' -fuzz "^${target}\$" -fuzztime "${FUZZTIME:-5s}" "$pkg" 2>&1)
    rc=$?
    echo "$out"
    ((rc == 0)) && return 0
    after=$(ls "$corpus" 2>/dev/null | wc -l)
    if ((after == before)) && grep -q 'context deadline exceeded' <<<"$out" &&
        ! grep -qE 'panic|Failing input' <<<"$out"; then
        return 2
    fi
    return 1
}

go_fuzz() {
    local pass=0 fail=0 pkg target rc
    while read -r pkg target; do
        fuzz_once "$pkg" "$target"; rc=$?
        if ((rc == 2)); then
            echo "note: $target hit Go's fuzz deadline race (no failing input); running it again"
            fuzz_once "$pkg" "$target"; rc=$?
        fi
        if ((rc == 1)); then
            fail=$((fail + 1)); echo "FAIL fuzz $pkg $target"
        else
            pass=$((pass + 1))
            ((rc == 2)) && echo "note: $target hit the deadline race twice; no input failed"
        fi
    done < <(cd toolchain && grep -rlE '^func Fuzz' --include='*_test.go' . |
             while read -r f; do
                 for t in $(sed -nE 's/^func (Fuzz[A-Za-z0-9_]*)\(.*/\1/p' "$f"); do
                     echo "./$(dirname "${f#./}") $t"
                 done
             done | sort -u)
    echo "$pass passed, $fail failed"
}

python_checks() {
    local pass=0 fail=0
    for check in "ruff check controller topo ptf-tests scripts experiments fabric-ptf" \
                 "mypy --strict controller/terrapin controller/terrapin_tools" \
                 "mypy --config-file mypy.ini topo experiments fabric-ptf"; do
        if (cd "$root" && "$root/build/venv/bin/"$check); then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL $check"; fi
    done
    echo "$pass passed, $fail failed"
}

# Property tests draw the same examples every run here (topo/tests/hypothesis_profile.py).
pytest_suite() {
    TERRAPIN_HYPOTHESIS=make-test "$PY" -m pytest -q -p no:cacheprovider "$@" 2>&1 | tee /dev/stderr | "$PY" scripts/count_pytest.py
}

want() { [[ -z "${SUITES:-}" ]] || [[ " $SUITES " == *" $1 "* ]]; }
want_bmv2() { want "$1" || { [[ " ${SUITES:-} " == *" bmv2 "* ]]; }; }

# on_bmv2 CMD...: runs a BMv2 suite, or says what is missing and counts one failure.
on_bmv2() {
    if ! bash scripts/bmv2-bin.sh >/dev/null; then
        echo "0 passed, 1 failed"
        return 1
    fi
    "$@"
}

# The device's netns tests again on AF_XDP (the go suite runs them on AF_PACKET, the device
# package's default; terrapin-switch defaults to --io auto, AF_XDP on veths): queues, pacing,
# queueing metadata, meters at arrival, packet-in/out on the other I/O path. Tests whose veths
# have a jumbo MTU stay on AF_PACKET (frames too long for AF_XDP). ~15 s.
go_device_afxdp() {
    (cd toolchain && TERRAPIN_TEST_IO=auto "$GO" test -json -count=1 ./device/ 2>&1) |
        "$PY" scripts/count_go_tests.py
}
thrift_cli() {
    make --no-print-directory toolchain >/dev/null && pytest_suite scripts/thrift-cli
}
want go            && run_counted go go_unit
want go-afxdp      && run_counted go-afxdp go_device_afxdp
# SD-Fabric's own PTF suite, unmodified, on its program compiled by terrapin-p4c (docs/fabric-ptf.md):
# the fabric profile here (~3 min, beside fuzzing, conformance and lint; counted before the
# controller suite); `make fabric-ptf PROFILE=all SWITCH=both` is the whole run.
want fabric-ptf    && start_beside fabric-ptf make --no-print-directory fabric-ptf PROFILE=fabric SWITCH=terrapin
want fuzz          && run_counted fuzz go_fuzz
want conformance   && run_counted conformance make --no-print-directory conformance JSON=ours VIA=engine
want conformance   && run_counted conformance-p4c make --no-print-directory conformance JSON=p4c VIA=engine
want conformance   && run_counted conformance-p4rt make --no-print-directory conformance JSON=ours VIA=p4runtime
want python-lint   && run_counted python-lint python_checks
want scripts       && run_counted scripts pytest_suite scripts/tests fabric-ptf/tests
want fabric-ptf    && finish_beside fabric-ptf
want controller    && run_counted controller pytest_suite controller/tests -m "not bmv2"
# PTF on AF_XDP (--io afxdp: the switch refuses to start rather than fall back, so the suite
# cannot pass on AF_PACKET unnoticed), then its I/O-facing tests (packet-in/out, queues and
# pacing, routing, malformed frames, ARP) on AF_PACKET: ~30 s.
want ptf           && run_counted ptf env TERRAPIN_SWITCH_ARGS="--io afxdp" \
    make --no-print-directory ptf SWITCH=terrapin
want ptf-afpacket  && run_counted ptf-afpacket env TERRAPIN_SWITCH_ARGS="--io afpacket" \
    PTF_LOGDIR="$root/build/ptf-afpacket" PTF_TESTS="dp_controller_io dp_queues dp_routing dp_malformed dp_arp" \
    make --no-print-directory ptf SWITCH=terrapin
await_bmv2
# p4c's compile corpus: refusals at p4c's lines, accepted programs loaded (on simple_switch too
# when BMv2 is built); seconds.
want conformance-compile && run_counted conformance-compile make --no-print-directory conformance-compile
# Includes two minutes of `make chaos` (seed 4) on terrapin-switch (topo/tests/test_chaos_e2e.py,
# ~2.5 min); `make chaos SWITCH=bmv2 DURATION=120 SEED=4` runs it on simple_switch_grpc.
want topo          && run_counted topo pytest_suite topo/tests -m "not bmv2"
# The seeds' experiments, shortened (docs/experiments.md): each verdict is a guarantee the system
# makes, so a regression in one fails here. They run on BMv2 too, last (experiments-bmv2).
want experiments   && run_counted experiments env TERRAPIN_INTF_PREFIX=trptex \
    make --no-print-directory experiments SHORT=1 SWITCH=terrapin ATTEMPTS=2
# The same suites on p4lang's simple_switch_grpc (docs/bmv2.md).
want_bmv2 ptf-bmv2         && run_counted ptf-bmv2 on_bmv2 make --no-print-directory ptf SWITCH=bmv2
# SD-Fabric's fabric profile on simple_switch_grpc, beside the conformance and CLI comparisons.
want_bmv2 fabric-ptf-bmv2  && start_beside fabric-ptf-bmv2 on_bmv2 \
    make --no-print-directory fabric-ptf PROFILE=fabric SWITCH=bmv2
want_bmv2 conformance-bmv2 && run_counted conformance-bmv2 on_bmv2 \
    make --no-print-directory conformance JSON=ours VIA=p4runtime SWITCH=bmv2
# BMv2's Thrift runtime on terrapin-switch (docs/switch.md): BMv2's own CLI tests on both switches,
# and simple_switch_CLI's commands against simple_switch_grpc and terrapin-switch, outputs
# compared: ~10 s.
want_bmv2 thrift-cli       && run_counted thrift-cli on_bmv2 thrift_cli
want_bmv2 fabric-ptf-bmv2  && finish_beside fabric-ptf-bmv2
want_bmv2 controller-bmv2  && run_counted controller-bmv2 on_bmv2 \
    pytest_suite controller/tests/test_integration.py controller/tests/test_failover.py \
    controller/tests/test_arbitration.py controller/tests/test_monitor_integration.py -m bmv2
want_bmv2 topo-bmv2        && run_counted topo-bmv2 on_bmv2 pytest_suite topo/tests/test_christie_e2e.py \
    topo/tests/test_cli_session.py topo/tests/test_switch_tls.py topo/tests/test_controller_tls.py \
    topo/tests/test_ring_e2e.py -m bmv2
# The seeds' experiments on simple_switch_grpc, scaled to what it forwards (docs/bmv2.md): ~5 min.
want_bmv2 experiments-bmv2 && run_counted experiments-bmv2 on_bmv2 env TERRAPIN_INTF_PREFIX=trptex \
    make --no-print-directory experiments SHORT=1 SWITCH=bmv2 ATTEMPTS=2

echo
echo "Summary"
printf '  %s\n' "${summary[@]}"
# No test may leave a namespace, veth or switch behind.
if ! leftover=$("$PY" scripts/leftovers.py check "$footprint_before"); then
    echo "  leftovers after the tests: ${leftover:-(the check itself failed)}"
    total_fail=$((total_fail + 1))
fi
echo "$total_pass passed, $total_fail failed"
((total_fail == 0))
