package main

import (
	"testing"

	"github.com/rdmanet/rdmanet/test/depcheck"
)

// TestNoHeavyDeps: the per-call meta CNI starts on every pod attachment
// when the daemon is down; the daemon's metrics library (and its package
// initialisation) must not come with it.
func TestNoHeavyDeps(t *testing.T) {
	depcheck.Forbid(t, "rdmanet-direct", []depcheck.Rule{
		{Name: "prometheus client", Prefix: "github.com/prometheus/", Why: "the daemon's metrics live in internal/daemon/metrics, linked by rdmanet-daemon only"},
		{Name: "daemon metrics", Prefix: "github.com/rdmanet/rdmanet/internal/daemon/metrics", Why: "daemon only"},
	})
}
