package sim

// The InfiniBand nodes of the demo (issue 28): their hardware (the sysfs
// fixture's IB node), the stand-in netdevs, the GUID pool of the exclusive
// node, and what an IB pod got (its GUID and PKey, or its IPoIB child).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/rdmanet/rdmanet/internal/cni/ipoib"
	"github.com/rdmanet/rdmanet/internal/devinfo"
	"github.com/rdmanet/rdmanet/internal/guidpool"
	rdmaipam "github.com/rdmanet/rdmanet/internal/ipam"
	"github.com/rdmanet/rdmanet/internal/netops"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
)

// The simulated InfiniBand hardware: sysfsfixture.NewIBNode's ConnectX-7
// in IB mode on both IB nodes.
const (
	NodeIBExclusive = "ib-node-excl"   // RDMA netns mode exclusive: ib-sriov VFs
	NodeIBShared    = "ib-node-shared" // RDMA netns mode shared: IPoIB children

	IBExclusivePort    = "ibp193s0f0" // port 0: VFs (the exclusive pool)
	IBExclusivePortBDF = "0000:c1:00.0"
	IBSharedPort       = "ibp193s0f1" // port 1: no VFs, the shared IPoIB port
	IBSharedPortBDF    = "0000:c1:00.1"
	ibMgmt             = "eno1"
	ibMgmtAddr         = "192.168.10.31/24"

	// The GUID pool of the IB nodes: the range of docs/infiniband.md's
	// example, kept in a store local to the node (one node allocates).
	GUIDPoolStart = "02:00:00:00:00:00:00:01"
	GUIDPoolEnd   = "02:00:00:00:00:00:ff:ff"
)

// IBVFNetdev names VF i's IPoIB netdev on the simulated IB node.
func IBVFNetdev(i int) string { return fmt.Sprintf("%sv%d", IBExclusivePort, i) }

// IBReport is what an InfiniBand pod got: for an ib-sriov pod its VF's GUID
// and the network's PKey, for an IPoIB pod its child's parent, PKey and mode.
type IBReport struct {
	Plugin string `json:"plugin"` // ib-sriov or ipoib
	// GUID is the node and port GUID set on the pod's VF through the PF
	// (recorded), which network-status carries as net1's "mac".
	GUID string `json:"guid,omitempty"`
	// GUIDSource says where it came from (the node's GUID pool).
	GUIDSource string `json:"guid_source,omitempty"`
	PKey       string `json:"pkey,omitempty"`
	VF         string `json:"vf,omitempty"`
	// Parent, Mode: the IPoIB child's parent port and mode; PortGUID the
	// shared port's GUID.
	Parent   string `json:"parent,omitempty"`
	Mode     string `json:"mode,omitempty"`
	PortGUID string `json:"port_guid,omitempty"`
	// Recorded are the operations recorded for the pod (not done by a
	// kernel here), in `ip link` form.
	Recorded []string `json:"recorded,omitempty"`
	// After DEL (ib-sriov): the VF's GUID as DEL left it (a fresh VF's zero
	// GUID comes back as all ones, as with ib-sriov-cni) and whether the
	// pool has the pod's GUID free again.
	GUIDAfterDel string `json:"guid_after_del,omitempty"`
	PoolReleased *bool  `json:"pool_released,omitempty"`
}

// guidPoolConfig is the IB node's GUID pool config (RDMANET_GUID_POOL_CONFIG).
func (d nodeDef) guidPoolConfig(l layout) ([]byte, error) {
	return json.MarshalIndent(map[string]any{
		"name":      guidpool.DefaultName,
		"ranges":    []map[string]string{{"start": GUIDPoolStart, "end": GUIDPoolEnd}},
		"blockSize": guidpool.DefaultBlockSize,
		"store":     map[string]string{"type": rdmaipam.StoreLocal, "path": filepath.Join(l.nodeDir(d.Name), "guid-pool")},
	}, "", "  ")
}

func (d nodeDef) guidPoolConfigPath(l layout) string {
	return filepath.Join(l.nodeDir(d.Name), "guid-pool.json")
}

// openGUIDPool opens the node's GUID pool as the ib-sriov plugin does.
func (d nodeDef) openGUIDPool(l layout) (*guidpool.Pool, error) {
	cfg, err := guidpool.FromEnv(func(k string) string {
		if k == guidpool.EnvConfig {
			return d.guidPoolConfigPath(l)
		}
		return ""
	})
	if err != nil {
		return nil, err
	}
	if cfg == nil {
		return nil, fmt.Errorf("node %s: no GUID pool config at %s", d.Name, d.guidPoolConfigPath(l))
	}
	return guidpool.Open(cfg, d.Name)
}

