package webhook

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

func fakeReader(t *testing.T, objs ...*unstructured.Unstructured) client.Reader {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	s.AddKnownTypeWithName(NADGVK, &unstructured.Unstructured{})
	s.AddKnownTypeWithName(NADGVK.GroupVersion().WithKind(NADGVK.Kind+"List"), &unstructured.UnstructuredList{})
	b := fake.NewClientBuilder().WithScheme(s)
	for _, o := range objs {
		b = b.WithObjects(o.DeepCopy())
	}
	return b.Build()
}

func podRequest(t *testing.T, p *corev1.Pod) admission.Request {
	t.Helper()
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "u1", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Namespace: testNS, Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw},
	}}
}

// applyResponse applies a response's patch to the request's pod.
func applyResponse(t *testing.T, req admission.Request, resp admission.Response) *corev1.Pod {
	t.Helper()
	raw := req.Object.Raw
	if len(resp.Patches) > 0 {
		pb, err := json.Marshal(resp.Patches)
		if err != nil {
			t.Fatal(err)
		}
		patch, err := jsonpatch.DecodePatch(pb)
		if err != nil {
			t.Fatal(err)
		}
		if raw, err = patch.Apply(raw); err != nil {
			t.Fatalf("apply patch %s: %v", pb, err)
		}
	}
	out := &corev1.Pod{}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestMutatorHandle(t *testing.T) {
	r := fakeReader(t, nadU("face-training-rdma", "example.com/sriov_rdma", sriovConfig))
	m := &Mutator{Reader: r}
	ctx := context.Background()
	tests := []struct {
		name        string
		pod         *corev1.Pod
		wantAllowed bool
		wantPatch   bool
		wantMsg     []string
	}{
		{name: "opt-in pod is patched", pod: newPod("p").ann(AnnotationNetwork, "face-training-rdma").pod(), wantAllowed: true, wantPatch: true},
		{name: "plain pod is untouched", pod: newPod("p").pod(), wantAllowed: true},
		{name: "missing NAD is denied naming annotation, value and fix", pod: newPod("p").ann(AnnotationNetwork, "ai-training/nope").pod(),
			wantMsg: []string{AnnotationNetwork, `"ai-training/nope"`, "NetworkAttachmentDefinition ai-training/nope does not exist", "create it"}},
		{name: "bad opt-in annotation is denied", pod: newPod("p").ann(AnnotationMode, "turbo").pod(), wantMsg: []string{AnnotationMode, `"turbo"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := podRequest(t, tt.pod)
			resp := m.Handle(ctx, req)
			if resp.Allowed != tt.wantAllowed {
				t.Fatalf("allowed = %v, want %v (%v)", resp.Allowed, tt.wantAllowed, resp.Result)
			}
			if got := len(resp.Patches) > 0; got != tt.wantPatch {
				t.Errorf("patched = %v, want %v: %v", got, tt.wantPatch, resp.Patches)
			}
			for _, s := range tt.wantMsg {
				if resp.Result == nil || !strings.Contains(resp.Result.Message, s) {
					t.Errorf("message lacks %q: %v", s, resp.Result)
				}
			}
			if !tt.wantPatch {
				return
			}
			// The patched pod sent again yields no patch (idempotent) and
			// passes the validating webhook.
			mutated := applyResponse(t, req, resp)
			req2 := podRequest(t, mutated)
			if resp2 := m.Handle(ctx, req2); !resp2.Allowed || len(resp2.Patches) > 0 {
				t.Errorf("second mutation: allowed %v patches %v", resp2.Allowed, resp2.Patches)
			}
			if vr := (&Validator{Reader: r}).Handle(ctx, req2); !vr.Allowed || len(vr.Warnings) > 0 {
				t.Errorf("validation of the mutated pod: allowed %v %v warnings %q", vr.Allowed, vr.Result, vr.Warnings)
			}
		})
	}
}

func TestValidatorHandle(t *testing.T) {
	r := fakeReader(t, nadU("face-training-rdma", "example.com/sriov_rdma", sriovConfig))
	ctx := context.Background()
	noIPCLock := goodExclusive().with(func(p *corev1.Pod) { p.Spec.Containers[0].SecurityContext = nil }).pod()
	tests := []struct {
		name        string
		pod         *corev1.Pod
		enforce     bool // EnforcePath
		wantAllowed bool
		wantMsg     []string
		wantWarn    string
	}{
		{name: "enforcing: error finding denies with rule id, field and fix", pod: noIPCLock, enforce: true,
			wantMsg: []string{"RDMA060", "spec.containers[trainer].securityContext.capabilities.add", "fix: "}},
		{name: "not enforcing: error finding of a pod that does not opt in is a warning", pod: noIPCLock, wantAllowed: true, wantWarn: "RDMA060"},
		{name: "warning comes back as an admission warning", pod: goodHost().env("NCCL_SOCKET_IFNAME", "net1").pod(), wantAllowed: true, wantWarn: "RDMA073"},
		{name: "missing NAD of an opted-in pod", pod: goodExclusive().ann(AnnotationNetwork, "face-training-rdma").
			ann(NetworksAnnotation, "gone").pod(), wantMsg: []string{"RDMA020", "ai-training/gone"}},
		{name: "plain pod allowed", pod: newPod("p").pod(), wantAllowed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := &Validator{Reader: r, Enforce: tt.enforce}
			resp := v.Handle(ctx, podRequest(t, tt.pod))
			if resp.Allowed != tt.wantAllowed {
				t.Fatalf("allowed = %v, want %v (%v)", resp.Allowed, tt.wantAllowed, resp.Result)
			}
			for _, s := range tt.wantMsg {
				if resp.Result == nil || !strings.Contains(resp.Result.Message, s) {
					t.Errorf("message lacks %q: %v", s, resp.Result)
				}
			}
			if tt.wantWarn != "" && !strings.Contains(strings.Join(resp.Warnings, "\n"), tt.wantWarn) {
				t.Errorf("warnings %q lack %s", resp.Warnings, tt.wantWarn)
			}
		})
	}
}
