package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/plugins/pkg/ns"
	corev1 "k8s.io/api/core/v1"

	"github.com/rdmanet/rdmanet/internal/cni/rdma"
	"github.com/rdmanet/rdmanet/internal/cni/sriov"
	"github.com/rdmanet/rdmanet/internal/netops"
)

// The soak's faults. Node-wide ones hit the nodes of a round at a random
// moment of its attach (or detach) phase; pod ones hit some of its pods.
const (
	FaultNone           = "none"
	FaultDaemonKillAdd  = "daemon-kill-add"     // SIGKILL rdmanet-daemon while ADDs run; restarted after 0-300ms
	FaultDaemonKillDel  = "daemon-kill-del"     // the same while DELs run
	FaultDelegateExit   = "delegate-exit"       // a delegate dies (exit 137) right after one ADD step (every failpoint in turn)
	FaultDelegateError  = "delegate-error"      // a delegate fails right after one ADD step and rolls back
	FaultAgentRestart   = "agent-restart"       // the node agent stops abruptly and starts again
	FaultKubeletRestart = "kubelet-restart"     // kubelet's sockets go away and come back; plugins must register again
	FaultNetnsGone      = "netns-gone"          // the pod's netns is destroyed before DEL (physical netdevs return to the host)
	FaultPodDeleted     = "pod-deleted-mid-add" // the pod object is deleted while its ADD runs
	FaultDelTwice       = "del-twice"           // DEL repeated
	FaultAddCancelled   = "add-cancelled"       // the runtime gives up on ADD (kills the shim) and DELs at once
	FaultStateReadOnly  = "state-readonly"      // the CNI state and IPAM dirs are read-only for a while
	FaultStateFull      = "state-full"          // the node's state filesystem is full for a while
	FaultStorm          = "storm"               // StormPods exclusive pods at once for the node's VFs
)

// SoakFaults is the fault plan, in the order a soak goes through it (with a
// fault-free round between two faults).
var SoakFaults = []string{FaultDaemonKillAdd, FaultDelegateExit, FaultNetnsGone, FaultAgentRestart, FaultDelegateError,
	FaultDelTwice, FaultKubeletRestart, FaultAddCancelled, FaultDaemonKillDel, FaultPodDeleted, FaultStateReadOnly,
	FaultStateFull, FaultStorm}

// failpoints are every ADD step of the delegates that have failpoints.
func failpoints() []string {
	var out []string
	for _, s := range sriov.Steps {
		out = append(out, "sriov:"+s)
	}
	for _, s := range rdma.Steps {
		out = append(out, "rdma:"+s)
	}
	return out
}

// SoakOptions configure a soak.
type SoakOptions struct {
	Cycles    int   // pod attach/detach cycles (default 10000); a soak always runs the whole fault plan once
	Parallel  int   // pods per round, attached and detached in parallel (default 16)
	VFs       int   // VFs of the exclusive node (default 64)
	StormPods int   // pods of a storm round (default 200)
	Seed      int64 // random seed (0: from the clock; printed)
	Faults    []string
	WorkDir   string // must not exist or be empty; a size-limited tmpfs is mounted there
	BinDir    string // RequiredBinaries and rdmanet-daemon, -tags rdmanet_testhooks builds
	// NetnsPrefix prefixes the namespaces (default "rdmasoak").
	NetnsPrefix string
	Progress    io.Writer
}