// buildIBFixture writes the IB node's sysfs (sysfsfixture.NewIBNode) with
// d.VFs VFs on the exclusive port, whose IPoIB netdevs the host namespace's
// veth ends stand in for.
func (d nodeDef) buildIBFixture(root string) (*sysfsfixture.IBNode, error) {
	return sysfsfixture.NewIBNode(root, sysfsfixture.IBNodeOptions{VFs: d.VFs, VFNetdev: IBVFNetdev})
}

// ibNetdevs are the IB node's stand-in netdevs: veth ends named like the
// IPoIB netdevs (this kernel has no ib_ipoib), with the IB ports' MTU.
func (d nodeDef) ibNetdevs() []simNetdev {
	devs := []simNetdev{
		{name: ibMgmt, mac: net.HardwareAddr{0x02, 0x00, 0x00, 0x03, 0x00, 0x00}, mtu: 1500, addr: ibMgmtAddr, up: true},
		{name: IBExclusivePort, mac: net.HardwareAddr{0x02, 0x00, 0x00, 0xc1, 0x00, 0x00}, mtu: 4092, up: true},
		{name: IBSharedPort, mac: net.HardwareAddr{0x02, 0x00, 0x00, 0xc1, 0x01, 0x00}, mtu: 4092, up: true},
	}
	for i := 0; i < d.VFs; i++ {
		devs = append(devs, simNetdev{name: IBVFNetdev(i), mac: net.HardwareAddr{0x02, 0x00, 0x00, 0xc1, byte(0x02 + i>>8), byte(i)}, mtu: 4092})
	}
	return devs
}

// normaliseGUID is the comparable form of a VF GUID the recorder holds: a
// VF never set ("") has the fresh VF's zero GUID, which DEL cannot set back
// and sets to all ones (as ib-sriov-cni does); both mean "no GUID".
func normaliseGUID(g string) string {
	if g == "" || g == sysfsfixture.ZeroGUID || g == guidpool.AllOnes.String() {
		return "unset (zero or all ones)"
	}
	return g
}

// ibVFState is the comparable form of an IB VF: its link state etc. and its
// GUIDs, normalised; the rebind count is no state.
func ibVFState(rec *netops.Recorder, vf int) (string, error) {
	st, err := rec.VFState(IBExclusivePort, vf)
	if err != nil {
		return "", err
	}
	g, err := rec.VFGUIDs(IBExclusivePort, vf)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%+v node_guid %s port_guid %s", st, normaliseGUID(g.Node), normaliseGUID(g.Port)), nil
}

// ibNADConfig is spec.config of the demo's IB NAD name.
func (m *Manifests) ibNADConfig(name string) []byte {
	for _, doc := range docSep.Split(string(m.IBNADs), -1) {
		var nad struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec struct {
				Config string `json:"config"`
			} `json:"spec"`
		}
		if yaml.Unmarshal([]byte(doc), &nad) == nil && nad.Metadata.Name == name {
			return []byte(nad.Spec.Config)
		}
	}
	return nil
}

// Networks of the IB manifests.
const (
	ibExclusiveNetwork = "ib-training-rdma"
	ibSharedNetwork    = "ib-shared-net"
)

