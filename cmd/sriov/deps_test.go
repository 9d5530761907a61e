package main

import (
	"testing"

	"github.com/rdmanet/rdmanet/test/depcheck"
)

// TestThinClient keeps the exec'd sriov a thin client (depcheck.ThinPlugin).
func TestThinClient(t *testing.T) { depcheck.Forbid(t, "sriov", depcheck.ThinPlugin) }
