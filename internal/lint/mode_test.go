package lint

import (
	"strings"
	"testing"

	"github.com/rdmanet/rdmanet/internal/manifest"
)

func TestBaselinesHaveNothingAboveInfo(t *testing.T) {
	for _, tc := range []struct {
		name string
		docs []M
		mode string
	}{
		{name: "exclusive", docs: exclusiveSet(exclusiveWL()), mode: ModeExclusive},
		{name: "shared", docs: sharedSet(sharedWL()), mode: ModeShared},
		{name: "host", docs: hostSet(hostWL()), mode: ModeHost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := lintDocs(t, tc.docs)
			if len(res.Workloads) != 1 || res.Workloads[0].Mode != tc.mode {
				t.Fatalf("workloads = %+v, want one in mode %s", res.Workloads, tc.mode)
			}
			for _, f := range res.Findings {
				if f.Severity != Info {
					t.Errorf("unexpected %s %s: %s", f.Severity, f.Rule, f.Message)
				}
			}
		})
	}
}

func TestModeDecision(t *testing.T) {
	tcpJob := func(w *wlB) {
		w.ann = nil
		w.c().limits = M{"nvidia.com/gpu": "8"}
		w.c().requests = nil
		w.c().env = nil
		w.c().caps = nil
	}
	for _, tc := range []struct {
		name     string
		docs     []M
		mode     string
		evidence string // substring of some evidence line
	}{
		{name: "VF pool + sriov NAD", docs: exclusiveSet(exclusiveWL()), mode: ModeExclusive, evidence: "exclusive pool ConfigMap/kube-system/sriovdp-config"},
		{name: "shared pool + macvlan NAD", docs: sharedSet(sharedWL()), mode: ModeShared, evidence: "(macvlan)"},
		{name: "hostNetwork with RDMA settings", docs: hostSet(hostWL()), mode: ModeHost, evidence: "hostNetwork: true"},
		{name: "hostNetwork with IB disabled", docs: hostSet(with(hostWL, func(w *wlB) { w.c().setEnv("NCCL_IB_DISABLE", "1") })), mode: ModeTCP, evidence: "NCCL_IB_DISABLE=\"1\""},
		{name: "hostNetwork without any RDMA hint", docs: []M{with(hostWL, func(w *wlB) {
			w.c().env = nil
			w.c().caps = nil
			w.c().limits = nil
		}).obj()}, mode: ModeUnknown, evidence: "cannot tell"},
		{name: "plain GPU job", docs: []M{with(exclusiveWL, tcpJob).obj()}, mode: ModeTCP, evidence: "no RDMA resource"},
		{name: "IB disabled with VF", docs: exclusiveSet(with(exclusiveWL, func(w *wlB) { w.c().setEnv("NCCL_IB_DISABLE", "1") })), mode: ModeTCP},
		{name: "seed fingerprint: unknown NAD, NCCL_SOCKET_IFNAME on the inserted interface", docs: []M{with(exclusiveWL, func(w *wlB) {
			w.ann[manifest.NetworksAnnotation] = "sriov-rdma-net@eth1"
			w.c().limits = M{"example.com/rdma_a": "1"}
			w.c().requests = nil
			w.c().setEnv("NCCL_SOCKET_IFNAME", "eth1")
		}).obj()}, mode: ModeExclusive, evidence: "SR-IOV VF route"},
		{name: "unknown NAD, ifname on eth0", docs: []M{with(exclusiveWL, func(w *wlB) {
			w.ann[manifest.NetworksAnnotation] = "some-net@net1"
			w.c().limits = nil
			w.c().requests = nil
			w.c().setEnv("NCCL_SOCKET_IFNAME", "eth0")
		}).obj()}, mode: ModeUnknown},
		{name: "IPC_LOCK without a path", docs: []M{with(exclusiveWL, func(w *wlB) {
			tcpJob(w)
			w.c().caps = ipcLock()
		}).obj()}, mode: ModeUnknown, evidence: "no RDMA NIC"},
		{name: "VF and shared conflict", docs: []M{vfPool(), sharedPool(), exclusiveNAD(), with(exclusiveWL, func(w *wlB) {
			w.c().limits = M{sharedRes: "1"}
			w.c().requests = nil
		}).obj()}, mode: ModeUnknown, evidence: "conflicting"},
		{name: "TKE annotation with TKE VF resource", docs: []M{with(exclusiveWL, func(w *wlB) {
			w.ann = map[string]string{manifest.TKENetworksAnnotation: "tke-bridge,rdma-net@eth1"}
			w.c().limits = M{"tke.cloud.tencent.com/mlnx_sriov_rdma": "1"}
			w.c().requests = nil
			w.c().setEnv("NCCL_SOCKET_IFNAME", "eth1")
		}).obj()}, mode: ModeExclusive},
		{name: "TKE shared resource", docs: []M{with(exclusiveWL, func(w *wlB) {
			w.ann = map[string]string{manifest.TKENetworksAnnotation: "tke-bridge,rdma-net@eth1"}
			w.c().limits = M{"tke.cloud.tencent.com/tke-shared-rdma": "1"}
			w.c().requests = nil
		}).obj()}, mode: ModeShared},
		{name: "PyTorchJob templates", docs: exclusiveSet(with(exclusiveWL, func(w *wlB) { w.kind = "PyTorchJob" })), mode: ModeExclusive, evidence: "spec.pytorchReplicaSpecs.Master.template (Master)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := lintDocs(t, tc.docs)
			if len(res.Workloads) == 0 {
				t.Fatal("no workloads")
			}
			for _, w := range res.Workloads {
				if w.Mode != tc.mode {
					t.Errorf("%s/%s mode = %s, want %s; evidence:\n  %s", w.Kind, w.Name, w.Mode, tc.mode, strings.Join(w.Evidence, "\n  "))
				}
			}
			if tc.evidence != "" && !strings.Contains(strings.Join(res.Workloads[0].Evidence, "\n"), tc.evidence) {
				t.Errorf("evidence lacks %q:\n  %s", tc.evidence, strings.Join(res.Workloads[0].Evidence, "\n  "))
			}
		})
	}
}

func TestNCCLFilter(t *testing.T) {
	for _, tc := range []struct {
		spec, name string
		want       bool
	}{
		{"eth", "eth0", true},
		{"eth", "net1", false},
		{"=eth", "eth0", false},
		{"=net1", "net1", true},
		{"^docker,lo", "net1", true},
		{"^docker,lo", "lo", false},
		{"^=eth0", "eth0", false},
		{"^=eth0", "eth01", true},
		{"mlx5_0:1,mlx5_1:1", "mlx5_1", true},
		{"net1, net2", "net2", true},
	} {
		if got := parseFilter(tc.spec).selects(tc.name); got != tc.want {
			t.Errorf("filter %q selects %q = %v, want %v", tc.spec, tc.name, got, tc.want)
		}
	}
}
