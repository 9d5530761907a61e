package render

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmanet/rdmanet/internal/lint"
	"github.com/rdmanet/rdmanet/internal/manifest"
)

var update = flag.Bool("update", false, "rewrite golden files")

func specFor(mode string) Spec {
	s := Spec{Mode: mode, Name: "face-trainer", Namespace: "ai-training", PFNames: []string{"enp65s0f0np0"},
		Subnet: "10.60.0.0/16", Exclude: []string{"10.60.0.0/24"}, Image: "registry.example.com/ai/face-training:v1", Nodes: 2, GPUsPerNode: 8}
	if mode == ModeExclusive {
		s.VLAN = 200
	}
	if mode == ModeHost {
		s.Subnet, s.Exclude = "", nil
	}
	return s
}

func renderString(t *testing.T, s Spec) string {
	t.Helper()
	docs, err := Render(s)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Write(&b, docs); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestRoundTrip: rendered output parses and lints with nothing above info,
// in the mode it was rendered for.
func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec Spec
		mode string
	}{
		{name: "exclusive", spec: specFor(ModeExclusive), mode: lint.ModeExclusive},
		{name: "shared", spec: specFor(ModeShared), mode: lint.ModeShared},
		{name: "shared with NicClusterPolicy", spec: func() Spec { s := specFor(ModeShared); s.PoolFormat = PoolNicClusterPolicy; return s }(), mode: lint.ModeShared},
		{name: "host", spec: specFor(ModeHost), mode: lint.ModeHost},
		{name: "exclusive with defaults", spec: Spec{Mode: ModeExclusive, Name: "t", PFNames: []string{"ens1f0np0"}, Subnet: "192.168.50.0/24", Image: "i:1"}, mode: lint.ModeExclusive},
		{name: "exclusive multi-rail", spec: func() Spec {
			s := specFor(ModeExclusive)
			s.PFNames = []string{"enp65s0f0np0", "enp66s0f0np0", "enp67s0f0np0", "enp68s0f0np0"}
			s.Subnet, s.Exclude = "", nil
			s.Subnets = []string{"10.60.0.0/16", "10.61.0.0/16", "10.62.0.0/16", "10.63.0.0/16"}
			return s
		}(), mode: lint.ModeExclusive},
		{name: "shared multi-rail with NicClusterPolicy", spec: func() Spec {
			s := specFor(ModeShared)
			s.PFNames = []string{"ens6f0np0", "ens6f1np1"}
			s.Subnet, s.Exclude = "", nil
			s.Subnets = []string{"192.168.2.0/24", "192.168.3.0/24"}
			s.PoolFormat = PoolNicClusterPolicy
			return s
		}(), mode: lint.ModeShared},
		{name: "host with two PFs", spec: func() Spec { s := specFor(ModeHost); s.PFNames = []string{"ens6f0np0", "ens6f1np1"}; return s }(), mode: lint.ModeHost},
		{name: "host without GPUs, debug env", spec: Spec{Mode: ModeHost, Name: "t", PFNames: []string{"ens1f0np0"}, Image: "i:1", GPUsPerNode: 0, NCCLDebug: true}, mode: lint.ModeHost},
		{name: "exclusive DRA", spec: draSpec(ModeExclusive), mode: lint.ModeExclusive},
		{name: "shared DRA", spec: draSpec(ModeShared), mode: lint.ModeShared},
		{name: "exclusive DRA, 4 rails for 8 GPUs", spec: func() Spec {
			s := draSpec(ModeExclusive)
			s.PFNames = []string{"enp65s0f0np0", "enp66s0f0np0", "enp67s0f0np0", "enp68s0f0np0"}
			s.Subnet, s.Exclude = "", nil
			s.Subnets = []string{"10.60.0.0/16", "10.61.0.0/16", "10.62.0.0/16", "10.63.0.0/16"}
			return s
		}(), mode: lint.ModeExclusive},
		{name: "exclusive DRA, 8 rails for 8 GPUs", spec: draRails(8, 8), mode: lint.ModeExclusive},
		{name: "exclusive DRA, 4 rails for 2 GPUs, own GPU class", spec: func() Spec {
			s := draRails(4, 2)
			s.GPUDeviceClass = "gpu.example.com"
			return s
		}(), mode: lint.ModeExclusive},
		{name: "shared DRA multi-rail", spec: func() Spec {
			s := draSpec(ModeShared)
			s.PFNames = []string{"ens6f0np0", "ens6f1np1"}
			s.Subnet, s.Exclude = "", nil
			s.Subnets = []string{"192.168.2.0/24", "192.168.3.0/24"}
			return s
		}(), mode: lint.ModeShared},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := renderString(t, tc.spec)
			objs, err := manifest.Parse("rendered.yaml", []byte(out))
			if err != nil {
				t.Fatalf("rendered output does not parse: %v\n%s", err, out)
			}
			res, err := lint.Lint(objs)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Workloads) != 1 || res.Workloads[0].Mode != tc.mode {
				t.Fatalf("workloads %+v, want one in mode %s", res.Workloads, tc.mode)
			}
			for _, f := range res.Findings {
				if f.Severity != lint.Info {
					t.Errorf("%s %s %s: %s", f.Severity, f.Rule, f.Field, f.Message)
				}
			}
		})
	}
}

