package webhook

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestMutate(t *testing.T) {
	sriov := nadU("face-training-rdma", "example.com/sriov_rdma", sriovConfig)
	macvlan := nadU("rdmashared-net", "", macvlanConfig)
	bridge := nadU("plain", "", bridgeConfig)
	type check func(t *testing.T, p *corev1.Pod, warnings []string)
	wantEnv := func(kv ...string) check {
		return func(t *testing.T, p *corev1.Pod, _ []string) {
			t.Helper()
			env := envOf(p.Spec.Containers[0])
			want := map[string]string{}
			for i := 0; i < len(kv); i += 2 {
				want[kv[i]] = kv[i+1]
			}
			if !reflect.DeepEqual(env, want) {
				t.Errorf("env = %v, want %v", env, want)
			}
		}
	}
	wantResource := func(ctr int, name, q string) check {
		return func(t *testing.T, p *corev1.Pod, _ []string) {
			t.Helper()
			c := p.Spec.Containers[ctr]
			l, r := c.Resources.Limits[corev1.ResourceName(name)], c.Resources.Requests[corev1.ResourceName(name)]
			if l.String() != q || r.String() != q {
				t.Errorf("container %s %s: limits %s requests %s, want %s", c.Name, name, l.String(), r.String(), q)
			}
		}
	}
	wantIPCLock := func(ctr int) check {
		return func(t *testing.T, p *corev1.Pod, _ []string) {
			t.Helper()
			sc := p.Spec.Containers[ctr].SecurityContext
			if sc == nil || sc.Capabilities == nil || !reflect.DeepEqual(sc.Capabilities.Add, []corev1.Capability{"IPC_LOCK"}) {
				t.Errorf("container %d capabilities = %+v, want add [IPC_LOCK]", ctr, sc)
			}
		}
	}
	wantAffinity := func(terms ...string) check {
		return func(t *testing.T, p *corev1.Pod, _ []string) {
			t.Helper()
			var got []string
			for _, term := range p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
				var parts []string
				for _, e := range term.MatchExpressions {
					parts = append(parts, e.Key+" "+string(e.Operator)+" "+strings.Join(e.Values, ","))
				}
				got = append(got, strings.Join(parts, " && "))
			}
			if !reflect.DeepEqual(got, terms) {
				t.Errorf("node affinity terms = %q, want %q", got, terms)
			}
		}
	}
	wantNetworks := func(v string) check {
		return func(t *testing.T, p *corev1.Pod, _ []string) {
			t.Helper()
			if got := p.Annotations[NetworksAnnotation]; got != v {
				t.Errorf("networks annotation = %s, want %s", got, v)
			}
		}
	}
	wantHost := func(host bool, dns corev1.DNSPolicy) check {
		return func(t *testing.T, p *corev1.Pod, _ []string) {
			t.Helper()
			if p.Spec.HostNetwork != host || p.Spec.DNSPolicy != dns {
				t.Errorf("hostNetwork %v dnsPolicy %s, want %v %s", p.Spec.HostNetwork, p.Spec.DNSPolicy, host, dns)
			}
		}
	}
	wantWarning := func(sub string) check {
		return func(t *testing.T, _ *corev1.Pod, w []string) {
			t.Helper()
			if !strings.Contains(strings.Join(w, "\n"), sub) {
				t.Errorf("warnings %q lack %q", w, sub)
			}
		}
	}
	noWarnings := func(t *testing.T, _ *corev1.Pod, w []string) {
		t.Helper()
		if len(w) > 0 {
			t.Errorf("warnings = %q, want none", w)
		}
	}

	tests := []struct {
		name    string
		pod     *corev1.Pod
		nad     *unstructured.Unstructured
		wantErr []string // substrings of the denial
		checks  []check
	}{
		{
			name: "exclusive VF network",
			pod:  newPod("p").ann(AnnotationNetwork, "ai-training/face-training-rdma").limit("nvidia.com/gpu", "8").pod(),
			nad:  sriov,
			checks: []check{
				wantNetworks(`[{"interface":"net1","name":"face-training-rdma","namespace":"ai-training"}]`),
				wantResource(0, "example.com/sriov_rdma", "1"), wantResource(0, "nvidia.com/gpu", "8"),
				wantIPCLock(0), wantAffinity(NodeLabelNetnsMode + " In exclusive"),
				wantEnv("NCCL_IB_DISABLE", "0", "NCCL_SOCKET_IFNAME", "=net1"),
				wantHost(false, corev1.DNSClusterFirst), noWarnings,
			},
		},
		{
			name: "exclusive, NAD in the pod's namespace by short name, own interface name",
			pod:  newPod("p").ann(AnnotationNetwork, "face-training-rdma").ann(AnnotationInterface, "rdma0").pod(),
			nad:  sriov,
			checks: []check{
				wantNetworks(`[{"interface":"rdma0","name":"face-training-rdma","namespace":"ai-training"}]`),
				wantEnv("NCCL_IB_DISABLE", "0", "NCCL_SOCKET_IFNAME", "=rdma0"),
			},
		},
		{
			name: "shared HCA macvlan with the pool resource from the pod annotation",
			pod:  newPod("p").ann(AnnotationNetwork, "ai-training/rdmashared-net").ann(AnnotationResource, "rdma/rdma_shared_device_eth").pod(),
			nad:  macvlan,
			checks: []check{
				wantNetworks(`[{"interface":"net1","name":"rdmashared-net","namespace":"ai-training"}]`),
				wantResource(0, "rdma/rdma_shared_device_eth", "1"), wantIPCLock(0),
				wantAffinity(NodeLabelNetnsMode + " In shared"),
				wantEnv("NCCL_IB_DISABLE", "0", "NCCL_SOCKET_IFNAME", "=net1"),
			},
		},
		{
			name: "shared, user already requests the shared resource",
			pod:  newPod("p").ann(AnnotationNetwork, "ai-training/rdmashared-net").limit("rdma/rdma_shared_device_eth", "1").pod(),
			nad:  macvlan,
			checks: []check{
				wantResource(0, "rdma/rdma_shared_device_eth", "1"), wantAffinity(NodeLabelNetnsMode + " In shared"),
			},
		},
		{
			name:    "shared NAD without resourceName and no resource annotation",
			pod:     newPod("p").ann(AnnotationNetwork, "ai-training/rdmashared-net").pod(),
			nad:     macvlan,
			wantErr: []string{`container "trainer" requests no RDMA device resource`, AnnotationResource, "k8s.v1.cni.cncf.io/resourceName"},
		},
		{
			name: "host mode",
			pod:  newPod("p").ann(AnnotationMode, "host").ann(AnnotationResource, "rdma/rdma_shared_device_eth").pod(),
			checks: []check{
				wantHost(true, corev1.DNSClusterFirstWithHostNet), wantResource(0, "rdma/rdma_shared_device_eth", "1"), wantIPCLock(0),
				wantAffinity(NodeLabelNetnsMode + " In exclusive,shared"), wantEnv("NCCL_IB_DISABLE", "0"),
				wantNetworks(""), wantWarning("NCCL_SOCKET_IFNAME not set for hostNetwork pod"),
			},
		},
		{
			name: "host mode with socket ifname, dnsPolicy Default kept",
			pod: newPod("p").ann(AnnotationMode, "host").ann(AnnotationResource, "rdma/hca_shared_devices_a").ann(AnnotationSocketIfname, "eth0").
				with(func(p *corev1.Pod) { p.Spec.DNSPolicy = corev1.DNSDefault }).pod(),
			checks: []check{wantHost(true, corev1.DNSDefault), wantEnv("NCCL_IB_DISABLE", "0", "NCCL_SOCKET_IFNAME", "eth0"), noWarnings},
		},
		{
			name:    "host mode without a resource",
			pod:     newPod("p").ann(AnnotationMode, "host").pod(),
			wantErr: []string{"hostNetwork RDMA pod needs a shared RDMA pool resource", AnnotationResource},
		},
		{
			name: "user's NCCL variables are kept",
			pod: newPod("p").ann(AnnotationNetwork, "ai-training/face-training-rdma").env("NCCL_SOCKET_IFNAME", "net1").env("NCCL_DEBUG", "INFO").
				env("NCCL_IB_DISABLE", "0").pod(),
			nad:    sriov,
			checks: []check{wantEnv("NCCL_SOCKET_IFNAME", "net1", "NCCL_DEBUG", "INFO", "NCCL_IB_DISABLE", "0")},
		},
		{
			name: "envFrom: no variables added, a warning",
			pod: newPod("p").ann(AnnotationNetwork, "ai-training/face-training-rdma").with(func(p *corev1.Pod) {
				p.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "nccl"}}}}
			}).pod(),
			nad:    sriov,
			checks: []check{wantEnv(), wantWarning("takes variables from envFrom"), wantIPCLock(0)},
		},
		{
			name: "annotated container gets resource, IPC_LOCK and env",
			pod: newPod("p").ann(AnnotationNetwork, "ai-training/face-training-rdma").ann(AnnotationContainer, "trainer").with(func(p *corev1.Pod) {
				p.Spec.Containers = append([]corev1.Container{{Name: "log-shipper", Image: "x"}}, p.Spec.Containers...)
			}).pod(),
			nad: sriov,
			checks: []check{
				wantResource(1, "example.com/sriov_rdma", "1"), wantIPCLock(1),
				func(t *testing.T, p *corev1.Pod, _ []string) {
					if c := p.Spec.Containers[0]; len(c.Env) > 0 || c.SecurityContext != nil || len(c.Resources.Limits) > 0 {
						t.Errorf("first container changed: %+v", c)
					}
				},
			},
		},
		{
			name: "networks annotation the user wrote, with the NAD on net2",
			pod: newPod("p").ann(AnnotationNetwork, "ai-training/face-training-rdma").
				ann(NetworksAnnotation, "ai-training/other, face-training-rdma").pod(),
			nad:    sriov,
			checks: []check{wantNetworks("ai-training/other, face-training-rdma"), wantEnv("NCCL_IB_DISABLE", "0", "NCCL_SOCKET_IFNAME", "=net2")},
		},
		{
			name:    "networks annotation without the NAD",
			pod:     newPod("p").ann(AnnotationNetwork, "ai-training/face-training-rdma").ann(NetworksAnnotation, "other").pod(),
			nad:     sriov,
			wantErr: []string{NetworksAnnotation, `"other"`, "does not attach ai-training/face-training-rdma"},
		},
		{
			name: "existing node affinity terms each get the label",
			pod: newPod("p").ann(AnnotationNetwork, "ai-training/face-training-rdma").with(func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
					{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}},
					{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: NodeLabelNetnsMode, Operator: corev1.NodeSelectorOpExists}}},
				}}}}
			}).pod(),
			nad:    sriov,
			checks: []check{wantAffinity("zone In a && "+NodeLabelNetnsMode+" In exclusive", NodeLabelNetnsMode+" Exists ")},
		},
		{
			name:   "user's own RDMA resource is left alone",
			pod:    newPod("p").ann(AnnotationNetwork, "ai-training/face-training-rdma").limit("example.com/sriov_rdma_b", "1").pod(),
			nad:    sriov,
			checks: []check{wantResource(0, "example.com/sriov_rdma_b", "1"), wantResource(0, "example.com/sriov_rdma", "0")},
		},
		{
			name:    "asserted mode disagrees with the NAD",
			pod:     newPod("p").ann(AnnotationNetwork, "ai-training/face-training-rdma").ann(AnnotationMode, "shared").pod(),
			nad:     sriov,
			wantErr: []string{AnnotationMode, `"shared"`, "is a exclusive network", "sriov, rdma"},
		},
		{
			name:    "network on a hostNetwork pod",
			pod:     newPod("p").ann(AnnotationNetwork, "ai-training/face-training-rdma").with(func(p *corev1.Pod) { p.Spec.HostNetwork = true }).pod(),
			nad:     sriov,
			wantErr: []string{AnnotationNetwork, "spec.hostNetwork: true", "RDMA022", "rdmanet.io/mode: host"},
		},
		{
			name:    "not an RDMA network",
			pod:     newPod("p").ann(AnnotationNetwork, "ai-training/plain").pod(),
			nad:     bridge,
			wantErr: []string{AnnotationNetwork, "is not an RDMA network (plugins: bridge)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opt, err := ParseOptIn(tt.pod, testNS)
			if err != nil || opt == nil {
				t.Fatalf("ParseOptIn = %+v, %v", opt, err)
			}
			var nad *NAD
			if tt.nad != nil {
				nad = nadInfo(t, tt.nad)
			}
			p := tt.pod.DeepCopy()
			warnings, err := Mutate(p, opt, nad)
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("Mutate succeeded, want an error with %q", tt.wantErr)
				}
				for _, s := range tt.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q lacks %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Mutate: %v", err)
			}
			for _, c := range tt.checks {
				c(t, p, warnings)
			}
			// Idempotent: mutating the mutated pod changes nothing.
			again := p.DeepCopy()
			opt2, err := ParseOptIn(again, testNS)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Mutate(again, opt2, nad); err != nil {
				t.Fatalf("second Mutate: %v", err)
			}
			if !equality.Semantic.DeepEqual(again, p) {
				a, _ := json.Marshal(p)
				b, _ := json.Marshal(again)
				t.Errorf("second mutation changed the pod:\nonce:  %s\ntwice: %s", a, b)
			}
		})
	}
}

