"""Where one stream's time to first token goes, phase by phase: a probe of sequential streaming requests
with the engines' own metrics scraped before and after it.

The client measures each request's TTFT (send to first content chunk). The engines measure their side in
vLLM's request histograms, exported by Ray on the head's metrics port (`ray_vllm_*`, vLLM's
vllm/v1/metrics/loggers.py names them, vllm/v1/metrics/stats.py defines the intervals from the request's
arrival, queued, scheduled, first-token and last-token timestamps):

  ttft      arrival in the engine's frontend (the LLMServer replica) -> first token
  queue     queued -> first scheduled
  prefill   first scheduled -> first token
  e2e       arrival -> last token
  nixl_xfer one NIXL transfer of KV blocks, as the worker that reads them times it (decode pulls)

Serve times each deployment's handler (`ray_serve_deployment_processing_latency_ms`, per deployment:
the PD proxy, the prefill and the decode LLMServer). The difference between a histogram's _sum and
_count before and after the probe is the probe's own share: mean = delta sum / delta count.

Which engine is which is read from its numbers, not its labels: the prefill leg generates one token per
request (Ray's PD proxy caps it with max_tokens = 1), the decode engine all the others."""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

SERIES = {
    "ray_vllm_time_to_first_token_seconds": "ttft",
    "ray_vllm_request_queue_time_seconds": "queue",
    "ray_vllm_request_prefill_time_seconds": "prefill",
    "ray_vllm_e2e_request_latency_seconds": "e2e",
    "ray_vllm_request_decode_time_seconds": "decode",
    "ray_vllm_request_generation_tokens": "generated_tokens",
    "ray_vllm_request_prompt_tokens": "prompt_tokens",
    "ray_vllm_nixl_xfer_time_seconds": "nixl_xfer",
    "ray_vllm_nixl_post_time_seconds": "nixl_post",
    "ray_vllm_nixl_bytes_transferred": "nixl_bytes",
    "ray_vllm_nixl_num_descriptors": "nixl_descs",
}
# The NIXL histograms whose bucket counts the breakdown keeps as well (`<name>_buckets`: {"lo-hi": transfers}):
# Ray rebuilds a histogram's _sum from its buckets' midpoints, so the counts per bucket are the exact part.
BUCKETED = ("nixl_xfer", "nixl_bytes", "nixl_descs")
SERVE_SERIES = "ray_serve_deployment_processing_latency_ms"
# Ray's core workers export their metrics every metrics_report_interval_ms (10 s by default,
# src/ray/common/ray_config_def.h): a scrape waits one interval and a margin so the probe's requests,
# and no others, are inside the two scrapes.
EXPORT_WAIT_S = 12.0

_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')
# Labels that say nothing about which engine or deployment a sample is from.
_IGNORED_LABELS = {"le", "quantile"}

Key = tuple[str, tuple[tuple[str, str], ...]]  # (series, labels)


class ScrapeError(Exception):
    """The metrics endpoint did not answer with its text; one line."""


def bucket_counts(text: str) -> dict[Key, dict[float, float]]:
    """Prometheus text -> {(histogram, labels without le): {upper bound: cumulative count}} for BUCKETED series."""
    wanted = {name for name, short in SERIES.items() if short in BUCKETED}
    found: dict[Key, dict[float, float]] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line) if line and not line.startswith("#") else None
        if not match or not match.group(1).endswith("_bucket") or match.group(1)[: -len("_bucket")] not in wanted:
            continue
        name, labels, value = match.groups()
        pairs = _LABEL.findall(labels or "")
        le = dict(pairs).get("le")
        key = (name[: -len("_bucket")], tuple(sorted((k, v) for k, v in pairs if k not in _IGNORED_LABELS)))
        try:
            found.setdefault(key, {})[float(le) if le is not None else float("inf")] = float(value)
        except ValueError:
            pass
    return found


def _bucket_deltas(before: dict[float, float], after: dict[float, float]) -> dict[str, int]:
    """The transfers the probe added to each bucket, as {"lo-hi": n} (cumulative counts made per bucket)."""
    out, previous, low = {}, 0.0, 0.0
    for upper in sorted(after):
        cumulative = after[upper] - before.get(upper, 0.0)
        count = round(cumulative - previous)
        if count > 0:
            out[f"{low:g}-{upper:g}"] = count
        previous, low = cumulative, upper
    return out


