// Pins the KubeRay repository's root module, read from the module cache and never built: its
// helm-chart/kuberay-operator/ (the chart the cluster stack installs, with crds/ and values.yaml).
module pdinference.local/tools/kuberay-chart

go 1.26.0

require github.com/ray-project/kuberay v1.6.2
