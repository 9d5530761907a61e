package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/rdmanet/rdmanet/internal/dra"
	"github.com/rdmanet/rdmanet/test/apiserver"
	"github.com/rdmanet/rdmanet/test/dragpu"
)

const namespace = "training"

// draResult is the outcome of the DRA run.
type draResult struct {
	scheduled     int
	unschedulable int // PodScheduled=False, Unschedulable
	schedErrors   int // PodScheduled=False, SchedulerError (at the end)
	undecided     int // no verdict when the run ended
	pendingFit    int // not scheduled although a node had enough aligned free pairs
	pairs         share
	wall          time.Duration // first pod created -> last verdict
	lastBound     time.Duration // first pod created -> last pod seen bound
	medianBound   time.Duration // first pod created -> half the scheduled pods seen bound
	timeouts      int           // allocator "timed out" messages in kube-scheduler's log
	timedOut      bool          // -timeout ended the wait
}

// yamlDocs splits a multi-document YAML file.
func yamlDocs(path string) ([][]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
		if strings.TrimSpace(stripComments(d)) != "" {
			out = append(out, []byte(d))
		}
	}
	return out, nil
}

func stripComments(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// decode reads the objects of kind from a repository file, strictly.
func decode[T any](root, rel, kind string) ([]T, error) {
	docs, err := yamlDocs(filepath.Join(root, rel))
	if err != nil {
		return nil, err
	}
	var out []T
	for _, d := range docs {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(d, &meta); err != nil {
			return nil, fmt.Errorf("%s: %w", rel, err)
		}
		if meta.Kind != kind {
			continue
		}
		var v T
		if err := yaml.UnmarshalStrict(d, &v); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", rel, kind, err)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no %s", rel, kind)
	}
	return out, nil
}

// templates are the claim templates the pods use: examples/dra's 1+1
// template unchanged, and for k-GPU pods the 8-pair template of
// examples/dra cut to its first k pairs (requests gpu-i, nic-i and one
// pcieRoot constraint per pair).
func templates(root string, k int) (one, multi *resourceapi.ResourceClaimTemplate, err error) {
	t1, err := decode[resourceapi.ResourceClaimTemplate](root, "examples/dra/gpu-nic-aligned.yaml", "ResourceClaimTemplate")
	if err != nil {
		return nil, nil, err
	}
	t8, err := decode[resourceapi.ResourceClaimTemplate](root, "examples/dra/gpu-nic-aligned-x8.yaml", "ResourceClaimTemplate")
	if err != nil {
		return nil, nil, err
	}
	multi = &t8[0]
	keep := map[string]bool{}
	for i := range k {
		keep[fmt.Sprintf("gpu-%d", i)], keep[fmt.Sprintf("nic-%d", i)] = true, true
	}
	d := &multi.Spec.Spec.Devices
	d.Requests = slices.DeleteFunc(d.Requests, func(r resourceapi.DeviceRequest) bool { return !keep[r.Name] })
	d.Constraints = slices.DeleteFunc(d.Constraints, func(c resourceapi.DeviceConstraint) bool {
		return !keep[c.Requests[0]] || !keep[c.Requests[1]]
	})
	if len(d.Requests) != 2*k || len(d.Constraints) != k {
		return nil, nil, fmt.Errorf("examples/dra/gpu-nic-aligned-x8.yaml: cut to %d pairs: %d requests, %d constraints", k, len(d.Requests), len(d.Constraints))
	}
	multi.Name = fmt.Sprintf("gpu-nic-aligned-x%d", k)
	return &t1[0], multi, nil
}

func podFor(p podSpec, template string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: namespace}, Spec: corev1.PodSpec{
		ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu-nic", ResourceClaimTemplateName: &template}},
		Containers: []corev1.Container{{Name: "trainer", Image: "registry.k8s.io/pause:3.10",
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{
					corev1.ResourceCPU:    *resource.NewQuantity(int64(p.gpus), resource.DecimalSI),
					corev1.ResourceMemory: *resource.NewQuantity(podMem(p.gpus), resource.BinarySI),
				},
				Claims: []corev1.ResourceClaim{{Name: "gpu-nic"}},
			}}}}}
}

