// Command etcd is the upstream etcd server, built from the published
// go.etcd.io/etcd/server/v3 module as the storage of the test API server.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
