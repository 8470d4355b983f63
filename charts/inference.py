"""The serving chart: the `inference` namespace, the Ray pods' service account, the token's
SecretProviderClass (when configured) and the RayService running the Serve LLM application.

Typed with cdk8s-plus-28 (docs/DECISIONS.md, "cdk8s-plus-28 and the typed KubeRay classes"): its L2
ServiceAccount, its typed core (L1) Namespace, verify's roles and bindings and NetworkPolicies
(charts/network_policies.py), whose L2s add fields or split rules. The RayService and the
SecretProviderClass stay `ApiObject`s with a plain-dict spec (why: DECISIONS.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import cdk8s
import cdk8s_plus_28 as kplus
import yaml
from cdk8s_plus_28 import k8s
from constructs import Construct

from config.derived import PodResources
from config.schema import Serving
from config.topology import (
    DASHBOARD_PORT_NAME,
    KUBERAY_NAMESPACE,
    KUBERAY_RELEASE,
    SERVE_PORT_NAME,
    VERIFY_GROUP,
    head_service,
    serve_service,
)

from .network_policies import add_network_policies, network_policies
from .ray_pods import TOKEN_FILE, TokenMount, head_pod_template, plain_template, ray_pod_labels, worker_pod_template
from .render import SafeDumper
from .serve_ingress import serve_ingress_environment

WORKER_GROUP = "gpu-workers"
# Privileged pods (NIXL on EFA) and a hostPath weight cache are only admitted here; warn and audit
# at `baseline` so anything else that is privileged shows up in the API server's answers and logs.
POD_SECURITY_LABELS = {
    "pod-security.kubernetes.io/enforce": "privileged",
    "pod-security.kubernetes.io/warn": "baseline",
    "pod-security.kubernetes.io/audit": "baseline",
}


@dataclass(frozen=True)
class ChartProps:
    """What the chart is built from (stacks/stage.py serving_props). `observed`: the stage collects metrics and
    logs: its scraper is admitted to the Ray pods' metrics port, and the workers relay NIXL's lines to their log."""

    serving: Serving
    serve_config: dict[str, Any]
    image: str
    region: str
    worker_resources: PodResources
    worker_count: int
    api_proxy_cidrs: Sequence[str]
    observed: bool = False


def ray_service_spec(props: ChartProps, *, service_account: str, token: TokenMount | None) -> dict[str, Any]:
    """The RayService's spec: the Serve config, a head without GPUs and one fixed group of GPU workers."""
    serving, image, count = props.serving, props.image, props.worker_count
    labels = ray_pod_labels(serving.service_name)
    serve_env = serve_ingress_environment(serving.serve_ingress)
    return {
        "upgradeStrategy": {"type": serving.upgrade_strategy},
        "serveConfigV2": yaml.dump(props.serve_config, Dumper=SafeDumper, sort_keys=False, width=120),
        "rayClusterConfig": {
            "rayVersion": serving.ray_version,
            "enableInTreeAutoscaling": False,
            "headGroupSpec": {
                "rayStartParams": {"num-gpus": "0", "dashboard-host": "0.0.0.0"},
                "template": plain_template(
                    head_pod_template(
                        image=image,
                        resources=serving.head_resources,
                        service_account=service_account,
                        token=token,
                        labels=labels,
                        serve_env=serve_env,
                    )
                ),
            },
            "workerGroupSpecs": [
                {
                    "groupName": WORKER_GROUP,
                    # One worker pod per GPU node, fixed: no node autoscaler runs in this cluster.
                    "replicas": count,
                    "minReplicas": count,
                    "maxReplicas": count,
                    "rayStartParams": {"num-gpus": str(props.worker_resources.gpus)},
                    "template": plain_template(
                        worker_pod_template(
                            image=image,
                            resources=props.worker_resources,
                            privilege=serving.worker_privilege,
                            weight_cache=serving.weight_cache,
                            service_account=service_account,
                            token=token,
                            labels=labels,
                            log_relay=props.observed,
                            nixl_metrics=serving.mode == "pd",
                            serve_env=serve_env,
                        )
                    ),
                }
            ],
        },
    }


