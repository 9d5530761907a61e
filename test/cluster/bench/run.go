package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/rdmanet/rdmanet/test/cluster"
)

// Config of one benchmark run.
type Config struct {
	StateDir  string        // the running cluster's state dir (make cluster-up's)
	Repo      string        // the rdmanet checkout (examples/, .tools/)
	Namespace string        // created for the run, deleted after it
	Pods      int           // pods per batch, created at once
	Batches   int           // batches per row (samples pooled)
	Rows      []Row         // which rows, in RowOrder's order
	Timeout   time.Duration // how long one batch may take to be Running
	Settle    time.Duration // pause before each batch (the previous one's teardown settles)
	// Multus and Whereabouts built by hack/build-multus.sh and
	// hack/build-whereabouts.sh; empty: the cluster's tools dir.
	MultusBin, WhereaboutsBin, WhereaboutsCRDs string
	Out                                        io.Writer
}

// RowOrder is the order of the rows within a phase and in the report. The
// exclusive row runs with the agent in exclusive RDMA netns mode (phase 1),
// the shared rows after switching it to shared (phase 2). The plain row
// runs in both phases (its samples pooled), batch for batch next to each
// stack's, so each is compared with plain pods started beside it.
var RowOrder = []Row{RowPlain, RowExclusive, RowDRA, RowShared, RowMultus}

// ParseRows parses a comma-separated row list (exclusive, dra, plain,
// shared, multus; "all" or "" for every row).
func ParseRows(s string) ([]Row, error) {
	if s == "" || s == "all" {
		return RowOrder, nil
	}
	names := map[string]Row{"exclusive": RowExclusive, "dra": RowDRA, "plain": RowPlain, "shared": RowShared, "multus": RowMultus}
	want := map[Row]bool{}
	for _, f := range strings.Split(s, ",") {
		r, ok := names[strings.TrimSpace(f)]
		if !ok {
			return nil, fmt.Errorf("rows %q: unknown row %q (known: exclusive, dra, plain, shared, multus, all)", s, f)
		}
		want[r] = true
	}
	var rows []Row
	for _, r := range RowOrder {
		if want[r] {
			rows = append(rows, r)
		}
	}
	return rows, nil
}

type env struct {
	cfg    Config
	l      cluster.Layout
	st     cluster.State
	k      cluster.Kubectl
	cs     kubernetes.Interface
	out    io.Writer
	undo   []func(context.Context) error // LIFO; run by cleanup
	undoMu sync.Mutex

	// While Multus is installed: each node's host path of Multus' cniDir,
	// and its config file's name in the conf dirs.
	multusCaches map[string]string
	multusConf   string
}

func (e *env) logf(format string, a ...any) {
	fmt.Fprintf(e.out, "# cluster-bench: "+format+"\n", a...)
}

func (e *env) onCleanup(f func(context.Context) error) {
	e.undoMu.Lock()
	e.undo = append(e.undo, f)
	e.undoMu.Unlock()
}

// cleanup runs every registered undo step, newest first, each even when an
// earlier one failed, on a context of its own (the run's may be cancelled).
func (e *env) cleanup() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var errs []error
	for i := len(e.undo) - 1; i >= 0; i-- {
		if err := e.undo[i](ctx); err != nil {
			errs = append(errs, err)
		}
	}
	e.undo = nil
	return errors.Join(errs...)
}

// Run measures the configured rows on the running cluster and returns one
// Result per row that ran. Everything it creates or changes is undone
// before it returns, also on error or cancellation.
func Run(ctx context.Context, cfg Config) (rep Report, err error) {
	rep.Pods = cfg.Pods
	rep.Results, err = run(ctx, cfg, &rep.Nodes)
	return rep, err
}

