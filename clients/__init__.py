"""The libraries every layer's commands share: the Kubernetes API and HTTP client (kube), a command's table
of checks (report), reading NIXL's transport from worker logs (nixl), signal handling for commands that own
child processes (signals), the cluster readiness checks verify and the local cluster both run (readiness),
and the option types of every command line (cli_options). Nothing here imports another package of the
repository, config and charts included: what knows the stage passes plain values in (charts/readiness.py;
tests/test_layers.py)."""
