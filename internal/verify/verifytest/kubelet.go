package verifytest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/rdmanet/rdmanet/internal/pairprobe"
)

// Net models the training network for FakeKubelet: what a probe from one
// pod to a target would find. nil: every target reachable, RTT 50µs, the
// MTU's DF size echoed.
type Net func(from string, t pairprobe.Target) pairprobe.Result

// FakeKubelet runs ephemeral containers added to pods of a fake clientset:
// a serve container turns Running, a client container runs its plan over
// Net and terminates with the probe's output as its log. Start latency
// stands in for the kubelet's container start.
type FakeKubelet struct {
	Net Net
	// Start is the delay before a container runs (default 0).
	Start time.Duration
	// Fail makes containers of a pod wait with this reason (ErrImagePull).
	Fail map[string]string
	// ServeExit makes a pod's responder exit at once with this log line.
	ServeExit map[string]string

	cs   *fake.Clientset
	mu   sync.Mutex
	logs map[string]string // ns/pod/container
	// Added counts the ephemeral containers added.
	Added int
	// Plans are the client configs seen, by pod.
	Plans map[string]pairprobe.ClientConfig
}

// Attach installs the kubelet on cs.
func (k *FakeKubelet) Attach(cs *fake.Clientset) {
	k.cs, k.logs, k.Plans = cs, map[string]string{}, map[string]pairprobe.ClientConfig{}
	cs.PrependReactor("update", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ua, ok := a.(k8stesting.UpdateAction)
		if !ok || a.GetSubresource() != "ephemeralcontainers" {
			return false, nil, nil
		}
		in := ua.GetObject().(*corev1.Pod)
		gvr := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
		// As the API server does: only spec.ephemeralContainers is taken
		// from the request; the status stays the kubelet's.
		k.mu.Lock()
		o, err := cs.Tracker().Get(gvr, in.Namespace, in.Name)
		if err != nil {
			k.mu.Unlock()
			return true, nil, err
		}
		p := o.(*corev1.Pod).DeepCopy()
		known := map[string]bool{}
		for _, ec := range p.Spec.EphemeralContainers {
			known[ec.Name] = true
		}
		p.Spec.EphemeralContainers = in.Spec.EphemeralContainers
		err = cs.Tracker().Update(gvr, p, p.Namespace)
		var added []corev1.EphemeralContainer
		for _, ec := range p.Spec.EphemeralContainers {
			if !known[ec.Name] {
				k.Added++
				added = append(added, ec)
			}
		}
		k.mu.Unlock()
		if err != nil {
			return true, nil, err
		}
		for _, ec := range added {
			go k.run(p.Namespace, p.Name, ec)
		}
		return true, p, nil
	})
}

func (k *FakeKubelet) setStatus(ns, pod string, st corev1.ContainerStatus) {
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	k.mu.Lock()
	defer k.mu.Unlock()
	o, err := k.cs.Tracker().Get(gvr, ns, pod)
	if err != nil {
		return
	}
	p := o.(*corev1.Pod).DeepCopy()
	replaced := false
	for i := range p.Status.EphemeralContainerStatuses {
		if p.Status.EphemeralContainerStatuses[i].Name == st.Name {
			p.Status.EphemeralContainerStatuses[i], replaced = st, true
		}
	}
	if !replaced {
		p.Status.EphemeralContainerStatuses = append(p.Status.EphemeralContainerStatuses, st)
	}
	_ = k.cs.Tracker().Update(gvr, p, ns)
}

