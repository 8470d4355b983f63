"""Rules of the `network` section (docs/STAGE_FILE.md): NAT gateways per AZ, room for the subnets, and a VPC
range AWS or the node does not reserve."""

from __future__ import annotations

import functools
import ipaddress

from ..derived import (
    SUBNET_LAYOUT,
    UNREACHABLE,
    smallest_vpc_prefix,
    subnet_plan,
)
from ..errors import ConfigError
from ..schema import StageConfig


def nat_gateways_and_subnets(cfg: StageConfig, path: str) -> None:
    zones = len(cfg.availability_zones)
    if cfg.network.nat_gateways > zones:
        raise ConfigError(
            path,
            "network.nat_gateways",
            f"{cfg.network.nat_gateways} NAT gateways for {zones} AZs (allowed: 1 to {zones}, one per AZ at most)",
        )
    if subnet_plan(cfg.network.vpc_cidr, zones) is None:
        layout = ", ".join(f"a /{prefix} {group}" for group, prefix in SUBNET_LAYOUT)
        smallest = smallest_vpc_prefix(zones)
        raise ConfigError(
            path,
            "network.vpc_cidr",
            f"{cfg.network.vpc_cidr} is too small for the subnets of {zones} AZs ({layout} subnet "
            f"per AZ, each aligned to its size) (allowed: a /{smallest} or larger for {zones} AZs)",
        )


# The reserved IPv4 ranges of config/derived.py (UNREACHABLE) that cannot be a VPC, by what they are; RFC 1918,
# 100.64.0.0/10 and 198.19.0.0/16 are allowed, 172.17.0.0/16 is refused besides.
# Why: docs/DECISIONS.md, "Stage file checks: where their limits come from".
_VPC_USABLE = tuple(
    ipaddress.IPv4Network(net)
    for net in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "198.19.0.0/16")
)
_RESERVED_AS = {
    "0.0.0.0/8": "'this network'",
    "127.0.0.0/8": "loopback",
    "169.254.0.0/16": "link-local (the instance metadata service and the Amazon DNS resolver)",
    "192.0.0.0/24": "IETF protocol assignments",
    "198.18.0.0/16": "benchmarking (RFC 2544)",
    "224.0.0.0/4": "multicast",
    "240.0.0.0/4": "reserved for future use",
    "172.17.0.0/16": "used by AWS services (and Docker's default bridge)",
}


@functools.lru_cache(maxsize=1)
def vpc_reserved_ranges() -> tuple[tuple[ipaddress.IPv4Network, str], ...]:
    """UNREACHABLE less the ranges a VPC may use (two CIDRs either nest or are disjoint), plus 172.17.0.0/16."""

    ranges = list(UNREACHABLE)
    for usable in _VPC_USABLE:
        kept: list[ipaddress.IPv4Network] = []
        for net in ranges:
            if net.subnet_of(usable):
                continue
            kept += list(net.address_exclude(usable)) if usable.subnet_of(net) else [net]
        ranges = kept
    ranges.append(ipaddress.IPv4Network("172.17.0.0/16"))
    return tuple((net, _RESERVED_AS.get(str(net), "a reserved range")) for net in sorted(ranges))


def vpc_range(cfg: StageConfig, path: str) -> None:
    vpc = ipaddress.IPv4Network(cfg.network.vpc_cidr)
    for reserved, what in vpc_reserved_ranges():
        if vpc.overlaps(reserved):
            raise ConfigError(
                path,
                "network.vpc_cidr",
                f"{vpc} overlaps {reserved}, {what}: not a range for a VPC (allowed: an RFC 1918 "
                "range such as 10.0.0.0/16, or 100.64.0.0/10; not 172.17.0.0/16)",
            )
