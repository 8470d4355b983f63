#!/usr/bin/env bash
# Does a Serve replica on a Ray node of its own (an EKS GPU pod's raylet) take a worker that node preloaded before
# the deploy, and does an actor the replica creates (vLLM's GPU worker) take one too?
#   bash evidence/2026-12-05-cpu-ray-preload/probe_nodes.sh [TRIALS]     (default 3; the project's .venv, no GPU)
# Two raylets on this machine: a head (2 CPUs) and a "GPU node" (4 CPUs, custom resource gpu_node) that gets the
# arm's RAY_* variables. The replica (on gpu_node) creates two actors there: `plain` with no runtime_env and `env`
# with an env_vars runtime_env, as vLLM's Ray executor gives its GPU workers (vllm/v1/executor/ray_executor_v2.py
# `_build_runtime_env`). Each imports `slowmod` (3 s of sleep, its start time recorded). Printed: when each began
# importing it and when RUNNING was seen, in seconds after the deploy (25 s after the nodes started); a negative
# start means a worker preloaded before the deploy hosts it.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$root/.venv/bin
trials=${1:-3}
work=$(mktemp -d)
trap '"$bin/ray" stop --force >/dev/null 2>&1; rm -rf "$work"' EXIT
cat > "$work/slowmod.py" <<'PY'
import time
STARTED = time.time()
time.sleep(3)
PY
cat > "$work/nodes_app.py" <<'PY'
import ray
import slowmod
from ray import serve


def started():
    import slowmod as module
    return module.STARTED


@ray.remote(num_cpus=0, resources={"gpu_node": 1})
class Plain:
    def started(self):
        return started()


@ray.remote(num_cpus=0, resources={"gpu_node": 1}, runtime_env={"env_vars": {"RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES": "1"}})
class WithEnv:
    def started(self):
        return started()


@serve.deployment(ray_actor_options={"num_cpus": 0, "resources": {"gpu_node": 1}})
class Probe:
    def __init__(self):
        self.inner = ray.get([Plain.remote().started.remote(), WithEnv.remote().started.remote()])

    def __call__(self, request):
        return {"replica": slowmod.STARTED, "plain": self.inner[0], "env": self.inner[1]}


app = Probe.bind()
PY
printf 'applications:\n- name: probe\n  route_prefix: /\n  import_path: nodes_app:app\n' > "$work/config.yaml"

status() {
  curl -s localhost:8265/api/serve/applications/ |
    "$bin/python" -c "import sys, json; print(json.load(sys.stdin)['applications'].get('probe', {}).get('status'))" 2>/dev/null
}

trial() {  # LABEL [NAME=VALUE ...]: the variables go to the GPU node's raylet only
  local label=$1; shift
  "$bin/ray" stop --force >/dev/null 2>&1 || true
  env PYTHONPATH="$work" "$bin/ray" start --head --num-cpus=2 --resources='{"head": 1}' --disable-usage-stats >/dev/null 2>&1
  env PYTHONPATH="$work" "$@" "$bin/ray" start --address=127.0.0.1:6379 --num-cpus=4 --resources='{"gpu_node": 10}' \
    --disable-usage-stats >/dev/null 2>&1
  sleep 25
  local deployed running answer
  deployed=$(date +%s.%N)
  (cd "$work" && env PYTHONPATH="$work" "$bin/serve" deploy config.yaml >/dev/null 2>&1)
  for _ in $(seq 1 600); do [[ "$(status)" == RUNNING ]] && break; sleep 0.2; done
  running=$(date +%s.%N)
  answer=$(curl -s -m 30 localhost:8000/)
  "$bin/python" -c "
import json; a = json.loads('$answer'); t = lambda k: f'{a[k] - $deployed:+.1f}'
print(f'$label: replica {t(\"replica\")} s, plain actor {t(\"plain\")} s, env actor {t(\"env\")} s, RUNNING {$running - $deployed:.1f} s')"
}

for n in $(seq 1 "$trials"); do
  trial "as is"
  trial "preload" RAY_preload_python_modules=slowmod
  trial "preload+prestart" RAY_preload_python_modules=slowmod RAY_enable_worker_prestart=1 \
    RAY_num_prestart_python_workers=4 RAY_worker_maximum_startup_concurrency=4
done
