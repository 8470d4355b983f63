#!/usr/bin/env bash
# The pipeline's check before it synthesizes (its Synth step, stacks/pipeline.py; needs scripts/setup.sh
# --checks): every stage file validated, lint and types, and the synth-level tests (CDK assertions, cfn-lint,
# cdk-nag, the rendered YAML, the config rules). Not the local control plane (its Go build takes 5 minutes
# cold, docs/DEPLOYING.md), not checkov or the benchmark: the pull request ran the whole suite already.
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0;; esac
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
step() { echo "pipeline_check: $*"; }
step "validate every stage file"
.venv/bin/python -m config validate
step "ruff, ruff format, mypy"
.venv/bin/ruff check --quiet .
.venv/bin/ruff format --check --quiet .
.venv/bin/mypy
step "the synth-level tests"
# Not the test that runs this very step in a fresh clone: it would run itself again, and again.
.venv/bin/python -m pytest -q -p no:cacheprovider tests/config tests/charts tests/stacks tests/test_app.py \
  tests/test_cfn_lint.py tests/test_shared_names.py tests/config/test_secret_scan.py \
  --deselect tests/stacks/test_pipeline.py::test_the_synth_buildspec_passes_in_a_fresh_clone
