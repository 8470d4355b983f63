"""The bytes NIXL moved for the oracle's PD requests, against the bytes the model's layout predicts for them.

The decode engine of a Gated DeltaNet model pulls all prompt tokens but the last and recomputes that one itself
(`_get_remote_prefill_token_count`, vllm/distributed/kv_transfer/kv_connector/v1/nixl/base_scheduler.py: "N-1 for
Mamba models since the decoder always recomputes the last token"). So per request it computes exactly one prompt
token, takes the rest from its own prefix cache or over NIXL, and vLLM counts each source
(`vllm:prompt_tokens_by_source`: local_compute, local_cache_hit, external_kv_transfer, with
computed + local_cache_hit + external_kv_transfer = the prompt: vllm/v1/metrics/stats.py). A request whose KV did not
move shows as local_compute beyond one token; one that moved short, as bytes under the layout's figure.

Predicted bytes, from config.json and the attention block size the engine logs ("Setting attention block size to
N tokens", vllm/model_executor/models/config.py): each full-attention layer moves K and V of every external token
(2 x num_key_value_heads x head_dim x 2 bytes of bf16 a token a layer), read in whole blocks, so at most
block_size - 1 tokens more per request; each Gated DeltaNet layer moves one request's recurrent state: the
convolution state (conv_dim x (kernel - 1) in the model's dtype, conv_dim = 2 x key heads x key dim + value heads
x value dim) and the SSM state (value heads x key dim x value dim in mamba_ssm_dtype), as
vllm/model_executor/layers/mamba/mamba_utils.py sizes them.

Moved bytes: exactly, from NIXL's own Prometheus exporter on the decode worker where it answers (agent rx/tx byte
counters, NIXL's src/plugins/telemetry/prometheus), else at the resolution of vLLM's `vllm:nixl_bytes_transferred`
histogram as Ray exports it (buckets a factor 4 apart, its _sum rebuilt from bucket midpoints:
ray/_private/telemetry/open_telemetry_metric_recorder.py).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
BLOCK_SIZE_LINE = re.compile(r"Setting attention block size to (\d+) tokens")
_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
_SOURCE = re.compile(r'source="([a-z_]+)"')
SOURCES = ("local_compute", "local_cache_hit", "external_kv_transfer")


@dataclass(frozen=True)
class Layout:
    full_attention_layers: int
    state_layers: int
    fa_bytes_per_token: int  # K and V of one token across every full-attention layer
    state_bytes: int  # one request's recurrent state across every Gated DeltaNet layer

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Layout:
        text = config.get("text_config", config)
        types = text.get("layer_types") or ["full_attention"] * text["num_hidden_layers"]
        dtype = DTYPE_BYTES[str(text.get("dtype") or config.get("dtype") or "bfloat16")]
        per_token = 2 * text["num_key_value_heads"] * text["head_dim"] * dtype
        full = types.count("full_attention")
        gdn = types.count("linear_attention")
        state = 0
        if gdn:
            key_dim = text["linear_num_key_heads"] * text["linear_key_head_dim"]
            value_dim = text["linear_num_value_heads"] * text["linear_value_head_dim"]
            conv = (2 * key_dim + value_dim) * (text["linear_conv_kernel_dim"] - 1) * dtype
            ssm_dtype = DTYPE_BYTES[str(text.get("mamba_ssm_dtype") or "float32")]
            ssm = (
                text["linear_num_value_heads"] * text["linear_key_head_dim"] * text["linear_value_head_dim"] * ssm_dtype
            )
            state = gdn * (conv + ssm)
        return cls(full, gdn, full * per_token, state)

    def predicted(self, *, external_tokens: int, requests: int, block_size: int) -> tuple[int, int]:
        """(fewest, most) bytes for `requests` transfers of `external_tokens` tokens in all."""
        low = external_tokens * self.fa_bytes_per_token + requests * self.state_bytes
        return low, low + requests * (block_size - 1) * self.fa_bytes_per_token


def block_size(logs: dict[str, str]) -> int | None:
    """The attention block size an engine logged (the same for every engine of one config), or None."""
    for text in logs.values():
        found = BLOCK_SIZE_LINE.search(text)
        if found:
            return int(found.group(1))
    return None


def tokens_by_source(text: str) -> dict[tuple[tuple[str, str], ...], dict[str, float]]:
    """Prometheus text -> {engine's labels (without source): {source: counter}} for vllm:prompt_tokens_by_source."""
    found: dict[tuple[tuple[str, str], ...], dict[str, float]] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line) if line and not line.startswith("#") else None
        if not match or "prompt_tokens_by_source" not in match.group(1) or match.group(1).endswith("_created"):
            continue
        labels = match.group(2) or ""
        source = _SOURCE.search(labels)
        if not source:
            continue
        pairs = tuple(sorted(p for p in re.findall(r'([A-Za-z_]\w*)="((?:[^"\\]|\\.)*)"', labels) if p[0] != "source"))
        try:
            found.setdefault(pairs, {})[source.group(1)] = float(match.group(3))
        except ValueError:
            continue
    return found


