package dra

// Alignment (issue 16 item 4) with the real kube-scheduler: GPU slices of
// a stand-in for NVIDIA's DRA driver (test/dragpu) and rdmanet's NIC
// slices (this package's Publisher) on two 8-GPU fixture nodes, the
// manifests of examples/dra applied unchanged, and the scheduler's
// allocations checked against the fixture's PCIe topology.

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/rdmanet/rdmanet/test/apiserver"
	"github.com/rdmanet/rdmanet/test/dragpu"
)

const alignNS = "training"

// examples are the objects of one examples/dra file, by kind.
type examples struct {
	templates []resourceapi.ResourceClaimTemplate
	pods      []corev1.Pod
	jobs      []batchv1.Job
}

// loadExample decodes examples/dra/<file> strictly; unknown kinds fail.
func loadExample(t *testing.T, file string) examples {
	t.Helper()
	root, err := apiserver.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, "examples", "dra", file)
	var ex examples
	for _, doc := range yamlDocs(t, path) {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		var obj any
		switch meta.Kind {
		case "ResourceClaimTemplate":
			ex.templates = append(ex.templates, resourceapi.ResourceClaimTemplate{})
			obj = &ex.templates[len(ex.templates)-1]
		case "Pod":
			ex.pods = append(ex.pods, corev1.Pod{})
			obj = &ex.pods[len(ex.pods)-1]
		case "Job":
			ex.jobs = append(ex.jobs, batchv1.Job{})
			obj = &ex.jobs[len(ex.jobs)-1]
		default:
			t.Fatalf("%s: unexpected kind %q", path, meta.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			t.Fatalf("%s: %s: %v", path, meta.Kind, err)
		}
	}
	return ex
}

// apply creates the example's objects in alignNS with strict field
// validation.
func (ex examples) apply(t *testing.T, ctx context.Context, c kubernetes.Interface) {
	t.Helper()
	for _, o := range ex.templates {
		if _, err := c.ResourceV1().ResourceClaimTemplates(alignNS).Create(ctx, &o, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
			t.Fatalf("create ResourceClaimTemplate %s: %v", o.Name, err)
		}
	}
	for _, o := range ex.pods {
		if _, err := c.CoreV1().Pods(alignNS).Create(ctx, &o, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
			t.Fatalf("create Pod %s: %v", o.Name, err)
		}
	}
	for _, o := range ex.jobs {
		if _, err := c.BatchV1().Jobs(alignNS).Create(ctx, &o, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
			t.Fatalf("create Job %s: %v", o.Name, err)
		}
	}
}

// alignNode is a fixture node as the cluster sees it.
type alignNode struct {
	name string
	fx   *dragpu.PairedNode
	gpus map[string]dragpu.GPU // device name -> GPU
	nics map[string]string     // device name -> VF address
}

// rootOf returns the fixture's PCIe root of an allocated device.
func (n *alignNode) rootOf(r resourceapi.DeviceRequestAllocationResult) (bdf, root string) {
	switch r.Driver {
	case dragpu.DriverName:
		bdf = n.gpus[r.Device].BDF
	case DriverName:
		bdf = n.nics[r.Device]
	}
	return bdf, n.fx.RootOf(bdf)
}

func createReadyNode(t *testing.T, ctx context.Context, c kubernetes.Interface, name string) {
	t.Helper()
	n, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi"), corev1.ResourcePods: resource.MustParse("110")}
	n.Status = corev1.NodeStatus{Capacity: res, Allocatable: res, Conditions: []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
	}}}
	n, err = c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The API server's TaintNodesByCondition admission taints a new node
	// not-ready; the node lifecycle controller (not run here) would lift it
	// once the node reports Ready.
	n.Spec.Taints = nil
	if _, err := c.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond until it returns done or a minute ends; cond's error
