package fleetbench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	nadclient "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/rdmanet/rdmanet/internal/agent"
	"github.com/rdmanet/rdmanet/internal/cni/meta"
	"github.com/rdmanet/rdmanet/internal/dra"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
	"github.com/rdmanet/rdmanet/test/apiserver"
)

// Options of one fleet run (one size).
type Options struct {
	Nodes int
	// FullAgents nodes run the real agent loop (health refresh every 500
	// ms, full rediscovery every 10 s) over a sysfs tree of their own; the
	// others hand the publisher a shared snapshot every FullRescan.
	FullAgents int
	NICs, VFs  int
	// Settle is how long the fleet runs before the steady window (startup
	// writes, the slice controller's one-minute mutation cache).
	Settle time.Duration
	Steady time.Duration
	// Pods of the job; every DRAEvery-th is a DRA pod (0: none).
	Pods     int
	DRAEvery int
	// StartConcurrency nodes start at once.
	StartConcurrency int
	// NodesPerConnection nodes share one HTTP/2 connection to the API
	// server (each still with its own token, clients and rate limits);
	// 1: every process of every node dials its own, as on real nodes.
	NodesPerConnection int
	// Controller phase (controller.go); Addresses 0 skips it.
	Controller ControllerOptions
	// ControllerOnly runs the controller phase alone: the Nodes exist, no
	// simulated node runs.
	ControllerOnly bool
	// APIServerArgs are extra kube-apiserver flags.
	APIServerArgs []string
	Dir           string
	Progress      io.Writer
	Logger        *slog.Logger // the nodes' logs (nil: warnings to Progress)
}