class InferenceChart(cdk8s.Chart):
    def __init__(self, scope: Construct, construct_id: str, *, props: ChartProps) -> None:
        super().__init__(scope, construct_id, disable_resource_name_hashes=True)
        serving, namespace = props.serving, props.serving.namespace
        self._namespace(serving)
        self._verify_rbac(serving)

        token = self._token_provider(serving, props.region)
        spec = ray_service_spec(props, service_account=self.service_account_name, token=token)
        ray_service = cdk8s.ApiObject(
            self,
            "RayService",
            api_version="ray.io/v1",
            kind="RayService",
            metadata=cdk8s.ApiObjectMetadata(name=serving.service_name, namespace=namespace),
        )
        ray_service.add_json_patch(cdk8s.JsonPatch.add("/spec", spec))
        add_network_policies(
            self,
            namespace,
            network_policies(serving, api_proxy_cidrs=props.api_proxy_cidrs, metrics_scraper=props.observed),
        )

    def _namespace(self, serving: Serving) -> None:
        """The namespace, and the Ray pods' service account: they call no Kubernetes API, so no token is mounted
        (the pod templates say so too)."""
        k8s.KubeNamespace(
            self, "Namespace", metadata=k8s.ObjectMeta(name=serving.namespace, labels=POD_SECURITY_LABELS)
        )
        self.service_account_name = serving.service_name
        kplus.ServiceAccount(
            self,
            "ServiceAccount",
            automount_token=False,
            metadata=cdk8s.ApiObjectMetadata(name=self.service_account_name, namespace=serving.namespace),
        )

    def _token_provider(self, serving: Serving, region: str) -> TokenMount | None:
        """The Hugging Face token's SecretProviderClass and its mount, when the stage names a secret."""
        if not serving.hf_token_secret:
            return None
        token = TokenMount(secret_provider_class=f"{serving.service_name}-hf-token")
        provider = cdk8s.ApiObject(
            self,
            "HfTokenProvider",
            api_version="secrets-store.csi.x-k8s.io/v1",
            kind="SecretProviderClass",
            metadata=cdk8s.ApiObjectMetadata(name=token.secret_provider_class, namespace=serving.namespace),
        )
        provider.add_json_patch(
            cdk8s.JsonPatch.add("/spec", secret_provider_spec(serving.hf_token_secret, region=region))
        )
        return token

    def _verify_rbac(self, serving: Serving) -> None:
        """Read-only access for `ops verify` (the in-VPC runner's access entry maps to VERIFY_GROUP), object by
        object: the nodes (cluster-wide: nodes have no namespace), the operator's Deployment in its namespace,
        and in the serving namespace the RayService and the service proxy to exactly two Service ports: GET
        on the dashboard (the State and log APIs) and on Serve, POST on Serve alone (the chat completion); the
        pods, listed and read through the pod proxy with GET (the rate check: verify_rate_rules).
        No POST reaches the dashboard: its job API runs code on the Ray cluster."""
        k8s.KubeClusterRole(self, "VerifyRole", metadata=k8s.ObjectMeta(name=VERIFY_GROUP), rules=VERIFY_NODE_RULES)
        k8s.KubeClusterRoleBinding(
            self,
            "VerifyBinding",
            metadata=k8s.ObjectMeta(name=VERIFY_GROUP),
            role_ref=_role_ref("ClusterRole"),
            subjects=[_verify_subject()],
        )
        for construct_id, namespace, rules in (
            ("Operator", KUBERAY_NAMESPACE, verify_operator_rules()),
            ("Serving", serving.namespace, verify_serving_rules(serving.service_name)),
        ):
            meta = k8s.ObjectMeta(name=VERIFY_GROUP, namespace=namespace)
            k8s.KubeRole(self, f"Verify{construct_id}Role", metadata=meta, rules=rules)
            k8s.KubeRoleBinding(
                self,
                f"Verify{construct_id}Binding",
                metadata=meta,
                role_ref=_role_ref("Role"),
                subjects=[_verify_subject()],
            )


def _role_ref(kind: str) -> k8s.RoleRef:
    return k8s.RoleRef(api_group="rbac.authorization.k8s.io", kind=kind, name=VERIFY_GROUP)


def _verify_subject() -> k8s.Subject:
    return k8s.Subject(api_group="rbac.authorization.k8s.io", kind="Group", name=VERIFY_GROUP)


VERIFY_NODE_RULES = [k8s.PolicyRule(api_groups=[""], resources=["nodes"], verbs=["get", "list"])]


def verify_operator_rules() -> list[k8s.PolicyRule]:
    return [
        k8s.PolicyRule(api_groups=["apps"], resources=["deployments"], resource_names=[KUBERAY_RELEASE], verbs=["get"])
    ]


def proxied(service: str, port_name: str) -> str:
    """The name RBAC sees for the service proxy path /services/NAME:PORT/proxy/...: the path segment
    `NAME:PORT` (the API server's request info takes the segment after the resource as the name:
    k8s.io/apiserver pkg/endpoints/request/requestinfo.go; tests/cluster checks it with real
    SubjectAccessReviews)."""
    return f"{service}:{port_name}"


def verify_serving_rules(service_name: str) -> list[k8s.PolicyRule]:
    dashboard = proxied(head_service(service_name), DASHBOARD_PORT_NAME)
    serve = proxied(serve_service(service_name), SERVE_PORT_NAME)
    return [
        k8s.PolicyRule(api_groups=["ray.io"], resources=["rayservices"], resource_names=[service_name], verbs=["get"]),
        k8s.PolicyRule(api_groups=[""], resources=["services/proxy"], resource_names=[dashboard, serve], verbs=["get"]),
        k8s.PolicyRule(api_groups=[""], resources=["services/proxy"], resource_names=[serve], verbs=["create"]),
        *verify_rate_rules(),
    ]


def verify_rate_rules() -> list[k8s.PolicyRule]:
    """The rate check (ops/verify_rate.py): list the pods (to find the GPU workers) and GET through the pod
    proxy (NIXL's exporter, /pods/NAME:PORT/proxy/metrics). RBAC names a proxied pod as NAME:PORT, and the
    workers' names are KubeRay's, generated: no resourceNames can pin them, so the rule is the namespace's
    pods. The NetworkPolicies bound what the proxy reaches there (charts/network_policies.py: NIXL's port on
    the workers, and the ports the service proxy reaches already), and GET alone posts nothing."""
    return [
        k8s.PolicyRule(api_groups=[""], resources=["pods"], verbs=["list"]),
        k8s.PolicyRule(api_groups=[""], resources=["pods/proxy"], verbs=["get"]),
    ]


def secret_provider_spec(secret: str, *, region: str) -> dict[str, Any]:
    objects = yaml.dump(
        [{"objectName": secret, "objectType": "secretsmanager", "objectAlias": TOKEN_FILE}],
        Dumper=SafeDumper,
        sort_keys=False,
    )
    return {"provider": "aws", "parameters": {"region": region, "usePodIdentity": "true", "objects": objects}}


def render(chart: cdk8s.Chart) -> list[dict[str, Any]]:
    """The chart's objects as plain dicts, in apply order."""
    return [dict(obj) for obj in chart.to_json()]
