"""python -m localcluster build: build (or find cached) the local cluster's Go tools; one line and exit 2
when Go is missing or the Go module proxy refuses a pinned module. scripts/setup.sh --dev runs it."""

from __future__ import annotations

import sys

from . import tools


def main(argv: list[str]) -> int:
    if argv in ([], ["-h"], ["--help"]) or argv[0] != "build":
        print(__doc__.strip())
        return 0 if argv in (["-h"], ["--help"]) else 2
    try:
        for tool in tools.CONTROL_PLANE_TOOLS:
            record = tools.ensure(tool, progress=lambda line: print(f"setup: {line}", flush=True))
            if record.built:
                print(f"setup: built {tool.name} {record.version} in {record.seconds:.0f} s", flush=True)
    except tools.ToolError as exc:
        print(f"setup: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
