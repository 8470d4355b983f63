"""How long the local cluster costs: the cold set-up (download + build of every Go tool from the Go module
proxy into an empty cache) and the warm run of the cluster tests (tests/cluster/, tools cached).

    .venv/bin/python scripts/bench_cluster_tools.py [--cold-cache DIR] [--skip-cold] [--runs N]

--cold-cache: build into DIR (default: a new temporary folder, removed afterwards), never the project's
.cluster-tools/; the warm runs use the project's cache (built first if missing). Prints one line per
figure; the warm figure is the median of --runs runs of `pytest tests/cluster`."""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from localcluster import tools

ROOT = Path(__file__).resolve().parent.parent


def download_bytes(cache: Path) -> int:
    """What the proxy sent: the module zips and go.mod files in the module cache's download folder."""
    return sum(
        p.stat().st_size
        for p in (cache / "gomod" / "cache" / "download").rglob("*")
        if p.is_file() and p.suffix in (".zip", ".mod")
    )


def cold(cache: Path) -> None:
    started = time.monotonic()
    for tool in tools.CONTROL_PLANE_TOOLS:
        record = tools.ensure(tool, cache=cache, progress=lambda line: print(f"  {line}", flush=True))
        print(f"  {tool.name} {record.version}: {record.seconds:.0f} s", flush=True)
    total = time.monotonic() - started
    print(
        f"cold set-up (download + build, {len(tools.CONTROL_PLANE_TOOLS)} tools): {total:.0f} s; "
        f"downloaded {download_bytes(cache) / 2**20:.0f} MiB; "
        f"build cache {sum(p.stat().st_size for p in (cache / 'gobuild').rglob('*') if p.is_file()) / 2**20:.0f} MiB"
    )
    try:
        tools.ensure(tools.KUBERAY_OPERATOR, cache=cache)
        print("kuberay-operator: built")
    except tools.ToolError as exc:
        print(f"kuberay-operator: {exc}")


def warm(runs: int) -> None:
    for tool in tools.CONTROL_PLANE_TOOLS:
        tools.ensure(tool)
    seconds = []
    for _ in range(runs):
        started = time.monotonic()
        subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/cluster"],
            cwd=ROOT,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        seconds.append(time.monotonic() - started)
    print(
        f"warm run of tests/cluster (tools cached): median {statistics.median(seconds):.1f} s of {runs} "
        f"({', '.join(f'{s:.1f}' for s in seconds)})"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cold-cache", type=Path)
    parser.add_argument("--skip-cold", action="store_true")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if not args.skip_cold:
        if args.cold_cache:
            cold(args.cold_cache)
        else:
            with tempfile.TemporaryDirectory(prefix="cluster-tools-cold-") as folder:
                cold(Path(folder))
                subprocess.run(
                    ["go", "clean", "-modcache"],
                    env=tools.go_environment(Path(folder)),
                    capture_output=True,
                    check=False,
                )
    warm(args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
