// Package ipoib_test drives rdmanet's ipoib plugin (the ipoib-cni drop-in)
// the way a container runtime does: the binary on a CNI path, invoked
// through libcni, in real network namespaces. The simulated node is the IB
// sysfs fixture (sysfsfixture.NewIBNode: port 1 ibp193s0f1 is the shared IB
// port) and a host netns whose veth named like the port's IPoIB netdev
// stands in for it. This kernel has no ib_ipoib module, so the plugin runs
// with the netops recorder (RDMANET_NETOPS=record): the exact IPoIB child
// request (parent, PKey with the full-membership bit, mode, umcast, MTU) is
// recorded and compared, and a macvlan of the stand-in plays the child.
package ipoib_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/rdmanet/rdmanet/internal/cni/ipoib"
	"github.com/rdmanet/rdmanet/internal/netops"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
	"github.com/rdmanet/rdmanet/test/netnsutil"
	"github.com/rdmanet/rdmanet/test/pluginbin"
)

// IPoIB is the plugin's import path.
const IPoIB = "github.com/rdmanet/rdmanet/cmd/ipoib"

var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rdmanet-ipoib-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := 1
	if err := pluginbin.Build(dir, IPoIB, pluginbin.HostLocal, pluginbin.IPAM); err != nil {
		fmt.Fprintln(os.Stderr, "build CNI plugins:", err)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// sharedPort is the IB node's shared port (fixture Port1).
const (
	sharedPort    = "ibp193s0f1"
	sharedPortBDF = "0000:c1:00.1"
)

type node struct {
	host   ns.NetNS
	fix    *sysfsfixture.IBNode
	rec    *netops.Recorder
	root   string
	ipam   string // rdmanet-ipam's local store
	hlData string // host-local's data dir
	cni    *libcni.CNIConfig
}

// newNode builds the simulated IB node: the fixture, the stand-in for the
// shared port's IPoIB netdev (veth end, MTU 4092, up) with the simulated
// PKey and mode, the RDMA subsystem in shared mode, and the plugin
// environment.
func newNode(t *testing.T, pkey uint16, mode string) *node {
	t.Helper()
	netnsutil.RequireRoot(t)
	root := t.TempDir()
	fix, err := sysfsfixture.NewIBNode(filepath.Join(root, "sys"), sysfsfixture.IBNodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := &node{host: netnsutil.NewNS(t), fix: fix, root: root, rec: netops.NewRecorder(filepath.Join(root, "netops.json")),
		ipam: filepath.Join(root, "ipam"), hlData: filepath.Join(root, "host-local")}
	netnsutil.AddVeth(t, n.host, sharedPort, nil, "ib1-wire", n.host)
	for _, l := range []string{sharedPort, "ib1-wire"} {
		netnsutil.SetMTU(t, n.host, l, 4092)
		netnsutil.SetUp(t, n.host, l)
	}
	if err := n.rec.SetIPoIBParent(sharedPort, pkey, mode); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		netops.EnvImpl:            "record",
		netops.EnvState:           n.rec.StatePath(),
		netops.EnvSysfsRoot:       fix.Root,
		"RDMANET_IPAM_STORE_PATH": n.ipam,
		"RDMANET_IPAM_STORE_TYPE": "local",
		"NODENAME":                "ib-node-1",
		netops.EnvFault:           "",
	} {
		t.Setenv(k, v)
	}
	n.cni = libcni.NewCNIConfigWithCacheDir([]string{binDir}, filepath.Join(root, "cni-cache"), nil)
	return n
}

func containerID(i int) string { return fmt.Sprintf("1b0a%04d", i) }

func rt(i int, pod ns.NetNS) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: containerID(i), NetNS: pod.Path(), IfName: "net1",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "ai-training"}, {"K8S_POD_NAME", fmt.Sprintf("ib-trainer-%d", i)},
			{"K8S_POD_INFRA_CONTAINER_ID", containerID(i)}}}
}

func (n *node) inHost(f func() error) error { return n.host.Do(func(ns.NetNS) error { return f() }) }

