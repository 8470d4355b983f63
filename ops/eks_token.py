"""An EKS authentication token built with boto3 alone (what `aws eks get-token` does): a presigned
STS GetCallerIdentity URL carrying the cluster name in the signed `x-k8s-aws-id` header."""

from __future__ import annotations

import base64

import boto3

TOKEN_PREFIX = "k8s-aws-v1."
CLUSTER_HEADER = "x-k8s-aws-id"
TOKEN_LIFETIME_SECONDS = 60


def token(session: boto3.session.Session, cluster_name: str, region: str) -> str:
    sts = session.client("sts", region_name=region, endpoint_url=f"https://sts.{region}.amazonaws.com")

    def sign_cluster_name(request, **_):
        request.headers[CLUSTER_HEADER] = cluster_name

    sts.meta.events.register("before-sign.sts.GetCallerIdentity", sign_cluster_name)
    url = sts.generate_presigned_url(
        "get_caller_identity", Params={}, ExpiresIn=TOKEN_LIFETIME_SECONDS, HttpMethod="GET"
    )
    return TOKEN_PREFIX + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")
