"""scripts/cdk synth with AWS credentials in the environment asks AWS nothing: the CLI would otherwise call
STS GetCallerIdentity (seen before the fix: one POST Action=GetCallerIdentity to the endpoint below)."""

from __future__ import annotations

import http.server
import os
import subprocess
import threading
from typing import ClassVar

from tests.helpers import ROOT, clean_env


class _Recorder(http.server.BaseHTTPRequestHandler):
    requests: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).requests.append(f"{self.command} {self.path} {body[:60]!r}")
        self.send_response(403)
        self.end_headers()

    do_GET = do_POST

    def log_message(self, *args) -> None:
        pass


def test_synth_with_credentials_in_the_environment_calls_no_aws_endpoint(tmp_path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    credentials = tmp_path / "credentials"
    credentials.write_text(
        "[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\n"
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n"
    )
    env = clean_env()
    env.update(
        AWS_ACCESS_KEY_ID="AKIAIOSFODNN7EXAMPLE",
        AWS_SECRET_ACCESS_KEY="wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        AWS_REGION="us-west-2",
        AWS_ENDPOINT_URL=endpoint,
        AWS_ENDPOINT_URL_STS=endpoint,
        AWS_SHARED_CREDENTIALS_FILE=str(credentials),
        AWS_CONFIG_FILE=str(credentials),
        AWS_PROFILE="default",
    )
    env.pop("AWS_EC2_METADATA_DISABLED")
    env["PATH"] = os.environ["PATH"]
    try:
        result = subprocess.run(
            ["scripts/cdk", "synth", "-c", "stage=dev", "-o", str(tmp_path / "out")],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    finally:
        server.shutdown()
    assert result.returncode == 0, result.stderr[-2000:]
    assert _Recorder.requests == []
