#!/usr/bin/env bash
# The whole test suite: set up (dev packages), then pytest, which runs the CDK assertions, cfn-lint,
# cdk-nag, the schema validations and the config checks. AWS variables are unset: nothing may need them.
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0;; esac
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --dev
source scripts/env.sh
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_PROFILE AWS_DEFAULT_PROFILE \
      AWS_REGION AWS_DEFAULT_REGION AWS_CONFIG_FILE AWS_SHARED_CREDENTIALS_FILE
export AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
# mypy's cache for every clone on the machine, as Go's: it checks each file's hash, so a clone in another
# folder reuses what an earlier one read (the CDK libraries' types: ~100 s cold, ~7 s from it).
export MYPY_CACHE_DIR=${MYPY_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pd-inference/mypy}
# pytest-xdist, one worker per core and one more: many tests wait on processes (a control plane, Ray, aiperf)
# more than they compute. A file, or the real control plane's tests, runs on one worker (tests/work_units.py).
exec .venv/bin/python -m pytest -n "$(( $(nproc) + 1 ))" --dist loadfile "$@"
