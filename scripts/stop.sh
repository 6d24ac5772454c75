#!/usr/bin/env bash
# make stop: end a `make run` (or demo) by the PIDs it recorded in build/run/pids/: the runner
# first (its own teardown stops the supervisor, the controller, the switches and Mininet), then
# any switch or controller still listed there, which includes a controller started by hand with
# `--pid-file build/run/pids/controller.pid` as docs/topologies.md shows. Processes are found by
# what the run recorded, never by matching command lines, so one started with other paths is
# still stopped and nobody else's is touched. If a runner was recorded but could not clean up
# (it was killed), Mininet's own cleanup removes the hosts and veths it left. The PostgreSQL
# cluster of `make run STORE=postgres` (the run directory's postgres/), which its runner stops
# last, is stopped if it still runs: terrapin_tools.pgserver finds it by its data directory's lock file.
#
#   TERRAPIN_RUN_DIR=DIR   the run directory (default build/run)
set -uo pipefail
cd "$(dirname "$0")/.."
run_dir=${TERRAPIN_RUN_DIR:-build/run}
pid_dir=$run_dir/pids
quiet=${1:-}
say() { [[ "$quiet" == --quiet ]] || echo "$@"; }

# ours PID: the process is still one of the run's programs (a PID recorded long ago may now
# belong to something else, which must not be killed).
ours() {
    local cmd
    [[ "$1" =~ ^[0-9]+$ ]] || return 1
    cmd=$(tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline") || return 1
    [[ "$cmd" == *terrapin-switch* || "$cmd" == *simple_switch* || "$cmd" == *terrapin-controller* ||
       "$cmd" == *topo.run* ]]
}

# alive PID: running, and not a zombie waiting for its parent (it has exited already).
alive() {
    local state
    state=$(sed -E 's/^.*\) ([A-Za-z]).*$/\1/' "/proc/$1/stat" 2>/dev/null) || return 1
    [[ -n "$state" && "$state" != Z ]]
}

# stop_recorded FILE: SIGTERM to the PID in FILE, SIGKILL if it is still there after 15 s.
stop_recorded() {
    local file=$1 name pid
    name=$(basename "$file" .pid)
    pid=$(head -c 32 "$file" 2>/dev/null | tr -dc '0-9')
    if [[ -n "$pid" ]] && ours "$pid"; then
        say "stopping $name (pid $pid)"
        kill -TERM "$pid" 2>/dev/null
        for _ in $(seq 75); do alive "$pid" || break; sleep 0.2; done
        if alive "$pid"; then
            say "$name (pid $pid) ignored SIGTERM for 15 s; killing it"
            kill -KILL "$pid" 2>/dev/null
        fi
    fi
    rm -f "$file"
}

runner_recorded=
for runner in "$pid_dir/runner.pid" "$run_dir/run.pid"; do  # run.pid: written by older runs
    [[ -f "$runner" ]] || continue
    runner_recorded=1
    stop_recorded "$runner"
done
for record in "$pid_dir"/*.pid; do
    [[ -e "$record" ]] && stop_recorded "$record"
done
# Last, after its clients, the controllers.
postgres_dir=$run_dir/postgres
if [[ -f "$postgres_dir/postmaster.pid" ]] &&
    build/venv/bin/python -m terrapin_tools.pgserver --dir "$postgres_dir" status >/dev/null 2>&1; then
    say "stopping PostgreSQL in $postgres_dir"
    build/venv/bin/python -m terrapin_tools.pgserver --dir "$postgres_dir" stop ||
        say "PostgreSQL in $postgres_dir did not stop; see $postgres_dir/server.log"
fi
# Mininet's own cleanup removes its hosts' processes and every veth a killed runner left.
if [[ -n "$runner_recorded" ]] &&
    ip -o link show | grep -qE ': (a[0-9]|b[0-9]|terrapin|ucb|ucsb|ucla|ucsd|s[0-9]|src[0-9]|sink|faith|propaganda|grayling|blizzard|paola|venezia|ucsbhost)[^:]*-eth[0-9]+'; then
    say "removing Mininet leftovers"
    mn -c >/dev/null 2>&1 || true
fi
exit 0