func draSpec(mode string) Spec {
	s := specFor(mode)
	s.DRA = true
	return s
}

// draRails is an exclusive DRA spec with n rails and gpus GPUs per node.
func draRails(n, gpus int) Spec {
	s := draSpec(ModeExclusive)
	s.Subnet, s.Exclude, s.PFNames, s.Subnets = "", nil, nil, nil
	for i := range n {
		s.PFNames = append(s.PFNames, fmt.Sprintf("enp%ds0f0np0", 65+i))
		s.Subnets = append(s.Subnets, fmt.Sprintf("10.%d.0.0/16", 60+i))
	}
	s.GPUsPerNode = gpus
	return s
}

func TestGolden(t *testing.T) {
	for _, name := range []string{ModeExclusive, ModeShared, ModeHost, ModeExclusive + "-dra", ModeShared + "-dra"} {
		t.Run(name, func(t *testing.T) {
			mode, dra := strings.CutSuffix(name, "-dra")
			s := specFor(mode)
			s.DRA = dra
			got := renderString(t, s)
			path := filepath.Join("testdata", name+".yaml")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test ./internal/render -update)", err)
			}
			if string(want) != got {
				t.Errorf("%s differs; run go test ./internal/render -update and review:\n%s", path, got)
			}
		})
	}
}

