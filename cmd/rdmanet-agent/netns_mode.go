package main

import "github.com/rdmanet/rdmanet/internal/netops"

// rdmaNetnsMode asks the kernel (RDMA netlink, `rdma system`) for the RDMA
// subsystem's netns mode. On a kernel without the RDMA subsystem the error
// says so and --rdma-netns-mode states the mode instead.
func rdmaNetnsMode() (string, error) {
	return netops.Netlink{}.NetnsMode()
}
