#!/usr/bin/env bash
# Idempotent set-up: a project venv with the pinned Python packages and the pinned CDK CLI in
# node_modules/, and the project itself installed into it (.venv/bin/pd-inference). Re-runs are no-ops
# unless a requirements file, pyproject.toml or package-lock.json changed.
#   scripts/setup.sh            runtime packages (synth, ops diff, preflight, verify)
#   scripts/setup.sh --cluster  runtime + the local control plane of `ops local-cluster`: its Python
#                               package (requirements-cluster.txt) and its Go programs, built once from the
#                               Go module proxy into Go's own caches (needs Go 1.26; tools/go/ pins them)
#   scripts/setup.sh --checks   runtime + the test, lint and type packages, nothing built: the pipeline's
#                               Synth step (scripts/pipeline_check.sh); `ops diff` too
#   scripts/setup.sh --dev      everything --cluster and --checks install, and both tool venvs below: the
#                               test command's set-up
#   scripts/setup.sh --bench    only the benchmark venv (.venv-bench: aiperf) for `ops bench`
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0;; esac
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

mode=${1:-}
case "$mode" in ""|--cluster|--checks|--dev|--bench) ;; *) echo "setup: unknown option ${mode} (allowed: --cluster, --checks, --dev, --bench)" >&2; exit 2;; esac

python=${PYTHON:-python3}
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || { echo "setup: Python 3.11 or newer is needed (found $("$python" --version 2>&1))" >&2; exit 1; }

# The installer: uv, pinned here with the pip every venv keeps (scripts and the lock tools run `python -m pip`).
# Installed once per machine, beside Go's builds; from its cache a venv takes ~2 s where pip took ~23 s, and a
# cold one downloads in parallel (docs/DECISIONS.md). Like pip with --no-compile, it byte-compiles nothing:
# Python compiles the few modules a run imports, once.
PIP_VERSION=26.3
UV_VERSION=0.13.9
uv=${XDG_CACHE_HOME:-$HOME/.cache}/pd-inference/uv-$UV_VERSION/uv

# uv itself, by pip into a throwaway venv; only the finished binary is moved into place (parallel set-ups of
# two clones each install it, and one rename wins).
ensure_uv() {
  [[ -x "$uv" ]] && return 0
  echo "setup: installing uv $UV_VERSION (once per machine, into $(dirname "$uv"))" >&2
  mkdir -p "$(dirname "$uv")"
  local staging
  staging=$(mktemp -d "$(dirname "$uv")/.staging.XXXXXX")
  if ! { "$python" -m venv "$staging" \
      && "$staging/bin/python" -m pip install --quiet --disable-pip-version-check "uv==$UV_VERSION" \
      && mv "$staging/bin/uv" "$uv.partial.$$" && mv -f "$uv.partial.$$" "$uv"; }; then
    rm -rf "$staging"  # pip said why
    exit 1
  fi
  rm -rf "$staging"
}

# Pinned packages into the venv DIR. uv reads UV_* settings, not pip's: an index or a certificate bundle that the
# environment sets for pip is passed on (uv's docs: SSL_CERT_FILE, UV_DEFAULT_INDEX). Like pip (truststore), it
# trusts the system's certificate store: behind a TLS-inspecting proxy, uv's bundled roots fail (UnknownIssuer).
#   uv_install DIR ARGS...
uv_install() {
  local dir=$1 settings=(UV_PYTHON_DOWNLOADS=never "UV_SYSTEM_CERTS=${UV_SYSTEM_CERTS:-true}")
  shift
  ensure_uv
  [[ -n "${PIP_INDEX_URL:-}" && -z "${UV_DEFAULT_INDEX:-}" ]] && settings+=("UV_DEFAULT_INDEX=$PIP_INDEX_URL")
  [[ -n "${PIP_CERT:-}" && -z "${SSL_CERT_FILE:-}" ]] && settings+=("SSL_CERT_FILE=$PIP_CERT")
  env "${settings[@]}" "$uv" pip install --quiet --python "$dir/bin/python" "$@"
}

# The project itself into a venv, editable (its code is this checkout) and without dependencies (the pinned
# requirements are installed before it): `pd-inference` in DIR/bin. Again only when pyproject.toml changed;
# uv builds it with the backend pyproject.toml pins, in an isolated environment of its own.
#   install_project DIR
install_project() {
  local dir=$1 digest
  digest=$(sha256sum pyproject.toml | cut -c1-16)
  if [[ "$(cat "$dir/.setup-stamp-project" 2>/dev/null)" != "$digest" || ! -x "$dir/bin/pd-inference" ]]; then
    uv_install "$dir" --no-deps --editable .
    echo "$digest" > "$dir/.setup-stamp-project"
  fi
}