func TestRenderedContent(t *testing.T) {
	ex := renderString(t, specFor(ModeExclusive))
	for _, want := range []string{`"type": "sriov"`, `"type": "rdma"`, `"type": "rdmanet-ipam"`, `"vlan": 200`, "k8s.v1.cni.cncf.io/resourceName: rdmanet.io/sriov_rdma", "IPC_LOCK", "value: =net1", "clusterIP: None", "completionMode: Indexed", `"isRdma": true`} {
		if !strings.Contains(ex, want) {
			t.Errorf("exclusive output lacks %q", want)
		}
	}
	if strings.Contains(ex, "deviceID") || strings.Contains(ex, "0.0.0.0/0") {
		t.Error("exclusive output must not carry a static deviceID or a default route")
	}
	sh := renderString(t, specFor(ModeShared))
	for _, want := range []string{`"type": "macvlan"`, `"master": "enp65s0f0np0"`, `"mtu": 9000`, `"rdmaHcaMax": 63`, `"ifNames"`} {
		if !strings.Contains(sh, want) {
			t.Errorf("shared output lacks %q", want)
		}
	}
	if strings.Contains(sh, `"type": "rdma"`) {
		t.Error("shared mode must not chain the rdma CNI")
	}
	h := renderString(t, specFor(ModeHost))
	for _, want := range []string{"hostNetwork: true", "dnsPolicy: ClusterFirstWithHostNet", "value: =enp65s0f0np0", "rdmanet.io/hca_shared"} {
		if !strings.Contains(h, want) {
			t.Errorf("host output lacks %q", want)
		}
	}
	if strings.Contains(h, "NetworkAttachmentDefinition") || strings.Contains(h, "k8s.v1.cni.cncf.io/networks") {
		t.Error("host mode must not render a secondary network")
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mut  func(*Spec)
		want string
	}{
		{name: "unknown mode", mut: func(s *Spec) { s.Mode = "sriov" }, want: "mode"},
		{name: "no PF", mut: func(s *Spec) { s.PFNames = nil }, want: "pfNames"},
		{name: "bad subnet", mut: func(s *Spec) { s.Subnet = "10.60.0.0" }, want: "subnet"},
		{name: "exclude outside subnet", mut: func(s *Spec) { s.Exclude = []string{"10.61.0.0/24"} }, want: "exclude"},
		{name: "no image", mut: func(s *Spec) { s.Image = "" }, want: "image"},
		{name: "bad name", mut: func(s *Spec) { s.Name = "Face_Trainer" }, want: "name"},
		{name: "eth0 as training interface", mut: func(s *Spec) { s.Interface = "eth0" }, want: "interface"},
		{name: "VLAN out of range", mut: func(s *Spec) { s.VLAN = 5000 }, want: "vlan"},
		{name: "prefix with slash", mut: func(s *Spec) { s.ResourceName = "a/b" }, want: "resourceName"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := specFor(ModeExclusive)
			tc.mut(&s)
			_, err := Render(s)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one about %s", err, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name string
		spec Spec
		want string
	}{
		{name: "macvlan on IPoIB", spec: func() Spec { s := specFor(ModeShared); s.PFNames = []string{"ib0"}; return s }(), want: "IPoIB"},
		{name: "VLAN in shared mode", spec: func() Spec { s := specFor(ModeShared); s.VLAN = 10; return s }(), want: "vlan"},
		{name: "rails without a subnet each", spec: func() Spec {
			s := specFor(ModeExclusive)
			s.PFNames = []string{"a0", "a1"}
			s.Subnet, s.Exclude, s.Subnets = "", nil, []string{"10.60.0.0/16"}
			return s
		}(), want: "one subnet per PF"},
		{name: "overlapping rails", spec: func() Spec {
			s := specFor(ModeExclusive)
			s.PFNames = []string{"a0", "a1"}
			s.Subnet, s.Exclude, s.Subnets = "", nil, []string{"10.60.0.0/16", "10.60.1.0/24"}
			return s
		}(), want: "ARP flux"},
		{name: "two VFs on one network", spec: func() Spec { s := specFor(ModeExclusive); s.RDMAPerPod = 2; return s }(), want: "rdmaPerPod"},
		{name: "MTU in exclusive mode", spec: func() Spec { s := specFor(ModeExclusive); s.MTU = 9000; return s }(), want: "mtu"},
		{name: "DRA in host mode", spec: func() Spec { s := specFor(ModeHost); s.DRA = true; return s }(), want: "host mode has no DRA path"},
		{name: "GPU class without DRA", spec: func() Spec { s := specFor(ModeExclusive); s.GPUDeviceClass = "gpu.nvidia.com"; return s }(), want: "gpuDeviceClass"},
		{name: "GPU class not a name", spec: func() Spec { s := draSpec(ModeExclusive); s.GPUDeviceClass = "GPU/x"; return s }(), want: "gpuDeviceClass"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Render(tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestParseSpec(t *testing.T) {
	s, err := ParseSpec([]byte("mode: shared\nname: t\npfNames: [ens8f0np0]\nsubnet: 192.168.2.0/24\nimage: i:1\nnodes: 4\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Mode != ModeShared || s.Nodes != 4 || s.PFNames[0] != "ens8f0np0" {
		t.Errorf("spec = %+v", s)
	}
	if _, err := ParseSpec([]byte("mode: shared\nnodse: 4\n")); err == nil || !strings.Contains(err.Error(), "nodse") {
		t.Errorf("unknown field: err = %v", err)
	}
}

func TestMultiRailLayout(t *testing.T) {
	s := specFor(ModeExclusive)
	s.PFNames = []string{"p0", "p1"}
	s.Subnet, s.Exclude, s.Subnets = "", nil, []string{"10.60.0.0/16", "10.61.0.0/16"}
	out := renderString(t, s)
	for _, want := range []string{
		`"resourceName": "sriov_rdma_0"`, `"resourceName": "sriov_rdma_1"`,
		"name: face-trainer-rdma-0", "name: face-trainer-rdma-1",
		`[{"interface":"net1","name":"face-trainer-rdma-0"},{"interface":"net2","name":"face-trainer-rdma-1"}]`,
		"rdmanet.io/sriov_rdma_0: \"1\"", "rdmanet.io/sriov_rdma_1: \"1\"", `"range": "10.61.0.0/16"`, "value: =net1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("multi-rail output lacks %q", want)
		}
	}
}

// TestDRAContent: the DRA path's claim layout (pairs as
// examples/dra/gpu-nic-aligned-x8.yaml), the pool-pinning classes, the NAD
// unchanged, and no device plugin limits in the Job.
func TestDRAContent(t *testing.T) {
	plain := renderString(t, specFor(ModeExclusive))
	out := renderString(t, draSpec(ModeExclusive))
	nad := func(s string) string {
		i := strings.Index(s, "kind: NetworkAttachmentDefinition")
		return s[i : i+strings.Index(s[i:], "---")]
	}
	if nad(plain) != nad(out) {
		t.Errorf("the NAD differs between the device plugin and the DRA path:\n%s\n%s", nad(plain), nad(out))
	}
	for _, want := range []string{
		"kind: DeviceClass", "name: sriov-rdma.rdmanet.io",
		`device.driver == "rdma.rdmanet.io"`, `device.attributes["k8s.cni.cncf.io"].resourceName == "rdmanet.io/sriov_rdma"`,
		"kind: ResourceClaimTemplate", "name: face-trainer-devices", "resourceClaimTemplateName: face-trainer-devices",
		"matchAttribute: resource.kubernetes.io/pcieRoot", "deviceClassName: gpu.nvidia.com", "count: 7",
		"k8s.v1.cni.cncf.io/resourceName: rdmanet.io/sriov_rdma", "IPC_LOCK", "value: =net1", "kind: ConfigMap",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("DRA output lacks %q", want)
		}
	}
	for _, bad := range []string{"rdmanet.io/sriov_rdma: \"1\"", "nvidia.com/gpu"} {
		if strings.Contains(out, bad) {
			t.Errorf("DRA output has device plugin limit %q", bad)
		}
	}
	x8 := renderString(t, draRails(8, 8))
	for i := range 8 {
		con := fmt.Sprintf("- matchAttribute: resource.kubernetes.io/pcieRoot\n        requests:\n        - gpu-%d\n        - nic-%d\n", i, i)
		if !strings.Contains(x8, con) {
			t.Errorf("8x8 output lacks the pair constraint %d:\n%s", i, con)
		}
		if !strings.Contains(x8, fmt.Sprintf("deviceClassName: sriov-rdma-%d.rdmanet.io", i)) {
			t.Errorf("8x8 output lacks rail %d's class", i)
		}
	}
	if strings.Contains(x8, "count:") || strings.Contains(x8, "name: gpus\n") {
		t.Error("8 rails for 8 GPUs: every request is one device of a pair")
	}
	sh := renderString(t, draSpec(ModeShared))
	if !strings.Contains(sh, `.kind == "shared"`) || !strings.Contains(sh, "name: hca-shared.rdmanet.io") {
		t.Errorf("shared DRA output lacks the shared pool class:\n%s", sh)
	}
}

func TestDeviceClassName(t *testing.T) {
	for _, tc := range []struct{ name, res, want string }{
		{name: "deploy/dra's example", res: "example.com/sriov_rdma", want: "sriov-rdma.example.com"},
		{name: "rail", res: "rdmanet.io/sriov_rdma_3", want: "sriov-rdma-3.rdmanet.io"},
		{name: "upper case and dots", res: "rdma/HCA.Shared", want: "hca-shared.rdma"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := DeviceClassName(tc.res); got != tc.want {
				t.Errorf("DeviceClassName(%q) = %q, want %q", tc.res, got, tc.want)
			}
		})
	}
}
