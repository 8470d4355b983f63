"""Issue #53's CUDA graph arms, engine by engine: each arm's engine alone on the stage GPU node's emulated budget (the
plan `ops rehearse --share-gpus --emulate-node` runs), one arm after another on this host's GPU. Per arm: vLLM's own
KV cache, graph and start-up lines (engine_memory.py), and the engine's first token, decode step and first-token
logprobs (engine_alone.py), the logprobs compared with the first arm's.

    python3 -m serving_lab.rehearse.graph_arms --stage dev --weights DIR --arms today,vllm-default@512 --out DIR

An arm is `today` (the stage's own graphs) or what `ops rehearse --cuda-graphs` takes: `vllm-default` or `breakable`,
either with `@N`, the largest batch in tokens captured as a graph (overrides.cuda_graph_arm). An arm named again
starts again on the compile caches the first start left: its warm start. Writes OUT/<stage>/graph-arms/<arm>.log
and .json and arms.json, and prints one row per arm. Exit 1 when an arm's engine did not start or answer."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clients.cli_options import OneLineParser, folder, number, output_folder
from config.schema import StageConfig
from config.stage_options import add_stage_options, load_stage

from . import engine_memory, floors, host, kv_profile, overrides
from .model_folder import missing_config

MOST_ARMS = 8


@dataclass(frozen=True)
class Arm:
    graphs: str  # "today" or one of overrides.CUDA_GRAPH_ARMS
    capture_tokens: int | None = None  # @N: compilation_config.max_cudagraph_capture_size
    start: int = 1  # 2 for the arm's second start in one command (its compile caches warm)

    @property
    def name(self) -> str:
        """As `ops rehearse --cuda-graphs` takes it (today: no such option)."""
        return self.graphs + (f"@{self.capture_tokens}" if self.capture_tokens else "")

    @property
    def label(self) -> str:
        return self.name if self.start == 1 else f"{self.name}.start{self.start}"


def parse_arms(text: str) -> list[Arm]:
    """An argparse type: ARM[,ARM...], each `today` or what `ops rehearse --cuda-graphs` takes."""
    names = [name.strip() for name in text.split(",")]
    if not 1 <= len(names) <= MOST_ARMS:
        raise argparse.ArgumentTypeError(f"{len(names)} arms (allowed: 1 to {MOST_ARMS}, comma-separated)")
    arms: list[Arm] = []
    for name in names:
        if name == "today":
            graphs, tokens = name, None
        else:
            try:
                graphs, tokens = overrides.cuda_graph_arm(name)
            except ValueError as exc:
                raise argparse.ArgumentTypeError(f"{exc}, or today") from None
        starts = sum(arm.graphs == graphs and arm.capture_tokens == tokens for arm in arms)
        arms.append(Arm(graphs, tokens, starts + 1))
    return arms


def arm_engine(cfg: StageConfig, gpu_host: host.Host, model: Path, arm: Arm) -> tuple[dict[str, Any], dict[str, str]]:
    """The arm's engine settings (`vllm.LLM`'s keyword arguments) and its environment, from the rehearsal's own
    colocated plan on the emulated budget: the engine PD's prefill and decode run, less the KV connector."""
    request = overrides.PlanRequest(
        mode="colocated",
        host=gpu_host,
        model_dir=model,
        real_weights=True,
        share_gpus=True,
        emulate_node=True,
        cuda_graphs=None if arm.graphs == "today" else arm.name,
    )
    plan = overrides.plan(cfg, request)
    (_path, llm), *_ = overrides.llm_configs(plan.serve_config)
    return kv_profile.engine_args(llm), {**plan.env, **llm.get("runtime_env", {}).get("env_vars", {})}


@dataclass(frozen=True)
class ArmRun:
    """Where one arm's engine runs and what bounds it."""

    out: Path
    environ: dict[str, str]
    timeout: float
    python: str = sys.executable


def run_arm(arm: Arm, settings: dict[str, Any], env: dict[str, str], run: ArmRun) -> dict[str, Any]:
    """Start the arm's engine alone, probe it, and return its row: vLLM's lines from its log and the probe's
    figures, or the error that stopped it."""
    log, result = run.out / f"{arm.label}.log", run.out / f"{arm.label}.json"
    row: dict[str, Any] = {"arm": arm.label, "settings": settings}
    code = kv_profile.start_alone(
        settings, log=log, env={**run.environ, **env}, timeout=run.timeout, python=run.python, result=result
    )
    text = log.read_text(errors="replace")
    row["vllm"] = engine_memory.figures(text)
    if code == 0 and result.is_file():
        return {**row, **json.loads(result.read_text())}
    why = f"not done within {run.timeout:g} s" if code is None else f"exit {code}: {kv_profile.last_error(text)}"
    return {**row, "error": f"{log}: {why}"}


def logprob_gap(mine: list[list[float]], theirs: list[list[float]]) -> float:
    """The largest |difference| of the first token's logprobs over the token ids both top lists hold (inf where
    they share none): near 0 where two prefills computed the same thing."""
    a, b = {int(t): lp for t, lp in mine}, {int(t): lp for t, lp in theirs}
    return max((abs(a[t] - b[t]) for t in a.keys() & b.keys()), default=math.inf)


