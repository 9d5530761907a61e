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

func TestEnvSources(t *testing.T) {
	ncclCM := M{"apiVersion": "v1", "kind": "ConfigMap", "metadata": M{"name": "nccl-env", "namespace": ns}, "data": M{"NCCL_IB_GID_INDEX": "3", "NCCL_SOCKET_IFNAME": "=net1"}}
	for _, tc := range []struct {
		name  string
		docs  []M
		rule  string
		field string
		mode  string
	}{
		{name: "envFrom ConfigMap", rule: "RDMA070", field: "envFrom[0] (ConfigMap nccl-env data[NCCL_IB_GID_INDEX])", docs: func() []M {
			o := exclusiveWL().obj()
			c := o["spec"].(M)["template"].(M)["spec"].(M)["containers"].([]any)[0].(M)
			c["envFrom"] = []any{M{"configMapRef": M{"name": "nccl-env"}}}
			return append(exclusiveSet(exclusiveWL())[:3], ncclCM, o)
		}()},
		{name: "configMapKeyRef", rule: "RDMA070", field: "env[NCCL_IB_GID_INDEX] (ConfigMap nccl-env data[NCCL_IB_GID_INDEX])", docs: func() []M {
			o := exclusiveWL().obj()
			c := o["spec"].(M)["template"].(M)["spec"].(M)["containers"].([]any)[0].(M)
			c["env"] = append(c["env"].([]any), M{"name": "NCCL_IB_GID_INDEX", "valueFrom": M{"configMapKeyRef": M{"name": "nccl-env", "key": "NCCL_IB_GID_INDEX"}}})
			return append(exclusiveSet(exclusiveWL())[:3], ncclCM, o)
		}()},
		{name: "export in the command script", rule: "RDMA071", field: "command[2] (NCCL_IB_DISABLE=1 in the script)", mode: ModeTCP, docs: func() []M {
			o := exclusiveWL().obj()
			c := o["spec"].(M)["template"].(M)["spec"].(M)["containers"].([]any)[0].(M)
			c["command"] = []any{"/bin/bash", "-c", "export NCCL_IB_DISABLE=1\nexport NCCL_DEBUG=INFO\nexec torchrun --master-port=\"${MASTER_PORT}\" train.py"}
			return append(exclusiveSet(exclusiveWL())[:3], o)
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := lintDocs(t, tc.docs)
			found := false
			for _, f := range res.Findings {
				if f.Rule == tc.rule && strings.HasSuffix(f.Field, tc.field) {
					found = true
				}
			}
			if !found {
				t.Errorf("want %s at ...%s:\n%s", tc.rule, tc.field, dump(res))
			}
			if tc.mode != "" && res.Workloads[0].Mode != tc.mode {
				t.Errorf("mode %s, want %s", res.Workloads[0].Mode, tc.mode)
			}
		})
	}
}

func TestParseMasterAddr(t *testing.T) {
	in := &inputIndex{}
	w := &workload{t: &manifest.PodTemplate{}, obj: &manifest.Object{Kind: "StatefulSet", Name: "trainer", Data: M{"spec": M{"serviceName": "trainer"}}}}
	w.t.Owner = w.obj
	for _, tc := range []struct {
		v, host, svc, ns string
		ok               bool
	}{
		{v: "trainer-0.trainer", host: "trainer-0", svc: "trainer", ns: "ai", ok: true},
		{v: "rdzv.other", svc: "rdzv", ns: "other", ok: true},
		{v: "rdzv", svc: "rdzv", ns: "ai", ok: true},
		{v: "trainer-0.trainer.ai.svc.cluster.local", host: "trainer-0", svc: "trainer", ns: "ai", ok: true},
		{v: "10.0.0.1"},
		{v: "$(POD_IP)"},
		{v: "a.b.c.d.example.com"},
	} {
		host, svc, ns, ok := in.parseMasterAddr(w, tc.v, "ai")
		if host != tc.host || svc != tc.svc || ns != tc.ns || ok != tc.ok {
			t.Errorf("%q → (%q, %q, %q, %v), want (%q, %q, %q, %v)", tc.v, host, svc, ns, ok, tc.host, tc.svc, tc.ns, tc.ok)
		}
	}
}

func TestDegenerateTemplates(t *testing.T) {
	// Templates with no containers or empty fields must not crash any rule.
	for _, doc := range []M{
		{"apiVersion": "v1", "kind": "Pod", "metadata": M{"name": "p", "annotations": M{manifest.NetworksAnnotation: "x@net1"}}, "spec": M{}},
		{"apiVersion": "v1", "kind": "Pod", "metadata": M{"name": "p"}, "spec": M{"hostNetwork": true, "containers": []any{}}},
		{"apiVersion": "batch/v1", "kind": "Job", "metadata": M{"name": "j"}, "spec": M{"parallelism": 3, "template": M{"spec": M{"hostNetwork": true, "containers": []any{M{"name": "c", "env": []any{M{"name": "NCCL_SOCKET_IFNAME", "value": "net1"}, M{"name": "MASTER_ADDR", "value": "j-0.svc"}}}}}}}},
	} {
		res := lintDocs(t, []M{vfPool(), exclusiveNAD(), doc})
		if len(res.Workloads) != 1 {
			t.Errorf("workloads %+v", res.Workloads)
		}
	}
}
