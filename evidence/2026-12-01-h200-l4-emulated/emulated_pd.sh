#!/usr/bin/env bash
# PD through Serve with both engines on this host's one GPU, each on the emulated memory budget of the stage's
# GPU node (`ops rehearse --share-gpus --emulate-node`), its KV cache sized by one engine profiled alone on that
# budget first (engines side by side cannot profile it: serving_lab/rehearse/overrides.py _shared_gpu_memory).
# On the GPU host, with the serve and bench trees' pieces in /tmp/pieces:
#   OUT=DIR bash evidence/2026-12-01-h200-l4-emulated/emulated_pd.sh NAME CONFIG_DIR ARM [ops-rehearse-args...]
# 1. ARM (an arm of ../2026-12-01-h200-tuned/profile_arms.sh: the same engine settings as CONFIG_DIR's dev.yaml)
#    runs offline on the emulated budget; its vLLM line "--kv-cache-memory=N ... to fit into requested memory"
#    gives N. KV_CACHE_BYTES=N skips this step (a figure an earlier profile printed).
# 2. `ops rehearse --stage dev --config-dir CONFIG_DIR --mode pd --share-gpus --emulate-node --kv-cache-bytes N`
#    (serving_lab/scripts/rehearsal_device_run.sh NAME, REHEARSAL_LIMIT seconds), with the arguments given after ARM.
#    CALL_DEADLINE_S=S: step 2 gets what is left of S seconds from this script's start (REHEARSAL_LIMIT).
# Exit: 3 when step 1 printed no figure; 4 when under 120 s were left for step 2; otherwise rehearsal_device_run.sh's code.
set -uo pipefail
cd "$(dirname "$0")/../.."
[[ $# -ge 3 && -n "${OUT:-}" ]] || { echo "usage: OUT=DIR $0 NAME CONFIG_DIR ARM [ops-rehearse-args...]" >&2; exit 2; }
name=$1 config_dir=$2 arm=$3
shift 3
[[ -f "$config_dir/dev.yaml" ]] || { echo "emulated_pd: $config_dir/dev.yaml: no such stage file" >&2; exit 2; }
kv=${KV_CACHE_BYTES:-}
if [[ -z "$kv" ]]; then
  bash evidence/2026-12-01-h200-tuned/profile_arms.sh "$arm"
  kv=$(grep -o -m1 -- '--kv-cache-memory=[0-9]*` ([0-9.]* GiB) to fit into requested memory' "$OUT/profile-$arm.log" \
    | sed 's/^--kv-cache-memory=\([0-9]*\).*/\1/')
  [[ -n "$kv" ]] || { echo "emulated_pd: $OUT/profile-$arm.log: no '--kv-cache-memory=N' line: step 2 not run" >&2; exit 3; }
fi
[[ "$kv" =~ ^[1-9][0-9]*$ ]] || { echo "emulated_pd: KV_CACHE_BYTES: '$kv' is not a whole number of bytes" >&2; exit 2; }
if [[ -n "${CALL_DEADLINE_S:-}" ]]; then
  export REHEARSAL_LIMIT=$((CALL_DEADLINE_S - SECONDS))
  (( REHEARSAL_LIMIT >= 120 )) || { echo "emulated_pd: $REHEARSAL_LIMIT s left of CALL_DEADLINE_S: step 2 not run" >&2; exit 4; }
fi
echo "== $name: $config_dir on the emulated budget, each engine's KV cache $kv bytes"
REHEARSAL_PIECES=${REHEARSAL_PIECES:-/tmp/pieces} serving_lab/scripts/rehearsal_device_run.sh "$name" --stage dev \
  --config-dir "$config_dir" --mode pd --share-gpus --emulate-node --kv-cache-bytes "$kv" "$@"