def first_token_gaps(row: dict[str, Any], reference: dict[str, Any]) -> tuple[float, float]:
    """The largest gap of the arm's prompts against the reference arm's, one at a time, and of its own batch
    against its own prompts one at a time (the arm's noise between batch shapes)."""
    mine, theirs = row["first_tokens"], reference["first_tokens"]
    across = max(map(logprob_gap, mine["singly"], theirs["singly"]))
    within = max(map(logprob_gap, mine["batched"], mine["singly"]))
    return across, within


def _count(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _ms(seconds: float | None, floor: float | None = None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1000:.1f}" + (f" ({seconds / floor:.1f}x)" if floor else "")


def table(rows: list[dict[str, Any]], floor: Callable[[int], floors.Floors] | None) -> str:
    """One line per arm: KV tokens, graphs, start-up, the engine's first token and decode step (over their floors
    on this GPU where it has a peak in floors.py), and what its prefills computed against the first arm's."""
    header = "arm | KV tokens | graphs GiB/s | compile s | start s | first token 256 / 3500 / 16x256 ms | "
    lines = [header + "decode step 1 / 16 ms | first token's logprobs: max gap to the first arm / batched"]
    reference = next((row for row in rows if "medians" in row), None)
    for row in rows:
        vllm = row["vllm"]
        if "error" in row:
            lines.append(f"{row['arm']} | {_count(vllm.get('kv_cache_tokens'))} | failed: {row['error']}")
            continue
        assert reference is not None  # this row has medians, so some row does
        med = row["medians"]
        across, within = first_token_gaps(row, reference)
        short, long = row["probe"]["prompt_tokens"][:2]
        prefill = {n: floor(n).prefill_s if floor else None for n in (short, long)}
        step = floor(short).weight_read_s if floor else None
        compiled = "cached" if vllm.get("compile_cached") else vllm.get("compile_seconds", "-")
        lines.append(
            f"{row['arm']} | {_count(vllm.get('kv_cache_tokens'))} | {vllm.get('cuda_graph_gib', '-')}/"
            f"{vllm.get('cuda_graph_seconds', '-')} | {compiled} | {row['start_seconds']} | "
            f"{_ms(med[f'first_token_{short}'], prefill[short])} / {_ms(med[f'first_token_{long}'], prefill[long])} / "
            f"{_ms(med[f'first_token_16x{short}'])} | {_ms(med['decode_step_1'], step)} / "
            f"{_ms(med['decode_step_16'])} | {across:.3f} / {within:.3f}"
        )
    return "\n".join(lines)


def _floor(gpu_host: host.Host, model: Path, rows: list[dict[str, Any]]) -> Callable[[int], floors.Floors] | None:
    """Floors on this host's GPU for the weights vLLM loaded, or None without a peak or a loaded engine."""
    peak = floors.peak_of(gpu_host.gpus[0].name)
    loaded = next((row["vllm"]["weights_gib"] for row in rows if "weights_gib" in row["vllm"]), None)
    if peak is None or loaded is None:
        return None
    weights = floors.Model.of(model / "config.json", loaded)
    return lambda tokens: floors.Floors.of(peak, weights, tokens)


def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineParser(prog="python3 -m serving_lab.rehearse.graph_arms", description=__doc__.splitlines()[0])
    add_stage_options(parser)
    parser.add_argument("--weights", type=folder, required=True, help="the model folder each arm loads")
    parser.add_argument("--arms", type=parse_arms, required=True, help="ARM[,ARM...]: today, vllm-default[@N], "
                        "breakable[@N]; an arm named again is its warm start")  # fmt: skip
    parser.add_argument("--timeout", type=number(float, 60, 3600, "seconds"), default=600,
                        help="each arm's start and probe at most (default 600)")  # fmt: skip
    parser.add_argument("--out", type=output_folder, required=True, help="results under OUT/<stage>/graph-arms")
    args = parser.parse_args(argv)
    cfg = load_stage(args)
    if cfg is None:
        return 2
    if why := missing_config(args.weights):
        print(f"graph_arms: --weights: {why}", file=sys.stderr)
        return 2
    try:
        gpu_host = host.detect()
    except host.HostError as exc:
        print(f"graph_arms: {exc}", file=sys.stderr)
        return 1
    try:
        return measure_arms(cfg, args, gpu_host)
    except overrides.PlanError as exc:  # the stage cannot be planned on this host (an emulated budget, say)
        print(f"graph_arms: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # the arm's engine got the same signal and stopped; its log stays
        print("graph_arms: interrupted", file=sys.stderr)
        return 130


def measure_arms(cfg: StageConfig, args: Any, gpu_host: host.Host) -> int:
    """Each arm in turn; the table printed and arms.json written once all have run."""
    out = Path(args.out) / cfg.stage / "graph-arms"
    out.mkdir(parents=True, exist_ok=True)
    run, model, rows = ArmRun(out, dict(os.environ), args.timeout), Path(args.weights), []
    for arm in args.arms:
        print(f"graph_arms: {arm.label}: its engine alone on the emulated budget ({out / arm.label}.log)", flush=True)
        rows.append(run_arm(arm, *arm_engine(cfg, gpu_host, model, arm), run))
    print(table(rows, _floor(gpu_host, model, rows)))
    (out / "arms.json").write_text(json.dumps({"host": gpu_host.describe(), "arms": rows}, indent=1) + "\n")
    return 1 if any("error" in row for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
