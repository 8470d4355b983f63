#!/usr/bin/env bash
# Packs a tree of Debian packages for the offline GPU host, as pieces beside serving_lab/scripts/rehearsal_pack.sh's.
#   serving_lab/scripts/rehearsal_debs.sh [TREE ...]      (default: every serving_lab/pins/<tree>.debs)
# serving_lab/pins/<tree>.debs lists `package version sha256` lines (the sha256 of the .deb) and, in `#:` lines, the
# Debian suite and mirror they come from. For each tree:
#   1. downloads the listed versions with apt-get download into .rehearsal/debs/, through a private apt
#      configuration in .rehearsal/apt/<tree>/ (its own sources list, lists and cache: this machine's apt
#      configuration and its package lists are neither read nor changed), unless a .deb with the listed sha256
#      is already there; every .deb must have the listed sha256;
#   2. unpacks them (dpkg-deb -x) and stages .rehearsal/stage/<tree>/<tree>/: lib/ (the libraries of
#      usr/lib/x86_64-linux-gnu, links kept), bin/, etc/, share/doc/<package>/copyright, DEBS (the list);
#   3. packs the tree like rehearsal_pack.sh (tar with a fixed order, owner and time | xz) into
#      .rehearsal/pieces/<tree>.tar.xz.part-NN and lists every piece of .rehearsal/pieces/ in SHA256SUMS,
#      copied to serving_lab/pins/pieces.sha256 (commit it: the host's install accepts only the pieces it lists).
# A tree whose list has not changed since its pieces were made (and whose pieces still check) is not packed again.
# On the host, serving_lab/scripts/rehearsal_install.sh unpacks it and prints REHEARSAL_<TREE>=<folder>; for libfabric,
# `ops rehearse --nixl-backend LIBFABRIC` puts <folder>/lib first on the engines' LD_LIBRARY_PATH.
# Needs apt-get, dpkg-deb, xz, tar, split, sha256sum (a Debian or Ubuntu machine) and the mirror.
# Environment: REHEARSAL_PIECE_SIZE (split's -b, default 60M), XZ_OPT (xz's own), REHEARSAL_DEB_KEYRING (the
# keyring apt checks the suite's Release file with; default /usr/share/keyrings/debian-archive-keyring.gpg).
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0;; esac
set -euo pipefail
cd "$(dirname "$0")/../.."
source serving_lab/scripts/pieces.sh

say() { echo "rehearsal_debs: $*"; }
die() { echo "rehearsal_debs: $*" >&2; exit 1; }

