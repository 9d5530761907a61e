// Package cluster runs a real single-node Kubernetes cluster on this machine
// for rdmanet's cluster tier: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kubelet built from the Kubernetes v1.37.2 modules,
// containerd v2.4.2 and runc v1.4.0, all inside network namespaces and a
// private mount namespace the harness creates, so the machine's own links,
// routes and mounts are untouched.
//
// The node's "hardware" is the sysfs fixture (internal/sysfsfixture) with veth
// ends standing in for the VF netdevs; rdmanet is installed from its
// simulated-node image with `kubectl apply -k test/cluster/overlay`.
//
// Process tree (all in the node network namespace, one mount namespace):
//
//	rdmanet-cluster supervise        keeps the node running, restarts parts on request,
//	├── etcd                          forwards 127.0.0.1:<port> of the machine to the API server
//	├── kube-apiserver
//	├── kube-controller-manager
//	├── kube-scheduler
//	├── containerd ── containerd-shim-runc-v2 ── pods
//	├── kubelet
//	└── fake-gpu-plugin              (test-only: nvidia.com/gpu from the fixture's GPUs)
package cluster

import (
	"fmt"
	"os"
	"path/filepath"
)

// Names and addresses of the simulated node.
const (
	NodeName  = "rdmanet-node"
	NodeNetns = "rdmanet-cluster"        // the node's network namespace
	WireNetns = "rdmanet-cluster-fabric" // the other ends of the node's links (the "switch")
	UplinkDev = "eno1"                   // the node's management NIC: the fixture's Mgmt PF, carries the default route
	NodeIP    = "10.250.0.2"
	FabricIP  = "10.250.0.1"
	NodeCIDR  = "/24"
	PodCIDR   = "10.244.0.0/24" // the first node's; Node.PodCIDR for any
	// ClusterCIDR holds every node's pod CIDR (10.244.<i>.0/24).
	ClusterCIDR  = "10.244.0.0/16"
	ServiceNet   = "10.96.0.0/16"
	ServiceIP    = "10.96.0.1"  // the kubernetes Service
	DNSServiceIP = "10.96.0.10" // kube-system/kube-dns: CoreDNS
	APIPort      = 6443
	EtcdPort     = 2379

	ExclusivePF = "enp65s0f0np0"
	SharedPF    = "ens8f0np0"
	NumVFs      = 16

	// ClusterNetwork is the name of the node's primary network (bridge +
	// host-local), as rdmanet's 00-rdmanet.conf names it.
	ClusterNetwork = "k8s-pod-network"
)

// VFNetdev is VF i's netdev on the node (a veth end).
func VFNetdev(i int) string { return fmt.Sprintf("enp65s0f0v%d", i) }

// Layout is the state directory of one cluster. Everything the harness
// writes lives under Dir, except the two network namespaces, the private
// mount points (visible only inside the node's mount namespace) and the
// cgroup subtree kubelet creates (CgroupRoot).
type Layout struct {
	Dir  string // absolute
	Repo string // the rdmanet checkout (for tools, images and the overlay)
}

// NewLayout returns the layout rooted at dir (made absolute).
func NewLayout(dir, repo string) (Layout, error) {
	d, err := filepath.Abs(dir)
	if err != nil {
		return Layout{}, fmt.Errorf("state dir %s: %w", dir, err)
	}
	r, err := filepath.Abs(repo)
	if err != nil {
		return Layout{}, fmt.Errorf("repo %s: %w", repo, err)
	}
	return Layout{Dir: d, Repo: r}, nil
}

func (l Layout) path(p ...string) string { return filepath.Join(append([]string{l.Dir}, p...)...) }

func (l Layout) PKI() string            { return l.path("pki") }
func (l Layout) Logs() string           { return l.path("logs") }
func (l Layout) Log(name string) string { return l.path("logs", name+".log") }
func (l Layout) Etcd() string           { return l.path("etcd") }
func (l Layout) Sysfs() string          { return l.path("node", "sys") } // the first node's; NodeSysfs for any
func (l Layout) Bin() string            { return l.path("bin") }         // the node's "OS" binaries (kube*, containerd, runc, fake GPU plugin)
func (l Layout) Images() string         { return l.path("images") }

