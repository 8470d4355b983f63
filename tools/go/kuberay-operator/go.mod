// Builds the KubeRay operator at exactly the version the stage installs (addons.kuberay_operator): the
// ray-operator module's main package. Its tag ray-operator/v1.7.0 is commit 59d663aeec13 (the release
// commit of v1.7.0). On 2026-12-01 the Go module proxy served this version's .info and .mod but refused
// its zip ("403 Forbidden ... This module version is not available"), so go.sum cannot be completed and
// the build stops with that answer (localcluster/tools.py); no other version is built in its place.
module pdinference.local/tools/kuberay-operator

go 1.26.0

require github.com/ray-project/kuberay/ray-operator v1.7.0
