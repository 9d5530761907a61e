// Command kubectl-rdma is the kubectl plugin of rdmanet: `kubectl rdma lint`,
// `kubectl rdma nccl`, `kubectl rdma render` (and further subcommands
// registered in this package, one file each). main only wires.
package main

import (
	"os"

	"github.com/rdmanet/rdmanet/internal/version"
)

func main() {
	version.Handle("kubectl-rdma", os.Args[1:])
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
