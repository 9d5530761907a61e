// Command rdma is the rdmanet drop-in for the upstream RDMA CNI plugin. It
// is a thin client: it hands each ADD, DEL and CHECK to the node's
// rdmanet-daemon (package daemonclient), which runs it in-process, and becomes
// rdma-direct (installed next to it) with the same arguments, environment
// and stdin when no daemon answers, and for VERSION, GC and STATUS. It
// links no netlink, netfilter or CNI skeleton, so it starts fast.
package main

import (
	"os"

	"github.com/rdmanet/rdmanet/internal/daemonclient"
	"github.com/rdmanet/rdmanet/internal/version"
)

func main() {
	version.Handle("rdma", os.Args[1:])
	daemonclient.Main("rdma", "rdma-direct")
}
