"""Every pinned version of a Helm chart and a container image, in one place.

Stage files may override a chart version (to promote a new one through dev first); when they do not,
these are the versions that are deployed. Python packages are pinned in requirements*.txt, the CDK CLI
and cdk-assets in package.json (npm_pin reads them), Go modules in tools/go/.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

PACKAGE_JSON = Path(__file__).resolve().parent.parent / "package.json"

# The toolchain every command of the project runs on, as CodeBuild's `runtime-versions` names it (the
# pipeline's projects select exactly these on the standard 8.0 image, whose runtimes.yml offers them):
# pyproject.toml's requires-python, the Node.js of the CI workflows, the `go` directive of tools/go/.
TOOLCHAIN = {"python": "3.11", "nodejs": "24", "golang": "1.26"}


@functools.cache
def npm_pin(package: str) -> str:
    """The exact version package.json pins for an npm package (the CDK CLI, cdk-assets)."""
    return str(json.loads(PACKAGE_JSON.read_text())["devDependencies"][package])


@dataclass(frozen=True)
class HelmChartPin:
    """Where a chart comes from and the version that was checked against its default values."""

    chart: str
    repository: str
    version: str


# 1.6.2: the release the Go module proxy serves whole, so what is deployed is what ops local-cluster runs
# (docs/DECISIONS.md, "KubeRay 1.6.2").
KUBERAY_OPERATOR = HelmChartPin(
    chart="kuberay-operator",
    repository="https://ray-project.github.io/kuberay-helm/",
    version="1.6.2",
)
NVIDIA_DEVICE_PLUGIN = HelmChartPin(
    chart="nvidia-device-plugin",
    repository="https://nvidia.github.io/k8s-device-plugin",
    version="0.20.0",
)
EFA_DEVICE_PLUGIN = HelmChartPin(
    chart="aws-efa-k8s-device-plugin",
    repository="https://aws.github.io/eks-charts",
    version="v0.5.30",
)

# The CloudWatch Observability EKS add-on (CloudWatch agent + operator, Fluent Bit, DCGM exporter): Helm chart
# 6.4.0 of aws-observability/helm-charts (released 2026-07-21; its values.yaml is what the add-on's
# configuration keys are checked against), the build EKS lists for Kubernetes 1.34 and 1.35
# (docs/OBSERVABILITY.md says where that was seen).
CLOUDWATCH_OBSERVABILITY_VERSION = "v6.4.0-eksbuild.1"

# The Kubernetes minors a stage may run (the schema admits exactly these), each with its kubectl layer
# (module, class) for the cluster's kubectl provider (stacks/cluster.py imports the layer on use: each
# layer package loads a ~36 MB asset into jsii). The previous minor too, so a stage can be upgraded in place.
KUBECTL_LAYERS = {
    "1.34": ("aws_cdk.lambda_layer_kubectl_v34", "KubectlV34Layer"),
    "1.35": ("aws_cdk.lambda_layer_kubectl_v35", "KubectlV35Layer"),
}
KUBERNETES_VERSIONS = tuple(KUBECTL_LAYERS)

# nvidia-device-plugin releases that conflict with the EFA device plugin
# (docs/STAGE_FILE.md, addons.nvidia_device_plugin).
NVIDIA_DEVICE_PLUGIN_BROKEN = frozenset({"0.19.0", "0.19.1", "0.19.2"})

# The AWS Deep Learning Container for Ray Serve LLM, and the Ray each tag carries. `rayVersion` in the
# RayService must equal the image's Ray, so the serving config is checked against this table.
DLC_REPOSITORY = "ray"
# The account that serves that repository differs by region (18 of the 34 regions are not 763104351884):
# config/dlc_registries.json, recorded by scripts/record_dlc_registries.py from this SageMaker SDK release.
SAGEMAKER_CORE_VERSION = "2.27.0"
DLC_REGISTRIES: dict[str, str] = json.loads((Path(__file__).with_name("dlc_registries.json")).read_text())["registries"]
# The patch tag: `serve-llm-cuda-v1.0` (and `-v1`, and the bare prefix) move with every release of the line,
# so a node replaced next month would pull other software than its peer. The DLC changelog lists the tags
# (aws/deep-learning-containers docs/ray-llm/changelog/index.md, "Ray LLM v1.0": serve-llm-cuda-v1.0.0).
DLC_SERVE_LLM_TAG = "serve-llm-cuda-v1.0.0"
DLC_RAY_VERSIONS = {
    "serve-llm-cuda-v1.0.0": "2.58.0",
}
# The image's size is not published and no registry here serves it: a planning figure (20 GiB unpacked, 9.3
# compressed), which `ops preflight` rechecks with ECR's real size.
# Why: docs/DECISIONS.md, "Root volumes and the first start".
DLC_IMAGE_UNPACK_RATIO = 2.14
DLC_IMAGE_COMPRESSED_GIB = 9.3
# The vLLM of that image: the engine settings of the stage files are checked against its EngineArgs,
# recorded in config/vllm_engine_args.json by scripts/record_vllm_engine_args.py.
VLLM_VERSION = "0.26.0"


def dlc_image(region: str, tag: str = DLC_SERVE_LLM_TAG) -> str:
    """The regional ECR address of the Ray Serve LLM Deep Learning Container; a region without a registry
    has none (config/rules/serving.py refuses such a stage unless serving.image names another image)."""
    account = DLC_REGISTRIES.get(region, "")
    return f"{account}.dkr.ecr.{region}.amazonaws.com/{DLC_REPOSITORY}:{tag}" if account else ""
