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
// macvlan pods and the hostNetwork pods). Nothing touches the links of the
// namespace the demo runs in.
package sim

import (
	"context"
	"crypto/rand"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/plugins/pkg/ns"
	corev1 "k8s.io/api/core/v1"

	"github.com/rdmanet/rdmanet/internal/lint"
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

// RequiredBinaries are the plugins the demo execs (from BinDir).
var RequiredBinaries = []string{"rdmanet", "rdmanet-direct", "sriov", "sriov-direct", "rdma", "rdma-direct", "rdmanet-ipam", "rdmanet-ipam-direct", "macvlan", "bridge", "host-local"}

// Options configure a run.
type Options struct {
	Pods    int      // pods per mode, attached in parallel (default 2, at most MaxPods)
	Modes   []string // default AllModes
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

// PrereqError means the machine cannot run the demo (no root, no network
// namespaces, binaries missing); the CLI exits 2.
type PrereqError struct{ Err error }

func (e *PrereqError) Error() string { return e.Err.Error() }
func (e *PrereqError) Unwrap() error { return e.Err }

// BusyError means another demo holds the work dir.
type BusyError struct {
	WorkDir string
	State   RunState
}

func (e *BusyError) Error() string {
	what := "running"
	fix := "wait for it to finish"
	if e.State.Kept {
		what = "kept up (--keep)"
		fix = "`kubectl rdma demo --cleanup` removes it"
	} else if !pidAlive(e.State.PID) {
		what = "left behind by a run that died"
		fix = "`kubectl rdma demo --cleanup` removes it"
	}
	return fmt.Sprintf("another demo is %s in %s: started %s by pid %d, %d pods, namespaces %s-*; fix: %s",
		what, e.WorkDir, e.State.Started.Format(time.RFC3339), e.State.PID, len(e.State.Pods), e.State.Layout.Prefix, fix)
}

// Report is the demo's result (also its -o json form).
type Report struct {
	Pods    []PodReport `json:"pods"`
	Cleanup string      `json:"cleanup"` // "clean", or what leaked
	Summary Summary     `json:"summary"`
}

// PodReport is one pod's attachment.
type PodReport struct {
	Name          string              `json:"name"`
	Namespace     string              `json:"namespace"`
	Mode          string              `json:"mode"`
	Node          string              `json:"node"`
	Netns         string              `json:"netns"`
	ContainerID   string              `json:"container_id,omitempty"`
	Interfaces    []Interface         `json:"interfaces"`
	DefaultRoute  string              `json:"default_route"` // interface with the default route ("" = none)
	Devices       map[string][]string `json:"devices"`       // resource -> device IDs (kubelet's allocation)
	DeviceNodes   []string            `json:"device_nodes"`  // from Allocate
	Device        string              `json:"device"`        // human form: VF or HCA
	RDMA          string              `json:"rdma"`          // RDMA device placement
	NCCL          []EnvVar            `json:"nccl"`
	Notes         []string            `json:"notes,omitempty"`
	NetworkStatus json.RawMessage     `json:"network_status,omitempty"`
	AllocMS       int64               `json:"alloc_ms"`
	AttachMS      int64               `json:"attach_ms"` // CNI ADD (0 for hostNetwork: no CNI runs)
	DetachMS      int64               `json:"detach_ms"`
	Error         string              `json:"error,omitempty"`
}

// Interface is one interface a pod sees.
type Interface struct {
	Name   string   `json:"name"`
	IPs    []string `json:"ips"`
	PCI    string   `json:"pci"`
	MAC    string   `json:"mac,omitempty"`
	Kind   string   `json:"kind,omitempty"`
	Routes []string `json:"routes,omitempty"`
}

// EnvVar is one NCCL setting that fits the pod.
type EnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	Why   string `json:"why,omitempty"`
}

// Summary is the run's overview.
type Summary struct {
	PodsPerMode int                    `json:"pods_per_mode"`
	Modes       map[string]ModeSummary `json:"modes"`
	Cycles      []CycleSummary         `json:"cycles"`
	Nodes       []NodeSummary          `json:"nodes"`
	Simulated   string                 `json:"simulated"`
	HostChecked string                 `json:"host_checked"`
	TotalMS     int64                  `json:"total_ms"`
	Kept        bool                   `json:"kept"`
	Commands    []string               `json:"commands,omitempty"` // --keep: how to look and clean up
}

// ModeSummary aggregates a mode's attach times (last round).
type ModeSummary struct {
	Pods        int   `json:"pods"`
	Attached    int   `json:"attached"`
	AttachP50MS int64 `json:"attach_p50_ms"`
	AttachMaxMS int64 `json:"attach_max_ms"`
}

// CycleSummary is one attach + detach round.
type CycleSummary struct {
	AttachWallMS int64  `json:"attach_wall_ms"`
	DetachWallMS int64  `json:"detach_wall_ms"`
	Cleanup      string `json:"cleanup"`
}

// NodeSummary describes a simulated node.
type NodeSummary struct {
	Name          string   `json:"name"`
	RDMANetnsMode string   `json:"rdma_netns_mode"`
	Host          string   `json:"host_netns"`
	Modes         []string `json:"modes"`
	Pools         []string `json:"pools"`
	RecorderLog   string   `json:"recorder_log"`
}

// RunState is the work dir's state file: the lock against a second run and
// what --cleanup needs after --keep (or after a run that died).
type RunState struct {
	PID     int                 `json:"pid"`
	Started time.Time           `json:"started"`
	Kept    bool                `json:"kept"`
	Layout  layout              `json:"layout"`
	Nodes   []nodeDef           `json:"nodes"`
	Pods    []keptPod           `json:"pods"`
	Before  *HostState          `json:"before,omitempty"`
	RDMA    map[string][]string `json:"rdmaDevices,omitempty"` // node -> RDMA devices
}

type keptPod struct {
	Namespace   string `json:"namespace"`
	Name        string `json:"name"`
	Node        string `json:"node"`
	Mode        string `json:"mode"`
	ContainerID string `json:"containerID"`
	Netns       string `json:"netns"`
	UID         string `json:"uid"`
}

func statePath(workDir string) string { return filepath.Join(workDir, "state.json") }

func pidAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	return syscall.Kill(pid, 0) == nil
}