// conf renders a config template: {{data}} is host-local's data dir, and
// cniVersion is set to version ("" leaves the config without one, as the
// ipoib-cni README's example).
func (n *node) conf(t *testing.T, tmpl, version string) *libcni.NetworkConfig {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(strings.ReplaceAll(tmpl, "{{data}}", n.hlData)), &m); err != nil {
		t.Fatal(err)
	}
	if version != "" {
		m["cniVersion"] = version
	}
	b, _ := json.Marshal(m)
	c, err := libcni.ConfFromBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Configs as ipoib-cni users write them (reproduced, not copied): the
// README's shape with host-local; an L2-only one; rdmanet's additions.
const (
	readmeShape = `{"name":"ib-shared","type":"ipoib","master":"ibp193s0f1",
 "ipam":{"type":"host-local","subnet":"10.56.0.0/16","rangeStart":"10.56.217.10","rangeEnd":"10.56.217.100",
         "routes":[{"dst":"0.0.0.0/0"}],"gateway":"10.56.0.1","dataDir":"{{data}}"}}`
	pkeyMTU = `{"name":"ib-p5","type":"ipoib","master":"ibp193s0f1","pkey":"0x0005","mtu":2044,
 "ipam":{"type":"whereabouts","range":"10.57.0.0/24"}}`
	fromDeviceID = `{"name":"ib-pool","type":"ipoib","deviceID":"0000:c1:00.1",
 "ipam":{"type":"host-local","subnet":"10.58.0.0/24","dataDir":"{{data}}"}}`
)

