"""The bytes NIXL moved for the oracle's PD requests, against the bytes the model's layout predicts for them.

The decode engine of a Gated DeltaNet model pulls all prompt tokens but the last and recomputes that one itself
(`_get_remote_prefill_token_count`, vllm/distributed/kv_transfer/kv_connector/v1/nixl/base_scheduler.py: "N-1 for
Mamba models since the decoder always recomputes the last token"). So each request's decode engine computes exactly
one prompt token (its usage reports the other N-1 as cached), takes the rest from its own prefix cache or over NIXL,
and vLLM counts each source (`vllm:prompt_tokens_by_source`: local_compute, local_cache_hit, external_kv_transfer:
vllm/v1/metrics/stats.py).

Predicted bytes, from config.json and the attention block size the engine logs ("Setting attention block size to
N tokens", vllm/model_executor/models/config.py): NIXL reads the full-attention KV in whole blocks (one descriptor a
block a layer: `_get_block_descs_ids`, nixl/base_worker.py), so a request of N prompt tokens moves
ceil((N - 1) / block) blocks, less the blocks its decode engine already holds, each of block x 2 x KV heads x head
dim x 2 bytes (bf16) a full-attention layer; and each Gated DeltaNet layer moves the request's recurrent state once:
the convolution state (conv_dim x (kernel - 1) in the model's dtype, conv_dim = 2 x key heads x key dim + value
heads x value dim) and the SSM state (value heads x key dim x value dim in mamba_ssm_dtype), as
vllm/model_executor/layers/mamba/mamba_utils.py sizes them.

Moved bytes and transfer time, exactly, from NIXL's own Prometheus exporter on the decode worker (the READ initiator
counts them as received; clients/nixl_rate.py reads the counters, as `ops verify` does), not vLLM's
`vllm:nixl_bytes_transferred` histogram: Ray exports it with its _sum rebuilt from bucket midpoints
(ray/_private/telemetry/open_telemetry_metric_recorder.py) and its buckets lie a factor 4 apart.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

from clients import nixl_rate

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
BLOCK_SIZE_LINE = re.compile(r"Setting attention block size to (\d+) tokens")
_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
_SOURCE = re.compile(r'source="([a-z_]+)"')
_LABELS = re.compile(r'([A-Za-z_]\w*)="((?:[^"\\]|\\.)*)"')
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
        full = types.count("full_attention")
        return cls(full, gdn, full * per_token, state)

    def block_bytes(self, block_size: int) -> int:
        return block_size * self.fa_bytes_per_token

    def request_bytes(self, prompt_tokens: int, block_size: int) -> int:
        """One request's transfer with nothing of its prompt cached on the decode side."""
        return math.ceil(max(prompt_tokens - 1, 0) / block_size) * self.block_bytes(block_size) + self.state_bytes

    def predicted(self, prompt_tokens: list[int], *, cached_on_decode: int, block_size: int) -> int:
        """A level's bytes: every request's transfer, less the blocks the decode engine found in its own cache."""
        whole = sum(self.request_bytes(n, block_size) for n in prompt_tokens)
        return whole - cached_on_decode // block_size * self.block_bytes(block_size)


def block_size(logs: dict[str, str]) -> int | None:
    """The attention block size an engine logged (the same for every engine of one config), or None."""
    for text in logs.values():
        found = BLOCK_SIZE_LINE.search(text)
        if found:
            return int(found.group(1))
    return None


def _samples(text: str):
    """(name, labels, value) of each sample line of a Prometheus text."""
    for line in text.splitlines():
        match = _SAMPLE.match(line) if line and not line.startswith("#") else None
        if match:
            try:
                yield match.group(1), match.group(2) or "", float(match.group(3))
            except ValueError:
                continue


def tokens_by_source(text: str) -> dict[tuple[tuple[str, str], ...], dict[str, float]]:
    """Prometheus text -> {engine's labels (without source): {source: counter}} for vllm:prompt_tokens_by_source."""
    found: dict[tuple[tuple[str, str], ...], dict[str, float]] = {}
    for name, labels, value in _samples(text):
        source = _SOURCE.search(labels)
        if "prompt_tokens_by_source" not in name or name.endswith("_created") or not source:
            continue
        engine = tuple(sorted(p for p in _LABELS.findall(labels) if p[0] != "source"))
        found.setdefault(engine, {})[source.group(1)] = value
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


@dataclass(frozen=True)
class Transfer:
    """One request's transfer at one request in flight, from the exporter scraped around it."""

    prompt: str
    prompt_tokens: int
    bytes: int
    seconds: float

    @property
    def gbps(self) -> float:
        return self.bytes * 8 / self.seconds / 1e9 if self.seconds > 0 else 0.0


def transfer(prompt: str, prompt_tokens: int, before: str, after: str) -> Transfer | None:
    """The exporter's counters over one request (clients/nixl_rate.py), or None where it did not answer."""
    try:
        found = nixl_rate.rate(before, after)
    except nixl_rate.RateError:
        return None
    return Transfer(prompt, prompt_tokens, found.bytes, found.seconds)