// run is Run; it sets *nodes to the cluster's node count once known.
func run(ctx context.Context, cfg Config, nodes *int) (results []Result, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("bench-cluster needs root: it reads the cluster's PKI and changes the node's CNI directories; fix: sudo make bench-cluster")
	}
	if cfg.Out == nil {
		cfg.Out = os.Stdout
	}
	e := &env{cfg: cfg, out: cfg.Out}
	if e.l, err = cluster.NewLayout(cfg.StateDir, cfg.Repo); err != nil {
		return nil, err
	}
	if _, err := cluster.NewControl(e.l).Status(ctx); err != nil {
		return nil, fmt.Errorf("no running cluster in %s (%w); fix: make cluster-up (make bench-cluster does it when none runs)", e.l.Dir, err)
	}
	if e.st, err = cluster.ReadState(e.l.Dir); err != nil {
		return nil, err
	}
	if len(e.st.Nodes) == 0 {
		return nil, fmt.Errorf("cluster state in %s lists no nodes (nodes.json)", e.l.Dir)
	}
	*nodes = len(e.st.Nodes)
	e.k = e.l.Kubectl(e.st)
	rc, err := clientcmd.BuildConfigFromFlags("", e.st.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", e.st.Kubeconfig, err)
	}
	rc.QPS, rc.Burst = 200, 400 // a batch's creates at once must not queue in the client
	if e.cs, err = kubernetes.NewForConfig(rc); err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	defer func() {
		if cerr := e.cleanup(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("cleanup: %w", cerr))
		}
	}()

	// rdmanet-ipam's blocks for the benchmark's ranges stay: they are the
	// IPAM's node-affine state (empty once the pods are gone), which the
	// node daemon caches; deleting them under it fails the next ADD in
	// that block once ("update block ...: not found").
	e.logf("machine: %d CPUs, load average %s at the start", runtime.NumCPU(), loadavg())
	defer func() { e.logf("load average %s at the end", loadavg()) }()
	if err := e.createNamespace(ctx); err != nil {
		return nil, err
	}
	want := map[Row]bool{}
	for _, r := range cfg.Rows {
		want[r] = true
	}
	res := map[Row]*Result{}
	// Rows measured before an error are returned with it.
	collect := func() []Result {
		var out []Result
		for _, r := range RowOrder {
			if res[r] != nil {
				out = append(out, *res[r])
			}
		}
		return out
	}
	defer func() {
		if err != nil {
			results = collect()
		}
	}()
	record := func(r Row, b Batch) {
		if res[r] == nil {
			res[r] = &Result{Row: r}
		}
		res[r].Batches = append(res[r].Batches, b)
	}
	e.logf("%d nodes: %s; %d pods per batch, spread evenly over them", len(e.st.Nodes), nodeNames(e.st.Nodes), cfg.Pods)
	// A phase warms each of its stages up (one uncounted pod per node),
	// then runs batch b of every stage before batch b+1 of any (run b), so
	// drift in the machine's load spreads over all rows alike.
	runPhase := func(phase int, stages []stage) error {
		var live []stage
		for _, st := range stages {
			if want[st.row] {
				live = append(live, st)
			}
		}
		for b := -1; b < cfg.Batches; b++ {
			for _, st := range live {
				if err := e.runStage(ctx, st, phase, b, cfg.Pods, record); err != nil {
					return err
				}
			}
		}
		return nil
	}

	// Phase 1: every node's kernel in the exclusive RDMA netns mode.
	if want[RowExclusive] || want[RowDRA] || (want[RowPlain] && !want[RowShared] && !want[RowMultus]) {
		if want[RowExclusive] || want[RowDRA] {
			if err := e.setNodesMode(ctx, ModeExclusive); err != nil {
				return nil, err
			}
			if err := e.applyExclusiveNAD(ctx); err != nil {
				return nil, err
			}
		}
		if want[RowDRA] {
			if err := e.k.Apply(ctx, ClaimTemplateManifest(e.cfg.Namespace)); err != nil {
				return nil, err
			}
		}
		if err := runPhase(PhaseExclusive, []stage{{row: RowPlain}, {row: RowExclusive}, {row: RowDRA}}); err != nil {
			return nil, err
		}
	}
	// Phase 2: every node in the shared mode; per batch plain pods,
	// rdmanet, then the same pods with Multus + Whereabouts as every
	// node's CNI (swapped in for the batch and out again, so the other rows
	// always run on rdmanet).
	if want[RowShared] || want[RowMultus] {
		if err := e.setNodesMode(ctx, ModeShared); err != nil {
			return nil, err
		}
		if want[RowMultus] {
			if err := e.whereaboutsAPI(ctx); err != nil {
				return nil, err
			}
		}
		shared := func(ctx context.Context) (func(context.Context) error, error) {
			return nil, e.applySharedNAD(ctx, "rdmanet-ipam")
		}
		multus := func(ctx context.Context) (func(context.Context) error, error) {
			restore, err := e.useMultus(ctx)
			if err != nil {
				return nil, err
			}
			if err := e.applySharedNAD(ctx, "whereabouts"); err != nil {
				return nil, errors.Join(err, restore(ctx))
			}
			return restore, nil
		}
		if err := runPhase(PhaseShared, []stage{{row: RowPlain}, {row: RowShared, enter: shared}, {row: RowMultus, enter: multus}}); err != nil {
			return nil, err
		}
	}
	return collect(), nil
}