func createReadyNode(ctx context.Context, c kubernetes.Interface, name string) error {
	n, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	res := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(nodeCPU, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(int64(nodeMemGiB)<<30, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(110, resource.DecimalSI),
	}
	n.Status = corev1.NodeStatus{Capacity: res, Allocatable: res, Conditions: []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
	}}}
	if n, err = c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		return err
	}
	// TaintNodesByCondition admission taints a new node not-ready; the node
	// lifecycle controller (not run) would lift it once the node is Ready.
	n.Spec.Taints = nil
	_, err = c.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
	return err
}

// poll calls cond every 200ms until it is done, ctx ends or limit passes.
func poll(ctx context.Context, limit time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(limit)
	var last error
	for {
		done, err := cond()
		if done {
			return nil
		}
		last = err
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s: not done after %s: %v", what, limit, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// runDRA brings up kube-apiserver, kube-controller-manager (resourceclaim
// controller) and kube-scheduler, publishes every node's GPUs (test/dragpu)
// and VFs (rdmanet's dra.Publisher), creates the pods in order and waits
// until every pod is bound with an allocated claim or marked unschedulable
// and nothing changed for settle.
func runDRA(ctx context.Context, nodes []*node, pods []podSpec, largeGPUs int, settle, timeout time.Duration, keepLog string, progress io.Writer) (draResult, error) {
	var res draResult
	root, err := apiserver.RepoRoot()
	if err != nil {
		return res, err
	}
	srv, err := apiserver.Start(ctx)
	if err != nil {
		return res, err
	}
	defer srv.Stop()
	kcm, err := srv.StartControllerManager(ctx, "resourceclaim-controller")
	if err != nil {
		return res, err
	}
	defer kcm.Stop()
	sched, err := srv.StartScheduler(ctx)
	if err != nil {
		return res, err
	}
	defer sched.Stop()
	fmt.Fprintf(progress, "bench-dra: kube-apiserver, kube-controller-manager, kube-scheduler up (logs in %s)\n", srv.Dir())

	c := kubernetes.NewForConfigOrDie(srv.Config())
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		return res, err
	}
	classes, err := decode[resourceapi.DeviceClass](root, "deploy/dra/deviceclasses.yaml", "DeviceClass")
	if err != nil {
		return res, err
	}
	classes = append(classes, *dragpu.DeviceClass())
	for _, dc := range classes {
		if _, err := c.ResourceV1().DeviceClasses().Create(ctx, &dc, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
			return res, fmt.Errorf("DeviceClass %s: %w", dc.Name, err)
		}
	}
	t1, tk, err := templates(root, largeGPUs)
	if err != nil {
		return res, err
	}
	for _, t := range []*resourceapi.ResourceClaimTemplate{t1, tk} {
		if _, err := c.ResourceV1().ResourceClaimTemplates(namespace).Create(ctx, t, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
			return res, fmt.Errorf("ResourceClaimTemplate %s: %w", t.Name, err)
		}
	}

	// Nodes, GPU slices, NIC slices.
	gpuRoot := map[string]map[string]string{} // node -> GPU device -> root
	nicRoot := map[string]map[string]string{} // node -> VF device -> root
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, n := range nodes {
		if err := createReadyNode(ctx, c, n.name); err != nil {
			return res, fmt.Errorf("node %s: %w", n.name, err)
		}
		gpus, err := publishGPUs(ctx, c, n)
		if err != nil {
			return res, err
		}
		gpuRoot[n.name] = map[string]string{}
		for _, g := range gpus {
			gpuRoot[n.name][g.Name] = n.fx.RootOf(g.BDF)
		}
		pub, err := dra.NewPublisher(dra.PublisherOptions{Client: c, NodeName: n.name, SysfsRoot: n.fx.Root, Logger: quiet})
		if err != nil {
			return res, err
		}
		pub.Start(ctx)
		defer pub.Stop()
		if err := pub.Update(n.inv, n.pools); err != nil {
			return res, fmt.Errorf("node %s: publish: %w", n.name, err)
		}
		nicRoot[n.name] = map[string]string{}
		for _, d := range n.nics.Devices {
			nicRoot[n.name][dra.DeviceName("vf", d.PCI)] = n.fx.RootOf(d.PCI)
		}
	}
	for _, n := range nodes {
		want := nicRoot[n.name]
		err := poll(ctx, time.Minute, n.name+": rdmanet's VFs published", func() (bool, error) {
			l, err := c.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n.name + ",spec.driver=" + dra.DriverName})
			if err != nil {
				return false, err
			}
			got := 0
			for _, s := range l.Items {
				for _, d := range s.Spec.Devices {
					if _, ok := want[d.Name]; !ok {
						return false, fmt.Errorf("unexpected device %s", d.Name)
					}
					got++
				}
			}
			return got == len(want), fmt.Errorf("%d devices, want %d", got, len(want))
		})
		if err != nil {
			return res, err
		}
	}
	fmt.Fprintf(progress, "bench-dra: %d nodes published (%d GPUs, %d VFs each); creating %d pods\n", len(nodes), len(nodes[0].gpus), len(nodes[0].nics.Devices), len(pods))

	// The pods, in the seed's order.
	gpusOf := map[string]int{}
	start := time.Now()
	for _, p := range pods {
		tmpl := t1.Name
		if p.gpus != 1 {
			tmpl = tk.Name
		}
		if _, err := c.CoreV1().Pods(namespace).Create(ctx, podFor(p, tmpl), metav1.CreateOptions{}); err != nil {
			return res, fmt.Errorf("pod %s: %w", p.name, err)
		}
		gpusOf[p.name] = p.gpus
	}
	fmt.Fprintf(progress, "bench-dra: %d pods created in %s\n", len(pods), time.Since(start).Round(time.Millisecond))

	// Wait for a verdict on every pod, then for settle without change.
	type verdict struct {
		node   string
		reason string // "" bound and allocated; Unschedulable, SchedulerError, ...
	}
	var last map[string]verdict
	lastChange := time.Now()
	var decidedAt time.Time
	var claims map[string]*resourceapi.ResourceClaim
	boundAt := map[string]time.Duration{}
	for {
		pl, err := c.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return res, err
		}
		cl, err := c.ResourceV1().ResourceClaims(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return res, err
		}
		claims = map[string]*resourceapi.ResourceClaim{}
		for i := range cl.Items {
			claims[cl.Items[i].Name] = &cl.Items[i]
		}
		now := map[string]verdict{}
		for _, p := range pl.Items {
			if p.Spec.NodeName != "" {
				if cn := claimOf(&p); cn != "" && claims[cn] != nil && claims[cn].Status.Allocation != nil {
					now[p.Name] = verdict{node: p.Spec.NodeName}
					if _, seen := boundAt[p.Name]; !seen {
						boundAt[p.Name] = time.Since(start)
						res.lastBound = boundAt[p.Name]
					}
				}
				continue
			}
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse {
					now[p.Name] = verdict{reason: cond.Reason}
				}
			}
		}
		if !mapsEqual(now, last) {
			last, lastChange = now, time.Now()
			if len(now) == len(pods) {
				decidedAt = lastChange
			} else {
				decidedAt = time.Time{}
			}
		}
		if !decidedAt.IsZero() && time.Since(lastChange) >= settle {
			break
		}
		if time.Since(start) > timeout {
			res.timedOut = true
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if decidedAt.IsZero() {
		res.wall = time.Since(start)
	} else {
		res.wall = decidedAt.Sub(start)
	}

	// Count, measure the pairs, and check the pods left out.
	usedGPU := map[string]map[string]bool{}
	usedNIC := map[string]map[string]bool{}
	for _, n := range nodes {
		usedGPU[n.name], usedNIC[n.name] = map[string]bool{}, map[string]bool{}
	}
	for _, cl := range claims {
		if cl.Status.Allocation == nil {
			continue
		}
		for _, r := range cl.Status.Allocation.Devices.Results {
			switch r.Driver {
			case dragpu.DriverName:
				usedGPU[r.Pool][r.Device] = true
			case dra.DriverName:
				usedNIC[r.Pool][r.Device] = true
			}
		}
	}
	pl, err := c.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return res, err
	}
	for _, p := range pl.Items {
		v, ok := last[p.Name]
		switch {
		case !ok:
			res.undecided++
		case v.reason == "" && v.node != "":
			res.scheduled++
			cl := claims[claimOf(&p)]
			byReq := map[string]resourceapi.DeviceRequestAllocationResult{}
			for _, r := range cl.Status.Allocation.Devices.Results {
				if r.Pool != p.Spec.NodeName {
					return res, fmt.Errorf("pod %s on %s: claim %s has %s/%s from pool %s", p.Name, p.Spec.NodeName, cl.Name, r.Driver, r.Device, r.Pool)
				}
				byReq[r.Request] = r
			}
			var gr, nr []string
			for i := range gpusOf[p.Name] {
				g, nic := fmt.Sprintf("gpu-%d", i), fmt.Sprintf("nic-%d", i)
				if gpusOf[p.Name] == 1 {
					g, nic = "gpu", "nic"
				}
				gr = append(gr, gpuRoot[p.Spec.NodeName][byReq[g].Device])
				nr = append(nr, nicRoot[p.Spec.NodeName][byReq[nic].Device])
			}
			a, err := pairedAligned(gr, nr)
			if err != nil {
				return res, err
			}
			res.pairs.add(a, len(nr))
		case v.reason == corev1.PodReasonUnschedulable:
			res.unschedulable++
		default:
			res.schedErrors++
		}
		if ok && v.reason != "" {
			// A fitting allocation exists when some node has as many roots
			// with a free GPU and a free VF under them as the pod has pairs.
			for _, n := range nodes {
				if alignedFree(gpuRoot[n.name], nicRoot[n.name], usedGPU[n.name], usedNIC[n.name]) >= gpusOf[p.Name] {
					res.pendingFit++
					fmt.Fprintf(progress, "bench-dra: pod %s (%d GPUs) left %s although %s has room for it aligned\n", p.Name, gpusOf[p.Name], v.reason, n.name)
					break
				}
			}
		}
	}
	if len(boundAt) > 0 {
		ts := slices.Sorted(maps.Values(boundAt))
		res.medianBound = ts[len(ts)/2]
	}
	if data, err := os.ReadFile(sched.Log()); err == nil {
		res.timeouts = bytes.Count(data, []byte("timed out trying to allocate devices"))
		if keepLog != "" {
			if err := os.WriteFile(keepLog, data, 0o644); err != nil {
				return res, err
			}
		}
	}
	return res, nil
}