// is the last state reported on failure.
func waitUntil(t *testing.T, what string, diag func() string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var last error
	for time.Now().Before(deadline) {
		done, err := cond()
		if done {
			return
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: not there after a minute: %v\n%s", what, last, diag())
}

func podScheduled(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodScheduled {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// TestAlignmentScheduler: the real kube-scheduler (and the real
// ResourceClaim and Job controllers of kube-controller-manager) allocate
// the claims of examples/dra on two 8-GPU fixture nodes whose GPUs are
// published by a stand-in for NVIDIA's driver and whose NIC VFs by
// rdmanet's Publisher, both with the standard pcieRoot attribute:
//
//   - gpu-nic-aligned-x8.yaml (a Job; 8 GPU+NIC pairs, one constraint per
//     pair), first, on empty nodes: every GPU gets a VF under its own root;
//   - gpu-nic-aligned.yaml (1 GPU + 1 NIC, matchAttribute pcieRoot): on
//     the other node, the NIC is a VF under the GPU's root;
//   - no aligned pair left (the VFs under every free GPU's root taken):
//     the aligned pod stays Pending with PodScheduled=False, its claim
//     unallocated;
//   - contrast: the same claim without the constraint is scheduled there,
//     misaligned.
//
// The 8+8 Job runs first on purpose: on a node that cannot hold all eight
// pairs (7 free GPUs) the scheduler's allocator searches the pairings
// until its 10 s filter timeout and fails the pod with SchedulerError
// instead of trying the other node (kube-scheduler v1.37.2, found here).
func TestAlignmentScheduler(t *testing.T) {
	start := time.Now()
	srv := apiserver.StartT(t) // own server: its nodes and classes only
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin := kubernetes.NewForConfigOrDie(srv.Config())
	kcm := apiserver.ControllerManagerT(t, srv, "resourceclaim-controller", "job-controller")
	sched := apiserver.SchedulerT(t, srv)
	diag := func() string {
		return "kube-scheduler log tail:\n" + sched.LogTail(20) + "\nkube-controller-manager log tail:\n" + kcm.LogTail(10)
	}
	t.Logf("kube-apiserver, kube-controller-manager, kube-scheduler ready after %s", time.Since(start).Round(time.Millisecond))

	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: alignNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, dc := range decodeAll[resourceapi.DeviceClass](t, "deviceclasses.yaml") {
		if _, err := admin.ResourceV1().DeviceClasses().Create(ctx, &dc, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
			t.Fatalf("create DeviceClass %s: %v", dc.Name, err)
		}
	}
	if _, err := admin.ResourceV1().DeviceClasses().Create(ctx, dragpu.DeviceClass(), metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
		t.Fatalf("create DeviceClass %s: %v", dragpu.ClassName, err)
	}

	// Two 8-GPU nodes, each GPU with a ConnectX-7 (2 VFs) under its root.
	nodes := map[string]*alignNode{}
	for _, name := range []string{"dgx-a", "dgx-b"} {
		fx, err := dragpu.NewPairedNode(t.TempDir(), 8, 2)
		if err != nil {
			t.Fatal(err)
		}
		createReadyNode(t, ctx, admin, name)
		n := &alignNode{name: name, fx: fx, gpus: map[string]dragpu.GPU{}, nics: map[string]string{}}
		gpus, err := dragpu.Publish(ctx, admin, name, fx.Root)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range gpus {
			if want := fx.RootOf(g.BDF); g.PCIeRoot != want {
				t.Fatalf("%s: GPU %s published with pcieRoot %s, the fixture has it under %s", name, g.BDF, g.PCIeRoot, want)
			}
			n.gpus[g.Name] = g
		}
		pub, err := NewPublisher(PublisherOptions{Client: admin, NodeName: name, SysfsRoot: fx.Root, Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))})
		if err != nil {
			t.Fatal(err)
		}
		pub.Start(ctx)
		defer pub.Stop()
		node, pools := nodeState(t, fx.Root, "exclusive", fx.PoolConfig())
		if err := pub.Update(node, pools); err != nil {
			t.Fatal(err)
		}
		for _, pr := range fx.Pairs {
			for _, vf := range pr.VFs {
				n.nics[DeviceName("vf", vf)] = vf
			}
		}
		waitUntil(t, name+": rdmanet's 16 VFs published", diag, func() (bool, error) {
			l, err := admin.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + name + ",spec.driver=" + DriverName})
			if err != nil {
				return false, err
			}
			got := 0
			for _, s := range l.Items {
				for _, d := range s.Spec.Devices {
					if _, ok := n.nics[d.Name]; !ok {
						return false, fmt.Errorf("unexpected device %s", d.Name)
					}
					got++
				}
			}
			return got == len(n.nics), fmt.Errorf("%d devices, want %d", got, len(n.nics))
		})
		nodes[name] = n
	}

	// scheduled waits until the pod is bound and its claim allocated and
	// returns the node and the allocation, by request.
	scheduled := func(t *testing.T, pod string) (*alignNode, map[string]resourceapi.DeviceRequestAllocationResult) {
		t.Helper()
		var p *corev1.Pod
		var claim *resourceapi.ResourceClaim
		waitUntil(t, "pod "+pod+" scheduled with an allocated claim", diag, func() (bool, error) {
			var err error
			if p, err = admin.CoreV1().Pods(alignNS).Get(ctx, pod, metav1.GetOptions{}); err != nil {
				return false, err
			}
			name := p.Spec.ResourceClaims[0].ResourceClaimName // a claim of its own, or the one made from the template
			if len(p.Status.ResourceClaimStatuses) == 1 {
				name = p.Status.ResourceClaimStatuses[0].ResourceClaimName
			}
			if p.Spec.NodeName == "" || name == nil {
				return false, fmt.Errorf("nodeName %q, claim statuses %+v, PodScheduled %+v", p.Spec.NodeName, p.Status.ResourceClaimStatuses, podScheduled(p))
			}
			claim, err = admin.ResourceV1().ResourceClaims(alignNS).Get(ctx, *name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return claim.Status.Allocation != nil, fmt.Errorf("claim %s not allocated", claim.Name)
		})
		n := nodes[p.Spec.NodeName]
		out := map[string]resourceapi.DeviceRequestAllocationResult{}
		for _, r := range claim.Status.Allocation.Devices.Results {
			if r.Pool != p.Spec.NodeName {
				t.Errorf("claim %s: request %s got %s/%s from pool %s, the pod is on %s", claim.Name, r.Request, r.Driver, r.Device, r.Pool, p.Spec.NodeName)
			}
			out[r.Request] = r
		}
		return n, out
	}
	// pair checks one GPU request and one NIC request of an allocation and
	// returns their roots.
	pair := func(t *testing.T, n *alignNode, alloc map[string]resourceapi.DeviceRequestAllocationResult, gpuReq, nicReq string) (gpuRoot, nicRoot string) {
		t.Helper()
		g, ok1 := alloc[gpuReq]
		nic, ok2 := alloc[nicReq]
		if !ok1 || !ok2 || g.Driver != dragpu.DriverName || nic.Driver != DriverName {
			t.Fatalf("requests %s/%s: allocated %+v / %+v, want a %s GPU and an %s NIC", gpuReq, nicReq, g, nic, dragpu.DriverName, DriverName)
		}
		gBDF, gRoot := n.rootOf(g)
		nBDF, nRoot := n.rootOf(nic)
		if gRoot == "" || nRoot == "" {
			t.Fatalf("%s: allocated devices %s, %s are not the fixture's", n.name, g.Device, nic.Device)
		}
		t.Logf("%s: %s=%s (GPU %s, %s)  %s=%s (VF %s, %s)", n.name, gpuReq, g.Device, gBDF, gRoot, nicReq, nic.Device, nBDF, nRoot)
		return gRoot, nRoot
	}

	ok := true
	var x8 *alignNode    // node of the 8+8 Job
	var first *alignNode // node of the 1+1 pod
	var firstRoot string // its root
	var firstNIC string  // its VF device
	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"8 GPUs + 8 NICs (Job): every GPU gets a VF under its own root", func(t *testing.T) {
			ex := loadExample(t, "gpu-nic-aligned-x8.yaml")
			if len(ex.templates) != 1 || len(ex.jobs) != 1 {
				t.Fatalf("gpu-nic-aligned-x8.yaml: %d templates, %d jobs; want 1 and 1", len(ex.templates), len(ex.jobs))
			}
			ex.apply(t, ctx, admin)
			var pod string
			waitUntil(t, "Job "+ex.jobs[0].Name+" creates its pod", diag, func() (bool, error) {
				l, err := admin.CoreV1().Pods(alignNS).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + ex.jobs[0].Name})
				if err != nil || len(l.Items) == 0 {
					return false, fmt.Errorf("pods %v", err)
				}
				pod = l.Items[0].Name
				return true, nil
			})
			n, alloc := scheduled(t, pod)
			if len(alloc) != 16 {
				t.Fatalf("allocation of %d requests, want 16", len(alloc))
			}
			x8 = n
			roots := map[string]bool{}
			for i := range 8 {
				g, nic := pair(t, n, alloc, fmt.Sprintf("gpu-%d", i), fmt.Sprintf("nic-%d", i))
				if g != nic {
					t.Errorf("pair %d misaligned: GPU under %s, NIC under %s", i, g, nic)
				}
				roots[g] = true
			}
			if len(roots) != 8 {
				t.Errorf("the 8 pairs use %d roots, want 8 (one GPU per root on this node)", len(roots))
			}
		}},
		{"1 GPU + 1 NIC aligned: the NIC is a VF under the GPU's root", func(t *testing.T) {
			ex := loadExample(t, "gpu-nic-aligned.yaml")
			if len(ex.templates) != 1 || len(ex.pods) != 1 {
				t.Fatalf("gpu-nic-aligned.yaml: %d templates, %d pods; want 1 and 1", len(ex.templates), len(ex.pods))
			}
			ex.apply(t, ctx, admin)
			n, alloc := scheduled(t, ex.pods[0].Name)
			if len(alloc) != 2 {
				t.Fatalf("allocation %v: want requests gpu and nic", alloc)
			}
			g, nic := pair(t, n, alloc, "gpu", "nic")
			if g != nic {
				t.Fatalf("misaligned: GPU under %s, NIC under %s", g, nic)
			}
			if n == x8 {
				t.Fatalf("on %s, whose 8 GPUs the Job holds", n.name)
			}
			first, firstRoot, firstNIC = n, g, alloc["nic"].Device
		}},
		{"no aligned pair left: the aligned pod stays Pending, unschedulable", func(t *testing.T) {
			// Take every VF under the roots of the first node's free GPUs
			// (14 VFs: only that node has them), leaving free GPUs and one
			// free VF, under the root whose GPU is taken.
			blocker := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "nic-blocker", Namespace: alignNS},
				Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
					Name: "nics", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "rdma-exclusive.rdmanet.io", Count: 14,
						AllocationMode: resourceapi.DeviceAllocationModeExactCount,
						Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
							Expression: fmt.Sprintf(`device.attributes["resource.kubernetes.io"].pcieRoot != %q`, firstRoot)}}}}}}}}}
			if _, err := admin.ResourceV1().ResourceClaims(alignNS).Create(ctx, blocker, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			bp := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "nic-blocker", Namespace: alignNS}, Spec: corev1.PodSpec{
				ResourceClaims: []corev1.PodResourceClaim{{Name: "nics", ResourceClaimName: &blocker.Name}},
				Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "nics"}}}}}}}
			if _, err := admin.CoreV1().Pods(alignNS).Create(ctx, bp, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			n, _ := scheduled(t, bp.Name)
			if n != first {
				t.Fatalf("blocker on %s, want %s", n.name, first.name)
			}

			ex := loadExample(t, "gpu-nic-aligned.yaml")
			p := ex.pods[0]
			p.Name = "trainer-no-fit"
			if _, err := admin.CoreV1().Pods(alignNS).Create(ctx, &p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			var cond *corev1.PodCondition
			var got *corev1.Pod
			waitUntil(t, "pod "+p.Name+" PodScheduled=False", diag, func() (bool, error) {
				var err error
				if got, err = admin.CoreV1().Pods(alignNS).Get(ctx, p.Name, metav1.GetOptions{}); err != nil {
					return false, err
				}
				cond = podScheduled(got)
				return cond != nil && cond.Status == corev1.ConditionFalse, fmt.Errorf("nodeName %q, PodScheduled %+v", got.Spec.NodeName, cond)
			})
			t.Logf("PodScheduled=False %s: %s", cond.Reason, cond.Message)
			if got.Spec.NodeName != "" || cond.Reason != corev1.PodReasonUnschedulable || !strings.Contains(cond.Message, "cannot allocate all claims") {
				t.Errorf("pod %s: nodeName %q, PodScheduled %s %q; want unbound, Unschedulable, \"cannot allocate all claims\"", p.Name, got.Spec.NodeName, cond.Reason, cond.Message)
			}
			for _, cs := range got.Status.ResourceClaimStatuses {
				if cs.ResourceClaimName == nil {
					continue
				}
				c, err := admin.ResourceV1().ResourceClaims(alignNS).Get(ctx, *cs.ResourceClaimName, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if c.Status.Allocation != nil {
					t.Errorf("claim %s of the unschedulable pod is allocated: %+v", c.Name, c.Status.Allocation.Devices.Results)
				}
			}
			ev, err := admin.CoreV1().Events(alignNS).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + p.Name + ",reason=FailedScheduling"})
			if err != nil {
				t.Fatal(err)
			}
			if len(ev.Items) == 0 {
				t.Logf("no FailedScheduling event recorded yet (the condition is the scheduler's verdict)")
			} else {
				t.Logf("event FailedScheduling: %s", ev.Items[0].Message)
			}
		}},
		{"contrast: without the constraint the same pair is allocated misaligned", func(t *testing.T) {
			ex := loadExample(t, "gpu-nic-aligned.yaml")
			tmpl := ex.templates[0]
			tmpl.Name = "gpu-nic-unconstrained"
			tmpl.Spec.Spec.Devices.Constraints = nil
			p := ex.pods[0]
			p.Name = "trainer-unconstrained"
			p.Spec.ResourceClaims[0].ResourceClaimTemplateName = &tmpl.Name
			examples{templates: []resourceapi.ResourceClaimTemplate{tmpl}, pods: []corev1.Pod{p}}.apply(t, ctx, admin)
			n, alloc := scheduled(t, p.Name)
			g, nic := pair(t, n, alloc, "gpu", "nic")
			if n != first || g == nic || alloc["nic"].Device == firstNIC {
				t.Fatalf("on %s: GPU under %s, NIC under %s; want %s's last free VF (under %s) with a GPU under another root", n.name, g, nic, first.name, firstRoot)
			}
		}},
	}
	for _, s := range steps {
		if !ok {
			t.Errorf("%s: not run, an earlier step failed", s.name)
			continue
		}
		ok = t.Run(s.name, s.run)
	}
	if !ok {
		t.Logf("kube-scheduler log: %s", sched.Log())
	}
	t.Logf("TestAlignmentScheduler took %s", time.Since(start).Round(time.Millisecond))
}
