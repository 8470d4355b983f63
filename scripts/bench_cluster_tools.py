"""How long the local cluster costs: the cold set-up (download + build of every Go program from the Go module
proxy into empty caches) and the warm run of the cluster tests (tests/cluster/, programs cached).

    .venv/bin/python scripts/bench_cluster_tools.py [--cold-cache DIR] [--skip-cold] [--runs N]

--cold-cache: build into DIR (default: a new temporary folder, removed afterwards), never Go's own caches;
the warm runs use Go's own caches and the binaries kept beside them (built first if missing). Prints one line
per figure; the warm figure is the median of --runs runs of `pytest tests/cluster`."""

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
        f"warm run of tests/cluster (programs cached): median {statistics.median(seconds):.1f} s of {runs} "
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
            cold(tools.GoCaches.under(args.cold_cache))
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
