"""A committed stage with another model, for the plan rules that depend on the model's architecture."""

from __future__ import annotations

from config.schema import StageConfig

ATTENTION_ONLY = "meta-llama/Llama-3.1-8B-Instruct"  # no Gated DeltaNet layers: vLLM's host KV buffer holds it


def with_model_source(cfg: StageConfig, source: str) -> StageConfig:
    model = cfg.serving.model.model_copy(update={"source": source})
    return cfg.model_copy(update={"serving": cfg.serving.model_copy(update={"model": model})})
