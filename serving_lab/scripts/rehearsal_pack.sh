#!/usr/bin/env bash
# Packs the rehearsal's software for the offline GPU host, in pieces of at most 60 MiB.
#   serving_lab/scripts/rehearsal_pack.sh [serve|bench ...]      (default: both)
# Needs a package index (PyPI). For each lock (serving_lab/pins/<name>.lock, from serving_lab/scripts/rehearsal_lock.py):
#   1. downloads exactly its wheels, hash-checked, into .rehearsal/wheels/ (a wheel already there with the
#      lock's hash is not downloaded again);
#   2. installs them, without dependencies and for the host (CPython 3.12, manylinux x86_64), into a staging
#      tree of their own: .rehearsal/stage/<name>/ (pip --target);
#   3. packs the tree, tar | xz -T0, into .rehearsal/pieces/<name>.tar.xz.part-00, -01, ... and lists every
#      piece in .rehearsal/pieces/SHA256SUMS, copied to serving_lab/pins/pieces.sha256 (commit it: the host's
#      install accepts only the pieces it lists).
# A tree whose lock has not changed since its pieces were made (and whose pieces still check) is not
# staged or packed again. On the host: serving_lab/scripts/rehearsal_install.sh.
# Prints the wheels, tree and piece sizes, and the pieces grouped for transfers of at most 60 MiB each.
# Environment: PYTHON (a python with pip; default .venv/bin/python, else python3), REHEARSAL_INDEX_URL
# (default https://pypi.org/simple), REHEARSAL_PIECE_SIZE (split's -b, default 60M = 60 MiB), XZ_OPT (xz's
# own, e.g. -9; default preset 6).
# pip --target warns that include/ already exists: nixl-cu13's C++ headers (.data/headers) are not installed
# beside nvidia-cudnn-frontend's top-level include/; nothing needs them at run time.
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0;; esac
set -euo pipefail
cd "$(dirname "$0")/../.."
source serving_lab/scripts/pieces.sh

say() { echo "rehearsal_pack: $*"; }
die() { echo "rehearsal_pack: $*" >&2; exit 1; }

python=${PYTHON:-}
if [[ -z "$python" ]]; then
  if [[ -x .venv/bin/python ]]; then python=.venv/bin/python; else python=python3; fi