func (o *Options) defaults() {
	if o.NICs == 0 {
		o.NICs = 8
	}
	if o.VFs == 0 {
		o.VFs = 16
	}
	if o.FullAgents == 0 {
		o.FullAgents = min(2, o.Nodes)
	}
	if o.StartConcurrency == 0 {
		o.StartConcurrency = 32
	}
	if o.NodesPerConnection == 0 {
		o.NodesPerConnection = 16
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(o.Progress, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
}

// Result is one run's figures.
type Result struct {
	Nodes         int
	Steady        Window
	Flap          Flap
	Job           Job
	Controller    *ControllerResult
	StartupWrites int64 // node writes from start to the end of Settle
	StartupS      float64
}

// Window is the steady state.
type Window struct {
	Duration time.Duration
	// Client side, summed over the nodes' processes.
	Node Counts
	// Server side, less the benchmark's own requests.
	Server ServerMetrics
	// Open watches at the end: the nodes' (client side) and the server's
	// apiserver_longrunning_requests{verb="WATCH"}.
	NodeWatches   int64
	ServerWatches float64
	// WritesByNode: nodes that wrote in the window (name -> writes).
	WritesByNode map[string]int64
}

// Flap is one device health flap on one node.
type Flap struct {
	Node, Device  string
	Changes       int   // device health changes (down, up)
	SliceWrites   int64 // the node's ResourceSlice writes
	Writes        int64 // every node's writes in the window
	ServerWrites  float64
	WritesByVerbs map[string]int64
}

// Job is the job start.
type Job struct {
	Pods, DPPods, DRAPods int
	Failed                int
	Wall                  time.Duration
	// By tag (TagDPPod, TagDRAPod): the daemon's requests of those pods'
	// starts; Agent: the agents' requests in the window (in-use taints).
	DP, DRA, Agent Counts
	Server         ServerMetrics
}

// Run runs one fleet size on a fresh API server.
func Run(ctx context.Context, o Options) (*Result, error) {
	o.defaults()
	pr := func(format string, a ...any) {
		fmt.Fprintf(o.Progress, "bench-fleet[%d]: %s %s\n", o.Nodes, time.Now().Format("15:04:05"), fmt.Sprintf(format, a...))
	}
	dir, err := os.MkdirTemp(o.Dir, "fleet-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	api, err := apiserver.StartArgs(ctx, o.APIServerArgs...)
	if err != nil {
		return nil, err
	}
	defer api.Stop()
	if err := api.ApplyCRDs(ctx); err != nil {
		return nil, err
	}
	adminCounter := NewCounter()
	adminCfg := api.Config()
	adminCfg.WrapTransport = adminCounter.Wrap
	admin, err := kubernetes.NewForConfig(adminCfg)
	if err != nil {
		return nil, err
	}
	if err := ApplyFiles(ctx, adminCfg, Installed...); err != nil {
		return nil, err
	}
	names := make([]string, o.Nodes)
	for i := range names {
		names[i] = fmt.Sprintf("gpu-node-%04d", i)
	}
	pr("API server up; creating %d nodes, their rdmanet-node pods and bound tokens", o.Nodes)
	ids, err := CreateNodes(ctx, admin, adminCfg, names, 32)
	if err != nil {
		return nil, err
	}
	if len(ids) > 1 {
		if err := WaitForPolicies(ctx, ids[0], ids[1].Node); err != nil {
			return nil, err
		}
	}
	if o.ControllerOnly {
		cr, err := runController(ctx, o.Controller, api, admin, names, filepath.Join(dir, "controller"), pr)
		if err != nil {
			return nil, err
		}
		return &Result{Nodes: o.Nodes, Controller: cr}, nil
	}
	const ns, nadName = "train", "rdma-net"
	if err := createNetwork(ctx, admin, adminCfg, ns, nadName); err != nil {
		return nil, err
	}

	shared, err := NewHardware(filepath.Join(dir, "shared"), o.NICs, o.VFs, 1)
	if err != nil {
		return nil, err
	}
	snap, err := shared.Snapshot()
	if err != nil {
		return nil, err
	}
	var vfs []string // the pool's VFs by PCI address (every node has the same)
	for _, p := range snap.Pools {
		for _, d := range p.Devices {
			vfs = append(vfs, d.ID)
		}
	}
	sort.Strings(vfs)
	pr("hardware: %d NICs x %d VFs = %d devices in pool %s", o.NICs, o.VFs, len(vfs), Resource)

	nodes := make([]*Node, o.Nodes)
	defer func() {
		var wg sync.WaitGroup
		for _, n := range nodes {
			if n != nil {
				wg.Add(1)
				go func() { defer wg.Done(); n.Stop() }()
			}
		}
		wg.Wait()
	}()
	conns := make([]http.RoundTripper, (o.Nodes+o.NodesPerConnection-1)/o.NodesPerConnection)
	if o.NodesPerConnection > 1 {
		for i := range conns {
			if conns[i], err = SharedTransport(adminCfg); err != nil {
				return nil, err
			}
		}
	}
	start := time.Now()
	err = parallel(ctx, o.Nodes, o.StartConcurrency, func(i int) error {
		no := NodeOptions{Name: names[i], Base: ids[i].Cfg, Transport: conns[i/o.NodesPerConnection], Hardware: shared, Shared: snap, StateDir: filepath.Join(dir, "nodes", names[i]), Logger: o.Logger}
		if i < o.FullAgents {
			hw, err := NewHardware(filepath.Join(dir, "nodes", names[i], "hw"), o.NICs, o.VFs, uint8(i+2))
			if err != nil {
				return err
			}
			no.Hardware, no.Shared = hw, nil
		}
		n, err := StartNode(ctx, no)
		if err != nil {
			return fmt.Errorf("node %s: %w", names[i], err)
		}
		nodes[i] = n
		return nil
	})
	if err != nil {
		return nil, err
	}
	slicesPerNode := (len(vfs) + dra.MaxDevicesPerSlice - 1) / dra.MaxDevicesPerSlice
	pr("%d nodes started in %s; waiting for %d ResourceSlices and %d annotated Nodes", o.Nodes, time.Since(start).Round(time.Second), o.Nodes*slicesPerNode, o.Nodes)
	if err := waitPublished(ctx, admin, o.Nodes, o.Nodes*slicesPerNode); err != nil {
		return nil, err
	}
	res := &Result{Nodes: o.Nodes, StartupS: time.Since(start).Seconds()}
	pr("fleet published in %.0f s; settling %s", res.StartupS, o.Settle)
	if err := sleep(ctx, o.Settle); err != nil {
		return nil, err
	}
	sumNodes := func() Counts {
		c := Counts{Requests: map[Key]int64{}}
		for _, n := range nodes {
			c.Add(n.Agent.Snapshot())
			c.Add(n.Daemon.Snapshot())
		}
		return c
	}
	perNode := func() map[string]Counts {
		m := map[string]Counts{}
		for _, n := range nodes {
			c := Counts{Requests: map[Key]int64{}}
			c.Add(n.Agent.Snapshot())
			c.Add(n.Daemon.Snapshot())
			m[n.Name] = c
		}
		return m
	}
	res.StartupWrites = sumNodes().Writes()

	// Steady state.
	pr("steady window of %s", o.Steady)
	s0, err := ReadServerMetrics(ctx, adminCfg)
	if err != nil {
		return nil, err
	}
	a0, c0, p0 := adminCounter.Snapshot(), sumNodes(), perNode()
	if err := sleep(ctx, o.Steady); err != nil {
		return nil, err
	}
	s1, err := ReadServerMetrics(ctx, adminCfg)
	if err != nil {
		return nil, err
	}
	a1, c1, p1 := adminCounter.Snapshot(), sumNodes(), perNode()
	res.Steady = Window{Duration: o.Steady, Node: c1.Sub(c0), Server: withoutAdmin(s1.Sub(s0), a1.Sub(a0)), ServerWatches: s1.OpenWatches(), WritesByNode: map[string]int64{}}
	for _, n := range nodes {
		res.Steady.NodeWatches += n.Agent.WatchesOpen() + n.Daemon.WatchesOpen()
		if w := p1[n.Name].Sub(p0[n.Name]).Writes(); w > 0 {
			res.Steady.WritesByNode[n.Name] = w
		}
	}
	pr("steady: node requests %d, writes %d, bytes in %d; server writes %.0f; watches node %d server %.0f",
		res.Steady.Node.Sum(func(Key) bool { return true }), res.Steady.Node.Writes(), res.Steady.Node.BytesIn, res.Steady.Server.Writes(nil), res.Steady.NodeWatches, res.Steady.ServerWatches)

	// One device health flap on a node that runs the real agent loop.
	if res.Flap, err = flap(ctx, nodes[0], adminCfg, adminCounter, admin, sumNodes); err != nil {
		return nil, err
	}
	pr("flap of %s on %s: %d slice writes for %d changes; all writes %d", res.Flap.Device, res.Flap.Node, res.Flap.SliceWrites, res.Flap.Changes, res.Flap.Writes)

	// The job start.
	if o.Pods > 0 {
		if res.Job, err = jobStart(ctx, o, nodes, vfs, admin, adminCfg, adminCounter, ns, nadName, pr); err != nil {
			return nil, err
		}
	}

	// The controller, with the nodes stopped.
	if o.Controller.Addresses > 0 {
		for i, n := range nodes {
			n.Stop()
			nodes[i] = nil
		}
		cr, err := runController(ctx, o.Controller, api, admin, names, filepath.Join(dir, "controller"), pr)
		if err != nil {
			return nil, err
		}
		res.Controller = cr
	}
	return res, nil
}

// withoutAdmin takes the benchmark's own requests (as admin) out of server deltas.
func withoutAdmin(s ServerMetrics, admin Counts) ServerMetrics {
	for k, v := range admin.Requests {
		vr := VerbResource{Verb: k.Verb, Resource: k.Resource}
		if _, ok := s.Requests[vr]; ok {
			s.Requests[vr] -= float64(v)
			if s.Requests[vr] == 0 {
				delete(s.Requests, vr)
			}
		}
	}
	return s
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// createNetwork creates the job's namespace and its NAD: the VF pool's
// resource and rdmanet-ipam over IPAMBlocks.
func createNetwork(ctx context.Context, admin kubernetes.Interface, cfg *rest.Config, ns, name string) error {
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	nc, err := nadclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	nad := &nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
		Annotations: map[string]string{"k8s.v1.cni.cncf.io/resourceName": Resource}},
		Spec: nadv1.NetworkAttachmentDefinitionSpec{Config: `{"cniVersion":"1.0.0","name":"` + name + `","type":"sriov","ipam":{"type":"rdmanet-ipam","range":"10.128.0.0/12","node_slice_size":"/26"}}`}}
	_, err = nc.K8sCniCncfIoV1().NetworkAttachmentDefinitions(ns).Create(ctx, nad, metav1.CreateOptions{})
	return err
}

// waitPublished waits until slices ResourceSlices of rdmanet's driver and
// nodes annotated Nodes exist. It counts the slices with a one-item page
// (remainingItemCount; the API server gives no count for a field-selected
// list, and only rdmanet's driver publishes here): a full list is 60 MB at
// 1,000 nodes.
func waitPublished(ctx context.Context, admin kubernetes.Interface, nodes, slices int) error {
	deadline := time.Now().Add(20 * time.Minute)
	for {
		sl, err := admin.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return err
		}
		have := len(sl.Items)
		if sl.RemainingItemCount != nil {
			have += int(*sl.RemainingItemCount)
		}
		nl, err := admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return err
		}
		annotated := 0
		for _, n := range nl.Items {
			if n.Annotations[agent.AnnotationNetnsMode] != "" {
				annotated++
			}
		}
		if have >= slices && annotated >= nodes {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after 20 min: %d of %d ResourceSlices, %d of %d Nodes annotated", have, slices, annotated, nodes)
		}
		if err := sleep(ctx, 5*time.Second); err != nil {
			return err
		}
	}
}

