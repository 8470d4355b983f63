"""The serving chart: the `inference` namespace, the Ray pods' service account, the token's
SecretProviderClass (when configured) and the RayService running the Serve LLM application.

Typed with cdk8s-plus-28 (docs/DECISIONS.md, "cdk8s-plus-28 and the typed KubeRay classes"): its L2
ServiceAccount and ClusterRoleBinding, its typed core (L1) Namespace, ClusterRole and NetworkPolicies
(charts/network_policies.py), whose L2s add fields or split rules. The RayService and the
SecretProviderClass stay `ApiObject`s with a plain-dict spec (why: DECISIONS.md)."""
from __future__ import annotations

from typing import Any, Sequence

import cdk8s
import cdk8s_plus_28 as kplus
import yaml
from cdk8s_plus_28 import k8s
from constructs import Construct

from config.derived import PodResources
from config.schema import Serving
from config.topology import VERIFY_GROUP

from .network_policies import add_network_policies, network_policies
from .ray_pods import TOKEN_FILE, TokenMount, head_pod, ray_pod_labels, worker_pod
from .render import SafeDumper
from .serve_config import build_serve_config

WORKER_GROUP = "gpu-workers"
# Privileged pods (NIXL on EFA) and a hostPath weight cache are only admitted here; warn and audit
# at `baseline` so anything else that is privileged shows up in the API server's answers and logs.
POD_SECURITY_LABELS = {
    "pod-security.kubernetes.io/enforce": "privileged",
    "pod-security.kubernetes.io/warn": "baseline",
    "pod-security.kubernetes.io/audit": "baseline",
}


def serve_config_text(serving: Serving) -> str:
    return yaml.dump(build_serve_config(serving), Dumper=SafeDumper, sort_keys=False, width=120)


class InferenceChart(cdk8s.Chart):
    def __init__(self, scope: Construct, construct_id: str, *, serving: Serving, image: str, region: str,
                 worker_resources: PodResources, worker_count: int, api_proxy_cidrs: Sequence[str],
                 observed: bool = False) -> None:
        """`observed`: the stage collects metrics and logs (observability on): its scraper is admitted to the
        Ray pods' metrics port, and the workers relay NIXL's lines to the container log."""
        super().__init__(scope, construct_id, disable_resource_name_hashes=True)
        namespace = serving.namespace
        k8s.KubeNamespace(self, "Namespace", metadata=k8s.ObjectMeta(name=namespace, labels=POD_SECURITY_LABELS))
        self.service_account_name = serving.service_name
        # The Ray pods call no Kubernetes API: no token is mounted (the pod templates say so too).
        kplus.ServiceAccount(self, "ServiceAccount", automount_token=False,
                             metadata=cdk8s.ApiObjectMetadata(name=self.service_account_name, namespace=namespace))

        self._verify_rbac()

        token = None
        if serving.hf_token_secret:
            token = TokenMount(secret_provider_class=f"{serving.service_name}-hf-token")
            provider = cdk8s.ApiObject(
                self, "HfTokenProvider", api_version="secrets-store.csi.x-k8s.io/v1", kind="SecretProviderClass",
                metadata=cdk8s.ApiObjectMetadata(name=token.secret_provider_class, namespace=namespace))
            provider.add_json_patch(cdk8s.JsonPatch.add("/spec", secret_provider_spec(
                serving.hf_token_secret, region=region)))

        labels = ray_pod_labels(serving.service_name)
        spec: dict[str, Any] = {
            "upgradeStrategy": {"type": serving.upgrade_strategy},
            "serveConfigV2": serve_config_text(serving),
            "rayClusterConfig": {
                "rayVersion": serving.ray_version,
                "enableInTreeAutoscaling": False,
                "headGroupSpec": {
                    "rayStartParams": {"num-gpus": "0", "dashboard-host": "0.0.0.0"},
                    "template": head_pod(image=image, resources=serving.head_resources,
                                         service_account=self.service_account_name, token=token, labels=labels),
                },
                "workerGroupSpecs": [{
                    "groupName": WORKER_GROUP,
                    # One worker pod per GPU node, fixed: no node autoscaler runs in this cluster.
                    "replicas": worker_count,
                    "minReplicas": worker_count,
                    "maxReplicas": worker_count,
                    "rayStartParams": {"num-gpus": str(worker_resources.gpus)},
                    "template": worker_pod(image=image, resources=worker_resources,
                                           privilege=serving.worker_privilege, weight_cache=serving.weight_cache,
                                           service_account=self.service_account_name, token=token,
                                           labels=labels, log_relay=observed),
                }],
            },
        }
        ray_service = cdk8s.ApiObject(self, "RayService", api_version="ray.io/v1", kind="RayService",
                                      metadata=cdk8s.ApiObjectMetadata(name=serving.service_name,
                                                                       namespace=namespace))
        ray_service.add_json_patch(cdk8s.JsonPatch.add("/spec", spec))
        add_network_policies(self, namespace, network_policies(serving, api_proxy_cidrs=api_proxy_cidrs,
                                                               metrics_scraper=observed))


    def _verify_rbac(self) -> None:
        """Read-only access for `ops verify` (the in-VPC runner's access entry maps to VERIFY_GROUP):
        what verify reads, plus the service proxy to the Ray dashboard and the Serve endpoint."""
        k8s.KubeClusterRole(self, "VerifyRole", metadata=k8s.ObjectMeta(name=VERIFY_GROUP), rules=VERIFY_RULES)
        binding = kplus.ClusterRoleBinding(
            self, "VerifyBinding", metadata=cdk8s.ApiObjectMetadata(name=VERIFY_GROUP),
            role=kplus.ClusterRole.from_cluster_role_name(self, "VerifyRoleRef", VERIFY_GROUP))
        binding.add_subjects(kplus.Group.from_name(self, "VerifyGroup", VERIFY_GROUP))


VERIFY_RULES = [
    k8s.PolicyRule(api_groups=[""], resources=["nodes"], verbs=["get", "list"]),
    k8s.PolicyRule(api_groups=["apps"], resources=["deployments"], verbs=["get"]),
    k8s.PolicyRule(api_groups=["ray.io"], resources=["rayservices"], verbs=["get"]),
    # GET for /v1/models and the dashboard's log API, create for POST /v1/chat/completions
    k8s.PolicyRule(api_groups=[""], resources=["services/proxy"], verbs=["get", "create"]),
]


def secret_provider_spec(secret: str, *, region: str) -> dict[str, Any]:
    objects = yaml.dump([{"objectName": secret, "objectType": "secretsmanager", "objectAlias": TOKEN_FILE}],
                        Dumper=SafeDumper, sort_keys=False)
    return {"provider": "aws", "parameters": {"region": region, "usePodIdentity": "true", "objects": objects}}


def render(chart: cdk8s.Chart) -> list[dict[str, Any]]:
    """The chart's objects as plain dicts, in apply order."""
    return [dict(obj) for obj in chart.to_json()]

