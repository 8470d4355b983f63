"""Secrets never land in artifacts: everything a synth writes (templates, asset manifests and handler
code, rendered YAML) is scanned for secret-shaped values and for canary values planted in the synth's
environment. The token path stays Secrets Manager -> CSI mount -> HF_TOKEN_PATH."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time

import pytest

from config.secret_scan import scan, scanned_files
from tests.helpers import ROOT, clean_env, merge, stage_data, write_stage

CANARY_HF = "hf_" + "Canary" * 6
CANARY_KEY_ID = "AKIA" + "CANARY1234567890"
CANARY_SECRET = "canary/" + "S" * 33


@pytest.fixture(scope="module")
def synth_with_canaries(tmp_path_factory):
    """Both stages plus a stage with a token secret, synthesized with canaries in the environment."""
    folder = tmp_path_factory.mktemp("config")
    for stage in ("dev", "prod"):
        shutil.copy(ROOT / "config" / f"{stage}.yaml", folder)
    write_stage(
        folder,
        merge(
            stage_data("dev"),
            {
                "stage": "gated",
                "serving": {"hf_token_secret": "arn:aws:secretsmanager:us-west-2:123456789012:secret:hf/token-AbCdEf"},
            },
        ),
    )
    out = tmp_path_factory.mktemp("cdk.out")
    env = clean_env(
        CDK_OUTDIR=str(out),
        CDK_CONTEXT_JSON=json.dumps({"config_dir": str(folder), "nag": True}),
        HF_TOKEN=CANARY_HF,
        HUGGING_FACE_HUB_TOKEN=CANARY_HF,
        AWS_ACCESS_KEY_ID=CANARY_KEY_ID,
        AWS_SECRET_ACCESS_KEY=CANARY_SECRET,
    )
    subprocess.run([sys.executable, "app.py"], cwd=ROOT, env=env, check=True, capture_output=True, timeout=300)
    return out


def test_synth_output_has_no_secret_shaped_values(synth_with_canaries):
    assert scanned_files(synth_with_canaries) > 30  # templates, manifests, handler code, YAML
    findings = scan(synth_with_canaries, secrets=[CANARY_HF, CANARY_KEY_ID, CANARY_SECRET])
    assert [str(f) for f in findings] == []


def test_the_gated_stage_mounts_the_token_as_a_file(synth_with_canaries):
    rendered = (synth_with_canaries / "k8s" / "gated" / "inference.yaml").read_text()
    assert "kind: SecretProviderClass" in rendered and "HF_TOKEN_PATH" in rendered
    assert "kind: Secret\n" not in rendered


def test_scan_finds_a_planted_secret(synth_with_canaries, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(synth_with_canaries / "k8s", copy)
    target = copy / "dev" / "inference.yaml"
    target.write_text(target.read_text().replace("value: DS", f"value: {CANARY_HF}"))
    (copy / "dev" / "key.pem").write_text("-----BEGIN RSA PRIVATE KEY-----\nMIIB\n")
    kinds = sorted(f.kind for f in scan(copy, secrets=[CANARY_HF]))
    assert kinds == ["Hugging Face token", "configured secret #1", "private key"]


def test_scan_finds_the_new_shapes_on_their_lines(tmp_path):
    (tmp_path / "a.yaml").write_text(
        "one\n"
        + "token: gl"
        + "pat-"
        + "aB3dE5gH7jK9mN1pQ3sT\n"
        + "three\n"
        + "-----BEGIN PGP "
        + "PRIVATE KEY BLOCK-----\n"
        + "x: xo"
        + "xb-1234567890-abcdefghijkl\n"
    )
    assert [str(f) for f in scan(tmp_path)] == [
        "a.yaml:4: private key",
        "a.yaml:2: GitLab token",
        "a.yaml:5: Slack token",
        # the GitLab token again, by its class: a vendor's prefix and a token, and a token under `token:`
        "a.yaml:2: vendor token",
        "a.yaml:2: token under a secret-like name",
    ]


def test_scan_finds_round_five_shapes_in_generated_files(tmp_path):
    (tmp_path / "handler.py").write_text(
        'headers = {"Authorization": "Bear'
        + 'er 0123456789abcdef0123456789abcdef"}\n'
        + "jwt = 'ey"
        + "JhbGciOiJub25lIn0.ey"
        + "JzdWIiOiJhZG1pbiJ9.'\n"
        + "key = '0123456789abcdef"
        + "fedcba9876543210-us21'\n"
        + "azure = 'xYz8"
        + "Q~aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3f'\n"
    )
    found = {str(f) for f in scan(tmp_path)}
    assert {
        "handler.py:1: bearer token",
        "handler.py:2: JSON Web Token",
        "handler.py:3: token with a datacenter suffix",
        "handler.py:4: Azure AD client secret",
    } <= found, found


def test_scan_is_linear_in_the_matches(tmp_path):
    """Line numbers from the newline offsets (bisect), not a count from the start of the file per match: 100,000
    matches in 7.7 MB took 159 s before (measured on this project's CI-sized host), 1.7 s after."""
    canary = "canary-" + "Q" * 20
    (tmp_path / "big.txt").write_text(("x" * 50 + canary + "\n") * 100_000)
    start = time.perf_counter()
    findings = scan(tmp_path, secrets=[canary])
    elapsed = time.perf_counter() - start
    assert [f.line for f in findings] == list(range(1, 100_001))
    assert elapsed < 10, elapsed


def test_a_text_file_over_the_cap_is_reported_not_skipped(tmp_path, monkeypatch):
    from config import secret_scan

    monkeypatch.setattr(secret_scan, "MAX_BYTES", 1000)
    (tmp_path / "small.txt").write_text("fine\n")
    (tmp_path / "large.txt").write_text("x" * 1001)
    (tmp_path / "blob.bin").write_bytes(b"\0" * 2000)  # not text: not scanned, as before
    assert [str(f) for f in scan(tmp_path)] == [
        "large.txt:0: a text file over 1000 bytes, not scanned (allowed: up to 1000 bytes)"
    ]
    assert scanned_files(tmp_path) == 1


# --- issue #34 item 2: secret shapes by class, in what a synth writes -------------------------------------

HEX40 = "3f9c2a7b" + "e41d0c86" + "5ab7f2e9" + "d0134c68" + "b7a9e5f1"  # a hex token (a password, say)
BASE32 = "JBSWY3DP" + "EHPK3PXP" + "KRUGS4ZA" + "MFZWIZLO"


def test_scan_finds_tokens_under_secret_like_names_urls_and_vendor_prefixes(tmp_path):
    (tmp_path / "template.json").write_text(
        '{\n "Resources": {\n  "Db": {\n   "Properties": {\n'
        + '    "MasterUserPassword": "'
        + HEX40
        + '",\n    "Environment": [\n     {\n      "Name": "SMTP_PASS",\n      "Value": "'
        + BASE32
        + '"\n     }\n    ],\n    "Url": "postgres://'
        + "admin:"
        + 'hunter2@db.internal/app"\n   }\n  }\n }\n}\n'
    )
    (tmp_path / "inference.yaml").write_text(
        "env:\n  - name: HF_TOKEN_PATH\n    value: /mnt/secrets/hf-token\n  - name: X_AUTH_TOKEN\n    value: "
        + HEX40
        + "\nkey: |\n  ---- BEGIN SSH2 "
        + "PUBLIC KEY ----\nother: dop"
        + "_v1_"
        + HEX40
        + HEX40[:24]
        + "\n"
    )
    assert [str(f) for f in scan(tmp_path)] == [
        "inference.yaml:7: SSH2 key file",
        "inference.yaml:8: vendor token",
        "inference.yaml:4: token in a secret-like variable",
        "template.json:12: URL with a password in it",
        "template.json:5: token under a secret-like name",
        "template.json:8: token in a secret-like variable",
    ]


def test_scan_passes_the_synths_own_hashes_names_and_references(tmp_path):
    (tmp_path / "manifest.json").write_text(
        '{"files": {"'
        + HEX40
        + HEX40[:24]
        + '": {"source": {"path": "asset.'
        + HEX40
        + HEX40[:24]
        + '.zip"}, "destinations": {"d": {"bucketName": "cdk-hnb659fds-assets-123456789012-us-west-2",'
        + ' "objectKey": "'
        + HEX40
        + HEX40[:24]
        + '.zip"}}}},\n "S3Key": "'
        + HEX40
        + '.zip", "HfTokenSecretArn": "arn:aws:secretsmanager:us-west-2:123456789012:secret:hf/token-AbCdEf",\n'
        + ' "labels": {"aws.cdk.eks/prune-c86230b7bd32583bfd8a26b0c47d61f91c1bd6cab5": ""},\n'
        + ' "ServiceToken": "arn:aws:lambda:us-west-2:123456789012:function:pd-Handler-1A2B3C4D5E6F",\n'
        + ' "kms_key_arn": "arn:aws:kms:us-west-2:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab",\n'
        + ' "Image": "763104351884.dkr.ecr.us-west-2.amazonaws.com/ray@sha256:'
        + HEX40
        + HEX40[:24]
        + '", "tokenizer": "Qwen/Qwen3.5-9B", "url": "https://github.com/org/repo"}\n'
    )
    assert [str(f) for f in scan(tmp_path)] == []


def test_the_new_shapes_keep_the_scan_linear(tmp_path):
    """Near misses of every new shape, 4 MB of them: a name before many short values, prefixes without a
    token, userinfo without its @, headers without their end."""
    unit = 'password: "ab12", "x_token": 1, sk-a-b-c, https://u:p /x, ---- BEGIN SSH2 , name: A_KEY\n value: {}\n'
    (tmp_path / "near.txt").write_text(unit * (4_000_000 // len(unit)))
    start = time.perf_counter()
    assert scan(tmp_path) == []
    assert time.perf_counter() - start < 10
