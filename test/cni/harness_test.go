// Package cni_test drives the rdmanet data-plane CNI plugins the way a
// container runtime does: plugin binaries built into a temp dir on the CNI
// path, invoked through libcni, in real network namespaces. A simulated
// node is a "host" netns whose VF netdevs are veth ends, a sysfs fixture
// that maps the VFs' PCI addresses to those netdevs, and the netops
// recorder standing in for VF configuration through the PF and for the RDMA
// subsystem (neither exists on a CI machine).
package cni_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/rdmanet/rdmanet/internal/netops"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
	"github.com/rdmanet/rdmanet/test/netnsutil"
	"github.com/rdmanet/rdmanet/test/pluginbin"
	"github.com/rdmanet/rdmanet/test/seeds"
)

// binDir holds the plugin binaries (built once in TestMain).
var (
	binDir string
	// ipamType is the IPAM the seed NAD's "whereabouts" resolves to: the
	// project's rdmanet-ipam installed under the Whereabouts name.
	ipamNote string
)

// Versions are the CNI spec versions both plugins claim.
var Versions = []string{"0.3.1", "0.4.0", "1.0.0", "1.1.0"}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rdmanet-cni-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := 1
	if err := buildPlugins(dir); err != nil {
		fmt.Fprintln(os.Stderr, "build CNI plugins:", err)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildPlugins installs the plugins the tests exec, rdmanet-ipam also under
// the Whereabouts name the seed NAD uses, as a node would.
func buildPlugins(dir string) error {
	return pluginbin.Build(dir, pluginbin.SRIOV, pluginbin.RDMA, pluginbin.IPAM, pluginbin.Macvlan, pluginbin.HostLocal)
}

// seedNAD is spec.config of the exclusive seed's face-training-rdma NAD,
// read from examples/seeds.
var seedNAD = seeds.ExclusiveNADConfig()

const pfBDF = "0000:41:00.0"

// node is a simulated RDMA node.
type node struct {
	host     ns.NetNS
	fix      *sysfsfixture.Standard
	rec      *netops.Recorder
	root     string
	stateDir string
	ipamDir  string
	cni      *libcni.CNIConfig
	orig     map[int]netops.Link // VF netdevs as created
}

func vfBDF(i int) string       { return sysfsfixture.VFBDF(pfBDF, i) }
func vfNetdev(i int) string    { return fmt.Sprintf("enp65s0f0v%d", i) }
func podName(i int) string     { return fmt.Sprintf("face-trainer-%d", i) }
func containerID(i int) string { return fmt.Sprintf("c0ffee%04d", i) }

// newNode builds a node with vfs simulated VFs, the RDMA subsystem in
// exclusive mode, and points the plugin processes at it through the env.
func newNode(t testing.TB, vfs int) *node {
	t.Helper()
	netnsutil.RequireRoot(t)
	root := t.TempDir()
	fix, err := sysfsfixture.NewStandard(filepath.Join(root, "sys"), sysfsfixture.StandardOptions{RoCEVFs: vfs, VFNetdev: vfNetdev})
	if err != nil {
		t.Fatal(err)
	}
	n := &node{host: netnsutil.NewNS(t), fix: fix, root: root, rec: netops.NewRecorder(filepath.Join(root, "netops.json")),
		stateDir: filepath.Join(root, "state"), ipamDir: filepath.Join(root, "ipam"), orig: map[int]netops.Link{}}
	names := make([]string, vfs)
	for i := range names {
		names[i] = vfNetdev(i)
	}
	netnsutil.SimulateVFs(t, n.host, names...)
	for i := range names {
		l, ok := netnsutil.Link(t, n.host, names[i])
		if !ok {
			t.Fatalf("simulated VF %s missing", names[i])
		}
		n.orig[i] = l
	}
	if err := n.rec.SetNetnsMode(netops.RDMANetnsExclusive); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		netops.EnvImpl:            "record",
		netops.EnvState:           n.rec.StatePath(),
		"RDMANET_SYSFS_ROOT":      fix.Root,
		"RDMANET_CNI_STATE_DIR":   n.stateDir,
		"RDMANET_IPAM_STORE_PATH": n.ipamDir,
		"RDMANET_IPAM_STORE_TYPE": "local",
		"NODENAME":                "gpu-node-1",
		netops.EnvFault:           "",
	} {
		t.Setenv(k, v)
	}
	n.cni = libcni.NewCNIConfigWithCacheDir([]string{binDir}, filepath.Join(root, "cni-cache"), nil)
	return n
}

// confList is the seed NAD at version v with deviceID injected into every
// plugin, as the meta plugin does with the kubelet-allocated VF.
func confList(t testing.TB, raw string, v, deviceID string) *libcni.NetworkConfigList {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		t.Fatal(err)
	}
	m["cniVersion"] = v
	if deviceID != "" {
		for _, p := range m["plugins"].([]any) {
			p.(map[string]any)["deviceID"] = deviceID
		}
	}
	b, _ := json.Marshal(m)
	l, err := libcni.ConfListFromBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func rt(i int, pod ns.NetNS) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{
		ContainerID: containerID(i), NetNS: pod.Path(), IfName: "net1",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "ai-training"}, {"K8S_POD_NAME", podName(i)},
			{"K8S_POD_INFRA_CONTAINER_ID", containerID(i)}},
	}
}

// inHost runs f in the host stand-in: plugin processes forked from this
// thread start in that namespace, as a runtime's plugins start in the node's.
func (n *node) inHost(f func() error) error {
	return n.host.Do(func(ns.NetNS) error { return f() })
}

