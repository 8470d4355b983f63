"""Runs built in memory for the report and results tests (no aiperf): each level's samples spread
evenly around the given medians so percentiles are predictable."""

from __future__ import annotations

from serving_lab.bench.results import Hardware, Level, ProfileRun, Run, Samples, Stats

HARDWARE = Hardware(
    instance_type="g6.8xlarge", gpu_nodes=2, gpus_per_node=1, gpu="L4", efa_interfaces=1, availability_zone="us-west-2a"
)


def _spread(median: float) -> list[float]:
    return [round(median * factor, 3) for factor in (0.9, 0.95, 1.0, 1.05, 1.1)]


def make_level(concurrency: int, ttft: float, itl: float, e2e: float, tokens_per_s: float = 1000.0) -> Level:
    samples = Samples(ttft_ms=_spread(ttft), itl_ms=_spread(itl), e2e_ms=_spread(e2e))
    return Level(
        concurrency=concurrency,
        requests=5,
        errors=0,
        duration_s=10.0,
        ttft_ms=Stats.of(samples.ttft_ms),
        itl_ms=Stats.of(samples.itl_ms),
        e2e_ms=Stats.of(samples.e2e_ms),
        output_tokens_per_s=tokens_per_s,
        requests_per_s=0.5,
        samples=samples,
    )


def make_run(
    mode: str,
    profiles: dict[str, dict[int, tuple[float, float, float]]],
    hardware: Hardware = HARDWARE,
    note: str = "",
    tokens_per_s=None,
) -> Run:
    """profiles: {name: {concurrency: (ttft p50, itl p50, e2e p50)}}."""
    return Run(
        label=mode,
        note=note,
        created_at="2026-11-30T06:00:00+00:00",
        stage="dev",
        mode=mode,
        endpoint="http://127.0.0.1:8000",
        model_id="qwen3.5-9b",
        model_source="Qwen/Qwen3.5-9B",
        image="763104351884.dkr.ecr.us-west-2.amazonaws.com/ray:serve-llm-cuda-v1.0",
        hardware=hardware,
        settings={
            "mode": mode,
            "engine": {"max_model_len": 4096, "tensor_parallel_size": 1, "dtype": "bfloat16"},
            "kv_backend": "LIBFABRIC" if mode == "pd" else None,
        },
        client={"name": "aiperf", "version": "0.13.0"},
        profiles=[
            ProfileRun(
                name=name,
                input_tokens=256,
                output_tokens=256,
                levels=[
                    make_level(c, *values, tokens_per_s=(tokens_per_s or {}).get(c, 1000.0))
                    for c, values in levels.items()
                ],
            )
            for name, levels in profiles.items()
        ],
    )
