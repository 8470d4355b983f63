#!/usr/bin/env bash
# One command on a lent GPU host whose commands end after ~10 minutes and whose output comes back from $OUT
# (evidence/README.md): unpack the carried pieces (once per warm machine), run
# `python3 -m ops rehearse ARGS...` within a time limit, and leave everything it wrote under $OUT:
#   OUT=/out serving_lab/scripts/rehearsal_device_run.sh NAME --stage dev --bench --mode pd --levels 1,16,64 ...
# NAME names the results in $OUT: NAME.log (the console), NAME.tgz (plan, report, NIXL lines, metric names,
# the benchmark runs and aiperf's summaries), NAME-records.tgz (aiperf's per-request records),
# NAME-workers.txt (the last lines of every Ray worker log, refreshed while it runs: what a killed run
# leaves), install.log, triton-cache.tgz, flashinfer-cache.tgz and compile-cache.tgz (8 files, what comes back); each at most 16 MiB, what comes back from
# a lent host.
# Environment: REHEARSAL_COMMAND (rehearse, the default, or graph-arms: python3 -m serving_lab.rehearse.graph_arms
# with ARGS), REHEARSAL_PIECES (.rehearsal/pieces), REHEARSAL_SITE (${XDG_CACHE_HOME:-$HOME/.cache}/rehearsal-site: private; serving_lab/scripts/rehearsal_install.sh refuses a folder others can write),
# REHEARSAL_LIMIT (seconds for ops rehearse, default 520), TRITON_CACHE_DIR (.rehearsal/cache/triton: Triton's
# compiled kernels, kept while the machine stays warm and packed for the next host of the same GPU),
# REHEARSAL_TRITON_SEED (a triton-cache.tgz from an earlier run; default: beside TRITON_CACHE_DIR),
# FLASHINFER_WORKSPACE_BASE (flashinfer-home beside TRITON_CACHE_DIR: FlashInfer's JIT builds go to its
# .cache/flashinfer, flashinfer/jit/env.py; kept and packed as flashinfer-cache.tgz like Triton's),
# REHEARSAL_FLASHINFER_SEED (a flashinfer-cache.tgz from an earlier run; default: beside TRITON_CACHE_DIR),
# VLLM_CACHE_ROOT and TORCHINDUCTOR_CACHE_DIR (compile/vllm and compile/inductor beside TRITON_CACHE_DIR:
# torch.compile's graphs and kernels, packed as compile-cache.tgz), REHEARSAL_COMPILE_SEED (a compile-cache.tgz).
# Exit: ops rehearse's code (124 when the limit ended it); 2 for bad usage; 1 when the install fails.
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0;; esac
set -uo pipefail
cd "$(dirname "$0")/../.."
name=${1:-}
if [[ -z "$name" || "$name" == -* || -z "${OUT:-}" ]]; then
  echo "usage: OUT=DIR serving_lab/scripts/rehearsal_device_run.sh NAME ops-rehearse-arguments..." >&2
  exit 2
fi
shift
[[ "$name" =~ ^[A-Za-z0-9._-]+$ ]] || { echo "rehearsal_device_run: NAME: '$name' (allowed: letters, digits, . _ -)" >&2; exit 2; }
case "${REHEARSAL_COMMAND:-rehearse}" in  # which command runs in the rehearsal's environment
  rehearse) command=(python3 -m ops rehearse) ;;
  graph-arms) command=(python3 -m serving_lab.rehearse.graph_arms) ;;  # issue #53's graph arms, engine by engine
  *) echo "rehearsal_device_run: REHEARSAL_COMMAND: '${REHEARSAL_COMMAND:0:40}' (allowed: rehearse, graph-arms)" >&2; exit 2 ;;