def parse(text: str) -> dict[Key, tuple[float, float]]:
    """Prometheus text -> {(histogram, labels): (_sum, _count)} for the series this probe reads."""
    sums: dict[Key, float] = {}
    counts: dict[Key, float] = {}
    wanted = set(SERIES) | {SERVE_SERIES}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if not match:
            continue
        name, labels, value = match.groups()
        for suffix, into in (("_sum", sums), ("_count", counts)):
            if name.endswith(suffix) and name[: -len(suffix)] in wanted:
                pairs = tuple(sorted((k, v) for k, v in _LABEL.findall(labels or "") if k not in _IGNORED_LABELS))
                try:
                    into[(name[: -len(suffix)], pairs)] = float(value)
                except ValueError:
                    pass
    return {key: (sums[key], counts.get(key, 0.0)) for key in sums}


@dataclass
class Breakdown:
    client_ttft_s: list[float]
    engines: list[dict[str, Any]] = field(default_factory=list)  # one per vLLM engine that served the probe
    deployments: dict[str, float] = field(default_factory=dict)  # Serve deployment -> mean handler ms
    complete: bool = True  # every engine counted exactly the probe's requests
    concurrency: int = 1  # requests in flight at once
    note: str = ""
    per_request: Any = None  # traces.PerRequest: each request's phases from the engines' spans, where received

    def outside_engines_s(self) -> float | None:
        """The client's median TTFT less the prefill engine's whole leg and the decode engine's own TTFT:
        what the proxy, Serve's routing and the hops between them take (PD with one engine each)."""
        roles = {e["role"]: e for e in self.engines}
        prefill, decode = roles.get("prefill"), roles.get("decode")
        if not self.client_ttft_s or not prefill or not decode or None in (prefill.get("e2e"), decode.get("ttft")):
            return None
        return statistics.median(self.client_ttft_s) - prefill["e2e"] - decode["ttft"]

    def to_json(self) -> dict[str, Any]:
        outside = self.outside_engines_s()
        return {
            "outside_engines_s": round(outside, 4) if outside is not None else None,
            "requests": len(self.client_ttft_s),
            "concurrency": self.concurrency,
            "client_ttft_s": [round(x, 4) for x in self.client_ttft_s],
            "client_ttft_median_s": round(statistics.median(self.client_ttft_s), 4) if self.client_ttft_s else None,
            "engines": self.engines,
            "serve_deployments_mean_ms": {k: round(v, 2) for k, v in self.deployments.items()},
            "complete": self.complete,
            "note": self.note,
            **({"per_request": self.per_request.to_json()} if self.per_request is not None else {}),
        }

    def lines(self) -> list[str]:
        out = []
        if self.client_ttft_s:
            out.append(
                f"client TTFT median {statistics.median(self.client_ttft_s) * 1000:.1f} ms over "
                f"{len(self.client_ttft_s)} streams, {self.concurrency} at a time"
            )
        for engine in self.engines:
            phases = ", ".join(
                f"{name} {engine[name] * 1000:.1f} ms"
                for name in ("ttft", "queue", "prefill", "e2e", "nixl_xfer", "nixl_post")
                if engine.get(name) is not None
            )
            sizes = ", ".join(
                f"{engine[name]:.0f} {label}"
                for name, label in (
                    ("prompt_tokens", "prompt tokens"),
                    ("generated_tokens", "generated"),
                    ("nixl_bytes", "bytes per NIXL transfer"),
                    ("nixl_descs", "descriptors per NIXL transfer"),
                )
                if engine.get(name) is not None
            )
            out.append(f"{engine['role']} engine ({engine['requests']} requests; {sizes}): {phases}")
            for name in BUCKETED:
                if engine.get(f"{name}_buckets"):
                    spread = ", ".join(f"{k}: {v}" for k, v in engine[f"{name}_buckets"].items())
                    out.append(f"  {name} per bucket (transfers): {spread}")
        for name, ms in sorted(self.deployments.items()):
            out.append(f"Serve deployment {name}: handler {ms:.1f} ms mean")
        outside = self.outside_engines_s()
        if outside is not None:
            out.append(f"outside the engines (client median - prefill e2e - decode TTFT): {outside * 1000:.1f} ms")
        if self.note:
            out.append(self.note)
        return out + (self.per_request.lines() if self.per_request is not None else [])


