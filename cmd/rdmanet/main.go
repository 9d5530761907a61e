// Command rdmanet is the Multus-compatible meta CNI plugin as the runtime
// calls it: a small shim that hands the call to the rdmanet daemon, or runs
// rdmanet-direct when no daemon answers.
package main

import (
	"os"

	"github.com/rdmanet/rdmanet/internal/cni/meta/shim"
	"github.com/rdmanet/rdmanet/internal/version"
)

func main() {
	version.Handle("rdmanet", os.Args[1:])
	shim.Main()
}
