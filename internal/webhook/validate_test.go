package webhook

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/rdmanet/rdmanet/internal/manifest"
)

// goodExclusive is an exclusive-mode pod as the mutating webhook leaves it.
func goodExclusive() *podB {
	return newPod("face-trainer-0").ann(NetworksAnnotation, `[{"name":"face-training-rdma","interface":"net1"}]`).
		limit("example.com/sriov_rdma", "1").ipcLock().env("NCCL_SOCKET_IFNAME", "=net1").env("NCCL_IB_DISABLE", "0")
}

func goodHost() *podB {
	return newPod("host-0").ann(AnnotationMode, ModeHost).limit("rdma/rdma_shared_device_eth", "1").ipcLock().
		env("NCCL_IB_DISABLE", "0").with(func(p *corev1.Pod) {
		p.Spec.HostNetwork = true
		p.Spec.DNSPolicy = corev1.DNSClusterFirstWithHostNet
	})
}

func TestValidatePod(t *testing.T) {
	sriov := nadU("face-training-rdma", "example.com/sriov_rdma", sriovConfig)
	bridge := nadU("plain", "", bridgeConfig)
	tests := []struct {
		name        string
		pod         *corev1.Pod
		nads        []*unstructured.Unstructured
		missing     []string
		enforce     bool // the namespace is labelled rdmanet.io/enforce=true
		wantScope   bool
		wantAllowed bool
		wantMode    string
		wantDeny    []string // substrings of the denial
		wantWarn    []string // substrings of the warnings
	}{
		{name: "good exclusive pod", pod: goodExclusive().pod(), nads: []*unstructured.Unstructured{sriov}, wantScope: true, wantAllowed: true, wantMode: ModeExclusive},
		{name: "good host pod", pod: goodHost().pod(), wantScope: true, wantAllowed: true, wantMode: ModeHost},
		{
			name:      "enforced namespace: exclusive pod without IPC_LOCK is denied with rule, field and fix",
			pod:       goodExclusive().with(func(p *corev1.Pod) { p.Spec.Containers[0].SecurityContext = nil }).pod(),
			nads:      []*unstructured.Unstructured{sriov},
			enforce:   true,
			wantScope: true, wantMode: ModeExclusive,
			wantDeny: []string{"RDMA060 (", "at spec.containers[trainer].securityContext.capabilities.add", "fix: add securityContext.capabilities.add: [\"IPC_LOCK\"]", "ai-training/face-trainer-0"},
		},
		{
			name:      "opted-in exclusive pod without IPC_LOCK is denied in any namespace",
			pod:       goodExclusive().ann(AnnotationNetwork, "face-training-rdma").with(func(p *corev1.Pod) { p.Spec.Containers[0].SecurityContext = nil }).pod(),
			nads:      []*unstructured.Unstructured{sriov},
			wantScope: true, wantMode: ModeExclusive,
			wantDeny: []string{"RDMA060 ("},
		},
		{
			name:      "not opted in, namespace not enforced: the same pod is admitted with the errors as warnings",
			pod:       goodExclusive().with(func(p *corev1.Pod) { p.Spec.Containers[0].SecurityContext = nil }).pod(),
			nads:      []*unstructured.Unstructured{sriov},
			wantScope: true, wantAllowed: true, wantMode: ModeExclusive,
			wantWarn: []string{"breaks 1 error-level rule(s)", "admitted because it does not opt in", "namespace ai-training is not labelled rdmanet.io/enforce=true", "rdmanet: RDMA060 (", "fix: add securityContext.capabilities.add"},
		},
		{
			name:      "hostNetwork pod with a Multus interface name gets a warning",
			pod:       goodHost().env("NCCL_SOCKET_IFNAME", "net1").pod(),
			wantScope: true, wantAllowed: true, wantMode: ModeHost,
			wantWarn: []string{"RDMA073", "spec.containers[trainer].env[NCCL_SOCKET_IFNAME]", "fix: "},
		},
		{
			name:      "enforced namespace: RDMA pod without opt-in is checked: VF without a network",
			pod:       newPod("p").limit("example.com/sriov_rdma", "1").ipcLock().pod(),
			enforce:   true,
			wantScope: true, wantMode: ModeExclusive,
			wantDeny: []string{"RDMA013", "resources.limits[example.com/sriov_rdma]"},
		},
		{
			name:      "opted-in pod the mutating webhook did not prepare",
			pod:       newPod("p").ann(AnnotationNetwork, "face-training-rdma").pod(),
			wantScope: true, wantMode: "tcp",
			wantDeny: []string{"annotation rdmanet.io/network asks for RDMA mode exclusive or shared, but the pod is in mode tcp", "did not prepare it", "fix: create the pod again"},
		},
		{
			name:      "opted-in host pod that is not hostNetwork",
			pod:       goodHost().with(func(p *corev1.Pod) { p.Spec.HostNetwork = false }).pod(),
			wantScope: true,
			wantDeny:  []string{"annotation rdmanet.io/mode asks for RDMA mode host"},
		},
		{
			name:      "opted-in pod whose NAD is missing",
			pod:       goodExclusive().ann(AnnotationNetwork, "face-training-rdma").pod(),
			missing:   []string{"face-training-rdma"},
			wantScope: true,
			wantDeny:  []string{"RDMA020 (nad-not-found)", "NetworkAttachmentDefinition ai-training/face-training-rdma, which does not exist", "fix: create the NAD"},
		},
		{name: "plain pod is not checked", pod: newPod("web").pod(), wantAllowed: true, wantMode: "tcp"},
		{
			name:        "pod on a non-RDMA secondary network is not checked",
			pod:         newPod("p").ann(NetworksAnnotation, "plain").pod(),
			nads:        []*unstructured.Unstructured{bridge},
			wantAllowed: true, wantMode: "unknown",
		},
		{
			name: "rendezvous of a Job's second pod: its Service is not in the request, allowed",
			pod: goodExclusive().env("MASTER_ADDR", "face-trainer-0.face-rdzv.ai-training.svc.cluster.local").with(func(p *corev1.Pod) {
				p.Name = "face-trainer-1-x7k2p"
				p.Spec.Hostname = "face-trainer-1"
				p.Spec.Subdomain = "face-rdzv"
			}).pod(),
			nads:      []*unstructured.Unstructured{sriov},
			wantScope: true, wantAllowed: true, wantMode: ModeExclusive,
		},
		{
			name: "lint's disable annotation is honoured",
			pod: goodExclusive().ann("lint.rdmanet.io/disable", "RDMA060").
				with(func(p *corev1.Pod) { p.Spec.Containers[0].SecurityContext = nil }).pod(),
			nads:      []*unstructured.Unstructured{sriov},
			wantScope: true, wantAllowed: true, wantMode: ModeExclusive,
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
			if v.InScope != tt.wantScope || v.Allowed != (tt.wantAllowed || !tt.wantScope) {
				t.Fatalf("verdict in scope %v allowed %v, want %v %v; message %s; warnings %q", v.InScope, v.Allowed, tt.wantScope, tt.wantAllowed, v.Message, v.Warnings)
			}
			if tt.wantMode != "" && v.Mode != tt.wantMode {
				t.Errorf("mode = %s, want %s", v.Mode, tt.wantMode)
			}
			for _, s := range tt.wantDeny {
				if !strings.Contains(v.Message, s) {
					t.Errorf("denial lacks %q:\n%s", s, v.Message)
				}
			}
			if tt.wantAllowed && tt.wantScope && len(tt.wantWarn) == 0 && len(v.Warnings) > 0 {
				t.Errorf("unexpected warnings %q", v.Warnings)
			}
			w := strings.Join(v.Warnings, "\n")
			for _, s := range tt.wantWarn {
				if !strings.Contains(w, s) {
					t.Errorf("warnings lack %q: %q", s, v.Warnings)
				}
			}
		})
	}
}
