package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/rdmanet/rdmanet/internal/pairprobe"
	"github.com/rdmanet/rdmanet/internal/verify"
	vt "github.com/rdmanet/rdmanet/internal/verify/verifytest"
)

const pairNet = vt.NS + "/face-training-rdma"

// pairDeps is a cluster with a two-node Job of n pods, a Deployment over the
// same pods, the NAD and rdmanet-node; the fake kubelet runs the probes.
func pairDeps(t *testing.T, n int, kub *vt.FakeKubelet, mutate func(*corev1.Pod)) verifyDeps {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"job-name": "face-trainer"}}
	objs := []runtime.Object{vt.RdmanetNodeDaemonSet("rdmanet/rdmanet:0.2.0"),
		&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "face-trainer", Namespace: vt.NS}, Spec: batchv1.JobSpec{Selector: sel}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "face-trainer", Namespace: vt.NS}, Spec: appsv1.DeploymentSpec{Selector: sel}}}
	for i := range n {
		p := vt.TrainingPod(fmt.Sprintf("face-trainer-%d", i), fmt.Sprintf("node-%c", 'a'+i%2), pairNet, fmt.Sprintf("10.60.1.%d", i+2), vt.WithLabel("job-name", "face-trainer"))
		if mutate != nil {
			mutate(p)
		}
		objs = append(objs, p)
	}
	return verifyDeps{connect: func(string, string) (*verifyConn, error) {
		cs := fake.NewClientset(objs...)
		kub.Attach(cs)
		dc := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{verify.NADGVR: "NetworkAttachmentDefinitionList"})
		nad := vt.NADObject("face-training-rdma", "example.com/sriov_rdma", `{"cniVersion":"0.3.1","plugins":[{"type":"sriov","mtu":9000,"ipam":{"type":"whereabouts","range":"10.60.0.0/16"}},{"type":"rdma"}]}`)
		if _, err := dc.Resource(verify.NADGVR).Namespace(vt.NS).Create(context.Background(), &unstructured.Unstructured{Object: nad}, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
		return &verifyConn{client: cs, dynamic: dc, logs: kub, namespace: "default"}, nil
	}}
}

func TestVerifyPairsCommand(t *testing.T) {
	mtuBroken := func(from string, tg pairprobe.Target) pairprobe.Result {
		r := vt.GoodResult(tg)
		if tg.Peer == "face-trainer-1" {
			r.MaxDF, r.Error = 1472, "DF payload 8972 bytes (IP packet 9000) lost on the path; largest echoed 1472 bytes (IP packet 1500)"
		}
		return r
	}
	tests := []struct {
		name     string
		args     []string
		n        int
		net      vt.Net
		mutate   func(*corev1.Pod)
		wantCode int
		wantOut  []string
		wantErr  []string
		json     bool
	}{
		{name: "job, pairs only, all ok: text matrix", n: 3, args: []string{"-n", vt.NS, "job/face-trainer", "--pod-checks=false"}, wantCode: exitOK,
			wantOut: []string{"kubectl rdma verify pairs job/face-trainer in ai-training  3 pods on 2 nodes  probe image rdmanet/rdmanet:0.2.0",
				"  from\\to    0    1    2\n  0          -   ok   ok\n", "OK pairs: 6 cells, 6 ok, 0 problem, 0 unknown; 4 cross-node"},
			wantErr: []string{"verify: starting probe responders (ephemeral container rdma-probe-s-", "verify: clients done in 3 pods"}},
		{name: "deploy/NAME works the same", n: 2, args: []string{"-n", vt.NS, "deploy/face-trainer", "--pod-checks=false"}, wantCode: exitOK,
			wantOut: []string{"pairs deployment/face-trainer"}},
		{name: "-l selector, JSON", n: 2, args: []string{"-n", vt.NS, "-l", "job-name=face-trainer", "--pod-checks=false", "-o", "json"}, wantCode: exitOK, json: true},
		{name: "mtu broken: exit 1 naming the pair and the layer", n: 2, net: mtuBroken, args: []string{"-n", vt.NS, "job/face-trainer", "--pod-checks=false"}, wantCode: exitFindings,
			wantOut: []string{"  0          -  mtu\n"},
			wantErr: []string{"kubectl rdma: verify: pair face-trainer-0 → face-trainer-1 (node node-a → node node-b): mtu: ai-training/face-training-rdma: DF payload 8972 bytes (IP packet 9000) lost on the path; largest echoed 1472 bytes (IP packet 1500) (1 of 2 pair cells failed)"}},
		{name: "same node against anti-affinity: exit 1", n: 2, mutate: func(p *corev1.Pod) { p.Spec.NodeName = "node-a"; vt.AntiAffinity("face-trainer")(p) },
			args: []string{"-n", vt.NS, "job/face-trainer", "--pod-checks=false"}, wantCode: exitFindings,
			wantErr: []string{"(node node-a → node node-a): same-node: both on node node-a, but pod face-trainer-0: spec.affinity.podAntiAffinity"}},
		{name: "a pod still Pending: exit 2 naming it and the fix", n: 2, mutate: func(p *corev1.Pod) {
			if p.Name == "face-trainer-1" {
				p.Status.Phase = corev1.PodPending
			}
		}, args: []string{"-n", vt.NS, "job/face-trainer", "--pod-checks=false"}, wantCode: exitInput,
			wantErr: []string{"kubectl rdma: verify: pairs: pod ai-training/face-trainer-1 is Pending, not Running", "fix: wait for the workload"}},
		{name: "explicit --pairs on one pod: exit 2", n: 1, args: []string{"-n", vt.NS, "job/face-trainer", "--pod-checks=false", "--pairs"}, wantCode: exitInput,
			wantErr: []string{"a pair needs two"}},
		{name: "nothing to check: exit 2", n: 2, args: []string{"-n", vt.NS, "face-trainer-0", "--pod-checks=false"}, wantCode: exitInput,
			wantErr: []string{"--pod-checks=false and no pair layer (pod/face-trainer-0): nothing to check; fix:"}},
		{name: "bad probe port: exit 2", n: 2, args: []string{"-n", vt.NS, "job/face-trainer", "--probe-port", "80"}, wantCode: exitInput,
			wantErr: []string{"--probe-port 80: want 1024-65535"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kub := &vt.FakeKubelet{Net: tc.net}
			var out, errb bytes.Buffer
			cmd := newVerifyCmdWith(streams{in: strings.NewReader(""), out: &out, err: &errb}, pairDeps(t, tc.n, kub, tc.mutate))
			code := execute(cmd, tc.args, &errb)
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.wantCode, out.String(), errb.String())
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(out.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, out.String())
				}
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(errb.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, errb.String())
				}
			}
			if tc.json {
				var res verify.Result
				if err := json.Unmarshal(out.Bytes(), &res); err != nil {
					t.Fatalf("JSON: %v\n%s", err, out.String())
				}
				if res.Summary.Result != "ok" || res.Pairs == nil || res.Pairs.Summary.Cells != 2 || len(res.Pods) != 0 || res.Pairs.Target != "pods matching -l job-name=face-trainer" {
					t.Errorf("JSON result %+v pairs %+v", res.Summary, res.Pairs)
				}
			}
		})
	}
}
