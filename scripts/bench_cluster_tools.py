"""How long the local cluster costs: the cold set-up (download + build of every Go program from the Go module
proxy into empty caches) and the warm run of the cluster tests (tests/cluster/, programs cached).

    .venv/bin/python scripts/bench_cluster_tools.py [--cold-cache DIR] [--skip-cold] [--runs N]
    .venv/bin/python scripts/bench_cluster_tools.py --gogc-compare TOOL [--runs N]
    .venv/bin/python scripts/bench_cluster_tools.py --inlining-compare TOOL [--runs N]

--cold-cache: build into DIR (default: a new temporary folder, removed afterwards), never Go's own caches;
the warm runs use Go's own caches and the binaries kept beside them (built first if missing). Prints one line
per figure; the warm figure is the median of --runs runs of `pytest tests/cluster` (wall and CPU seconds).

--gogc-compare: TOOL (etcd, kubernetes, kwok, kuberay-operator) compiled from an empty build cache --runs times
with Go's default GOGC=100 and with the set-up's, alternately (modules from Go's own cache): the median wall and
CPU seconds of each, their ratio, and whether the binaries were the same.

--inlining-compare: the same, with the compiler's inlining (the set-up's flags less -l) and without it (the
set-up's); the binaries differ. What the binaries then cost to run: `pytest tests/cluster` on two trees."""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from clients.cli_options import number, output_folder
from localcluster import tools

ROOT = Path(__file__).resolve().parent.parent


def _size(folder: Path, suffixes: tuple[str, ...] = ()) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and (not suffixes or p.suffix in suffixes))


def cold(caches: tools.GoCaches) -> None:
    started = time.monotonic()
    for tool in tools.ALL_TOOLS:
        record = tools.ensure(tool, caches=caches, progress=lambda line: print(f"  {line}", flush=True))
        print(f"  {tool.name} {record.version}: {record.seconds:.0f} s", flush=True)
    for source in tools.MODULE_SOURCES:
        tools.module_dir(source, caches)
    total = time.monotonic() - started
    print(
        f"cold set-up (download + build, {len(tools.ALL_TOOLS)} programs): {total:.0f} s; downloaded "
        f"{_size(caches.gomodcache / 'cache' / 'download', ('.zip', '.mod')) / 2**20:.0f} MiB; build cache "
        f"{_size(caches.gocache) / 2**20:.0f} MiB; binaries {_size(caches.binaries) / 2**20:.0f} MiB"
    )


def warm(runs: int) -> None:
    caches = tools.default_caches()
    for tool in tools.ALL_TOOLS:
        tools.ensure(tool, caches=caches)
    seconds, cpus = [], []
    for _ in range(runs):
        started, before = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/cluster"],
            cwd=ROOT,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        seconds.append(time.monotonic() - started)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    print(
        f"warm run of tests/cluster (programs cached): median {statistics.median(seconds):.1f} s and "
        f"{statistics.median(cpus):.0f} CPU-s of {runs} ({', '.join(f'{s:.1f}' for s in seconds)} s)"
    )


@dataclass(frozen=True)
class Variant:
    """One way to build a tool: the compiler flags it is built with and the go command's GOGC."""

    label: str
    tool: tools.GoTool
    gogc: str


def _compile(variant: Variant, folder: Path) -> tuple[float, float, str]:
    """(wall s, CPU s, digest of the binaries): one build of the variant into an empty build cache under
    `folder`."""
    caches = tools.GoCaches(tools.default_caches().gomodcache, folder / "gobuild", folder / "bin")
    os.environ["GOGC"] = variant.gogc
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    record = tools.ensure(variant.tool, caches=caches)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    digest = hashlib.sha256(b"".join(path.read_bytes() for path in sorted(record.binaries.values())))
    return record.seconds, cpu, digest.hexdigest()[:16]


def compare(name: str, baseline: Variant, setup: Variant, runs: int) -> None:
    """Both variants compiled from an empty build cache `runs` times, alternately; the medians and ratio."""
    figures: dict[str, list[tuple[float, float, str]]] = {baseline.label: [], setup.label: []}
    for run in range(runs):
        for variant in (baseline, setup):
            with tempfile.TemporaryDirectory(prefix="build-compare-") as folder:
                figures[variant.label].append(_compile(variant, Path(folder)))
            wall, cpu, _ = figures[variant.label][-1]
            print(f"  run {run + 1}, {variant.label}: {wall:.1f} s, {cpu:.0f} CPU-s", flush=True)
    walls = {label: statistics.median(r[0] for r in results) for label, results in figures.items()}
    cpus = {label: statistics.median(r[1] for r in results) for label, results in figures.items()}
    same = len({r[2] for results in figures.values() for r in results}) == 1
    print(
        f"{name} from an empty build cache, median of {runs}: {baseline.label} {walls[baseline.label]:.1f} s, "
        f"{cpus[baseline.label]:.0f} CPU-s; {setup.label} {walls[setup.label]:.1f} s, {cpus[setup.label]:.0f} "
        f"CPU-s; wall ratio {walls[setup.label] / walls[baseline.label]:.2f}; binaries {'the same' if same else 'different'}"
    )


def _tool(name: str) -> tools.GoTool:
    return next(tool for tool in tools.ALL_TOOLS if tool.name == name)


def gogc_compare(name: str, runs: int) -> None:
    tool = _tool(name)
    baseline = Variant("GOGC=100", tool, "100")
    compare(name, baseline, Variant(f"GOGC={tools.COMPILER_GOGC}", tool, tools.COMPILER_GOGC), runs)


def inlining_compare(name: str, runs: int) -> None:
    tool = _tool(name)
    flags = tool.compiler_flags.split()
    if "-l" not in flags:  # else both variants would be the same build, and the ratio a ratio of noise
        sys.exit(f"bench_cluster_tools: the set-up's compiler flags ({tool.compiler_flags}) have no -l to drop")
    inlined = dataclasses.replace(tool, compiler_flags=" ".join(flag for flag in flags if flag != "-l"))
    baseline = Variant(f"inlining ({inlined.compiler_flags})", inlined, tools.COMPILER_GOGC)
    compare(name, baseline, Variant(f"set-up's ({tool.compiler_flags})", tool, tools.COMPILER_GOGC), runs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cold-cache", type=output_folder)
    parser.add_argument("--skip-cold", action="store_true")
    parser.add_argument("--runs", type=number(int, 1, 100), default=3)
    parser.add_argument("--gogc-compare", choices=[tool.name for tool in tools.ALL_TOOLS])
    parser.add_argument("--inlining-compare", choices=[tool.name for tool in tools.ALL_TOOLS])
    args = parser.parse_args()
    if args.gogc_compare:
        gogc_compare(args.gogc_compare, args.runs)
        return 0
    if args.inlining_compare:
        inlining_compare(args.inlining_compare, args.runs)
        return 0
    if not args.skip_cold:
        if args.cold_cache:
            cold(tools.GoCaches.under(Path(args.cold_cache)))
        else:
            with tempfile.TemporaryDirectory(prefix="cluster-tools-cold-") as folder:
                caches = tools.GoCaches.under(Path(folder))
                cold(caches)
                # the module cache is read-only by design: Go's own command removes it
                subprocess.run(["go", "clean", "-modcache"], env=caches.environment(), capture_output=True, check=False)
    warm(args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
