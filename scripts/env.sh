# Sourced by the scripts: quiet, offline-friendly defaults for CDK and jsii.
# jsii reads this as a list of majors (comma-separated): it silences the end-of-life banner on Node 20
# only (local machines still on it); CI runs Node 24 LTS, which jsii supports and prints nothing for.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION=1
export CDK_DISABLE_CLI_TELEMETRY=true
export AWS_EC2_METADATA_DISABLED=true
# Python keeps the bytecode of what it imports (in the venvs and the checkout's ignored __pycache__/), as it does
# by default: where this is set, as on some CI images, every process compiled the CDK modules it imports again
# (a synth in a new clone: 9.2 s, against 4.7 s once they are kept). The venvs are installed without it
# (setup.sh: --no-compile), so only what runs is compiled, once.
unset PYTHONDONTWRITEBYTECODE
