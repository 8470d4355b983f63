"""A local Kubernetes control plane for running a stage's Kubernetes half: the real kube-apiserver, controller manager,
scheduler and etcd, built from the Go module proxy, with kwok's fake nodes made from the stage's
nodegroups. No container runs and nothing leaves loopback (docs/LOCAL_CLUSTER.md).

Run by `python -m ops local-cluster` (localcluster/cli.py) and by the tests in tests/cluster/."""
