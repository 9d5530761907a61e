package main

import (
	"testing"

	"github.com/rdmanet/rdmanet/test/depcheck"
)

// TestNoHeavyDeps keeps the probe small and quick to start: it runs once per
// pod and phase of every `kubectl rdma verify` pair run.
func TestNoHeavyDeps(t *testing.T) {
	depcheck.Forbid(t, "rdmanet-probe", []depcheck.Rule{
		{Name: "client-go", Prefix: "k8s.io/client-go", Why: "the probe talks to no API server"},
		{Name: "API types", Prefix: "k8s.io/api/", Why: "the probe reads its plan as plain JSON"},
		{Name: "netlink", Prefix: "github.com/vishvananda/netlink", Why: "the probe only opens UDP sockets"},
	})
}