// stage is a row of a phase, with what the node needs for it: enter sets
// it up before each of the row's batches and returns what undoes it after
// the batch (nil: nothing).
type stage struct {
	row   Row
	enter func(context.Context) (func(context.Context) error, error)
}

// runStage runs batch b of a stage (b < 0: its warm-up pod) after letting
// the node settle from the previous batch, and records the samples.
func (e *env) runStage(ctx context.Context, st stage, phase, b, pods int, record func(Row, Batch)) (err error) {
	if st.enter != nil {
		leave, err := st.enter(ctx)
		if err != nil {
			return err
		}
		if leave != nil {
			defer func() {
				if lerr := leave(context.Background()); lerr != nil {
					err = errors.Join(err, lerr)
				}
			}()
		}
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(e.cfg.Settle):
	}
	if b < 0 {
		return e.warmUp(ctx, st.row)
	}
	s, w, err := e.batch(ctx, st.row, fmt.Sprintf("p%db%d", phase, b), pods)
	if err != nil {
		return err
	}
	record(st.row, Batch{Phase: phase, Samples: s, Wall: w})
	return nil
}

// createNamespace creates the run's namespace (a leftover of an earlier,
// interrupted run is reused only when it carries this benchmark's label)
// and deletes it at cleanup.
func (e *env) createNamespace(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.cfg.Namespace, Labels: map[string]string{LabelCreatedBy: CreatedBy}}}
	_, err := e.cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		got, gerr := e.cs.CoreV1().Namespaces().Get(ctx, e.cfg.Namespace, metav1.GetOptions{})
		if gerr != nil {
			return fmt.Errorf("namespace %s: %w", e.cfg.Namespace, gerr)
		}
		if got.Labels[LabelCreatedBy] != CreatedBy {
			return fmt.Errorf("namespace %s exists and is not this benchmark's (no %s=%s label); fix: pick another with --namespace", e.cfg.Namespace, LabelCreatedBy, CreatedBy)
		}
		if got.DeletionTimestamp != nil {
			return fmt.Errorf("namespace %s is being deleted (an earlier run's); retry when it is gone", e.cfg.Namespace)
		}
		e.logf("reusing namespace %s left by an earlier run", e.cfg.Namespace)
	} else if err != nil {
		return fmt.Errorf("create namespace %s: %w", e.cfg.Namespace, err)
	}
	e.onCleanup(func(ctx context.Context) error {
		e.logf("deleting namespace %s", e.cfg.Namespace)
		_, err := e.k.Output(ctx, "delete", "namespace", e.cfg.Namespace, "--ignore-not-found", "--wait", "--timeout=300s")
		return err
	})
	return nil
}

func (e *env) applyExclusiveNAD(ctx context.Context) error {
	var seed []byte
	var err error
	for _, p := range []string{"examples/cluster/exclusive/nad.yaml", "examples/seeds/exclusive/nad.yaml"} {
		if seed, err = os.ReadFile(filepath.Join(e.l.Repo, p)); err == nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("seed NAD: %w", err)
	}
	m, err := ExclusiveNADManifest(string(seed), e.cfg.Namespace)
	if err != nil {
		return err
	}
	return e.k.Apply(ctx, m)
}

func (e *env) applySharedNAD(ctx context.Context, ipam string) error {
	m, err := SharedNetwork{Master: cluster.SharedPF, IPAM: ipam}.NADManifest(e.cfg.Namespace)
	if err != nil {
		return err
	}
	return e.k.Apply(ctx, m)
}

