//go:build tools

// The command this module builds; the import keeps it in go.mod and go.sum.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
