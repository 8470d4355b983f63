#!/usr/bin/env bash
# Benchmark a stage's OpenAI endpoint, or compare two runs: sets up .venv-bench (aiperf), then
#   scripts/bench.sh --stage dev                      # kubectl port-forward to the Serve service
#   scripts/bench.sh --stage dev --url http://...     # an endpoint you already reach
#   scripts/bench.sh --compare RUN_A.json RUN_B.json  # report.md + PNG plots
#   scripts/bench.sh --merge RUN.json RUN.json --out M.json  # one run of one deployment's levels measured by several commands
#   scripts/bench.sh --calibrate                      # the client's own overhead (local fake server)
# Every option: scripts/bench.sh --help; the workflow: docs/BENCHMARK.md.
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0;; esac
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --bench >&2
source scripts/env.sh
exec .venv-bench/bin/python -m ops bench "$@"
