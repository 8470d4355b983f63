#!/usr/bin/env bash
# Issue #53 on one H200: the engine's CUDA graph arms, each engine alone on the L4's emulated budget
# (serving_lab/rehearse/graph_arms.py), then the Serve rehearsal of an arm. One subcommand per device call, one host:
#   bash session.sh carry|setup                  as ../2026-12-05-h200-phases/session.sh (the same 13 chunks)
#   bash session.sh arms NAME LIMIT ARMS         python3 -m serving_lab.rehearse.graph_arms --stage dev
#                                                --weights /tmp/ckpt-0 --arms ARMS within LIMIT s -> $OUT/NAME.*
#   bash session.sh rehearse NAME LIMIT ARGS...  ops rehearse --stage dev --share-gpus --weights /tmp/ckpt-0 ARGS
set -uo pipefail
cd "$(dirname "$0")/../.."
phases=evidence/2026-12-05-h200-phases/session.sh

case "${1:-}" in
  carry|setup|rehearse) bash $phases "$@" ;;
  arms)
    name=$2 limit=$3 arms=$4
    for kind in triton flashinfer compile; do  # the cache seeds the chunks carried, as the rehearsals use them
      seed=/tmp/seed/$kind-cache.tgz; var=REHEARSAL_${kind^^}_SEED
      [[ -f $seed ]] && export "$var=$seed"
    done
    REHEARSAL_COMMAND=graph-arms REHEARSAL_PIECES=/tmp/pieces REHEARSAL_SITE=/tmp/rehearsal-site \
      REHEARSAL_LIMIT=$limit serving_lab/scripts/rehearsal_device_run.sh "$name" --stage dev --weights /tmp/ckpt-0 \
      --arms "$arms" ;;
  *) sed -n '2,7p' "$0"; exit 2 ;;
esac
