package main

import "errors"

// rdmaNetnsMode asks the kernel for the RDMA subsystem's netns mode.
// Wired to internal/netops once that package lands; until then the kernel
// is reported as silent and --rdma-netns-mode states the mode.
func rdmaNetnsMode() (string, error) {
	return "", errors.New("netlink RDMA query not wired")
}