# A venv holds absolute paths (its scripts' shebangs, the editable install's finder): one made in another
# folder (a moved or copied checkout) is made again, not patched. The folder it was made in is recorded.
#   fresh_venv DIR
fresh_venv() {
  local dir=$1
  if [[ -e "$dir" && "$(cat "$dir/.setup-checkout" 2>/dev/null)" != "$PWD" ]]; then
    rm -rf "$dir"
  fi
  if [[ ! -x "$dir/bin/python" ]]; then
    "$python" -m venv "$dir"
    echo "$PWD" > "$dir/.setup-checkout"
  fi
}
# A venv of its own for a tool that pins versions the project venv does not want:
#   tool_venv DIR REQUIREMENTS CONSTRAINTS [MORE FILES THAT CHANGE IT]
tool_venv() {
  local dir=$1 requirements=$2 constraints=$3 digest
  shift 3
  fresh_venv "$dir"
  digest=$(cat "$requirements" "$constraints" "$@" | sha256sum | cut -c1-16)
  if [[ "$(cat "$dir/.setup-stamp" 2>/dev/null)" != "$digest" ]]; then
    echo "setup: installing the pinned packages of $requirements into $dir (a first run takes minutes)" >&2
    uv_install "$dir" "pip==$PIP_VERSION" -r "$requirements" -c "$constraints"
    echo "$digest" > "$dir/.setup-stamp"
  fi
}

# aiperf (the benchmark client) pins pandas, transformers and more: for `ops bench` and its tests.
bench_venv() {
  tool_venv .venv-bench requirements-bench.txt constraints-bench.txt requirements-ops.txt
  install_project .venv-bench  # scripts/bench_sample.py runs there
}
if [[ "$mode" == "--bench" ]]; then
  bench_venv
  exit 0
fi

command -v npm >/dev/null || { echo "setup: Node.js 20+ with npm is needed" >&2; exit 1; }
if [[ "$mode" == "--dev" || "$mode" == "--cluster" ]]; then
  command -v go >/dev/null || { echo "setup: Go 1.26 is needed to build the local cluster (tools/go/)" >&2; exit 1; }
fi

want="requirements.txt"
[[ "$mode" == "--cluster" ]] && want="requirements-cluster.txt"
[[ "$mode" == "--dev" || "$mode" == "--checks" ]] && want="requirements-dev.txt"
fresh_venv .venv
stamp=.venv/.setup-stamp-$(basename "$want" .txt)
digest=$(cat requirements-ops.txt requirements.txt requirements-cluster.txt "$want" constraints.txt 2>/dev/null | sha256sum | cut -c1-16)
if [[ "$(cat "$stamp" 2>/dev/null)" != "$digest" ]]; then
  echo "setup: installing the pinned Python packages of $want into .venv (a first run takes minutes)" >&2
  uv_install .venv "pip==$PIP_VERSION" -r "$want" -c constraints.txt
  echo "$digest" > "$stamp"
fi
install_project .venv  # .venv/bin/pd-inference

# The local cluster's Go programs (kube-apiserver, controller manager, scheduler, etcd, kwok, the KubeRay
# operator) and KubeRay's chart, from the Go module proxy (tools/go/ pins them) into Go's own caches; a
# cached build is found in a second, by every clone on the machine. A cold build is minutes of compiling: it
# runs while the rest installs, and set-up waits for it at the end. If set-up stops first, it is ended.
go_build=
stop_go_build() { [[ -z "$go_build" ]] || kill "$go_build" 2>/dev/null || true; }
trap stop_go_build EXIT
if [[ "$mode" == "--dev" || "$mode" == "--cluster" ]]; then
  .venv/bin/python -m localcluster build &
  go_build=$!
fi

if [[ "$mode" == "--dev" ]]; then
  bench_venv
  # checkov pins older boto3/botocore than the app: for the test suite only.
  tool_venv .venv-checkov requirements-checkov.txt constraints-checkov.txt
fi

lock_digest=$(sha256sum package-lock.json | cut -c1-16)
if [[ "$(cat node_modules/.setup-stamp 2>/dev/null)" != "$lock_digest" ]]; then
  echo "setup: installing the pinned CDK CLI into node_modules/ (npm ci)" >&2
  npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
  echo "$lock_digest" > node_modules/.setup-stamp
fi

if [[ -n "$go_build" ]]; then
  status=0
  wait "$go_build" || status=$?
  go_build=
  exit "$status"  # the build's own: its one line said why
fi