func (o *SoakOptions) defaults() error {
	if o.Cycles == 0 {
		o.Cycles = 10000
	}
	if o.Parallel == 0 {
		o.Parallel = 16
	}
	if o.VFs == 0 {
		o.VFs = 64
	}
	if o.StormPods == 0 {
		o.StormPods = 200
	}
	if o.Seed == 0 {
		o.Seed = time.Now().UnixNano()
	}
	if len(o.Faults) == 0 {
		o.Faults = SoakFaults
	}
	known := map[string]bool{FaultNone: true}
	for _, f := range SoakFaults {
		known[f] = true
	}
	for _, f := range o.Faults {
		if !known[f] {
			return fmt.Errorf("soak fault %q: unknown; want one of %s", f, strings.Join(SoakFaults, ", "))
		}
	}
	switch {
	case o.Cycles < 1:
		return fmt.Errorf("soak cycles %d: must be at least 1", o.Cycles)
	case o.Parallel < 1 || o.Parallel > o.VFs:
		return fmt.Errorf("soak parallel %d: must be 1-%d (the VFs)", o.Parallel, o.VFs)
	case o.VFs > 250:
		return fmt.Errorf("soak VFs %d: at most 250", o.VFs)
	}
	if o.WorkDir == "" {
		return errors.New("soak: WorkDir is required")
	}
	if o.NetnsPrefix == "" {
		o.NetnsPrefix = "rdmasoak"
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return nil
}

// SoakReport is what a soak found. Every counter but the activity counts
// must be 0.
type SoakReport struct {
	Seed          int64   `json:"seed"`
	Rounds        int     `json:"rounds"`
	Cycles        int     `json:"cycles"`
	Faults        int     `json:"faults"`
	Adds          int     `json:"adds"`
	Dels          int     `json:"dels"`
	FailedAdds    int     `json:"failed_adds"`    // pods never attached after every retry (no fault stops a pod for good)
	FailedDels    int     `json:"failed_dels"`    // DELs that never succeeded: a pod stuck terminating
	Unschedulable int     `json:"unschedulable"`  // storm pods kubelet could not admit (expected: more pods than VFs)
	StrandedVFs   int     `json:"stranded_vfs"`   // VFs neither in the host nor in a live pod
	LeakedIPs     int     `json:"leaked_ips"`     // addresses held for deleted pods after GC
	GCReleased    int     `json:"gc_released"`    // addresses GC had to release (held for deleted pods before GC)
	DuplicateIPs  int     `json:"duplicate_ips"`  // an address in two live pods
	DuplicateVFs  int     `json:"duplicate_vfs"`  // a VF allocated to, or seen in, two live pods
	WrongVFs      int     `json:"wrong_vfs"`      // a pod's net1 is not the VF kubelet allocated to it
	HostDiff      int     `json:"host_diff"`      // differences of the hosts from their start, at the end
	GCConvergeS   float64 `json:"gc_converge_s"`  // longest time GC took to release what a round left
	DelConvergeS  float64 `json:"del_converge_s"` // longest wait, after a round, for pending DELs (retried by the daemon) to finish
	WallS         float64 `json:"wall_s"`
	// PerFault counts, by fault, what happened in the rounds it hit.
	PerFault map[string]*FaultStats `json:"per_fault"`
	// Problems describes each violation found (the first 50).
	Problems []string `json:"problems,omitempty"`
}

// FaultStats is one fault's row of the per-fault table.
type FaultStats struct {
	Rounds     int `json:"rounds"`
	Injected   int `json:"injected"`
	Cycles     int `json:"cycles"`
	FailedADDs int `json:"failed_add_calls"` // ADD calls that failed (the runtime retried them)
	Retries    int `json:"del_retries"`      // DEL calls that failed and were retried
	Problems   int `json:"problems"`
}

// Line is the one-line summary `make soak` prints.
func (r *SoakReport) Line() string {
	return fmt.Sprintf("soak: cycles=%d faults=%d adds=%d dels=%d failed_adds=%d failed_dels=%d stranded_vfs=%d leaked_ips=%d duplicate_ips=%d duplicate_vfs=%d wrong_vfs=%d host_diff=%d gc_released=%d gc_converge_s=%.2f del_converge_s=%.1f wall_s=%.0f seed=%d",
		r.Cycles, r.Faults, r.Adds, r.Dels, r.FailedAdds, r.FailedDels, r.StrandedVFs, r.LeakedIPs, r.DuplicateIPs, r.DuplicateVFs, r.WrongVFs, r.HostDiff, r.GCReleased, r.GCConvergeS, r.DelConvergeS, r.WallS, r.Seed)
}

// Clean reports whether no invariant was violated.
func (r *SoakReport) Clean() bool {
	return r.FailedAdds == 0 && r.FailedDels == 0 && r.StrandedVFs == 0 && r.LeakedIPs == 0 && r.DuplicateIPs == 0 &&
		r.DuplicateVFs == 0 && r.WrongVFs == 0 && r.HostDiff == 0 && len(r.Problems) == 0
}

// Table is the per-fault table.
func (r *SoakReport) Table() string {
	names := make([]string, 0, len(r.PerFault))
	for n := range r.PerFault {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	fmt.Fprintf(&b, "%-20s %7s %9s %7s %17s %11s %9s\n", "fault", "rounds", "injected", "cycles", "failed_add_calls", "del_retries", "problems")
	for _, n := range names {
		f := r.PerFault[n]
		fmt.Fprintf(&b, "%-20s %7d %9d %7d %17d %11d %9d\n", n, f.Rounds, f.Injected, f.Cycles, f.FailedADDs, f.Retries, f.Problems)
	}
	return b.String()
}

// soak is one running soak.
type soak struct {
	o       SoakOptions
	l       layout
	m       *Manifests
	pr      *progress
	nodes   map[string]*node
	daemons map[string]*nodeDaemon
	direct  map[string]*libcni.NetworkConfigList // per-call meta config (no daemon)
	daemon  map[string]*libcni.NetworkConfigList // through the daemon
	start   HostState                            // the hosts before any pod
	base    HostState                            // the hosts after the last round's check
	fs      *stateFS

	kernel sync.Mutex // netdevs returned to a host on netns destruction (destroyNetns)

	mu     sync.Mutex
	rng    *rand.Rand
	rep    *SoakReport
	seq    int
	fpNext int
	estAdd time.Duration // recent attach phase wall time (when to strike)
	estDel time.Duration
}

func (s *soak) randDur(max time.Duration) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if max <= 0 {
		return 0
	}
	return time.Duration(s.rng.Int63n(int64(max)))
}

func (s *soak) randInt(n int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rng.Intn(n)
}

func (s *soak) count(f func(r *SoakReport)) {
	s.mu.Lock()
	f(s.rep)
	s.mu.Unlock()
}

// problem records one invariant violation (or failure) of the round's fault.
func (s *soak) problem(fault, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rep.PerFault[fault].Problems++
	if len(s.rep.Problems) < 50 {
		s.rep.Problems = append(s.rep.Problems, fmt.Sprintf("round %d (%s): %s", s.rep.Rounds, fault, msg))
	}
	s.pr.printf("PROBLEM (%s): %s", fault, msg)
}

// Soak runs o.Cycles pod attach/detach cycles over the exclusive, shared
// and host modes on two simulated nodes, each with a real rdmanet-daemon,
// injecting faults round by round, and checks the invariants after every
// attach phase and every detach phase; see docs/soak.md. The report is
// returned with any error (the soak could not run); invariant violations
// are in the report, not the error.
func Soak(ctx context.Context, o SoakOptions) (*SoakReport, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	binDir, err := preflight(o.BinDir)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(binDir, "rdmanet-daemon")); err != nil {
		return nil, &PrereqError{Err: fmt.Errorf("rdmanet-daemon missing from %s: %w", binDir, err)}
	}
	workDir, err := filepath.Abs(o.WorkDir)
	if err != nil {
		return nil, err
	}
	m, err := LoadManifests()
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	s := &soak{o: o, m: m, pr: &progress{w: o.Progress, start: t0},
		l:     layout{WorkDir: workDir, BinDir: binDir, Prefix: o.NetnsPrefix},
		nodes: map[string]*node{}, daemons: map[string]*nodeDaemon{},
		direct: map[string]*libcni.NetworkConfigList{}, daemon: map[string]*libcni.NetworkConfigList{},
		rng:    rand.New(rand.NewSource(o.Seed)),
		rep:    &SoakReport{Seed: o.Seed, PerFault: map[string]*FaultStats{}},
		estAdd: 300 * time.Millisecond, estDel: 200 * time.Millisecond}
	for _, f := range append([]string{FaultNone}, o.Faults...) {
		s.rep.PerFault[f] = &FaultStats{}
	}
	s.pr.printf("soak: %d cycles, %d pods per round, %d VFs, seed %d, faults %s", o.Cycles, o.Parallel, o.VFs, o.Seed, strings.Join(o.Faults, ","))
	if s.fs, err = mountStateFS(workDir); err != nil {
		return nil, err
	}
	defs := []nodeDef{
		{Name: NodeExclusive, Mode: netops.RDMANetnsExclusive, PodCIDR: "10.244.1.0/24", VFs: o.VFs},
		{Name: NodeShared, Mode: netops.RDMANetnsShared, PodCIDR: "10.244.2.0/24", VFs: 8},
	}
	defer func() {
		for _, d := range s.daemons {
			d.stop()
		}
		for _, n := range s.nodes {
			n.stop()
		}
		for _, d := range defs {
			_ = teardownNode(d, s.l)
		}
		if e := s.fs.unmount(); e != nil && err == nil {
			err = e
		}
		s.rep.WallS = time.Since(t0).Seconds()
	}()
	if err := s.setup(ctx, defs); err != nil {
		return s.rep, err
	}
	plan := []string{}
	for _, f := range o.Faults {
		plan = append(plan, FaultNone, f)
	}
	// at least one pass through the plan, so a short soak still strikes with every fault
	for round := 0; s.rep.Cycles < o.Cycles || round < len(plan); round++ {
		if ctx.Err() != nil {
			return s.rep, fmt.Errorf("soak interrupted after %d cycles: %w", s.rep.Cycles, ctx.Err())
		}
		fault := plan[round%len(plan)]
		if err := s.round(ctx, fault); err != nil {
			return s.rep, err
		}
	}
	// the end: every host as at the start
	end, err := s.snapshot()
	if err != nil {
		return s.rep, err
	}
	diff := s.start.Diff(end)
	s.rep.HostDiff = len(diff)
	for _, d := range diff {
		s.problem(FaultNone, "host differs from the start: %s", d)
	}
	return s.rep, nil
}

