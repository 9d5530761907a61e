package burstbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"google.golang.org/grpc"
	"k8s.io/client-go/kubernetes"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	nadclient "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/client/clientset/versioned"

	"github.com/rdmanet/rdmanet/internal/devinfo"
	"github.com/rdmanet/rdmanet/internal/netops"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
	"github.com/rdmanet/rdmanet/test/apiserver"
	"github.com/rdmanet/rdmanet/test/netnsutil"
)

// The simulated node's fixed names (the RoCE PF of sysfsfixture.NewStandard).
const (
	NodeName     = "burst-node-1"
	ResourceName = "example.com/sriov_rdma"
	pfBDF        = "0000:41:00.0"
)

// vfNetdev names VF i's netdev (a veth end in the host namespace).
func vfNetdev(i int) string { return fmt.Sprintf("enp65s0f0v%d", i) }

// railMaster is the shared port rail r's macvlan attachments hang off.
func railMaster(r int) string { return fmt.Sprintf("rail%d", r) }

// Node is the simulated node both impls run on: a host-namespace stand-in
// with VFs (veth ends named as the sysfs fixture's VF netdevs) and one shared
// port per rail, the fixture, the netops recorder, a PodResources server
// answering as kubelet does, and a relay that makes the API server reachable
// from the host namespace as from a real node.
type Node struct {
	t          testing.TB
	Dir        string
	BinDir     string
	API        *apiserver.Server
	Core       kubernetes.Interface
	NADs       nadclient.Interface
	Host       ns.NetNS
	Fix        *sysfsfixture.Standard
	Rec        *netops.Recorder
	PR         *PodResources
	VFs        int
	Kubeconfig string // reaches the API server from Host (the relay)
	RelayAddr  string // host:port of the relay inside Host
	PRSocket   string // the PodResources socket rdmanet is configured with
	DefaultNet []byte // the default network's conflist (bridge + host-local)

	podMu sync.Mutex
	pods  []ns.NetNS
}