esac
mkdir -p "$OUT"
pieces=${REHEARSAL_PIECES:-.rehearsal/pieces}
site=${REHEARSAL_SITE:-${XDG_CACHE_HOME:-$HOME/.cache}/rehearsal-site}
limit=${REHEARSAL_LIMIT:-520}
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-$PWD/.rehearsal/cache/triton} PYTHONUNBUFFERED=1
mkdir -p "$TRITON_CACHE_DIR"
# A kernel cache an earlier host of the same GPU left (its ARCHIVE, carried back) seeds an empty cache folder:
# seed_cache LABEL FOLDER ARCHIVE; pack_cache FOLDER ARCHIVE packs a non-empty one into $OUT for the next host.
seed_cache() {
  if [[ -f "$3" && -z "$(ls -A "$2")" ]]; then
    tar xzf "$3" -C "$(dirname "$2")" && echo "rehearsal_device_run: $1 cache seeded from $3 ($(find "$2" -type f | wc -l) files)" >&2
  fi
}
pack_cache() {
  if [[ -n "$(ls -A "$1" 2>/dev/null)" ]]; then tar czf "$OUT/$2" -C "$(dirname "$1")" "$(basename "$1")"; fi
}
# Triton's (REHEARSAL_TRITON_SEED, default beside the cache folder): the engines then skip compiling the GDN
# kernels. FlashInfer's JIT builds: it compiles its sampling kernels in the first engine's start-up profile on a
# host without them (seen on an H200: over a minute, evidence/2026-12-01-h200-l4-emulated/); ninja
# rebuilds nothing when the sources are older than the outputs, and the pieces' files all carry one old mtime
# (serving_lab/scripts/rehearsal_pack.sh --mtime).
export FLASHINFER_WORKSPACE_BASE=${FLASHINFER_WORKSPACE_BASE:-$(dirname "$TRITON_CACHE_DIR")/flashinfer-home}
flashinfer_cache=$FLASHINFER_WORKSPACE_BASE/.cache/flashinfer
mkdir -p "$flashinfer_cache"
# torch.compile's: vLLM keeps its compiled graphs under VLLM_CACHE_ROOT/torch_compile_cache (vllm/envs.py,
# vllm/compilation/backends.py) and Inductor its kernels under TORCHINDUCTOR_CACHE_DIR; both in one folder.
compile_cache=$(dirname "$TRITON_CACHE_DIR")/compile
export VLLM_CACHE_ROOT=${VLLM_CACHE_ROOT:-$compile_cache/vllm} TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-$compile_cache/inductor}
mkdir -p "$compile_cache"
seed_cache Triton "$TRITON_CACHE_DIR" "${REHEARSAL_TRITON_SEED:-$(dirname "$TRITON_CACHE_DIR")/triton-cache.tgz}"
seed_cache FlashInfer "$flashinfer_cache" "${REHEARSAL_FLASHINFER_SEED:-$(dirname "$TRITON_CACHE_DIR")/flashinfer-cache.tgz}"
seed_cache torch.compile "$compile_cache" "${REHEARSAL_COMPILE_SEED:-$(dirname "$TRITON_CACHE_DIR")/compile-cache.tgz}"
mkdir -p "$VLLM_CACHE_ROOT" "$TORCHINDUCTOR_CACHE_DIR" # after seeding: seed_cache fills only an empty folder

if ! env_lines=$(serving_lab/scripts/rehearsal_install.sh "$site" "$pieces" 2>"$OUT/install.log"); then
  echo "rehearsal_device_run: install failed: $(tail -n 1 "$OUT/install.log")" >&2
  exit 1
fi
eval "$env_lines"

results=$(mktemp -d /tmp/rehearsal-results.XXXXXX)
# the newest lines of every worker log, for a run the limit cuts short: ops rehearse's Ray temp folders
# (serving_lab/rehearse/cli.py, mkdtemp prefix "rh-" in /tmp) and Ray's worker log names (ray_cluster.worker_logs)
watch_workers() {
  while true; do
    sleep 15 & wait $!  # a signal ends `wait` at once (a foreground sleep would hold off the kill)
    for log in /tmp/rh-*/session_latest/logs/worker-*; do
      [[ -f "$log" ]] && { echo "== $log"; tail -n 40 "$log"; }
    done > "$OUT/$name-workers.txt.tmp" 2>/dev/null && mv "$OUT/$name-workers.txt.tmp" "$OUT/$name-workers.txt"
  done
}
watch_workers >/dev/null 2>&1 &
watcher=$!
extra=()
[[ -n "${REHEARSAL_AIPERF:-}" && ${REHEARSAL_COMMAND:-rehearse} == rehearse ]] &&
  extra=(--aiperf "$REHEARSAL_AIPERF" --client-pythonpath "$REHEARSAL_BENCH_PATH")
timeout "$limit" "${command[@]}" "$@" "${extra[@]}" --out "$results" > "$OUT/$name.log" 2>&1
code=$?
kill "$watcher" 2>/dev/null
wait "$watcher" 2>/dev/null
# What comes back is at most 16 MiB a file: the results without aiperf's bulky files (the prompts it
# generated, inputs.json: ~57 MB for a 64-stream long-prompt level; its CSV copies) in NAME.tgz, the
# per-request records (profile_export.jsonl) apart in NAME-records.tgz, dropped with a line if too large.
tar czf "$OUT/$name.tgz" -C "$results" --exclude=inputs.json --exclude='*.csv' --exclude=profile_export.jsonl . 2>/dev/null
(cd "$results" && find . -name profile_export.jsonl -print0 | tar czf "$OUT/$name-records.tgz" --null -T - 2>/dev/null)
pack_cache "$TRITON_CACHE_DIR" triton-cache.tgz
pack_cache "$flashinfer_cache" flashinfer-cache.tgz
pack_cache "$compile_cache" compile-cache.tgz
for archive in "$OUT/$name.tgz" "$OUT/$name-records.tgz" "$OUT"/*-cache.tgz; do
  if [[ -f "$archive" ]] && (( $(stat -c %s "$archive") > 16 * 1024 * 1024 )); then
    echo "rehearsal_device_run: $(basename "$archive") is over 16 MiB and would not come back: removed" >&2
    rm -f "$archive"
  fi
done
rm -rf "$results"
echo "rehearsal_device_run: $name: exit $code ($( ((code == 124)) && echo "the $limit s limit ended it" || echo done))"
grep -v "DEPLOYING\|^  override" "$OUT/$name.log" | tail -n 25
exit $code