// Tools is where hack/build-k8s-tools.sh and hack/build-runtime-tools.sh put
// the Kubernetes and runtime binaries ($TOOLS_BIN, default <repo>/.tools/bin).
func (l Layout) Tools() string {
	if d := os.Getenv("TOOLS_BIN"); d != "" {
		return d
	}
	return filepath.Join(l.Repo, ".tools", "bin")
}

// binary resolves a node binary: the cluster's own bin dir first (test-only
// helpers built for this cluster), then the tools dir.
func (l Layout) binary(name string) string {
	if p := filepath.Join(l.Bin(), name); fileExists(p) {
		return p
	}
	return filepath.Join(l.Tools(), name)
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// AdminKubeconfig is the kubeconfig for the machine's shell (through the
// forwarded port); NodeAdminKubeconfig is the same identity from inside the
// node's network namespace.
func (l Layout) AdminKubeconfig() string     { return l.path("admin.kubeconfig") }
func (l Layout) NodeAdminKubeconfig() string { return l.path("pki", "admin-node.kubeconfig") }

func (l Layout) ContainerdConfig() string { return l.path("config", "containerd.toml") } // the first node's
func (l Layout) KubeletConfig() string    { return l.path("config", "kubelet.yaml") }    // the first node's
func (l Layout) Config(name string) string {
	return l.path("config", name)
}

// ControlSocket is the supervisor's control endpoint (HTTP over a unix socket).
func (l Layout) ControlSocket() string { return l.path("supervisor.sock") }
func (l Layout) PIDFile() string       { return l.path("supervisor.pid") }
func (l Layout) Snapshot() string      { return l.path("machine-before.json") }
func (l Layout) StateFile() string     { return l.path("cluster.json") }

// DefaultForward is the machine's loopback address forwarded to the API server.
const DefaultForward = "127.0.0.1:16443"

// ContainerdSocket is inside the private mount namespace's /run/containerd.
const ContainerdSocket = "/run/containerd/containerd.sock"

// CgroupRoot is kubelet's --cgroup-root: every pod cgroup lives under it in
// each cgroup v1 hierarchy, so cluster-down removes one subtree.
const CgroupRoot = "/rdmanet-cluster"

// PrivateMount is a node path that the node's supervisor bind-mounts from
// the node's state directory inside its mount namespace: the node's
// /opt/cni/bin is not the machine's, nor another node's.
type PrivateMount struct {
	Target string // path as the node's processes see it
	Source string // relative to the node's directory (Layout.NodeDir)
}

// PrivateMounts are the node's own directories. The targets that the
// machine lacks are created (empty) by cluster-up and removed by
// cluster-down.
var PrivateMounts = []PrivateMount{
	{"/etc/cni/net.d", "etc/cni/net.d"},
	{"/opt/cni/bin", "opt/cni/bin"},
	{"/var/lib/kubelet", "var/lib/kubelet"},
	{"/var/lib/cni", "var/lib/cni"},
	{"/var/lib/rdmanet", "var/lib/rdmanet"},
	{"/var/lib/containerd", "var/lib/containerd"},
	{"/var/log/pods", "var/log/pods"},
	{"/var/log/containers", "var/log/containers"},
	{"/run/containerd", "run/containerd"},
	{"/run/rdmanet", "run/rdmanet"},
	{"/run/netns", "run/netns"},
	{"/var/run/k8s.cni.cncf.io", "run/k8s.cni.cncf.io"},
	// CDI specs of the DRA kubelet plugin, read by containerd (its default
	// cdi_spec_dirs include /var/run/cdi).
	{"/run/cdi", "run/cdi"},
	// The simulated NICs' sysfs (the overlay points the agent and the
	// plugins here): a fixed path, so the committed overlay needs no
	// machine-specific value.
	{"/var/lib/rdmanet-sim/sys", "sys"},
	// The RDMA character devices the agent hands to pods (writeDevNodes).
	{"/dev/infiniband", "dev/infiniband"},
}

// mkdirs creates the state directory tree of the cluster and its nodes.
func (l Layout) mkdirs(nodes []Node) error {
	dirs := []string{l.PKI(), l.Logs(), l.Etcd(), l.Bin(), l.Images(), l.path("config")}
	for _, n := range nodes {
		for _, m := range PrivateMounts {
			dirs = append(dirs, l.NodeDir(n, m.Source))
		}
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	return nil
}
