package cni_test

import (
	"net"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/rdmanet/rdmanet/internal/netops"
	"github.com/rdmanet/rdmanet/test/netnsutil"
)

// TestFullConfig attaches with every optional sriov field set and checks
// each one took effect on the VF and on net1, then that DEL undoes them.
func TestFullConfig(t *testing.T) {
	n := newNode(t, 2)
	const i = 1
	pod := netnsutil.NewNS(t)
	l := confList(t, fullNAD, "1.1.0", vfBDF(i))
	if _, err := n.add(l, rt(i, pod)); err != nil {
		t.Fatalf("ADD: %v", err)
	}
	n.assertAttached(t, i, pod)
	link, _ := netnsutil.Link(t, pod, "net1")
	if link.MAC.String() != "02:aa:bb:cc:dd:01" || link.MTU != 9000 {
		t.Errorf("net1 MAC %s MTU %d, want 02:aa:bb:cc:dd:01 and 9000", link.MAC, link.MTU)
	}
	st, _ := n.rec.VFState("enp65s0f0np0", i)
	want := netops.VFState{MAC: "02:aa:bb:cc:dd:01", Vlan: 200, QoS: 3, Proto: netops.Proto8021Q, Spoofchk: true, Trust: false,
		LinkState: netops.LinkStateEnable, MinTxRate: 100, MaxTxRate: 10000}
	if st != want {
		t.Errorf("VF state %+v, want %+v", st, want)
	}
	if err := n.check(l, rt(i, pod)); err != nil {
		t.Errorf("CHECK: %v", err)
	}
	if err := n.del(l, rt(i, pod)); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	n.assertRestored(t, i, containerID(i))
}

// TestCheckDetectsDrift: CHECK fails, naming what drifted, when the VF,
// net1 or the RDMA device no longer match what ADD set up.
func TestCheckDetectsDrift(t *testing.T) {
	for _, tc := range []struct {
		name  string
		drift func(t *testing.T, n *node, pod ns.NetNS)
		want  string
	}{
		{name: "VF VLAN changed through the PF", want: "vlan is 300, want 200", drift: func(t *testing.T, n *node, _ ns.NetNS) {
			if err := n.rec.SetVFVlan("enp65s0f0np0", 0, 300, 0, netops.Proto8021Q); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "VF trust turned on", want: "trust is true, want false", drift: func(t *testing.T, n *node, _ ns.NetNS) {
			if err := n.rec.SetVFTrust("enp65s0f0np0", 0, true); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "net1 down", want: "net1 is down", drift: func(t *testing.T, _ *node, pod ns.NetNS) {
			netnsutil.Do(t, pod, func() error { return netops.SetLinkDown("net1") })
		}},
		{name: "net1 MAC changed", want: "net1 MAC is 02:00:00:00:99:99", drift: func(t *testing.T, _ *node, pod ns.NetNS) {
			mac, _ := net.ParseMAC("02:00:00:00:99:99")
			netnsutil.Do(t, pod, func() error { return netops.SetLinkMAC("net1", mac) })
		}},
		{name: "address removed", want: "10.60.", drift: func(t *testing.T, _ *node, pod ns.NetNS) {
			netnsutil.Do(t, pod, func() error { return netops.FlushAddrs("net1") })
		}},
		{name: "RDMA device left the pod", want: "not in pod netns", drift: func(t *testing.T, n *node, pod ns.NetNS) {
			if err := n.rec.Move(n.rdmaDev(t, 0), pod, n.host); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, 1)
			pod := netnsutil.NewNS(t)
			l := confList(t, seedNAD, "1.0.0", vfBDF(0))
			if _, err := n.add(l, rt(0, pod)); err != nil {
				t.Fatalf("ADD: %v", err)
			}
			if err := n.check(l, rt(0, pod)); err != nil {
				t.Fatalf("CHECK before drift: %v", err)
			}
			tc.drift(t, n, pod)
			err := n.check(l, rt(0, pod))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("CHECK after drift = %v, want an error mentioning %q", err, tc.want)
			}
			if err := n.del(l, rt(0, pod)); err != nil {
				t.Fatalf("DEL: %v", err)
			}
		})
	}
}
