// Command rdmanet-direct is the per-call meta CNI: it does the whole job in
// its own process (API client, PodResources, delegates). The rdmanet shim
// runs it when the daemon is not configured or not reachable.
package main

import (
	"os"

	"github.com/rdmanet/rdmanet/internal/cni/meta/direct"
	"github.com/rdmanet/rdmanet/internal/version"
)

func main() {
	version.Handle("rdmanet-direct", os.Args[1:])
	direct.Main()
}
