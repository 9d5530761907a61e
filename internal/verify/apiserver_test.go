package verify

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	vt "github.com/rdmanet/rdmanet/internal/verify/verifytest"
	"github.com/rdmanet/rdmanet/test/apiserver"
)

// TestMain stops the API server the apiserver-tier tests share.
func TestMain(m *testing.M) {
	code := m.Run()
	apiserver.StopShared()
	os.Exit(code)
}

// recordedExec answers the in-pod script with recorded busybox output (the
// apiserver tier has no kubelet to exec through).
type recordedExec map[string]map[string]string

func (r recordedExec) Exec(_ context.Context, ns, pod, container string, cmd []string) (string, string, error) {
	secs, ok := r[pod]
	if !ok || container != "trainer" {
		return "", "", &os.PathError{Op: "exec", Path: ns + "/" + pod + "/" + container, Err: os.ErrNotExist}
	}
	return JoinSections(secs), "", nil
}

type recordedLogs map[string]string

func (r recordedLogs) Logs(_ context.Context, ns, pod, container string) (string, error) {
	return r[pod], nil
}

// TestGatherAPIServer creates a node (with the RDMA resources in its
// status), NADs and running pods of all three modes through a real
// kube-apiserver, gathers them with the Gatherer (exec and logs injected)
// and checks the verdicts; then deletes the exclusive NAD under the running
// pod, and reads logs and execs through the real API (no kubelet behind it:
// could not check).
func TestGatherAPIServer(t *testing.T) {
	srv := apiserver.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := srv.Config()
	cs := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)

	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: vt.NS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	node, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: vt.NodeName}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status = vt.NodeObj().Status
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("node status: %v", err)
	}
	for _, n := range []map[string]any{vt.ExclusiveNAD(), vt.SharedNAD()} {
		if _, err := dyn.Resource(NADGVR).Namespace(vt.NS).Create(ctx, &unstructured.Unstructured{Object: n}, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
			t.Fatalf("create NAD: %v", err)
		}
	}
	// A Job, whose generated selector the exclusive pods carry.
	job, err := cs.BatchV1().Jobs(vt.NS).Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "face-trainer"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "trainer", Image: "busybox"}}}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	jobLabels := job.Spec.Selector.MatchLabels
	if len(jobLabels) == 0 {
		t.Fatalf("job %s: the API server generated no selector", job.Name)
	}
	var opts []vt.PodOpt
	for k, v := range jobLabels {
		opts = append(opts, vt.WithLabel(k, v))
	}
	ex0 := vt.ExclusivePod(opts...)
	ex1 := vt.ExclusivePod(opts...)
	ex1.Name = "face-trainer-1"
	peer := vt.ExclusivePod()
	peer.Name, peer.Namespace, peer.Annotations = "other-team-0", "default", nil
	for _, p := range []*corev1.Pod{ex0, ex1, vt.SharedPod(), vt.HostPod(), peer} {
		status := p.Status
		p.Status = corev1.PodStatus{}
		created, err := cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create pod %s: %v", p.Name, err)
		}
		created.Status = status
		if _, err := cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("pod %s status: %v", p.Name, err)
		}
	}
	badGID := vt.ExclusiveExec()
	badGID["env1"] = strings.Replace(badGID["env1"], "NCCL_IB_GID_INDEX=3", "NCCL_IB_GID_INDEX=1", 1)
	g := &Gatherer{Client: cs, Dynamic: dyn, NCCLLogs: true,
		Exec: recordedExec{"face-trainer-0": vt.ExclusiveExec(), "face-trainer-1": badGID, "face-trainer-shared-0": vt.SharedExec(), "face-trainer-host-0": vt.HostExec()},
		Logs: recordedLogs{"face-trainer-0": vt.IBLog, "face-trainer-1": vt.SocketLog, "face-trainer-shared-0": vt.IBLog, "face-trainer-host-0": vt.IBLog},
	}

	type want struct {
		mode     string
		result   Status
		problems []string
		evidence map[string]string
	}
	verifyPods := func(t *testing.T, target Target, wants map[string]want) {
		t.Helper()
		pods, err := g.Pods(ctx, vt.NS, target)
		if err != nil {
			t.Fatal(err)
		}
		if len(pods) != len(wants) {
			t.Fatalf("%s: %d pods, want %d", target, len(pods), len(wants))
		}
		for i := range pods {
			w, ok := wants[pods[i].Name]
			if !ok {
				t.Errorf("%s: unexpected pod %s", target, pods[i].Name)
				continue
			}
			rep := Run(g.Gather(ctx, &pods[i]))
			var probs []string
			for _, c := range rep.Checks {
				if c.Status == Problem || c.Status == Unknown {
					probs = append(probs, c.ID)
				}
				if e, ok := w.evidence[c.ID]; ok && !strings.Contains(c.Evidence, e) {
					t.Errorf("%s %s: %q lacks %q", pods[i].Name, c.ID, c.Evidence, e)
				}
			}
			if rep.Mode != w.mode || rep.Summary.Result != string(w.result) || strings.Join(probs, ",") != strings.Join(w.problems, ",") {
				t.Errorf("%s: mode %s result %s problems %q, want %s %s %q\n%s", pods[i].Name, rep.Mode, rep.Summary.Result, probs, w.mode, w.result, w.problems, dump(rep))
			}
		}
	}

	t.Run("job", func(t *testing.T) {
		verifyPods(t, Target{Kind: "job", Name: "face-trainer"}, map[string]want{
			"face-trainer-0": {mode: ModeExclusive, result: OK, evidence: map[string]string{
				// 2 pods of this job and the other team's, each 1 VF.
				IDNodeResource: "capacity 8, allocatable 8, allocated 3",
				IDDeviceInfo:   "pci-address 0000:3b:02.1",
				IDNCCLLog:      "NCCL used NET/IB",
			}},
			"face-trainer-1": {mode: ModeExclusive, result: Problem, problems: []string{IDNCCLGIDIndex, IDNCCLLog}},
		})
	})
	t.Run("shared and host pods", func(t *testing.T) {
		verifyPods(t, Target{Kind: "pod", Name: "face-trainer-shared-0"}, map[string]want{"face-trainer-shared-0": {mode: ModeShared, result: OK}})
		verifyPods(t, Target{Kind: "pod", Name: "face-trainer-host-0"}, map[string]want{"face-trainer-host-0": {mode: ModeHost, result: OK}})
	})
	t.Run("pod not found", func(t *testing.T) {
		if _, err := g.Pods(ctx, vt.NS, Target{Kind: "pod", Name: "nope"}); err == nil || !strings.Contains(err.Error(), `pods "nope" not found`) {
			t.Errorf("err %v, want not found", err)
		}
	})
	t.Run("NAD deleted after the pod started", func(t *testing.T) {
		if err := dyn.Resource(NADGVR).Namespace(vt.NS).Delete(ctx, "face-training-rdma", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		verifyPods(t, Target{Kind: "pod", Name: "face-trainer-0"}, map[string]want{"face-trainer-0": {mode: ModeExclusive, result: Problem, problems: []string{IDNADExists},
			evidence: map[string]string{IDNADExists: "ai-training/face-training-rdma named by the networks annotation does not exist"}}})
	})
	t.Run("real exec and logs without a kubelet: could not check", func(t *testing.T) {
		real := &Gatherer{Client: cs, Dynamic: dyn, NCCLLogs: true, Exec: RemoteExecutor{Config: cfg, Client: cs}}
		pod, err := cs.CoreV1().Pods(vt.NS).Get(ctx, "face-trainer-shared-0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ectx, ecancel := context.WithTimeout(ctx, 30*time.Second)
		defer ecancel()
		f := real.Gather(ectx, pod)
		if f.ExecErr == nil || f.LogsErr == nil {
			t.Fatalf("exec err %v, logs err %v: want both to fail (no kubelet)", f.ExecErr, f.LogsErr)
		}
		rep := Run(f)
		st := map[string]Status{}
		for _, c := range rep.Checks {
			st[c.ID] = c.Status
		}
		if st[IDExec] != Unknown || st[IDNCCLLog] != Unknown || st[IDNetworkStatus] != OK || rep.Summary.Result != string(Unknown) {
			t.Errorf("exec %s, nccl-log %s, network-status %s, result %s; want unknown, unknown, ok, unknown\n%s", st[IDExec], st[IDNCCLLog], st[IDNetworkStatus], rep.Summary.Result, dump(rep))
		}
		t.Logf("exec through the API server: %v", f.ExecErr)
	})
}
