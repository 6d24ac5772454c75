#!/usr/bin/env bash
# make run: set up what is missing, then bring up TOPO (christie) with SWITCH (terrapin) switches,
# the controller and its REST API; HEADLESS=1 runs without the Mininet CLI until interrupted.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/stop.sh --quiet   # a network left over from an earlier run would clash
mkdir -p build/run
# Mininet hosts inherit this PATH, so terrapin-host works inside them.
export PATH="$PWD/build/venv/bin:$PATH"
args=(--topo "${TOPO:-christie}" --switch "${SWITCH:-terrapin}")
[[ -n "${HEADLESS:-}" && "${HEADLESS:-0}" != 0 ]] && args+=(--headless)
exec python -m topo.run "${args[@]}"
