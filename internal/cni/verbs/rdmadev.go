package verbs

import (
	"errors"
	"fmt"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/rdmanet/rdmanet/internal/netops"
	"github.com/rdmanet/rdmanet/internal/sysfs"
)

// ErrNotExclusive is the error of a plugin that moves an RDMA device into
// the pod (rdma, ib-sriov) on a node whose RDMA subsystem is not in
// exclusive netns mode.
var ErrNotExclusive = errors.New("RDMA subsystem not in exclusive netns mode")

// RDMABack returns the RDMA device dev of the PCI function bdf from the pod
// netns (podNS; nil when it is gone) to the host's, the DEL step of the
// plugins that move one (rdma, ib-sriov). A device already in the host is
// done; one in neither namespace is an error to retry while the function
// exists (the kernel returns the device when the pod netns, netns, is
// destroyed), and done once the function is gone.
func RDMABack(rdma netops.RDMA, fs sysfs.FS, dev, bdf, netns string, hostNS, podNS ns.NetNS) error {
	if podNS != nil {
		in, err := rdma.InNetns(dev, podNS)
		if err != nil {
			return err
		}
		if in {
			return rdma.Move(dev, podNS, hostNS)
		}
	}
	in, err := rdma.InNetns(dev, hostNS)
	if err != nil || in || !fs.Exists(bdf) {
		return err
	}
	return fmt.Errorf("RDMA device %s of %s is in neither the pod netns %s nor the host; the kernel returns it when the pod netns is destroyed — retry DEL",
		dev, bdf, netns)
}
