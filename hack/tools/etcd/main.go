// Command etcd is the upstream etcd server for rdmanet's apiserver test tier.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
