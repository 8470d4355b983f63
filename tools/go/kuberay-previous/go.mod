// Pins the KubeRay release before the stage's (ray-operator v1.5.0), read from the module cache and never
// built: its CRDs are where an operator bump starts from in ops local-cluster.
module pdinference.local/tools/kuberay-previous

go 1.26.0

require github.com/ray-project/kuberay/ray-operator v1.5.0
