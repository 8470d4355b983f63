#!/usr/bin/env bash
# The fabric gate's rates and the oracle's negative control with KV crossing, one H200 (one subcommand per call):
#   bash session.sh carry|control      as ../2026-12-04-h200-oracle/session.sh (a chunk; the seed-1 checkpoint)
#   bash session.sh setup              as there (join, install, checkpoint 0), then the host's disk and memory rates
#   bash session.sh rehearse NAME LIMIT ARGS...   ops rehearse --stage dev --share-gpus ARGS within LIMIT s
#                                      -> $OUT/NAME.*; 2026-12-04's colocated answers in /tmp/keep/colocated-1204
set -uo pipefail
cd "$(dirname "$0")/../.."
oracle=evidence/2026-12-04-h200-oracle
site=/tmp/rehearsal-site
out=${OUT:?OUT is the device folder}
shard=/tmp/ckpt-0/model-00001-of-00004.safetensors

rates() {  # one shard from the disk (O_DIRECT), then through the page cache; a CPU copy of 1 GiB
  python3 -m serving_lab.rehearse.page_cache evict /tmp/ckpt-0
  { echo "disk, O_DIRECT:"; dd if=$shard of=/dev/null bs=16M iflag=direct 2>&1 | tail -n 1
    echo "page cache, first read (from disk):"; dd if=$shard of=/dev/null bs=16M 2>&1 | tail -n 1
    echo "page cache, resident:"; dd if=$shard of=/dev/null bs=16M 2>&1 | tail -n 1
    echo "write to /dev/shm:"; dd if=$shard of=/dev/shm/shard bs=16M 2>&1 | tail -n 1; rm -f /dev/shm/shard
    python3 -c '
import statistics, time, torch
x = torch.ones(2**30, dtype=torch.uint8); y = torch.empty_like(x); laps = []
for _ in range(7):
    t = time.perf_counter(); y.copy_(x); laps.append(time.perf_counter() - t)
print(f"CPU copy of 1 GiB, {torch.get_num_threads()} threads: median {2**30 / statistics.median(laps) / 1e9:.1f} GB/s (7 laps)")'
  } 2>&1 | tee "$out/rates.txt"
  python3 -m serving_lab.rehearse.page_cache evict /tmp/ckpt-0
}

case "${1:-}" in
  carry|control) bash $oracle/session.sh "$1" ;;
  setup)
    bash $oracle/session.sh setup || exit 1
    mkdir -p /tmp/keep/colocated-1204 && tar xzf $oracle/runs/colocated.tgz -C /tmp/keep/colocated-1204
    rates ;;
  rehearse)
    name=$2 limit=$3
    shift 3
    lines=$(serving_lab/scripts/rehearsal_install.sh "$site" /tmp/pieces 2>>"$out/install.log") || exit 1
    eval "$lines"
    for kind in triton flashinfer compile; do  # cache seeds an earlier host packed, carried in the chunks
      seed=/tmp/seed/$kind-cache.tgz; var=REHEARSAL_${kind^^}_SEED
      [[ -f $seed ]] && export "$var=$seed"
    done
    REHEARSAL_PIECES=/tmp/pieces REHEARSAL_SITE=$site REHEARSAL_LIMIT=$limit \
      serving_lab/scripts/rehearsal_device_run.sh "$name" --stage dev --share-gpus "$@"
    code=$?
    mkdir -p "/tmp/keep/$name" && tar xzf "$out/$name.tgz" -C "/tmp/keep/$name" 2>/dev/null
    exit $code ;;
  *) sed -n '2,6p' "$0"; exit 2 ;;
esac
