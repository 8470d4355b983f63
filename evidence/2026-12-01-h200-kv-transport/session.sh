#!/usr/bin/env bash
# The GPU session of this folder's README.md, one subcommand per device call (each command line stays short):
#   bash evidence/2026-12-01-h200-kv-transport/session.sh carry          pieces carried this call -> /tmp/pieces
#   ... host        the host's GPU, interfaces and its own libfabric (what the plugin failed on)
#   ... libfabric   install the trees, then the carried libfabric: its versions, fi_info -p tcp / shm, the plugin's links
#   ... probe       NIXL alone between two processes (serving_lab/rehearse/nixl_probe.py): UCX variants, LIBFABRIC
#   ... rehearse NAME LIMIT ARGS...   serving_lab/scripts/rehearsal_device_run.sh NAME ARGS within LIMIT seconds
# Output under $OUT (at most 8 files come back): host.txt, libfabric.txt, nixl-probe.tgz and the wrapper's files.
set -uo pipefail
cd "$(dirname "$0")/../.."
pieces=/tmp/pieces site=/tmp/rehearsal-site
out=${OUT:?OUT is the device folder}

install() {
  local lines
  lines=$(serving_lab/scripts/rehearsal_install.sh "$site" "$pieces" 2>>"$out/install.log") || { tail -n 3 "$out/install.log"; return 1; }
  eval "$lines"
}

case "${1:-}" in
  carry)
    mkdir -p "$pieces"
    for f in .rehearsal/pieces/*.tar.xz.part-*; do [[ -f "$f" ]] && mv -f "$f" "$pieces/"; done
    cp .rehearsal/pieces/SHA256SUMS "$pieces/"
    echo "pieces here: $(cd "$pieces" && ls *.part-* | tr '\n' ' ')"
    ;;
  host)
    {
      nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv
      echo "kernel $(uname -r); $(nproc) cores; $(grep MemTotal /proc/meminfo)"
      head -n 2 /etc/os-release; ldd --version | head -n 1
      ip -brief addr 2>/dev/null || cat /proc/net/dev
      echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
      ldconfig -p | grep -E 'libfabric|libhwloc|libibverbs|libefa|libpsm2|librdmacm|libnuma|libnl-3|libudev' || true
      for lib in /lib/x86_64-linux-gnu/libfabric.so.1 /usr/lib/x86_64-linux-gnu/libfabric.so.1; do
        [[ -e "$lib" ]] && echo "$lib: $(readelf -V "$lib" | grep -o 'FABRIC_1\.[0-9]*' | sort -uV | tr '\n' ' ')"
      done
      ls /sys/class/infiniband 2>/dev/null || echo "no /sys/class/infiniband (no RDMA device, no EFA)"
    } > "$out/host.txt" 2>&1
    cat "$out/host.txt"
    ;;
  libfabric)
    install || exit 1
    lf=$REHEARSAL_LIBFABRIC
    plugin=$(ls "$site"/serve/nixl_cu13.libs/nixl/libplugin_LIBFABRIC.so)
    {
      echo "== carried tree $lf"; cat "$lf/DEBS" | grep -v '^#'
      echo "== $lf/lib/libfabric.so.1 versions: $(readelf -V "$lf/lib/libfabric.so.1" | grep -o 'FABRIC_1\.[0-9]*' | sort -uV | tr '\n' ' ')"
      echo "== the plugin's libraries with the carried lib/ first ($plugin)"
      LD_LIBRARY_PATH=$lf/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ldd "$plugin" | grep -E 'fabric|hwloc|numa|cuda|not found'
      echo "== without it (the host's own)"
      ldd "$plugin" | grep -E 'fabric|hwloc|not found'
      for p in tcp shm sockets; do
        echo "== fi_info -p $p"
        LD_LIBRARY_PATH=$lf/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} FI_PROVIDER=$p "$lf/bin/fi_info" -p "$p" 2>&1 | head -n 40
      done
      echo "== fi_info -p tcp with FI_TCP_IFACE=lo, RDM, FI_HMEM asked"
      LD_LIBRARY_PATH=$lf/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} FI_TCP_IFACE=lo "$lf/bin/fi_info" -p tcp -t FI_EP_RDM -c FI_HMEM 2>&1 | head -n 20
      echo "== fi_info -p shm, FI_HMEM asked"
      LD_LIBRARY_PATH=$lf/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$lf/bin/fi_info" -p shm -c FI_HMEM 2>&1 | head -n 20
    } > "$out/libfabric.txt" 2>&1
    tail -n 30 "$out/libfabric.txt"
    ;;
  probe)
    install || exit 1
    shift
    mkdir -p /tmp/probe
    PYTHONPATH=$PWD:$PYTHONPATH python3 -m serving_lab.rehearse.nixl_probe --out /tmp/probe "$@" 2>&1 | tee /tmp/probe/console.txt
    tar czf "$out/nixl-probe.tgz" -C /tmp probe
    ;;
  rehearse)
    name=$2 limit=$3
    shift 3
    REHEARSAL_PIECES=$pieces REHEARSAL_SITE=$site REHEARSAL_LIMIT=$limit serving_lab/scripts/rehearsal_device_run.sh "$name" "$@"
    ;;
  *)
    sed -n '2,8p' "$0"; exit 2 ;;
esac