// TestIPoIBSharedMode attaches two pods to the shared IB port for every
// spec version and config shape: each pod gets an up net1 with the MTU and
// an address; the recorded child requests are exactly what the kernel would
// be asked; the pods reach each other over net1; CHECK passes; DEL removes
// the links, releases the addresses and is idempotent.
func TestIPoIBSharedMode(t *testing.T) {
	type want struct {
		pkey    uint16
		mode    string
		mtu     int // of the request; 0: kernel's
		linkMTU int
		prefix  string
		route   bool
	}
	for _, tc := range []struct {
		name       string
		conf       string
		version    string
		parentPKey uint16
		parentMode string
		want       want
	}{
		{name: "README shape, no cniVersion", conf: readmeShape, parentPKey: 0xffff, parentMode: netops.IPoIBDatagram,
			want: want{pkey: 0xffff, mode: netops.IPoIBDatagram, linkMTU: 4092, prefix: "10.56.217.", route: true}},
		{name: "README shape 0.3.1", conf: readmeShape, version: "0.3.1", parentPKey: 0xffff, parentMode: netops.IPoIBDatagram,
			want: want{pkey: 0xffff, mode: netops.IPoIBDatagram, linkMTU: 4092, prefix: "10.56.217.", route: true}},
		{name: "README shape 0.4.0, master is a PKey child in connected mode", conf: readmeShape, version: "0.4.0", parentPKey: 0x8006, parentMode: netops.IPoIBConnected,
			want: want{pkey: 0x8006, mode: netops.IPoIBConnected, linkMTU: 4092, prefix: "10.56.217.", route: true}},
		{name: "network names a PKey and an MTU, 1.0.0, rdmanet-ipam as whereabouts", conf: pkeyMTU, version: "1.0.0", parentPKey: 0xffff, parentMode: netops.IPoIBDatagram,
			want: want{pkey: 0x8005, mode: netops.IPoIBDatagram, mtu: 2044, linkMTU: 2044, prefix: "10.57.0."}},
		{name: "master from the injected deviceID, 1.1.0", conf: fromDeviceID, version: "1.1.0", parentPKey: 0xffff, parentMode: netops.IPoIBDatagram,
			want: want{pkey: 0xffff, mode: netops.IPoIBDatagram, linkMTU: 4092, prefix: "10.58.0."}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, tc.parentPKey, tc.parentMode)
			conf := n.conf(t, tc.conf, tc.version)
			pods := []ns.NetNS{netnsutil.NewNS(t), netnsutil.NewNS(t)}
			ips := make([]net.IP, len(pods))
			var wantReqs []netops.IPoIBChild
			for i, pod := range pods {
				var res types.Result
				var err error
				_ = n.inHost(func() error { res, err = n.cni.AddNetwork(context.Background(), conf, rt(i, pod)); return nil })
				if err != nil {
					t.Fatalf("ADD pod %d: %v", i, err)
				}
				cur, err := current.NewResultFromResult(res)
				if err != nil {
					t.Fatal(err)
				}
				if len(cur.IPs) != 1 || !strings.HasPrefix(cur.IPs[0].Address.IP.String(), tc.want.prefix) {
					t.Fatalf("pod %d IPs %v, want one %s*", i, cur.IPs, tc.want.prefix)
				}
				ips[i] = cur.IPs[0].Address.IP
				l, ok := netnsutil.Link(t, pod, "net1")
				if !ok || l.MTU != tc.want.linkMTU || !l.Up || l.Kind != "macvlan" {
					t.Fatalf("pod %d net1 = %+v (present %v), want the up stand-in with MTU %d", i, l, ok, tc.want.linkMTU)
				}
				if got := netnsutil.Addrs(t, pod, "net1"); len(got) != 1 || got[0] != cur.IPs[0].Address.String() {
					t.Errorf("pod %d net1 addresses %v, want %s", i, got, cur.IPs[0].Address.String())
				}
				hasDefault := false
				for _, r := range netnsutil.Routes(t, pod, "net1") {
					hasDefault = hasDefault || r == "default"
				}
				if hasDefault != tc.want.route {
					t.Errorf("pod %d default route via net1: %v, want %v (from the IPAM config)", i, hasDefault, tc.want.route)
				}
				wantReqs = append(wantReqs, netops.IPoIBChild{Name: ipoib.TempName(containerID(i), "net1"), Parent: sharedPort,
					PKey: tc.want.pkey, Mode: tc.want.mode, Umcast: true, MTU: tc.want.mtu})
				if tc.version != "" && tc.version != "0.3.1" {
					if err := n.inHost(func() error { return n.cni.CheckNetwork(context.Background(), conf, rt(i, pod)) }); err != nil {
						t.Errorf("CHECK pod %d: %v", i, err)
					}
				}
			}
			reqs, err := n.rec.IPoIBRequests()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(reqs, wantReqs) {
				t.Errorf("recorded IPoIB requests\n got %+v\nwant %+v", reqs, wantReqs)
			}
			if left := netnsutil.Links(t, n.host); strings.Contains(strings.Join(left, " "), "ipoib") {
				t.Errorf("host keeps a temporary child: %v", left)
			}
			udpReach(t, pods[0], ips[0], pods[1], ips[1])

			for i, pod := range pods {
				for round := range 2 { // DEL is idempotent
					if err := n.inHost(func() error { return n.cni.DelNetwork(context.Background(), conf, rt(i, pod)) }); err != nil {
						t.Fatalf("DEL pod %d (round %d): %v", i, round, err)
					}
				}
				if _, ok := netnsutil.Link(t, pod, "net1"); ok {
					t.Errorf("pod %d keeps net1 after DEL", i)
				}
			}
			if _, ok := netnsutil.Link(t, n.host, sharedPort); !ok {
				t.Error("the IB port stand-in is gone")
			}
			if held := hostLocalHeld(n, conf.Network.Name); len(held) != 0 {
				t.Errorf("host-local still holds %v after DEL", held)
			}
			if !strings.Contains(tc.conf, "whereabouts") {
				return
			}
			// rdmanet-ipam hands out the lowest free address: two new pods get the released two
			for i, pod := range []ns.NetNS{netnsutil.NewNS(t), netnsutil.NewNS(t)} {
				var res types.Result
				_ = n.inHost(func() error { res, err = n.cni.AddNetwork(context.Background(), conf, rt(10+i, pod)); return nil })
				if err != nil {
					t.Fatalf("ADD after DEL: %v", err)
				}
				cur, _ := current.NewResultFromResult(res)
				if !cur.IPs[0].Address.IP.Equal(ips[0]) && !cur.IPs[0].Address.IP.Equal(ips[1]) {
					t.Errorf("pod after DEL got %s, want a released address (%s or %s)", cur.IPs[0].Address.IP, ips[0], ips[1])
				}
			}
		})
	}
}

