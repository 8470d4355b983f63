#!/usr/bin/env bash
# Offline vLLM start-up of one engine on the emulated L4 budget (the rehearsal's --emulate-node figures),
# per arm: vLLM's own memory lines. Run on the GPU host after the serve tree is installed.
set -uo pipefail
env_lines=$(scripts/rehearsal_install.sh /tmp/rehearsal-site /tmp/pieces 2>/dev/null) || exit 1
eval "$env_lines"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=$PWD/.rehearsal/cache/triton
python3 -c "from serving_lab.rehearse.model_folder import build; build('/tmp/qwen-model', config_path='rehearsal/qwen3.5-9b-config.json')"
for arm in "$@"; do
  case $arm in
    eager)  extra="enforce_eager=True" ;;
    graphs) extra="enforce_eager=False, max_cudagraph_capture_size=64" ;;
  esac
  [[ $arm == graphs ]] && SEQS=32 || SEQS=256
  t0=$SECONDS
  timeout 300 python3 -c "
from vllm import LLM
LLM(model='/tmp/qwen-model', load_format='dummy', language_model_only=True, dtype='bfloat16', max_model_len=4096,
    gpu_memory_utilization=0.1441, max_num_seqs=${SEQS:-256}, max_num_batched_tokens=2048, gdn_prefill_backend='triton', $extra)
print('ARM-DONE')
" > "$OUT/profile-$arm.log" 2>&1
  echo "== $arm: exit $? after $((SECONDS - t0)) s"
  grep -E "Model loading took|Desired GPU memory|Available KV cache|GPU KV cache size|Maximum concurrency|Graph capturing|ARM-DONE|Error|error" "$OUT/profile-$arm.log" | grep -v "^$" | head -12
done
