package sim

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/rdmanet/rdmanet/internal/netops"
)

func TestOptionsDefaults(t *testing.T) {
	tests := []struct {
		name string
		o    Options
		want string // error substring; "" = valid
	}{
		{name: "defaults", o: Options{}},
		{name: "too many pods", o: Options{Pods: MaxPods + 1}, want: "rdmaHcaMax 63"},
		{name: "negative pods", o: Options{Pods: -1}, want: "must be 1-31"},
		{name: "unknown mode", o: Options{Modes: []string{"sriov"}}, want: `mode "sriov"`},
		{name: "mode twice", o: Options{Modes: []string{ModeHost, ModeHost}}, want: "given twice"},
		{name: "keep with two rounds", o: Options{Keep: true, Cycles: 2}, want: "one round only"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.defaults()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if tc.o.Pods != DefaultPods || !slices.Equal(tc.o.Modes, DefaultModes) || tc.o.WorkDir != DefaultWorkDir || tc.o.NetnsPrefix != DefaultPrefix || tc.o.Cycles != 1 {
					t.Fatalf("defaults: %+v", tc.o)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestManifestsPods(t *testing.T) {
	m, err := LoadManifests()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(m.NADs), `"type": "whereabouts"`) || !strings.Contains(string(m.NADs), `"master": "ens8f0np0"`) {
		t.Fatalf("NADs:\n%s", m.NADs)
	}
	tests := []struct {
		name, mode, wantName, wantNS, wantResource string
		hostNetwork                                bool
		wantAnnotation                             string
	}{
		{name: "exclusive from the seed Job", mode: ModeExclusive, wantName: "face-trainer-3", wantNS: "ai-training", wantResource: ExclusiveResource, wantAnnotation: "face-training-rdma"},
		{name: "shared from the macvlan Job", mode: ModeShared, wantName: "shared-trainer-3", wantNS: "ai-training", wantResource: SharedResource, wantAnnotation: "rdmashared-net"},
		{name: "host from the seed hostNetwork pod", mode: ModeHost, wantName: "my-training-job-3", wantNS: "default", wantResource: SharedResource, hostNetwork: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := m.Pod(tc.mode, 3, "n1", "uid-1")
			if err != nil {
				t.Fatal(err)
			}
			if p.Name != tc.wantName || p.Namespace != tc.wantNS || p.Spec.NodeName != "n1" || string(p.UID) != "uid-1" || p.Spec.HostNetwork != tc.hostNetwork {
				t.Fatalf("pod %s/%s node %s uid %s hostNetwork %v", p.Namespace, p.Name, p.Spec.NodeName, p.UID, p.Spec.HostNetwork)
			}
			if q, ok := p.Spec.Containers[0].Resources.Limits[corev1ResourceName(tc.wantResource)]; !ok || q.Value() != 1 {
				t.Fatalf("limits %v lack %s: 1", p.Spec.Containers[0].Resources.Limits, tc.wantResource)
			}
			if !strings.Contains(p.Annotations["k8s.v1.cni.cncf.io/networks"], tc.wantAnnotation) {
				t.Fatalf("annotations %v", p.Annotations)
			}
			if _, err := podYAML(p); err != nil {
				t.Fatal(err)
			}
		})
	}
	if _, err := m.Pod("tcp", 0, "n1", "u"); err == nil {
		t.Fatal("unknown mode accepted")
	}
}

func TestHostStateDiff(t *testing.T) {
	base := func() HostState {
		return HostState{Nodes: map[string]NodeState{"n": {
			Links: []LinkState{{Name: "enp65s0f0v0", Kind: "veth", MAC: "02:00:00:41:00:02", MTU: 1500}},
			Files: map[string]string{}, VFs: map[string]string{"pf/0": "default"}, RDMA: map[string]string{"mlx5_2": "home"},
		}}}
	}
	tests := []struct {
		name   string
		mutate func(s *NodeState)
		want   string
	}{
		{name: "equal", mutate: func(*NodeState) {}},
		{name: "link gone", mutate: func(s *NodeState) { s.Links = nil }, want: "link enp65s0f0v0 is gone"},
		{name: "link renamed", mutate: func(s *NodeState) { s.Links[0].Name = "net1" }, want: "new link net1"},
		{name: "MAC changed", mutate: func(s *NodeState) { s.Links[0].MAC = "02:00:00:00:00:09" }, want: "link enp65s0f0v0 changed"},
		{name: "address left", mutate: func(s *NodeState) { s.Links[0].Addrs = []string{"10.60.1.2/16"} }, want: "10.60.1.2/16"},
		{name: "cache left", mutate: func(s *NodeState) { s.Files["cni-state/sriov/0000:41:00.2.json"] = "sha256:x" }, want: "state file cni-state/sriov/0000:41:00.2.json left behind"},
		{name: "VF setting kept", mutate: func(s *NodeState) { s.VFs["pf/0"] = "vlan 200" }, want: "VF pf/0 changed"},
		{name: "RDMA device away", mutate: func(s *NodeState) { s.RDMA["mlx5_2"] = "moved" }, want: "RDMA device mlx5_2 changed"},
		{name: "GUID pool allocation left", mutate: func(s *NodeState) { s.Files["guid-pool/blocks.json"] = "1 allocations" }, want: "state file guid-pool/blocks.json left behind (1 allocations)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			after := base()
			s := after.Nodes["n"]
			tc.mutate(&s)
			after.Nodes["n"] = s
			diff := base().Diff(after)
			if tc.want == "" {
				if len(diff) != 0 {
					t.Fatalf("diff %v, want none", diff)
				}
				return
			}
			if !strings.Contains(strings.Join(diff, "\n"), tc.want) {
				t.Fatalf("diff %v lacks %q", diff, tc.want)
			}
		})
	}
}

func TestNormaliseFile(t *testing.T) {
	tests := []struct {
		name, rel, content, want string
	}{
		{name: "lock file ignored", rel: "ipam/abc.lock", content: "", want: ""},
		{name: "host-local cursor ignored", rel: "host-local/k8s-pod-network/last_reserved_ip.0", content: "10.244.1.3", want: ""},
		{name: "empty claimed block counts as none", rel: "ipam/blocks.json", content: `{"blocks":[{"spec":{"allocations":{}}}]}`, want: ""},
		{name: "allocation counted", rel: "ipam/blocks.json", content: `{"blocks":[{"spec":{"allocations":{"10.60.1.0":{}}}}]}`, want: "1 allocations"},
		{name: "cache digested", rel: "rdmanet/cache/c1.json", content: "{}", want: "sha256:"},
		{name: "gateway reservation is not a pod's allocation", rel: "ipam/62638c8179-s.blocks.json",
			content: `{"blocks":[{"spec":{"allocations":{"192.168.2.1":{"containerID":"","reserved":"gateway"}}}}]}`, want: ""},
		{name: "pod allocation beside the gateway counted", rel: "ipam/blocks.json",
			content: `{"blocks":[{"spec":{"allocations":{"192.168.2.1":{"reserved":"gateway"},"192.168.2.17":{"containerID":"c1"}}}}]}`, want: "1 allocations"},
		{name: "gateway marker ignored", rel: "ipam/62638c8179-s.gateway", content: "192.168.2.1", want: ""},
		{name: "GUID pool block without allocations counts as none", rel: "guid-pool/blocks.json", content: `{"blocks":[{"spec":{"allocations":{}}}]}`, want: ""},
		{name: "GUID pool allocation counted", rel: "guid-pool/blocks.json",
			content: `{"blocks":[{"spec":{"allocations":{"200::6000":{"containerID":"c1","ifName":"net1"}}}}]}`, want: "1 allocations"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := normaliseFile(tc.rel, []byte(tc.content))
			if (tc.want == "" && got != "") || !strings.HasPrefix(got, tc.want) {
				t.Fatalf("normaliseFile(%s) = %q, want %q", tc.rel, got, tc.want)
			}
		})
	}
}

