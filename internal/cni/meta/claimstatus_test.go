package meta

import (
	"net"
	"slices"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/rdmanet/rdmanet/internal/devinfo"
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

// TestClaimNetworksInfiniBand: a claim's ib-sriov or ipoib attachment
// reports its GUID and PKey (the device status' data); a macvlan one none.
func TestClaimNetworksInfiniBand(t *testing.T) {
	tests := []struct {
		name, conf, mac string
		want            *devinfo.InfiniBand
	}{
		{name: "ib-sriov VF: the pod's GUID", conf: ibSriovConf, mac: "02:00:00:00:00:00:00:01",
			want: &devinfo.InfiniBand{GUID: "02:00:00:00:00:00:00:01", PKey: "0x8005", Plugin: devinfo.TypeIBSriov}},
		{name: "ipoib: the port's GUID", conf: ipoibConf, mac: "00:00:10:49:fe:80:00:00:00:00:00:00:0c:42:a1:03:00:65:8e:82",
			want: &devinfo.InfiniBand{GUID: "0c:42:a1:03:00:65:8e:82", PKey: "0x8006", Plugin: devinfo.TypeIPoIB}},
		{name: "macvlan: none", conf: macvlanConf, mac: "02:11:22:33:44:55"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			claim := &ClaimDevice{Namespace: "ai", Claim: "c", Driver: ClaimStatusDriver, Pool: "ib-node", Device: "vf-0000-c1-00-2"}
			rec := &Record{Pod: "ai/p", Delegates: []*Delegate{{Network: "ai/n", IfName: "net1", Conf: []byte(tt.conf), DeviceID: "0000:c1:00.2", Claim: claim}}}
			res := &current.Result{CNIVersion: "1.0.0", Interfaces: []*current.Interface{{Name: "net1", Mac: tt.mac, Sandbox: "/var/run/netns/p"}}}
			got, err := claimNetworks(rec, []types.Result{res})
			if err != nil || len(got) != 1 {
				t.Fatalf("claimNetworks = %+v, %v", got, err)
			}
			if g := got[0].InfiniBand; (g == nil) != (tt.want == nil) || g != nil && *g != *tt.want {
				t.Fatalf("InfiniBand = %+v, want %+v", g, tt.want)
			}
		})
	}
}