// flap takes one VF's RDMA port down and up again on a node that runs the
// real agent loop, waiting each time until its slice says so.
func flap(ctx context.Context, n *Node, adminCfg *rest.Config, adminCounter *Counter, admin kubernetes.Interface, sumNodes func() Counts) (Flap, error) {
	if !n.FullAgent() {
		return Flap{}, fmt.Errorf("flap: node %s does not run the agent loop", n.Name)
	}
	hw := n.o.Hardware
	bdf := sysfsfixture.VFBDF(hw.PFs[0].BDF, 0)
	ibdev := hw.RDMAByBD[bdf]
	dev := n.DeviceName(bdf)
	f := Flap{Node: n.Name, Device: dev}
	s0, err := ReadServerMetrics(ctx, adminCfg)
	if err != nil {
		return f, err
	}
	a0, c0, nodeC0 := adminCounter.Snapshot(), sumNodes(), n.Agent.Snapshot()
	for _, st := range []struct {
		state   string
		tainted bool
	}{{"1: DOWN", true}, {"4: ACTIVE", false}} {
		if err := hw.SetPortState(ibdev, st.state); err != nil {
			return f, err
		}
		if err := waitTaint(ctx, admin, n.Name, dev, dra.TaintUnhealthy, st.tainted); err != nil {
			return f, err
		}
		f.Changes++
	}
	// What else the change may cause shows within the slice controller's
	// sync delay and a few agent rounds.
	if err := sleep(ctx, 5*time.Second); err != nil {
		return f, err
	}
	s1, err := ReadServerMetrics(ctx, adminCfg)
	if err != nil {
		return f, err
	}
	a1, c1 := adminCounter.Snapshot(), sumNodes()
	nodeC := n.Agent.Snapshot().Sub(nodeC0)
	f.SliceWrites = nodeC.Sum(func(k Key) bool { return IsWrite(k.Verb) && k.Resource == "resourceslices" })
	all := c1.Sub(c0)
	f.Writes = all.Writes()
	f.WritesByVerbs = map[string]int64{}
	for k, v := range all.Requests {
		if IsWrite(k.Verb) {
			f.WritesByVerbs[k.Verb+" "+k.Resource] += v
		}
	}
	f.ServerWrites = withoutAdmin(s1.Sub(s0), a1.Sub(a0)).Writes(nil)
	return f, nil
}

