package cni_test

import (
	"encoding/json"
	"strings"
	"testing"

	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/rdmanet/rdmanet/internal/netops"
	"github.com/rdmanet/rdmanet/test/netnsutil"
)

// TestSeedChain attaches and detaches a simulated VF with the seed NAD's
// plugin chain (sriov -> rdma, Whereabouts-style IPAM) for every claimed
// spec version: ADD, CHECK (from 0.4.0), DEL, and DEL again.
func TestSeedChain(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version string
	}{
		{name: "0.3.1 (as in the seed)", version: "0.3.1"},
		{name: "0.4.0", version: "0.4.0"},
		{name: "1.0.0", version: "1.0.0"},
		{name: "1.1.0", version: "1.1.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, 4)
			const i = 2
			pod := netnsutil.NewNS(t)
			l := confList(t, seedNAD, tc.version, vfBDF(i))
			r := rt(i, pod)

			res, err := n.add(l, r)
			if err != nil {
				t.Fatalf("ADD: %v", err)
			}
			n.assertAttached(t, i, pod)
			cur, err := current.NewResultFromResult(res)
			if err != nil {
				t.Fatal(err)
			}
			if len(cur.Interfaces) != 1 || cur.Interfaces[0].Name != "net1" || cur.Interfaces[0].Sandbox != pod.Path() {
				b, _ := json.Marshal(cur)
				t.Errorf("result interfaces: %s, want net1 in %s", b, pod.Path())
			}
			if len(cur.IPs) != 1 || !strings.HasPrefix(cur.IPs[0].Address.String(), "10.60.") {
				t.Errorf("result IPs %v, want one address of 10.60.0.0/16", cur.IPs)
			}
			if tc.version == "1.1.0" && cur.Interfaces[0].PciID != vfBDF(i) {
				t.Errorf("result pciID %q, want %s", cur.Interfaces[0].PciID, vfBDF(i))
			}
			st, err := n.rec.VFState("enp65s0f0np0", i)
			if err != nil {
				t.Fatal(err)
			}
			want := netops.DefaultVFState()
			want.Vlan, want.Spoofchk, want.Trust = 200, true, false
			if st != want {
				t.Errorf("VF %d settings %+v, want %+v", i, st, want)
			}
			log, err := n.rec.Log()
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range []string{
				"rdma system set netns exclusive",
				"ip link set enp65s0f0np0 vf 2 vlan 200 qos 0 proto 802.1Q",
				"ip link set enp65s0f0np0 vf 2 spoofchk on",
				"ip link set enp65s0f0np0 vf 2 trust off",
				"rdma dev set " + n.rdmaDev(t, i) + " netns " + pod.Path(),
			} {
				if !contains(log, w) {
					t.Errorf("recorded operations lack %q:\n%s", w, strings.Join(log, "\n"))
				}
			}
			t.Logf("recorded operations after ADD:\n%s", strings.Join(log, "\n"))
			if got := n.allocations(t)[containerID(i)]; len(got) != 1 {
				t.Errorf("IPAM holds %v for the container, want one address", got)
			}

			if tc.version != "0.3.1" {
				if err := n.check(l, r); err != nil {
					t.Errorf("CHECK: %v", err)
				}
			}
			if err := n.del(l, r); err != nil {
				t.Fatalf("DEL: %v", err)
			}
			n.assertRestored(t, i, containerID(i))
			if err := n.del(l, r); err != nil {
				t.Errorf("second DEL: %v", err)
			}
			n.assertRestored(t, i, containerID(i))
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
