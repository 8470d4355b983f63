"""Turn any AWS or network failure into one line: what failed and why, never a traceback; and the fix
that belongs to the cause (a permission problem is not fixed by deploying, nor a network one by
logging in)."""

from __future__ import annotations

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConfigParseError,
    CredentialRetrievalError,
    HTTPClientError,
    InvalidConfigError,
    InvalidEndpointConfigurationError,
    InvalidRegionError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
    ProfileNotFound,
    SSOError,
    TokenRetrievalError,
    UnknownCredentialError,
)
from botocore.exceptions import ConnectionError as AwsConnectionError
from botocore.parsers import ResponseParserError

from clients.kube import describe_transport


class SetupError(Exception):
    """A broken local AWS set-up found while a session resolves its credentials or reads an answer (a
    credential_process that hangs or fails, an endpoint that does not answer as AWS): the message is
    the whole line (setup_problem returns it; exit 2), whitespace and newlines folded into one line."""

    def __init__(self, message: str) -> None:
        line = " ".join(message.split())
        super().__init__(line if len(line) <= 1000 else line[:997] + "...")


def describe(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = error.get("Code", "Error")
        message = error.get("Message", "")
        operation = getattr(exc, "operation_name", "")
        return f"{operation}: {code}: {message}".strip(": ")
    if isinstance(exc, NoCredentialsError):
        return "no AWS credentials found"
    if isinstance(exc, NoRegionError):
        return "no AWS region"
    if isinstance(exc, BotoCoreError):
        return str(exc)
    return describe_transport(exc)


def error_code(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        return exc.response.get("Error", {}).get("Code", "")
    return ""


AWS_ERRORS = (ClientError, BotoCoreError)

LOG_IN = "log in (aws sso login, or set AWS_PROFILE / AWS_ACCESS_KEY_ID) and run again"
_EXPIRED = {"ExpiredToken", "ExpiredTokenException", "RequestExpired", "TokenRefreshRequired"}
_INVALID = {
    "InvalidClientTokenId",
    "UnrecognizedClientException",
    "SignatureDoesNotMatch",
    "AuthFailure",
    "IncompleteSignature",
    "InvalidSignatureException",
}
_DENIED = {
    "AccessDenied",
    "AccessDeniedException",
    "UnauthorizedOperation",
    "UnauthorizedException",
    "Forbidden",
    "AuthorizationError",
}


def aws_fix(exc: BaseException, default: str = "") -> str:
    """The fix for the causes every AWS call shares (credentials, permissions, network), else `default`
    (the fix of the check's own failure, e.g. "deploy the stage first" for a missing resource)."""
    code = error_code(exc)
    if isinstance(exc, (NoCredentialsError, PartialCredentialsError)):
        return LOG_IN
    if isinstance(exc, (CredentialRetrievalError, TokenRetrievalError, SSOError)) or code in _EXPIRED:
        return "the credentials expired or could not be refreshed: log in again (aws sso login) and run again"
    if code in _INVALID:
        return "the credentials are not valid for this account: check AWS_PROFILE / AWS_ACCESS_KEY_ID, then run again"
    if code in _DENIED:
        operation = getattr(exc, "operation_name", "") or "this call"
        return f"the credentials may not call {operation}: use a role allowed to (or ask the account's admin)"
    if isinstance(exc, (AwsConnectionError, HTTPClientError)):
        return "cannot reach the AWS API: check the network (proxy, VPC endpoints) and the stage's region"
    return default


def setup_problem(exc: BaseException) -> str:
    """One line (what is wrong with the local AWS configuration, and the fix) for the errors botocore
    raises before any call is made (and the SetupErrors of ops/aws_clients.py); "" for anything else."""
    if isinstance(exc, SetupError):
        return str(exc)
    if isinstance(exc, ResponseParserError):  # a client outside a session of aws_clients.guard_answers
        detail = " ".join(str(exc).split())[:150]
        return (
            f"an AWS endpoint answered something botocore cannot parse as AWS ({detail}): check "
            f"AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_<SERVICE>, endpoint_url in the AWS config, and HTTPS_PROXY"
        )
    if isinstance(exc, ProfileNotFound):
        profile = exc.kwargs.get("profile", "?")
        return (
            f"AWS profile {profile!r} (from AWS_PROFILE or AWS_DEFAULT_PROFILE) is in no AWS config file: "
            f"use one that `aws configure list-profiles` lists, or unset the variable"
        )
    if isinstance(exc, ConfigParseError):
        path = exc.kwargs.get("path", "?")
        return (
            f"cannot parse the AWS config file {path}: fix its syntax ([profile NAME] sections of key = value "
            f"lines), or point AWS_CONFIG_FILE / AWS_SHARED_CREDENTIALS_FILE at a valid file"
        )
    if isinstance(exc, ValueError) and str(exc).startswith("Invalid endpoint"):
        url = str(exc).split(":", 1)[1].strip()
        return (
            f"the AWS endpoint URL {url!r} is not a URL (AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_<SERVICE> or "
            f"endpoint_url in the AWS config): unset it, or give a full URL such as https://host:port"
        )
    if isinstance(exc, NoRegionError):
        return "no AWS region: set AWS_REGION (or region in the AWS profile)"
    if isinstance(
        exc, (InvalidConfigError, InvalidEndpointConfigurationError, InvalidRegionError, UnknownCredentialError)
    ):
        return f"the AWS configuration is not usable: {exc} (check it with `aws configure list`)"
    return ""
