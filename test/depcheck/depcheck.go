// Package depcheck keeps packages out of a binary: the CNI binaries are
// exec'd per call, so what they link (and initialise) is on every pod's
// attachment path. Used by the cmd/*/deps_test.go tests.
package depcheck

import (
	"os/exec"
	"strings"
	"testing"
)

// Rule forbids every package whose import path starts with Prefix.
type Rule struct {
	Name, Prefix, Why string
}

// Forbid lists the dependencies of the package in the current directory
// (`go list -deps .`) and fails one subtest per rule that a dependency breaks.
func Forbid(t *testing.T, binary string, rules []Rule) {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command to list %s's dependencies: %v", binary, err)
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	for _, r := range rules {
		t.Run(r.Name, func(t *testing.T) {
			for _, d := range deps {
				if strings.HasPrefix(d, r.Prefix) {
					t.Errorf("%s links %s: %s", binary, d, r.Why)
				}
			}
		})
	}
}

// ThinPlugin is what the thin plugin binaries (sriov, rdma, rdmanet-ipam)
// must not link: they forward the call to the daemon or exec their
// -direct binary, and every pod's attachment pays their start.
var ThinPlugin = []Rule{
	{Name: "client-go", Prefix: "k8s.io/client-go", Why: "the API client belongs to the -direct binaries and the daemon"},
	{Name: "apimachinery", Prefix: "k8s.io/apimachinery", Why: "initialises schemes at start"},
	{Name: "ipam", Prefix: "github.com/rdmanet/rdmanet/internal/ipam", Why: "the allocator runs in rdmanet-ipam-direct or the daemon"},
	{Name: "sriov code", Prefix: "github.com/rdmanet/rdmanet/internal/cni/sriov", Why: "sriov's code runs in sriov-direct or the daemon"},
	{Name: "rdma code", Prefix: "github.com/rdmanet/rdmanet/internal/cni/rdma", Why: "rdma's code runs in rdma-direct or the daemon"},
	{Name: "netlink", Prefix: "github.com/vishvananda/", Why: "links are configured in the -direct binaries or the daemon"},
	{Name: "upstream plugin packages", Prefix: "github.com/containernetworking/plugins/", Why: "they pull in nftables, iptables and their initialisation"},
	{Name: "CNI skeleton", Prefix: "github.com/containernetworking/cni/pkg/skel", Why: "the skeleton (and invoke's OpenTelemetry) belongs to the -direct binaries"},
	{Name: "OpenTelemetry", Prefix: "go.opentelemetry.io/", Why: "initialised at start"},
	{Name: "tls", Prefix: "crypto/tls", Why: "no TLS on the forwarding path"},
	{Name: "prometheus client", Prefix: "github.com/prometheus/", Why: "metrics are the daemon's"},
}
