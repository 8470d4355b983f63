"""Secret shapes by class (issue #34, item 2): a key is secret-like by what its words mean, whatever their case
or separator; under such a key a long run of one token alphabet (hex, base32, lower-case or upper-case letters
and digits, base64 and base64url) is a secret; vendors' prefixed tokens are recognised by the shape of a prefix
and a token body, not only by a list; PEM and RFC 4716 headers and URL userinfo with a password are refused
anywhere. The project's own values (ARNs, digests, commit ids, KMS key ids, model ids, bucket names) are not.
Secret-shaped values are assembled from pieces, never written out whole."""

from __future__ import annotations

import io
import random
import string
import time
from contextlib import redirect_stderr, redirect_stdout

import pytest

from config import ConfigError
from config.__main__ import main
from config.secret_shapes import redact, secret_kind, secret_like_key

from ..helpers import config_with, merge, stage_data, write_stage
from ..helpers import refusal as _refusal

_RNG = random.Random(34)


def _run(alphabet: str, length: int) -> str:
    return "".join(_RNG.choice(alphabet) for _ in range(length))


HEX = _run("0123456789abcdef", 40)
HEX_UPPER = _run("0123456789ABCDEF", 32)
BASE32 = _run(string.ascii_uppercase + "234567", 32)
LOWER_ALNUM = _run(string.ascii_lowercase + string.digits, 32)
UPPER_ALNUM = _run(string.ascii_uppercase + string.digits, 24)
BASE64URL = _run(string.ascii_letters + string.digits + "-_", 22) + "-" + _run(string.ascii_letters, 3) + "9"
BASE62 = _run(string.ascii_letters + string.digits, 20)
DIGITS = _run(string.digits, 24)
UUID = "-".join(_run("0123456789abcdef", n) for n in (8, 4, 4, 4, 12))
BODY = "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5hJ7kL9"


# --- the key class: by the key's words, any case, any separator ------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        "password",
        "db_password",
        "dbPassword",
        "DB-PASSWORD",
        "Passwd",
        "passphrase",
        "pwd",
        "user.pwd",
        "PWD",
        "pass",
        "smtp_pass",
        "SMTPPass",
        "auth",
        "x-auth",
        "authToken",
        "AUTH_TOKEN",
        "token",
        "hf_token",
        "accessToken",
        "secret",
        "client_secret",
        "clientSecret",
        "deploy-secret",
        "api_key",
        "apiKey",
        "APIKey",
        "api-key",
        "apikey",
        "private_key",
        "signingKey",
        "credentials",
        "aws.credential",
    ],
)
def test_secret_like_keys_by_their_words(key):
    assert secret_like_key(key)


@pytest.mark.parametrize(
    "key",
    [
        "",
        "owner",
        "team",
        "image",
        "revision",
        "tokenizer",
        "tokenizer_revision",
        "input_tokens",
        "max_num_batched_tokens",
        "long_prefill_token_threshold",
        "kms_key_arn",
        "S3Key",
        "key",
        "author",
        "compass",
        "passenger",
        "bypass_cache",
        "token_path",
        "HF_TOKEN_PATH",
        "password_file",
        "secret_arn",
        "secret_name",
    ],
)
def test_keys_that_name_counts_references_or_other_words_are_not_secret_like(key):
    assert not secret_like_key(key)


# --- one alphabet under a secret-like key ------------------------------------------------------------------

ONE_ALPHABET = [HEX, HEX_UPPER, BASE32, LOWER_ALNUM, UPPER_ALNUM, BASE64URL, BASE62, DIGITS, UUID]


@pytest.mark.parametrize(
    "value", ONE_ALPHABET, ids=["hex", "HEX", "base32", "lower", "UPPER", "b64url", "b62", "digits", "uuid"]
)
@pytest.mark.parametrize("key", ["password", "pwd", "Auth", "pass", "api-key", "clientSecret", "X_AUTH_TOKEN"])
def test_a_long_run_of_one_alphabet_under_a_secret_like_key_is_a_secret(key, value):
    assert secret_kind(value, key) is not None
    assert secret_kind(f"  {value}\n", key) is not None  # around blanks too


def test_the_same_run_in_text_after_a_secret_like_name_is_a_secret():
    for value in (HEX, BASE32, LOWER_ALNUM, UUID):
        for text in (f"db_password={value}", f'"ApiKey": "{value}"', f"x-auth-token: {value} rest"):
            assert secret_kind(text, "note") is not None, text


