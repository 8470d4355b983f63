"""What the app needs to know about EC2 instance types, without asking AWS.

`efa_interfaces` is the maximum number of EFA interfaces the type supports (one per network card that
carries EFA); 0 means the type has no EFA. The GPU nodegroup's launch template gets exactly that many
interfaces. Figures are from the EC2 instance-type documentation (accelerated computing and general
purpose pages); tests/config/test_instance_types.py checks every row against EC2's DescribeInstanceTypes
answers as moto records them, and `python -m ops preflight` the EFA count against the live answer.

`network_gbps` is the type's baseline network bandwidth in Gbps (EC2 User Guide, "Amazon EC2 instance network
bandwidth" and the network specifications of the general purpose and accelerated computing instance pages: the
baseline of an "up to" figure, m7i.xlarge 1.5625 of "up to 12.5"; the whole figure where it is fixed, g6.8xlarge
25). On an EFA type it is also the EFA bandwidth, shared by its `efa_interfaces` (g6.8xlarge: 25 Gbps, one
interface); `efa_interface_gbps` is one interface's share, what one KV transfer can use
(config/derived.py kv_transfer_floor_gbps). Every row states it: a type is added with its bandwidth.

`gpu_memory_mib` is one GPU's memory as the NVIDIA driver reports it (`nvidia-smi --query-gpu=memory.total`,
the figure `ops rehearse` reads from its host), one figure per GPU model in `GPU_MEMORY_MIB` (an L4: 23,034
MiB); 0 means not known, and
`ops rehearse --emulate-node` refuses such a type. `gpu_memory_gib` is the instance's total (all GPUs), as
EC2 documents it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class InstanceSpec:
    vcpus: int
    memory_gib: int
    network_gbps: float
    gpus: int = 0
    gpu_model: str = ""
    gpu_memory_gib: int = 0
    efa_interfaces: int = 0

    @property
    def has_efa(self) -> bool:
        return self.efa_interfaces > 0

    @property
    def efa_interface_gbps(self) -> float:
        """One EFA interface's share of the type's bandwidth; 0: no EFA."""
        return self.network_gbps / self.efa_interfaces if self.has_efa else 0.0

    @property
    def gpu_memory_mib(self) -> int:
        """One GPU's memory as the driver reports it (GPU_MEMORY_MIB); 0: not known."""
        return GPU_MEMORY_MIB.get(self.gpu_model, 0)


# One GPU's memory by model, as the NVIDIA driver reports it (nvidia-smi --query-gpu=memory.total).
GPU_MEMORY_MIB: dict[str, int] = {
    "L4": 23034,
    "L40S": 46068,
    "A10G": 23028,
    "A100": 40960,  # p4d: A100-SXM4-40GB
    "H100": 81559,  # 80GB HBM3
    "H200": 143771,
}


