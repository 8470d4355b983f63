#!/usr/bin/env bash
# Builds a tree for the offline GPU host from pinned sources, as pieces beside rehearsal_pack.sh's.
#   serving_lab/scripts/rehearsal_build.sh [TREE ...]      (default: every serving_lab/pins/<tree>.build)
# serving_lab/pins/<tree>.build lists `source URL SHA256` (one source tarball of Debian's archive), `wheel NAME==VERSION
# SHA256` (PyPI wheels whose nvidia/cu13 folder is the CUDA the configure line names CUDA) and one `configure ARGS`
# line. For each tree:
#   1. downloads what is not already in .rehearsal/build-src/ with that sha256, and checks every sha256;
#   2. builds it in .rehearsal/build/<tree>/ (autogen, configure --prefix=/opt/<tree> ARGS, make, make install);
#   3. stages .rehearsal/stage/<tree>/<tree>/: lib/ (the libraries, debug info stripped, and the CUDA runtime of the
#      wheels with its unversioned name), bin/, share/doc/ (the licence) and BUILD (the list), then packs it like
#      rehearsal_debs.sh and rewrites serving_lab/pins/pieces.sha256 (commit it).
# A tree whose list has not changed since its pieces were made (and whose pieces still check) is not built again.
# On the host, rehearsal_install.sh unpacks it and prints REHEARSAL_<TREE>=<folder> (libfabric-cuda:
# REHEARSAL_LIBFABRIC_CUDA, for ops rehearse --libfabric).
# Needs gcc, make, autoconf, automake, libtool (Debian: apt-get install autoconf automake libtool), xz, tar, split,
# sha256sum, python3 with pip, Debian's archive and PyPI. Environment: REHEARSAL_PIECE_SIZE (split's -b, default 60M).
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0;; esac
set -euo pipefail
cd "$(dirname "$0")/../.."
source serving_lab/scripts/pieces.sh

say() { echo "rehearsal_build: $*"; }
die() { echo "rehearsal_build: $*" >&2; exit 1; }

