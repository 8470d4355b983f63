"""One deployable environment: a cdk.Stage holding the network, cluster and serving stacks of a stage."""

from __future__ import annotations

import aws_cdk as cdk
from constructs import Construct

from charts.inference import ChartProps
from charts.render import StageRendering
from charts.serve_config import build_serve_config
from config.derived import PodResources, kv_transfer_floor_gbps, worker_resources
from config.first_start import first_start
from config.rules import stage_warnings
from config.schema import StageConfig

from .addons import eks_addon_entry
from .cluster import ClusterProps, ClusterStack
from .network import NetworkProps, NetworkStack
from .retention import retention
from .serving import ServingProps, ServingStack

CRDS_NOTE = (
    "applied server-side before this release by the cluster stack's KubeRayCrds step (Helm's install applies the "
    "same files again, its upgrades never)"
)


# Each stack's props, built from the stage here and nowhere else; a value two stacks need is derived once.
def network_props(cfg: StageConfig) -> NetworkProps:
    return NetworkProps(
        zones=cfg.availability_zones, network=cfg.network, log_retention=retention(cfg.cluster.log_retention_days)
    )


def cluster_props(cfg: StageConfig, network: NetworkStack, resources: PodResources) -> ClusterProps:
    return ClusterProps(
        stage=cfg.stage,
        vpc=network.vpc,
        logs_key=network.logs_key,
        cluster_name=cfg.cluster_name,
        cluster=cfg.cluster,
        system_nodegroup=cfg.system_nodegroup,
        gpu_nodegroup=cfg.gpu_nodegroup,
        gpu_zone=cfg.gpu_availability_zone,
        efa_interfaces=resources.efa_interfaces,
        addon_versions=cfg.addons,
        observability=cfg.observability,
        serving_namespace=cfg.serving.namespace,
        first_start=first_start(cfg),
        log_retention=network.props.log_retention,
        tags=cfg.tags,
        kv_floor_gbps=kv_transfer_floor_gbps(cfg),
    )


def serving_props(
    cfg: StageConfig, network: NetworkStack, cluster: ClusterStack, resources: PodResources
) -> ServingProps:
    chart = ChartProps(
        serving=cfg.serving,
        serve_config=build_serve_config(cfg.serving),
        image=cfg.image,
        region=cfg.region,
        worker_resources=resources,
        worker_count=cfg.gpu_nodegroup.count,
        api_proxy_cidrs=network.control_plane_cidrs,
        observed=cfg.observability.enabled,
    )
    agent = cluster.observability.agent if cluster.observability else None
    return ServingProps(chart, cluster.cluster, cluster.kuberay_operator, pod_identity_agent=agent)


class InferenceStage(cdk.Stage):
    def __init__(self, scope: Construct, construct_id: str, *, cfg: StageConfig) -> None:
        super().__init__(scope, construct_id, env=cdk.Environment(account=cfg.account, region=cfg.region))
        self.cfg = cfg
        zones = cfg.availability_zones
        if cfg.account:
            # With an explicit account and region, Stack.availability_zones would look the AZs up in AWS
            # (and fail without credentials). Answer that lookup from the stage file instead. Without an
            # account the stacks are account-agnostic and the VPC takes the names as given.
            self.node.set_context(f"availability-zones:account={cfg.account}:region={cfg.region}", list(zones))
        self.network = NetworkStack(
            self,
            "Network",
            stack_name=f"{cfg.stage}-network",
            props=network_props(cfg),
            description=f"PD inference ({cfg.stage}): VPC, subnets, NAT, flow logs",
        )
        resources = worker_resources(cfg)
        self.cluster = ClusterStack(
            self,
            "Cluster",
            stack_name=f"{cfg.stage}-cluster",
            props=cluster_props(cfg, self.network, resources),
            description=f"PD inference ({cfg.stage}): EKS cluster, nodegroups, device plugins, KubeRay",
        )
        self.serving = ServingStack(
            self,
            "Serving",
            stack_name=f"{cfg.stage}-serving",
            props=serving_props(cfg, self.network, self.cluster, resources),
            description=f"PD inference ({cfg.stage}): RayService {cfg.serving.service_name} "
            f"({cfg.serving.mode}) in namespace {cfg.serving.namespace}",
        )
        self.stacks: list[cdk.Stack] = [self.network, self.cluster, self.serving]
        for key, value in cfg.tags.items():
            cdk.Tags.of(self).add(key, value)
        # The stage's warnings, as `config validate` prints them: `cdk synth` shows them, on the cluster stack.
        for warned in stage_warnings(cfg):
            cdk.Annotations.of(self.cluster).add_warning_v2(warned.id, f"{warned.field}: {warned.problem}")

    def rendering(self) -> StageRendering:
        """What this stage applies to Kubernetes, for the readable copy under cdk.out/k8s/."""
        releases = [
            {
                "release": r.release,
                "namespace": r.namespace,
                "chart": r.pin.chart,
                "repository": r.pin.repository,
                "version": r.version,
                # The operator's CRDs come from the KubeRayCrds step before the release (stacks/kuberay_crds.py).
                **({"crds": CRDS_NOTE} if r.crds_step else {}),
                "values": r.values,
            }
            for r in self.cluster.helm_releases
        ]
        return StageRendering(
            stage=self.cfg.stage,
            objects=self.serving.objects,
            serve_config=self.serving.props.chart.serve_config,
            helm_releases=releases,
            eks_addons=[eks_addon_entry(addon) for addon in self.cluster.eks_addons + self.serving.eks_addons],
        )