func (k *FakeKubelet) run(ns, pod string, ec corev1.EphemeralContainer) {
	time.Sleep(k.Start)
	st := corev1.ContainerStatus{Name: ec.Name, Image: ec.Image}
	if reason := k.Fail[pod]; reason != "" {
		st.State.Waiting = &corev1.ContainerStateWaiting{Reason: reason, Message: "failed to pull image " + ec.Image}
		k.setStatus(ns, pod, st)
		return
	}
	if len(ec.Command) != 3 || ec.Command[0] != "/opt/rdmanet/bin/rdmanet-probe" {
		st.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 127, Reason: "StartError", Message: fmt.Sprintf("unexpected command %q", ec.Command)}
		k.setStatus(ns, pod, st)
		return
	}
	key := ns + "/" + pod + "/" + ec.Name
	var out strings.Builder
	o := &pairprobe.Output{W: &out}
	switch ec.Command[1] {
	case "serve":
		if line := k.ServeExit[pod]; line != "" {
			o.Emit(pairprobe.Line{Kind: "error", Self: pod, Error: line})
			k.mu.Lock()
			k.logs[key] = out.String()
			k.mu.Unlock()
			st.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error", Message: line}
			k.setStatus(ns, pod, st)
			return
		}
		st.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.Now()}
		k.setStatus(ns, pod, st)
	case "client":
		st.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.Now()}
		k.setStatus(ns, pod, st)
		var cfg pairprobe.ClientConfig
		if err := json.Unmarshal([]byte(ec.Command[2]), &cfg); err != nil {
			o.Emit(pairprobe.Line{Kind: "error", Error: err.Error()})
		} else {
			k.mu.Lock()
			k.Plans[pod] = cfg
			k.mu.Unlock()
			for _, t := range cfg.Targets {
				var r pairprobe.Result
				if k.Net != nil {
					r = k.Net(pod, t)
				} else {
					r = GoodResult(t)
				}
				r.Target = t
				o.Emit(pairprobe.Line{Kind: "result", Self: pod, Result: &r})
			}
			o.Emit(pairprobe.Line{Kind: "done", Self: pod})
		}
		k.mu.Lock()
		k.logs[key] = out.String()
		k.mu.Unlock()
		st.State.Running = nil
		st.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}
		k.setStatus(ns, pod, st)
	}
}

// GoodResult is a target that passed: reachable, the MTU's DF size echoed.
func GoodResult(t pairprobe.Target) pairprobe.Result {
	mtu := t.MTU
	if mtu == 0 {
		mtu = 1500
	}
	want := pairprobe.PayloadFor(mtu, false)
	return pairprobe.Result{Target: t, Reachable: true, RTTMicros: 50, WantDF: want, MaxDF: want, LocalMTU: mtu, LocalCIDR: t.Src + "/16", BoundToDevice: true}
}

// Logs implements verify.LogReader over the containers' output.
func (k *FakeKubelet) Logs(_ context.Context, ns, pod, container string) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	l, ok := k.logs[ns+"/"+pod+"/"+container]
	if !ok {
		return "", fmt.Errorf("container %q in pod %q has no log", container, pod)
	}
	return l, nil
}

// TrainingPod is a Running pod of a workload on node with a training
// attachment on network (ns/name) at ip.
func TrainingPod(name, node, network, ip string, opts ...PodOpt) *corev1.Pod {
	status := fmt.Sprintf(`[{"name":"k8s-pod-network","interface":"eth0","ips":["10.244.0.9"],"default":true},{"name":%q,"interface":"net1","ips":[%q]}]`, network, ip)
	p := BasePod(name, map[string]string{"example.com/sriov_rdma": "1"}, nil, append([]PodOpt{WithAnn("k8s.v1.cni.cncf.io/network-status", status)}, opts...)...)
	p.Spec.NodeName = node
	return p
}

// RdmanetNodeDaemonSet is the rdmanet-node DaemonSet the probe image is
// read from.
func RdmanetNodeDaemonSet(image string) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "rdmanet-node", Namespace: "rdmanet-system"},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "install-cni", Image: image}},
			Containers:     []corev1.Container{{Name: "rdmanet-agent", Image: image}},
		}}},
	}
}

// AntiAffinity makes the pod require other pods with label app=value off
// its node.
func AntiAffinity(app string) PodOpt {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}, TopologyKey: "kubernetes.io/hostname"}},
		}}
	}
}

// Spread gives the pod a DoNotSchedule spread over hostnames of the pods
// with label app=value.
func Spread(app string, maxSkew int32) PodOpt {
	return func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, corev1.TopologySpreadConstraint{
			MaxSkew: maxSkew, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}})
	}
}
