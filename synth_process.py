"""How the synth process starts and ends: measured savings, no change to what it writes.

`app.py` uses all three; `scripts/bench_synth.py` runs its second reference (an empty CDK app tuned the
same way) with them too, so the tuning can be told apart from the app's own cost. Measured on 2 cores
with `scripts/bench_synth.py` and a phase timer (docs/DECISIONS.md, "Synth speed").

- `configure_environment()`: before aws_cdk starts jsii's node process, a larger V8 young generation
  (constructs are many short-lived objects: about 10 % of synth time), and no discovery of pydantic
  plugins, which the stage schema does not use (a scan of every installed package, ~20 ms). Values the
  caller's environment sets win.
- `imports_without_gc()`: the CDK modules create hundreds of thousands of objects, none of them garbage;
  Python's cycle collector would traverse them all several times while they load (~0.1 s). Collection
  is paused while they load, then they are frozen out of later collections (`gc.freeze`).
- `exit_now(code)`: ends the process without freeing those objects one by one (~0.2 s), after the exit
  handlers (jsii stops its node process and removes its temporary files) and a flush of stdout/stderr.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

NODE_FLAGS = "--max-semi-space-size=64"


def configure_environment() -> None:
    if NODE_FLAGS not in os.environ.get("NODE_OPTIONS", ""):
        os.environ["NODE_OPTIONS"] = f"{os.environ.get('NODE_OPTIONS', '')} {NODE_FLAGS}".strip()
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")


@contextmanager
def imports_without_gc() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()


def exit_now(code: int) -> NoReturn:
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