names=("$@")
if [[ ${#names[@]} -eq 0 ]]; then
  mapfile -t names < <(cd serving_lab/pins && ls -1 -- *.build 2>/dev/null | sed 's/\.build$//')
  [[ ${#names[@]} -gt 0 ]] || die "no serving_lab/pins/<tree>.build"
fi
for name in "${names[@]}"; do
  [[ "$name" =~ ^[a-z][a-z0-9-]{0,31}$ && -f serving_lab/pins/$name.build ]] || die "no serving_lab/pins/$name.build"
done

# check_sum FILE SHA256: die unless FILE has it
check_sum() {
  local got
  got=$(sha256sum "$1" | cut -c1-64)
  [[ "$got" == "$2" ]] || die "$1 has sha256 $got, the list says $2"
}

# fetch_source URL SHA256: the tarball into $src (Debian's archive, over plain HTTP as apt fetches it: the sha256
# is the check)
fetch_source() {
  local file=$src/${1##*/}
  if [[ ! -f "$file" ]] || [[ "$(sha256sum "$file" | cut -c1-64)" != "$2" ]]; then
    python3 -c 'import sys, urllib.request; urllib.request.urlretrieve(sys.argv[1], sys.argv[2])' "$1" "$file.part" \
      || die "downloading $1 failed"
    mv "$file.part" "$file"
  fi
  check_sum "$file" "$2"
}

# fetch_wheel NAME==VERSION SHA256: the wheel into $src; prints its path
fetch_wheel() {
  local found
  found=$(cd "$src" && sha256sum -- *.whl 2>/dev/null | awk -v s="$2" '$1 == s {print $2; exit}')
  if [[ -z "$found" ]]; then
    python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: --python-version 3.12 \
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$src" "$1" >&2 || die "pip download $1 failed"
    found=$(cd "$src" && sha256sum -- *.whl | awk -v s="$2" '$1 == s {print $2; exit}')
    [[ -n "$found" ]] || die "$1: no wheel with the list's sha256 $2 (PyPI served another file)"
  fi
  echo "$src/$found"
}

# read_list LIST: the globals source_url, source_sum, wheels (NAME==VERSION SHA256 lines), configure_args
read_list() {
  source_url= source_sum= wheels=() configure_args=
  local kind rest
  while read -r kind rest; do
    case $kind in
      ""|"#"*) ;;
      source) read -r source_url source_sum <<< "$rest"
              [[ "$source_url" =~ ^https?://[^[:space:]]+\.tar\.(xz|gz|bz2)$ && "$source_sum" =~ ^[0-9a-f]{64}$ ]] \
                || die "$1: not 'source URL SHA256': source $rest" ;;
      wheel) [[ "$rest" =~ ^[A-Za-z0-9._-]+==[A-Za-z0-9.+!-]+\ [0-9a-f]{64}$ ]] || die "$1: not 'wheel NAME==VERSION SHA256': wheel $rest"
             wheels+=("$rest") ;;
      configure) [[ "$rest" =~ ^[A-Za-z0-9=_./,:+\ -]+$ ]] || die "$1: the configure line holds characters other than options"
                 configure_args=$rest ;;
      *) die "$1: unknown line '$kind' (allowed: source, wheel, configure)" ;;
    esac
  done < "$1"
  [[ -n "$source_url" && -n "$configure_args" ]] || die "$1: needs one source line and one configure line"
}

# build NAME: the source built and installed into .rehearsal/build/NAME/install; CUDA headers from the wheels
build() {
  local work=$PWD/.rehearsal/build/$1 line wheel
  rm -rf "$work" && mkdir -p "$work/cuda" "$work/src"
  tar -xf "$src/${source_url##*/}" -C "$work/src" --strip-components=1
  for line in "${wheels[@]}"; do
    wheel=$(fetch_wheel "${line% *}" "${line#* }") || exit 1
    python3 -m zipfile -e "$wheel" "$work/cuda"
  done
  local cuda=$work/cuda/nvidia/cu13
  [[ -d "$cuda/include" ]] || die "$1: the wheels hold no nvidia/cu13/include"
  (
    cd "$work/src"
    [[ -x configure ]] || ./autogen.sh >"$work/autogen.log" 2>&1 || die "$1: autogen.sh failed (see $work/autogen.log)"
    # shellcheck disable=SC2086  # the list's options, one word each (read_list allows no quoting)
    CFLAGS="-O2 -ffile-prefix-map=$work=." ./configure --prefix=/opt/$1 ${configure_args//CUDA/$cuda} >"$work/configure.log" 2>&1 \
      || die "$1: configure failed (see $work/configure.log)"
    make -j"$(nproc)" >"$work/make.log" 2>&1 || die "$1: make failed (see $work/make.log)"
    make install DESTDIR="$work/install" >>"$work/make.log" 2>&1 || die "$1: make install failed"
  )
}

# stage NAME LIST: .rehearsal/stage/NAME/NAME/ from the install and the wheels' CUDA runtime
stage() {
  local work=.rehearsal/build/$1 tree=.rehearsal/stage/$1/$1
  rm -rf ".rehearsal/stage/$1" && mkdir -p "$tree/lib" "$tree/bin" "$tree/share/doc/$1"
  cp -a "$work/install/opt/$1/lib/." "$tree/lib/"
  rm -rf "$tree/lib/pkgconfig" "$tree/lib"/*.a "$tree/lib"/*.la
  cp -a "$work/install/opt/$1/bin/." "$tree/bin/"
  strip --strip-debug "$tree"/lib/*.so.*.* "$tree"/bin/*
  local cudart
  for cudart in "$work"/cuda/nvidia/cu13/lib/libcudart.so.*; do cp "$cudart" "$tree/lib/"; done
  ln -sf "$(basename "$cudart")" "$tree/lib/libcudart.so"
  cp "$work/src/COPYING" "$tree/share/doc/$1/"
  cp "$2" "$tree/BUILD"
}

for name in "${names[@]}"; do read_list "serving_lab/pins/$name.build"; done  # every list in form before anything runs
for tool in gcc make autoreconf libtoolize xz tar split sha256sum python3 strip; do
  command -v $tool >/dev/null || die "$tool is needed (Debian: apt-get install gcc make autoconf automake libtool xz-utils)"
done
src=$PWD/.rehearsal/build-src
mkdir -p "$src" "$pieces" .rehearsal/stage

for name in "${names[@]}"; do
  list=serving_lab/pins/$name.build
  read_list "$list"
  digest=$( { echo "build 1 ${tar_flags[*]} ${REHEARSAL_PIECE_SIZE:-60M}${XZ_OPT:+ xz $XZ_OPT}"; grep -v '^#' "$list"; } | sha256sum | cut -c1-64)
  if pieces_current "$name" "$digest"; then
    say "$name: pieces are up to date with $list"
    continue
  fi
  fetch_source "$source_url" "$source_sum"
  say "$name: sources match $list's sha256; building (a few minutes)"
  build "$name"
  stage "$name" "$list"
  pack_tree "$name" ".rehearsal/stage/$name"
  echo "$digest" > "$pieces/.$name.stamp"
  say "$name: staged .rehearsal/stage/$name/$name ($(find ".rehearsal/stage/$name/$name" -type f | wc -l) files) and packed"
done
write_sums
say "serving_lab/pins/pieces.sha256 written: commit it, so the host's install accepts exactly these pieces"
