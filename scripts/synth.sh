#!/usr/bin/env bash
# The main job: set up, then synthesize the stages named (default: dev) with the project's pinned CDK CLI.
#   scripts/synth.sh [STAGE ...]  e.g. scripts/synth.sh dev prod;  scripts/synth.sh all synthesizes every stage file
# A synth replaces the output of the stages it builds; the other stages' output in cdk.out stays.
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0;; esac
set -euo pipefail
cd "$(dirname "$0")/.."
if (( $# > 1 )) && [[ " $* " == *" all "* ]]; then
  echo "synth.sh: 'all' already synthesizes every stage: give it alone, or name the stages (got: $*)" >&2
  exit 2
fi
scripts/setup.sh
source scripts/env.sh
# The stack patterns select the stages' stacks, whose warning annotations the CLI prints only when selected.
if [[ "${1:-}" == "all" ]]; then
  scripts/cdk synth '**'
  echo "synth: every stage's templates are in cdk.out/assembly-<stage>/, its Kubernetes YAML in cdk.out/k8s/<stage>/"
  exit 0
fi
for stage in "${@:-dev}"; do
  scripts/cdk synth -c "stage=$stage" "$stage/*"
  echo "synth: $stage's templates are in cdk.out/assembly-$stage/, its Kubernetes YAML in cdk.out/k8s/$stage/"
done
