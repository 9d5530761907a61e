package main

import (
	"testing"

	"github.com/rdmanet/rdmanet/test/depcheck"
)

// TestNoHeavyDeps keeps packages out of the binary whose package
// initialisation and size every CNI exec would pay for: the plugin's start is
// on each pod attachment's critical path.
func TestNoHeavyDeps(t *testing.T) {
	depcheck.Forbid(t, "rdmanet-ipam-direct", []depcheck.Rule{
		{Name: "clientset", Prefix: "k8s.io/client-go/kubernetes", Why: "its scheme registers every API group at init; gc uses a REST client"},
		{Name: "API types", Prefix: "k8s.io/api/", Why: "links and initialises generated types; gc decodes only the fields it reads"},
		{Name: "discovery", Prefix: "k8s.io/client-go/discovery", Why: "pulls in OpenAPI models"},
	})
}
