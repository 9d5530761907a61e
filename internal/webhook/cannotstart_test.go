package webhook

import (
	"context"
	"encoding/json"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/rdmanet/rdmanet/internal/lint"
	"github.com/rdmanet/rdmanet/internal/manifest"
)

// TestValidatePodRuleClasses (issue 27): the admission decision for each
// class of rule. A pod that could never start (lint.CannotStart: malformed
// networks annotation RDMA001, a NAD's resource not requested RDMA014 /
// RDMA010, fewer devices than attachments RDMA016) is denied with the rule
// ID for every pod, opted in or not, RDMA pod or not; rules about risk
// (RDMA060 no IPC_LOCK, RDMA077, a missing NAD RDMA020) deny only opted-in
// pods and pods of enforced namespaces, and are warnings otherwise. Before,
// the first class was admitted with a warning unless the pod opted in, and
// the pod hung in ContainerCreating.
func TestValidatePodRuleClasses(t *testing.T) {
	sriov := nadU("face-training-rdma", "example.com/sriov_rdma", sriovConfig)
	shared := nadU("rdmashared-net", "rdma/rdma_shared_device_eth", macvlanConfig)
	// noResource is a pod that names the exclusive NAD but requests no VF:
	// otherwise as the mutating webhook would leave it.
	noResource := func() *podB {
		return newPod("no-vf-0").ann(NetworksAnnotation, `[{"name":"face-training-rdma","interface":"net1"}]`).
			ipcLock().env("NCCL_SOCKET_IFNAME", "=net1").env("NCCL_IB_DISABLE", "0")
	}
	noIPCLock := func(p *corev1.Pod) { p.Spec.Containers[0].SecurityContext = nil }
	tests := []struct {
		name            string
		pod             *corev1.Pod
		nads            []*unstructured.Unstructured
		missing         []string
		enforce         bool
		wantAllowed     bool
		wantCannotStart bool
		wantDeny        []string // substrings of the denial
		wantNotDeny     []string // rule IDs the denial must not name
		wantWarn        []string // substrings of the warnings
	}{
		// --- the pod could never start: denied for everyone ---
		{
			name: "RDMA014: exclusive NAD named, its resource not requested, no opt-in",
			pod:  noResource().pod(), nads: []*unstructured.Unstructured{sriov},
			wantCannotStart: true,
			wantDeny: []string{"pod ai-training/no-vf-0 (RDMA mode exclusive) could never start", "whether or not it opts in",
				"RDMA014 (network-without-resource) at metadata.annotations[k8s.v1.cni.cncf.io/networks]", "example.com/sriov_rdma", "fix: add example.com/sriov_rdma"},
		},
		{
			name: "RDMA014: shared (macvlan) NAD named, its resource not requested",
			pod:  newPod("no-slot-0").ann(NetworksAnnotation, "rdmashared-net").ipcLock().pod(),
			nads: []*unstructured.Unstructured{shared}, wantCannotStart: true,
			wantDeny: []string{"RDMA014 (", "rdma/rdma_shared_device_eth"},
		},
		{
			name: "RDMA010: the pod requests another RDMA resource than the NAD's",
			pod:  noResource().limit("rdma/rdma_shared_device_eth", "1").pod(), nads: []*unstructured.Unstructured{sriov},
			wantCannotStart: true,
			wantDeny:        []string{"RDMA010 (resource-name-mismatch)", "resources.limits[rdma/rdma_shared_device_eth]", "fix: request example.com/sriov_rdma"},
		},
		{
			name: "RDMA016: two attachments of the VF network, one VF requested",
			pod: noResource().ann(NetworksAnnotation, `[{"name":"face-training-rdma","interface":"net1"},{"name":"face-training-rdma","interface":"net2"}]`).
				limit("example.com/sriov_rdma", "1").pod(),
			nads: []*unstructured.Unstructured{sriov}, wantCannotStart: true,
			wantDeny: []string{"RDMA016 (attachment-count-mismatch)", `fix: request example.com/sriov_rdma: "2"`},
		},
		{
			name:            "RDMA001: malformed networks annotation on an RDMA pod",
			pod:             goodExclusive().ann(NetworksAnnotation, `[{"name":"face-training-rdma"`).pod(),
			wantCannotStart: true,
			wantDeny:        []string{"RDMA001 (networks-annotation-malformed) at metadata.annotations[k8s.v1.cni.cncf.io/networks]", `[{\"name\":\"face-training-rdma\"`, "fix: "},
		},
		{
			name:            "RDMA001: malformed networks annotation on a pod that is no RDMA pod",
			pod:             newPod("web-0").ann(NetworksAnnotation, `[{"name":`).pod(),
			wantCannotStart: true,
			wantDeny:        []string{"pod ai-training/web-0 could never start", "RDMA001 ("},
		},
		{
			name:            "cannot start and a risk: only the former denies, the risk comes back as a warning",
			pod:             noResource().with(noIPCLock).pod(),
			nads:            []*unstructured.Unstructured{sriov},
			wantCannotStart: true,
			wantDeny:        []string{"RDMA014 ("},
			wantNotDeny:     []string{"RDMA060"},
			wantWarn:        []string{"also breaks 1 error-level rule(s)", "refuse a pod only where enforced", "rdmanet: RDMA060 ("},
		},
		{
			name:            "enforced namespace: cannot start and a risk, both deny",
			pod:             noResource().with(noIPCLock).pod(),
			nads:            []*unstructured.Unstructured{sriov},
			enforce:         true,
			wantCannotStart: true,
			wantDeny:        []string{"breaks 2 rule(s)", "RDMA014 (", "RDMA060 ("},
		},
		{
			name:            "opted-in pod that could never start",
			pod:             noResource().ann(AnnotationNetwork, "face-training-rdma").ann(NetworksAnnotation, `[{"name":"face-training-rdma","interface":"net1"}]`).pod(),
			nads:            []*unstructured.Unstructured{sriov},
			wantCannotStart: true,
			wantDeny:        []string{"RDMA014 ("},
		},
		{
			name:        "the lint disable annotation lets a pod through that its operator vouches for",
			pod:         noResource().ann(lint.DisableAnnotation, "RDMA014").pod(),
			nads:        []*unstructured.Unstructured{sriov},
			wantAllowed: true,
		},
		{
			name: "NIC from a DRA claim the request does not carry: not refused",
			pod: noResource().with(func(p *corev1.Pod) {
				tmpl := "rdma-nic"
				p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "nic", ResourceClaimTemplateName: &tmpl}}
				p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "nic"}}
			}).pod(),
			nads:        []*unstructured.Unstructured{sriov},
			wantAllowed: true,
		},

		// --- risk: denied only where enforced ---
		{
			name:        "RDMA060 no IPC_LOCK (the seeds' Job), no opt-in: admitted with warnings",
			pod:         goodExclusive().with(noIPCLock).pod(),
			nads:        []*unstructured.Unstructured{sriov},
			wantAllowed: true,
			wantWarn:    []string{"admitted because it does not opt in", "rdmanet: RDMA060 ("},
		},
		{
			name:     "RDMA060, enforced namespace: denied",
			pod:      goodExclusive().with(noIPCLock).pod(),
			nads:     []*unstructured.Unstructured{sriov},
			enforce:  true,
			wantDeny: []string{"breaks 1 rule(s)", "RDMA060 ("},
		},
		{
			name:     "RDMA060, opted in: denied",
			pod:      goodExclusive().ann(AnnotationNetwork, "face-training-rdma").with(noIPCLock).pod(),
			nads:     []*unstructured.Unstructured{sriov},
			wantDeny: []string{"RDMA060 ("},
		},
		{
			name:        "RDMA077 default-route request, no opt-in: admitted with warnings",
			pod:         goodExclusive().ann(NetworksAnnotation, `[{"name":"face-training-rdma","interface":"net1","default-route":["10.60.0.1"]}]`).pod(),
			nads:        []*unstructured.Unstructured{sriov},
			wantAllowed: true,
			wantWarn:    []string{"rdmanet: RDMA077 ("},
		},
		{
			name:        "RDMA020 NAD not created yet, no opt-in: admitted with warnings (kubectl apply may create it next)",
			pod:         goodExclusive().pod(),
			missing:     []string{"face-training-rdma"},
			wantAllowed: true,
			wantWarn:    []string{"rdmanet: RDMA020 (nad-not-found)"},
		},
		{
			name:        "a good pod: admitted without a word",
			pod:         goodExclusive().pod(),
			nads:        []*unstructured.Unstructured{sriov},
			wantAllowed: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var nads []*manifest.Object
			for _, n := range tt.nads {
				nads = append(nads, nadObj(t, n))
			}
			var missing []manifest.NetworkSelection
			for _, m := range tt.missing {
				missing = append(missing, manifest.NetworkSelection{Name: m, Annotation: NetworksAnnotation})
			}
			opt, err := ParseOptIn(tt.pod, testNS)
			if err != nil {
				t.Fatal(err)
			}
			v, err := ValidatePod(podObj(t, tt.pod), nads, missing, opt, tt.enforce)
			if err != nil {
				t.Fatal(err)
			}
			if v.Allowed != tt.wantAllowed || v.CannotStart != tt.wantCannotStart {
				t.Fatalf("allowed %v, cannot start %v; want %v, %v\nmessage: %s\nwarnings: %q", v.Allowed, v.CannotStart, tt.wantAllowed, tt.wantCannotStart, v.Message, v.Warnings)
			}
			if !v.Allowed && !v.InScope {
				t.Errorf("denied but not in scope: the handler would admit it")
			}
			for _, s := range tt.wantDeny {
				if !strings.Contains(v.Message, s) {
					t.Errorf("denial lacks %q:\n%s", s, v.Message)
				}
			}
			for _, s := range tt.wantNotDeny {
				if strings.Contains(v.Message, s) {
					t.Errorf("denial names %s, a rule that denies only where enforced:\n%s", s, v.Message)
				}
			}
			w := strings.Join(v.Warnings, "\n")
			for _, s := range tt.wantWarn {
				if !strings.Contains(w, s) {
					t.Errorf("warnings lack %q: %q", s, v.Warnings)
				}
			}
			if len(tt.wantWarn) == 0 && tt.wantAllowed && len(v.Warnings) > 0 {
				t.Errorf("unexpected warnings %q", v.Warnings)
			}
		})
	}
}

