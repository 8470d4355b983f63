"""A local Kubernetes control plane for rehearsing a stage: the real kube-apiserver, controller manager,
scheduler and etcd, built from the Go module proxy, with kwok's fake nodes made from the stage's
nodegroups. No container runs and nothing leaves loopback (docs/CLUSTER_REHEARSAL.md).

Run by `python -m ops rehearse-cluster` (localcluster/cli.py) and by the tests in tests/cluster/."""
