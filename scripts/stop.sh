#!/usr/bin/env bash
# make stop: end a `make run` (or demo) and remove everything it may have left: switch and
# controller processes, Mininet's hosts and veths.
set -uo pipefail
cd "$(dirname "$0")/.."
quiet=${1:-}
say() { [[ "$quiet" == --quiet ]] || echo "$@"; }

if [[ -f build/run/run.pid ]]; then
    pid=$(cat build/run/run.pid)
    if kill -0 "$pid" 2>/dev/null; then
        say "stopping make run (pid $pid)"
        kill -TERM "$pid"
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    fi
    rm -f build/run/run.pid
fi
# Processes the topology runner starts carry the repository's paths in their command lines.
for pattern in "$PWD/build/bin/terrapin-switch .*--grpc-server-addr 127.0.0.1:95" \
               "$PWD/build/venv/bin/terrapin-controller --config $PWD/build/run/" \
               "simple_switch_grpc .*--grpc-server-addr 127.0.0.1:95"; do
    if pkill -TERM -f "$pattern" 2>/dev/null; then say "stopped: $pattern"; fi
done
sleep 0.5
pkill -KILL -f "$PWD/build/bin/terrapin-switch .*--grpc-server-addr 127.0.0.1:95" 2>/dev/null || true
# Mininet's own cleanup removes its hosts' processes and every veth it created.
if ip -o link show | grep -qE ': (a[0-9]|b[0-9]|terrapin|ucb|ucsb|ucla|ucsd|s[0-9]|src[0-9]|sink|faith|propaganda|grayling|blizzard|paola|venezia|ucsbhost)[^:]*-eth[0-9]+'; then
    say "removing Mininet leftovers"
    mn -c >/dev/null 2>&1 || true
fi
exit 0
