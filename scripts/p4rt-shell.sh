#!/usr/bin/env bash
# make shell: an interactive p4runtime-shell (PyPI's p4runtime-shell, an IPython front end for
# P4Runtime) on a switch of the running `make run` network, beside its controller, which stays
# primary: the shell reads tables, meters, counters and registers and pushes nothing
# (scripts/p4rt_shell.py says how; docs/topologies.md, "make shell", shows a session).
#
#   make shell                   the only switch of the running network (christie's terrapin)
#   make shell DEVICE=ucla       one of several, by name or device id (without it they are listed)
#   make shell PUSH=1            push build/p4's pipeline first: refused while a controller is primary
#   P4RT_ADDR=127.0.0.1:19601 DEVICE_ID=1 make shell    a P4Runtime server of your own
#   bash scripts/p4rt-shell.sh --setup-only               only create the venv (tests call this)
#   Further arguments go to p4runtime-shell after `--`.
#
# DEVICE and not SWITCH, which names the switch program (terrapin|bmv2) everywhere else; for
# make shell a SWITCH that is not a program's name is taken as the switch's name, so
# `make shell SWITCH=ucla` works too.
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

args=()
for arg in "$@"; do
    case $arg in
        --setup-only) exit 0 ;;
        --no-config) ;;  # the default now: nothing is pushed unless PUSH=1
        *) args+=("$arg") ;;
    esac
done

device=${DEVICE:-}
if [[ -z "$device" && -n "${SWITCH:-}" && "$SWITCH" != terrapin && "$SWITCH" != bmv2 ]]; then
    device=$SWITCH
fi
flags=()
[[ -n "$device" ]] && flags+=(--device "$device")
[[ -n "${P4RT_ADDR:-}" ]] && flags+=(--addr "$P4RT_ADDR" --device-id "${DEVICE_ID:-0}")
[[ -n "${PUSH:-}" && "${PUSH:-0}" != 0 ]] && flags+=(--push)
[[ -n "${P4INFO:-}" ]] && flags+=(--p4info "$P4INFO")
[[ -n "${P4JSON:-}" ]] && flags+=(--json "$P4JSON")
exec "$venv/bin/python" scripts/p4rt_shell.py "${flags[@]}" -- "${args[@]}"