func (n *node) add(l *libcni.NetworkConfigList, r *libcni.RuntimeConf) (res types.Result, err error) {
	_ = n.inHost(func() error { res, err = n.cni.AddNetworkList(context.Background(), l, r); return nil })
	return res, err
}

func (n *node) del(l *libcni.NetworkConfigList, r *libcni.RuntimeConf) (err error) {
	_ = n.inHost(func() error { err = n.cni.DelNetworkList(context.Background(), l, r); return nil })
	return err
}

func (n *node) check(l *libcni.NetworkConfigList, r *libcni.RuntimeConf) (err error) {
	_ = n.inHost(func() error { err = n.cni.CheckNetworkList(context.Background(), l, r); return nil })
	return err
}

// rdmaDev is the RDMA device of VF i in the fixture.
func (n *node) rdmaDev(t testing.TB, i int) string {
	t.Helper()
	d := n.fix.RDMAByBD[vfBDF(i)]
	if d == "" {
		t.Fatalf("fixture VF %d has no RDMA device", i)
	}
	return d
}

// allocations returns container ID -> IPs held in the IPAM store for pods
// (reservations such as a network's gateway are left out).
func (n *node) allocations(t testing.TB) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	b, err := os.ReadFile(filepath.Join(n.ipamDir, "blocks.json"))
	if os.IsNotExist(err) {
		return out
	}
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Blocks []struct {
			Spec struct {
				Allocations map[string]struct {
					ContainerID string `json:"containerID"`
					Reserved    string `json:"reserved"` // a gateway's reservation, not a pod's
				} `json:"allocations"`
			} `json:"spec"`
		} `json:"blocks"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("IPAM store: %v", err)
	}
	for _, bl := range f.Blocks {
		for ip, a := range bl.Spec.Allocations {
			if a.Reserved == "" {
				out[a.ContainerID] = append(out[a.ContainerID], ip)
			}
		}
	}
	return out
}

// stateFiles lists what the plugins left in their state dirs.
func (n *node) stateFiles(t testing.TB) []string {
	t.Helper()
	var out []string
	_ = filepath.Walk(n.stateDir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			rel, _ := filepath.Rel(n.stateDir, p)
			out = append(out, rel)
		}
		return nil
	})
	return out
}

// assertRestored checks VF i is exactly as the node had it before any ADD,
// and that nothing of container c is left.
func (n *node) assertRestored(t testing.TB, i int, c string) {
	t.Helper()
	l, ok := netnsutil.Link(t, n.host, vfNetdev(i))
	if !ok {
		t.Fatalf("VF %d netdev %s is not back in the host namespace; host has %v", i, vfNetdev(i), netnsutil.Links(t, n.host))
	}
	o := n.orig[i]
	if l.MAC.String() != o.MAC.String() || l.MTU != o.MTU || l.Up != o.Up {
		t.Errorf("VF %d netdev: MAC %s MTU %d up %v, want MAC %s MTU %d up %v", i, l.MAC, l.MTU, l.Up, o.MAC, o.MTU, o.Up)
	}
	if a := netnsutil.Addrs(t, n.host, vfNetdev(i)); len(a) != 0 {
		t.Errorf("VF %d netdev keeps addresses %v", i, a)
	}
	st, err := n.rec.VFState("enp65s0f0np0", i)
	if err != nil {
		t.Fatal(err)
	}
	if st != netops.DefaultVFState() {
		t.Errorf("VF %d settings not restored: %+v, want %+v", i, st, netops.DefaultVFState())
	}
	home, err := n.rec.RDMAHome(n.rdmaDev(t, i))
	if err != nil {
		t.Fatal(err)
	}
	if !home {
		t.Errorf("RDMA device %s of VF %d is not back in the host namespace", n.rdmaDev(t, i), i)
	}
	if f := n.stateFiles(t); len(f) != 0 {
		t.Errorf("state dir keeps %v, want nothing", f)
	}
	if ips := n.allocations(t)[c]; len(ips) != 0 {
		t.Errorf("IPAM still holds %v for container %s", ips, c)
	}
}

// assertAttached checks VF i is net1 of pod with an address of the seed range.
func (n *node) assertAttached(t testing.TB, i int, pod ns.NetNS) {
	t.Helper()
	l, ok := netnsutil.Link(t, pod, "net1")
	if !ok {
		t.Fatalf("pod has no net1; it has %v", netnsutil.Links(t, pod))
	}
	if !l.Up {
		t.Errorf("net1 is down")
	}
	if _, ok := netnsutil.Link(t, n.host, vfNetdev(i)); ok {
		t.Errorf("VF netdev %s is still in the host namespace", vfNetdev(i))
	}
	addrs := netnsutil.Addrs(t, pod, "net1")
	if len(addrs) != 1 || !strings.HasPrefix(addrs[0], "10.60.") || strings.HasPrefix(addrs[0], "10.60.0.") || !strings.HasSuffix(addrs[0], "/16") {
		t.Errorf("net1 addresses %v, want one 10.60.0.0/16 address outside the excluded 10.60.0.0/24", addrs)
	}
	for _, r := range netnsutil.Routes(t, pod, "net1") {
		if r == "default" {
			t.Errorf("net1 got a default route; the training net must not carry one unless IPAM asks")
		}
	}
	in, err := n.rec.InNetns(n.rdmaDev(t, i), pod)
	if err != nil {
		t.Fatal(err)
	}
	if !in {
		t.Errorf("RDMA device %s is not in the pod netns", n.rdmaDev(t, i))
	}
}
