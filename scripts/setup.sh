#!/usr/bin/env bash
# Idempotent set-up: a project venv with the pinned Python packages and the pinned CDK CLI in
# node_modules/. Re-runs are no-ops unless a requirements file or package-lock.json changed.
#   scripts/setup.sh          runtime packages (synth)
#   scripts/setup.sh --dev    runtime + test and validation packages (and the two tool venvs below)
#   scripts/setup.sh --bench  runtime + the benchmark venv (.venv-bench: aiperf) for `ops bench`
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

want="requirements.txt"
[[ "${1:-}" == "--dev" ]] && want="requirements-dev.txt"
case "${1:-}" in ""|--dev|--bench) ;; *) echo "setup: unknown option ${1} (allowed: --dev, --bench)" >&2; exit 2;; esac

python=${PYTHON:-python3}
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || { echo "setup: Python 3.11 or newer is needed (found $("$python" --version 2>&1))" >&2; exit 1; }
command -v npm >/dev/null || { echo "setup: Node.js 20+ with npm is needed" >&2; exit 1; }

if [[ ! -x .venv/bin/python ]]; then
  "$python" -m venv .venv
fi
stamp=.venv/.setup-stamp-$(basename "$want" .txt)
digest=$(cat requirements-ops.txt requirements.txt "$want" constraints.txt 2>/dev/null | sha256sum | cut -c1-16)
if [[ "$(cat "$stamp" 2>/dev/null)" != "$digest" ]]; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade "pip==26.3"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -r "$want" -c constraints.txt
  echo "$digest" > "$stamp"
fi

# checkov pins older boto3/botocore than the app: it gets its own venv, for the test suite only.
if [[ "${1:-}" == "--dev" ]]; then
  [[ -x .venv-checkov/bin/python ]] || "$python" -m venv .venv-checkov
  checkov_digest=$(cat requirements-checkov.txt constraints-checkov.txt | sha256sum | cut -c1-16)
  if [[ "$(cat .venv-checkov/.setup-stamp 2>/dev/null)" != "$checkov_digest" ]]; then
    .venv-checkov/bin/python -m pip install --quiet --disable-pip-version-check --upgrade "pip==26.3"
    .venv-checkov/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-checkov.txt \
      -c constraints-checkov.txt
    echo "$checkov_digest" > .venv-checkov/.setup-stamp
  fi
fi

# aiperf (the benchmark client) pins pandas, transformers and more: its own venv, for `ops bench` and
# the benchmark's tests.
if [[ "${1:-}" == "--dev" || "${1:-}" == "--bench" ]]; then
  [[ -x .venv-bench/bin/python ]] || "$python" -m venv .venv-bench
  bench_digest=$(cat requirements-ops.txt requirements-bench.txt constraints-bench.txt | sha256sum | cut -c1-16)
  if [[ "$(cat .venv-bench/.setup-stamp 2>/dev/null)" != "$bench_digest" ]]; then
    .venv-bench/bin/python -m pip install --quiet --disable-pip-version-check --upgrade "pip==26.3"
    .venv-bench/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-bench.txt \
      -c constraints-bench.txt
    echo "$bench_digest" > .venv-bench/.setup-stamp
  fi
fi

lock_digest=$(sha256sum package-lock.json | cut -c1-16)
if [[ "$(cat node_modules/.setup-stamp 2>/dev/null)" != "$lock_digest" ]]; then
  npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
  echo "$lock_digest" > node_modules/.setup-stamp
fi
