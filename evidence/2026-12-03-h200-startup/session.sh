#!/usr/bin/env bash
# Where a warm PD start-up's seconds go on one H200: the Python imports each process of it makes, timed alone on
# the host with the installed trees, then the rehearsal itself (one subcommand per device call):
#   bash evidence/2026-12-03-h200-startup/session.sh imports   -> $OUT/imports.tgz
#   bash evidence/2026-12-03-h200-startup/session.sh rehearse NAME LIMIT ARGS...
# The pieces and seeds come as in ../2026-12-02-h200-tutorial-emulated/chunks.sh (take, join: /tmp/pieces, /tmp/seed).
set -uo pipefail
cd "$(dirname "$0")/../.."
pieces=/tmp/pieces site=/tmp/rehearsal-site
out=${OUT:?OUT is the device folder}

# The modules each start-up process imports first: Serve's build task and the replica (ray.serve.llm's PD
# builder), the engine core (AsyncLLM's core) and the Ray worker that holds the GPU (vLLM's GPU worker).
modules="ray.serve.llm vllm vllm.v1.engine.core vllm.v1.executor.ray_executor vllm.v1.worker.gpu_worker"

imports() {
  local dir=/tmp/imports lines
  lines=$(serving_lab/scripts/rehearsal_install.sh "$site" "$pieces" 2>>/tmp/install.log) || { tail -n 3 /tmp/install.log; return 1; }
  eval "$lines"
  mkdir -p "$dir"
  for module in $modules; do
    local t0=$EPOCHREALTIME
    python3 -X importtime -c "import $module" 2> "$dir/$module.txt" || echo "import $module failed"
    echo "$module $(python3 -c "print(f'{$EPOCHREALTIME - $t0:.2f}')") s" | tee -a "$dir/summary.txt"
  done
  # the ten largest cumulative imports of vLLM's GPU worker (importtime's columns: self us | cumulative us | name)
  sort -t'|' -k2 -n -r "$dir/vllm.v1.worker.gpu_worker.txt" | head -n 10 >> "$dir/summary.txt"
  tar czf "$out/imports.tgz" -C /tmp imports
}

case "${1:-}" in
  imports) imports ;;
  rehearse)
    name=$2 limit=$3
    shift 3
    REHEARSAL_PIECES=$pieces REHEARSAL_SITE=$site REHEARSAL_LIMIT=$limit \
      REHEARSAL_TRITON_SEED=/tmp/seed/triton-cache.tgz REHEARSAL_FLASHINFER_SEED=/tmp/seed/flashinfer-cache.tgz \
      REHEARSAL_COMPILE_SEED=/tmp/seed/compile-cache.tgz serving_lab/scripts/rehearsal_device_run.sh "$name" "$@"
    ;;
  *) sed -n '2,6p' "$0"; exit 2 ;;
esac
