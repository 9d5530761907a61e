package main

import (
	"testing"

	"github.com/rdmanet/rdmanet/test/depcheck"
)

// TestThinClient keeps the exec'd rdmanet-ipam a thin client: it forwards
// to the daemon or runs rdmanet-ipam-direct, and links nothing whose
// initialisation or size every exec would pay for.
func TestThinClient(t *testing.T) {
	depcheck.Forbid(t, "rdmanet-ipam", []depcheck.Rule{
		{Name: "client-go", Prefix: "k8s.io/client-go", Why: "the API client belongs to rdmanet-ipam-direct and the daemon"},
		{Name: "apimachinery", Prefix: "k8s.io/apimachinery", Why: "initialises schemes at start"},
		{Name: "ipam", Prefix: "github.com/rdmanet/rdmanet/internal/ipam", Why: "the allocator runs in rdmanet-ipam-direct or the daemon"},
		{Name: "tls", Prefix: "crypto/tls", Why: "no TLS on the forwarding path"},
	})
}
