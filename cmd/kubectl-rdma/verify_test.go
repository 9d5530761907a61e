package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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

	"github.com/rdmanet/rdmanet/internal/verify"
	vt "github.com/rdmanet/rdmanet/internal/verify/verifytest"
)

// fakeExec answers the in-pod script with recorded busybox output per pod.
type fakeExec struct {
	out   map[string]map[string]string // pod → sections
	err   map[string]error
	calls []string
}

func (f *fakeExec) Exec(_ context.Context, ns, pod, container string, cmd []string) (string, string, error) {
	f.calls = append(f.calls, fmt.Sprintf("%s/%s/%s", ns, pod, container))
	if len(cmd) != 3 || cmd[0] != "sh" || cmd[1] != "-c" || cmd[2] != verify.Script {
		return "", "", fmt.Errorf("unexpected command %q", cmd)
	}
	if err := f.err[pod]; err != nil {
		return "", "", err
	}
	secs, ok := f.out[pod]
	if !ok {
		return "", "sh: not found", errors.New("command terminated with exit code 127")
	}
	return verify.JoinSections(secs), "", nil
}

type fakeLogs map[string]string

func (f fakeLogs) Logs(_ context.Context, ns, pod, container string) (string, error) {
	l, ok := f[pod]
	if !ok {
		return "", fmt.Errorf("pods %q not found", pod)
	}
	return l, nil
}

type verifyWorld struct {
	objs  []runtime.Object
	nads  []map[string]any
	exec  *fakeExec
	logs  fakeLogs
	dcErr error
}

func (w *verifyWorld) deps() verifyDeps {
	return verifyDeps{connect: func(kubeconfig, kctx string) (*verifyConn, error) {
		if w.dcErr != nil {
			return nil, w.dcErr
		}
		dc := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
			map[schema.GroupVersionResource]string{verify.NADGVR: "NetworkAttachmentDefinitionList"})
		for _, n := range w.nads {
			// Created through the resource (the constructor would file
			// them under a guessed resource name).
			u := &unstructured.Unstructured{Object: n}
			if _, err := dc.Resource(verify.NADGVR).Namespace(u.GetNamespace()).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
				return nil, err
			}
		}
		return &verifyConn{client: fake.NewClientset(w.objs...), dynamic: dc, exec: w.exec, logs: w.logs, namespace: "default"}, nil
	}}
}

func runVerify(t *testing.T, w *verifyWorld, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := newVerifyCmdWith(streams{in: strings.NewReader(""), out: &out, err: &errb}, w.deps())
	code := execute(cmd, args, &errb)
	return code, out.String(), errb.String()
}

func renamed(p *corev1.Pod, name string) *corev1.Pod { p.Name = name; return p }

// world is a node with an exclusive, a shared and a hostNetwork pod (all
// good), a StatefulSet and a Job whose pods are the exclusive ones.
func world() *verifyWorld {
	ex := vt.ExclusivePod(vt.WithLabel("job-name", "face-trainer"))
	ex1 := renamed(vt.ExclusivePod(vt.WithLabel("job-name", "face-trainer")), "face-trainer-1")
	sh := vt.SharedPod(vt.WithLabel("app", "face-trainer-shared"))
	ho := vt.HostPod(vt.WithLabel("app", "face-trainer-host"))
	badGID := vt.ExclusiveExec()
	badGID["env1"] = strings.Replace(badGID["env1"], "NCCL_IB_GID_INDEX=3", "NCCL_IB_GID_INDEX=1", 1)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "face-trainer", Namespace: vt.NS},
		Spec: batchv1.JobSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"job-name": "face-trainer"}}}}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "face-trainer-shared", Namespace: vt.NS},
		Spec: appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "face-trainer-shared"}}}}
	return &verifyWorld{
		objs: []runtime.Object{vt.NodeObj(), ex, ex1, sh, ho, job, sts},
		nads: []map[string]any{vt.ExclusiveNAD(), vt.SharedNAD()},
		exec: &fakeExec{out: map[string]map[string]string{
			ex.Name: vt.ExclusiveExec(), ex1.Name: badGID, sh.Name: vt.SharedExec(), ho.Name: vt.HostExec(),
		}},
		logs: fakeLogs{ex.Name: vt.IBLog, ex1.Name: vt.SocketLog},
	}
}