// waitTaint waits until device of node's slices has (or has not) taint key.
func waitTaint(ctx context.Context, admin kubernetes.Interface, node, device, key string, want bool) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		sl, err := admin.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node + ",spec.driver=" + dra.DriverName})
		if err != nil {
			return err
		}
		if hasTaint(sl.Items, device, key) == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s device %s: taint %s present=%v not reached in 60 s", node, device, key, want)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

func hasTaint(slices []resourcev1.ResourceSlice, device, key string) bool {
	for _, s := range slices {
		for _, d := range s.Spec.Devices {
			if d.Name != device {
				continue
			}
			for _, t := range d.Taints {
				if t.Key == key {
					return true
				}
			}
		}
	}
	return false
}

// jobStart creates the job's pods bound round-robin across the nodes (DRA
// pods with their claims, allocated as kube-scheduler would), then has each
// node start its pods, all at once.
func jobStart(ctx context.Context, o Options, nodes []*Node, vfs []string, admin kubernetes.Interface, adminCfg *rest.Config, adminCounter *Counter,
	ns, nadName string, pr func(string, ...any)) (Job, error) {
	j := Job{Pods: o.Pods}
	starts := make([]PodStart, o.Pods)
	owner := make([]*Node, o.Pods)
	pr("job: creating %d pods (every %d-th a DRA pod) bound across %d nodes", o.Pods, o.DRAEvery, len(nodes))
	err := parallel(ctx, o.Pods, 32, func(i int) error {
		n := nodes[i%len(nodes)]
		k := i / len(nodes) // the pod's index on its node
		if k >= len(vfs) {
			return fmt.Errorf("job: %d pods on %d nodes exceed %d VFs per node", o.Pods, len(nodes), len(vfs))
		}
		name := fmt.Sprintf("train-%05d", i)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"job": "train"},
			Annotations: map[string]string{"k8s.v1.cni.cncf.io/networks": nadName}},
			Spec: corev1.PodSpec{NodeName: n.Name, Containers: []corev1.Container{{Name: "train", Image: "nccl-tests"}}}}
		ps := PodStart{Namespace: ns, Name: name, NAD: nadName, DeviceID: vfs[k]}
		if o.DRAEvery > 0 && i%o.DRAEvery == o.DRAEvery-1 {
			dev := n.DeviceName(vfs[k])
			if dev == "" {
				return fmt.Errorf("job: node %s published no device for VF %s", n.Name, vfs[k])
			}
			claim := name + "-nic"
			pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "nic", ResourceClaimName: &claim}}
			ps.Claim = &meta.ClaimDevice{Namespace: ns, Claim: claim, Driver: dra.DriverName, Pool: n.Name, Device: dev}
		}
		p, err := admin.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if ps.Claim != nil {
			if err := allocateClaim(ctx, admin, p, ps.Claim); err != nil {
				return err
			}
		}
		starts[i], owner[i] = ps, n
		return nil
	})
	if err != nil {
		return j, err
	}
	// kubelet sees its pods through its own watch; give the daemons' pod
	// watches the same moment before the sandboxes start.
	if err := sleep(ctx, 3*time.Second); err != nil {
		return j, err
	}
	s0, err := ReadServerMetrics(ctx, adminCfg)
	if err != nil {
		return j, err
	}
	snapAll := func() (dp, draC, ag Counts) {
		dp, draC, ag = Counts{Requests: map[Key]int64{}}, Counts{Requests: map[Key]int64{}}, Counts{Requests: map[Key]int64{}}
		for _, n := range nodes {
			d := n.Daemon.Snapshot()
			for k, v := range d.Requests {
				switch k.Tag {
				case TagDPPod:
					dp.Requests[k] += v
				case TagDRAPod:
					draC.Requests[k] += v
				}
			}
			ag.Add(n.Agent.Snapshot())
		}
		return
	}
	a0 := adminCounter.Snapshot()
	dp0, dra0, ag0 := snapAll()
	pr("job: %d pods start on their nodes", o.Pods)
	start := time.Now()
	var mu sync.Mutex
	var firstErr error
	_ = parallel(ctx, o.Pods, 256, func(i int) error {
		if err := owner[i].StartPod(ctx, starts[i]); err != nil {
			mu.Lock()
			j.Failed++
			if firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
		}
		if starts[i].Claim != nil {
			mu.Lock()
			j.DRAPods++
			mu.Unlock()
		}
		return nil
	})
	j.Wall = time.Since(start)
	j.DPPods = o.Pods - j.DRAPods
	if firstErr != nil {
		pr("job: %d pod starts failed; first: %v", j.Failed, firstErr)
	}
	// The agents' in-use poll (2 s) and slice syncs follow.
	if err := sleep(ctx, 10*time.Second); err != nil {
		return j, err
	}
	s1, err := ReadServerMetrics(ctx, adminCfg)
	if err != nil {
		return j, err
	}
	a1 := adminCounter.Snapshot()
	dp1, dra1, ag1 := snapAll()
	j.DP, j.DRA, j.Agent = dp1.Sub(dp0), dra1.Sub(dra0), ag1.Sub(ag0)
	j.Server = withoutAdmin(s1.Sub(s0), a1.Sub(a0))
	pr("job: started in %s, %d failed; dp pods %d: daemon writes %d, agent writes %d; DRA pods %d: daemon writes %d",
		j.Wall.Round(time.Millisecond), j.Failed, j.DPPods, j.DP.Writes(), j.Agent.Writes(), j.DRAPods, j.DRA.Writes())
	return j, nil
}

