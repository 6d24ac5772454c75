#!/usr/bin/env bash
# make demo: seed 000's reserved-vs-unreserved video experiment on christie (topo/demo.py).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/stop.sh --quiet
export PATH="$PWD/build/venv/bin:$PATH"
exec python -m topo.demo --switch "${SWITCH:-terrapin}" ${DEMO_SECONDS:+--seconds "$DEMO_SECONDS"}