def source_deltas(before: str, after: str) -> list[dict[str, int]]:
    """Each engine's prompt tokens by source over a round (engines the round did not touch left out)."""
    old, new = tokens_by_source(before), tokens_by_source(after)
    deltas = []
    for labels, counts in new.items():
        delta = {s: round(counts.get(s, 0.0) - old.get(labels, {}).get(s, 0.0)) for s in SOURCES}
        if any(delta.values()):
            deltas.append(delta)
    return deltas


def exporter_bytes(text: str) -> dict[str, float]:
    """NIXL's Prometheus exporter -> {series: value} for its byte and transfer-time counters and gauges."""
    values: dict[str, float] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line) if line and not line.startswith("#") else None
        if match and re.search(r"agent_(rx|tx)_(last_)?bytes|agent_xfer_time|agent_(rx|tx)_requests", match.group(1)):
            try:
                values[match.group(1)] = values.get(match.group(1), 0.0) + float(match.group(3))
            except ValueError:
                continue
    return values


@dataclass
class Accounting:
    concurrency: int
    requests: int
    prompt_tokens: int
    decode: dict[str, int] = field(default_factory=dict)  # the decode engine's prompt tokens by source
    transfers: int | None = None  # NIXL transfers the decode worker timed
    predicted: tuple[int, int] | None = None
    moved: tuple[float, float] | None = None  # (fewest, most) bytes the measurement allows; equal when exact
    moved_source: str = ""
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


@dataclass(frozen=True)
class Round:
    """What one oracle level of PD requests left behind: its answers' prompt sizes and the scrapes around it."""

    concurrency: int
    prompt_tokens: list[int]
    metrics_before: str
    metrics_after: str
    nixl_transfers: int | None  # vLLM's nixl_xfer_time histogram count on the decode worker over the round
    nixl_bytes_buckets: dict[str, int] | None  # vLLM's nixl_bytes_transferred per bucket ("lo-hi": transfers)
    exporter_before: str = ""
    exporter_after: str = ""


def _decode_sources(found: Accounting, deltas: list[dict[str, int]]) -> None:
    external = [d for d in deltas if d["external_kv_transfer"] > 0]
    if len(external) != 1:
        found.problems.append(
            f"{len(external)} engines took prompt tokens over NIXL (external_kv_transfer) where one decode engine should"
        )
        return
    found.decode = external[0]
    if found.decode["local_compute"] != found.requests:
        found.problems.append(
            f"the decode engine computed {found.decode['local_compute']} prompt tokens itself for {found.requests} "
            "requests: one each is the design (the last token); more means KV that did not move"
        )
    if sum(found.decode.values()) != found.prompt_tokens:
        found.problems.append(
            f"the decode engine counted {sum(found.decode.values())} prompt tokens, the answers {found.prompt_tokens}: "
            "a metrics export fell outside the scrapes"
        )


def _moved(round_: Round) -> tuple[tuple[float, float] | None, str]:
    """(fewest, most) bytes moved, and from where: NIXL's exporter exactly, else vLLM's histogram buckets."""
    before, after = exporter_bytes(round_.exporter_before), exporter_bytes(round_.exporter_after)
    for name in sorted(after):
        if re.search(r"agent_rx_bytes(_total)?$", name) or re.search(r"agent_tx_bytes(_total)?$", name):
            delta = after[name] - before.get(name, 0.0)
            if delta > 0:
                return (delta, delta), f"NIXL exporter {name}"
    if round_.nixl_bytes_buckets:
        low = sum(float(k.split("-")[0]) * n for k, n in round_.nixl_bytes_buckets.items())
        high = sum(float(k.split("-")[1]) * n for k, n in round_.nixl_bytes_buckets.items())
        return (low, high), "vLLM nixl_bytes_transferred buckets"
    return None, ""


def account(round_: Round, layout: Layout, block: int | None) -> Accounting:
    """The round's decode-side token sources, transfers and bytes against the layout's prediction."""
    found = Accounting(round_.concurrency, len(round_.prompt_tokens), sum(round_.prompt_tokens))
    _decode_sources(found, source_deltas(round_.metrics_before, round_.metrics_after))
    found.transfers = round_.nixl_transfers
    if found.transfers is not None and found.transfers < found.requests:
        found.problems.append(f"{found.transfers} NIXL transfers for {found.requests} requests")
    found.moved, found.moved_source = _moved(round_)
    if block is None:
        found.problems.append("no attention block size in the engines' logs: the bytes cannot be predicted")
    elif found.decode:
        found.predicted = layout.predicted(
            external_tokens=found.decode["external_kv_transfer"], requests=found.requests, block_size=block
        )
    if found.moved is None:
        found.problems.append("no NIXL bytes measured (neither NIXL's exporter nor vLLM's histogram)")
    elif found.predicted and (found.moved[1] < found.predicted[0] or found.moved[0] > found.predicted[1]):
        found.problems.append(
            f"moved {found.moved[0]:.0f}-{found.moved[1]:.0f} bytes ({found.moved_source}), the layout predicts "
            f"{found.predicted[0]}-{found.predicted[1]}"
        )
    return found
