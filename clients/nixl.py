"""Read NIXL's log lines and say which transport the KV cache really uses.

NIXL's libfabric plugin picks its provider itself (cxi, efa, tcp, sockets). Without a usable EFA device
it runs over `tcp` without an error, and `Backend LIBFABRIC was instantiated` is printed either way.
Only `Created <N> rails using provider=efa` (logged at NIXL_LOG_LEVEL=INFO) proves EFA.

A stage without EFA (gpu_nodegroup.efa: false) expects no EFA: NIXL runs over TCP, through UCX when
serving.kv_backend is UCX, else through libfabric's tcp (or sockets) provider. `expected_transport` says
which, and `classify(text, expected)` judges the logs against it.
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
Transport = Literal["efa", "tcp", "ucx"]  # what a stage expects NIXL to use
# The verdicts that pass for each expected transport. Without EFA, LIBFABRIC without its provider line
# passes: the line is needed to prove EFA, and there is no EFA to prove.
PASSING: dict[str, tuple[str, ...]] = {"efa": ("efa",), "tcp": ("tcp", "no-provider-line"), "ucx": ("ucx",)}
OPERATIONS_DOC = "see docs/OPERATIONS.md: what each NIXL failure means"


@dataclass(frozen=True)
class NixlFinding:
    verdict: Verdict
    detail: str
    expected: Transport = "efa"

    @property
    def ok(self) -> bool:
        return self.verdict in PASSING[self.expected]


def expected_transport(efa: bool, kv_backend: str) -> Transport:
    """What NIXL should use on a stage: on EFA nodes LIBFABRIC on provider=efa (the config refuses UCX on
    EFA); without EFA, TCP: UCX when serving.kv_backend is UCX, else libfabric's tcp provider."""
    if efa:
        return "efa"
    return "ucx" if kv_backend == "UCX" else "tcp"


def classify(text: str, expected: Transport = "efa") -> NixlFinding:
    """The verdict for one worker's logs, judged against the transport the stage expects (default EFA);
    any sign of a fallback (or of another backend than the stage's) wins over a healthy line."""
    finding = _read(text)
    return finding if expected == "efa" else _without_efa(text, finding, expected)


def advice(finding: NixlFinding) -> str:
    """What to do about a failed finding (the `->` line of verify's check)."""
    if finding.ok:
        return ""
    if finding.expected == "efa":
        return OPERATIONS_DOC
    backend = "UCX" if finding.expected == "ucx" else "LIBFABRIC"
    if finding.verdict == "no-nixl":
        return (
            "wait until the prefill and decode engines have started (the model loads first) and run verify "
            "again; if it persists, read the replicas' logs in the Ray dashboard (Serve) for why the "
            "NixlConnector did not start"
        )
    if finding.verdict == "missing-plugin":
        return f"use the DLC image (unset serving.image), or an image whose NIXL has the {backend} plugin"
    if finding.verdict == "efa":
        return (
            "the stage file says gpu_nodegroup.efa: false but the pods have EFA devices: deploy the stage "
            "(cdk deploy) so the cluster matches it"
        )
    return (
        f"the running engines do not use serving.kv_backend {backend}: deploy the stage (cdk deploy) so "
        f"the RayService's kv_transfer_config names backends [{backend}]"
    )


def _without_efa(text: str, found: NixlFinding, expected: Transport) -> NixlFinding:
    """`found` (the EFA reading of the logs) restated for a stage without EFA."""
    backend = "UCX" if expected == "ucx" else "LIBFABRIC"
    as_expected = "as expected without EFA"
    if found.verdict == "missing-plugin":
        # Only a missing plugin of the stage's own backend matters once that backend was instantiated.
        lines = text.splitlines()
        missing = [line for line in lines if MISSING_PLUGIN in line]
        if (UCX if expected == "ucx" else LIBFABRIC) not in text or any(backend in line for line in missing):
            return NixlFinding(found.verdict, found.detail, expected)
        text = "\n".join(line for line in lines if MISSING_PLUGIN not in line)
        found = _read(text)
    verdict = found.verdict
    if verdict == "no-nixl":
        return NixlFinding(
            verdict,
            f"no NIXL lines in the worker's logs: the KV connector has not started "
            f"(with efa: false it should start {backend}, over TCP)",
            expected,
        )
    if expected == "ucx":
        if verdict == "ucx":
            return NixlFinding(verdict, f"UCX, {as_expected}", expected)
        return NixlFinding(verdict, "NIXL instantiated the LIBFABRIC backend, but serving.kv_backend is UCX", expected)
    if verdict == "ucx":
        return NixlFinding(verdict, "NIXL instantiated the UCX backend, but serving.kv_backend is LIBFABRIC", expected)
    providers = [(int(count), provider) for count, provider in RAILS.findall(text)]
    if verdict == "efa":
        return NixlFinding(verdict, "LIBFABRIC on provider=efa, but gpu_nodegroup.efa is false", expected)
    if verdict == "tcp":
        slow = [(count, provider) for count, provider in providers if provider != "efa"]
        rails = sum(count for count, _ in slow)
        return NixlFinding(verdict, f"LIBFABRIC on provider={slow[0][1]}, {as_expected} ({rails} rails)", expected)
    return NixlFinding(
        verdict, f"LIBFABRIC, {as_expected} (its provider is not logged: NIXL_LOG_LEVEL is not INFO)", expected
    )


def _read(text: str) -> NixlFinding:
    """The verdict for one worker's logs on an EFA stage; any sign of a fallback wins over a healthy line."""
    providers = [(int(count), provider) for count, provider in RAILS.findall(text)]
    slow = [p for _, p in providers if p != "efa"]
    if MISSING_PLUGIN in text:
        line = next(l for l in text.splitlines() if MISSING_PLUGIN in l).strip()
        return NixlFinding("missing-plugin", f"a NIXL plugin is missing: {line[:160]}")
    if UCX in text:
        return NixlFinding(
            "ucx", "NIXL instantiated the UCX backend: on EFA it runs at TCP speed (set serving.kv_backend: LIBFABRIC)"
        )
    if slow:
        return NixlFinding(
            "tcp",
            f"libfabric runs on provider={slow[0]}, not efa: no usable EFA device in "
            "the pod (check vpc.amazonaws.com/efa requests and the EFA device plugin)",
        )
    if providers:
        rails = sum(count for count, _ in providers)
        return NixlFinding("efa", f"LIBFABRIC on provider=efa ({rails} rails)")
    if LIBFABRIC in text:
        return NixlFinding(
            "no-provider-line",
            "LIBFABRIC was instantiated but no 'Created N rails using "
            "provider=' line: is NIXL_LOG_LEVEL=INFO set? EFA is not proven",
        )
    return NixlFinding("no-nixl", "no NIXL lines in the worker's logs (the KV connector has not started)")
