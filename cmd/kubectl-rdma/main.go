// Command kubectl-rdma is the kubectl plugin of rdmanet: `kubectl rdma lint`,
// `kubectl rdma nccl`, `kubectl rdma render` (and further subcommands
// registered in this package, one file each). main only wires.
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
