"""What a stage's cluster shows once it runs, as the readiness checks (clients/readiness.py) expect it."""

from __future__ import annotations

from clients.readiness import Target
from config.derived import worker_resources
from config.schema import StageConfig
from config.topology import EFA_RESOURCE, GPU_LABELS, GPU_RESOURCE, KUBERAY_NAMESPACE, KUBERAY_RELEASE

from .serve_config import APP_NAME


def readiness_target(cfg: StageConfig) -> Target:
    resources = worker_resources(cfg)
    return Target(
        stage=cfg.stage,
        gpu_selector=",".join(f"{k}={v}" for k, v in GPU_LABELS.items()),
        gpu_nodes=cfg.gpu_nodegroup.count,
        gpu_resource=GPU_RESOURCE,
        gpus=resources.gpus,
        efa_resource=EFA_RESOURCE,
        efa_interfaces=resources.efa_interfaces,
        operator_namespace=KUBERAY_NAMESPACE,
        operator_release=KUBERAY_RELEASE,
        namespace=cfg.serving.namespace,
        service_name=cfg.serving.service_name,
        app_name=APP_NAME,
    )