func TestParseOptIn(t *testing.T) {
	tests := []struct {
		name    string
		pod     *corev1.Pod
		want    *OptIn
		wantErr []string
	}{
		{name: "no opt-in", pod: newPod("p").ann(NetworksAnnotation, "x").pod()},
		{name: "network with namespace", pod: newPod("p").ann(AnnotationNetwork, "other/n1").pod(),
			want: &OptIn{Network: NetworkRef{"other", "n1"}, Interface: "net1"}},
		{name: "network in the request namespace", pod: newPod("p").ann(AnnotationNetwork, " n1 ").pod(),
			want: &OptIn{Network: NetworkRef{testNS, "n1"}, Interface: "net1"}},
		{name: "host", pod: newPod("p").ann(AnnotationMode, "host").ann(AnnotationResource, "rdma/x").pod(),
			want: &OptIn{Mode: ModeHost, Resource: "rdma/x"}},
		{name: "unknown mode", pod: newPod("p").ann(AnnotationMode, "sriov").pod(), wantErr: []string{AnnotationMode, `"sriov"`, "use host"}},
		{name: "host with network", pod: newPod("p").ann(AnnotationMode, "host").ann(AnnotationNetwork, "n").pod(), wantErr: []string{AnnotationNetwork, "no CNI runs for hostNetwork pods"}},
		{name: "exclusive without network", pod: newPod("p").ann(AnnotationMode, "exclusive").pod(), wantErr: []string{AnnotationNetwork, "missing or empty"}},
		{name: "two networks", pod: newPod("p").ann(AnnotationNetwork, "a,b").pod(), wantErr: []string{AnnotationNetwork, `"a,b"`, "one network"}},
		{name: "bad resource", pod: newPod("p").ann(AnnotationNetwork, "a").ann(AnnotationResource, "rdma").pod(), wantErr: []string{AnnotationResource, `"rdma"`, "<domain>/<name>"}},
		{name: "unknown container", pod: newPod("p").ann(AnnotationNetwork, "a").ann(AnnotationContainer, "main").pod(), wantErr: []string{AnnotationContainer, `"main"`, "use one of trainer"}},
		{name: "socket ifname on a network pod", pod: newPod("p").ann(AnnotationNetwork, "a").ann(AnnotationSocketIfname, "eth0").pod(), wantErr: []string{AnnotationSocketIfname, "remove it"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseOptIn(tt.pod, testNS)
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("ParseOptIn = %+v, want error", got)
				}
				for _, s := range tt.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q lacks %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseOptIn = %+v, want %+v", got, tt.want)
			}
		})
	}
}
