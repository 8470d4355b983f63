"""vLLM's own memory and start-up figures per engine, read from the Ray workers' logs of a rehearsal.

Each figure is the number vLLM 0.26 logs itself at start-up (nothing is computed here):

  weights             "Model loading took 16.8 GiB memory and 0.43 seconds"   vllm/v1/worker/gpu_model_runner.py
                      ("Model loading took X GiB and ..." in vllm/v1/worker/gpu/model_runner.py)
  budget              "Desired GPU memory utilization is (0.9, 125.82 GiB)"    vllm/v1/worker/gpu_worker.py
  KV cache memory     "Available KV cache memory: 105.24 GiB"                 vllm/v1/worker/gpu_worker.py
                      (with kv_cache_memory_bytes: "reserved X GiB memory for KV Cache ... and skipped memory
                      profiling", the same file)
  KV cache tokens     "GPU KV cache size: 2,431,906 tokens"                   vllm/v1/core/kv_cache_utils.py
  concurrency         "Maximum concurrency for 4,096 tokens per request: 593.73x"   (the same)
  CUDA graph memory   "Graph capturing finished in 5 secs, took 0.45 GiB"     vllm/v1/worker/gpu_model_runner.py
                      (none with enforce_eager: no graphs are captured)

Which engine a line belongs to: each Ray actor logs to worker-<id>-<job>-<pid>.out/.err; a Serve replica's
files start with ":actor_name:ServeReplica:<app>:<deployment>" and its Serve log lines carry
"<app>_<deployment> <replica id>". The engine's vLLM core runs inside the replica (its lines, and the lines
its RayWorkerProc workers forward, in the replica's .out); the workers' own files are found through the
"(RayWorkerProc pid=N)" prefixes of those forwarded lines. Ray Serve LLM names its engine deployments
"Prefill:<model>", "Decode:<model>" and "LLMServer:<model>" (colocated); the ingress has no colon.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_ACTOR = re.compile(r"^:actor_name:ServeReplica:[^:\s]+:(\S+)", re.MULTILINE)
_WORKER = re.compile(r"\(RayWorkerProc pid=(\d+)\)")
_PID = re.compile(r"-(\d+)$")
_NUMBER = r"(-?\d+(?:\.\d+)?)"

PATTERNS = {
    "weights_gib": re.compile(rf"Model loading took {_NUMBER} GiB"),
    "budget": re.compile(rf"Desired GPU memory utilization is \({_NUMBER}, {_NUMBER} GiB\)"),
    "kv_cache_gib": re.compile(rf"Available KV cache memory: {_NUMBER} GiB"),
    "kv_cache_fixed_gib": re.compile(
        rf"reserved {_NUMBER} GiB memory for KV Cache as specified by "
        r"kv_cache_memory_bytes"
    ),
    "kv_cache_tokens": re.compile(r"GPU KV cache size: ([\d,]+) tokens"),
    "concurrency": re.compile(rf"Maximum concurrency for ([\d,]+) tokens per request: {_NUMBER}x"),
    "cuda_graphs": re.compile(rf"Graph capturing finished in {_NUMBER} secs, took {_NUMBER} GiB"),
}
# Where an engine's start-up goes, as vLLM 0.26 logs it (seconds): loading, torch.compile, the profiling
# run, the whole init after loading, and whether compiled graphs came from the cache.
# Why: docs/DECISIONS.md, "The rehearsal: the stage's own config, overrides listed".
STARTUP_PATTERNS = {
    "model_load_seconds": re.compile(rf"Model loading took {_NUMBER} GiB(?: memory)? and {_NUMBER} seconds"),
    "compile_seconds": re.compile(rf"torch\.compile took {_NUMBER} s in total"),
    "warmup_seconds": re.compile(rf"Initial profiling/warmup run took {_NUMBER} s"),
    "engine_init_seconds": re.compile(rf"init engine \(profile, create kv cache, warmup model\) took {_NUMBER} s"),
}
_COMPILE_CACHED = re.compile(r"Directly load the compiled graph")


@dataclass(frozen=True)
class EngineMemory:
    """One engine's figures as vLLM logged them; None where its log has no such line (yet)."""

    engine: str  # e.g. "Prefill:qwen3_5-9b 4g25mv6m" (deployment, replica)
    role: str  # prefill, decode or replica (colocated)
    weights_gib: float | None = None
    gpu_memory_utilization: float | None = None  # as the engine read it ("Desired GPU memory utilization")
    requested_gib: float | None = None  # that fraction of the GPU, in GiB
    kv_cache_gib: float | None = None  # profiled ("Available KV cache memory") or fixed (reserved)
    kv_cache_source: str | None = None  # "profiled" or "kv_cache_memory_bytes"
    kv_cache_tokens: int | None = None
    max_concurrency: float | None = None  # requests of `tokens_per_request` tokens the KV cache holds at once
    tokens_per_request: int | None = None  # max_model_len
    cuda_graph_gib: float | None = None
    cuda_graph_seconds: float | None = None
    model_load_seconds: float | None = None
    compile_seconds: float | None = None
    compile_cached: bool = False  # torch.compile's graphs loaded from VLLM_CACHE_ROOT, not compiled
    warmup_seconds: float | None = None
    engine_init_seconds: float | None = None

    def to_json(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        def gib(value: float | None) -> str:
            return "?" if value is None else f"{value:g} GiB"

        kv = gib(self.kv_cache_gib) + (" (fixed)" if self.kv_cache_source == "kv_cache_memory_bytes" else "")
        parts = [f"weights {gib(self.weights_gib)}"]
        if self.requested_gib is not None:
            parts.append(f"budget {self.gpu_memory_utilization:g} = {gib(self.requested_gib)}")
        parts += [
            f"KV cache {kv}",
            f"{self.kv_cache_tokens:,} tokens" if self.kv_cache_tokens is not None else "? tokens",
            f"{self.max_concurrency:g}x requests of {self.tokens_per_request:,} tokens"
            if self.max_concurrency is not None
            else "concurrency ?",
            self._graphs(gib(self.cuda_graph_gib)),
        ]
        return ", ".join(parts)

    def _graphs(self, shown: str) -> str:
        # vLLM's figure is the device's free memory before the capture minus after (capture_model in
        # vllm/v1/worker/gpu_model_runner.py): another process on the same GPU can make it negative.
        if self.cuda_graph_gib is None:
            return "CUDA graphs: none logged"
        if self.cuda_graph_gib < 0:
            return (
                f"CUDA graphs {shown} (not a measurement: another process on the GPU freed memory during the capture)"
            )
        return f"CUDA graphs {shown}"

    def startup(self) -> str:
        """Where the engine's start-up went, e.g. "load 0.4 s, compile 31.2 s, warm-up 2.1 s, ..."."""

        def seconds(label: str, value: float | None, note: str = "") -> str:
            return f"{label} {'not logged' if value is None else f'{value:.1f} s'}{note}"

        return ", ".join(
            [
                seconds("model load", self.model_load_seconds),
                seconds("torch.compile", self.compile_seconds, " (from the cache)" if self.compile_cached else ""),
                seconds("profile/warm-up", self.warmup_seconds),
                seconds("CUDA graphs", self.cuda_graph_seconds),
                seconds("engine init after loading", self.engine_init_seconds),
            ]
        )

    @property
    def complete(self) -> bool:
        return None not in (self.weights_gib, self.kv_cache_gib, self.kv_cache_tokens, self.max_concurrency)


def _role(deployment: str) -> str:
    prefix = deployment.split(":", 1)[0].lower()
    return {"prefill": "prefill", "decode": "decode"}.get(prefix, "replica")


def _stem(name: str) -> str:
    return re.sub(r"\.(out|err)$", "", name)


def figures(text: str) -> dict:
    """The first of each of vLLM's memory and start-up lines in `text` (one engine's logs), as EngineMemory fields."""
    text = _ANSI.sub("", text)
    return {**_memory_figures(text), **_startup_figures(text)}


def _memory_figures(text: str) -> dict:
    found: dict = {}
    for key, pattern in PATTERNS.items():
        match = pattern.search(text)
        if not match:
            continue
        if key == "weights_gib":
            found["weights_gib"] = float(match[1])
        elif key == "budget":
            found["gpu_memory_utilization"], found["requested_gib"] = float(match[1]), float(match[2])
        elif key == "kv_cache_gib":
            found["kv_cache_gib"], found["kv_cache_source"] = float(match[1]), "profiled"
        elif key == "kv_cache_fixed_gib" and "kv_cache_gib" not in found:
            found["kv_cache_gib"], found["kv_cache_source"] = float(match[1]), "kv_cache_memory_bytes"
        elif key == "kv_cache_tokens":
            found["kv_cache_tokens"] = int(match[1].replace(",", ""))
        elif key == "concurrency":
            found["tokens_per_request"] = int(match[1].replace(",", ""))
            found["max_concurrency"] = float(match[2])
        elif key == "cuda_graphs":
            found["cuda_graph_seconds"], found["cuda_graph_gib"] = float(match[1]), float(match[2])
    return found


def _startup_figures(text: str) -> dict:
    found: dict = {}
    for key, pattern in STARTUP_PATTERNS.items():
        if match := pattern.search(text):
            found[key] = float(match[match.lastindex or 1])
    if _COMPILE_CACHED.search(text):
        found["compile_cached"] = True
    return found


def engines(logs: dict[str, str], *, app: str = "llm") -> list[EngineMemory]:
    """One EngineMemory per engine replica found in the workers' logs (file name -> text), in name order."""
    files: dict[str, list[str]] = {}
    for name in sorted(logs):
        files.setdefault(_stem(name), []).append(logs[name])
    serve_line = re.compile(rf"\d{{2}}:\d{{2}}:\d{{2}},\d{{3}} {re.escape(app)}_(\S+:\S+) ([a-z0-9]{{8}}) ")
    by_pid = {match[1]: stem for stem in files if (match := _PID.search(stem))}
    found = []
    for stem, texts in files.items():
        text = "\n".join(texts)
        actor = _ACTOR.search(text)
        serve = serve_line.search(text)
        deployment = actor[1] if actor else (serve[1] if serve else None)
        if deployment is None or ":" not in deployment:
            continue  # not an engine replica (the ingress, the controller, a worker process)
        pid = _PID.search(stem)
        replica = serve[2] if serve and serve[1] == deployment else (f"pid {pid[1]}" if pid else stem)
        # the replica's own lines first, then its workers' files (their lines are also forwarded here)
        own = [text] + [
            "\n".join(files[by_pid[worker]])
            for worker in dict.fromkeys(_WORKER.findall(text))
            if worker in by_pid and by_pid[worker] != stem
        ]
        values: dict = {}
        for part in own:
            for key, value in figures(part).items():
                values.setdefault(key, value)
        found.append(EngineMemory(engine=f"{deployment} {replica}", role=_role(deployment), **values))
    return sorted(found, key=lambda e: ({"prefill": 0, "decode": 1}.get(e.role, 2), e.engine))
