"""The serving workload: the inference chart applied to the cluster, after the KubeRay operator.

Its own stack, so that changing the model, the engine or the replicas changes only this stack's
manifest resource: never the VPC, the cluster or a nodegroup.
"""

from __future__ import annotations

from dataclasses import dataclass

import aws_cdk as cdk
import cdk8s
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from charts.inference import ChartProps, InferenceChart, render
from config.topology import POD_IDENTITY_AGENT_ADDON, SECRETS_PROVIDER_ADDON, serve_address

from .observability import pod_identity_principal


@dataclass(frozen=True)
class ServingProps:
    """What a stage's serving stack is built from (stacks/stage.py serving_props). `pod_identity_agent`: the
    cluster stack's agent add-on when it has one (observability on): EKS allows one per cluster."""

    chart: ChartProps
    cluster: eks.Cluster
    kuberay_operator: eks.HelmChart
    pod_identity_agent: eks.Addon | None = None


class ServingStack(cdk.Stack):
    def __init__(self, scope: Construct, construct_id: str, *, props: ServingProps, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.props = props
        self.eks_addons: list[eks.Addon] = []  # those this stack creates (the token path's)
        cluster, serving = props.cluster, props.chart.serving
        # Rendered once: applied here, written as YAML for review.
        self.objects = render(InferenceChart(cdk8s.App(), "inference", props=props.chart))
        # What cluster.add_cdk8s_chart() does, but scoped to this stack rather than the cluster's.
        self.manifest = eks.KubernetesManifest(
            self,
            "InferenceChart",
            cluster=cluster,  # type: ignore[arg-type]  # jsii's Cluster lacks ICluster's kubectl_provider_options
            manifest=self.objects,
        )
        self.manifest.node.add_dependency(props.kuberay_operator)
        if serving.allow_unsafe_engine_args:  # opt-in engine arguments: config/engine_arg_classes.py ENGINE_ARGS_OPT_IN
            cdk.Annotations.of(self.manifest).add_warning_v2(
                "pd-inference:unsafe-engine-args",
                f"{serving.service_name}: vLLM runs with {', '.join(serving.allow_unsafe_engine_args)} turned on, as "
                "the stage file allows with serving.allow_unsafe_engine_args (code from the model repository, or "
                "inputs the server deserializes). Remove them unless the model needs them.",
            )

        if serving.hf_token_secret:
            self._grant_token(props, serving.hf_token_secret)

        cdk.CfnOutput(self, "ServeService", value=serve_address(serving.service_name, serving.namespace))

    def _grant_token(self, props: ServingProps, secret: str) -> None:
        """Pod Identity: the Ray pods' service account may read exactly the token secret."""
        cluster, serving = props.cluster, props.chart.serving
        agent = props.pod_identity_agent or eks.Addon(
            self,
            "PodIdentityAgent",
            cluster=cluster,  # type: ignore[arg-type]  # jsii's Cluster lacks ICluster's kubectl_provider_options
            addon_name=POD_IDENTITY_AGENT_ADDON,
        )
        provider = eks.Addon(
            self,
            "SecretsProvider",
            cluster=cluster,  # type: ignore[arg-type]  # jsii's Cluster lacks ICluster's kubectl_provider_options
            addon_name=SECRETS_PROVIDER_ADDON,
        )
        self.eks_addons += [*([] if props.pod_identity_agent else [agent]), provider]
        # Trusted for the Ray pods' service account of this cluster only; the cluster's ARN is formatted from
        # its name, which this stack already imports: no new export from the cluster stack.
        # Why: docs/DECISIONS.md, "The Ray pods' role: this cluster's ARN from its name".
        cluster_arn = cdk.Arn.format(
            cdk.ArnComponents(
                service="eks",
                resource="cluster",
                resource_name=cluster.cluster_name,
                arn_format=cdk.ArnFormat.SLASH_RESOURCE_NAME,
            ),
            self,
        )
        role = iam.Role(
            self,
            "HfTokenReader",
            assumed_by=pod_identity_principal(cluster_arn, serving.namespace, serving.service_name),
            description=f"Ray pods of {serving.service_name} read the Hugging Face token",
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"],
                resources=[self.secret_arn(secret)],
            )
        )
        association = eks.CfnPodIdentityAssociation(
            self,
            "HfTokenAccess",
            cluster_name=cluster.cluster_name,
            namespace=serving.namespace,
            service_account=serving.service_name,
            role_arn=role.role_arn,
        )
        self.manifest.node.add_dependency(agent, provider, association)

    def secret_arn(self, secret: str) -> str:
        """A full ARN as given; a name becomes the ARN pattern of that name (Secrets Manager appends
        a random 6-character suffix to every secret's ARN)."""
        if secret.startswith("arn:"):
            return secret
        return cdk.Arn.format(
            cdk.ArnComponents(
                service="secretsmanager",
                resource="secret",
                resource_name=f"{secret}-??????",
                arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
            ),
            self,
        )
