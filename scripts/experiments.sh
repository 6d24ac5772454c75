#!/usr/bin/env bash
# make experiments: the seeds' results (experiments/run.py; docs/experiments.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/stop.sh --quiet
export PATH="$PWD/build/venv/bin:$PATH"
python -m topo.rtwire  # softirq threads as the kernel has them, should a killed run have left them raised
exec python -m experiments.run
