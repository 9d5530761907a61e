package main

import (
	"testing"

	"github.com/rdmanet/rdmanet/test/depcheck"
)

// TestThinClient keeps the exec'd rdmanet-ipam a thin client (depcheck.ThinPlugin).
func TestThinClient(t *testing.T) { depcheck.Forbid(t, "rdmanet-ipam", depcheck.ThinPlugin) }
