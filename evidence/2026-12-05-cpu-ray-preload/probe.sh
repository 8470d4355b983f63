#!/usr/bin/env bash
# Does Ray 2.58's worker preloading move a Serve replica's imports before its deploy (issue #53's restart lever)?
#   bash evidence/2026-12-05-cpu-ray-preload/probe.sh [TRIALS]     (default 3; the project's .venv, no GPU)
# A Serve app whose module imports `slowmod` (5 s of sleep at import, its start time recorded), deployed to a fresh
# `ray start --head --num-cpus=8` in three arms: as is; RAY_preload_python_modules=slowmod; and that with
# RAY_enable_worker_prestart=1. Each trial waits 15 s after ray start (for any prestart), deploys, and prints when
# the replica's process began importing slowmod and when RUNNING was seen, in seconds after the deploy.
# A negative import start would mean a worker preloaded before the deploy hosts the replica.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$root/.venv/bin
trials=${1:-3}
work=$(mktemp -d)
trap '"$bin/ray" stop --force >/dev/null 2>&1; rm -rf "$work"' EXIT
cat > "$work/slowmod.py" <<'PY'
import time
STARTED = time.time()
time.sleep(5)
PY
cat > "$work/probe_app.py" <<'PY'
import time
import slowmod
from ray import serve


@serve.deployment(ray_actor_options={"num_cpus": 0})
class Probe:
    def __call__(self, request):
        return {"import_started": slowmod.STARTED}


app = Probe.bind()
PY
printf 'applications:\n- name: probe\n  route_prefix: /\n  import_path: probe_app:app\n' > "$work/config.yaml"

status() {
  curl -s localhost:8265/api/serve/applications/ |
    "$bin/python" -c "import sys, json; print(json.load(sys.stdin)['applications'].get('probe', {}).get('status'))" 2>/dev/null
}

trial() {  # LABEL [NAME=VALUE ...]
  local label=$1; shift
  "$bin/ray" stop --force >/dev/null 2>&1 || true
  env PYTHONPATH="$work" "$@" "$bin/ray" start --head --num-cpus=8 --disable-usage-stats --dashboard-port=8265 >/dev/null 2>&1
  sleep 15
  local deployed running answer
  deployed=$(date +%s.%N)
  (cd "$work" && env PYTHONPATH="$work" "$bin/serve" deploy config.yaml >/dev/null 2>&1)
  for _ in $(seq 1 600); do [[ "$(status)" == RUNNING ]] && break; sleep 0.2; done
  running=$(date +%s.%N)
  answer=$(curl -s -m 30 localhost:8000/)
  "$bin/python" -c "import json; a = json.loads('$answer'); print(f'$label: import started {a[\"import_started\"] - $deployed:+.1f} s, RUNNING {$running - $deployed:.1f} s after the deploy')"
}

for n in $(seq 1 "$trials"); do
  trial "as is"
  trial "preload" RAY_preload_python_modules=slowmod
  trial "preload+prestart" RAY_preload_python_modules=slowmod RAY_enable_worker_prestart=1
done