def breakdown(before: str, after: str, client_ttft_s: list[float]) -> Breakdown:
    """The probe's share of every histogram, per engine and per Serve deployment."""
    per_engine, deployments = _deltas(before, after)
    engines = _fold_nixl_only(_touched_engines(per_engine))
    engines.sort(key=lambda e: {"prefill": 0, "decode": 1}.get(e["role"], 2))
    for engine in engines:
        for name in list(engine):
            if isinstance(engine[name], float):
                engine[name] = round(engine[name], 5)
    result = Breakdown(client_ttft_s=client_ttft_s, engines=engines, deployments=deployments)
    counted = [e["requests"] for e in engines if e["requests"]]
    if any(n != len(client_ttft_s) for n in counted):
        result.complete = False
        result.note = (
            f"incomplete: the engines counted {counted} requests, the probe sent {len(client_ttft_s)} "
            "(a metrics export fell between the scrapes); the means are still the counted requests'"
        )
    return result


_Labels = tuple[tuple[str, str], ...]


def _deltas(before: str, after: str) -> tuple[dict[_Labels, dict[str, Any]], dict[str, float]]:
    """(per engine's labels: its histograms' means over the probe, per Serve deployment: its mean)."""
    old, new = parse(before), parse(after)
    old_buckets, new_buckets = bucket_counts(before), bucket_counts(after)
    per_engine: dict[_Labels, dict[str, Any]] = {}
    deployments: dict[str, float] = {}
    for (series, labels), (total, count) in new.items():
        prev_total, prev_count = old.get((series, labels), (0.0, 0.0))
        d_count = count - prev_count
        if d_count <= 0:
            continue
        mean = (total - prev_total) / d_count
        if series == SERVE_SERIES:
            name = dict(labels).get("deployment") or dict(labels).get("application") or "?"
            deployments[name] = mean
            continue
        engine = per_engine.setdefault(labels, {"labels": dict(labels)})
        _add_series(engine, SERIES[series], mean=mean, count=d_count)
        if SERIES[series] in BUCKETED and (series, labels) in new_buckets:
            engine[f"{SERIES[series]}_buckets"] = _bucket_deltas(
                old_buckets.get((series, labels), {}), new_buckets[(series, labels)]
            )
    return per_engine, deployments


def _add_series(engine: dict[str, Any], key: str, *, mean: float, count: float) -> None:
    """One histogram's mean on its engine; e2e's count is the engine's requests, nixl_xfer's its transfers."""
    engine[key] = mean
    if key == "e2e":
        engine["requests"] = round(count)
    if key == "nixl_xfer":
        engine["nixl_transfers"] = round(count)


def _touched_engines(per_engine: dict[_Labels, dict[str, Any]]) -> list[dict[str, Any]]:
    """The engines the probe's requests or NIXL transfers reached, each with its role by tokens generated."""
    engines = []
    for engine in per_engine.values():
        if "requests" not in engine:
            if engine.get("nixl_xfer") is None:
                continue  # a series this probe did not touch
            engine["requests"] = 0
        tokens = engine.get("generated_tokens")
        engine["role"] = "prefill" if tokens is not None and tokens <= 1.5 else "decode" if tokens else "engine"
        engines.append(engine)
    return engines


def _fold_nixl_only(engines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The NIXL series come from the decode worker's process but may carry other labels than its request
    series: a NIXL-only entry is folded into the decode engine."""
    nixl_only = [e for e in engines if e["requests"] == 0]
    decode = [e for e in engines if e["role"] == "decode" and e["requests"] > 0]
    if nixl_only and len(decode) == 1:
        for extra in nixl_only:
            for name in (
                "nixl_xfer",
                "nixl_post",
                "nixl_transfers",
                "nixl_bytes",
                "nixl_descs",
                *(f"{b}_buckets" for b in BUCKETED),
            ):
                if name in extra:
                    decode[0][name] = extra[name]
            engines.remove(extra)
    return engines


def probe(
    scrape: Callable[[], str],
    send: Callable[[int], float],
    *,
    requests: int,
    concurrency: int = 1,
    wait: Callable[[float], None] = time.sleep,
    export_wait_s: float | None = None,
) -> Breakdown:
    """Scrape, send `requests` streaming requests, `concurrency` at a time (send(i) returns request i's TTFT),
    scrape again once Ray has exported them, and break the TTFT down."""
    export_wait_s = EXPORT_WAIT_S if export_wait_s is None else export_wait_s
    wait(export_wait_s)  # the requests before it are exported before the first scrape
    before = scrape()
    if concurrency <= 1:
        ttfts = [send(i) for i in range(requests)]
    else:
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            ttfts = list(pool.map(send, range(requests)))
    wait(export_wait_s)
    found = breakdown(before, scrape(), ttfts)
    found.concurrency = concurrency
    return found
