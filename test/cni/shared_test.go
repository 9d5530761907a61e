package cni_test

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/rdmanet/rdmanet/test/netnsutil"
)

// sharedNAD is the shared-mode attachment of the third seed document
// (MacvlanNetwork rdmashared-net: master ens8f0np0, bridge mode, MTU 9000,
// Whereabouts-style IPAM 192.168.2.0/24) as the NAD config it renders to.
const sharedNAD = `{
  "cniVersion": "0.3.1",
  "name": "rdmashared-net",
  "type": "macvlan",
  "master": "ens8f0np0",
  "mode": "bridge",
  "mtu": 9000,
  "ipam": {"type": "whereabouts", "range": "192.168.2.0/24", "gateway": "192.168.2.1"}
}`

// TestSharedModeMacvlan attaches two pods to the RoCE PF stand-in with the
// upstream macvlan plugin and the project's IPAM (rdmanet-ipam under the
// Whereabouts name), chained with nothing else, for every spec version;
// the pods reach each other over net1; DEL removes the links and releases
// the addresses.
func TestSharedModeMacvlan(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version string
	}{
		{name: "0.3.1", version: "0.3.1"},
		{name: "0.4.0", version: "0.4.0"},
		{name: "1.0.0", version: "1.0.0"},
		{name: "1.1.0", version: "1.1.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, 1)
			// The shared RoCE PF: a veth end named like the fixture's shared PF, jumbo MTU, carrier up.
			netnsutil.AddVeth(t, n.host, "ens8f0np0", nil, "roce-wire", n.host)
			for _, l := range []string{"ens8f0np0", "roce-wire"} {
				netnsutil.SetMTU(t, n.host, l, 9000)
				netnsutil.SetUp(t, n.host, l)
			}
			var m map[string]any
			_ = json.Unmarshal([]byte(sharedNAD), &m)
			m["cniVersion"] = tc.version
			b, _ := json.Marshal(m)
			conf, err := libcni.ConfFromBytes(b)
			if err != nil {
				t.Fatal(err)
			}
			pods := []ns.NetNS{netnsutil.NewNS(t), netnsutil.NewNS(t)}
			ips := make([]net.IP, len(pods))
			for i, pod := range pods {
				var res types.Result
				err := n.inHost(func() error { res, err = n.cni.AddNetwork(context.Background(), conf, rt(i, pod)); return nil })
				if err != nil {
					t.Fatalf("ADD pod %d: %v", i, err)
				}
				cur, err := current.NewResultFromResult(res)
				if err != nil {
					t.Fatal(err)
				}
				if len(cur.IPs) != 1 || !strings.HasPrefix(cur.IPs[0].Address.String(), "192.168.2.") {
					t.Fatalf("pod %d result IPs %v, want one 192.168.2.0/24 address", i, cur.IPs)
				}
				ips[i] = cur.IPs[0].Address.IP
				l, ok := netnsutil.Link(t, pod, "net1")
				if !ok || l.Kind != "macvlan" || l.MTU != 9000 || !l.Up {
					t.Fatalf("pod %d net1 = %+v (present %v), want an up macvlan with MTU 9000", i, l, ok)
				}
				if tc.version != "0.3.1" {
					if err := n.inHost(func() error { return n.cni.CheckNetwork(context.Background(), conf, rt(i, pod)) }); err != nil {
						t.Errorf("CHECK pod %d: %v", i, err)
					}
				}
			}
			if ips[0].Equal(ips[1]) {
				t.Fatalf("both pods got %s", ips[0])
			}
			if al := n.allocations(t); len(al[containerID(0)]) != 1 || len(al[containerID(1)]) != 1 {
				t.Errorf("IPAM allocations %v, want one per pod", al)
			}
			udpReach(t, pods[0], ips[0], pods[1], ips[1])

			for i, pod := range pods {
				if err := n.inHost(func() error { return n.cni.DelNetwork(context.Background(), conf, rt(i, pod)) }); err != nil {
					t.Fatalf("DEL pod %d: %v", i, err)
				}
				if _, ok := netnsutil.Link(t, pod, "net1"); ok {
					t.Errorf("pod %d keeps net1 after DEL", i)
				}
				if err := n.inHost(func() error { return n.cni.DelNetwork(context.Background(), conf, rt(i, pod)) }); err != nil {
					t.Errorf("second DEL pod %d: %v", i, err)
				}
			}
			if al := n.allocations(t); len(al) != 0 {
				t.Errorf("IPAM keeps %v after DEL", al)
			}
			if _, ok := netnsutil.Link(t, n.host, "ens8f0np0"); !ok {
				t.Error("the PF stand-in is gone")
			}
		})
	}
}

// udpReach sends a datagram from pod a to pod b over net1. The deadline
// only guards against a hang; it asserts nothing about speed.
func udpReach(t *testing.T, a ns.NetNS, ipA net.IP, b ns.NetNS, ipB net.IP) {
	t.Helper()
	var srv *net.UDPConn
	netnsutil.Do(t, b, func() (err error) {
		srv, err = net.ListenUDP("udp4", &net.UDPAddr{IP: ipB, Port: 4791})
		return err
	})
	defer srv.Close()
	netnsutil.Do(t, a, func() error {
		c, err := net.DialUDP("udp4", &net.UDPAddr{IP: ipA}, &net.UDPAddr{IP: ipB, Port: 4791})
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("rdma-cm hello"))
		return err
	})
	_ = srv.SetReadDeadline(time.Now().Add(20 * time.Second))
	buf := make([]byte, 64)
	k, from, err := srv.ReadFromUDP(buf)
	if err != nil {
		t.Fatalf("pod %s did not receive from %s over net1: %v", ipB, ipA, err)
	}
	if string(buf[:k]) != "rdma-cm hello" || !from.IP.Equal(ipA) {
		t.Errorf("received %q from %s", buf[:k], from)
	}
}
