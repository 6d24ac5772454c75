#!/usr/bin/env bash
# Builds what upstream's PTF tester image (stratumproject/testvectors:ptf) holds, for make
# fabric-ptf, from the files in ../shared/realworld/fabric-tna and PyPI only:
#
#   build/venv-fabric-ptf         PTF, scapy, p4runtime, protobuf, grpcio, numpy/scipy/matplotlib
#                                 (fabric-ptf/requirements.txt), with a .pth file that puts the two
#                                 directories below on its path
#   build/fabric-ptf/py           Python bindings generated from deps/gnmi and deps/testvectors
#                                 (gnmi.gnmi_pb2[_grpc], portmap/target/testvector _pb2) beside
#                                 testvectors' own helpers (pmutils, targetutils, tvutils)
#   fabric-ptf/stubs              the stand-in for TRex's trex_stf_lib (only imported)
#   build/venv-fabric-ptf-protoc  grpcio-tools, which generates the bindings (a venv of its own: it
#                                 needs a newer protobuf than p4runtime 1.3.0's modules load with)
#
# Idempotent: a second run checks stamps and takes a second. Needs root only to install
# net-tools (ptf_runner.py lists interfaces with ifconfig) when it is missing.
#
#   bash fabric-ptf/setup.sh     (make fabric-ptf runs it)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
FABRIC=${FABRIC_TNA:-$(cd "$root/.." && pwd)/shared/realworld/fabric-tna}
venv=$root/build/venv-fabric-ptf
protoc_venv=$root/build/venv-fabric-ptf-protoc
out=$root/build/fabric-ptf/py
PYTHON=${PYTHON:-/usr/bin/python3}

say() { printf '\033[1m[fabric-ptf setup]\033[0m %s\n' "$*"; }

if [[ ! -d "$FABRIC/ptf/tests/common" ]]; then
    echo "fabric-ptf: no SD-Fabric sources at $FABRIC (../shared/realworld/fabric-tna; FABRIC_TNA= names another)" >&2
    exit 1
fi

source scripts/debian-packages.sh
install_missing "fabric-ptf setup" net-tools python3-venv

# pip quietly into a log; its tail on failure.
pip_into() {
    local venv=$1 log=$root/build/fabric-ptf/pip.log
    shift
    mkdir -p "$(dirname "$log")"
    if ! "$venv/bin/pip" install --progress-bar off --disable-pip-version-check "$@" >>"$log" 2>&1; then
        tail -n 20 "$log" >&2
        echo "fabric-ptf setup: pip install $* failed (log: ${log#"$root"/})" >&2
        return 1
    fi
}

# --- the tester's venv ---------------------------------------------------------------------------
stamp=$venv/.fabric-ptf-deps
if [[ ! -f "$stamp" || fabric-ptf/requirements.txt -nt "$stamp" ]]; then
    if [[ ! -x "$venv/bin/python" ]]; then
        say "creating build/venv-fabric-ptf"
        "$PYTHON" -m venv "$venv"
    fi
    say "installing fabric-ptf/requirements.txt (PTF, scapy, p4runtime, ...)"
    pip_into "$venv" -r fabric-ptf/requirements.txt
    touch "$stamp"
fi

# --- protoc ----------------------------------------------------------------------------------------
pstamp=$protoc_venv/.fabric-ptf-deps
if [[ ! -f "$pstamp" ]]; then
    [[ -x "$protoc_venv/bin/python" ]] || "$PYTHON" -m venv "$protoc_venv"
    say "installing grpcio-tools into build/venv-fabric-ptf-protoc"
    # The same release as the tester's grpcio: its _pb2_grpc modules are written for it. Its
    # protoc (protobuf 4.25) writes modules that protobuf 3.20's runtime loads.
    grpc_version=$(sed -n 's/^grpcio==//p' fabric-ptf/requirements.txt)
    pip_into "$protoc_venv" "grpcio-tools==$grpc_version"
    touch "$pstamp"
fi

# --- the bindings ----------------------------------------------------------------------------------
gstamp=$out/.generated
inputs=(fabric-ptf/setup.sh fabric-ptf/descriptors.py "$stamp" "$pstamp")
if [[ ! -f "$gstamp" ]] || [[ -n "$(find "${inputs[@]}" -newer "$gstamp" 2>/dev/null)" ]]; then
    say "generating the gNMI and testvectors bindings into build/fabric-ptf/py"
    rm -rf "$out"
    stage=$root/build/fabric-ptf/proto
    rm -rf "$stage"
    deps=$FABRIC/deps
    # Laid out as the protos import each other: gnmi.proto imports gnmi_ext by its Go path.
    ext=github.com/openconfig/gnmi/proto/gnmi_ext
    mkdir -p "$out" "$stage/gnmi" "$stage/$ext"
    cp "$deps/gnmi/proto/gnmi/gnmi.proto" "$stage/gnmi/"
    cp "$deps/gnmi/proto/gnmi_ext/gnmi_ext.proto" "$stage/$ext/"
    protos=(gnmi/gnmi.proto "$ext/gnmi_ext.proto")
    for pkg in portmap target testvector; do
        mkdir -p "$stage/$pkg"
        for proto in "$deps/testvectors/proto/$pkg/"*.proto; do
            cp "$proto" "$stage/$pkg/"
            protos+=("$pkg/$(basename "$proto")")
        done
    done
    # tv.proto imports p4/v1/p4runtime.proto: its descriptors come from PyPI's p4runtime modules.
    "$venv/bin/python" fabric-ptf/descriptors.py "$stage/p4runtime.pb"
    well_known=$("$protoc_venv/bin/python" -c 'import grpc_tools, os; print(os.path.dirname(grpc_tools.__file__))')/_proto
    (cd "$stage" && "$protoc_venv/bin/python" -m grpc_tools.protoc --descriptor_set_in=p4runtime.pb \
        -I. -I"$well_known" --python_out="$out" --grpc_python_out="$out" "${protos[@]}")
    # The gRPC plugin writes gnmi_ext's (empty) service module under the unimportable
    # "github.com/"; its messages are in github/com/..., where gnmi_pb2 imports them.
    rm -rf "$out/github.com"
    # ptf_runner.py and base_test.py import `from portmap import pmutils` etc.: the helpers live in
    # the packages beside the generated modules, as in the tester image.
    cp "$deps/testvectors/utils/python/pmutils.py" "$out/portmap/"
    cp "$deps/testvectors/utils/python/targetutils.py" "$out/target/"
    cp "$deps/testvectors/utils/python/tvutils.py" "$out/testvector/"
    site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    printf '%s\n%s\n' "$out" "$root/fabric-ptf/stubs" >"$site/fabric-ptf.pth"
    # What ptf_runner.py, base_test.py, fabric_test.py and gnmi_utils.py import, checked here so a
    # broken set-up says so now rather than as a PTF import error.
    "$venv/bin/python" -c '
import gnmi.gnmi_pb2, gnmi.gnmi_pb2_grpc, p4.v1.p4runtime_pb2, p4.v1.p4runtime_pb2_grpc
import portmap.pmutils, target.targetutils, testvector.tvutils, trex_stf_lib.trex_client
import ptf, scapy.contrib.gtp, numpy, scipy.stats, matplotlib.pyplot'
    touch "$gstamp"
fi
