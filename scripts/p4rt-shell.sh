#!/usr/bin/env bash
# make shell: an interactive p4runtime-shell (PyPI's p4runtime-shell, an IPython front end for
# P4Runtime) against the running switch, pushing the project's compiled pipeline first.
#
#   bash scripts/p4rt-shell.sh                 shell on 127.0.0.1:9559, device 0, pushes
#                                              build/p4/terrapin.p4info.txtpb + terrapin.json
#   bash scripts/p4rt-shell.sh --setup-only    only create the venv (tests call this)
#   bash scripts/p4rt-shell.sh --no-config     attach without pushing a pipeline
#   P4RT_ADDR=127.0.0.1:19601 DEVICE_ID=1 P4INFO=x.txtpb P4JSON=x.json bash scripts/p4rt-shell.sh
#   Any further arguments go to p4runtime_sh (e.g. --election-id 0,2).
#
# p4runtime-shell pins an old protobuf (3.20) that the project's main venv (build/venv, newer
# protobuf for finsy/p4runtime) cannot share, so it lives in its own venv: build/venv-p4rtshell.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=build/venv-p4rtshell
# 0.0.6 is the release this project tested (P4Runtime 1.4.1 protos, canonical bytestrings).
shell_version=0.0.6

if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c 'import p4runtime_sh' 2>/dev/null; then
    echo "[p4rt-shell] creating $venv with p4runtime-shell==$shell_version" >&2
    rm -rf "$venv"
    /usr/bin/python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check "p4runtime-shell==$shell_version"
fi

push_config=1
extra=()
for arg in "$@"; do
    case $arg in
        --setup-only) exit 0 ;;
        --no-config) push_config=0 ;;
        *) extra+=("$arg") ;;
    esac
done

addr=${P4RT_ADDR:-127.0.0.1:9559}
p4info=${P4INFO:-build/p4/terrapin.p4info.txtpb}
p4json=${P4JSON:-build/p4/terrapin.json}
args=(--grpc-addr "$addr" --device-id "${DEVICE_ID:-0}")
if ((push_config)); then
    for f in "$p4info" "$p4json"; do
        [[ -f $f ]] || { echo "p4rt-shell: $f is missing (run make p4, or pass --no-config)" >&2; exit 1; }
    done
    args+=(--config "$p4info,$p4json")
fi
exec "$venv/bin/python" -m p4runtime_sh "${args[@]}" "${extra[@]}"