// TestCannotStartThroughTheHandler: the Validator denies a pod that could
// never start on both paths (ValidatePath, EnforcePath), and a malformed
// annotation on a pod that is no RDMA pod too.
func TestCannotStartThroughTheHandler(t *testing.T) {
	r := fakeReader(t, nadU("face-training-rdma", "example.com/sriov_rdma", sriovConfig))
	for _, tt := range []struct {
		name    string
		pod     *corev1.Pod
		enforce bool
		rule    string
	}{
		{name: "not enforced: RDMA014", pod: newPod("p").ann(NetworksAnnotation, "face-training-rdma").ipcLock().pod(), rule: "RDMA014"},
		{name: "enforced: RDMA014", pod: newPod("p").ann(NetworksAnnotation, "face-training-rdma").ipcLock().pod(), enforce: true, rule: "RDMA014"},
		{name: "not enforced: RDMA001 on a plain pod", pod: newPod("p").ann(NetworksAnnotation, `[{"name":`).pod(), rule: "RDMA001"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := (&Validator{Reader: r, Enforce: tt.enforce}).Handle(context.Background(), podRequest(t, tt.pod))
			if resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, tt.rule+" (") {
				t.Fatalf("allowed %v, result %v; want a denial naming %s", resp.Allowed, resp.Result, tt.rule)
			}
		})
	}
}