func (s *soak) setup(ctx context.Context, defs []nodeDef) error {
	if err := s.l.prepare(s.m, append(RequiredBinaries, "rdmanet-daemon")); err != nil {
		return err
	}
	s.start = HostState{Nodes: map[string]NodeState{}}
	for _, d := range defs {
		n, err := startNode(ctx, d, s.l, s.m, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			return err
		}
		s.nodes[d.Name] = n
		want := map[string]int{ExclusiveResource: d.VFs}
		if d.Mode == netops.RDMANetnsShared {
			want = map[string]int{SharedResource: 63}
		}
		if err := n.waitPools(ctx, want); err != nil {
			return err
		}
		if err := n.bringUp(ctx); err != nil {
			return err
		}
		dm, err := newNodeDaemon(n)
		if err != nil {
			return err
		}
		if err := dm.start(); err != nil {
			return err
		}
		s.daemons[d.Name] = dm
		if s.daemon[d.Name], err = d.metaConfList(s.l, dm.socket); err != nil {
			return err
		}
		s.direct[d.Name] = n.meta
		if s.start.Nodes[d.Name], err = n.snapshot(); err != nil {
			return err
		}
		s.pr.printf("node %s up: RDMA netns mode %s, %d VFs, rdmanet-daemon pid serving %s", d.Name, d.Mode, d.VFs, dm.socket)
	}
	s.base = s.start
	return nil
}

