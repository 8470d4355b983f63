"""On a host where vLLM is installed: compare config/vllm_engine_args.json (the record the stage schema
validates against) with the real `EngineArgs` dataclass. Prints the differences; exit 1 if any.

    python scripts/check_vllm_engine_args.py
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

RECORD = Path(__file__).resolve().parents[1] / "config" / "vllm_engine_args.json"


def main() -> int:
    import vllm
    from vllm.engine.arg_utils import EngineArgs

    record = json.loads(RECORD.read_text())
    recorded = record["fields"]
    real = {f.name for f in dataclasses.fields(EngineArgs)}
    missing, extra = sorted(set(recorded) - real), sorted(real - set(recorded))
    print(
        f"vllm {vllm.__version__} (record: {record['vllm']}): EngineArgs has {len(real)} fields, "
        f"the record {len(recorded)}; only in the record: {missing or 'none'}; only in vLLM: {extra or 'none'}"
    )
    defaults = {f.name: f.default for f in dataclasses.fields(EngineArgs)}
    for name in (
        "max_num_seqs",
        "max_num_batched_tokens",
        "enable_prefix_caching",
        "gdn_prefill_backend",
        "language_model_only",
        "load_format",
    ):
        print(f"  {name}: {recorded.get(name)} (default {defaults.get(name)!r})")
    return 1 if missing or extra or record["vllm"] != vllm.__version__ else 0


if __name__ == "__main__":
    sys.exit(main())
