#!/usr/bin/env bash
# `python -m ops rehearse` on a Linux host with NVIDIA GPUs (docs/REHEARSAL.md).
#   serving_lab/scripts/rehearse.sh --stage dev [--bench] [--mode pd|colocated|both] ...
# The serving stack (Ray Serve LLM, vLLM, NIXL) and aiperf come from the trees that
# serving_lab/scripts/rehearsal_install.sh unpacked (default ${XDG_CACHE_HOME:-$HOME/.cache}/rehearsal-site, or REHEARSAL_SITE): serve/ goes
# first on the Python path (its protobuf 6 before the host's), bench/ is aiperf's own. The checkout itself is on
# it for Ray's workers through the head (serving_lab/rehearse/ray_cluster.py head_env).
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0;; esac
set -euo pipefail
cd "$(dirname "$0")/../.."
site=${REHEARSAL_SITE:-${XDG_CACHE_HOME:-$HOME/.cache}/rehearsal-site}
python=${PYTHON:-python3}
if [[ ! -d "$site/serve" ]]; then
  echo "rehearse: no serving stack in $site/serve: run serving_lab/scripts/rehearsal_install.sh first (or set REHEARSAL_SITE)" >&2
  exit 2
fi
export PYTHONPATH="$site/serve${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$site/serve/bin:$PATH"
extra=()
if [[ -x "$site/bench/bin/aiperf" ]]; then
  extra=(--aiperf "$site/bench/bin/aiperf" --client-pythonpath "$site/bench")
fi
exec "$python" -m ops rehearse "$@" "${extra[@]}"