func (s *soak) snapshot() (HostState, error) {
	h := HostState{Nodes: map[string]NodeState{}}
	for name, n := range s.nodes {
		st, err := n.snapshot()
		if err != nil {
			return h, err
		}
		h.Nodes[name] = st
	}
	return h, nil
}

// soakPod is one pod going through a round.
type soakPod struct {
	mode    string
	n       *node
	pod     *corev1.Pod
	alloc   *podAlloc
	faults  map[string]bool // pod faults: netns-gone, pod-deleted-mid-add, del-twice, add-cancelled, delegate-*
	fp      string          // failpoint of a delegate fault
	cid     string
	nsName  string
	netns   ns.NetNS
	nsGone  bool
	deleted bool // the pod object was deleted
	ok      bool // attached (or, hostNetwork, admitted)
	unsched bool
}

func (s *soak) newPod(mode string, n *node) (*soakPod, error) {
	s.mu.Lock()
	s.seq++
	i := s.seq
	s.mu.Unlock()
	pod, err := s.m.Pod(mode, i, n.def.Name, randomID(8))
	if err != nil {
		return nil, err
	}
	return &soakPod{mode: mode, n: n, pod: pod, faults: map[string]bool{}}, nil
}

// round attaches a round's pods in parallel, checks them, detaches them in
// parallel and checks the hosts, with fault striking.
func (s *soak) round(ctx context.Context, fault string) error {
	s.count(func(r *SoakReport) { r.Rounds++; r.PerFault[fault].Rounds++ })
	var pods []*soakPod
	if fault == FaultStorm {
		for i := 0; i < s.o.StormPods; i++ {
			p, err := s.newPod(ModeExclusive, s.nodes[NodeExclusive])
			if err != nil {
				return err
			}
			pods = append(pods, p)
		}
		s.count(func(r *SoakReport) { r.Faults++; r.PerFault[fault].Injected++ })
	} else {
		for i := 0; i < s.o.Parallel; i++ {
			mode := ModeExclusive
			switch i % 8 {
			case 4, 5:
				mode = ModeShared
			case 6:
				mode = ModeHost
			}
			p, err := s.newPod(mode, s.nodes[nodeFor(mode)])
			if err != nil {
				return err
			}
			pods = append(pods, p)
		}
		s.assignPodFaults(fault, pods)
	}
	t0 := time.Now()
	stop := s.strike(fault, "add")
	var wg sync.WaitGroup
	for _, p := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.attach(ctx, fault, p)
		}()
	}
	wg.Wait()
	stop()
	s.mu.Lock()
	s.estAdd = (s.estAdd*3 + time.Since(t0)) / 4
	s.mu.Unlock()
	s.checkAttached(fault, pods)

	t1 := time.Now()
	stop = s.strike(fault, "del")
	for _, p := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.detach(ctx, fault, p)
		}()
	}
	wg.Wait()
	stop()
	s.mu.Lock()
	s.estDel = (s.estDel*3 + time.Since(t1)) / 4
	s.mu.Unlock()
	cycles := 0
	for _, p := range pods {
		if p.ok {
			cycles++
		}
	}
	s.count(func(r *SoakReport) { r.Cycles += cycles; r.PerFault[fault].Cycles += cycles })
	if err := s.checkQuiescent(ctx, fault); err != nil {
		return err
	}
	if s.rep.Rounds%25 == 0 || s.rep.Cycles >= s.o.Cycles {
		s.pr.printf("round %d: %d/%d cycles, %d faults, %d problems", s.rep.Rounds, s.rep.Cycles, s.o.Cycles, s.rep.Faults, len(s.rep.Problems))
	}
	return nil
}

