#!/usr/bin/env bash
# The main job: set up, then synthesize one stage (default: dev) with the project's pinned CDK CLI.
#   scripts/synth.sh [STAGE]      e.g. scripts/synth.sh prod;  scripts/synth.sh all synthesizes every stage file
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0;; esac
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
source scripts/env.sh
stage=${1:-dev}
if [[ "$stage" == "all" ]]; then
  scripts/cdk synth
  echo "synth: every stage's templates are in cdk.out/assembly-<stage>/, its Kubernetes YAML in cdk.out/k8s/<stage>/"
else
  scripts/cdk synth -c "stage=$stage"
  echo "synth: $stage's templates are in cdk.out/assembly-$stage/, its Kubernetes YAML in cdk.out/k8s/$stage/"
fi
