// Command rdmanet-probe is the in-pod probe of `kubectl rdma verify`'s pair
// layer (internal/pairprobe): a UDP echo responder and a don't-fragment
// client, run as ephemeral containers from rdmanet's image. main only wires.
package main

import (
	"os"

	"github.com/rdmanet/rdmanet/internal/pairprobe"
	"github.com/rdmanet/rdmanet/internal/version"
)

func main() {
	version.Handle("rdmanet-probe", os.Args[1:])
	os.Exit(pairprobe.Main(os.Args[1:], os.Stdout, os.Stderr))
}
