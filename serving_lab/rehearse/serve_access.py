"""Ray Serve's access log: each replica logs one line per request it handled, with the request's id, which every
hop of one request shares (the client's X-Request-Id: ray@2.58.0 ray/serve/_private/proxy.py, and handle calls
inherit it: ray/serve/_private/default_impl.py get_request_metadata). Serve logs them to the replica's stderr
(RAY_SERVE_LOG_TO_STDERR, on by default), so they are in the workers' logs the rehearsal reads
(ray_cluster.worker_logs), e.g. from an H200 (evidence/2026-12-01-h200-tuned/runs/tuned-pd-workers.txt):

  INFO 2026-12-01 12:35:21,875 llm_Prefill:qwen3_5-9b qah0pe1k ffafc507-... -- CALL chat OK 122.2ms

Prefix: ServeFormatter.COMPONENT_LOG_FMT and SERVE_LOG_RECORD_FORMAT (ray/serve/_private/logging_utils.py,
constants.py), the component being `<app>_<deployment>` (replica.py); message: access_log_msg (logging_utils.py),
a client address first with RAY_SERVE_LOG_CLIENT_ADDRESS. The latency covers the replica's handler, a stream to its
end (replica.py _handle_errors_and_metrics), not the router's queue before it; the time is when the line was logged,
on the host's clock at millisecond resolution, so a hop started at its time less its latency."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

LINE = re.compile(
    r"^[A-Z]+ (?P<at>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) (?P<component>\S+) \S+ (?P<request_id>\S+) -- "
    r"(?:\S+ )?[A-Z]+ \S+ \S+ (?P<ms>\d+(?:\.\d+)?)ms$"
)
# Deployment names of Ray Serve LLM: "Prefill:<model>" and "Decode:<model>" (serving_patterns/prefill_decode/
# builder.py name_prefix), "LLMServer:<model>" (core/server/builder.py: the class's name), and the ingress.
ROLES = {"Prefill": "prefill", "Decode": "decode", "LLMServer": "engine", "OpenAiIngress": "ingress"}


@dataclass(frozen=True)
class Hop:
    """One replica's handling of one request: when it ended and how long it took (seconds)."""

    role: str
    end: datetime
    seconds: float

    @property
    def start(self) -> datetime:
        return self.end - timedelta(seconds=self.seconds)


def hops(logs: Mapping[str, str], app: str, ids: Iterable[str]) -> dict[str, dict[str, Hop]]:
    """The access lines of application `app` for the requests `ids`: {request id: {role: its first hop}}."""
    wanted = set(ids)
    found: dict[str, dict[str, Hop]] = {}
    for text in logs.values():
        for line in text.splitlines():
            match = LINE.match(line.strip())
            if not match or match["request_id"] not in wanted or not match["component"].startswith(f"{app}_"):
                continue
            deployment = match["component"].removeprefix(f"{app}_").partition(":")[0]
            role = ROLES.get(deployment, deployment)
            end = datetime.strptime(match["at"], "%Y-%m-%d %H:%M:%S,%f")
            found.setdefault(match["request_id"], {}).setdefault(role, Hop(role, end, float(match["ms"]) / 1000))
    return found


def figures(request: Mapping[str, Hop]) -> dict[str, float]:
    """One request's Serve figures: each hop's handler time (`<role>_s`) and, with the ingress's line, when each
    other hop started after the ingress's (`<role>_start_s`)."""
    out = {f"{role}_s": hop.seconds for role, hop in request.items()}
    ingress = request.get("ingress")
    if ingress is not None:
        for role, hop in request.items():
            if role != "ingress":
                out[f"{role}_start_s"] = round((hop.start - ingress.start).total_seconds(), 4)
    return out


def serve_figures(logs: Mapping[str, str], app: str, ids: Iterable[str]) -> dict[str, dict[str, float]]:
    """{request id: its Serve figures} from the workers' logs."""
    return {request_id: figures(request) for request_id, request in hops(logs, app, ids).items()}