// publishGPUs is dragpu.Publish, tried three times: on a loaded machine
// the API server has dropped a create (unexpected EOF) that may or may not
// have been stored.
func publishGPUs(ctx context.Context, c kubernetes.Interface, n *node) ([]dragpu.GPU, error) {
	for attempt := 1; ; attempt++ {
		gpus, err := dragpu.Publish(ctx, c, n.name, n.fx.Root)
		switch {
		case err == nil:
			return gpus, nil
		case apierrors.IsAlreadyExists(err):
			return dragpu.Discover(n.fx.Root)
		case attempt == 3:
			return nil, err
		}
		time.Sleep(time.Second)
	}
}

// alignedFree counts the roots with a free GPU and a free VF.
func alignedFree(gpuRoot, nicRoot map[string]string, usedGPU, usedNIC map[string]bool) int {
	freeNIC := map[string]int{}
	for d, r := range nicRoot {
		if !usedNIC[d] {
			freeNIC[r]++
		}
	}
	n := 0
	for d, r := range gpuRoot {
		if !usedGPU[d] && freeNIC[r] > 0 {
			freeNIC[r]--
			n++
		}
	}
	return n
}

func claimOf(p *corev1.Pod) string {
	for _, s := range p.Status.ResourceClaimStatuses {
		if s.ResourceClaimName != nil {
			return *s.ResourceClaimName
		}
	}
	return ""
}

func mapsEqual[K, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
