package main

import (
	"testing"

	"github.com/rdmanet/rdmanet/test/depcheck"
)

// TestThinClient keeps the exec'd rdma a thin client (depcheck.ThinPlugin).
func TestThinClient(t *testing.T) { depcheck.Forbid(t, "rdma", depcheck.ThinPlugin) }