// warmUp starts and deletes one pod of the row on every node, uncounted:
// first-use costs (page cache of a just-installed plugin, Whereabouts
// creating its pool, informer caches) are not what the rows compare.
func (e *env) warmUp(ctx context.Context, r Row) error {
	s, _, err := e.batch(ctx, r, "warm", len(e.st.Nodes))
	if err != nil {
		return fmt.Errorf("warm-up pods: %w", err)
	}
	e.logf("warm-up stack=%s mode=%s: %d pods (one per node), p50 %s", r.Stack, r.Mode, len(s), secs(Percentile(s, 50)))
	return nil
}

// batch creates n pods of row r at once and waits for each to be Running
// with its net1; returns each pod's creation -> ready time and the batch's
// wall time (first create -> last ready). The pods are deleted (and gone)
// before it returns.
//
// Ready: the moment a watch on the pods saw the pod Running, provided an
// exec in the pod then finds net1 (`ip link show net1`; in shared mode a
// child of the shared HCA's PF). net1 is made by
// the CNI ADD of the pod's sandbox, which completes before any container
// starts, so a net1 found after Running was there at Running; the execs run
// once all the batch's pods are Running, so they do not slow the batch.
func (e *env) batch(ctx context.Context, r Row, id string, n int) (samples []time.Duration, wall time.Duration, err error) {
	batchID := r.Key() + "-" + id
	sel := LabelBatch + "=" + id + "," + LabelRow + "=" + r.Key()
	pods := e.cs.CoreV1().Pods(e.cfg.Namespace)
	if err := e.waitFree(ctx, r, n); err != nil {
		return nil, 0, err
	}
	defer func() {
		if derr := e.deleteBatch(context.Background(), sel); derr != nil {
			err = errors.Join(err, derr)
		}
	}()

	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, 0, fmt.Errorf("list pods %s: %w", sel, err)
	}
	if len(list.Items) > 0 {
		return nil, 0, fmt.Errorf("batch %s: %d pods already exist", batchID, len(list.Items))
	}
	w, err := pods.Watch(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: list.ResourceVersion})
	if err != nil {
		return nil, 0, fmt.Errorf("watch pods %s: %w", sel, err)
	}
	defer w.Stop()

	objs := make([]*corev1.Pod, n)
	for i := range objs {
		objs[i] = Pod(r, PodOptions{Namespace: e.cfg.Namespace, Image: cluster.TestboxImage, Batch: id, Spread: len(e.st.Nodes) > 1}, i)
	}
	created := make([]time.Time, n)
	errs := make([]error, n)
	var retried atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range objs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			created[i] = time.Now()
			errs[i] = createRetrying(ctx, pods, objs[i], &retried)
		}(i)
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, 0, fmt.Errorf("create batch %s: %w", batchID, err)
	}
	if n := retried.Load(); n > 0 {
		e.logf("batch %s: %d pod creations retried (an API or webhook timeout under the burst's load; each pod's time counts from its first attempt)", batchID, n)
	}
	first := created[0]
	for _, c := range created {
		if c.Before(first) {
			first = c
		}
	}

	running := map[string]time.Time{}
	deadline := time.NewTimer(e.cfg.Timeout)
	defer deadline.Stop()
	for len(running) < n {
		select {
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-deadline.C:
			return nil, 0, fmt.Errorf("batch %s: %d/%d pods Running after %s:\n%s", batchID, len(running), n, e.cfg.Timeout, e.describe(context.Background(), sel))
		case ev, ok := <-w.ResultChan():
			now := time.Now()
			if !ok {
				// The watch ended (server timeout): pick up from a list.
				if w, err = e.rewatch(ctx, sel, running, now); err != nil {
					return nil, 0, err
				}
				continue
			}
			if ev.Type == watch.Error {
				return nil, 0, fmt.Errorf("batch %s: watch: %v", batchID, apierrors.FromObject(ev.Object))
			}
			if p, ok := ev.Object.(*corev1.Pod); ok && p.Status.Phase == corev1.PodRunning {
				if _, seen := running[p.Name]; !seen {
					running[p.Name] = now
				}
			}
		}
	}
	last := first
	for i, p := range objs {
		t := running[p.Name]
		samples = append(samples, t.Sub(created[i]))
		if t.After(last) {
			last = t
		}
	}
	if err := e.checkNet1(ctx, r, sel); err != nil {
		return nil, 0, fmt.Errorf("batch %s: %w", batchID, err)
	}
	if r == RowMultus {
		for node, dir := range e.multusCaches {
			if !multusServed(dir) {
				return nil, 0, fmt.Errorf("batch %s: node %s: Multus' cache dir %s is empty with the pods Running: the runtime did not call Multus (is %s still first in the conf dir?)", batchID, node, dir, e.multusConf)
			}
		}
	}
	if fails := e.sandboxFailures(ctx, batchID, objs); fails != "" {
		e.logf("batch %s: %s", batchID, fails)
	}
	return samples, last.Sub(first), nil
}

