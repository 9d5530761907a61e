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
	"sync"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	nadclient "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/rdmanet/rdmanet/internal/agent"
	"github.com/rdmanet/rdmanet/internal/dra"
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
	// FullRescan is how often the nodes that share the snapshot hand it to
	// their publisher (default 10 s, the agent's full rescan).
	FullRescan time.Duration
	// NodesPerConnection nodes share one HTTP/2 connection to the API
	// server (each still with its own token, clients and rate limits);
	// 1: every process of every node dials its own, as on real nodes.
	NodesPerConnection int
	// Controller phase (controller.go); Addresses 0 skips it.
	Controller ControllerOptions
	// ControllerOnly runs the controller phase alone: the Nodes exist, no
	// simulated node runs.
	ControllerOnly bool
	// HeapProfile, when set, is where the heap profile (pprof) is written
	// once the fleet published.
	HeapProfile string
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
	// Memory: what the simulated nodes cost this process.
	Memory Memory
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
	topo := NewSharedTopology(shared)
	mem0 := sampleMemory()
	start := time.Now()
	err = parallel(ctx, o.Nodes, o.StartConcurrency, func(i int) error {
		no := NodeOptions{Name: names[i], Base: ids[i].Cfg, Transport: conns[i/o.NodesPerConnection], Hardware: shared, Shared: snap, Topology: topo, FullRescan: o.FullRescan, StateDir: filepath.Join(dir, "nodes", names[i]), Logger: o.Logger}
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
	res.Memory = memoryPerNode(mem0, sampleMemory(), o.Nodes)
	pr("fleet published in %.0f s; per node %.0f KiB of live heap, %.1f goroutines; process RSS %.0f MiB (peak %.0f MiB); settling %s",
		res.StartupS, res.Memory.HeapPerNode/1024, res.Memory.GoroutinesPerNode, float64(res.Memory.RSS)/(1<<20), float64(res.Memory.HWM)/(1<<20), o.Settle)
	if o.HeapProfile != "" {
		if err := writeHeapProfile(o.HeapProfile); err != nil {
			return nil, err
		}
		pr("heap profile written to %s", o.HeapProfile)
	}
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
	if res.Steady, err = steady(ctx, o, nodes, adminCfg, adminCounter, sumNodes, perNode, pr); err != nil {
		return nil, err
	}

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
