"""Rules of the `cluster` and `cluster.endpoint` sections (docs/STAGE_FILE.md): who reaches the public endpoint,
who administers the cluster, and the warnings for the placeholders the example stages ship."""

from __future__ import annotations

import ipaddress
import re

from ..derived import (
    PUBLIC_ENDPOINT_LIMIT,
    documentation_ranges,
    endpoint_wide_open,
    is_unreachable,
    public_addresses,
)
from ..errors import ConfigError, short
from ..schema import StageConfig, prefix_form_problem


def _endpoint_cidr(path: str, field: str, cidr: str) -> None:
    """One public_access_cidrs entry: a masked, IPv4, publicly reachable CIDR block."""
    if "/" not in cidr:  # the schema let ipaddress read it (a bare address is a /32); the template would not
        raise ConfigError(
            path,
            field,
            f"{cidr} has no prefix length: EKS's publicAccessCidrs are CIDR blocks "
            f"(allowed: {cidr}/{32 if ':' not in cidr else 128} for this one address, or its range)",
        )
    problem = prefix_form_problem(cidr, ipaddress.ip_network(cidr))
    if problem:
        raise ConfigError(path, field, problem)
    if ipaddress.ip_network(cidr).version == 6:
        raise ConfigError(
            path,
            field,
            f"{cidr} is IPv6: EKS takes no IPv6 CIDR in publicAccessCidrs of an IPv4 cluster (allowed: IPv4 CIDRs)",
        )
    if is_unreachable(cidr):
        raise ConfigError(
            path,
            field,
            f"{cidr} is a private or reserved range, never the source of a request to the public "
            "endpoint (allowed: public IPv4 ranges; clients inside the VPC use "
            "private_access: true)",
        )


def public_endpoint(cfg: StageConfig, path: str) -> None:
    """Who reaches the public endpoint: IPv4 only (EKS takes no IPv6 CIDR on an IPv4 cluster, which this
    app builds), public ranges only (a private range never reaches a public endpoint: in-VPC clients use
    private_access), and, without allow_public_internet, at most a /8's worth of public addresses in the
    union of the list (so 0.0.0.0/0 split into pieces is judged like 0.0.0.0/0)."""
    endpoint = cfg.cluster.endpoint
    field = "cluster.endpoint.public_access_cidrs"
    if not endpoint.public and not endpoint.private_access:
        raise ConfigError(
            path,
            "cluster.endpoint",
            "neither public_access_cidrs nor private_access: nobody could reach the API "
            "(allowed: a public CIDR allow-list, private_access: true, or both)",
        )
    for index, cidr in enumerate(endpoint.public_access_cidrs):
        _endpoint_cidr(path, f"{field}[{index}]", cidr)
    # IPv4 only by now (an IPv6 CIDR is refused above): collapse_addresses takes one version.
    union = list(ipaddress.collapse_addresses(ipaddress.IPv4Network(c) for c in endpoint.public_access_cidrs))
    open_to_all = union == [ipaddress.IPv4Network("0.0.0.0/0")]
    if not endpoint.private_access and not open_to_all:
        raise ConfigError(
            path,
            "cluster.endpoint.private_access",
            "false, but the kubectl provider runs in the private subnets and reaches a "
            "CIDR-restricted public endpoint only through the NAT gateway "
            "(allowed: true)",
        )
    covered = public_addresses(endpoint.public_access_cidrs)
    if covered > PUBLIC_ENDPOINT_LIMIT and not endpoint.allow_public_internet:
        cidrs = endpoint.public_access_cidrs
        whole = [i for i, c in enumerate(cidrs) if ipaddress.ip_network(c).prefixlen == 0]
        alone = [i for i, c in enumerate(cidrs) if public_addresses([c]) > PUBLIC_ENDPOINT_LIMIT]
        # One range too wide on its own is named by its index; pieces too wide together, by the list.
        if open_to_all:
            where, problem = (
                (f"{field}[{whole[0]}]", f"{cidrs[whole[0]]} opens")
                if whole
                else (field, f"{', '.join(cidrs)} together open")
            )
            problem += " the Kubernetes API to the whole internet"
        else:
            where, what = (
                (f"{field}[{alone[0]}]", f"{cidrs[alone[0]]} covers") if alone else (field, "the ranges together cover")
            )
            problem = (
                f"{what} {covered:,} public addresses ({covered / 2**32:.1%} of IPv4), more than a /8's "
                f"worth ({PUBLIC_ENDPOINT_LIMIT:,})"
            )
        raise ConfigError(
            path,
            where,
            f"{problem} (allowed: narrower CIDRs, at most a /8's worth of public "
            "addresses in all, or allow_public_internet: true to accept it)",
        )