// NewNode builds the node: vfs VF stand-ins (0: none, every rail macvlan)
// and maxRails shared ports. Everything it creates goes at t's cleanup.
// It sets the process environment every plugin and daemon inherits
// (RDMANET_NETOPS=record and its state, the fixture's sysfs root, the
// node-local IPAM store, NODENAME).
func NewNode(t testing.TB, binDir string, vfs, maxRails int) *Node {
	t.Helper()
	netnsutil.RequireRoot(t)
	api := apiserver.Shared(t)
	n := &Node{t: t, Dir: t.TempDir(), BinDir: binDir, API: api, VFs: vfs, PR: &PodResources{devices: map[string][]string{}}}
	var err error
	if n.Core, err = kubernetes.NewForConfig(api.Config()); err != nil {
		t.Fatal(err)
	}
	if n.NADs, err = nadclient.NewForConfig(api.Config()); err != nil {
		t.Fatal(err)
	}
	n.Kubeconfig = filepath.Join(n.Dir, "kubeconfig")
	if err := api.WriteKubeconfig(n.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	fixVFs := vfs
	if fixVFs == 0 {
		fixVFs = 1 // the fixture's default would be 16; none of them is handed out
	}
	n.Fix, err = sysfsfixture.NewStandard(filepath.Join(n.Dir, "sys"), sysfsfixture.StandardOptions{RoCEVFs: fixVFs, VFNetdev: vfNetdev})
	if err != nil {
		t.Fatal(err)
	}
	n.Host = netnsutil.NewNS(t)
	n.RelayAddr = netnsutil.RelayAPIServer(t, n.Host, n.Kubeconfig)
	if vfs > 0 {
		names := make([]string, vfs)
		for i := range names {
			names[i] = vfNetdev(i)
		}
		netnsutil.SimulateVFs(t, n.Host, names...)
	}
	for r := range maxRails {
		netnsutil.AddVeth(t, n.Host, railMaster(r), nil, railMaster(r)+"p", nil)
		netnsutil.SetUp(t, n.Host, railMaster(r))
	}
	n.Rec = netops.NewRecorder(filepath.Join(n.Dir, "netops.json"))
	if err := n.Rec.SetNetnsMode(netops.RDMANetnsExclusive); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		netops.EnvImpl: "record", netops.EnvState: n.Rec.StatePath(), netops.EnvFault: "",
		"RDMANET_SYSFS_ROOT": n.Fix.Root, "RDMANET_CNI_STATE_DIR": filepath.Join(n.Dir, "state"),
		"RDMANET_IPAM_STORE_PATH": filepath.Join(n.Dir, "ipam"), "RDMANET_IPAM_STORE_TYPE": "local", "NODENAME": NodeName,
	} {
		t.Setenv(k, v)
	}
	for _, d := range []string{"conf", "devinfo", "hostlocal"} {
		if err := os.MkdirAll(filepath.Join(n.Dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// a /16: every pod of the largest burst gets an address
	n.DefaultNet = []byte(fmt.Sprintf(`{"cniVersion":"1.0.0","name":"cluster-net","plugins":[{"type":"bridge","bridge":"cni0","isDefaultGateway":true,
		"ipam":{"type":"host-local","ranges":[[{"subnet":"10.244.0.0/16"}]],"dataDir":%q}}]}`, filepath.Join(n.Dir, "hostlocal")))
	if err := os.WriteFile(filepath.Join(n.Dir, "conf", "00-cluster.conflist"), n.DefaultNet, 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range vfs {
		vf := sysfsfixture.VFBDF(pfBDF, i)
		if err := devinfo.Write(filepath.Join(n.Dir, "devinfo"), ResourceName, vf, devinfo.PCI(vf, pfBDF, n.Fix.RDMAByBD[vf])); err != nil {
			t.Fatal(err)
		}
	}
	n.PRSocket = filepath.Join(n.Dir, "pod-resources.sock")
	n.PR.Serve(t, n.PRSocket)
	return n
}

// PodNS returns the network namespaces of pods 0..count-1, made on first
// use and kept for the node's life (a row's DELs leave them empty).
func (n *Node) PodNS(count int) []ns.NetNS {
	n.podMu.Lock()
	defer n.podMu.Unlock()
	for len(n.pods) < count {
		n.pods = append(n.pods, netnsutil.NewNS(n.t))
	}
	return n.pods[:count]
}

// VF returns VF i's PCI address.
func VF(i int) string { return sysfsfixture.VFBDF(pfBDF, i) }

// VFsHome reports the VF netdevs that are not in the host namespace.
func (n *Node) VFsHome() []string {
	var missing []string
	links := netnsutil.Links(n.t, n.Host)
	for i := range n.VFs {
		if !contains(links, vfNetdev(i)) {
			missing = append(missing, vfNetdev(i))
		}
	}
	return missing
}

func contains(l []string, v string) bool {
	for _, x := range l {
		if x == v {
			return true
		}
	}
	return false
}

// PodResources answers kubelet's PodResources API for the pods of the
// burst: which VFs of ResourceName each pod was allocated.
type PodResources struct {
	podresourcesapi.UnimplementedPodResourcesListerServer
	mu      sync.RWMutex
	devices map[string][]string // ns/name -> VF PCI addresses
}

// Set records the VFs kubelet allocated pod ns/name (none: forget it).
func (s *PodResources) Set(key string, vfs []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(vfs) == 0 {
		delete(s.devices, key)
		return
	}
	s.devices[key] = vfs
}

func (s *PodResources) Get(_ context.Context, r *podresourcesapi.GetPodResourcesRequest) (*podresourcesapi.GetPodResourcesResponse, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	pr := &podresourcesapi.PodResources{Name: r.PodName, Namespace: r.PodNamespace, Containers: []*podresourcesapi.ContainerResources{{Name: "trainer"}}}
	if ids := s.devices[r.PodNamespace+"/"+r.PodName]; len(ids) > 0 {
		pr.Containers[0].Devices = []*podresourcesapi.ContainerDevices{{ResourceName: ResourceName, DeviceIds: ids}}
	}
	return &podresourcesapi.GetPodResourcesResponse{PodResources: pr}, nil
}

// List answers as kubelet does for every pod with devices (Multus reads
// the allocation this way).
func (s *PodResources) List(context.Context, *podresourcesapi.ListPodResourcesRequest) (*podresourcesapi.ListPodResourcesResponse, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []*podresourcesapi.PodResources
	for key, ids := range s.devices {
		nsName, name, _ := strings.Cut(key, "/")
		out = append(out, &podresourcesapi.PodResources{Name: name, Namespace: nsName, Containers: []*podresourcesapi.ContainerResources{{Name: "trainer",
			Devices: []*podresourcesapi.ContainerDevices{{ResourceName: ResourceName, DeviceIds: ids}}}}})
	}
	return &podresourcesapi.ListPodResourcesResponse{PodResources: out}, nil
}

// Serve serves s on the unix socket path until t's cleanup.
func (s *PodResources) Serve(t testing.TB, path string) {
	t.Helper()
	lis, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	podresourcesapi.RegisterPodResourcesListerServer(g, s)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
}

// kubeletPodResources is where Multus v4 dials kubelet's PodResources API
// (not configurable in Multus).
const kubeletPodResources = "/var/lib/kubelet/pod-resources/kubelet.sock"

// ServeAtKubeletPath serves s at kubelet's own path for Multus, and removes
// it (and the directories it made) at t's cleanup. A socket already there
// that answers is a kubelet's: the bench fails rather than shadow it. One
// that nobody listens on is a killed bench run's: it is removed.
func (s *PodResources) ServeAtKubeletPath(t testing.TB) {
	t.Helper()
	stale, err := clearStaleSocket(kubeletPodResources)
	if err != nil {
		t.Fatalf("%v: Multus reads the VF allocation there, where the bench would serve its PodResources; run bench-burst on a machine without kubelet, or with -burst.vfs=0", err)
	}
	if stale {
		t.Logf("%s: nobody listened there (a killed bench run's socket); removed it", kubeletPodResources)
	}
	made := mkdirAllTracked(t, filepath.Dir(kubeletPodResources))
	s.Serve(t, kubeletPodResources)
	t.Cleanup(func() {
		_ = os.Remove(kubeletPodResources)
		removeMade(made)
	})
}

// clearStaleSocket removes a unix socket at path that nobody listens on
// (stale: true). A socket that answers, or one that cannot be checked, is
// an error: it may be a live kubelet's.
func clearStaleSocket(path string) (stale bool, err error) {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("%s cannot be checked (%w)", path, err)
	case fi.Mode().Type() != os.ModeSocket:
		return false, fmt.Errorf("%s is there and is not a socket (%v); remove it if no kubelet runs here", path, fi.Mode().Type())
	}
	conn, err := net.DialTimeout("unix", path, 2*time.Second)
	if err == nil {
		conn.Close()
		return false, fmt.Errorf("%s answers (a kubelet on this machine?)", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return false, fmt.Errorf("%s exists and cannot be checked (%w); remove it if no kubelet runs here", path, err)
	}
	if err := os.Remove(path); err != nil {
		return false, fmt.Errorf("%s: remove the stale socket: %w", path, err)
	}
	return true, nil
}

// mkdirAllTracked creates dir and its missing parents and returns those it
// created, innermost first.
func mkdirAllTracked(t testing.TB, dir string) []string {
	t.Helper()
	var made []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		}
		made = append(made, d)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	return made
}

func removeMade(made []string) {
	for _, d := range made {
		_ = os.Remove(d)
	}
}

// writeJSON writes v as JSON to path.
func writeJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