func TestBusyErrorNamesTheFirstRun(t *testing.T) {
	tests := []struct {
		name string
		st   RunState
		want []string
	}{
		{name: "kept", st: RunState{PID: 4242, Kept: true, Pods: make([]keptPod, 3), Layout: layout{Prefix: "rdmademo"}},
			want: []string{"kept up (--keep)", "pid 4242", "3 pods", "rdmademo-*", "kubectl rdma demo --cleanup"}},
		{name: "running", st: RunState{PID: os.Getpid(), Layout: layout{Prefix: "rdmademo"}},
			want: []string{"is running", "wait for it to finish"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.st.Started = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
			err := error(&BusyError{WorkDir: "/run/rdmanet-demo", State: tc.st})
			var be *BusyError
			if !errors.As(err, &be) {
				t.Fatal("not a BusyError")
			}
			for _, w := range append(tc.want, "/run/rdmanet-demo", "2026-01-02T03:04:05Z") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
		})
	}
}

func TestCheckBinariesNamesWhatIsMissing(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/rdmanet", []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := CheckBinaries(dir)
	if err == nil || strings.Contains(err.Error(), "rdmanet,") || !strings.Contains(err.Error(), "rdmanet-direct") || !strings.Contains(err.Error(), "make demo-bin") {
		t.Fatalf("error %v", err)
	}
}

