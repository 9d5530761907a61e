// Package sim is the engine of `kubectl rdma demo`: it builds simulated GPU
// nodes on the local machine (sysfs fixture trees, a "host" network
// namespace per node whose veth ends stand in for the RoCE PF and VF
// netdevs, the recording RDMA/VF implementation of internal/netops), runs
// the real components against them — the node agent's device plugin pools,
// a kubelet stand-in that allocates through the Device Plugin API and
// answers the PodResources API, the rdmanet meta CNI exec'd through libcni
// as a runtime does, with sriov, rdma, macvlan, bridge, host-local and
// rdmanet-ipam behind it — attaches training pods in the exclusive, shared
// and host modes, reports what each pod got, detaches everything and checks
// that the simulated hosts are exactly as before.
//
// One RDMA subsystem has one netns mode, and the agent advertises exclusive
// pools only in "exclusive" mode and shared pools only in "shared" mode, so
// the demo runs two simulated nodes with the same hardware: gpu-node-excl
// (exclusive mode: the VF pods) and gpu-node-shared (shared mode: the
// macvlan pods and the hostNetwork pods). The InfiniBand variants of the
// exclusive and shared networks (ib-sriov-cni's and ipoib-cni's configs)
// run the same way on two IB nodes: ib-node-excl (ib-sriov VFs whose GUIDs
// come from the node's GUID pool) and ib-node-shared (IPoIB children of
// the shared IB port), when the IB modes are asked for (IBModes). Nothing touches the links of the namespace the demo
// runs in.
package sim

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	corev1 "k8s.io/api/core/v1"

	"github.com/rdmanet/rdmanet/internal/netops"
)

// Defaults.
const (
	DefaultWorkDir = "/run/rdmanet-demo"
	DefaultPrefix  = "rdmademo"
	DefaultPods    = 2
	// MaxPods per mode: the seed's shared pool has rdmaHcaMax 63 slots,
	// shared by the shared-mode and the host-mode pods of one node.
	MaxPods = 31

	NodeExclusive = "gpu-node-excl"
	NodeShared    = "gpu-node-shared"
)

// Options configure a run.
type Options struct {
	Pods    int      // pods per mode, attached in parallel (default 2, at most MaxPods)
	Modes   []string // default DefaultModes (the RoCE ones); any of AllModes
	Cycles  int      // attach + detach rounds (default 1); the verdict covers every round
	Keep    bool     // leave the last round attached for inspection
	WorkDir string   // state, fixtures, sockets (default /run/rdmanet-demo); one demo per dir
	BinDir  string   // the plugin binaries (RequiredBinaries)
	// NetnsPrefix prefixes every network namespace the demo creates
	// (default "rdmademo"); tests use their own so they can run beside a demo.
	NetnsPrefix string
	Progress    io.Writer // progress and timing (stderr); nil discards
	// CleanupCommand is how the user runs --cleanup (printed with --keep);
	// default "kubectl rdma demo --cleanup".
	CleanupCommand string
}

type progress struct {
	w     io.Writer
	start time.Time
	mu    sync.Mutex
}

func (p *progress) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "[%6.2fs] %s\n", time.Since(p.start).Seconds(), fmt.Sprintf(format, args...))
}

