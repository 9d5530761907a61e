package main

import (
	"testing"

	"github.com/rdmanet/rdmanet/test/depcheck"
)

// TestNoHeavyDeps: the shim runs on every CNI call; it links neither a
// Kubernetes client nor HTTP nor the daemon's metrics library.
func TestNoHeavyDeps(t *testing.T) {
	depcheck.Forbid(t, "the rdmanet shim", []depcheck.Rule{
		{Name: "prometheus client", Prefix: "github.com/prometheus/", Why: "metrics are the daemon's (internal/daemon/metrics)"},
		{Name: "kubernetes", Prefix: "k8s.io/", Why: "the shim hands calls to the daemon or rdmanet-direct"},
		{Name: "net/http", Prefix: "net/http", Why: "the daemon protocol is framed JSON over a unix socket (internal/daemonclient)"},
	})
}