// TestCheckBinariesRefusesProductionBuilds: the demo drives sriov and rdma
// through RDMANET_NETOPS=record, which only -tags rdmanet_testhooks builds
// honour, so a bin dir of production builds is refused before anything is
// set up, naming the binaries and the fix.
func TestCheckBinariesRefusesProductionBuilds(t *testing.T) {
	src := t.TempDir()
	for name, body := range map[string]string{"go.mod": "module example.com/fakeplugin\n\ngo 1.22\n", "main.go": "package main\n\nfunc main() {}\n"} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	build := func(t *testing.T, out string, tags ...string) {
		t.Helper()
		args := []string{"build", "-o", out}
		if len(tags) > 0 {
			args = append(args, "-tags", strings.Join(tags, ","))
		}
		cmd := exec.Command("go", append(args, ".")...)
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-buildvcs=false")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, b)
		}
	}
	prodBin, tagBin := filepath.Join(t.TempDir(), "prod"), filepath.Join(t.TempDir(), "tagged")
	build(t, prodBin)
	build(t, tagBin, "other", netops.TestHooksTag)
	tests := []struct {
		name    string
		from    map[string]string // binary -> built file ("" = a shell script)
		wantErr []string
	}{
		{name: "test-switch builds", from: map[string]string{"sriov-direct": tagBin, "rdma-direct": tagBin, "ib-sriov": tagBin, "ipoib": tagBin}},
		{name: "production sriov and rdma", from: map[string]string{"sriov-direct": prodBin, "rdma-direct": prodBin},
			wantErr: []string{"sriov-direct (built without -tags rdmanet_testhooks)", "rdma-direct (built without", "RDMANET_NETOPS=record", "make demo-bin", "bin/testhooks"}},
		{name: "production rdma only", from: map[string]string{"sriov-direct": tagBin, "rdma-direct": prodBin, "ib-sriov": tagBin, "ipoib": tagBin}, wantErr: []string{"rdma-direct (built without"}},
		{name: "not a Go binary", from: map[string]string{"sriov-direct": "", "rdma-direct": tagBin, "ib-sriov": tagBin, "ipoib": tagBin}, wantErr: []string{"sriov-direct (no Go build info"}},
		{name: "production InfiniBand plugins", from: map[string]string{"sriov-direct": tagBin, "rdma-direct": tagBin, "ib-sriov": prodBin, "ipoib": prodBin},
			wantErr: []string{"ib-sriov (built without -tags rdmanet_testhooks)", "ipoib (built without"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, b := range RequiredBinaries {
				body := []byte("#!/bin/sh\n")
				if f := tc.from[b]; f != "" {
					var err error
					if body, err = os.ReadFile(f); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.WriteFile(filepath.Join(dir, b), body, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			err := CheckBinaries(dir)
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestNCCLFitsTheMode(t *testing.T) {
	tests := []struct {
		name, mode, ifname, hca string
		wantSocket, wantHCA     string
	}{
		{name: "exclusive: one RDMA device in the pod, no HCA pin", mode: ModeExclusive, ifname: "net1", hca: "mlx5_2", wantSocket: "=net1"},
		{name: "shared: pin the HCA", mode: ModeShared, ifname: "net1", hca: "mlx5_1", wantSocket: "=net1", wantHCA: "=mlx5_1"},
		{name: "host: host NIC and HCA", mode: ModeHost, ifname: "ens8f0np0", hca: "mlx5_1", wantSocket: "=ens8f0np0", wantHCA: "=mlx5_1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]string{}
			for _, e := range ncclFor(tc.mode, tc.ifname, tc.hca) {
				got[e.Name] = e.Value
				if e.Why == "" {
					t.Errorf("%s has no reason", e.Name)
				}
			}
			if got["NCCL_SOCKET_IFNAME"] != tc.wantSocket || got["NCCL_IB_HCA"] != tc.wantHCA {
				t.Fatalf("env %v", got)
			}
		})
	}
}

func corev1ResourceName(s string) corev1.ResourceName { return corev1.ResourceName(s) }
