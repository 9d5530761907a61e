package fleetbench

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/rdmanet/rdmanet/internal/cni/meta"
	"github.com/rdmanet/rdmanet/internal/dra"
)

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