@pytest.mark.parametrize(
    "key, value",
    [
        ("hf_token_secret", "arn:aws:secretsmanager:us-west-2:123456789012:secret:hf/token-AbCdEf"),
        ("db_password", "arn:aws:secretsmanager:us-west-2:123456789012:secret:db/pw-AbCdEf"),  # where it is kept
        ("revision", HEX),  # a commit id where a field allows it
        ("owner", HEX),
        ("tokenizer_revision", HEX),
        ("image", "763104351884.dkr.ecr.us-west-2.amazonaws.com/ray@sha256:" + "ab12" * 16),
        ("kms_key_arn", "arn:aws:kms:us-west-2:123456789012:key/" + UUID),
        ("kms_key_arn", "arn:aws:kms:us-west-2:123456789012:key/mrk-" + HEX[:32]),
        ("tokenizer", "Qwen/Qwen3.5-9B"),
        ("bucket", "cdk-hnb659fds-assets-123456789012-us-west-2"),
        ("cidr", "10.0.0.0/16"),
        ("auth_team", "platform"),  # about a secret, not one: its last word names no secret
        ("token_budget", "small"),
        ("secret", ""),  # nothing under the key
        ("S3Key", HEX + ".zip"),
        ("note", "see https://github.com/org/repo and git@github.com:org/repo.git"),
    ],
)
def test_the_projects_own_values_are_not_secrets(key, value):
    assert secret_kind(value, key) is None


# --- any value under a key that names a secret, however short (issue #52) ----------------------------------


@pytest.mark.parametrize(
    "key",
    ["password", "db_password", "DB-PASSWORD", "pwd", "pass", "passphrase", "client_secret", "clientSecret",
     "api_key", "APIKey", "authToken", "X-Auth-Token", "credentials", "private_key", "hf_token_secret"],
)  # fmt: skip
@pytest.mark.parametrize("value", ["hunter2", "x", "correct horse battery staple", "pd-inference/hf-token"])
def test_any_value_under_a_key_that_names_a_secret_is_one(key, value):
    assert secret_kind(value, key) == "a value under a secret-like key"


def test_the_reference_field_and_a_secrets_manager_arn_are_where_a_secret_is_kept():
    assert secret_kind("pd-inference/hf-token", "hf_token_secret", reference=True) is None
    arn = "arn:aws:secretsmanager:us-west-2:123456789012:secret:db/pw-AbCdEf"
    assert secret_kind(arn, "db_password") is None
    assert secret_kind(arn + " hunter2", "db_password") == "a value under a secret-like key"


@pytest.mark.parametrize(
    "change, field, secret",
    [
        ({"tags": {"db_password": "hunter2"}}, "tags.db_password", "hunter2"),
        ({"tags": {"Pwd": "pw"}}, "tags.Pwd", "pw"),
        ({"tags": {"hf_token_secret": "pd-inference/hf-token"}}, "tags.hf_token_secret", "pd-inference/hf-token"),
        ({"unknown": {"password": ["s3cret", "other"]}}, "unknown.password[0]", "s3cret"),  # a list's items
    ],
)
def test_a_short_value_under_a_secret_name_is_refused_without_the_value(tmp_path, change, field, secret):
    line = _refusal(tmp_path, change)
    assert f": {field}: looks like a value under a secret-like key, " in line and secret not in line, line


def test_the_stage_files_reference_field_still_takes_a_secret_name(tmp_path):
    cfg = config_with(tmp_path, serving={"hf_token_secret": "pd-inference/hf-token"})
    assert cfg.serving.hf_token_secret == "pd-inference/hf-token"


# --- vendor prefixes and key headers, under any key --------------------------------------------------------

HEX32, HEX64 = HEX[:32], (HEX + HEX_UPPER.lower())[:64]
VENDORS = [
    "gh" + "o_" + BODY[:36],
    "gh" + "s_" + BODY[:36],
    "github" + "_pat_" + "11ABCDEFG0" + BODY[:12] + "_" + BODY + BODY[:17],
    "sk" + "_test_" + BODY[:24],
    "rk" + "_live_" + BODY[:24],
    "wh" + "sec_" + BODY[:32],
    "sk-" + BODY[:40] + "aZ9x0Y1w",  # an OpenAI key of the first form, no T3Blbk marker
    "sk-" + "proj-" + BODY + "_" + BODY + "-" + BODY[:20],
    "sk-" + "ant-admin01-" + BODY + BODY[:10],
    "pypi" + "-" + BODY + BODY,
    "SG" + "." + BODY[:22] + "." + BODY[:43],
    "SK" + HEX32,  # a Twilio API key
    "dop" + "_v1_" + HEX64,  # another vendor's prefix style: a version segment, a hex body
    "shp" + "at_" + HEX32,
    "lin" + "_api_" + BODY[:40],
    "hv" + "s." + BODY[:24] + "Qx7",
    "tskey-" + "auth-" + BODY[:12] + "CNTRL-" + BODY[:30],
    "glsa" + "_" + BODY[:32] + "_" + HEX[:8],
    "AGE-SECRET-KEY-" + "1" + BASE32 + BASE32[:26],
    "ya" + "29." + BODY[:30] + "-" + BODY[:20],  # a prefix with a digit, then a dot
    "sq0" + "atp-" + BODY[:22],  # a prefix with a digit, then a dash
]


@pytest.mark.parametrize("value", VENDORS, ids=[v[:6] for v in VENDORS])
def test_vendor_prefixed_tokens_are_secrets_under_any_key(value):
    assert secret_kind(value, "owner") is not None
    assert secret_kind(f"token={value} trailing", "owner") is not None