INSTANCE_TYPES: dict[str, InstanceSpec] = {
    # general purpose: system nodes
    "m7i.large": InstanceSpec(vcpus=2, memory_gib=8, network_gbps=0.781),
    "m7i.xlarge": InstanceSpec(vcpus=4, memory_gib=16, network_gbps=1.5625),
    "m7i.2xlarge": InstanceSpec(vcpus=8, memory_gib=32, network_gbps=3.125),
    "m7i.4xlarge": InstanceSpec(vcpus=16, memory_gib=64, network_gbps=6.25),
    "m7i.8xlarge": InstanceSpec(vcpus=32, memory_gib=128, network_gbps=12.5),
    "m6i.xlarge": InstanceSpec(vcpus=4, memory_gib=16, network_gbps=1.562),
    "m6i.2xlarge": InstanceSpec(vcpus=8, memory_gib=32, network_gbps=3.125),
    # NVIDIA L4
    "g6.xlarge": InstanceSpec(vcpus=4, memory_gib=16, gpus=1, gpu_model="L4", gpu_memory_gib=24, network_gbps=2.5),
    "g6.2xlarge": InstanceSpec(vcpus=8, memory_gib=32, gpus=1, gpu_model="L4", gpu_memory_gib=24, network_gbps=5.0),
    "g6.4xlarge": InstanceSpec(vcpus=16, memory_gib=64, gpus=1, gpu_model="L4", gpu_memory_gib=24, network_gbps=10.0),
    "g6.8xlarge": InstanceSpec(
        vcpus=32, memory_gib=128, gpus=1, gpu_model="L4", gpu_memory_gib=24, efa_interfaces=1, network_gbps=25.0
    ),
    "g6.12xlarge": InstanceSpec(
        vcpus=48, memory_gib=192, gpus=4, gpu_model="L4", gpu_memory_gib=96, efa_interfaces=1, network_gbps=40.0
    ),
    "g6.16xlarge": InstanceSpec(
        vcpus=64, memory_gib=256, gpus=1, gpu_model="L4", gpu_memory_gib=24, efa_interfaces=1, network_gbps=25.0
    ),
    "g6.24xlarge": InstanceSpec(
        vcpus=96, memory_gib=384, gpus=4, gpu_model="L4", gpu_memory_gib=96, efa_interfaces=1, network_gbps=50.0
    ),
    "g6.48xlarge": InstanceSpec(
        vcpus=192, memory_gib=768, gpus=8, gpu_model="L4", gpu_memory_gib=192, efa_interfaces=1, network_gbps=100.0
    ),
    # NVIDIA L40S
    "g6e.xlarge": InstanceSpec(vcpus=4, memory_gib=32, gpus=1, gpu_model="L40S", gpu_memory_gib=48, network_gbps=2.5),
    "g6e.8xlarge": InstanceSpec(
        vcpus=32, memory_gib=256, gpus=1, gpu_model="L40S", gpu_memory_gib=48, efa_interfaces=1, network_gbps=25.0
    ),
    "g6e.12xlarge": InstanceSpec(
        vcpus=48, memory_gib=384, gpus=4, gpu_model="L40S", gpu_memory_gib=192, efa_interfaces=1, network_gbps=100.0
    ),
    "g6e.24xlarge": InstanceSpec(
        vcpus=96, memory_gib=768, gpus=4, gpu_model="L40S", gpu_memory_gib=192, efa_interfaces=2, network_gbps=200.0
    ),
    "g6e.48xlarge": InstanceSpec(
        vcpus=192, memory_gib=1536, gpus=8, gpu_model="L40S", gpu_memory_gib=384, efa_interfaces=4, network_gbps=400.0
    ),
    # NVIDIA A10G
    "g5.xlarge": InstanceSpec(vcpus=4, memory_gib=16, gpus=1, gpu_model="A10G", gpu_memory_gib=24, network_gbps=2.5),
    "g5.8xlarge": InstanceSpec(
        vcpus=32, memory_gib=128, gpus=1, gpu_model="A10G", gpu_memory_gib=24, efa_interfaces=1, network_gbps=25.0
    ),
    "g5.48xlarge": InstanceSpec(
        vcpus=192, memory_gib=768, gpus=8, gpu_model="A10G", gpu_memory_gib=192, efa_interfaces=1, network_gbps=100.0
    ),
    # NVIDIA A100 (p4d: A100-SXM4-40GB) / H100 (80GB HBM3) / H200
    "p4d.24xlarge": InstanceSpec(
        vcpus=96, memory_gib=1152, gpus=8, gpu_model="A100", gpu_memory_gib=320, efa_interfaces=4, network_gbps=400.0
    ),
    "p5.48xlarge": InstanceSpec(
        vcpus=192,
        memory_gib=2048,
        gpus=8,
        gpu_model="H100",
        gpu_memory_gib=640,
        efa_interfaces=32,
        network_gbps=3200.0,
    ),
    "p5e.48xlarge": InstanceSpec(
        vcpus=192,
        memory_gib=2048,
        gpus=8,
        gpu_model="H200",
        gpu_memory_gib=1128,
        efa_interfaces=32,
        network_gbps=3200.0,
    ),
    "p5en.48xlarge": InstanceSpec(
        vcpus=192,
        memory_gib=2048,
        gpus=8,
        gpu_model="H200",
        gpu_memory_gib=1128,
        efa_interfaces=16,
        network_gbps=3200.0,
    ),
}


def instance_spec(instance_type: str) -> InstanceSpec:
    """The table's row for `instance_type`; a type it does not list is refused, never guessed."""
    spec = INSTANCE_TYPES.get(instance_type)
    if spec is None:
        raise KeyError(f"{instance_type} is not in config/instance_types.py INSTANCE_TYPES (add its row, with sources)")
    return spec


def known_types(*, gpu: bool) -> list[str]:
    """Instance types of the table with (gpu=True) or without GPUs, in table order."""
    return [name for name, spec in INSTANCE_TYPES.items() if (spec.gpus > 0) == gpu]


def instance_family(instance_type: str) -> str:
    return instance_type.split(".", 1)[0]
