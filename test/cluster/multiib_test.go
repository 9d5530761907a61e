//go:build clustertest

package cluster_test

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rdmanet/rdmanet/internal/guidpool"
	"github.com/rdmanet/rdmanet/internal/netops"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
	"github.com/rdmanet/rdmanet/test/cluster"
)

// The InfiniBand scenario of the cross-node tier (issue 28): the IB
// variants of the seeds' exclusive and shared networks, as ib-sriov-cni
// and ipoib-cni users write them (examples/infiniband/cluster), on the
// multi-node boards' IB PF (test/cluster/hardware.go) with the IB pools and
// the GUID pool of test/cluster/overlay-multinode
// (deploy/components/infiniband). What the kernel here cannot do (VF GUIDs
// through the PF, the mlx5 rebind, RDMA netns moves, IPoIB children) is
// recorded by each node's recording fake, which this test reads.
const (
	ibNS             = "ib-training"
	ibVFResource     = "mellanox.com/mlnx_sriov_rdma_ib"
	ibSharedResource = "rdma/rdma_shared_device_ib"
	ibPKey           = "0x8005"
	ibNetwork        = "ib-training-rdma"
	ipoibNetwork     = "ib-shared-net"
	// the GUID pool of deploy/components/infiniband/guid-pool.yaml
	guidPoolNetwork = guidpool.NetworkPrefix + guidpool.DefaultName
	guidPoolFirst   = "02:00:00:00:00:00:00:01"
	guidPoolLast    = "02:00:00:00:00:00:ff:ff"
)

var ibFiles = []string{"examples/infiniband/cluster/exclusive-nad.yaml", "examples/infiniband/cluster/shared-nad.yaml"}

