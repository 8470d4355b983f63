"""Read NIXL's log lines and say which transport the KV cache really uses.

NIXL's libfabric plugin picks its provider itself (cxi, efa, tcp, sockets). Without a usable EFA device
it runs over `tcp` without an error, and `Backend LIBFABRIC was instantiated` is printed either way.
Only `Created <N> rails using provider=efa` (logged at NIXL_LOG_LEVEL=INFO) proves EFA.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

RAILS = re.compile(r"Created (\d+) rails using provider=([A-Za-z0-9_;+-]+)")
LIBFABRIC = "Backend LIBFABRIC was instantiated"
UCX = "Backend UCX was instantiated"
MISSING_PLUGIN = "Skipping backend registration"

Verdict = Literal["efa", "tcp", "ucx", "missing-plugin", "no-provider-line", "no-nixl"]


@dataclass(frozen=True)
class NixlFinding:
    verdict: Verdict
    detail: str

    @property
    def ok(self) -> bool:
        return self.verdict == "efa"


def classify(text: str) -> NixlFinding:
    """The verdict for one worker's logs; any sign of a fallback wins over a healthy line."""
    providers = [(int(count), provider) for count, provider in RAILS.findall(text)]
    slow = [p for _, p in providers if p != "efa"]
    if MISSING_PLUGIN in text:
        line = next(l for l in text.splitlines() if MISSING_PLUGIN in l).strip()
        return NixlFinding("missing-plugin", f"a NIXL plugin is missing: {line[:160]}")
    if UCX in text:
        return NixlFinding("ucx", "NIXL instantiated the UCX backend: on EFA it runs at TCP speed "
                                  "(set serving.kv_backend: LIBFABRIC)")
    if slow:
        return NixlFinding("tcp", f"libfabric runs on provider={slow[0]}, not efa: no usable EFA device in "
                                  "the pod (check vpc.amazonaws.com/efa requests and the EFA device plugin)")
    if providers:
        rails = sum(count for count, _ in providers)
        return NixlFinding("efa", f"LIBFABRIC on provider=efa ({rails} rails)")
    if LIBFABRIC in text:
        return NixlFinding("no-provider-line", "LIBFABRIC was instantiated but no 'Created N rails using "
                                               "provider=' line: is NIXL_LOG_LEVEL=INFO set? EFA is not proven")
    return NixlFinding("no-nixl", "no NIXL lines in the worker's logs (the KV connector has not started)")