// ReadState returns the work dir's state, ok false when no demo is there.
func ReadState(workDir string) (RunState, bool, error) {
	var s RunState
	b, err := os.ReadFile(statePath(workDir))
	if errors.Is(err, os.ErrNotExist) {
		return s, false, nil
	}
	if err != nil {
		return s, false, fmt.Errorf("demo state: %w", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, true, fmt.Errorf("demo state %s is corrupt: %w; fix: delete it after removing the demo's namespaces (`ip netns list`)", statePath(workDir), err)
	}
	return s, true, nil
}

func writeState(s *RunState) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return netops.WriteFileAtomic(statePath(s.Layout.WorkDir), b, 0o600)
}

// lock creates the state file exclusively; a present one means another demo.
func lock(s *RunState) error {
	if err := os.MkdirAll(s.Layout.WorkDir, 0o755); err != nil {
		return fmt.Errorf("work dir: %w", err)
	}
	f, err := os.OpenFile(statePath(s.Layout.WorkDir), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if errors.Is(err, os.ErrExist) {
		prev, _, rerr := ReadState(s.Layout.WorkDir)
		if rerr != nil {
			return rerr
		}
		return &BusyError{WorkDir: s.Layout.WorkDir, State: prev}
	}
	if err != nil {
		return fmt.Errorf("demo state: %w", err)
	}
	f.Close()
	return writeState(s)
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
		o.Modes = AllModes
	}
	seen := map[string]bool{}
	for _, m := range o.Modes {
		switch m {
		case ModeExclusive, ModeShared, ModeHost:
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

// CheckBinaries tells which plugin binaries are missing from dir, or are
// production builds that refuse the recording fake (TestHooksBinaries).
func CheckBinaries(dir string) error {
	var missing []string
	for _, b := range RequiredBinaries {
		if st, err := os.Stat(filepath.Join(dir, b)); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("plugin binaries missing from %s: %s; fix: `make demo-bin` (builds them into bin/testhooks/) or point --bin-dir at them", dir, strings.Join(missing, ", "))
	}
	var prod []string
	for _, b := range TestHooksBinaries {
		if why := testHooksBuild(filepath.Join(dir, b)); why != "" {
			prod = append(prod, b+" ("+why+")")
		}
	}
	if len(prod) > 0 {
		return fmt.Errorf("plugin binaries in %s are not test-switch builds: %s; the demo's simulated VFs need RDMANET_NETOPS=record (the recording fake for SR-IOV and RDMA, which this machine lacks), "+
			"and production builds refuse it; fix: `make demo-bin` (builds them with -tags %s into bin/testhooks/) or point --bin-dir at such a build",
			dir, strings.Join(prod, ", "), netops.TestHooksTag)
	}
	return nil
}

// TestHooksBinaries are the plugin binaries the demo drives through the test
// switches (RDMANET_NETOPS=record), so they must be -tags rdmanet_testhooks
// builds.
var TestHooksBinaries = []string{"sriov-direct", "rdma-direct"}

// testHooksBuild is "" when the Go binary at path was built with the
// test-switch tag, else why not.
func testHooksBuild(path string) string {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return "no Go build info: " + err.Error()
	}
	for _, s := range bi.Settings {
		if s.Key == "-tags" && slices.Contains(strings.Split(s.Value, ","), netops.TestHooksTag) {
			return ""
		}
	}
	return "built without -tags " + netops.TestHooksTag
}

// nodeFor is the simulated node of a mode.
func nodeFor(mode string) string {
	if mode == ModeExclusive {
		return NodeExclusive
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

// preflight checks the machine (CheckPrereqs) and the binaries in binDir
// (CheckBinaries), and returns binDir made absolute.
func preflight(binDir string) (string, error) {
	if err := CheckPrereqs(); err != nil {
		return "", &PrereqError{Err: err}
	}
	abs, err := filepath.Abs(binDir)
	if err != nil {
		return "", err
	}
	if err := CheckBinaries(abs); err != nil {
		return "", &PrereqError{Err: err}
	}
	return abs, nil
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
	// the longest unix socket path the demo creates must fit sun_path (108 bytes)
	if longest := filepath.Join(workDir, "nodes", NodeShared, "dp", "rdmanet-"+strings.NewReplacer("/", "_", ".", "_").Replace(SharedResource)+".sock"); len(longest) > 107 {
		return nil, fmt.Errorf("work dir %s is too long: the demo's unix sockets (e.g. %s, %d bytes) must fit in 107 bytes; fix: use a shorter --work-dir (default %s)", workDir, longest, len(longest), DefaultWorkDir)
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
	if err := lock(st); err != nil {
		return nil, err
	}
	rep = &Report{Pods: []PodReport{}, Summary: Summary{PodsPerMode: o.Pods, Modes: map[string]ModeSummary{},
		Simulated: "no SR-IOV or RDMA hardware is used: PF/VF netdevs are veth ends in each node's host netns, sysfs is a fixture tree, and VF settings and RDMA netns moves go through the recording netops (" +
			"netops.Recorder): recorded, not done by a kernel; see each node's recorder log"}}
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
		want := map[string]int{ExclusiveResource: o.Pods}
		if d.Mode == netops.RDMANetnsShared {
			want = map[string]int{SharedResource: 2 * o.Pods}
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
		pr.printf("node %s up in %s: RDMA netns mode %s (recorded), 2 RoCE PFs (%s NUMA 0 with %d VFs, %s NUMA 1), agent serving %s; host netns %s",
			d.Name, time.Since(t0).Round(time.Millisecond), d.Mode, ExclusivePF, d.VFs, SharedPF, strings.Join(keys(want), ","), l.hostNS(d.Name))
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

func keys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func verdict(diff []string) string {
	if len(diff) == 0 {
		return "clean"
	}
	return strings.Join(diff, "; ")
}

// attachRound creates the pods of every mode, has the kubelet stand-ins
// admit them (device allocation), creates their network namespaces and
// runs the meta CNI ADD for all of them in parallel.
func attachRound(ctx context.Context, o Options, l layout, m *Manifests, st *RunState, nodes map[string]*node, pr *progress, cycle int) ([]*podRun, CycleSummary, error) {
	var runs []*podRun
	var cs CycleSummary
	var errs []string
	for _, mode := range o.Modes {
		for i := 0; i < o.Pods; i++ {
			n := nodes[nodeFor(mode)]
			pod, err := m.Pod(mode, i, n.def.Name, randomID(8))
			if err != nil {
				return nil, cs, err
			}
			r := &podRun{mode: mode, node: n, pod: pod, rep: PodReport{Name: pod.Name, Namespace: pod.Namespace, Mode: mode, Node: n.def.Name,
				Devices: map[string][]string{}, DeviceNodes: []string{}, Interfaces: []Interface{}}}
			b, err := podYAML(pod)
			if err != nil {
				return nil, cs, err
			}
			if err := os.WriteFile(podManifestPath(l, pod.Namespace, pod.Name), b, 0o644); err != nil {
				return nil, cs, err
			}
			runs = append(runs, r)
		}
	}
	// kubelet admits pods one by one: GetPreferredAllocation + Allocate
	ignored := map[string]bool{}
	for _, r := range runs {
		t0 := time.Now()
		a, err := r.node.kubelet.admit(ctx, r.pod)
		r.rep.AllocMS = time.Since(t0).Milliseconds()
		if err != nil {
			r.rep.Error = err.Error()
			errs = append(errs, err.Error())
			continue
		}
		r.alloc = a
		for res, ids := range a.Devices {
			r.rep.Devices[res] = ids
			for _, d := range a.Responses[res].Devices {
				r.rep.DeviceNodes = append(r.rep.DeviceNodes, d.HostPath)
			}
		}
		for _, ig := range a.Ignored {
			ignored[ig] = true
		}
	}
	if len(ignored) > 0 && cycle == 1 {
		pr.printf("not simulated, ignored by the kubelet stand-in: %s (no device plugin for it on the simulated nodes)", strings.Join(sortedKeys(ignored), ", "))
	}
	pr.printf("round %d: kubelet stand-ins admitted %d pods (GetPreferredAllocation + Allocate through the agent's device plugin servers)", cycle, len(runs))
	// sandboxes
	for _, r := range runs {
		kp := keptPod{Namespace: r.pod.Namespace, Name: r.pod.Name, Node: r.node.def.Name, Mode: r.mode, UID: string(r.pod.UID)}
		if r.mode != ModeHost && r.alloc != nil {
			kp.ContainerID = randomID(32)
			kp.Netns = l.podNS(r.pod.Name)
			netns, err := newNamedNS(kp.Netns)
			if err != nil {
				r.rep.Error = err.Error()
				errs = append(errs, err.Error())
				continue
			}
			r.netns = netns
			r.rep.Netns, r.rep.ContainerID = kp.Netns, kp.ContainerID
		} else {
			r.rep.Netns = l.hostNS(r.node.def.Name) + " (hostNetwork)"
		}
		st.Pods = append(st.Pods, kp)
	}
	if err := writeState(st); err != nil {
		return runs, cs, err
	}
	t0 := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, r := range runs {
		if r.netns == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			err := r.node.host.Do(func(ns.NetNS) error {
				_, err := r.node.cni.AddNetworkList(ctx, r.node.meta, runtimeConf(r.rep.ContainerID, r.netns.Path(), r.pod.Namespace, r.pod.Name, string(r.pod.UID)))
				return err
			})
			r.rep.AttachMS = time.Since(start).Milliseconds()
			if err != nil {
				mu.Lock()
				r.rep.Error = fmt.Sprintf("CNI ADD of pod %s/%s on %s: %v (meta CNI log: %s)", r.pod.Namespace, r.pod.Name, r.node.def.Name, err, filepath.Join(r.node.dir, "rdmanet.log"))
				errs = append(errs, r.rep.Error)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	cs.AttachWallMS = time.Since(t0).Milliseconds()
	attached := 0
	for _, r := range runs {
		if r.rep.Error == "" {
			if err := describe(r, l); err != nil {
				r.rep.Error = err.Error()
				errs = append(errs, err.Error())
				continue
			}
			attached++
		}
	}
	pr.printf("round %d: %d/%d pods attached, CNI ADDs in parallel in %dms", cycle, attached, len(runs), cs.AttachWallMS)
	if len(errs) > 0 {
		return runs, cs, fmt.Errorf("round %d: %s", cycle, strings.Join(errs, "; "))
	}
	return runs, cs, nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func podManifestPath(l layout, namespace, name string) string {
	return filepath.Join(l.manifests(), "pod-"+namespace+"-"+name+".yaml")
}

// prepare lays out the work dir the CNI side reads: the bin dir with links
// to bins (and rdmanet-ipam as "whereabouts", the name the seed NAD uses),
// the static source's manifests (the NADs) and its network-status dir.
func (l layout) prepare(m *Manifests, bins []string) error {
	for _, d := range []string{l.cniBin(), l.manifests(), l.statusDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	for _, b := range bins {
		if err := os.Symlink(filepath.Join(l.BinDir, b), filepath.Join(l.cniBin(), b)); err != nil {
			return err
		}
	}
	if err := os.Symlink(filepath.Join(l.BinDir, "rdmanet-ipam"), filepath.Join(l.cniBin(), "whereabouts")); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(l.manifests(), "nads.yaml"), m.NADs, 0o644)
}

func runtimeConf(containerID, netns, namespace, name, uid string) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: containerID, NetNS: netns, IfName: "eth0",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", namespace}, {"K8S_POD_NAME", name},
			{"K8S_POD_INFRA_CONTAINER_ID", containerID}, {"K8S_POD_UID", uid}}}
}

// detachRound runs CNI DEL for every pod in parallel, deletes the pod
// namespaces as the runtime does, and deletes the pods (kubelet releases
// their devices; their manifests and network-status go away).
func detachRound(ctx context.Context, l layout, st *RunState, runs []*podRun, pr *progress) int64 {
	t0 := time.Now()
	var wg sync.WaitGroup
	for _, r := range runs {
		if r.netns == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			err := r.node.host.Do(func(ns.NetNS) error {
				return r.node.cni.DelNetworkList(ctx, r.node.meta, runtimeConf(r.rep.ContainerID, r.netns.Path(), r.pod.Namespace, r.pod.Name, string(r.pod.UID)))
			})
			r.rep.DetachMS = time.Since(start).Milliseconds()
			if err != nil {
				pr.printf("CNI DEL of pod %s/%s failed: %v", r.pod.Namespace, r.pod.Name, err)
			}
			r.netns.Close()
			if err := deleteNamedNS(l.podNS(r.pod.Name)); err != nil {
				pr.printf("%v", err)
			}
		}()
	}
	wg.Wait()
	for _, r := range runs {
		r.node.kubelet.release(r.pod.Namespace, r.pod.Name)
		_ = os.Remove(podManifestPath(l, r.pod.Namespace, r.pod.Name))
		_ = os.Remove(filepath.Join(l.statusDir(), r.pod.Namespace+"_"+r.pod.Name+".json"))
	}
	st.Pods = nil
	_ = writeState(st)
	return time.Since(t0).Milliseconds()
}

func modeSummaries(runs []*podRun) map[string]ModeSummary {
	by := map[string][]int64{}
	out := map[string]ModeSummary{}
	for _, r := range runs {
		s := out[r.mode]
		s.Pods++
		if r.rep.Error == "" {
			s.Attached++
			by[r.mode] = append(by[r.mode], r.rep.AttachMS)
		}
		out[r.mode] = s
	}
	for mode, ts := range by {
		sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
		s := out[mode]
		s.AttachP50MS, s.AttachMaxMS = ts[(len(ts)-1)/2], ts[len(ts)-1]
		out[mode] = s
	}
	return out
}

// NCCL env that fits each mode.
func ncclFor(mode, ifname, hca string) []EnvVar {
	switch mode {
	case ModeExclusive:
		return []EnvVar{{Name: "NCCL_SOCKET_IFNAME", Value: "=" + ifname, Why: "bootstrap over the training net"},
			{Name: "NCCL_IB_HCA", Value: "", Why: "not needed: the pod's netns holds only its VF's RDMA device " + hca}}
	case ModeShared:
		return []EnvVar{{Name: "NCCL_SOCKET_IFNAME", Value: "=" + ifname, Why: "bootstrap over the macvlan training net"},
			{Name: "NCCL_IB_HCA", Value: "=" + hca, Why: "shared netns mode shows every HCA of the node; pin the one behind " + ifname}}
	default:
		return []EnvVar{{Name: "NCCL_SOCKET_IFNAME", Value: "=" + ifname, Why: "the host's RoCE NIC"},
			{Name: "NCCL_IB_HCA", Value: "=" + hca, Why: "the host namespace shows every HCA and VF; pin the one behind " + ifname}}
	}
}

// describe reads back what the pod got: interfaces, addresses, routes, the
// device, the RDMA device's placement, network-status, and the NCCL env.
func describe(r *podRun, l layout) error {
	n := r.node
	hca := n.fix.RDMAByBD[SharedPFBDF]
	switch r.mode {
	case ModeHost:
		// hostNetwork: the pod shares the node's namespace; no CNI ran.
		err := n.host.Do(func(ns.NetNS) error {
			lk, err := netops.LinkByName(SharedPF)
			if err != nil {
				return err
			}
			as, err := netops.Addrs(SharedPF)
			if err != nil {
				return err
			}
			iface := Interface{Name: SharedPF, PCI: SharedPFBDF, MAC: lk.MAC.String(), Kind: "host NIC", IPs: []string{}}
			for _, a := range as {
				if !a.IP.IsLinkLocalUnicast() {
					iface.IPs = append(iface.IPs, a.String())
				}
			}
			iface.Routes, err = netops.Routes(SharedPF)
			r.rep.Interfaces = append(r.rep.Interfaces, iface)
			return err
		})
		if err != nil {
			return fmt.Errorf("pod %s/%s: read the host's %s: %w", r.pod.Namespace, r.pod.Name, SharedPF, err)
		}
	default:
		err := r.netns.Do(func(ns.NetNS) error {
			ls, err := netops.Links()
			if err != nil {
				return err
			}
			sort.Slice(ls, func(i, j int) bool { return ls[i].Name < ls[j].Name })
			for _, lk := range ls {
				if lk.Name == "lo" {
					continue
				}
				iface := Interface{Name: lk.Name, MAC: lk.MAC.String(), Kind: lk.Kind, IPs: []string{}}
				as, err := netops.Addrs(lk.Name)
				if err != nil {
					return err
				}
				for _, a := range as {
					if !a.IP.IsLinkLocalUnicast() {
						iface.IPs = append(iface.IPs, a.String())
					}
				}
				if iface.Routes, err = netops.Routes(lk.Name); err != nil {
					return err
				}
				for _, rt := range iface.Routes {
					if rt == "default" {
						r.rep.DefaultRoute = lk.Name
					}
				}
				r.rep.Interfaces = append(r.rep.Interfaces, iface)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("pod %s/%s: read its netns %s: %w", r.pod.Namespace, r.pod.Name, r.netns.Path(), err)
		}
		if b, err := os.ReadFile(filepath.Join(l.statusDir(), r.pod.Namespace+"_"+r.pod.Name+".json")); err == nil {
			var v any
			if json.Unmarshal(b, &v) == nil {
				c, _ := json.Marshal(v)
				r.rep.NetworkStatus = c
			}
		} else {
			return fmt.Errorf("pod %s/%s: no network-status was recorded: %w", r.pod.Namespace, r.pod.Name, err)
		}
	}
	var ifname string
	switch r.mode {
	case ModeExclusive:
		ifname = "net1"
		vfs := r.rep.Devices[ExclusiveResource]
		if len(vfs) != 1 {
			return fmt.Errorf("pod %s/%s: kubelet allocated %d VFs of %s, want 1", r.pod.Namespace, r.pod.Name, len(vfs), ExclusiveResource)
		}
		vf := vfs[0]
		dev := n.fix.RDMAByBD[vf]
		r.rep.Device = fmt.Sprintf("VF %s (%s)", vf, n.fix.NetByBDF[vf])
		for i := range r.rep.Interfaces {
			if r.rep.Interfaces[i].Name == ifname {
				r.rep.Interfaces[i].PCI = vf
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
		r.rep.NCCL = ncclFor(r.mode, ifname, dev)
	case ModeShared:
		ifname = "net1"
		for i := range r.rep.Interfaces {
			if r.rep.Interfaces[i].Name == ifname {
				r.rep.Interfaces[i].PCI = SharedPFBDF
				r.rep.Interfaces[i].Kind = "macvlan on " + SharedPF
			}
		}
		r.rep.Device = fmt.Sprintf("HCA %s (%s) slot %s", hca, SharedPFBDF, strings.Join(r.rep.Devices[SharedResource], ","))
		in, err := n.rec.InNetns(hca, r.netns)
		if err != nil {
			return err
		}
		r.rep.RDMA = hca + " shared: visible from the pod netns (shared netns mode)"
		if !in {
			r.rep.RDMA = hca + " NOT visible from the pod netns"
		}
		r.rep.NCCL = ncclFor(r.mode, ifname, hca)
	case ModeHost:
		ifname = SharedPF
		r.rep.Device = fmt.Sprintf("HCA %s (%s) slot %s", hca, SharedPFBDF, strings.Join(r.rep.Devices[SharedResource], ","))
		r.rep.RDMA = hca + " in the host netns, which the pod shares"
		r.rep.NCCL = ncclFor(r.mode, ifname, hca)
	}
	if r.mode != ModeHost {
		if r.rep.DefaultRoute != "eth0" {
			r.rep.Notes = append(r.rep.Notes, fmt.Sprintf("the default route is on %q, not eth0", r.rep.DefaultRoute))
		}
		if !hasIface(r.rep.Interfaces, "eth0") || !hasIface(r.rep.Interfaces, "net1") {
			return fmt.Errorf("pod %s/%s: interfaces %v, want eth0 and net1", r.pod.Namespace, r.pod.Name, ifaceNames(r.rep.Interfaces))
		}
	}
	// what the pod's own env says, against what fits
	env := map[string]string{}
	for _, e := range r.pod.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	for _, e := range r.rep.NCCL {
		have, set := env[e.Name]
		if !set || e.Value == "" {
			continue
		}
		target := strings.TrimPrefix(e.Value, "=")
		if !lint.FilterSelects(have, target) {
			r.rep.Notes = append(r.rep.Notes, fmt.Sprintf("the pod sets %s=%s, which does not select %s on this node; use %s=%s", e.Name, have, target, e.Name, e.Value))
		}
	}
	return nil
}

func hasIface(ifs []Interface, name string) bool {
	for _, i := range ifs {
		if i.Name == name {
			return true
		}
	}
	return false
}

func ifaceNames(ifs []Interface) []string {
	var out []string
	for _, i := range ifs {
		out = append(out, i.Name)
	}
	return out
}

func keepCommands(l layout, st *RunState, runs []*podRun, cleanup string) []string {
	var out []string
	out = append(out, fmt.Sprintf("ip netns list | grep %s-", l.Prefix))
	shown := map[string]bool{}
	for _, r := range runs {
		if shown[r.mode] {
			continue
		}
		shown[r.mode] = true
		if r.netns != nil {
			out = append(out, fmt.Sprintf("ip netns exec %s ip -br addr            # %s pod %s", l.podNS(r.pod.Name), r.mode, r.pod.Name))
			out = append(out, fmt.Sprintf("ip netns exec %s ip route", l.podNS(r.pod.Name)))
			out = append(out, fmt.Sprintf("cat %s", filepath.Join(l.statusDir(), r.pod.Namespace+"_"+r.pod.Name+".json")))
		}
	}
	for _, d := range st.Nodes {
		out = append(out, fmt.Sprintf("ip netns exec %s ip -br link            # simulated node %s (RDMA netns mode %s)", l.hostNS(d.Name), d.Name, d.Mode))
		out = append(out, fmt.Sprintf("cat %s   # recorded VF settings and RDMA moves", filepath.Join(l.nodeDir(d.Name), "netops.json.log")))
	}
	out = append(out, cleanup+workDirFlag(l.WorkDir))
	return out
}

func workDirFlag(dir string) string {
	if dir == DefaultWorkDir {
		return ""
	}
	return " --work-dir " + dir
}
