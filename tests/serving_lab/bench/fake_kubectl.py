#!/usr/bin/env python3
"""A stand-in for `kubectl port-forward`, run by the endpoint tests: writes its argv to $FAKE_KUBECTL_ARGV,
then either prints kubectl's own "Forwarding from 127.0.0.1:PORT -> 8000" line (PORT = $FAKE_FORWARD_PORT,
the fake OpenAI server's port, so no bytes need forwarding) and waits to be stopped, or, with
$FAKE_KUBECTL_ERROR set, prints that error to stderr and exits 1 as kubectl does."""

import json
import os
import sys
import time

with open(os.environ["FAKE_KUBECTL_ARGV"], "w") as out:
    json.dump(sys.argv[1:], out)
if os.environ.get("FAKE_KUBECTL_ERROR"):
    print(os.environ["FAKE_KUBECTL_ERROR"], file=sys.stderr, flush=True)
    sys.exit(1)
remote = sys.argv[sys.argv.index("port-forward") + 2].split(":")[-1]
print(f"Forwarding from 127.0.0.1:{os.environ['FAKE_FORWARD_PORT']} -> {remote}", flush=True)
print(f"Forwarding from [::1]:{os.environ['FAKE_FORWARD_PORT']} -> {remote}", flush=True)
while True:
    time.sleep(1)