// describeIBExclusive fills what an ib-sriov pod got: its VF, the GUID set
// on it (recorded) which must be the one the pool holds for the pod and
// the one network-status shows, the PKey, and its RDMA device in the pod.
func describeIBExclusive(r *podRun, m *Manifests) error {
	n := r.node
	key := r.pod.Namespace + "/" + r.pod.Name
	vfs := r.rep.Devices[IBExclusiveResource]
	if len(vfs) != 1 {
		return fmt.Errorf("pod %s: kubelet allocated %d VFs of %s, want 1", key, len(vfs), IBExclusiveResource)
	}
	vf := vfs[0]
	idx := slices.Index(n.ib.Port0VFs, vf)
	if idx < 0 {
		return fmt.Errorf("pod %s: %s is no VF of %s", key, vf, IBExclusivePort)
	}
	dev := n.fix.RDMAByBD[vf]
	r.rep.Device = fmt.Sprintf("IB VF %s (%s)", vf, n.fix.NetByBDF[vf])
	for i := range r.rep.Interfaces {
		if r.rep.Interfaces[i].Name == "net1" {
			r.rep.Interfaces[i].PCI = vf
			r.rep.Interfaces[i].Kind += " (IPoIB netdev stand-in)"
		}
	}
	g, err := n.rec.VFGUIDs(IBExclusivePort, idx)
	if err != nil {
		return err
	}
	ib := &IBReport{Plugin: devinfo.TypeIBSriov, GUID: g.Port, VF: vf}
	r.rep.InfiniBand = ib
	if x := devinfo.InfiniBandOf(m.ibNADConfig(ibExclusiveNetwork), g.Port); x != nil {
		ib.PKey = x.PKey
	}
	if g.Node != g.Port {
		r.rep.Notes = append(r.rep.Notes, fmt.Sprintf("the VF's node GUID %s differs from its port GUID %s", g.Node, g.Port))
	}
	if normaliseGUID(g.Port) != g.Port {
		r.rep.Notes = append(r.rep.Notes, "no GUID was set on the pod's VF")
	}
	pool, err := n.def.openGUIDPool(n.l)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pg, err := pool.Lookup(ctx, rdmaipam.Owner{ContainerID: r.rep.ContainerID, IfName: "net1"})
	switch {
	case err != nil:
		r.rep.Notes = append(r.rep.Notes, fmt.Sprintf("the GUID pool holds no GUID for the pod: %v", err))
	case pg.String() != g.Port:
		r.rep.Notes = append(r.rep.Notes, fmt.Sprintf("the GUID pool holds %s for the pod, but its VF got %s", pg, g.Port))
	default:
		ib.GUIDSource = fmt.Sprintf("GUID pool %q of node %s (%s-%s)", pool.Config.Name, n.def.Name, GUIDPoolStart, GUIDPoolEnd)
	}
	if mac := statusMAC(r.rep.NetworkStatus, "net1"); mac != g.Port {
		r.rep.Notes = append(r.rep.Notes, fmt.Sprintf("network-status shows net1's GUID (mac) as %q, the VF got %s", mac, g.Port))
	}
	// what the recorder logged for this VF and its RDMA device during the round's ADDs
	lines, err := n.rec.Log()
	if err != nil {
		return err
	}
	for _, line := range lines[min(n.logMark, len(lines)):] {
		if strings.Contains(line, fmt.Sprintf("%s vf %d ", IBExclusivePort, idx)) || strings.HasPrefix(line, "echo "+vf+" ") ||
			strings.HasPrefix(line, "rdma dev set "+dev+" ") {
			ib.Recorded = append(ib.Recorded, line)
		}
	}
	in, err := n.rec.InNetns(dev, r.netns)
	if err != nil {
		return err
	}
	if in {
		r.rep.RDMA = dev + " moved into the pod netns (recorded)"
	} else {
		r.rep.RDMA = dev + " NOT in the pod netns"
		r.rep.Notes = append(r.rep.Notes, "the VF's RDMA device was not moved into the pod")
	}
	r.rep.NCCL = ncclFor(r.mode, "net1", dev)
	return nil
}

// describeIBShared fills what an IPoIB pod got: net1 is a child of the
// shared IB port (the recorded request: parent, PKey, mode), the port's HCA
// is visible in shared netns mode.
func describeIBShared(r *podRun) error {
	n := r.node
	hca := n.fix.RDMAByBD[IBSharedPortBDF]
	child := ipoib.TempName(r.rep.ContainerID, "net1")
	reqs, err := n.rec.IPoIBRequests()
	if err != nil {
		return err
	}
	ib := &IBReport{Plugin: devinfo.TypeIPoIB, PortGUID: n.ib.PortGUID[hca]}
	r.rep.InfiniBand = ib
	for _, c := range reqs {
		if c.Name == child {
			ib.Parent, ib.Mode, ib.PKey = c.Parent, c.Mode, fmt.Sprintf("0x%04x", c.PKey)
			ib.Recorded = []string{c.Command()}
		}
	}
	if ib.Parent == "" {
		r.rep.Notes = append(r.rep.Notes, fmt.Sprintf("no IPoIB child %s was requested for the pod", child))
	} else if ib.Parent != IBSharedPort {
		r.rep.Notes = append(r.rep.Notes, fmt.Sprintf("net1 is a child of %s, want %s", ib.Parent, IBSharedPort))
	}
	for i := range r.rep.Interfaces {
		if r.rep.Interfaces[i].Name == "net1" {
			r.rep.Interfaces[i].PCI = IBSharedPortBDF
			r.rep.Interfaces[i].Kind = fmt.Sprintf("IPoIB child of %s (recorded; stand-in %s)", IBSharedPort, r.rep.Interfaces[i].Kind)
		}
	}
	r.rep.Device = fmt.Sprintf("HCA %s (%s) slot %s", hca, IBSharedPortBDF, strings.Join(r.rep.Devices[IBSharedResource], ","))
	in, err := n.rec.InNetns(hca, r.netns)
	if err != nil {
		return err
	}
	r.rep.RDMA = hca + " shared: visible from the pod netns (shared netns mode)"
	if !in {
		r.rep.RDMA = hca + " NOT visible from the pod netns"
	}
	r.rep.NCCL = ncclFor(r.mode, "net1", hca)
	return nil
}