// assignPodFaults gives a pod fault to about a quarter of the round's pods
// that run CNI (delegate faults: exclusive pods only), at least one.
func (s *soak) assignPodFaults(fault string, pods []*soakPod) {
	switch fault {
	case FaultNetnsGone, FaultPodDeleted, FaultDelTwice, FaultAddCancelled, FaultDelegateExit, FaultDelegateError:
	default:
		return
	}
	var cand []*soakPod
	for _, p := range pods {
		if p.mode == ModeHost || ((fault == FaultDelegateExit || fault == FaultDelegateError) && p.mode != ModeExclusive) {
			continue
		}
		cand = append(cand, p)
	}
	n := max(1, len(cand)/4)
	fps := failpoints()
	for i := 0; i < n && i < len(cand); i++ {
		p := cand[s.randInt(len(cand))]
		if p.faults[fault] {
			continue
		}
		p.faults[fault] = true
		if fault == FaultDelegateExit || fault == FaultDelegateError {
			s.mu.Lock()
			p.fp = fps[s.fpNext%len(fps)]
			s.fpNext++
			s.mu.Unlock()
			if fault == FaultDelegateExit {
				p.fp += ":exit"
			}
		}
		s.count(func(r *SoakReport) { r.Faults++; r.PerFault[fault].Injected++ })
	}
}
