#!/usr/bin/env python3
"""Generate the sample benchmark report in docs/benchmark-sample/ WITHOUT GPUs: the real `ops bench`
code path (aiperf, results JSON, comparison report and plots) against the local fake OpenAI server,
once per mode, with latency models shaped after published PD-disaggregation results. The numbers say
nothing about real hardware; they show what the report looks like and that it reads its inputs right.

    .venv-bench/bin/python scripts/bench_sample.py [--out docs/benchmark-sample]

(scripts/setup.sh --bench creates .venv-bench.) Takes about 5 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import yaml

from clients.cli_options import output_folder
from config import load_stage_file
from serving_lab.bench import aiperf, offline_tokenizer, report, results, runner
from serving_lab.bench.fake_server import Delays, FakeOpenAIServer

ROOT = Path(__file__).resolve().parent.parent

NOTE = "SAMPLE: local fake server with injected latencies on 127.0.0.1, not real GPUs"
# Colocated: prefill and decode share one engine, so queued prompts delay first tokens and every prefill
# in the batch stretches the other streams' tokens. PD: the KV cache crosses the network (TCP-speed
# copies through host memory on g6: no GPUDirect RDMA), a fixed cost per prompt token in TTFT, but
# decode runs undisturbed.
PERSONAS = {
    "colocated": Delays(
        ttft_ms=40, ttft_ms_per_prompt_token=0.06, ttft_ms_per_inflight=6, itl_ms=18, itl_ms_per_inflight=0.5
    ),
    "pd": Delays(
        ttft_ms=40, ttft_ms_per_prompt_token=0.11, ttft_ms_per_inflight=3, itl_ms=18, itl_ms_per_inflight=0.12
    ),
}
PROFILES = [
    {"name": "chat", "input_tokens": 256, "output_tokens": 64, "concurrency": [1, 4, 16, 64], "requests_per_stream": 2},
    {
        "name": "long-prompt",
        "input_tokens": 3500,
        "output_tokens": 32,
        "concurrency": [1, 4, 16, 64],
        "requests_per_stream": 2,
    },
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=output_folder, default=str(ROOT / "docs" / "benchmark-sample"))
    args = parser.parse_args()
    out = Path(args.out)
    executable = aiperf.find_executable()
    with tempfile.TemporaryDirectory(prefix="bench-sample-") as work:
        work = Path(work)
        tokenizer = offline_tokenizer.build(work / "tokenizer")
        runs = {}
        for mode, delays in PERSONAS.items():
            data = yaml.safe_load((ROOT / "config" / "dev.yaml").read_text())
            data["serving"]["mode"] = mode
            data["benchmark"]["profiles"] = PROFILES
            stage_file = work / "stages" / mode / "dev.yaml"
            stage_file.parent.mkdir(parents=True)
            stage_file.write_text(yaml.safe_dump(data, sort_keys=False))
            cfg = load_stage_file(stage_file)
            with FakeOpenAIServer(cfg.serving.model.id, delays) as server:
                _, path = runner.run_stage(
                    cfg,
                    url=server.url,
                    executable=executable,
                    out_dir=work / "runs",
                    tokenizer=str(tokenizer),
                    note=NOTE,
                    endpoint_label="fake server on 127.0.0.1",
                )
            runs[mode] = path
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        for mode, path in runs.items():
            shutil.copy(path, out / f"run-{mode}.json")
        report.compare(results.load(runs["pd"]), results.load(runs["colocated"]), out)
    print(f"sample report: {out / 'report.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