@dataclass(frozen=True)
class Round:
    """What one oracle level of PD requests left behind: its answers' sizes and the scrapes around it."""

    concurrency: int
    prompt_tokens: list[int]
    cached_tokens: list[int | None]  # each answer's usage: the prompt tokens its decode engine did not compute
    metrics_before: str
    metrics_after: str
    exporter_before: str = ""
    exporter_after: str = ""
    transfers: list[Transfer] = field(default_factory=list)  # one request in flight: each request's own


@dataclass
class Accounting:
    concurrency: int
    requests: int
    prompt_tokens: int
    decode: dict[str, int] = field(default_factory=dict)  # the decode engine's prompt tokens by source
    transfers: int | None = None  # NIXL transfers the decode worker's agent received (its exporter's count)
    predicted: int | None = None
    moved: int | None = None  # bytes moved, as NIXL's exporter counts them: exactly
    moved_source: str = ""
    per_request: list[dict[str, Any]] = field(default_factory=list)
    rate_gbps: dict[str, float] = field(default_factory=dict)  # per transfer, one request in flight: median, worst
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def _computed_per_request(found: Accounting, round_: Round) -> None:
    for index, (n, cached) in enumerate(zip(round_.prompt_tokens, round_.cached_tokens, strict=True)):
        if cached is None or n - cached != 1:
            computed = "an unknown number of" if cached is None else str(n - cached)
            found.problems.append(
                f"request {index}: its decode engine computed {computed} of {n} prompt tokens itself, where the "
                "design computes the last one only"
            )


def _decode_sources(found: Accounting, deltas: list[dict[str, int]]) -> None:
    external = [d for d in deltas if d["external_kv_transfer"] > 0]
    if len(external) != 1:
        found.problems.append(f"{len(external)} engines counted prompt tokens over NIXL where one decode engine should")
        return
    found.decode = external[0]
    if found.decode["local_compute"] != found.requests:
        found.problems.append(
            f"the decode engine computed {found.decode['local_compute']} prompt tokens for {found.requests} requests"
        )
    if sum(found.decode.values()) != found.prompt_tokens:
        found.problems.append(
            f"the decode engine counted {sum(found.decode.values())} prompt tokens, the answers {found.prompt_tokens}: "
            "a metrics export fell outside the scrapes"
        )


def _exporter_round(round_: Round) -> tuple[nixl_rate.Rate | None, str]:
    """What NIXL's exporter counted over the round, and where the figure comes from; (None, why) where it did not
    answer."""
    try:
        return nixl_rate.rate(round_.exporter_before, round_.exporter_after), f"NIXL exporter {nixl_rate.RX_BYTES}"
    except nixl_rate.RateError as exc:
        return None, str(exc)


def _per_request(found: Accounting, round_: Round, layout: Layout, block: int) -> None:
    """Each request's own transfer: the layout's bytes less a whole number of cached blocks, and its rate."""
    for item in round_.transfers:
        whole = layout.request_bytes(item.prompt_tokens, block)
        cached, rest = divmod(whole - item.bytes, layout.block_bytes(block))
        ok = item.bytes > 0 and cached >= 0 and rest == 0
        found.per_request.append(asdict(item) | {"predicted_uncached": whole, "gbps": round(item.gbps, 3), "ok": ok})
        if not ok:
            found.problems.append(
                f"{item.prompt}: moved {item.bytes} bytes, the layout predicts {whole} less whole blocks"
            )
    rates = [t.gbps for t in round_.transfers if t.bytes > 0]
    if rates:
        found.rate_gbps = {"median": round(statistics.median(rates), 3), "worst": round(min(rates), 3)}


def account(round_: Round, layout: Layout, block: int | None) -> Accounting:
    """The round's decode-side token sources, transfers and bytes against the layout's prediction."""
    found = Accounting(round_.concurrency, len(round_.prompt_tokens), sum(round_.prompt_tokens))
    _computed_per_request(found, round_)
    _decode_sources(found, source_deltas(round_.metrics_before, round_.metrics_after))
    counted, found.moved_source = _exporter_round(round_)
    if counted is not None:
        found.moved, found.transfers = counted.bytes, counted.transfers
        if counted.transfers < found.requests:
            found.problems.append(f"{counted.transfers} NIXL transfers for {found.requests} requests")
    if block is None:
        found.problems.append("no attention block size in the engines' logs: the bytes cannot be predicted")
        return found
    hits = found.decode.get("local_cache_hit", 0)
    found.predicted = layout.predicted(round_.prompt_tokens, cached_on_decode=hits, block_size=block)
    if found.moved is None:
        found.problems.append(f"no NIXL bytes measured: {found.moved_source or 'the exporter did not answer'}")
    elif found.moved != found.predicted:
        found.problems.append(
            f"moved {found.moved} bytes ({found.moved_source}), the layout predicts {found.predicted}"
        )
    _per_request(found, round_, layout, block)
    return found