// TestExamplesAdmittedByDefault: every pod the seeds' workloads and
// examples/ create is admitted by the validating webhook in a namespace
// that is not enforced, without opting in (the seeds' exclusive Job has no
// IPC_LOCK, a risk: warnings), with the NADs of its own directory in the
// cluster. None of them could never start.
func TestExamplesAdmittedByDefault(t *testing.T) {
	// the manifests of each directory of examples/, read together (a
	// directory holds a workload and the NADs it attaches)
	byDir := map[string][]string{}
	err := filepath.WalkDir(filepath.Join("..", "..", "examples"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".yaml") {
			byDir[filepath.Dir(p)] = append(byDir[filepath.Dir(p)], p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, dir := range slices.Sorted(maps.Keys(byDir)) {
		objs, err := manifest.ReadPaths(byDir[dir], nil)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		var nads []*unstructured.Unstructured
		for _, o := range objs {
			if o.Kind == "NetworkAttachmentDefinition" {
				u := &unstructured.Unstructured{Object: o.Data}
				if u.GetNamespace() == "" {
					u.SetNamespace("default")
				}
				nads = append(nads, u)
			}
		}
		r := fakeReader(t, nads...)
		for _, o := range objs {
			tmpls, err := manifest.PodTemplates(o)
			if err != nil {
				t.Fatalf("%s: %v", o.Ref(), err)
			}
			for _, tm := range tmpls {
				name := strings.TrimSpace(o.Source.File + " " + o.Ref() + " " + tm.Role)
				t.Run(name, func(t *testing.T) {
					seen++
					p := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: tm.Meta, Spec: tm.Spec}
					p.Namespace = tm.Namespace()
					if p.Namespace == "" {
						p.Namespace = "default"
					}
					if p.Name == "" {
						p.Name = o.Name + "-0"
					}
					raw, err := json.Marshal(p)
					if err != nil {
						t.Fatal(err)
					}
					req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
						UID: "u1", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
						Namespace: p.Namespace, Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw},
					}}
					resp := (&Validator{Reader: r}).Handle(context.Background(), req)
					if !resp.Allowed {
						t.Fatalf("refused: %v", resp.Result)
					}
					// the seed's own Job: no IPC_LOCK, a risk, comes back as a warning
					if filepath.Base(dir) == "exclusive" && strings.Contains(dir, "seeds") && !strings.Contains(strings.Join(resp.Warnings, "\n"), "RDMA060") {
						t.Errorf("the seeds' exclusive Job: warnings %q lack RDMA060", resp.Warnings)
					}
				})
			}
		}
	}
	if seen < 6 {
		t.Fatalf("checked %d pod templates of examples/, want the seeds' and the cluster examples' (at least 6)", seen)
	}
}
