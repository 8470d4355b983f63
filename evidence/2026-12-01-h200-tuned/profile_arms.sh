#!/usr/bin/env bash
# One engine alone, offline (vllm.LLM), on the emulated L4 budget of `ops rehearse --emulate-node`
# (gpu_memory_utilization 0.9 x 23,034 / 143,771 = 0.1441 of an H200; vLLM's L4 batch defaults pinned):
# vLLM's own memory lines per arm. On the GPU host, after the serve tree's pieces are in /tmp/pieces:
#   OUT=DIR bash docs/rehearsal/2026-12-01-h200-tuned/profile_arms.sh ARM...   (arms below; each <= ARM_TIMEOUT_S)
# Stops starting arms when fewer than ARM_RESERVE_S (default 130) seconds are left of PROFILE_BUDGET_S (540).
# ARM_TIMEOUT_S (default 240): the most one arm may take. ARM_STACKS_S=N: every Python process of an arm (the
# engine core too: a sitecustomize on PYTHONPATH) prints all its threads' stacks every N s, to show where a slow
# start-up spends its time.
set -uo pipefail
budget=${PROFILE_BUDGET_S:-540} reserve=${ARM_RESERVE_S:-130} arm_timeout=${ARM_TIMEOUT_S:-240}
env_lines=$(scripts/rehearsal_install.sh /tmp/rehearsal-site /tmp/pieces 2>"$OUT/install.log") || { tail -3 "$OUT/install.log"; exit 1; }
eval "$env_lines"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=$PWD/.rehearsal/cache/triton \
  FLASHINFER_WORKSPACE_BASE=$PWD/.rehearsal/cache/flashinfer-home  # the caches of scripts/rehearsal_device_run.sh
python3 -c "from serving_lab.rehearse.model_folder import build; build('/tmp/qwen-model', config_path='rehearsal/qwen3.5-9b-config.json')" || exit 1
ls /tmp/qwen-model > "$OUT/model-folder.txt"
if [[ -n "${ARM_STACKS_S:-}" ]]; then
  [[ "$ARM_STACKS_S" =~ ^[1-9][0-9]*$ ]] || { echo "profile_arms: ARM_STACKS_S: '$ARM_STACKS_S' is not a whole number of seconds" >&2; exit 2; }
  stacks=$(mktemp -d /tmp/arm-stacks.XXXXXX)
  printf 'import faulthandler, sys\nfaulthandler.dump_traceback_later(%s, repeat=True, file=sys.stderr)\n' "$ARM_STACKS_S" > "$stacks/sitecustomize.py"
  export PYTHONPATH=$stacks${PYTHONPATH:+:$PYTHONPATH}
fi
common="load_format='dummy', dtype='bfloat16', max_model_len=4096, gpu_memory_utilization=0.1441, max_num_batched_tokens=2048, gdn_prefill_backend='triton'"
# Full CUDA graphs for pure-decode batches only, without torch.compile: vllm/config/compilation.py
# ("FULL_DECODE_ONLY ... Can be good for decode instances in a P/D setup ... save some memory";
# "full cudagraphs are supported with and without compilation"); the GDN backend supports UNIFORM_BATCH
# graphs (vllm/v1/attention/backends/gdn_attn.py).
decode_graphs="enforce_eager=False, max_num_seqs=32, compilation_config={'mode': 0, 'cudagraph_mode': 'FULL_DECODE_ONLY', 'max_cudagraph_capture_size': 32}"
for arm in "$@"; do
  left=$((budget - SECONDS))
  if (( left < reserve )); then echo "== $arm: not started ($left s left)"; continue; fi
  case $arm in
    rendered)        extra="enforce_eager=True, max_num_seqs=256" ;;                      # dev as rendered for EKS: vision tower on
    eager-text)      extra="enforce_eager=True, max_num_seqs=256, language_model_only=True" ;;
    graphs-text)     extra="language_model_only=True, $decode_graphs" ;;
    fp8-graphs-text) extra="language_model_only=True, quantization='fp8', $decode_graphs" ;;
    fp8-eager-text)  extra="enforce_eager=True, max_num_seqs=256, language_model_only=True, quantization='fp8'" ;;
    *) echo "== $arm: unknown arm"; continue ;;
  esac
  t0=$SECONDS
  timeout $(( left - 20 < arm_timeout ? left - 20 : arm_timeout )) python3 -c "
from vllm import LLM
llm = LLM(model='/tmp/qwen-model', $common, $extra)
out = llm.generate(['Hello ' * 200], __import__('vllm').SamplingParams(max_tokens=32, ignore_eos=True))
print('ARM-DONE', len(out[0].outputs[0].token_ids))
" > "$OUT/profile-$arm.log" 2>&1
  echo "== $arm: exit $? after $((SECONDS - t0)) s"
  grep -E "Model loading took|Desired GPU memory|Available KV cache|GPU KV cache size|Maximum concurrency|Graph capturing|kv-cache-memory|encoder|ARM-DONE|Error|error" "$OUT/profile-$arm.log" | head -14
done
