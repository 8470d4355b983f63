#!/usr/bin/env bash
# PD against colocated on a real-format checkpoint, one H200 (one subcommand per device call, all on one host):
#   bash session.sh carry                       a carried chunk (.rehearsal/carry/chunk-*) -> /tmp/chunks
#   bash session.sh setup                       join the chunks, install, write the seed-0 checkpoint, evict it
#   bash session.sh control                     write the seed-1 checkpoint (the negative control's decode weights)
#   bash session.sh rehearse NAME LIMIT ARGS... ops rehearse --stage dev --share-gpus --weights /tmp/ckpt-0 ARGS
#                                               within LIMIT s -> $OUT/NAME.*, its results kept in /tmp/keep/NAME
# The chunks: the serve and libfabric pieces as one tar, split to fit beside the checkout (README.md here).
set -uo pipefail
cd "$(dirname "$0")/../.."
chunks=evidence/2026-12-02-h200-tutorial-emulated/chunks.sh
site=/tmp/rehearsal-site
out=${OUT:?OUT is the device folder}

take() {
  mkdir -p /tmp/chunks && mv -f .rehearsal/carry/chunk-* /tmp/chunks/ && echo "chunks here: $(ls /tmp/chunks | tr '\n' ' ')"
}

installed() {
  local lines
  lines=$(serving_lab/scripts/rehearsal_install.sh "$site" /tmp/pieces 2>>"$out/install.log") || { tail -n 3 "$out/install.log"; return 1; }
  eval "$lines"
}

checkpoint() {  # SEED: the checkpoint, its record and index, the page cache after the eviction
  local dir=/tmp/ckpt-$1
  python3 -m serving_lab.rehearse.checkpoint --out "$dir" --seed "$1" 2>&1 | tee -a "$out/setup.log"
  cp "$dir/checkpoint.json" "$out/checkpoint-$1.json"
  cp "$dir/model.safetensors.index.json" "$out/index-$1.json"
  python3 -m serving_lab.rehearse.page_cache evict "$dir" | tee -a "$out/setup.log"
}

exporter_probe() {  # does NIXL 1.3.1's Prometheus exporter start with an agent, and what does it export?
  NIXL_TELEMETRY_ENABLE=y NIXL_TELEMETRY_EXPORTER=prometheus NIXL_TELEMETRY_PROMETHEUS_PORT=19099 \
    NIXL_TELEMETRY_PROMETHEUS_LOCAL=y timeout 60 python3 -c '
import time, urllib.request
from nixl._api import nixl_agent, nixl_agent_config
agent = nixl_agent("probe", nixl_agent_config(backends=["UCX"], capture_telemetry=True))
time.sleep(2)
print(urllib.request.urlopen("http://127.0.0.1:19099/metrics", timeout=5).read().decode()[:4000])
' > "$out/exporter-probe.txt" 2>&1; echo "exporter probe: exit $?" | tee -a "$out/setup.log"
}

case "${1:-}" in
  carry) take ;;
  setup)
    take && bash $chunks join
    { nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; df -h /tmp /dev/shm; free -g; nproc; } > "$out/host.txt" 2>&1
    installed || exit 1
    exporter_probe
    checkpoint 0 ;;
  control) installed && checkpoint 1 ;;
  rehearse)
    name=$2 limit=$3
    shift 3
    installed || exit 1
    python3 -m serving_lab.rehearse.page_cache resident /tmp/ckpt-0  # the console only: $OUT holds 8 files
    REHEARSAL_PIECES=/tmp/pieces REHEARSAL_SITE=$site REHEARSAL_LIMIT=$limit \
      serving_lab/scripts/rehearsal_device_run.sh "$name" --stage dev --share-gpus --weights /tmp/ckpt-0 "$@"
    code=$?
    mkdir -p "/tmp/keep/$name" && tar xzf "$out/$name.tgz" -C "/tmp/keep/$name" 2>/dev/null
    exit $code ;;
  *) sed -n '2,8p' "$0"; exit 2 ;;
esac
