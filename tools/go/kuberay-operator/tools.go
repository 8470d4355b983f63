//go:build tools

// The command this module builds; the import keeps it in go.mod and go.sum.
package tools

import _ "github.com/ray-project/kuberay/ray-operator"