fi
index=${REHEARSAL_INDEX_URL:-https://pypi.org/simple}
piece_size=${REHEARSAL_PIECE_SIZE:-60M}
names=("$@")
[[ ${#names[@]} -gt 0 ]] || names=(serve bench)
for name in "${names[@]}"; do
  [[ -f serving_lab/pins/$name.lock ]] || die "no serving_lab/pins/$name.lock (allowed: serve, bench; serving_lab/scripts/rehearsal_lock.py writes them)"
done
for tool in xz tar split sha256sum; do command -v $tool >/dev/null || die "$tool is needed"; done
"$python" -m pip --version >/dev/null 2>&1 || die "$python has no pip (set PYTHON)"

wheels=.rehearsal/wheels stage=.rehearsal/stage pieces=.rehearsal/pieces
mkdir -p "$wheels" "$stage" "$pieces"
mapfile -t target < <("$python" serving_lab/scripts/rehearsal_lock.py --target-args)
# This machine's pip settings (find-links, extra indexes, global constraints) must not apply.
pip() {
  env $(env | sed -n 's/^\(PIP_[A-Z_]*\)=.*/-u \1/p' | grep -v -e PIP_CERT -e PIP_CACHE_DIR) \
    PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 "$python" -m pip "$@"
}
pack_version=1 # bump when the packing changes, so that every tree is packed again
started=$SECONDS
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }

# sha256 -> file name, for the wheels present
declare -A have
refresh_wheels() {
  have=()
  local sum file
  while read -r sum file; do have[$sum]=$file; done < <(cd "$wheels" && find . -maxdepth 1 -name '*.whl' -printf '%f\0' | xargs -0r sha256sum)
}
refresh_wheels

for name in "${names[@]}"; do
  lock=serving_lab/pins/$name.lock
  mapfile -t lines < <(grep -v -e '^#' -e '^[[:space:]]*$' "$lock")
  missing=()
  for line in "${lines[@]}"; do
    [[ -n "${have[${line##*sha256:}]:-}" ]] || missing+=("$line")
  done
  if [[ ${#missing[@]} -gt 0 ]]; then
    say "$name: downloading ${#missing[@]} of ${#lines[@]} wheels from $index"
    printf '%s\n' "${missing[@]}" > "$wheels/.download-$name.txt"
    pip download --quiet --require-hashes --no-deps --only-binary=:all: "${target[@]}" --index-url "$index" \
      -d "$wheels" -r "$wheels/.download-$name.txt" || die "$name: pip download failed"
    rm -f "$wheels/.download-$name.txt"
    refresh_wheels
  fi
  bytes=0
  for line in "${lines[@]}"; do
    file=${have[${line##*sha256:}]:-}
    [[ -n "$file" ]] || die "$name: no wheel in $wheels with the hash of ${line%% *}"
    bytes=$((bytes + $(stat -c %s "$wheels/$file")))
  done
  say "$name: ${#lines[@]} wheels, $(mib $bytes), all present and matching the lock's hashes"

  digest=$( { echo "pack $pack_version ${tar_flags[*]} $piece_size${XZ_OPT:+ xz $XZ_OPT}"; printf '%s\n' "${lines[@]}"; } | sha256sum | cut -c1-64)
  if pieces_current "$name" "$digest"; then
    say "$name: pieces are up to date with $lock"
    continue
  fi
  rm -f "$pieces/.$name.stamp"
  rm -rf "${stage:?}/$name"
  t0=$SECONDS
  pip install --quiet --no-deps --no-index --find-links "$wheels" --require-hashes --only-binary=:all: "${target[@]}" \
    --target "$stage/$name" --no-compile --no-warn-script-location -r "$lock" || die "$name: installing into $stage/$name failed"
  tree=$(du -sb "$stage/$name" | cut -f1)
  say "$name: staged $stage/$name ($(mib "$tree"), $(find "$stage/$name" -type f | wc -l) files) in $((SECONDS - t0)) s"
  t0=$SECONDS
  REHEARSAL_PIECE_SIZE=$piece_size pack_tree "$name" "$stage"
  say "$name: packed in $((SECONDS - t0)) s"
  echo "$digest" > "$pieces/.$name.stamp"
done

# The digests the checkout vouches for (serving_lab/scripts/rehearsal_install.sh refuses any other piece): commit it with
# the pieces' locks.
write_sums
say "serving_lab/pins/pieces.sha256 written: commit it, so the host's install accepts exactly these pieces"
total=0 count=0
while read -r _ file; do
  size=$(stat -c %s "$pieces/$file"); total=$((total + size)); count=$((count + 1))
  echo "  $file  $(mib "$size")"
done < "$pieces/SHA256SUMS"
say "$count pieces, $(mib $total) in all, in $pieces/ (with SHA256SUMS); $((SECONDS - started)) s"
# Transfers of at most 60 MiB: the pieces grouped largest first, each into the first transfer it fits in
# (SHA256SUMS, under 1 KiB, goes with every transfer).
limit=$((60 * 1048576)) groups=() sizes=()
while read -r size file; do
  for i in "${!groups[@]}"; do
    if (( sizes[i] + size <= limit )); then groups[i]+=" $file"; sizes[i]=$((sizes[i] + size)); continue 2; fi
  done
  groups+=("$file"); sizes+=("$size")
done < <(while read -r _ file; do echo "$(stat -c %s "$pieces/$file") $file"; done < "$pieces/SHA256SUMS" | sort -k1,1nr -k2,2)
for i in "${!groups[@]}"; do echo "  transfer $((i + 1)): ${groups[i]} ($(mib "${sizes[i]}"))"; done
n=${#groups[@]}
say "$n transfers"