// statusMAC is the mac network-status gives interface ifname ("" if none).
func statusMAC(status json.RawMessage, ifname string) string {
	var st []struct {
		Interface string `json:"interface"`
		MAC       string `json:"mac"`
	}
	if json.Unmarshal(status, &st) != nil {
		return ""
	}
	for _, s := range st {
		if s.Interface == ifname {
			return s.MAC
		}
	}
	return ""
}

// checkIBRelease runs after DEL: every ib-sriov pod's VF has no GUID any
// more and the pool has the pod's GUID free again. It fills the pods'
// reports and returns what was not given back.
func checkIBRelease(runs []*podRun) []string {
	var out []string
	pools := map[*node]*guidpool.Pool{}
	for _, r := range runs {
		if r.mode != ModeIBExclusive || r.rep.InfiniBand == nil || r.rep.InfiniBand.VF == "" {
			continue
		}
		ib := r.rep.InfiniBand
		idx := slices.Index(r.node.ib.Port0VFs, ib.VF)
		g, err := r.node.rec.VFGUIDs(IBExclusivePort, idx)
		if err != nil {
			out = append(out, err.Error())
			continue
		}
		ib.GUIDAfterDel = g.Port
		if normaliseGUID(g.Port) == g.Port {
			out = append(out, fmt.Sprintf("VF %s of pod %s/%s still has GUID %s after DEL", ib.VF, r.pod.Namespace, r.pod.Name, g.Port))
		}
		pool := pools[r.node]
		if pool == nil {
			if pool, err = r.node.def.openGUIDPool(r.node.l); err != nil {
				out = append(out, err.Error())
				continue
			}
			pools[r.node] = pool
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		held, err := pool.Lookup(ctx, rdmaipam.Owner{ContainerID: r.rep.ContainerID, IfName: "net1"})
		cancel()
		released := errors.Is(err, rdmaipam.ErrNotFound)
		ib.PoolReleased = &released
		switch {
		case err == nil:
			out = append(out, fmt.Sprintf("GUID %s of pod %s/%s is still allocated in the GUID pool after DEL", held, r.pod.Namespace, r.pod.Name))
		case !released:
			out = append(out, fmt.Sprintf("GUID pool lookup for pod %s/%s: %v", r.pod.Namespace, r.pod.Name, err))
		}
	}
	return out
}

// uniqueGUIDs returns the ib-sriov pods' GUIDs that more than one pod got.
func uniqueGUIDs(runs []*podRun) []string {
	by := map[string][]string{}
	for _, r := range runs {
		if r.mode == ModeIBExclusive && r.rep.InfiniBand != nil && r.rep.InfiniBand.GUID != "" {
			by[r.rep.InfiniBand.GUID] = append(by[r.rep.InfiniBand.GUID], r.pod.Namespace+"/"+r.pod.Name)
		}
	}
	var out []string
	for g, pods := range by {
		if len(pods) > 1 {
			out = append(out, fmt.Sprintf("GUID %s was given to %d pods: %s", g, len(pods), strings.Join(pods, ", ")))
		}
	}
	slices.Sort(out)
	return out
}

// markLog remembers how far the node's recorder log goes, so that what an
// attach round's ADDs record can be told from earlier rounds.
func (n *node) markLog() error {
	lines, err := n.rec.Log()
	n.logMark = len(lines)
	return err
}

// setIPoIBParents gives the shared port's stand-in the attributes of the
// real port's IPoIB netdev (the default partition, datagram mode), which
// the ipoib plugin's children take.
func (n *node) setIPoIBParents() error {
	return n.rec.SetIPoIBParent(IBSharedPort, netops.DefaultPKey, netops.IPoIBDatagram)
}
