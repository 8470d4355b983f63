"""`python -m ops rehearse`: run a stage's own serveConfigV2 on one Linux host with NVIDIA GPUs.

The serve config is built by the same code as the chart (charts/serve_config.py); only what a single
host needs is overridden, and every override is printed and recorded (overrides.py). Ray is started,
the config is deployed the way KubeRay deploys it (PUT /api/serve/applications/ on the dashboard),
then the checks `ops verify` makes on EKS run against it, and optionally the stage's benchmark.
"""
