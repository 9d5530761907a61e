// Command rdmanet-ipam is rdmanet's cluster-wide CNI IPAM plugin. It accepts
// Whereabouts' config fields verbatim, so it can be installed under its own
// name or as "whereabouts". It is a thin client: it hands each call to the
// node's rdmanet-daemon (package daemonclient), which runs it with warm API
// clients, and becomes rdmanet-ipam-direct (installed next to it) with the
// same arguments, environment and stdin when no daemon answers — including
// VERSION, GC and STATUS, and `rdmanet-ipam gc [flags]` (garbage
// collection). It links no CNI skeleton and no API client, so it starts
// fast. See docs/ipam.md.
package main

import (
	"os"

	"github.com/rdmanet/rdmanet/internal/daemonclient"
	"github.com/rdmanet/rdmanet/internal/version"
)

// direct is the per-call plugin this one falls back to.
const direct = "rdmanet-ipam-direct"

func main() {
	version.Handle("rdmanet-ipam", os.Args[1:])
	if len(os.Args) > 1 && os.Args[1] == "gc" {
		daemonclient.Direct("rdmanet-ipam", direct, nil) // garbage collection is not a CNI call
	}
	daemonclient.Main("rdmanet-ipam", direct)
}
