package meta

import (
	"net"
	"slices"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
)

// TestClaimNetworks: only attachments whose device came through a claim of
// rdmanet's driver report to the claim, with the pod-side interface's MAC
// and addresses (CIDR), not the host-side ones.
func TestClaimNetworks(t *testing.T) {
	ipnet := func(s string) net.IPNet {
		ip, n, err := net.ParseCIDR(s)
		if err != nil {
			t.Fatal(err)
		}
		n.IP = ip
		return *n
	}
	res := func(ifname, mac, cidr string) types.Result {
		return &current.Result{CNIVersion: "1.0.0",
			Interfaces: []*current.Interface{{Name: "host-side", Mac: "aa:aa:aa:aa:aa:aa"}, {Name: ifname, Mac: mac, Sandbox: "/var/run/netns/p"}},
			IPs:        []*current.IPConfig{{Interface: current.Int(1), Address: ipnet(cidr)}}}
	}
	vf := &ClaimDevice{Namespace: "ai", Claim: "c", Driver: ClaimStatusDriver, Pool: "node-a", Device: "vf-0000-41-00-2"}
	gpuDriver := &ClaimDevice{Namespace: "ai", Claim: "c", Driver: "other.example.com", Pool: "node-a", Device: "nic-0"}
	rec := &Record{Pod: "ai/p", Delegates: []*Delegate{
		{Network: "cluster", IfName: "eth0", IsDefault: true},
		{Network: "ai/rdma", IfName: "net1", DeviceID: "0000:41:00.2", Claim: vf},
		{Network: "ai/dp", IfName: "net2", DeviceID: "0000:41:00.3"},
		{Network: "ai/other", IfName: "net3", DeviceID: "0000:81:00.1", Claim: gpuDriver},
	}}
	results := []types.Result{res("eth0", "", "10.244.0.5/24"), res("net1", "02:00:00:00:41:02", "192.168.100.7/24"),
		res("net2", "02:00:00:00:41:03", "192.168.100.8/24"), res("net3", "02:00:00:00:81:01", "192.168.101.8/24")}
	got, err := claimNetworks(rec, results)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("claimNetworks = %+v, want net1's only", got)
	}
	n := got[0]
	if n.ClaimDevice != *vf || n.Pod != "ai/p" || n.Interface != "net1" || n.MAC != "02:00:00:00:41:02" || !slices.Equal(n.IPs, []string{"192.168.100.7/24"}) {
		t.Fatalf("claimNetworks[0] = %+v", n)
	}
}
