package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// RDMA netns modes a simulated node's kernel runs in.
const (
	ModeExclusive = "exclusive"
	ModeShared    = "shared"
)

// MaxNodes is the most nodes one machine of this kind carries (2 cores;
// each node runs containerd, kubelet, kube-proxy and rdmanet's pods).
const MaxNodes = 4

// Node is one simulated node: a network namespace, a mount namespace (its
// supervisor's), its own state directory, kubelet, containerd and sysfs
// fixture. Node 0 also runs the control plane and CoreDNS.
type Node struct {
	Index   int    `json:"index"`
	Name    string `json:"name"`
	Netns   string `json:"netns"`
	IP      string `json:"ip"`      // on the management network
	PodCIDR string `json:"podCIDR"` // the cluster network's per-node range, routed between nodes
	// Mode is the simulated kernel's RDMA netns mode, fixed for the
	// node's life (labels and pools follow it).
	Mode string `json:"mode"`
	// Rails is how many RoCE PFs with VFs the node's board has: 1 (the
	// single-node cluster's bundled fixture) or 2 (every node of a
	// multi-node cluster, hardware.go).
	Rails int `json:"rails"`
}

// ControlPlane reports whether the node runs etcd, the API server,
// controller-manager, scheduler and CoreDNS.
func (n Node) ControlPlane() bool { return n.Index == 0 }

// dir is the node's state directory relative to Layout.Dir: "node" for the
// first node (as the single-node cluster has always had it), "node-<k>"
// for the k-th.
func (n Node) dir() string {
	if n.Index == 0 {
		return "node"
	}
	return fmt.Sprintf("node-%d", n.Index+1)
}

// ExclusivePFIP and SharedPFIP are the node's addresses on the training
// fabric (the PFs' own, as a real node configures them).
func (n Node) ExclusivePFIP() string { return fmt.Sprintf("10.0.1.%d", 100+n.Index) }
func (n Node) SharedPFIP() string    { return fmt.Sprintf("192.168.2.%d", 10+n.Index) }
func (n Node) SecondPFIP() string    { return fmt.Sprintf("10.0.3.%d", 100+n.Index) }

// CgroupRoot is the node's kubelet --cgroup-root, below the cluster's.
func (n Node) CgroupRoot() string { return CgroupRoot + "/" + n.Name }

// fabricPrefix names the node's links' other ends in the fabric namespace
// (interface names have at most 15 bytes: "n2-vf15").
func (n Node) fabricPrefix() string { return fmt.Sprintf("n%d-", n.Index+1) }

// PlanNodes returns the cluster's nodes: count of them, the last shared of
// them in the shared RDMA netns mode and the others in the exclusive mode.
// The first node keeps the single-node cluster's names and addresses.
func PlanNodes(count, shared int) ([]Node, error) {
	if count < 1 || count > MaxNodes {
		return nil, fmt.Errorf("NODES=%d: want 1 to %d (each node runs containerd, kubelet and kube-proxy on this machine's 2 cores)", count, MaxNodes)
	}
	if shared < 0 || shared > count {
		return nil, fmt.Errorf("SHARED_NODES=%d: want 0 to NODES=%d", shared, count)
	}
	if count > 1 && shared == count {
		return nil, fmt.Errorf("SHARED_NODES=%d of NODES=%d leaves no exclusive node; the control-plane node %s is exclusive when there are several nodes", shared, count, NodeName)
	}
	nodes := make([]Node, count)
	for i := range nodes {
		n := Node{
			Index:   i,
			Name:    NodeName,
			Netns:   NodeNetns,
			IP:      fmt.Sprintf("10.250.0.%d", 2+i),
			PodCIDR: fmt.Sprintf("10.244.%d.0/24", i),
			Mode:    ModeExclusive,
			Rails:   1,
		}
		if count > 1 {
			n.Rails = 2
		}
		if i > 0 {
			n.Name = fmt.Sprintf("%s-%d", NodeName, i+1)
			n.Netns = fmt.Sprintf("%s-%d", NodeNetns, i+1)
		}
		if i >= count-shared {
			n.Mode = ModeShared
		}
		nodes[i] = n
	}
	return nodes, nil
}

