"""What the GPU allows at best for a request's first token and a decode step (issue #53): the floors a rehearsal's
figures are stated against, as multiples.

- prefill compute: 2 FLOP per parameter per prompt token at the GPU's dense BF16 peak, counting only the layers'
  matmuls (the input embedding is a lookup and the LM head runs for the last position alone, so neither counts);
- weight read: every weight the forward uses read once at the GPU's memory bandwidth (the input embedding's rows
  only, so not counted);
- a prefill's floor is the larger of the two; a decode step's is the weight read (the KV cache read is left out,
  so this is a floor at any context).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BF16_BYTES = 2


@dataclass(frozen=True)
class Peak:
    """A GPU's dense BF16 tensor throughput and memory bandwidth, from NVIDIA's datasheet (dense: half the
    datasheet's 'with sparsity' figure)."""

    bf16_flops: float
    memory_bytes_per_s: float


# By the name nvidia-smi prints, exactly: a variant (an H200 NVL, an L40S) has figures of its own.
PEAKS = {
    "NVIDIA H200": Peak(989.5e12, 4.8e12),  # H200 SXM datasheet: BF16 1,979 TFLOPS with sparsity, 4.8 TB/s HBM3e
    "NVIDIA H100 80GB HBM3": Peak(989.5e12, 3.35e12),  # H100 SXM datasheet: BF16 1,979 TFLOPS sparse, 3.35 TB/s HBM3
    "NVIDIA L4": Peak(121e12, 300e9),  # L4 datasheet: BF16 242 TFLOPS with sparsity, 300 GB/s GDDR6
}


def peak_of(gpu_name: str) -> Peak | None:
    """The peak of a GPU as nvidia-smi names it, or None for one not in PEAKS."""
    return PEAKS.get(gpu_name.strip())


@dataclass(frozen=True)
class Model:
    """What the floors need of a model: its BF16 weights as vLLM loaded them and its embedding's size."""

    weight_bytes: float
    embedding_params: int
    tied_embeddings: bool

    @classmethod
    def of(cls, config_json: Path, weights_gib: float) -> Model:
        """From a model folder's config.json (a multimodal one's text_config) and vLLM's 'Model loading took' GiB."""
        config = json.loads(config_json.read_text())
        text = config.get("text_config", config)
        tied = bool(text.get("tie_word_embeddings", config.get("tie_word_embeddings", False)))
        return cls(weights_gib * 2**30, int(text["vocab_size"]) * int(text["hidden_size"]), tied)

    @property
    def read_bytes(self) -> float:
        """A forward's weight reads: all but the input embedding (read whole as the LM head when tied)."""
        return self.weight_bytes - (0 if self.tied_embeddings else self.embedding_params * BF16_BYTES)

    @property
    def matmul_params(self) -> float:
        """The layers' parameters: neither the embedding nor an untied LM head."""
        heads = 1 if self.tied_embeddings else 2
        return self.weight_bytes / BF16_BYTES - heads * self.embedding_params


@dataclass(frozen=True)
class Floors:
    """The floors for one prompt length on one GPU (seconds)."""

    prompt_tokens: int
    prefill_compute_s: float
    weight_read_s: float

    @classmethod
    def of(cls, peak: Peak, model: Model, prompt_tokens: int) -> Floors:
        compute = 2 * model.matmul_params * prompt_tokens / peak.bf16_flops
        return cls(prompt_tokens, compute, model.read_bytes / peak.memory_bytes_per_s)

    @property
    def prefill_s(self) -> float:
        return max(self.prefill_compute_s, self.weight_read_s)

    def multiples(self, medians: dict[str, float]) -> dict[str, float]:
        """Each figure over its floor: the first token and the prefill over the prefill's, a first decode step and
        the inter-token latency over a decode step's."""
        over = {"client_ttft_s": self.prefill_s, "prefill_compute_s": self.prefill_s}
        over |= {"decode_first_step_s": self.weight_read_s, "itl_s": self.weight_read_s}
        return {name: round(medians[name] / floor, 2) for name, floor in over.items() if name in medians}

    def to_json(self, medians: dict[str, float]) -> dict[str, Any]:
        return {
            "source": "serving_lab/rehearse/floors.py",
            "prompt_tokens": self.prompt_tokens,
            "prefill_compute_s": round(self.prefill_compute_s, 5),
            "weight_read_s": round(self.weight_read_s, 5),
            "multiples": self.multiples(medians),
        }

    def line(self, medians: dict[str, float]) -> str:
        shown = ", ".join(f"{name[:-2].replace('_', ' ')} {x:g}x" for name, x in self.multiples(medians).items())
        return (
            f"floors at {self.prompt_tokens} prompt tokens: prefill {self.prefill_s * 1000:.1f} ms (compute "
            f"{self.prefill_compute_s * 1000:.1f}, weight read {self.weight_read_s * 1000:.1f}), decode step "
            f"{self.weight_read_s * 1000:.1f} ms; medians over them: {shown or 'none measured'}"
        )
