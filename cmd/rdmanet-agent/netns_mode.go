package main

import (
	"os"

	"github.com/rdmanet/rdmanet/internal/netops"
)

// rdmaNetnsMode asks the kernel (RDMA netlink, `rdma system`) for the RDMA
// subsystem's netns mode, through the same netops selection as the CNI
// plugins: a simulated-node build (-tags rdmanet_testhooks) with
// RDMANET_NETOPS=record asks the recording fake, which stands in for the
// node's kernel, so each simulated node reports its own mode. On a kernel
// without the RDMA subsystem (or a production build given the test switch)
// the error says so and --rdma-netns-mode states the mode instead.
func rdmaNetnsMode() (string, error) {
	ops, err := netops.FromEnv(os.Getenv)
	if err != nil {
		return "", err
	}
	return ops.RDMA.NetnsMode()
}