// ibPod is a pod of network on node, holding one device of resource.
func ibPod(name, node, network, resource string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %[1]s
  namespace: %[2]s
  labels: {app: ib}
  annotations: {k8s.v1.cni.cncf.io/networks: %[3]s}
spec:
  terminationGracePeriodSeconds: 1
  nodeSelector: {kubernetes.io/hostname: %[4]s}
  containers:
    - name: c
      image: %[5]s
      imagePullPolicy: Never
      command: ["sh", "-c", "trap 'exit 0' TERM; sleep infinity & wait"]
      securityContext: {capabilities: {add: [IPC_LOCK]}}
      resources:
        requests: {%[6]s: "1"}
        limits: {%[6]s: "1"}
`, name, ibNS, network, node, cluster.TestboxImage, resource)
}

// ibNet1 waits for the pod's network-status and returns its net1 entry,
// which must carry an address.
func ibNet1(t *testing.T, pod string) networkStatus {
	t.Helper()
	st := waitNetworkStatus(t, ibNS, pod)
	n := find(st, "net1")
	if n == nil || len(n.IPs) == 0 {
		t.Fatalf("%s: network-status has no net1 with an address: %+v", pod, st)
	}
	return *n
}

// guidAllocations lists the GUIDs the cluster-wide pool holds (its
// IPAMBlocks): GUID -> "namespace/pod@node of the block".
func guidAllocations(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, b := range ipamBlocks(t) {
		if b.Spec.Network != guidPoolNetwork {
			continue
		}
		for a, o := range b.Spec.Allocations {
			addr, err := netip.ParseAddr(a)
			g, ok := guidpool.FromAddr(addr)
			if err != nil || !ok {
				t.Errorf("block of %s on %s holds %q, which is no GUID", guidPoolNetwork, b.Spec.Node, a)
				continue
			}
			out[g.String()] = o.PodNamespace + "/" + o.PodName + "@" + b.Spec.Node
		}
	}
	return out
}

// ibVFIndex is the VF index of vf (a PCI address) under node n's IB PF,
// from the node's sysfs fixture.
func ibVFIndex(t *testing.T, n cluster.Node, vf string) int {
	t.Helper()
	for i := 0; i < cluster.IBVFs; i++ {
		l, err := os.Readlink(filepath.Join(layout.NodeSysfs(n), "bus/pci/devices", n.IBPFBDF(), fmt.Sprintf("virtfn%d", i)))
		if err == nil && filepath.Base(l) == vf {
			return i
		}
	}
	t.Fatalf("%s is no VF of %s's IB PF %s (%s)", vf, n.Name, cluster.IBPF, n.IBPFBDF())
	return -1
}

// recorder is node n's recording fake: what its simulated kernel was asked.
func recorder(n cluster.Node) *netops.Recorder {
	return netops.NewRecorder(layout.NodeRecordStateFile(n))
}

// ibVFOwnGUID is the GUID VF vf of node n has before any pod (the
// fixture's node_guid, which is also its port GUID): what DEL restores.
func ibVFOwnGUID(t *testing.T, n cluster.Node, vf string) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(layout.NodeSysfs(n), "bus/pci/devices", vf, "infiniband", "*", "node_guid"))
	if len(files) != 1 {
		t.Fatalf("%s: VF %s has %d RDMA devices with a node_guid in the fixture, want 1", n.Name, vf, len(files))
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	g, err := sysfsfixture.ParseSysfsGUID(string(b))
	if err != nil {
		t.Fatalf("%s: %v", files[0], err)
	}
	return g
}

// ibExclusive is what one ib-sriov pod got.
type ibExclusive struct {
	pod  string
	node cluster.Node
	vf   string
	idx  int
	guid string
	own  string // the VF's own GUID, which DEL restores
	ip   string
}

// checkIBExclusive asserts an ib-sriov pod's attachment: net1's GUID in
// network-status (mac and the infiniband extension, with the NAD's PKey)
// is a GUID of the cluster-wide pool, held there for this pod by its
// node's block; the node's simulated kernel was asked to set it as the
// VF's node and port GUID through the PF and to rebind the VF; the VF is
// what the real kubelet allocated; net1 carries the address.
func checkIBExclusive(t *testing.T, pod string, n cluster.Node, logFrom int) ibExclusive {
	t.Helper()
	st := ibNet1(t, pod)
	if st.DeviceInfo == nil || st.DeviceInfo.PCI == nil || st.DeviceInfo.PCI.PCIAddress == "" {
		t.Fatalf("%s: net1 device-info lacks the VF: %+v", pod, st)
	}
	x := ibExclusive{pod: pod, node: n, vf: st.DeviceInfo.PCI.PCIAddress, ip: st.IPs[0]}
	x.idx = ibVFIndex(t, n, x.vf)
	ib := st.InfiniBand
	if ib == nil || ib.Plugin != "ib-sriov" || ib.PKey != ibPKey || ib.GUID == "" || ib.GUID != st.MAC {
		t.Fatalf("%s: network-status net1 infiniband %+v mac %q; want plugin ib-sriov, pkey %s and the GUID as mac", pod, ib, st.MAC, ibPKey)
	}
	x.guid, x.own = ib.GUID, ibVFOwnGUID(t, n, x.vf)
	if x.guid == x.own {
		t.Errorf("%s: GUID %s is the VF's own, not one from the pool", pod, x.guid)
	}
	g, err := guidpool.ParseGUID(x.guid)
	first, _ := guidpool.ParseGUID(guidPoolFirst)
	last, _ := guidpool.ParseGUID(guidPoolLast)
	if err != nil || g < first || g > last {
		t.Errorf("%s: GUID %s outside the pool's range %s-%s (%v)", pod, x.guid, guidPoolFirst, guidPoolLast, err)
	}
	if owner, want := guidAllocations(t)[x.guid], ibNS+"/"+pod+"@"+n.Name; owner != want {
		t.Errorf("%s: the GUID pool holds %s for %q, want %s (a block of its node)", pod, x.guid, owner, want)
	}
	if devs := podResourcesOf(t, n)[ibNS+"/"+pod][ibVFResource]; !slices.Contains(devs, x.vf) {
		t.Errorf("%s: VF %s on net1 is not what kubelet allocated (PodResources %s: %v)", pod, x.vf, ibVFResource, devs)
	}
	rec := recorder(n)
	got, err := rec.VFGUIDs(cluster.IBPF, x.idx)
	if err != nil {
		t.Fatal(err)
	}
	if got.Node != x.guid || got.Port != x.guid {
		t.Errorf("%s: %s's simulated kernel has VF %d with node GUID %q, port GUID %q; want %s for both", pod, n.Name, x.idx, got.Node, got.Port, x.guid)
	}
	lines, err := rec.Log()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		fmt.Sprintf("ip link set %s vf %d node_guid %s", cluster.IBPF, x.idx, x.guid),
		fmt.Sprintf("ip link set %s vf %d port_guid %s", cluster.IBPF, x.idx, x.guid),
		fmt.Sprintf("echo %s > /sys/bus/pci/drivers/mlx5_core/unbind", x.vf),
		fmt.Sprintf("echo %s > /sys/bus/pci/drivers/mlx5_core/bind", x.vf),
		fmt.Sprintf("ip link set %s vf %d state enable", cluster.IBPF, x.idx),
	}
	if d := st.DeviceInfo.PCI.RDMADevice; d != "" {
		want = append(want, "rdma dev set "+d+" netns")
	}
	recent := lines[min(logFrom, len(lines)):]
	for _, w := range want {
		if !slices.ContainsFunc(recent, func(l string) bool { return strings.HasPrefix(l, w) }) {
			t.Errorf("%s: %s's recording fake has no %q among the operations since the pods were created (last 40):\n%s", pod, n.Name, w, tail(strings.Join(recent, "\n"), 40))
		}
	}
	if got := ipv4Of(t, ibNS, pod, "net1"); len(got) != 1 || !strings.HasPrefix(got[0], x.ip+"/") {
		t.Errorf("%s: net1 has %v, network-status says %s", pod, got, x.ip)
	}
	t.Logf("%s on %s: VF %s (vf %d), GUID %s, PKey %s, net1 %s", pod, n.Name, x.vf, x.idx, x.guid, ib.PKey, x.ip)
	return x
}

// testInfiniBand: the IB variants of the seeds' networks across nodes.
// Exclusive: two ib-sriov pods on each exclusive node get GUIDs from the
// cluster-wide pool, unique across nodes, in their network-status; two of
// them on different nodes reach each other over net1 through the IB
// fabric's stand-in. DEL gives a GUID back (and the VF its own); a pod
// force-deleted while its node's kubelet is down (no DEL) has its GUID
// freed by rdmanet-controller's GC, while its neighbour keeps its own, and
// the VF is restored by the DEL kubelet runs for the orphaned sandbox once
// it is back. Shared: an ipoib pod on a shared node gets net1 as an IPoIB
// child of the IB port (recorded; a macvlan stands in).
func testInfiniBand(t *testing.T) {
	var excl, shared []cluster.Node
	for _, n := range state.Nodes {
		if n.Mode == cluster.ModeExclusive {
			excl = append(excl, n)
		} else {
			shared = append(shared, n)
		}
	}
	if len(excl) < 2 || len(shared) < 1 {
		t.Fatalf("the InfiniBand scenario needs two exclusive nodes and a shared one, the cluster has %d and %d; fix: make test-cluster-multi (or NODES=3)", len(excl), len(shared))
	}
	a, b, s := excl[0], excl[1], shared[0]
	if b.ControlPlane() {
		t.Fatalf("node %s runs the control plane: its kubelet is stopped below", b.Name)
	}
	// The operator's wiring: the GUID pool config on every node's daemon
	// (a GUID below comes from the pool on each exclusive node) and in the
	// controller (--guid-pool-config).
	if args := kubectl(t, "-n", "rdmanet-system", "get", "deployment", "rdmanet-controller", "-o", "jsonpath={.spec.template.spec.containers[0].args}"); !strings.Contains(args, "--guid-pool-config=") {
		t.Fatalf("rdmanet-controller runs without --guid-pool-config: %s (the overlay lacks deploy/components/infiniband)", args)
	}
	// install-cni's copy for the host fallback (ib-sriov run by
	// rdmanet-direct, without the daemon's environment): the ConfigMap's
	// key on every node.
	poolJSON := kubectl(t, "-n", "rdmanet-system", "get", "configmap", "rdmanet-guid-pool", "-o", "jsonpath={.data.guid-pool\\.json}")
	for _, n := range state.Nodes {
		b, err := os.ReadFile(layout.NodeHostPath(n, guidpool.DefaultConfigPath))
		if err != nil || strings.TrimSpace(string(b)) != strings.TrimSpace(poolJSON) {
			t.Errorf("node %s: %s = %q, %v; want the ConfigMap rdmanet-guid-pool's guid-pool.json (install-cni --guid-pool-config)", n.Name, guidpool.DefaultConfigPath, b, err)
		}
	}
	for _, n := range excl {
		waitAllocatableOn(t, n.Name, ibVFResource, fmt.Sprint(cluster.IBVFs))
	}
	waitAllocatableOn(t, s.Name, ibSharedResource, "63")

	kubectl(t, "create", "ns", ibNS)
	cleanupNamespace(t, ibNS)
	for _, f := range ibFiles {
		kubectl(t, "-n", ibNS, "apply", "-f", repoPath(f))
	}
	logFrom := map[string]int{}
	for _, n := range append(slices.Clone(excl), s) {
		lines, err := recorder(n).Log()
		if err != nil {
			t.Fatal(err)
		}
		logFrom[n.Name] = len(lines)
	}
	ipoibBefore, err := recorder(s).IPoIBRequests()
	if err != nil {
		t.Fatal(err)
	}
	placed := map[string]cluster.Node{"ib-a1": a, "ib-a2": a, "ib-b1": b, "ib-b2": b}
	var manifests []string
	for _, name := range slices.Sorted(maps.Keys(placed)) {
		manifests = append(manifests, ibPod(name, placed[name].Name, ibNetwork, ibVFResource))
	}
	manifests = append(manifests, ibPod("ipoib-s1", s.Name, ipoibNetwork, ibSharedResource))
	start := time.Now()
	if err := k.Apply(ctx(t, time.Minute), strings.Join(manifests, "---\n")); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, ibNS, "app=ib", len(manifests), 4*time.Minute)
	t.Logf("%d IB pods Running %.1fs after apply", len(manifests), time.Since(start).Seconds())

	// Exclusive: GUIDs from the pool, unique across the nodes.
	got := map[string]ibExclusive{}
	byGUID := map[string][]string{}
	for name, n := range placed {
		x := checkIBExclusive(t, name, n, logFrom[n.Name])
		got[name] = x
		byGUID[x.guid] = append(byGUID[x.guid], name+"@"+n.Name)
	}
	for g, ps := range byGUID {
		if len(ps) > 1 {
			t.Errorf("GUID %s given to %d pods: %v", g, len(ps), ps)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// net1 across nodes over the IB fabric's stand-in (br-ib): the bytes
	// leave a1's VF port and reach b1's.
	a1, b1 := got["ib-a1"], got["ib-b1"]
	before := fabricCounters(t)
	if out, err := execIn(t, ibNS, a1.pod, "ping", "-c", "5", "-s", "1000", "-W", "2", b1.ip); err != nil {
		t.Fatalf("ping %s (%s's net1 on %s) from %s on %s: %v\n%s", b1.ip, b1.pod, b.Name, a1.pod, a.Name, err, out)
	}
	after := fabricCounters(t)
	sent := after[cluster.IBFabricPort(a, cluster.IBVFNetdev(a1.idx))][0] - before[cluster.IBFabricPort(a, cluster.IBVFNetdev(a1.idx))][0]
	recv := after[cluster.IBFabricPort(b, cluster.IBVFNetdev(b1.idx))][1] - before[cluster.IBFabricPort(b, cluster.IBVFNetdev(b1.idx))][1]
	if sent < 5000 || recv < 5000 {
		t.Errorf("IB fabric counters: %s's VF port took %d bytes from its pod, %s's gave %d to its pod; want both >= 5000", a.Name, sent, b.Name, recv)
	}

	// Shared: the ipoib pod's net1 is an IPoIB child of the IB port,
	// recorded (this kernel has no ib_ipoib); a macvlan of the port's
	// stand-in carries the address.
	st := ibNet1(t, "ipoib-s1")
	if st.InfiniBand == nil || st.InfiniBand.Plugin != "ipoib" {
		t.Errorf("ipoib-s1: network-status net1 infiniband %+v, want plugin ipoib", st.InfiniBand)
	}
	if ip := net.ParseIP(st.IPs[0]); ip == nil || !(&net.IPNet{IP: net.IPv4(10, 62, 0, 0), Mask: net.CIDRMask(16, 32)}).Contains(ip) {
		t.Errorf("ipoib-s1: net1 %s outside the NAD's 10.62.0.0/16", st.IPs[0])
	}
	reqs, err := recorder(s).IPoIBRequests()
	if err != nil {
		t.Fatal(err)
	}
	var child netops.IPoIBChild
	if news := reqs[len(ipoibBefore):]; len(news) != 1 || news[0].Parent != cluster.IBSharedPort || news[0].PKey != netops.DefaultPKey || news[0].Mode != netops.IPoIBDatagram {
		t.Fatalf("%s's recorded IPoIB children since the pod was created: %+v; want one of %s in the port's partition (pkey %#04x, datagram)", s.Name, news, cluster.IBSharedPort, netops.DefaultPKey)
	} else {
		child = news[0]
	}
	// the child takes its parent's MTU (the NAD names none): the IB port's
	if out, err := execIn(t, ibNS, "ipoib-s1", "cat", "/sys/class/net/net1/mtu"); err != nil || trim(out) != cluster.IBMTU {
		t.Errorf("ipoib-s1: net1 MTU %q (%v), want the IB port %s's %s", trim(out), err, cluster.IBSharedPort, cluster.IBMTU)
	}
	t.Logf("ipoib-s1 on %s: net1 %s, recorded %q", s.Name, st.IPs[0], child.Command())

	// DEL: the GUID back in the pool, the VF's GUID reset.
	for _, name := range []string{"ib-a1", "ib-a2"} {
		kubectl(t, "-n", ibNS, "delete", "pod", name, "--wait", "--timeout=120s")
	}
	waitIBReleased(t, got["ib-a1"], got["ib-a2"])

	// Forced removal: b1 deleted while b's kubelet is down, so no DEL runs.
	ctl := cluster.NewNodeControl(layout, b)
	if err := ctl.Stop(ctx(t, time.Minute), "kubelet"); err != nil {
		t.Fatalf("stop %s's kubelet: %v", b.Name, err)
	}
	kubeletDown := true
	t.Cleanup(func() {
		if kubeletDown {
			if err := ctl.Start(context.Background(), "kubelet"); err != nil {
				t.Errorf("start %s's kubelet again: %v", b.Name, err)
			}
		}
	})
	forced := time.Now()
	kubectl(t, "-n", ibNS, "delete", "pod", b1.pod, "--force", "--grace-period=0")
	var freedAfter time.Duration
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
		_, guidHeld := guidAllocations(t)[b1.guid]
		_, ipHeld := ipamAllocations(t)[b1.ip]
		if !guidHeld && !ipHeld {
			freedAfter = time.Since(forced)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("force-deleted %s: GUID %s held %v, address %s held %v 2m later: rdmanet-controller's GC did not free them", b1.pod, b1.guid, guidHeld, b1.ip, ipHeld)
		}
	}
	b2 := got["ib-b2"]
	if owner := guidAllocations(t)[b2.guid]; owner != ibNS+"/"+b2.pod+"@"+b.Name {
		t.Errorf("the GC freed more than the gone pod's GUID: %s of live %s is held by %q", b2.guid, b2.pod, owner)
	}
	// No DEL ran: the VF still carries the gone pod's GUID (what the
	// subnet manager hook on GC release exists for).
	if g, err := recorder(b).VFGUIDs(cluster.IBPF, b1.idx); err != nil || g.Port != b1.guid {
		t.Errorf("VF %d of %s: port GUID %q (%v) while its kubelet is down; want the gone pod's %s still set (no DEL ran)", b1.idx, b.Name, g.Port, err, b1.guid)
	}
	t.Logf("%s force-deleted with %s's kubelet down: its GUID %s and address %s freed by the controller's GC after %.1fs", b1.pod, b.Name, b1.guid, b1.ip, freedAfter.Seconds())
	if err := ctl.Start(ctx(t, 5*time.Minute), "kubelet"); err != nil {
		t.Fatalf("start %s's kubelet: %v", b.Name, err)
	}
	kubeletDown = false
	back := time.Now()
	// kubelet tears the orphaned sandbox down: the DEL restores the VF.
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(time.Second) {
		g, err := recorder(b).VFGUIDs(cluster.IBPF, b1.idx)
		if err == nil && g.Port == b1.own && g.Node == b1.own {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("VF %d of %s still has GUIDs %+v (%v) 3m after its kubelet came back: the orphaned sandbox's DEL did not run", b1.idx, b.Name, g, err)
		}
	}
	t.Logf("%s's kubelet back: the orphaned sandbox's DEL reset VF %d after %.1fs", b.Name, b1.idx, time.Since(back).Seconds())
	kubectl(t, "wait", "--for=condition=Ready", "node/"+b.Name, "--timeout=120s")
	waitRunning(t, ibNS, "app=ib", 2, 2*time.Minute) // b2 and ipoib-s1, untouched
	if st := ibNet1(t, b2.pod); st.InfiniBand == nil || st.InfiniBand.GUID != b2.guid {
		t.Errorf("%s after its node's kubelet restart: infiniband %+v, want GUID %s", b2.pod, st.InfiniBand, b2.guid)
	}
	if owner := guidAllocations(t)[b2.guid]; owner != ibNS+"/"+b2.pod+"@"+b.Name {
		t.Errorf("%s's GUID %s held by %q after its node's kubelet restart", b2.pod, b2.guid, owner)
	}

	// The rest by DEL; the IPoIB child goes with its pod.
	kubectl(t, "-n", ibNS, "delete", "pod", b2.pod, "ipoib-s1", "--wait", "--timeout=120s")
	waitIBReleased(t, b2)
	// DEL deletes the child where it is by then: renamed net1 in the pod's
	// netns (the host-side name is only looked for, a leftover of an
	// interrupted ADD). kubelet's DEL of the sandbox may come after the pod
	// left the API.
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Second) {
		lines, err := recorder(s).Log()
		after := lines[min(logFrom[s.Name], len(lines)):]
		i := slices.Index(after, child.Command())
		if err == nil && i >= 0 && slices.Contains(after[i+1:], "ip link del net1") {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("%s's recording fake: no %q after %q (ipoib-s1's ADD) within 2 min of its deletion (%v):\n%s",
				s.Name, "ip link del net1", child.Command(), err, tail(strings.Join(after, "\n"), 20))
			break
		}
	}
	waitAllocatableOn(t, b.Name, ibVFResource, fmt.Sprint(cluster.IBVFs))
}

// waitIBReleased waits until the pods' GUIDs are free in the pool and their
// VFs have their own GUIDs back (DEL ran).
func waitIBReleased(t *testing.T, xs ...ibExclusive) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Second) {
		var left []string
		held := guidAllocations(t)
		for _, x := range xs {
			if owner, ok := held[x.guid]; ok {
				left = append(left, fmt.Sprintf("GUID %s still held by %s", x.guid, owner))
			}
			g, err := recorder(x.node).VFGUIDs(cluster.IBPF, x.idx)
			if err != nil || g.Port != x.own || g.Node != x.own {
				left = append(left, fmt.Sprintf("%s's VF %d has GUIDs %+v (%v), want its own %s back", x.node.Name, x.idx, g, err, x.own))
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("2m after DEL: %s", strings.Join(left, "; "))
		}
	}
}