// rewatch lists the batch (recording pods already Running at now) and
// watches from the list's version.
func (e *env) rewatch(ctx context.Context, sel string, running map[string]time.Time, now time.Time) (watch.Interface, error) {
	pods := e.cs.CoreV1().Pods(e.cfg.Namespace)
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list pods %s: %w", sel, err)
	}
	for _, p := range list.Items {
		if _, seen := running[p.Name]; !seen && p.Status.Phase == corev1.PodRunning {
			running[p.Name] = now
		}
	}
	w, err := pods.Watch(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: list.ResourceVersion})
	if err != nil {
		return nil, fmt.Errorf("watch pods %s: %w", sel, err)
	}
	return w, nil
}

// deleteBatch deletes the batch's pods at once and waits until they are
// gone (the kubelet has run their CNI DEL and freed their devices).
func (e *env) deleteBatch(ctx context.Context, sel string) error {
	pods := e.cs.CoreV1().Pods(e.cfg.Namespace)
	// The pods' own 1 s grace period, not 0: a zero grace period removes
	// the objects at once, before the kubelet has torn the sandboxes down.
	if err := pods.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: sel}); err != nil {
		return fmt.Errorf("delete pods %s: %w", sel, err)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err == nil && len(list.Items) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pods %s in %s not gone 5 minutes after delete", sel, e.cfg.Namespace)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// objects lists the names of a resource's objects (in ns; "" for cluster
// scope or all) with how many pod allocations each holds (spec.allocations
// of rdmanet's IPAMBlocks, less reservations such as the gateway, and of
// Whereabouts' IPPools; 0 for other kinds).
func (e *env) objects(ctx context.Context, resource, ns string) (map[string]int, error) {
	args := []string{"get", resource, "-o", "json"}
	if ns != "" {
		args = append(args, "-n", ns)
	}
	out, err := e.k.Output(ctx, args...)
	if err != nil {
		return nil, err
	}
	var list struct {
		Items []struct {
			Metadata struct{ Name string } `json:"metadata"`
			Spec     struct {
				Allocations map[string]struct {
					Reserved string `json:"reserved"` // rdmanet-ipam: gateway etc., no pod
				} `json:"allocations"`
			} `json:"spec"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return nil, fmt.Errorf("%s list: %w", resource, err)
	}
	m := map[string]int{}
	for _, it := range list.Items {
		n := 0
		for _, a := range it.Spec.Allocations {
			if a.Reserved == "" {
				n++
			}
		}
		m[it.Metadata.Name] = n
	}
	return m, nil
}

// sweeper returns a step that deletes the objects of resource that
// appeared since it was made and hold no allocation (Whereabouts' pools
// that the benchmark's network made, where its CRDs were installed before;
// one still holding an address belongs to someone else's pod and is left,
// with a line saying so).
func (e *env) sweeper(ctx context.Context, resource, ns string) (func(context.Context) error, error) {
	before, err := e.objects(ctx, resource, ns)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		after, err := e.objects(ctx, resource, ns)
		if err != nil {
			if strings.Contains(err.Error(), "the server doesn't have a resource type") {
				return nil // its CRD is gone
			}
			return err
		}
		var errs []error
		for name, allocs := range after {
			if _, old := before[name]; old {
				continue
			}
			if allocs > 0 {
				e.logf("leaving %s %s: it holds %d allocations (not this run's)", resource, name, allocs)
				continue
			}
			args := []string{"delete", resource, name, "--ignore-not-found"}
			if ns != "" {
				args = append(args, "-n", ns)
			}
			if _, err := e.k.Output(ctx, args...); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}, nil
}

// nodeNames is "a, b, c": the cluster's nodes.
func nodeNames(nodes []cluster.Node) string {
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Name
	}
	return strings.Join(names, ", ")
}

// loadavg is the machine's 1/5/15-minute load average (context for the
// figures: the node shares the machine's CPUs with everything else).
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