def admin_access(cfg: StageConfig, path: str) -> None:
    """Who can use kubectl on the cluster: only the principals of cluster.admin_principal_arns get a
    cluster-admin access entry from this app, and no person does by default (aws_eks_v2's creator entry
    goes to CloudFormation's execution role). An empty list therefore needs allow_no_admin_principals:
    true, saying that access entries are managed elsewhere; a list together with it is a contradiction."""
    cluster = cfg.cluster
    count = len(cluster.admin_principal_arns)
    if not count and not cluster.allow_no_admin_principals:
        raise ConfigError(
            path,
            "cluster.admin_principal_arns",
            "empty: no IAM principal gets a cluster-admin access entry, so nobody can use kubectl "
            "on the cluster (allowed: your admin IAM role's ARN, e.g. "
            "arn:aws:iam::<account>:role/<name>; or cluster.allow_no_admin_principals: true when "
            "the access entries are managed outside this app)",
        )
    if count and cluster.allow_no_admin_principals:
        raise ConfigError(
            path,
            "cluster.allow_no_admin_principals",
            f"true, but cluster.admin_principal_arns lists {count} principal(s) that get cluster "
            "admin: the two contradict each other (allowed: false or unset when the list names "
            "admins; true only with an empty list)",
        )


# --- cluster.admin_principal_arns ------------------------------------------------------------------------
# EKS access entries take IAM roles and users, never an STS session, and one principal in one entry only:
# a session ARN or a repeated ARN fails the deploy (stacks/cluster.py grant_access).
# Why: docs/DECISIONS.md, "Stage file checks: where their limits come from".
IAM_PRINCIPAL = re.compile(r"arn:(aws(?:-[a-z]+)*):iam::([0-9]{12}):(role|user)(/(?:[^/]*/)*)([^/]*)")
# IAM's names (IAM API Reference, CreateRole RoleName and CreateUser UserName: 1-64 of [\w+=,.@-]; Path: "/" or
# "/.../", at most 512 characters): an ARN outside them names a role or user that cannot exist.
IAM_NAME = re.compile(r"[A-Za-z0-9_+=,.@-]{1,64}")
IAM_PATH_SEGMENT = re.compile(r"[A-Za-z0-9_+=,.@-]+")
IAM_PATH_MAX = 512
STS_SESSION = re.compile(r"arn:(aws(?:-[a-z]+)*):(?:sts|iam)::([0-9]{12}):(assumed-role|federated-user)/(.+)")


def iam_name_problem(kind: str, iam_path: str, name: str) -> str | None:
    """Why a role or user of this path and name cannot exist in IAM, or None."""
    if len(iam_path) > IAM_PATH_MAX:
        return f"has a path of {len(iam_path)} characters, more than IAM's {IAM_PATH_MAX}"
    if not all(IAM_PATH_SEGMENT.fullmatch(part) for part in iam_path.split("/")[1:-1]):
        return f"has an empty segment in its path {short(iam_path, 60)}"
    if not name:
        return f"names no {kind} after its path {short(iam_path, 60)}"
    if not IAM_NAME.fullmatch(name):
        return f"has a {kind} name of {len(name)} characters, more than IAM's 64"
    return None


