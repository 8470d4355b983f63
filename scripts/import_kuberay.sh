#!/usr/bin/env bash
# Regenerates imports/ (the typed cdk8s classes of KubeRay's RayService) from the vendored KubeRay
# v1.7.0 CRD with the project's pinned cdk8s CLI (package.json; `npm ci` installs it). Idempotent: the
# same CRD and CLI give the same files, byte for byte (tests/test_imports.py checks the committed copy).
#   scripts/import_kuberay.sh [OUTDIR]    default: imports/ in the repository
# Only the RayService CRD: the chart creates no other KubeRay object, and the RayCluster CRD would
# double the module's load time (docs/DECISIONS.md, "cdk8s-plus-28 and the typed KubeRay classes").
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0;; esac
set -euo pipefail
out=$(realpath -m "${1:-$(dirname "$0")/../imports}")  # OUTDIR as the caller names it
cd "$(dirname "$0")/.."
source scripts/env.sh
crd=localcluster/crds/kuberay-v1.7.0/ray.io_rayservices.yaml  # committed data (its SOURCE.md)
[[ -f "$crd" ]] || { echo "import_kuberay: $crd not found" >&2; exit 1; }
[[ -x node_modules/.bin/cdk8s ]] || { echo "import_kuberay: no pinned cdk8s CLI: run npm ci (scripts/setup.sh)" >&2; exit 1; }
staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
npx --no-install cdk8s import --no-save --check-upgrade=false --language python --output "$staging" "$crd" >/dev/null
# The generated package is imports/io/ray (the CRD's group, ray.io): replace it whole.
rm -rf "$out/io/ray"
mkdir -p "$out/io"
cp -r "$staging/io/ray" "$out/io/ray"
