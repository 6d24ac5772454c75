#!/usr/bin/env bash
# Where p4lang's BMv2 commands are. Every caller that runs SWITCH=bmv2 asks here (the Makefile,
# ptf-tests/run.sh, topo/p4switch.py, the controller's integration tests), so the rule lives in
# one place:
#
#   1. simple_switch_grpc on PATH (a system install, or one the user put first) wins;
#   2. otherwise build/oracle/bin, the build `make bmv2` makes from ../shared/oracle.
#
#   bash scripts/bmv2-bin.sh                     the directory holding simple_switch_grpc
#   bash scripts/bmv2-bin.sh simple_switch_CLI   the path of one command (simple_switch_grpc,
#                                                simple_switch or simple_switch_CLI)
#
# The other commands are taken from the same directory as the chosen simple_switch_grpc, so a
# CLI from one install never drives a switch from another; PATH is the fallback for a system
# install that keeps them apart. Exits 1 with what to do when BMv2 is nowhere.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
oracle_bin="$root/build/oracle/bin"

if found=$(command -v simple_switch_grpc 2>/dev/null); then
    dir=$(dirname "$found")
elif [[ -x "$oracle_bin/simple_switch_grpc" ]]; then
    dir=$oracle_bin
else
    echo "SWITCH=bmv2: p4lang's simple_switch_grpc is neither on PATH nor in build/oracle/bin;" \
         "run \`make bmv2\` (builds it from ../shared/oracle, about 10 minutes on 2 cores)" >&2
    exit 1
fi

case "${1:-}" in
    "") echo "$dir" ;;
    simple_switch_grpc | simple_switch | simple_switch_CLI)
        if [[ -x "$dir/$1" ]]; then
            echo "$dir/$1"
        elif found=$(command -v "$1" 2>/dev/null); then
            echo "$found"
        else
            echo "SWITCH=bmv2: $1 is not next to $dir/simple_switch_grpc nor on PATH" >&2
            exit 1
        fi
        ;;
    *)
        echo "usage: $0 [simple_switch_grpc|simple_switch|simple_switch_CLI]" >&2
        exit 2
        ;;
esac
