#!/usr/bin/env bash
# The checkout grew past what a 54 MiB piece leaves of a call's 64 MiB, so this session carried one tar stream
# of the pieces and the cache seeds, cut into chunks that fit beside the checkout:
#   here:  bash chunks.sh pack PIECES_DIR SEED_DIR CHUNK_DIR BYTES   one tar of both, split into CHUNK_DIR/chunk-NN
#   host:  bash chunks.sh take      .rehearsal/pieces/chunk-* -> /tmp/chunks
#   host:  bash chunks.sh join      /tmp/chunks joined and unpacked: pieces -> /tmp/pieces, seeds -> /tmp/seed
set -euo pipefail
case "${1:-}" in
  pack)
    pieces=$2 seed=$3 out=$4 bytes=$5
    mkdir -p "$out"
    tar -cf - -C "$pieces" $(cd "$pieces" && ls) -C "$seed" $(cd "$seed" && ls) | split -b "$bytes" -d -a 2 - "$out/chunk-"
    ls -l "$out" ;;
  take)
    mkdir -p /tmp/chunks
    mv -f .rehearsal/pieces/chunk-* /tmp/chunks/
    echo "chunks here: $(ls /tmp/chunks | tr '\n' ' ')" ;;
  join)
    mkdir -p /tmp/joined /tmp/pieces /tmp/seed
    cat /tmp/chunks/chunk-* | tar -xf - -C /tmp/joined
    mv -f /tmp/joined/*.part-* /tmp/joined/SHA256SUMS /tmp/pieces/
    mv -f /tmp/joined/*.tgz /tmp/seed/ 2>/dev/null || true
    echo "pieces: $(ls /tmp/pieces | wc -l) files; seeds: $(ls /tmp/seed | tr '\n' ' ')" ;;
  *) sed -n '2,6p' "$0"; exit 2 ;;
esac
