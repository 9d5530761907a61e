package netnsutil_test

import (
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/rdmanet/rdmanet/internal/netops"
)

func moveTo(name string, n ns.NetNS) error { return netops.SetLinkNetns(name, n) }