def _iam_principal(path: str, field: str, arn: str) -> bool:
    """Whether `arn` is an IAM role or user ARN; one whose path or name IAM cannot hold is refused here."""
    principal = IAM_PRINCIPAL.fullmatch(arn)
    problem = iam_name_problem(*principal.group(3, 4, 5)) if principal else None
    if problem:
        raise ConfigError(
            path,
            field,
            f"{short(arn, 120)} {problem}: no such principal can exist (allowed: arn:aws:iam::ACCOUNT:role/NAME "
            "or role/PATH/NAME, NAME 1 to 64 letters, digits and _+=,.@-)",
        )
    return principal is not None


def admin_principals(cfg: StageConfig, path: str) -> None:
    arns = cfg.cluster.admin_principal_arns
    for index, arn in enumerate(arns):
        field = f"cluster.admin_principal_arns[{index}]"
        if _iam_principal(path, field, arn):
            if arn.lower() in (other.lower() for other in arns[:index]):
                raise ConfigError(
                    path,
                    field,
                    f"{short(arn, 120)} is listed twice: EKS takes one access entry per "
                    "IAM principal, and IAM names ignore case (allowed: each ARN once)",
                )
            continue
        session = STS_SESSION.fullmatch(arn)
        if session:
            partition, account, kind, rest = session.groups()
            role = f"arn:{partition}:iam::{account}:role/{rest.split('/')[0]}" if kind == "assumed-role" else None
            raise ConfigError(
                path,
                field,
                f"{short(arn, 120)} is an STS session principal ({kind}), which EKS access entries "
                "refuse: a session is temporary, not an identity that can hold an access entry "
                f"(allowed: the role's IAM ARN, arn:{partition}:iam::{account}:role/NAME"
                + (f", here {role} (with the role's path, if it has one)" if role else "")
                + ")",
            )
        raise ConfigError(
            path,
            field,
            f"{short(arn, 120)} is not an IAM role or user ARN, the only principals an "
            "access entry takes (allowed: arn:aws:iam::ACCOUNT:role/NAME, or "
            "arn:aws:iam::ACCOUNT:user/NAME)",
        )


def open_endpoint(cfg: StageConfig) -> tuple[str, str] | None:
    """(field, problem) when allow_public_internet lets more than a /8 of the internet reach the API (public_endpoint
    refuses that without it)."""
    endpoint = cfg.cluster.endpoint
    if not (endpoint.allow_public_internet and endpoint_wide_open(endpoint.public_access_cidrs)):
        return None
    return (
        "cluster.endpoint.allow_public_internet",
        (
            f"true: the Kubernetes API endpoint is open to more than a /8 of the internet "
            f"({', '.join(endpoint.public_access_cidrs)}): prefer a CIDR allow-list of your egress ranges, or "
            "private_access alone"
        ),
    )


def placeholder_endpoint_cidrs(cfg: StageConfig) -> tuple[str, str] | None:
    """(field, problem) when the public endpoint admits a documentation range only an example uses."""
    endpoint = cfg.cluster.endpoint
    found = documentation_ranges(endpoint.public_access_cidrs) if endpoint.public else []
    if not found:
        return None
    return (
        "cluster.endpoint.public_access_cidrs",
        (
            f"{', '.join(found)} is a documentation range (RFC 5737) nobody connects from: put your office, VPN or "
            "CI egress ranges there, or [] for a private-only endpoint"
        ),
    )


def no_admin_principal(cfg: StageConfig) -> tuple[str, str] | None:
    """(field, problem) when nobody is given cluster-admin rights (allowed with allow_no_admin_principals)."""
    if cfg.cluster.admin_principal_arns:
        return None
    return (
        "cluster.admin_principal_arns",
        (
            "empty: after the deploy nobody can use kubectl or `ops verify` (only the verify runner): put your admin "
            "IAM role's ARN there (arn:aws:iam::<account>:role/<name>) and delete allow_no_admin_principals"
        ),
    )