func TestVerifyCommand(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		mutate   func(*verifyWorld)
		wantCode int
		// wantOut are substrings of stdout, wantErr of stderr.
		wantOut []string
		wantErr []string
		// wantPods are the pods verified, in order (json runs).
		wantPods  []string
		wantCalls int
	}{
		{
			name: "good exclusive pod", args: []string{"face-trainer-0", "-n", vt.NS}, wantCode: exitOK, wantCalls: 1,
			wantOut: []string{
				"kubectl rdma verify pod ai-training/face-trainer-0  node gpu-node-a  mode exclusive  container trainer",
				"node     node-resource       OK       node gpu-node-a: example.com/sriov_rdma capacity 8, allocatable 8, allocated 2",
				"network  device-info         OK       net1: VF pci-address 0000:3b:02.1, rdma-device mlx5_3",
				"pod      roce-gid            OK       mlx5_3 port 1: RoCEv2 IPv4 GID index 3 = 192.168.100.12 (net1)",
				"nccl     nccl-log            SKIP     --nccl-logs not given",
				"OK: 17 ok, 0 problem, 0 unknown, 3 skip",
			},
		},
		{
			name: "good shared pod as pod/NAME", args: []string{"pod/face-trainer-shared-0", "-n", vt.NS}, wantCode: exitOK, wantCalls: 1,
			wantOut: []string{"mode shared", "GID index 5 = 192.168.100.21"},
		},
		{
			name: "good hostNetwork pod", args: []string{"face-trainer-host-0", "-n", vt.NS}, wantCode: exitOK, wantCalls: 1,
			wantOut: []string{"mode host", "network  nad-exists          SKIP     hostNetwork pod", "pod      training-interface  SKIP"},
		},
		{
			name: "wrong GID index: exit 1 with the fix", args: []string{"face-trainer-1", "-n", vt.NS}, wantCode: exitFindings, wantCalls: 1,
			wantOut: []string{"pod      nccl-gid-index      PROBLEM  NCCL_IB_GID_INDEX=1 but the RoCEv2 IPv4 GID is at index 3", "fix: set NCCL_IB_GID_INDEX=3", "PROBLEM: 16 ok, 1 problem"},
		},
		{
			name: "job: both pods, one broken", args: []string{"job/face-trainer", "-n", vt.NS, "-o", "json", "--pairs=false"}, wantCode: exitFindings, wantCalls: 2,
			wantPods: []string{"face-trainer-0", "face-trainer-1"},
		},
		{
			name: "statefulset", args: []string{"statefulset/face-trainer-shared", "-n", vt.NS, "-o", "json"}, wantCode: exitOK, wantCalls: 1,
			wantPods: []string{"face-trainer-shared-0"},
		},
		{
			name: "label selector over two pods", args: []string{"-l", "app=face-trainer", "-n", vt.NS, "--pairs=false"}, wantCode: exitFindings, wantCalls: 2,
			wantOut: []string{"pod ai-training/face-trainer-0", "pod ai-training/face-trainer-1", "PROBLEM over 2 pods"},
		},
		{
			name: "nccl logs: IB", args: []string{"face-trainer-0", "-n", vt.NS, "--nccl-logs"}, wantCode: exitOK, wantCalls: 1,
			wantOut: []string{"nccl     nccl-log            OK       NCCL used NET/IB"},
		},
		{
			name: "nccl logs: socket fallback", args: []string{"job/face-trainer", "-n", vt.NS, "--nccl-logs", "--pairs=false"}, wantCode: exitFindings, wantCalls: 2,
			wantOut: []string{"nccl     nccl-log            PROBLEM  transport Socket"},
		},
		{
			name: "pod not found: exit 2", args: []string{"nope", "-n", vt.NS}, wantCode: exitInput,
			wantErr: []string{`verify: get pod ai-training/nope: pods "nope" not found`},
		},
		{
			name: "selector matches nothing: exit 2", args: []string{"-l", "app=nothing", "-n", vt.NS}, wantCode: exitInput,
			wantErr: []string{"no pods in namespace ai-training"},
		},
		{
			name: "exec refused: exit 2, the other layers still checked", args: []string{"face-trainer-0", "-n", vt.NS}, wantCode: exitInput, wantCalls: 1,
			mutate: func(w *verifyWorld) {
				w.exec.err = map[string]error{"face-trainer-0": errors.New(`pods "face-trainer-0" is forbidden: User "dev" cannot create resource "pods/exec"`)}
			},
			wantOut: []string{"pod      exec                UNKNOWN  exec into ai-training/face-trainer-0 container trainer: pods \"face-trainer-0\" is forbidden", "network  device-info         OK", "UNKNOWN: 5 ok, 0 problem, 1 unknown"},
		},
		{
			name: "no shell in the image: exit 2", args: []string{"face-trainer-0", "-n", vt.NS}, wantCode: exitInput, wantCalls: 1,
			mutate:  func(w *verifyWorld) { delete(w.exec.out, "face-trainer-0") },
			wantOut: []string{"exit code 127 (stderr: sh: not found)"},
		},
		{
			name: "exec refused but a problem elsewhere: exit 1", args: []string{"face-trainer-0", "-n", vt.NS}, wantCode: exitFindings, wantCalls: 1,
			mutate: func(w *verifyWorld) {
				w.exec.err = map[string]error{"face-trainer-0": errors.New("forbidden")}
				w.nads = w.nads[1:] // the exclusive NAD was deleted
			},
			wantOut: []string{"network  nad-exists          PROBLEM"},
		},
		{
			name: "API unreachable: exit 2", args: []string{"face-trainer-0"}, wantCode: exitInput,
			mutate:  func(w *verifyWorld) { w.dcErr = errors.New("load kubeconfig: no configuration") },
			wantErr: []string{"verify: load kubeconfig"},
		},
		{
			name: "bad output format", args: []string{"face-trainer-0", "-o", "yaml"}, wantCode: exitInput,
			wantErr: []string{`-o "yaml": want text or json`},
		},
		{
			name: "argument and selector", args: []string{"face-trainer-0", "-l", "a=b"}, wantCode: exitInput,
			wantErr: []string{"give one or the other"},
		},
		{
			name: "unknown kind", args: []string{"daemonset/x"}, wantCode: exitInput,
			wantErr: []string{`kind "daemonset" is not pod, job, deploy(ment) or statefulset (sts); fix: write KIND/NAME`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := world()
			if tt.mutate != nil {
				tt.mutate(w)
			}
			code, out, errOut := runVerify(t, w, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.wantCode, out, errOut)
			}
			for _, s := range tt.wantOut {
				if !strings.Contains(out, s) {
					t.Errorf("stdout lacks %q:\n%s", s, out)
				}
			}
			for _, s := range tt.wantErr {
				if !strings.Contains(errOut, s) {
					t.Errorf("stderr lacks %q:\n%s", s, errOut)
				}
			}
			if len(w.exec.calls) != tt.wantCalls {
				t.Errorf("%d exec calls %q, want %d", len(w.exec.calls), w.exec.calls, tt.wantCalls)
			}
			if tt.wantPods != nil {
				var res struct {
					Pods []struct {
						Pod    string `json:"pod"`
						Checks []struct {
							Check, Status, Evidence string
						} `json:"checks"`
					} `json:"pods"`
					Summary struct{ Result string } `json:"summary"`
				}
				if err := json.Unmarshal([]byte(out), &res); err != nil {
					t.Fatalf("-o json: %v\n%s", err, out)
				}
				var got []string
				for _, p := range res.Pods {
					got = append(got, p.Pod)
					if len(p.Checks) != len(verify.Catalogue) {
						t.Errorf("pod %s: %d checks in json, want %d", p.Pod, len(p.Checks), len(verify.Catalogue))
					}
				}
				if strings.Join(got, ",") != strings.Join(tt.wantPods, ",") {
					t.Errorf("pods %q, want %q", got, tt.wantPods)
				}
				wantRes := map[int]string{exitOK: "ok", exitFindings: "problem", exitInput: "unknown"}[tt.wantCode]
				if res.Summary.Result != wantRes {
					t.Errorf("json summary.result %q, want %q", res.Summary.Result, wantRes)
				}
			}
		})
	}
}

// TestVerifyJSONShape pins the machine format of one good pod.
func TestVerifyJSONShape(t *testing.T) {
	code, out, errOut := runVerify(t, world(), "face-trainer-0", "-n", vt.NS, "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	pod := res["pods"].([]any)[0].(map[string]any)
	for _, k := range []string{"namespace", "pod", "node", "container", "mode", "mode_evidence", "checks", "summary"} {
		if _, ok := pod[k]; !ok {
			t.Errorf("pod report lacks %q: %v", k, pod)
		}
	}
	c := pod["checks"].([]any)[0].(map[string]any)
	want := map[string]any{"layer": "node", "check": "node-resource", "status": "ok"}
	for k, v := range want {
		if c[k] != v {
			t.Errorf("first check %s = %v, want %v", k, c[k], v)
		}
	}
	if _, ok := c["fix"]; ok {
		t.Errorf("an ok check carries a fix: %v", c)
	}
	if pod["mode"] != "exclusive" || res["summary"].(map[string]any)["result"] != "ok" {
		t.Errorf("mode %v result %v", pod["mode"], res["summary"])
	}
}