@pytest.mark.parametrize(
    "value",
    [
        "---- BEGIN SSH2 " + "PUBLIC KEY ----\nComment: x\nAAAAB3NzaC1yc2E\n---- END SSH2 PUBLIC KEY ----",
        "---- BEGIN SSH2 " + "ENCRYPTED PRIVATE KEY ----",
        "----BEGIN SSH2 " + "PRIVATE KEY----",
        "---- BEGIN " + "PRIVATE KEY ----",
        "-----BEGIN DSA " + "PRIVATE KEY-----",
        "-----BEGIN OPENSSH " + "PRIVATE KEY-----",
    ],
)
def test_key_headers_with_four_or_five_dashes_are_secrets(value):
    assert secret_kind(value, "owner") is not None


@pytest.mark.parametrize(
    "value",
    [
        "https://" + "user:" + "hunter2@example.com/x",
        "postgres://" + "admin:" + "s3cr3t@db.internal:5432/app",
        "redis://" + ":" + "pw@cache:6379",
        "git+https://" + "bob:" + "tok@github.com/org/repo.git",
        "clone " + "https://u:" + "p@h/x now",
        "HTTPS://" + "User:" + "Pass@Host",
    ],
)
def test_url_userinfo_with_a_password_is_a_secret_anywhere(value):
    assert secret_kind(value, "owner") == "a URL with a password in it"
    assert "hunter2" not in redact(value) and "s3cr3t" not in redact(value)


@pytest.mark.parametrize(
    "value",
    [
        "https://user@example.com/x",
        "https://example.com:8443/path",
        "https://example.com/path?a=b:c@d",
        "s3://bucket/prefix@2025/x:y",
        "git@github.com:org/repo.git",
        "owner@example.com",
        "sk-not-a-key",
        "pd-inference-dev-gpu-nodegroup-2025",
        "asset." + HEX64,
        "cdk-hnb659fds-container-assets-123456789012-us-west-2:" + HEX64,
    ],
)
def test_lookalikes_are_not_secrets(value):
    assert secret_kind(value, "owner") is None


# --- refused in a stage file: one line naming file and field, never the value, exit 2 -----------------------


@pytest.mark.parametrize(
    "change, field, secret",
    [
        ({"tags": {"db-password": HEX}}, "tags.db-password", HEX),
        ({"tags": {"Pwd": BASE32}}, "tags.Pwd", BASE32),
        ({"tags": {"authToken": LOWER_ALNUM}}, "tags.authToken", LOWER_ALNUM),
        ({"tags": {"owner": "https://" + "bob:" + "hunter2hunter2@example.com"}}, "tags.owner", "hunter2hunter2"),
        ({"tags": {"team": VENDORS[12]}}, "tags.team", VENDORS[12]),
        ({"serving": {"model": {"id": VENDORS[7]}}}, "serving.model.id", VENDORS[7]),
        ({"benchmark": {"tokenizer": "---- BEGIN SSH2 " + "PUBLIC KEY ----"}}, "benchmark.tokenizer", "BEGIN SSH2"),
        ({"unknown": {"client_pass": UUID}}, "unknown.client_pass", UUID),
    ],
)
def test_refused_in_a_stage_file_in_one_line_without_the_value(tmp_path, change, field, secret):
    line = _refusal(tmp_path, change)
    assert f": {field}: looks like " in line, line
    assert secret not in line and secret[:12] not in line


def test_the_validator_exits_2_with_one_line_and_no_traceback(tmp_path):
    path = write_stage(tmp_path, merge(stage_data("dev"), {"tags": {"api_key": HEX}}), name="dev")
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["validate", str(path)])
    lines = err.getvalue().splitlines()
    assert code == 2 and out.getvalue() == ""
    assert len(lines) == 1 and lines[0].startswith(f"{path}: tags.api_key: looks like "), lines
    assert HEX not in lines[0] and "Traceback" not in err.getvalue()


def test_messages_that_quote_a_url_with_a_password_do_not_show_it():
    error = ConfigError("dev.yaml", "x", "got 'https://" + "bob:" + "hunter2hunter2@example.com' here")
    assert "hunter2hunter2" not in str(error) and "a URL with a password" in str(error)


# --- still linear ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "password=" + "a" * 200_000,  # one long run after a name
        ("pwd: " + "ab" * 8 + " ") * 10_000,  # many short values after names
        "https://" + "u" * 100_000 + ":" + "p" * 100_000,  # userinfo without its @
        ("xyz_" * 50_000),  # prefixes without bodies
        ("---- BEGIN " * 20_000),  # headers without an end
        ("ab-" * 100_000),
    ],
    ids=["long-run", "many-names", "userinfo", "prefixes", "headers", "dashes"],
)
def test_the_new_shapes_stay_linear(text):
    start = time.perf_counter()
    secret_kind(text, "password")
    secret_kind(text, "owner")
    assert time.perf_counter() - start < 2


def test_a_jwt_shaped_value_whose_header_nests_past_jsons_recursion_is_no_jwt_and_no_crash():
    import base64

    head = base64.urlsafe_b64encode(b'{"a":' * 3000).decode().rstrip("=")  # was a RecursionError: exit 3
    assert secret_kind(f"{head}.eyJzdWIiOiIxIn0.c2ln") is None
