"""python -m localcluster build: build (or find cached) the local cluster's Go programs and download KubeRay's
chart (tools/go/ pins them) into Go's own caches; one line and exit 2 when Go is missing or the Go module proxy
refuses a pinned module. scripts/setup.sh --cluster (and --dev) runs it, beside its other installs; a signal
ends the go command it runs (compile and link too) and exits 128 + the signal."""

from __future__ import annotations

import sys

from clients.signals import EVERY, Terminated, terminating

from . import tools


def main(argv: list[str]) -> int:
    if argv in ([], ["-h"], ["--help"]) or argv[0] != "build":
        print(__doc__.strip())
        return 0 if argv in (["-h"], ["--help"]) else 2
    try:
        with terminating(signals=EVERY):
            build()
    except Terminated as exc:
        print(f"setup: the Go build stopped by {exc}; the go command it ran is ended", file=sys.stderr)
        return exc.exit_code
    except tools.ToolError as exc:
        print(f"setup: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a wrapper module's go.mod unreadable, a cache folder not writable
        print(f"setup: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    return 0


def build() -> None:
    caches = tools.default_caches()
    for tool in tools.ALL_TOOLS:
        record = tools.ensure(tool, caches=caches, progress=lambda line: print(f"setup: {line}", flush=True))
        if record.built:
            print(f"setup: built {tool.name} {record.version} in {record.seconds:.0f} s", flush=True)
    for source in tools.MODULE_SOURCES:
        tools.module_dir(source, caches)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