func (o *Options) defaults() error {
	if o.Pods == 0 {
		o.Pods = DefaultPods
	}
	if o.Pods < 1 || o.Pods > MaxPods {
		return fmt.Errorf("--pods %d: must be 1-%d (the seed's shared pool has rdmaHcaMax 63 slots for the shared and the host pods of one node)", o.Pods, MaxPods)
	}
	if len(o.Modes) == 0 {
		o.Modes = DefaultModes
	}
	seen := map[string]bool{}
	for _, m := range o.Modes {
		switch m {
		case ModeExclusive, ModeShared, ModeHost, ModeIBExclusive, ModeIBShared:
		default:
			return fmt.Errorf("mode %q: want %s", m, strings.Join(AllModes, ", "))
		}
		if seen[m] {
			return fmt.Errorf("mode %q given twice", m)
		}
		seen[m] = true
	}
	if o.Cycles == 0 {
		o.Cycles = 1
	}
	if o.Cycles < 1 {
		return fmt.Errorf("cycles %d: must be at least 1", o.Cycles)
	}
	if o.Keep && o.Cycles > 1 {
		return errors.New("--keep leaves the pods attached, so it runs one round only")
	}
	if o.WorkDir == "" {
		o.WorkDir = DefaultWorkDir
	}
	if o.NetnsPrefix == "" {
		o.NetnsPrefix = DefaultPrefix
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.CleanupCommand == "" {
		o.CleanupCommand = "kubectl rdma demo --cleanup"
	}
	return nil
}

// nodeFor is the simulated node of a mode.
func nodeFor(mode string) string {
	switch mode {
	case ModeExclusive:
		return NodeExclusive
	case ModeIBExclusive:
		return NodeIBExclusive
	case ModeIBShared:
		return NodeIBShared
	}
	return NodeShared
}

// podRun is one pod going through the demo.
type podRun struct {
	mode  string
	node  *node
	pod   *corev1.Pod
	netns ns.NetNS
	alloc *podAlloc
	rep   PodReport
}

func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Run builds the simulated nodes, attaches Pods pods per mode, reports,
// detaches and verifies the hosts (Cycles times), and tears everything down
// (unless Keep). The report is returned together with any error, as far as
// it got.
func Run(ctx context.Context, o Options) (rep *Report, err error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	binDir, err := preflight(o.BinDir)
	if err != nil {
		return nil, err
	}
	workDir, err := filepath.Abs(o.WorkDir)
	if err != nil {
		return nil, err
	}
	m, err := LoadManifests()
	if err != nil {
		return nil, err
	}
	pr := &progress{w: o.Progress, start: time.Now()}
	l := layout{WorkDir: workDir, BinDir: binDir, Prefix: o.NetnsPrefix}
	st := &RunState{PID: os.Getpid(), Started: time.Now().UTC(), Layout: l, RDMA: map[string][]string{}}
	wantMode := map[string]bool{}
	for _, md := range o.Modes {
		wantMode[md] = true
	}
	if wantMode[ModeExclusive] {
		st.Nodes = append(st.Nodes, nodeDef{Name: NodeExclusive, Mode: netops.RDMANetnsExclusive, PodCIDR: "10.244.1.0/24", VFs: max(8, o.Pods)})
	}
	if wantMode[ModeShared] || wantMode[ModeHost] {
		st.Nodes = append(st.Nodes, nodeDef{Name: NodeShared, Mode: netops.RDMANetnsShared, PodCIDR: "10.244.2.0/24", VFs: max(8, o.Pods)})
	}
	if wantMode[ModeIBExclusive] {
		st.Nodes = append(st.Nodes, nodeDef{Name: NodeIBExclusive, Mode: netops.RDMANetnsExclusive, PodCIDR: "10.244.3.0/24", VFs: max(8, o.Pods), IB: true})
	}
	if wantMode[ModeIBShared] {
		st.Nodes = append(st.Nodes, nodeDef{Name: NodeIBShared, Mode: netops.RDMANetnsShared, PodCIDR: "10.244.4.0/24", VFs: 8, IB: true})
	}
	// the longest unix socket path the demo creates must fit sun_path (108 bytes)
	for _, d := range st.Nodes {
		for _, res := range d.resources() {
			if sock := filepath.Join(workDir, "nodes", d.Name, "dp", "rdmanet-"+strings.NewReplacer("/", "_", ".", "_").Replace(res)+".sock"); len(sock) > 107 {
				return nil, fmt.Errorf("work dir %s is too long: the demo's unix sockets (e.g. %s, %d bytes) must fit in 107 bytes; fix: use a shorter --work-dir (default %s)", workDir, sock, len(sock), DefaultWorkDir)
			}
		}
	}
	if err := lock(st); err != nil {
		return nil, err
	}
	rep = &Report{Pods: []PodReport{}, Summary: Summary{PodsPerMode: o.Pods, Modes: map[string]ModeSummary{},
		Simulated: "no SR-IOV or RDMA hardware is used: PF/VF netdevs are veth ends in each node's host netns, sysfs is a fixture tree, and VF settings and RDMA netns moves go through the recording netops (" +
			"netops.Recorder): recorded, not done by a kernel; see each node's recorder log"}}
	if slices.ContainsFunc(st.Nodes, func(d nodeDef) bool { return d.IB }) {
		rep.Summary.Simulated += ". On the IB nodes the IPoIB netdevs are veth ends named like them, VF GUIDs set through the PF and the VF rebinds are recorded, " +
			"and each IPoIB child is recorded (ip link add ... type ipoib) and stood in for by a macvlan of the port's veth: this kernel has no ib_ipoib"
	}
	nodes := map[string]*node{}
	kept := false
	defer func() {
		for _, n := range nodes {
			n.stop()
		}
		if kept {
			return
		}
		var terr []string
		for _, d := range st.Nodes {
			if e := teardownNode(d, l); e != nil {
				terr = append(terr, e.Error())
			}
		}
		if len(terr) == 0 {
			if e := os.RemoveAll(workDir); e != nil {
				terr = append(terr, e.Error())
			}
		}
		if len(terr) > 0 && err == nil {
			err = fmt.Errorf("tear down the simulated nodes: %s", strings.Join(terr, "; "))
		}
		rep.Summary.TotalMS = time.Since(pr.start).Milliseconds()
	}()

	// --- simulated nodes ----------------------------------------------------
	if err := l.prepare(m, RequiredBinaries); err != nil {
		return rep, err
	}
	before := HostState{Nodes: map[string]NodeState{}}
	for _, d := range st.Nodes {
		t0 := time.Now()
		n, err := startNode(ctx, d, l, m, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			return rep, err
		}
		nodes[d.Name] = n
		want := map[string]int{}
		for _, res := range d.resources() {
			want[res] = o.Pods
		}
		if !d.IB && d.Mode == netops.RDMANetnsShared {
			want[SharedResource] = 2 * o.Pods // the shared and the host pods
		}
		if err := n.waitPools(ctx, want); err != nil {
			return rep, err
		}
		if err := n.bringUp(ctx); err != nil {
			return rep, err
		}
		ns := NodeSummary{Name: d.Name, RDMANetnsMode: d.Mode, Host: l.hostNS(d.Name), RecorderLog: n.rec.LogPath()}
		for _, md := range o.Modes {
			if nodeFor(md) == d.Name {
				ns.Modes = append(ns.Modes, md)
			}
		}
		if snap := n.agent.Last(); snap != nil {
			for _, p := range snap.Pools {
				s := p.Summary()
				if len(p.Problems) > 0 && !p.Advertised {
					s += ": " + p.Problems[0]
				}
				ns.Pools = append(ns.Pools, s)
			}
		}
		rep.Summary.Nodes = append(rep.Summary.Nodes, ns)
		if before.Nodes[d.Name], err = n.snapshot(); err != nil {
			return rep, err
		}
		for _, dev := range n.fix.RDMAByBD {
			st.RDMA[d.Name] = append(st.RDMA[d.Name], dev)
		}
		sort.Strings(st.RDMA[d.Name])
		pr.printf("node %s up in %s: RDMA netns mode %s (recorded), %s, agent serving %s; host netns %s",
			d.Name, time.Since(t0).Round(time.Millisecond), d.Mode, d.hardware(), strings.Join(slices.Sorted(maps.Keys(want)), ","), l.hostNS(d.Name))
	}
	st.Before = &before
	if err := writeState(st); err != nil {
		return rep, err
	}
	rep.Summary.HostChecked = before.Summary()

	// --- rounds ---------------------------------------------------------------
	var failures []string
	for cycle := 1; cycle <= o.Cycles; cycle++ {
		last := cycle == o.Cycles
		runs, cs, ferr := attachRound(ctx, o, l, m, st, nodes, pr, cycle)
		if ferr != nil {
			failures = append(failures, ferr.Error())
		}
		if dup := uniqueGUIDs(runs); len(dup) > 0 {
			failures = append(failures, fmt.Sprintf("round %d: %s", cycle, strings.Join(dup, "; ")))
		}
		if last {
			rep.Pods = rep.Pods[:0]
			for _, r := range runs {
				rep.Pods = append(rep.Pods, r.rep)
			}
			rep.Summary.Modes = modeSummaries(runs)
		}
		if last && o.Keep && ferr == nil {
			st.Kept, kept = true, true
			if err := writeState(st); err != nil {
				return rep, err
			}
			for _, r := range runs {
				if r.netns != nil {
					r.netns.Close()
				}
			}
			rep.Summary.Kept = true
			rep.Cleanup = "kept: nothing detached; `kubectl rdma demo --cleanup` detaches, verifies and removes it"
			rep.Summary.Commands = keepCommands(l, st, runs, o.CleanupCommand)
			rep.Summary.Cycles = append(rep.Summary.Cycles, cs)
			pr.printf("kept up: %d pods on %d simulated nodes; state in %s", len(runs), len(st.Nodes), statePath(workDir))
			return rep, nil
		}
		// detach even after an interrupt: nothing may stay behind
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
		cs.DetachWallMS = detachRound(dctx, l, st, runs, pr)
		cancel()
		after := HostState{Nodes: map[string]NodeState{}}
		for _, d := range st.Nodes {
			if after.Nodes[d.Name], err = nodes[d.Name].snapshot(); err != nil {
				return rep, err
			}
		}
		if last {
			for i, r := range runs {
				rep.Pods[i].DetachMS = r.rep.DetachMS
			}
		}
		diff := before.Diff(after)
		diff = append(diff, checkIBRelease(runs)...)
		cs.Cleanup = verdict(diff)
		rep.Summary.Cycles = append(rep.Summary.Cycles, cs)
		pr.printf("round %d: detached in %dms; host state: %s", cycle, cs.DetachWallMS, cs.Cleanup)
	}
	rep.Cleanup = "clean"
	var leaks []string
	for i, c := range rep.Summary.Cycles {
		if c.Cleanup != "clean" {
			leaks = append(leaks, fmt.Sprintf("round %d: %s", i+1, c.Cleanup))
		}
	}
	if len(leaks) > 0 {
		rep.Cleanup = strings.Join(leaks, "; ")
	}
	if ctx.Err() != nil {
		return rep, fmt.Errorf("interrupted (%w): the pods were detached and the host check ran; cleanup: %s", ctx.Err(), rep.Cleanup)
	}
	if len(failures) > 0 {
		return rep, errors.New(strings.Join(failures, "; "))
	}
	return rep, nil
}
