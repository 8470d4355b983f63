#!/usr/bin/env bash
# On the offline rehearsal host: checks, reassembles and unpacks what serving_lab/scripts/rehearsal_pack.sh (wheels) and
# serving_lab/scripts/rehearsal_debs.sh (Debian packages) packed.
#   serving_lab/scripts/rehearsal_install.sh [TARGET [PIECES_DIR]]   (defaults: $REHEARSAL_SITE, else
#                                                        ${XDG_CACHE_HOME:-$HOME/.cache}/rehearsal-site; .rehearsal/pieces;
#                                                        PIECES_DIR TARGET works too: SHA256SUMS tells them apart)
#   env=$(serving_lab/scripts/rehearsal_install.sh T P) && eval "$env"   the same, then use the trees in this shell
#                                                            (a bare eval "$(...)" would hide a failure)
# Every tree listed in PIECES_DIR/SHA256SUMS (serve, bench, libfabric) whose pieces are all there is checked against
# SHA256SUMS, then unpacked into TARGET/<tree>/ (replacing an older one; a tree already unpacked from the
# same pieces is left as it is). Console scripts in TARGET/<tree>/bin get this host's python3 (pip wrote the
# packing machine's). A tree none of whose pieces are here is skipped, so the trees can come in separately.
# stdout: only shell lines to use the trees (PYTHONPATH, PATH; the serving tree first, so that its
# protobuf 6 shadows the host's 7); progress goes to stderr. Exit 1 with one line on a missing or damaged
# piece. Environment: REHEARSAL_PYTHON (default: python3 on PATH), REHEARSAL_TRUSTED_SUMS (default
# serving_lab/pins/pieces.sha256 of this checkout).
# Nothing in the carried SHA256SUMS is trusted: every line must name a piece of a known tree (the trees are
# the lock files and Debian package lists of this checkout, serving_lab/pins/<tree>.lock and serving_lab/pins/<tree>.debs, and a
# piece is <tree>.tar.xz.part-NN), and every piece's digest must be one the repository vouches for
# (REHEARSAL_TRUSTED_SUMS, written by serving_lab/scripts/rehearsal_pack.sh and serving_lab/scripts/rehearsal_debs.sh, and committed), so no name reaches rm or tar that the repository did not choose.
# The target is code that runs (its trees go on PYTHONPATH, its stamps skip the unpack): it is refused unless
# it and every folder above it belong to this user or root and no one else may write them (a sticky
# root-owned parent such as /tmp excepted: others cannot rename or remove what is ours in it, sticky(8)).
# A new target is made 0700.
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0;; esac
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
default_target=${REHEARSAL_SITE:-${XDG_CACHE_HOME:-${HOME:?}/.cache}/rehearsal-site}
target=${1:-$default_target}
pieces=${2:-$here/.rehearsal/pieces}
# The folders may come in either order: the one with SHA256SUMS holds the pieces.
if [[ $# -ge 1 && -f "$1/SHA256SUMS" && ( $# -lt 2 || ! -f "${2:-}/SHA256SUMS" ) ]]; then
  pieces=$1 target=${2:-$default_target}
fi

say() { echo "rehearsal_install: $*" >&2; }
die() { echo "rehearsal_install: $*" >&2; exit 1; }

python=${REHEARSAL_PYTHON:-$(command -v python3 || true)}
[[ -n "$python" && -x "$python" ]] || die "no python3 on PATH (set REHEARSAL_PYTHON)"
[[ -f "$pieces/SHA256SUMS" ]] || die "no SHA256SUMS in $pieces (copy it with the pieces)"
for tool in xz tar sha256sum; do command -v $tool >/dev/null || die "$tool is needed"; done
# private_folder FOLDER: refuse (exit 1, one line) a folder that someone else owns or may write, or whose
# parents someone else could swap; stat(1) %u is the owner, %a the mode in octal.
private_folder() {
  local folder=$1 me owner mode
  me=$(id -u)
  while :; do
    read -r owner mode < <(stat -c '%u %a' -- "$folder") || die "target: cannot stat $folder"
    [[ "$owner" == "$me" || "$owner" == 0 ]] \
      || die "target $target: $folder belongs to uid $owner, not to you or root: refused (give a folder of your own)"
    # group- or world-writable: only a sticky root-owned parent (never the target itself) may be
    if (( 8#$mode & 8#022 )) && { [[ "$folder" == "$target" || "$owner" != 0 ]] || ! (( 8#$mode & 8#1000 )); }; then
      die "target $target: $folder is writable by others (mode $mode): refused (chmod go-w it, or give a folder of your own)"
    fi
    [[ "$folder" == / ]] && break
    folder=$(dirname -- "$folder")
  done
}
(umask 077 && mkdir -p -- "$target") || die "target $target: cannot create it"
target=$(cd -- "$target" && pwd -P)
private_folder "$target"
[[ "$target" != "$(cd "$pieces" && pwd)" ]] || die "the target $target is the pieces' folder: give another"

trusted=${REHEARSAL_TRUSTED_SUMS:-$here/serving_lab/pins/pieces.sha256}
[[ -f "$trusted" ]] || die "no $trusted: the digests of the pieces this checkout vouches for (serving_lab/scripts/rehearsal_pack.sh writes it)"
# The trees: the wheel locks (serving_lab/pins/<tree>.lock, serving_lab/scripts/rehearsal_pack.sh), the Debian package lists
# (serving_lab/pins/<tree>.debs, serving_lab/scripts/rehearsal_debs.sh) and the builds (serving_lab/pins/<tree>.build,
# serving_lab/scripts/rehearsal_build.sh) of this checkout.
known=$(cd "$here/serving_lab/pins" && ls -1 -- *.lock *.debs *.build 2>/dev/null | sed 's/\.\(lock\|debs\|build\)$//' | grep -E '^[a-z][a-z0-9-]{0,31}$' | sort -u | paste -sd'|' || true)
[[ -n "$known" ]] || die "no serving_lab/pins/<tree>.lock, <tree>.debs or <tree>.build in $here: cannot tell which trees exist"
pattern="^[0-9a-f]{64}  ($known)\.tar\.xz\.part-[0-9]{2,3}\$"
bad=$(grep -nvE "$pattern" "$pieces/SHA256SUMS" | head -n1 | cut -c1-120 || true)
[[ -z "$bad" ]] || die "$pieces/SHA256SUMS line ${bad%%:*}: not '<sha256>  <tree>.tar.xz.part-NN' of a known tree ($known): refused"
while read -r sum file; do
  grep -qxF "$sum  $file" "$trusted" || die "$file: its digest is not in $trusted (a piece this checkout does not vouch for: repack, or carry the checkout it was packed with)"
done < "$pieces/SHA256SUMS"
mapfile -t trees < <(sed -n 's/^[0-9a-f]\{64\}  \(.*\)\.tar\.xz\.part-[0-9]*$/\1/p' "$pieces/SHA256SUMS" | sort -u)
[[ ${#trees[@]} -gt 0 ]] || die "$pieces/SHA256SUMS lists no pieces"
installed=()
for tree in "${trees[@]}"; do
  mapfile -t listed < <(grep "  $tree\.tar\.xz\.part-[0-9]*\$" "$pieces/SHA256SUMS")
  present=0 absent=()
  for line in "${listed[@]}"; do
    if [[ -f "$pieces/${line#*  }" ]]; then present=$((present + 1)); else absent+=("${line#*  }"); fi
  done
  if [[ $present -eq 0 ]]; then
    say "$tree: none of its ${#listed[@]} pieces is in $pieces; skipped"
    continue
  fi
  [[ ${#absent[@]} -eq 0 ]] || die "$tree: ${#absent[@]} of ${#listed[@]} pieces missing in $pieces: ${absent[*]}"
  failed=$(cd "$pieces" && printf '%s\n' "${listed[@]}" | sha256sum --check 2>/dev/null | grep -v ': OK$' || true)
  [[ -z "$failed" ]] || die "$tree: checksum mismatch: $(echo "$failed" | tr '\n' ' ')(pieces damaged or from another pack)"
  digest=$(printf '%s\n' "${listed[@]}" | sha256sum | cut -c1-64)
  if [[ "$(cat "$target/.$tree.installed" 2>/dev/null)" == "$digest" && -d "$target/$tree" ]]; then
    say "$tree: already unpacked from these pieces in $target/$tree"
  else
    rm -rf "${target:?}/$tree" "${target:?}/.$tree.tmp" "$target/.$tree.installed"
    mkdir "$target/.$tree.tmp"
    (cd "$pieces" && cat $(printf '%s\n' "${listed[@]}" | sed 's/^[0-9a-f]*  //')) | xz -dc -T0 | tar -x -C "$target/.$tree.tmp" \
      || die "$tree: unpacking failed"
    [[ -d "$target/.$tree.tmp/$tree" ]] || die "$tree: the pieces do not hold a $tree/ tree"
    mv "$target/.$tree.tmp/$tree" "$target/$tree"
    rmdir "$target/.$tree.tmp"
    # pip --target wrote the packing machine's interpreter into the console scripts.
    rewritten=0
    for script in "$target/$tree"/bin/*; do
      [[ -f "$script" ]] || continue
      first=$(head -n1 "$script" 2>/dev/null | tr -d '\0' || true)
      if [[ "$first" =~ ^#!.*python[0-9.]*$ ]]; then
        sed -i "1s|.*|#!$python|" "$script"; rewritten=$((rewritten + 1))
      elif [[ "$first" == "#!/bin/sh" ]] && sed -n 2p "$script" | grep -q "^'''exec' "; then
        sed -i "2s|^'''exec' [^ ]* |'''exec' $python |" "$script"; rewritten=$((rewritten + 1))
      fi
    done
    # Bytecode once, in parallel, with the interpreter that runs it: the pieces carry sources only (pip
    # --no-compile), and where PYTHONDONTWRITEBYTECODE is set every Ray worker, engine and aiperf process
    # would compile vllm, ray and their dependencies again on import (seen on an H200 pair: 30-70 s per
    # process before the engines started).
    files=$(find "$target/$tree" -type f | wc -l) t0=$SECONDS
    "$python" -m compileall -q -j 0 "$target/$tree" >/dev/null 2>&1 || true  # a few files of test data do not compile
    say "$tree: bytecode compiled in $((SECONDS - t0)) s"
    echo "$digest" > "$target/.$tree.installed"
    say "$tree: $files files unpacked into $target/$tree from ${#listed[@]} checked pieces; $rewritten console scripts now run $python"
  fi
  installed+=("$tree")
done
[[ ${#installed[@]} -gt 0 ]] || die "no tree has its pieces in $pieces"

# A tree's .pth files (nvidia-cutlass-dsl adds its dsl_packages folder) are not read from PYTHONPATH:
# list what they would add, as this host's Python reads them.
path_of() {
  local extra
  extra=$(PYTHONPATH= "$python" -S - "$1" <<'EOF'
import site, sys
tree = sys.argv[1]
sys.path.insert(0, tree)
before = set(sys.path)
site.addsitedir(tree)
print(":".join(p for p in sys.path if p not in before))
EOF
) || die "reading the .pth files of $1 with $python failed"
  echo "$1${extra:+:$extra}"
}
for tree in "${installed[@]}"; do
  case $tree in
    serve) echo "# the serving stack (ray, vllm, python -m ops rehearse): its tree first on the path"
           echo "export PYTHONPATH=$(path_of "$target/serve")\${PYTHONPATH:+:\$PYTHONPATH} PATH=$target/serve/bin:\$PATH" ;;
    bench) echo "# the benchmark client, in its own processes: PYTHONPATH=\$REHEARSAL_BENCH_PATH \$REHEARSAL_AIPERF ..."
           echo "export REHEARSAL_BENCH_PATH=$(path_of "$target/bench") REHEARSAL_AIPERF=$target/bench/bin/aiperf" ;;
    *)     variable=${tree^^} variable=REHEARSAL_${variable//-/_}
           list=$(ls "$here/serving_lab/pins/$tree".{debs,build} 2>/dev/null | head -n1 || true)
           if [[ -n "$list" ]]; then
             # Debian packages or a build (libraries and tools, no Python): the folder; for a libfabric,
             # ops rehearse --nixl-backend LIBFABRIC --libfabric DIR puts its lib/ first on the engines' LD_LIBRARY_PATH.
             echo "# $tree: libraries and tools (serving_lab/pins/${list##*/}): lib/, bin/"
             echo "export $variable=$target/$tree"
           else
             echo "export ${variable}_PATH=$(path_of "$target/$tree")"
           fi ;;
  esac
done