// allocateClaim creates the pod's claim allocated to its device and reserved
// for the pod, as kube-scheduler would.
func allocateClaim(ctx context.Context, admin kubernetes.Interface, pod *corev1.Pod, cd *meta.ClaimDevice) error {
	c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: cd.Claim, Namespace: cd.Namespace},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{
			{Name: "nic", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "rdma-exclusive.rdmanet.io"}}}}}}
	c, err := admin.ResourceV1().ResourceClaims(cd.Namespace).Create(ctx, c, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	c.Status.Allocation = &resourcev1.AllocationResult{
		Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
			{Request: "nic", Driver: cd.Driver, Pool: cd.Pool, Device: cd.Device}}},
		NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{pod.Spec.NodeName}}}}}},
	}
	c.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name, UID: pod.UID}}
	_, err = admin.ResourceV1().ResourceClaims(cd.Namespace).UpdateStatus(ctx, c, metav1.UpdateOptions{})
	return err
}

// Verbs lists counts by "VERB resource", largest first, as "k=v" pairs.
func Verbs(c Counts, per float64) string {
	m := map[string]int64{}
	for k, v := range c.Requests {
		m[k.Verb+" "+k.Resource] += v
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool {
		if m[keys[a]] != m[keys[b]] {
			return m[keys[a]] > m[keys[b]]
		}
		return keys[a] < keys[b]
	})
	var parts []string
	for _, k := range keys {
		if per > 0 {
			parts = append(parts, fmt.Sprintf("%s=%.3g", strings.ReplaceAll(k, " ", ":"), float64(m[k])/per))
		} else {
			parts = append(parts, fmt.Sprintf("%s=%d", strings.ReplaceAll(k, " ", ":"), m[k]))
		}
	}
	return strings.Join(parts, ",")
}
