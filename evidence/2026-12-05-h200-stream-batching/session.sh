#!/usr/bin/env bash
# Issue #53 on one H200: Ray Serve LLM's stream batching. Each LLMServer gathers a stream's tokens for
# RAYLLM_MODEL_RESPONSE_BATCH_TIMEOUT_MS (50 ms unless set) before it sends any (ray/llm/_internal/serve/constants.py,
# utils/batcher.py), so the first token waits for the first tick. One subcommand per device call, all on one host:
#   bash session.sh carry|setup                  as ../2026-12-05-h200-phases/session.sh (the same 12 chunks)
#   bash session.sh rehearse NAME LIMIT ARGS...  ops rehearse --stage dev --share-gpus --weights /tmp/ckpt-0 ARGS
#                                                within LIMIT s -> $OUT/NAME.*
#   bash session.sh unbatched NAME LIMIT ARGS... the same with every token sent as it comes (interval 0)
set -uo pipefail
cd "$(dirname "$0")/../.."
phases=evidence/2026-12-05-h200-phases/session.sh

case "${1:-}" in
  carry|setup) bash $phases "$1" ;;
  rehearse) bash $phases "$@" ;;
  unbatched)
    name=$2 limit=$3
    shift 3
    bash $phases rehearse "$name" "$limit" --engine-env RAYLLM_MODEL_RESPONSE_BATCH_TIMEOUT_MS=0 "$@" ;;
  *) sed -n '2,8p' "$0"; exit 2 ;;
esac
