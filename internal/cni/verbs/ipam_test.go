package verbs

import (
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	types040 "github.com/containernetworking/cni/pkg/types/040"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/rdmanet/rdmanet/test/netnsutil"
)

func TestApplyIPAM(t *testing.T) {
	netnsutil.RequireRoot(t)
	addr := func(s string) net.IPNet {
		ip, n, err := net.ParseCIDR(s)
		if err != nil {
			t.Fatal(err)
		}
		n.IP = ip
		return *n
	}
	_, dst, _ := net.ParseCIDR("10.9.0.0/16")
	tests := []struct {
		name      string
		answer    types.Result
		ifName    string
		wantErr   string
		wantAddrs []string
		wantDNS   []string
	}{
		{
			name: "addresses go on the first interface, routes and DNS are kept",
			answer: &current.Result{CNIVersion: "1.0.0",
				IPs:    []*current.IPConfig{{Address: addr("10.1.2.3/24"), Interface: current.Int(5)}},
				Routes: []*types.Route{{Dst: *dst, GW: net.ParseIP("10.1.2.1")}},
				DNS:    types.DNS{Nameservers: []string{"10.0.0.10"}}},
			ifName: "net1", wantAddrs: []string{"10.1.2.3/24"}, wantDNS: []string{"10.0.0.10"},
		},
		{
			name: "an older version's answer is converted",
			answer: &types040.Result{CNIVersion: "0.4.0",
				IPs: []*types040.IPConfig{{Address: addr("10.1.2.4/24")}}},
			ifName: "net1", wantAddrs: []string{"10.1.2.4/24"},
		},
		{
			name:    "no address: the IPAM's range is named as the place to look",
			answer:  &current.Result{CNIVersion: "1.0.0"},
			ifName:  "net1",
			wantErr: `IPAM plugin "rdmanet-ipam" returned no IP address; check its range/exclude settings`,
		},
		{
			name:    "the interface is not in the pod",
			answer:  &current.Result{CNIVersion: "1.0.0", IPs: []*current.IPConfig{{Address: addr("10.1.2.5/24")}}},
			ifName:  "net9",
			wantErr: "apply IPAM result to net9",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := netnsutil.NewNS(t)
			netnsutil.AddVeth(t, pod, "net1", nil, "peer1", nil)
			netnsutil.SetUp(t, pod, "net1")
			result := &current.Result{CNIVersion: current.ImplementedSpecVersion, Interfaces: []*current.Interface{{Name: tc.ifName}}}
			err := ApplyIPAM("rdmanet-ipam", tc.answer, result, pod, tc.ifName)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ApplyIPAM: %v, want %q in it", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ApplyIPAM: %v", err)
			}
			for _, ipc := range result.IPs {
				if ipc.Interface == nil || *ipc.Interface != 0 {
					t.Errorf("address %s on interface %v, want 0", ipc.Address.String(), ipc.Interface)
				}
			}
			if !slices.Equal(result.DNS.Nameservers, tc.wantDNS) {
				t.Errorf("DNS %v, want %v", result.DNS.Nameservers, tc.wantDNS)
			}
			got := netnsutil.Addrs(t, pod, "net1")
			for _, want := range tc.wantAddrs {
				if !slices.Contains(got, want) {
					t.Errorf("addresses of net1 in the pod %v, want %s among them", got, want)
				}
			}
		})
	}
}
