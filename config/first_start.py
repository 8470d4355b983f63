"""What a stage's first start moves onto its nodes: the root volume that holds two serving images side by side
(an update pulls the new tag while the old pod still runs), and the wait of the first Verify step, which covers
the image pulls, the weight downloads and the engines' start. Each figure is AWS's, Kubernetes' or one measured
here, named where it is set; the DLC image's own size is not published, so it is a planning figure
(config/versions.py DLC_IMAGE_COMPRESSED_GIB, from scripts/image_payload.py). docs/DECISIONS.md has the arithmetic."""

from __future__ import annotations

import math
from dataclasses import dataclass

from . import versions
from .derived import gpu_spec, model_memory_floor
from .instance_types import instance_spec
from .schema import StageConfig

# kubelet's image GC starts at 85 % of the image filesystem (kubernetes pkg/kubelet/apis/config/v1beta1/
# defaults.go, ImageGCHighThresholdPercent) and eviction at imagefs.available < 15 % (pkg/kubelet/eviction/
# defaults_linux.go, DefaultEvictionHard); one root volume is both nodefs and imagefs, so images get 85 % of it.
IMAGE_FS_USABLE = 0.85
# The AL2023 EKS AMI's own files, the add-ons' images and the node's logs: an allowance, not measured.
NODE_BASE_GIB = 8.0
# gp3's baseline throughput when the launch template sets none (EBS User Guide, "General Purpose SSD volumes",
# gp3: 125 MiB/s): each unpacked layer and each weight file is written through it.
GP3_WRITE_MIB_S = 125.0
# A NAT gateway's bandwidth before it scales (VPC User Guide, "NAT gateway basics": 5 Gbps, up to 100 Gbps),
# shared by the GPU nodes' weight downloads from the Hugging Face Hub.
NAT_GBPS = 5.0
# From the worker pod's start to the application RUNNING on the rehearsal host, cold (an H200 pair with dummy
# weights: evidence/README.md, 383 s, before the engines compiled: torch.compile adds 14-16 s each on an H100,
# evidence/2026-12-05-h100-compiled-graphs); an L4 compiles and captures graphs slower, so twice that.
ENGINE_START_S = 2 * 383.0
# The wait is the critical path times this, so that a slow Hub or a slow compile still passes.
WAIT_MARGIN = 1.5
# The Verify project's own set-up (pip install of the ops venv) before it starts waiting.
VERIFY_SETUP_MINUTES = 15


def _gib_at(gib: float, mib_s: float) -> float:
    return gib * 1024 / mib_s


def _gbps_mib_s(gbps: float) -> float:
    return gbps * 1e9 / 8 / 2**20


def image_disk_gib(compressed_gib: float) -> float:
    """Disk two serving images need side by side: both unpacked, and the new one's compressed layers until
    containerd discards them (the EKS AMI sets discard_unpacked_layers: awslabs/amazon-eks-ami nodeadm/internal/
    containerd/config2.template.toml)."""
    return (2 * versions.DLC_IMAGE_UNPACK_RATIO + 1) * compressed_gib


def weights_gib(cfg: StageConfig) -> float:
    """The served checkpoint's size; unknown: a GPU node's whole GPU memory (the weights must fit it)."""
    floor = model_memory_floor(cfg)
    return floor.weights_gib if floor else float(gpu_spec(cfg).gpu_memory_gib)


def system_root_volume_floor_gib(compressed_gib: float = versions.DLC_IMAGE_COMPRESSED_GIB) -> int:
    """`compressed_gib`: the serving image's compressed size (ECR's imageSizeInBytes); unset, the planning figure."""
    return math.ceil((NODE_BASE_GIB + image_disk_gib(compressed_gib)) / IMAGE_FS_USABLE)


def gpu_root_volume_floor_gib(cfg: StageConfig, compressed_gib: float = versions.DLC_IMAGE_COMPRESSED_GIB) -> int:
    """Also the weight cache on the node (/var/lib/model-cache), one model's weights: nothing prunes that cache, so
    a change of model needs room for both or new nodes (docs/DECISIONS.md)."""
    return math.ceil((NODE_BASE_GIB + image_disk_gib(compressed_gib) + weights_gib(cfg)) / IMAGE_FS_USABLE)


@dataclass(frozen=True)
class FirstStart:
    head_pull_s: float  # the system node: layers from S3 at its baseline bandwidth, then unpacked to gp3
    worker_pull_s: float  # a GPU node, the same
    weights_s: float  # a GPU node's share of the NAT gateway, or gp3's write rate, whichever is slower
    engine_s: float

    @property
    def critical_path_s(self) -> float:
        """The workers join once the head's GCS answers; the engines download, then load and compile."""
        return max(self.head_pull_s, self.worker_pull_s) + self.weights_s + self.engine_s

    @property
    def verify_wait_s(self) -> int:
        return math.ceil(self.critical_path_s * WAIT_MARGIN / 60) * 60

    @property
    def verify_timeout_minutes(self) -> int:
        return self.verify_wait_s // 60 + VERIFY_SETUP_MINUTES


def _pull_s(instance_type: str) -> float:
    """ECR layers come from S3 through the gateway endpoint, not NAT, at the node's baseline network bandwidth
    (config/instance_types.py network_gbps: m7i.xlarge 1.5625, g6.8xlarge 25 Gbps); a type the table does not
    list is refused by validation first (config/rules/nodegroup_shape.py known_type)."""
    link = _gbps_mib_s(instance_spec(instance_type).network_gbps)
    compressed = versions.DLC_IMAGE_COMPRESSED_GIB
    return _gib_at(compressed, link) + _gib_at(compressed * versions.DLC_IMAGE_UNPACK_RATIO, GP3_WRITE_MIB_S)


def first_start(cfg: StageConfig) -> FirstStart:
    """Each GPU node downloads at most its GPUs' memory of weights (no engine's weights exceed its GPUs): the
    bound, not the model's size, so that a change of model leaves the cluster stack (the verify runner) as it is."""
    gpu_node = gpu_spec(cfg)
    nat_share = _gbps_mib_s(NAT_GBPS) / cfg.gpu_nodegroup.count
    return FirstStart(
        head_pull_s=_pull_s(cfg.system_nodegroup.instance_type),
        worker_pull_s=_pull_s(cfg.gpu_nodegroup.instance_type),
        weights_s=_gib_at(gpu_node.gpu_memory_gib, min(nat_share, GP3_WRITE_MIB_S)),
        engine_s=ENGINE_START_S,
    )