// NodeDir is a path under the node's state directory.
func (l Layout) NodeDir(n Node, p ...string) string {
	return filepath.Join(append([]string{l.Dir, n.dir()}, p...)...)
}

// NodeSysfs is the node's sysfs fixture (its processes see it as
// /var/lib/rdmanet-sim/sys).
func (l Layout) NodeSysfs(n Node) string { return l.NodeDir(n, "sys") }

// NodeRecordStateFile is the recording fake's state of the node (the
// node sees it as /var/lib/rdmanet/netops-record.json, simEnv).
func (l Layout) NodeRecordStateFile(n Node) string {
	return l.NodeDir(n, "var/lib/rdmanet/netops-record.json")
}

// NodeControlSocket, NodePIDFile: the node's supervisor. The first node's
// keep the single-node names.
func (l Layout) NodeControlSocket(n Node) string {
	if n.Index == 0 {
		return l.ControlSocket()
	}
	return l.path("supervisor-" + n.Name + ".sock")
}

func (l Layout) NodePIDFile(n Node) string {
	if n.Index == 0 {
		return l.PIDFile()
	}
	return l.path("supervisor-" + n.Name + ".pid")
}

// NodeLog is a component's log on a node ("kubelet" on the first node,
// "rdmanet-node-2.kubelet" on the second).
func (l Layout) NodeLog(n Node, component string) string {
	if n.Index == 0 {
		return l.Log(component)
	}
	return l.Log(n.Name + "." + component)
}

// NodeConfig is a config file of the node.
func (l Layout) NodeConfig(n Node, name string) string {
	if n.Index == 0 {
		return l.Config(name)
	}
	return l.Config(n.Name + "." + name)
}

// FindNode returns the node called name.
func FindNode(nodes []Node, name string) (Node, error) {
	var names []string
	for _, n := range nodes {
		if n.Name == name {
			return n, nil
		}
		names = append(names, n.Name)
	}
	return Node{}, fmt.Errorf("no node %q in this cluster (nodes: %s)", name, strings.Join(names, ", "))
}

// nodesFile records the cluster's node plan; each node's supervisor reads
// its own entry from it.
func (l Layout) nodesFile() string { return l.path("nodes.json") }

func (l Layout) saveNodes(nodes []Node) error {
	b, _ := json.MarshalIndent(nodes, "", "  ")
	if err := os.WriteFile(l.nodesFile(), b, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", l.nodesFile(), err)
	}
	return nil
}

// readNodes returns the cluster's nodes. A state directory from before
// multi-node clusters has no nodes.json: it had the one node.
func (l Layout) readNodes() ([]Node, error) {
	b, err := os.ReadFile(l.nodesFile())
	if errors.Is(err, os.ErrNotExist) {
		return PlanNodes(1, 0)
	}
	if err != nil {
		return nil, fmt.Errorf("cluster nodes: %w", err)
	}
	var nodes []Node
	if err := json.Unmarshal(b, &nodes); err != nil {
		return nil, fmt.Errorf("cluster nodes %s: %w", l.nodesFile(), err)
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("cluster nodes %s: empty", l.nodesFile())
	}
	return nodes, nil
}

// Nodes returns the nodes of the cluster whose state directory is l.Dir.
func (l Layout) Nodes() ([]Node, error) { return l.readNodes() }

// FabricPort is the name of node n's link end in the fabric namespace:
// suffix "up" (its uplink), "expf", "shpf", "vf<i>".
func FabricPort(n Node, suffix string) string { return n.fabricPrefix() + suffix }

// NodeHostPath maps a path as node n's processes see it (its private
// mounts, PrivateMounts) to the machine's path under the state directory;
// other paths are the machine's own and come back unchanged.
func (l Layout) NodeHostPath(n Node, p string) string {
	for _, m := range PrivateMounts {
		if p == m.Target || strings.HasPrefix(p, m.Target+"/") {
			return l.NodeDir(n, m.Source, strings.TrimPrefix(p, m.Target))
		}
	}
	return p
}