// TestIPoIBDelAfterPodGone: DEL after the pod's netns is gone (the kernel
// destroyed the child with it) and with an empty CNI_NETNS still releases
// the address and succeeds.
func TestIPoIBDelAfterPodGone(t *testing.T) {
	n := newNode(t, 0xffff, netops.IPoIBDatagram)
	conf := n.conf(t, readmeShape, "1.0.0")
	pod := netnsutil.NewNS(t)
	if err := n.inHost(func() error { _, err := n.cni.AddNetwork(context.Background(), conf, rt(0, pod)); return err }); err != nil {
		t.Fatal(err)
	}
	r := rt(0, pod)
	netnsutil.DeleteNS(t, pod)
	if err := n.inHost(func() error { return n.cni.DelNetwork(context.Background(), conf, r) }); err != nil {
		t.Fatalf("DEL with the netns gone: %v", err)
	}
	r.NetNS = ""
	if err := n.inHost(func() error { return n.cni.DelNetwork(context.Background(), conf, r) }); err != nil {
		t.Fatalf("DEL without CNI_NETNS: %v", err)
	}
	if held := hostLocalHeld(n, "ib-shared"); len(held) != 0 {
		t.Errorf("host-local still holds %v", held)
	}
}

// hostLocalHeld lists the addresses host-local holds for network.
func hostLocalHeld(n *node, network string) []string {
	var out []string
	ents, _ := os.ReadDir(filepath.Join(n.hlData, network))
	for _, e := range ents {
		if net.ParseIP(e.Name()) != nil {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestIPoIBRefusals: what would fail later is refused at ADD with the
// field, the value and the fix, and leaves nothing behind.
func TestIPoIBRefusals(t *testing.T) {
	for _, tc := range []struct {
		name  string
		conf  string
		fault string
		want  []string
	}{
		{name: "deviceID of a RoCE port", conf: `{"name":"n","type":"ipoib","deviceID":"0000:03:00.0","ipam":{}}`,
			want: []string{"not an InfiniBand port", "macvlan"}},
		{name: "deviceID of an IB-only function", conf: `{"name":"n","type":"ipoib","deviceID":"0000:d1:00.0","ipam":{}}`,
			want: []string{"has no netdev", "IB-only"}},
		{name: "master missing on the node", conf: `{"name":"n","type":"ipoib","master":"ib9","ipam":{}}`,
			want: []string{`master "ib9"`, "link not found"}},
		{name: "dhcp", conf: `{"name":"n","type":"ipoib","master":"ibp193s0f1","ipam":{"type":"dhcp"}}`,
			want: []string{`"ipam.type"`, "dhcp"}},
		{name: "fault after IPAM: rolled back", conf: readmeShape, fault: "ipoib:ipam",
			want: []string{"injected fault"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, 0xffff, netops.IPoIBDatagram)
			t.Setenv(netops.EnvFault, tc.fault)
			pod := netnsutil.NewNS(t)
			err := n.inHost(func() error {
				_, err := n.cni.AddNetwork(context.Background(), n.conf(t, tc.conf, "1.0.0"), rt(0, pod))
				return err
			})
			if err == nil {
				t.Fatal("ADD succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if l := netnsutil.Links(t, pod); len(l) > 1 {
				t.Errorf("pod keeps %v", l)
			}
			if l := netnsutil.Links(t, n.host); len(l) != 3 {
				t.Errorf("host links %v, want lo and the stand-in pair", l)
			}
			if held := hostLocalHeld(n, "ib-shared"); len(held) != 0 {
				t.Errorf("host-local still holds %v", held)
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
		_, err = c.Write([]byte("ipoib hello"))
		return err
	})
	_ = srv.SetReadDeadline(time.Now().Add(20 * time.Second))
	buf := make([]byte, 64)
	k, from, err := srv.ReadFromUDP(buf)
	if err != nil {
		t.Fatalf("pod %s did not receive from %s over net1: %v", ipB, ipA, err)
	}
	if string(buf[:k]) != "ipoib hello" || !from.IP.Equal(ipA) {
		t.Errorf("received %q from %s", buf[:k], from)
	}
}
