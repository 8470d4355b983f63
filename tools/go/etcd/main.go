// Command etcd: etcd's server, as go.etcd.io/etcd/server/v3/main.go runs it.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
