#!/usr/bin/env bash
# make run: set up what is missing, then bring up TOPO (christie) with SWITCH (terrapin) switches,
# the controller and its REST API; HEADLESS=1 runs without the Mininet CLI until interrupted.
# STORE=postgres REPLICAS=N runs N controller replicas on a PostgreSQL cluster in build/run/postgres
# (docs/deployment.md); the default, STORE=sqlite REPLICAS=1, is one controller on a SQLite file.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/stop.sh --quiet   # a network left over from an earlier run would clash
mkdir -p build/run
# Mininet hosts inherit this PATH, so terrapin-host works inside them.
export PATH="$PWD/build/venv/bin:$PATH"
args=(--topo "${TOPO:-christie}" --switch "${SWITCH:-terrapin}"
      --store "${STORE:-sqlite}" --replicas "${REPLICAS:-1}")
[[ -n "${HEADLESS:-}" && "${HEADLESS:-0}" != 0 ]] && args+=(--headless)
# TLS=1: P4Runtime, the switches' metrics and REST over TLS, certificates in build/run/pki.
[[ -n "${TLS:-}" && "${TLS:-0}" != 0 ]] && args+=(--tls)
exec python -m topo.run "${args[@]}"
