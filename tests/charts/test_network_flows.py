"""The flow matrix: every connection the running system needs, and the ones nobody needs, evaluated
against the NetworkPolicies each stage really synthesizes (netpol.py implements the API's semantics;
kuberay_pods.py gives the pods the labels KubeRay sets).

Each needed flow names the file that makes it happen (KubeRay 1.6.2, Ray 2.58.0, vLLM 0.26.0, NIXL
1.3). A needed flow that is refused fails the test (the operator's Serve health check did, before this
matrix); an unneeded flow that is admitted fails it too.
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass

import pytest

from charts.serve_config import NIXL_PORT_BASE
from config.topology import (
    CLOUDWATCH_NAMESPACE,
    KUBERAY_NAMESPACE,
    KUBERAY_RELEASE,
    NIXL_METRICS_PORT,
    RAY_SCRAPER_POD_LABELS,
)

from .kuberay_pods import HEAD_GROUP, kuberay_pod, operator_pod
from .netpol import Cluster, External, Node, Pod

OTHER_NAMESPACE = "default"
RAY_WORKER_PORTS = (10002, 19999)  # ray/scripts/scripts.py: --min-worker-port / --max-worker-port defaults
RANDOM_RAY_PORT = 41234  # raylet, object manager, agent gRPC: random unless pinned (ray/_private/node.py)
DIRECT_INGRESS_PORTS = (30000, 31000)  # Serve's direct ingress (HAProxy's backends): one port per ingress replica
UCX_EPHEMERAL = 45678  # UCX TCP listens on OS-chosen ports (UCX_TCP_PORT_RANGE default 0)


@dataclass(frozen=True)
class Flow:
    source: str
    destination: str
    port: int
    needed: bool
    why: str
    stages: tuple[str, ...] = ("dev", "prod")

    @property
    def id(self) -> str:
        verdict = "admit" if self.needed else "refuse"
        return f"{verdict}:{self.source}->{self.destination}:{self.port}"


FLOWS = [
    # -- the KubeRay operator -------------------------------------------------------------------
    Flow(
        "operator",
        "head",
        8265,
        True,
        "RayService controller reads and submits the Serve config: "
        "GET/PUT /api/serve/applications/ (kuberay ray-operator/controllers/ray/utils/dashboardclient/"
        "dashboard_httpclient.go, via FetchHeadServiceURL in utils/util.go: the headless head service)",
    ),
    Flow(
        "operator",
        "head",
        8000,
        True,
        "Serve health check GET http://<head pod IP>:8000/-/healthz "
        "(utils/httpproxy_httpclient.go, called by updateHeadPodServeLabel in rayservice_controller.go); "
        "only a head that answers gets ray.io/serve=true, which <name>-serve-svc selects (common/service.go)",
    ),
    Flow(
        "operator",
        "head",
        52365,
        False,
        "not used by the operator in 1.6.2: 52365 only appears in the kubelet probes common/pod.go builds",
    ),
    Flow("operator", "head", 6379, False, "the operator never dials the GCS (redis cleanup is a Job pod)"),
    Flow("operator", "worker-0", 8000, False, "the operator probes the head only (updateHeadPodServeLabel)"),
    Flow("operator", "worker-0", 52365, False, "worker readiness is an exec probe on localhost (common/pod.go)"),
    # -- the kubelet ------------------------------------------------------------------------------
    Flow(
        "head-node",
        "head",
        52365,
        True,
        "kubelet HTTP probe GET /api/healthz on the dashboard agent for "
        "rayVersion >= 2.53 (common/pod.go, supportsUnifiedHealthCheck); always admitted from the pod's node",
    ),
    Flow("gpu-node-0", "worker-0", 52365, True, "kubelet probes of the worker (common/pod.go)"),
    Flow("gpu-node-0", "head", 52365, False, "another node is not the head's node"),
    # -- Ray between its own pods -----------------------------------------------------------------
    Flow(
        "worker-0",
        "head",
        6379,
        True,
        "workers join the GCS: the init container's `ray health-check "
        "--address <head>:6379` (common/pod.go) and the raylet (ray/_private/ray_constants.py DEFAULT_PORT)",
    ),
    Flow(
        "head",
        "worker-0",
        RANDOM_RAY_PORT,
        True,
        "GCS -> raylet and the dashboard -> agents on random "
        "ports (ray/scripts/scripts.py --node-manager-port default 0; ray/_private/node.py)",
    ),
    Flow(
        "head",
        "worker-0",
        RAY_WORKER_PORTS[0],
        True,
        "actor calls: the Serve proxy and controller on the "
        "head -> the replicas (core worker gRPC, --min-worker-port 10002)",
    ),
    Flow(
        "worker-1",
        "worker-0",
        RAY_WORKER_PORTS[1],
        True,
        "decode replica -> prefill replica: the PD "
        "server's DeploymentHandle calls (ray/llm/.../prefill_decode/pd_server.py), --max-worker-port 19999",
    ),
    Flow(
        "worker-0", "worker-1", RANDOM_RAY_PORT, True, "object transfers between raylets (object manager port, random)"
    ),
    Flow(
        "head",
        "worker-0",
        DIRECT_INGRESS_PORTS[0],
        True,
        "serving.serve_ingress haproxy: HAProxy on the head -> the ingress replica's own HTTP server "
        "(ray/serve/_private/constants.py RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT 30000, MAX 31000)",
    ),
    Flow(
        "worker-0",
        "head",
        52365,
        True,
        "agents report to each other and the head reads their logs (dashboard-agent-listen-port, set by KubeRay)",
    ),
    Flow(
        "worker-1",
        "worker-0",
        NIXL_PORT_BASE["prefill"],
        True,
        "NIXL side channel: decode's ZMQ REQ -> "
        "prefill's ROUTER (vllm/distributed/kv_transfer/kv_connector/v1/nixl/base_worker.py, pull "
        "connector); port = 20000 + replica rank x tp (ray/llm/_internal/serve/engines/vllm/kv_transfer/nixl.py)",
    ),
    Flow(
        "worker-0",
        "worker-1",
        NIXL_PORT_BASE["decode"],
        True,
        "decode's side-channel listener, 22000 + rank "
        "(serving_patterns/prefill_decode/builder.py sets the base; the push connector dials it)",
    ),
    Flow(
        "worker-1",
        "worker-0",
        UCX_EPHEMERAL,
        True,
        "KV data over NIXL's UCX backend (TCP transport: "
        "OS-chosen ports); over LIBFABRIC/EFA the data bypasses the kernel and the EFA security group governs it",
    ),
    Flow(
        "worker-0",
        "head",
        8080,
        True,
        "Ray pods read each other's metrics agents (metrics-export-port 8080, set by KubeRay)",
    ),
    # -- the metrics scraper (observability on in both stages) ----------------------------------
    Flow(
        "scraper",
        "head",
        8080,
        True,
        "the CloudWatch agent `ray-metrics-scraper` (stacks/observability.py) "
        "scrapes the `metrics` port KubeRay adds to every Ray pod (common/pod.go, --metrics-export-port=8080): "
        "Ray's, Serve's and vLLM's series (vllm/v1/metrics/ray_wrappers.py)",
    ),
    Flow("scraper", "worker-0", 8080, True, "the engines' metrics are exported by the workers' Ray"),
    Flow(
        "scraper",
        "worker-0",
        NIXL_METRICS_PORT,
        True,
        "NIXL's own exporter on the PD workers (charts/worker_env.py: NIXL_TELEMETRY_PROMETHEUS_PORT, "
        "ai-dynamo/nixl src/plugins/telemetry/prometheus/README.md), scrape job `nixl`",
    ),
    Flow("scraper", "head", NIXL_METRICS_PORT, False, "the head runs no engine, so no NIXL exporter"),
    Flow("scraper", "head", 8265, False, "the scraper needs the metrics port only: not the dashboard"),
    Flow("scraper", "head", 8000, False, "nor Serve"),
    Flow("scraper", "head", 6379, False, "nor the GCS"),
    Flow("scraper", "worker-0", NIXL_PORT_BASE["prefill"], False, "nor NIXL"),
    Flow(
        "cloudwatch-daemon",
        "worker-0",
        8080,
        False,
        "another pod of the add-on's namespace (the node agent, Fluent Bit) is not the scraper",
    ),
    Flow("spoofed-scraper", "worker-0", 8080, False, "the scraper's labels in another namespace are refused"),
    # -- clients and the API server -------------------------------------------------------------
    Flow(
        "client",
        "head",
        8000,
        True,
        "client namespaces -> <name>-serve-svc:8000, which selects the head "
        "and workers with ray.io/serve=true (common/service.go)",
        ("prod",),
    ),
    Flow(
        "client",
        "worker-0",
        8000,
        True,
        "Serve proxies run on every node with a replica (ray/serve/config.py ProxyLocation.EveryNode)",
        ("prod",),
    ),
    Flow("client", "head", 8265, False, "clients never reach the dashboard (it can run jobs)", ("prod",)),
    Flow("client", "head", 6379, False, "clients never reach the GCS", ("prod",)),
    Flow("client", "worker-0", NIXL_PORT_BASE["prefill"], False, "clients never reach NIXL", ("prod",)),
    Flow("client", "worker-0", 8080, False, "clients never reach the metrics port", ("prod",)),
    Flow(
        "api-proxy",
        "head",
        8265,
        True,
        "`ops verify` reads the dashboard through the API server's service "
        "proxy (ops/verify.py), from the control-plane subnets' ENIs",
    ),
    Flow("api-proxy", "head", 8000, True, "`ops verify` calls /v1 through services/proxy on the serve service"),
    Flow("api-proxy", "worker-0", 8000, True, "the serve service's endpoints include the workers"),
    Flow(
        "api-proxy",
        "worker-0",
        NIXL_METRICS_PORT,
        True,
        "`ops verify`'s rate check reads NIXL's exporter through the API server's pod proxy "
        "(/api/v1/namespaces/NS/pods/POD:PORT/proxy/metrics, ops/verify_rate.py)",
    ),
    Flow("api-proxy", "head", NIXL_METRICS_PORT, False, "not on the head, which runs no engine"),
    Flow("api-proxy", "worker-0", 8080, False, "nor Ray's metrics port: verify reads NIXL's exporter only"),
    Flow("api-proxy", "head", 6379, False, "the API server never needs the GCS"),
    Flow("api-proxy", "worker-0", NIXL_PORT_BASE["prefill"], False, "nor NIXL"),
    # -- everybody else ---------------------------------------------------------------------------
    Flow("other-namespace", "head", 6379, False, "another namespace never reaches the GCS"),
    Flow("other-namespace", "head", 8265, False, "nor the dashboard"),
    Flow("other-namespace", "head", 8000, False, "nor Serve, unless listed in client_namespaces"),
    Flow("other-namespace", "worker-0", NIXL_PORT_BASE["prefill"], False, "nor the prefill side channel"),
    Flow("other-namespace", "worker-1", NIXL_PORT_BASE["decode"], False, "nor the decode side channel"),
    Flow("other-namespace", "worker-0", 8080, False, "nor the metrics port"),
    Flow("other-namespace", "worker-0", NIXL_METRICS_PORT, False, "nor NIXL's exporter"),
    Flow("client", "worker-0", NIXL_METRICS_PORT, False, "clients never reach NIXL's exporter", ("prod",)),
    Flow(
        "spoofed-labels",
        "head",
        6379,
        False,
        "a pod of another namespace carrying the Ray pods' labels is "
        "still refused (a podSelector alone means the policy's own namespace)",
    ),
    Flow("stray-pod", "head", 6379, False, "a pod in the inference namespace without the Ray labels"),
    Flow("stray-pod", "worker-0", NIXL_PORT_BASE["prefill"], False, "the same stray pod to NIXL"),
    Flow("vpc-host", "head", 8000, False, "an address in the nodes' subnet that is not the pod's node"),
]


def subnet_cidrs(app_synth, stage: str, name: str) -> list[str]:
    subnets = app_synth.resources(stage, "network", "AWS::EC2::Subnet").values()
    return [
        s["Properties"]["CidrBlock"]
        for s in subnets
        if {"Key": "aws-cdk:subnet-name", "Value": name} in s["Properties"]["Tags"]
    ]


def others(namespace: str, ray_labels: dict, control_plane: str, private: str, clients) -> dict[str, object]:
    """Every endpoint of the matrix that is not a Ray pod, the operator or a node."""
    made: dict[str, object] = {
        "api-proxy": External("EKS control-plane ENI", str(next(ipaddress.ip_network(control_plane).hosts()))),
        "vpc-host": External("another node", str(list(ipaddress.ip_network(private).hosts())[40])),
        "other-namespace": Pod("curl", OTHER_NAMESPACE, {"app": "curl"}, "100.64.3.10"),
        "spoofed-labels": Pod("spoof", OTHER_NAMESPACE, dict(ray_labels), "100.64.3.11"),
        "stray-pod": Pod("debug", namespace, {"run": "debug"}, "100.64.3.12"),
        # The agent operator labels the scraper's pods app.kubernetes.io/instance=<namespace>.<name>.
        "scraper": Pod("ray-metrics-scraper", CLOUDWATCH_NAMESPACE, dict(RAY_SCRAPER_POD_LABELS), "100.64.5.10"),
        "cloudwatch-daemon": Pod(
            "cloudwatch-agent",
            CLOUDWATCH_NAMESPACE,
            {"app.kubernetes.io/instance": f"{CLOUDWATCH_NAMESPACE}.cloudwatch-agent"},
            "100.64.5.11",
        ),
        "spoofed-scraper": Pod("spoof", OTHER_NAMESPACE, dict(RAY_SCRAPER_POD_LABELS), "100.64.3.13"),
    }
    if clients:
        made["client"] = Pod("gateway", clients[0], {"app": "gateway"}, "100.64.4.10")
    return made


def namespaces(namespace: str, clients) -> dict[str, dict]:
    return {
        namespace: {},
        KUBERAY_NAMESPACE: {},
        OTHER_NAMESPACE: {},
        CLOUDWATCH_NAMESPACE: {},
        **{c: {} for c in clients},
    }


@pytest.fixture(scope="module")
def topology(app_synth, stages):
    """Per stage: the pods as KubeRay would run them (kuberay_pods.py, held to the real operator's pods by
    tests/cluster/test_network_flows.py), and the policies in force."""
    made = {}
    for stage in ("dev", "prod"):
        (manifest,) = app_synth.resources(stage, "serving", "Custom::AWSCDK-EKS-KubernetesResource").values()
        objects = json.loads(manifest["Properties"]["Manifest"])
        (ray_service,) = [o for o in objects if o["kind"] == "RayService"]
        namespace = ray_service["metadata"]["namespace"]
        cluster = ray_service["spec"]["rayClusterConfig"]
        (workers,) = cluster["workerGroupSpecs"]
        control_plane, private = (
            subnet_cidrs(app_synth, stage, "control-plane"),
            subnet_cidrs(app_synth, stage, "private"),
        )
        assert control_plane and private
        pods: dict[str, object] = {
            "head": kuberay_pod(
                cluster["headGroupSpec"]["template"],
                name="head",
                namespace=namespace,
                node_type="head",
                group=HEAD_GROUP,
                ip="100.64.0.10",
                node="system-node",
            ),
        }
        for index in range(workers["replicas"]):
            pods[f"worker-{index}"] = kuberay_pod(
                workers["template"],
                name=f"worker-{index}",
                namespace=namespace,
                node_type="worker",
                group=workers["groupName"],
                ip=f"100.64.1.{10 + index}",
                node=f"gpu-node-{index}",
            )
        clients = stages[stage].serving.client_namespaces
        pods.update(
            {
                "operator": operator_pod(KUBERAY_RELEASE, KUBERAY_NAMESPACE, "100.64.2.10"),
                "head-node": Node("system-node", "10.0.2.10"),
                "gpu-node-0": Node("gpu-node-0", "10.0.2.20"),
                **others(namespace, pods["head"].labels, control_plane[-1], private[0], clients),
            }
        )
        policies = [o for o in objects if o["kind"] == "NetworkPolicy"]
        made[stage] = (Cluster(namespaces(namespace, clients), policies), pods)
    return made


@pytest.mark.parametrize("stage", ["dev", "prod"])
@pytest.mark.parametrize("flow", FLOWS, ids=lambda flow: flow.id)
def test_flow(topology, stage, flow):
    if stage not in flow.stages:
        pytest.skip(f"{flow.source} exists only in {', '.join(flow.stages)}")
    cluster, pods = topology[stage]
    source, destination = pods[flow.source], pods[flow.destination]
    admitted = cluster.allows(source, destination, flow.port)
    assert admitted is flow.needed, (
        f"{stage}: {flow.source} -> {flow.destination}:{flow.port} is "
        f"{'admitted' if admitted else 'refused'} ({cluster.why(source, destination, flow.port)}); "
        f"{'needed' if flow.needed else 'not needed'}: {flow.why}"
    )


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_nixl_side_channels_of_every_replica_are_open_between_workers(topology, stages, stage):
    # Ray offsets each replica's side channel by rank x tensor_parallel_size from the base
    # (kv_transfer/base.py _compute_port_offset); every replica a stage can scale to must be reachable.
    cluster, pods = topology[stage]
    serving = stages[stage].serving
    tp = serving.engine.tensor_parallel_size
    for side, replicas in (("prefill", serving.prefill), ("decode", serving.decode)):
        for rank in range(replicas.most):
            port = NIXL_PORT_BASE[side] + rank * tp
            assert cluster.allows(pods["worker-1"], pods["worker-0"], port), (side, rank, port)
            assert not cluster.allows(pods["other-namespace"], pods["worker-0"], port), (side, rank, port)


def test_the_matrix_covers_every_policy(topology):
    # Every policy the chart renders must admit at least one needed flow: no dead or unexplained policy.
    for stage, (cluster, pods) in topology.items():
        needed = [f for f in FLOWS if f.needed and stage in f.stages]
        for policy in cluster.policies:
            if not policy["spec"].get("ingress"):
                continue  # the default deny
            alone = Cluster(cluster.namespace_labels, [policy])
            used = [
                f
                for f in needed
                if alone.allows(pods[f.source], pods[f.destination], f.port)
                and alone._selecting(pods[f.destination], "Ingress")
            ]
            assert used, f"{stage}: policy {policy['metadata']['name']} admits no needed flow"