names=("$@")
if [[ ${#names[@]} -eq 0 ]]; then
  mapfile -t names < <(cd serving_lab/pins && ls -1 -- *.debs 2>/dev/null | sed 's/\.debs$//')
  [[ ${#names[@]} -gt 0 ]] || die "no serving_lab/pins/<tree>.debs"
fi
for name in "${names[@]}"; do
  [[ "$name" =~ ^[a-z][a-z0-9-]{0,31}$ && -f serving_lab/pins/$name.debs ]] || die "no serving_lab/pins/$name.debs"
  [[ ! -f serving_lab/pins/$name.lock ]] || die "$name: both serving_lab/pins/$name.lock and serving_lab/pins/$name.debs: one tree, one list"
done
for tool in apt-get dpkg-deb xz tar split sha256sum; do command -v $tool >/dev/null || die "$tool is needed"; done
keyring=${REHEARSAL_DEB_KEYRING:-/usr/share/keyrings/debian-archive-keyring.gpg}
[[ -f "$keyring" ]] || die "no $keyring (the Debian archive keyring; set REHEARSAL_DEB_KEYRING)"
piece_size=${REHEARSAL_PIECE_SIZE:-60M}
debs=.rehearsal/debs stage=.rehearsal/stage
mkdir -p "$debs" "$stage" "$pieces"
pack_version=1

for name in "${names[@]}"; do
  list=serving_lab/pins/$name.debs
  suite=$(sed -n 's/^#: suite \([a-z0-9-]*\)$/\1/p' "$list" | head -n1)
  mirror=$(sed -n 's|^#: mirror \(https\{0,1\}://[^ ]*\)$|\1|p' "$list" | head -n1)
  [[ -n "$suite" && -n "$mirror" ]] || die "$list: needs '#: suite NAME' and '#: mirror URL' lines"
  mapfile -t lines < <(grep -v -e '^#' -e '^[[:space:]]*$' "$list")
  [[ ${#lines[@]} -gt 0 ]] || die "$list lists no package"
  missing=()
  for line in "${lines[@]}"; do
    read -r pkg version sum extra <<< "$line"
    [[ "$pkg" =~ ^[a-z0-9][a-z0-9+.-]+$ && "$version" =~ ^[A-Za-z0-9.+~-]+$ && "$sum" =~ ^[0-9a-f]{64}$ && -z "${extra:-}" ]] \
      || die "$list: not 'package version sha256': $line"
    file=$debs/${pkg}_${version}_amd64.deb
    if [[ ! -f "$file" ]] || [[ "$(sha256sum "$file" | cut -c1-64)" != "$sum" ]]; then missing+=("$pkg=$version"); fi
  done
  if [[ ${#missing[@]} -gt 0 ]]; then
    apt_dir=$PWD/.rehearsal/apt/$name
    mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
    echo "deb [signed-by=$keyring] $mirror $suite main" > "$apt_dir/sources.list"
    : > "$apt_dir/status"
    apt_opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/nonexistent
      -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache" -o "Dir::State::status=$apt_dir/status"
      -o APT::Architecture=amd64 -o APT::Architectures=amd64 -o APT::Sandbox::User=root -q)
    say "$name: downloading ${#missing[@]} of ${#lines[@]} packages from $mirror $suite"
    apt-get "${apt_opts[@]}" update >/dev/null || die "$name: apt-get update of $mirror $suite failed"
    (cd "$debs" && apt-get "${apt_opts[@]}" download "${missing[@]}" >/dev/null) || die "$name: apt-get download failed"
  fi
  for line in "${lines[@]}"; do
    read -r pkg version sum <<< "$line"
    file=$debs/${pkg}_${version}_amd64.deb
    [[ -f "$file" ]] || die "$name: $file was not downloaded"
    got=$(sha256sum "$file" | cut -c1-64)
    [[ "$got" == "$sum" ]] || die "$name: $file has sha256 $got, $list says $sum"
  done
  say "$name: ${#lines[@]} packages, all matching $list's sha256"

  digest=$( { echo "debs $pack_version ${tar_flags[*]} $piece_size${XZ_OPT:+ xz $XZ_OPT}"; printf '%s\n' "${lines[@]}"; } | sha256sum | cut -c1-64)
  if pieces_current "$name" "$digest"; then
    say "$name: pieces are up to date with $list"
    continue
  fi
  rm -f "$pieces/.$name.stamp"
  rm -rf "${stage:?}/$name"
  root=$stage/$name/.root tree=$stage/$name/$name
  mkdir -p "$root" "$tree/lib" "$tree/bin" "$tree/etc" "$tree/share/doc"
  for line in "${lines[@]}"; do
    read -r pkg version sum <<< "$line"
    dpkg-deb -x "$debs/${pkg}_${version}_amd64.deb" "$root"
    if [[ -f "$root/usr/share/doc/$pkg/copyright" ]]; then
      mkdir -p "$tree/share/doc/$pkg" && cp "$root/usr/share/doc/$pkg/copyright" "$tree/share/doc/$pkg/"
    fi
  done
  [[ -d "$root/usr/lib/x86_64-linux-gnu" ]] && cp -a "$root/usr/lib/x86_64-linux-gnu/." "$tree/lib/"
  [[ -d "$root/usr/bin" ]] && cp -a "$root/usr/bin/." "$tree/bin/"
  [[ -d "$root/etc" ]] && cp -a "$root/etc/." "$tree/etc/"
  cp "$list" "$tree/DEBS"
  rm -rf "$root"
  REHEARSAL_PIECE_SIZE=$piece_size pack_tree "$name" "$stage/$name"
  echo "$digest" > "$pieces/.$name.stamp"
  say "$name: staged $tree ($(find "$tree" -type f | wc -l) files) and packed"
done

write_sums
say "serving_lab/pins/pieces.sha256 written: commit it, so the host's install accepts exactly these pieces"
for name in "${names[@]}"; do
  while read -r _ file; do
    if [[ "$file" == "$name".tar.xz.part-* ]]; then echo "  $file  $(stat -c %s "$pieces/$file") bytes"; fi
  done < "$pieces/SHA256SUMS"
done
