# Sourced by the packing scripts that stage a tree themselves (rehearsal_debs.sh, rehearsal_build.sh): one tar stream
# per tree, as rehearsal_pack.sh writes it (fixed order, owner and time: the same tree packs to the same bytes), cut
# into pieces, and the digests of every piece in .rehearsal/pieces/ that the host's install accepts.
pieces=.rehearsal/pieces
tar_flags=(--format=gnu --sort=name --owner=0 --group=0 --numeric-owner --mtime=2026-11-30T00:00:00Z)

# pack_tree NAME PARENT: PARENT/NAME/ -> .rehearsal/pieces/NAME.tar.xz.part-NN (REHEARSAL_PIECE_SIZE, default 60M)
pack_tree() {
  rm -f "$pieces/$1".tar.xz.part-*
  tar "${tar_flags[@]}" -C "$2" -cf - "$1" | xz -T0 -c | split -b "${REHEARSAL_PIECE_SIZE:-60M}" -d -a 2 - "$pieces/$1.tar.xz.part-"
}

# write_sums: SHA256SUMS of every piece here, and serving_lab/pins/pieces.sha256 (to commit): those lines plus the
# committed lines of trees none of whose pieces are here (packed elsewhere, e.g. bench when only serve was packed)
write_sums() {
  (cd "$pieces" && find . -maxdepth 1 -name '*.tar.xz.part-*' -printf '%f\n' | LC_ALL=C sort | xargs -r sha256sum > SHA256SUMS.new \
    && mv SHA256SUMS.new SHA256SUMS)
  local here kept
  here=$(sed -n 's/^[0-9a-f]\{64\}  \(.*\)\.tar\.xz\.part-[0-9]*$/\1/p' "$pieces/SHA256SUMS" | sort -u | paste -sd'|')
  kept=$(grep -vE "  (${here:-.^})\.tar\.xz\.part-[0-9]+\$" serving_lab/pins/pieces.sha256 2>/dev/null || true)
  { cat "$pieces/SHA256SUMS"; [[ -z "$kept" ]] || echo "$kept"; } | LC_ALL=C sort -k2 > serving_lab/pins/pieces.sha256
}

# pieces_current NAME DIGEST: the tree's pieces were packed from inputs of this digest and still check
pieces_current() {
  [[ "$(cat "$pieces/.$1.stamp" 2>/dev/null)" == "$2" ]] && ls "$pieces/$1".tar.xz.part-* >/dev/null 2>&1 \
    && (cd "$pieces" && grep " $1\.tar\.xz\.part-" SHA256SUMS | sha256sum --check --quiet --status)
}
