package lint

import (
	"slices"
	"strings"
	"testing"

	"github.com/rdmanet/rdmanet/internal/manifest"
)

func parseYAML(t *testing.T, y string) []*manifest.Object {
	t.Helper()
	objs, err := manifest.Parse("test.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

const admissionPod = `
apiVersion: v1
kind: Pod
metadata:
  name: face-trainer-1-x7k2p
  namespace: ai-training
  annotations:
    k8s.v1.cni.cncf.io/networks: '[{"name": "face-training-rdma", "interface": "net1"}]'
spec:
  hostname: face-trainer-1
  subdomain: face-rdzv
  containers:
  - name: trainer
    image: trainer
    env:
    - {name: MASTER_ADDR, value: face-trainer-0.face-rdzv.ai-training.svc.cluster.local}
    - {name: NCCL_SOCKET_IFNAME, value: "=net1"}
    resources:
      limits: {example.com/sriov_rdma: "1"}
`

const admissionContext = `
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: face-training-rdma
  namespace: ai-training
spec:
  config: '{"cniVersion":"0.3.1","name":"x","plugins":[{"type":"sriov","ipam":{"type":"whereabouts","range":"10.60.0.0/16"}},{"type":"rdma"}]}'
---
apiVersion: v1
kind: Service
metadata:
  name: face-rdzv
  namespace: ai-training
spec:
  clusterIP: None
  publishNotReadyAddresses: true
  selector: {app: face-trainer}
`

func TestLintPod(t *testing.T) {
	pod := parseYAML(t, admissionPod)[0]
	ctx := parseYAML(t, admissionContext)
	full, err := Lint(append([]*manifest.Object{pod}, ctx...))
	if err != nil {
		t.Fatal(err)
	}
	res, err := LintPod(pod, ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Mode != ModeExclusive {
		t.Errorf("mode = %s, want exclusive", res.Mode)
	}
	got := map[string]Severity{}
	for _, f := range res.Findings {
		if f.Object != pod.Ref() {
			t.Errorf("finding on %s, want only findings on %s: %+v", f.Object, pod.Ref(), f)
		}
		got[f.Rule] = f.Severity
	}
	tests := []struct {
		name     string
		rule     string
		fullSev  Severity // severity in a plain Lint run ("" = on another object)
		podSev   Severity // severity LintPod reports ("" = not reported)
		onObject string
	}{
		{name: "own rule kept as error", rule: "RDMA060", fullSev: Error, podSev: Error},
		{name: "context rule lowered to a warning", rule: "RDMA082", fullSev: Error, podSev: Warning},
		{name: "finding on the NAD left out", rule: "RDMA031", fullSev: Error, podSev: "", onObject: "NetworkAttachmentDefinition/ai-training/face-training-rdma"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			found := false
			for _, f := range full.Findings {
				if f.Rule == tt.rule {
					found = true
					if f.Severity != tt.fullSev {
						t.Errorf("Lint reports %s as %s, want %s", tt.rule, f.Severity, tt.fullSev)
					}
					if tt.onObject != "" && f.Object != tt.onObject {
						t.Errorf("Lint reports %s on %s, want %s", tt.rule, f.Object, tt.onObject)
					}
				}
			}
			if !found {
				t.Fatalf("Lint does not report %s; the fixture no longer exercises it", tt.rule)
			}
			if got[tt.rule] != tt.podSev {
				t.Errorf("LintPod reports %s as %q, want %q", tt.rule, got[tt.rule], tt.podSev)
			}
		})
	}
}

func TestNADModeAndRDMAResource(t *testing.T) {
	modes := []struct {
		name, config, want string
	}{
		{name: "sriov chain", config: `{"plugins":[{"type":"sriov"},{"type":"rdma"}]}`, want: ModeExclusive},
		{name: "macvlan", config: `{"type":"macvlan","master":"eth1"}`, want: ModeShared},
		{name: "bridge", config: `{"type":"bridge"}`, want: ""},
	}
	for _, tt := range modes {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := manifest.ParseCNIConfig(tt.config)
			if err != nil {
				t.Fatal(err)
			}
			if got := NADMode(&manifest.NAD{Config: cfg}); got != tt.want {
				t.Errorf("NADMode = %q, want %q", got, tt.want)
			}
		})
	}
	res := []struct {
		name string
		want bool
	}{
		{name: "example.com/sriov_rdma", want: true},
		{name: "rdma/rdma_shared_device_eth", want: true},
		{name: "rdma/hca_shared_devices_a", want: true},
		{name: "nvidia.com/gpu", want: false},
		{name: "cpu", want: false},
		{name: "example.com/foo", want: false},
		{name: "rdma/vf", want: true},
		{name: "example.com/MLNX_SRIOV", want: true},
		{name: "tke.cloud.tencent.com/tke-shared-rdma", want: true},
		{name: "spidernet.io/hca_shared_devices", want: true},
		{name: "example.com/roce_nic", want: true},
		{name: "example.com/infiniband", want: true},
	}
	for _, tt := range res {
		t.Run(tt.name, func(t *testing.T) {
			got := IsRDMAResource(tt.name)
			if got != tt.want {
				t.Errorf("IsRDMAResource(%s) = %v, want %v", tt.name, got, tt.want)
			}
			if got && !slices.ContainsFunc(RDMAResourceWords, func(w string) bool { return strings.Contains(strings.ToLower(tt.name), w) }) {
				t.Errorf("IsRDMAResource(%s) but the name has none of RDMAResourceWords %v: the webhooks' match condition would not send its pods", tt.name, RDMAResourceWords)
			}
		})
	}
	if RuleName("RDMA060") == "" || RuleName("RDMA999") != "" {
		t.Errorf("RuleName: RDMA060 %q, RDMA999 %q", RuleName("RDMA060"), RuleName("RDMA999"))
	}
}
